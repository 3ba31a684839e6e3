"""The inspector's words: the opening thought and what each kind of zoom window showed.

Each sentence quotes the measured numbers; the task modules pick which sentence a zoom gets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from agent.policies.rules.features import (
    below_noise,
    c2_strength,
    cool_type,
    depth_points,
    finite,
    in_emission,
    no_line_text,
    series_resolved,
    unanchored,
    unanchored_text,
)


@dataclass(frozen=True)
class Zoom:
    """One window of a task's zoom plan: where, what it is called, the measurements its
    thought reports, and the sentence that says what it showed."""

    window: tuple[float, float]  # rest-frame vacuum Angstrom
    label: str
    keys: list[str]
    describe: Callable[[dict[str, float]], str]


def global_thought(m: dict[str, float], hypothesis: str, redshift=None) -> str:
    """The first thought: what the whole spectrum suggests, its redshift, then the plan."""
    br, ct, c2 = m.get("b_r"), cool_type(m), c2_strength(m)
    parts = [f"The spectrum covers {m['wave_lo']:.0f}-{m['wave_hi']:.0f} Å at SNR ~{m['snr']:.0f}."]
    if finite(m.get("snr")) and m["snr"] < 8:
        parts.append(
            "That is noisy: lines weaker than a few Å of EW will not be trusted either way."
        )
    if finite(br):
        if br > 0.15:
            parts.append(f"The continuum is blue (log F4600/F6100 = {br:.2f}): a hot object.")
        elif br < -0.25:
            parts.append(f"The continuum is red (log F4600/F6100 = {br:.2f}): a cool object.")
        else:
            parts.append(f"The continuum is moderate in colour (log F4600/F6100 = {br:.2f}).")
    # Molecular bands are read at rest: at an extragalactic redshift the same dips are other
    # features and the plot shows no bands; TiO needs a cool star, not a blue continuum.
    at_rest = not getattr(redshift, "extragalactic", False)
    if at_rest and not (finite(br) and br > 0.15) and finite(ct) and ct > 0.35:
        parts.append("Saw-tooth bands in the red suggest TiO.")
    if at_rest and finite(c2) and c2 > 0.12:
        parts.append("Sharp band edges in the green suggest C2.")
    if redshift is not None:
        parts.append(redshift.describe())
    return " ".join(parts + [hypothesis])


def noisy(m: dict[str, float], name: str) -> bool:
    """A line whose EW is under 3 sigma of the continuum noise tells nothing either way."""
    sig = m.get(f"{name}_sig")
    return not finite(sig) or sig < 3.0


def unmeasured(m: dict[str, float], name: str, lbl: str) -> str:
    """Why a feature has no numbers: the data cannot support it, or it is not covered."""
    why = getattr(m, "unreliable", {}).get(name)
    if why:
        return f"{lbl} cannot be trusted here ({why}), so I do not use it."
    return f"{lbl} could not be measured here (outside the coverage or in a gap)."


def say_balmer_wd(m: dict[str, float], name: str, lbl: str) -> str:
    f, d, w = (m.get(f"{name}_w_{k}") for k in ("fwhm", "depth", "ew"))
    if not (finite(f) and finite(d) and finite(w)):
        if below_noise(m, f"{name}_w"):
            # Looked at and found empty (a fit of depth ~0 has no width): a measurement,
            # which a reading of "no hydrogen" quotes, not a gap in the data.
            return (
                f"{no_line_text(m, f'{name}_w', lbl)}: no hydrogen to speak of, so not a "
                "DA; a DB, DC, DQ or DZ white dwarf or a hot O/sdO star remain."
            )
        return unmeasured(m, f"{name}_w", lbl)
    if w <= 0:
        return (
            f"{lbl}: no absorption (net EW {w:+.0f} Å over the profile window), so no "
            "pressure-broadened hydrogen line here."
        )
    head = f"{lbl} in absorption, FWHM {f:.0f} Å, depth {d:.2f}, EW {w:.0f} Å"
    if unanchored(m, f"{name}_w"):
        return (
            f"{unanchored_text(m, f'{name}_w', lbl)}: a broad depression of the continuum "
            "(metal-line blanketing or a flux-calibration wave), so this line does not decide."
        )
    if below_noise(m, f"{name}_w"):
        return (
            f"{no_line_text(m, f'{name}_w', lbl)}: no hydrogen to speak of, so not a DA; "
            "a DB, DC, DQ or DZ white dwarf or a hot O/sdO star remain."
        )
    if d < 0.1:
        return (
            f"{lbl} is barely there (depth {d:.2f}, EW {w:.0f} Å): no hydrogen to speak of, so not a DA; "
            "a DB, DC, DQ or DZ white dwarf or a hot O/sdO star remain."
        )
    if f >= 35:
        return (
            f"{head}: pressure-broadened, as in a DA white dwarf; an A/B star or hot subdwarf "
            "would show a line under ~25 Å wide."
        )
    if f < 28 and d >= 0.2:
        return (
            f"{head}: narrow, as in an A/B star or a hot subdwarf, not the pressure-broadened "
            "line of a DA white dwarf."
        )
    if f < 28:
        return (
            f"{head}: weak and narrow, a hot subdwarf's or B star's line or noise, not the "
            "pressure-broadened line of a DA white dwarf."
        )
    return f"{head}: between a main-sequence star's and a white dwarf's width, so this line alone does not decide."


def say_emission(m: dict[str, float], name: str, lbl: str) -> str:
    ew, pk, fw = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm"))
    if not finite(ew):
        return unmeasured(m, name, lbl)
    if noisy(m, name):
        return f"{lbl}: nothing above the noise (EW {ew:+.1f} Å, under 3 sigma), so it neither supports nor rules out a disc."
    if in_emission(m, name):
        txt = (
            f"{lbl} in emission, EW {ew:.1f} Å, peak {pk:.2f} above the continuum, FWHM {fw:.0f} Å"
        )
        if fw >= 12.0:
            return (
                f"{txt}: broad, as from an accretion disc; a Be star or an active M dwarf "
                "gives narrower emission (FWHM < 12 Å at this resolution)."
            )
        return (
            f"{txt}: narrow, as from a Be star's envelope or an M dwarf's chromosphere "
            "rather than a disc."
        )
    if ew > 0:
        return (
            f"{lbl} in absorption, EW {ew:.1f} Å: a stellar photosphere, against a CV's emission."
        )
    return f"{lbl}: weak net emission (EW {ew:.1f} Å) without a clear peak; inconclusive."


def say_head(m: dict[str, float], key: str, lbl: str, meaning: str) -> str:
    j = m.get(key)
    if not finite(j):
        why = getattr(m, "unreliable", {}).get(key)
        if why:
            return f"The {lbl} band head cannot be trusted here ({why}), so I do not use it."
        return f"The {lbl} band head falls outside the coverage (or in a gap), so it cannot be checked."
    d = depth_points(j)
    if j > 0.15:
        return f"{lbl} band-head depth {d:.2f}: the band is clearly there; {meaning}."
    if j > 0.06:
        return f"{lbl} band-head depth {d:.2f}: a weak band, suggestive but not decisive."
    if j < -0.1:
        return (
            f"no {lbl} band: the flux steps the other way across the head (by {math.exp(-j):.2f}x), "
            "as a band degrading to the opposite side (TiO) does."
        )
    return f"{lbl} band-head depth {max(d, 0.0):.2f}: no band at this head."


def say_tio(m: dict[str, float], purpose: str) -> str:
    t5, j = m.get("tio5"), m.get("tio_7054")
    if not (finite(t5) or finite(j)):
        return "TiO 7054 falls outside the coverage or in a masked gap, so the M-star check cannot be made."
    parts = []
    if finite(j):
        parts.append(f"TiO 7054 band-head depth {depth_points(j):.2f}")
    if finite(t5):
        parts.append(f"TiO5 index {t5:.2f}")
    strong = (finite(t5) and t5 < 0.82) or (finite(j) and j > 0.12)
    verdict = {
        "cv": (
            "an M-type continuum: any Balmer emission here would be an active M dwarf's chromosphere "
            "unless it is broad",
            "no M-dwarf continuum, so an active M dwarf does not explain the emission",
        ),
        "carbon": (
            "oxygen-rich TiO bands: an M or S star, not a carbon star (carbon locks up the oxygen in CO)",
            "no TiO, as a carbon star requires",
        ),
        "s_type": (
            "TiO as strong as an M giant's; ZrO must stand above what this TiO predicts",
            "little TiO, which a cool S star would still show",
        ),
        "m_giant": ("an M-type star; gravity decides giant or dwarf", "no TiO: not an M star"),
    }[purpose]
    return ", ".join(parts) + ": " + (verdict[0] if strong else verdict[1]) + "."


def say_cat(m: dict[str, float]) -> str:
    cat = [m.get(k) for k in ("cat8544_ew", "cat8664_ew") if finite(m.get(k))]
    if not cat:
        return "The Ca II triplet falls outside the coverage."
    s = float(sum(cat))
    if s > 7.0:
        return f"Ca II 8542+8662 EW {s:.1f} Å: strong, as in giants."
    return f"Ca II 8542+8662 EW {s:.1f} Å: not strong enough to argue for a giant on its own."


def say_high_balmer(m: dict[str, float]) -> str:
    h9, cak, cakd = m.get("h9_contrast"), m.get("cak_ew"), m.get("cak_depth")
    hs, hs_sig = m.get("hser_contrast"), m.get("hser_sig")
    parts = []
    resolved = series_resolved(m)
    if resolved:
        parts.append(
            f"H10, H11 and H12 stand apart (contrast {hs:.2f} against the flux between them, "
            f"{hs_sig:.0f} sigma): the series is resolved to H12, as only a gravity lower "
            "than a white dwarf's allows"
        )
    elif finite(hs) and finite(hs_sig):
        parts.append(f"H10-H12 contrast {hs:.2f} ({hs_sig:.1f} sigma): not clearly apart")
    if finite(h9):
        if h9 > 0.3:
            parts.append(
                f"H9 stands out sharply (contrast {h9:.2f} against its neighbours): the high "
                "series is resolved as in an A/B star"
            )
        elif h9 < 0.2 and not resolved:
            parts.append(
                f"H8-H10 blend together (H9 contrast {h9:.2f}), as pressure broadening in a white dwarf does"
            )
        else:
            parts.append(f"H9 contrast {h9:.2f}: partly resolved, inconclusive")
    if finite(cak):
        if cak > 1.5 and finite(cakd) and cakd > 0.15:
            parts.append(
                f"Ca II K in absorption, EW {cak:.1f} Å: an A star beside Balmer lines, a DZ white "
                "dwarf on a featureless hot continuum"
            )
        else:
            parts.append(f"Ca II K weak (EW {cak:.1f} Å): no metal line of an A star")
    if not parts:
        return "H8-H12 and Ca II K fall outside the coverage (the blue end is missing)."
    return "; ".join(parts) + "."


def say_he(m: dict[str, float], name: str, lbl: str, task: str) -> str:
    ew = m.get(f"{name}_ew")
    if not finite(ew):
        if getattr(m, "unreliable", {}).get(name):
            return unmeasured(m, name, lbl)
        return f"{lbl} falls outside the coverage (or in a gap)."
    if task == "cv":
        return say_emission(m, name, lbl)
    if noisy(m, name):
        return f"{lbl}: nothing above the noise (EW {ew:+.1f} Å), so no helium lines show here."
    if ew > 1.0:
        return (
            f"{lbl} in absorption, EW {ew:.1f} Å: helium, as in a DB white dwarf (if Balmer lines are "
            "absent) or a hot B/sdO star (if narrow Balmer lines are present)."
        )
    return f"{lbl} EW {ew:.1f} Å: weak at most."


def say_lao(m: dict[str, float]) -> str:
    lao = m.get("lao_7403")
    if not finite(lao):
        return "LaO 7403 falls outside the coverage (or in a gap), so that S-star check is unavailable."
    if lao > 0.08:
        return f"LaO 7403 band-head depth {depth_points(lao):.2f}: LaO, seen only in S stars."
    return f"LaO 7403 band-head depth {depth_points(lao):.2f}: no LaO, as in an ordinary M giant (weak MS stars lack it too)."
