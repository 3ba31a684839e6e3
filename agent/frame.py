"""The frame a candidate is read in: the survey pipeline's redshift, unless the data refute it.

Every zoom window, measurement and plot refers to the rest frame `Spectrum.redshift` sets.
Survey pipelines now and then fit a star with a quasar or galaxy template and report a z of
1 or 2 (white dwarfs and hot stars are the usual victims). Read at that z, a white dwarf's
Balmer lines fall outside every window and the candidate is lost as "extragalactic".

`checked` tests the pipeline's value against the spectrum itself before anything is read:
a redshift beyond a star's radial velocity stands when a galaxy or quasar template
cross-correlates at that z (`agent.xcorr`) or emission lines fit it (`agent.redshift`). When
neither does and a star at rest fits at least half as well as any extragalactic match, the
value is set aside: the spectrum is read at rest, and the pipeline's value and the reason are
kept in `meta.extra` ("pipeline_z", "pipeline_z_note") for the agent's thought and the app.

Readers call it (`agent.formats.read_file`), so the runner, the app and the exporters all see
the one frame.
"""

from __future__ import annotations

import logging

from agent.spectrum import Spectrum

log = logging.getLogger(__name__)

# A galaxy or quasar template must peak within this of the pipeline's z, (1 + z) scaled,
# with at least this correlation, to confirm it. On the benchmark's tune split real quasars
# at their z reach 0.36-0.87, and stars given a wrong z reach 0.00-0.09 (one 0.40).
CONFIRM_DZ = 0.01
CONFIRM_HEIGHT = 0.3
# ... and a star at rest must fit at least this share of the best extragalactic match
# (anywhere), and at all, to refute it: where nothing fits, the pipeline's word stands.
STAR_SHARE = 0.5
STAR_MIN_HEIGHT = 0.08


def refutation(spectrum: Spectrum) -> str | None:
    """Why the pipeline's extragalactic z does not fit this spectrum, or None if it stands."""
    from agent.measure import arrays_of
    from agent.redshift import STELLAR_Z, from_emission_lines
    from agent.xcorr import correlate

    z = float(spectrum.redshift)
    if abs(z) < STELLAR_Z:
        return None
    observed = arrays_of(spectrum.replace(redshift=0.0))
    peaks = correlate(observed)
    if not peaks:
        return None  # too little data to judge: keep the pipeline's value
    tol = CONFIRM_DZ * (1.0 + abs(z))
    far = [p for p in peaks if p.kind != "star"]
    if any(abs(p.z - z) <= tol and p.height >= CONFIRM_HEIGHT for p in far):
        return None
    lines = from_emission_lines(observed)
    if lines.quality in ("medium", "high") and abs(lines.z - z) <= tol:
        return None
    stars = [p for p in peaks if p.kind == "star"]
    if not stars:
        return None
    star = max(stars, key=lambda p: p.height)
    best_far = max((p.height for p in far), default=0.0)
    if star.height < max(STAR_MIN_HEIGHT, STAR_SHARE * best_far):
        return None
    return (
        f"no quasar or galaxy template and no emission line fits z = {z:.3f}, while a star "
        f"at rest does ({star.template} template, correlation {star.height:.2f})"
    )


def checked(spectrum: Spectrum) -> Spectrum:
    """`spectrum`, read at rest where its pipeline redshift is refuted (see `refutation`)."""
    try:
        why = refutation(spectrum)
    except Exception:  # a check that cannot run must not lose the file: the pipeline's z stands
        log.warning("pipeline redshift of %s not checked", spectrum.meta.source, exc_info=True)
        return spectrum
    if why is None:
        return spectrum
    from agent.redshift import at_rest

    return at_rest(spectrum, why)
