"""The redshift step: the survey pipeline's value where the file has one, else an estimate.

Stellar candidates sit at z ~ 0 (a radial velocity of a few hundred km/s at most); a
quasar or galaxy that reached a stellar candidate list was usually fitted with a star
template, so the pipeline's z ~ 0 says nothing about it. The estimate therefore also runs
when the pipeline value is stellar: it looks for emission bumps in the spectrum and
matches them, as one redshift, to the lines a quasar or an emission-line galaxy shows
(Ly-a, C IV, C III], Mg II, [O II], the Balmer lines, [O III]). Two or more lines at one
z > 0.03 mark the spectrum as extragalactic. Where no emission lines fit (an absorption-line
galaxy, a quasar whose lines are weak), the spectrum is cross-correlated against the built-in
templates (`agent.xcorr`, Tonry & Davis 1979): a galaxy or quasar template that beats every
match at rest by a clear margin gives the redshift, its quality from the Tonry & Davis r.

`estimate` returns a `Redshift` (value, quality, source, the lines that fixed it);
`to_measurements` / `from_measurements` carry it through a step's numbers so the
trajectory record holds it (`Trajectory.redshift`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace

import numpy as np

from agent.measure import Arrays, arrays_of
from agent.spectrum import Spectrum
from agent.units import C_KMS
from agent.xcorr import correlate

# Vacuum rest wavelengths (Angstrom) of the lines a quasar or galaxy spectrum is read by.
QSO_LINES: dict[str, float] = {
    "Ly-a 1216": 1215.67,
    "C IV 1549": 1549.06,
    "C III] 1909": 1908.73,
    "Mg II 2800": 2799.12,
    "[O II] 3727": 3728.48,
    "H-gamma": 4341.69,
    "H-beta": 4862.68,
    "[O III] 5007": 5008.24,
    "H-alpha": 6564.61,
}

# Emission lines of stars at rest (CVs, Be stars, active M dwarfs): Balmer, He I, He II, Ca II.
STELLAR_EMISSION = (
    6564.61,
    4862.68,
    4341.69,
    4102.89,
    5877.25,
    6679.99,
    4687.02,
    3934.78,
    3969.59,
    7067.14,
)

STELLAR_Z = 0.005  # |z| below this is a star's radial velocity (1500 km/s)
MIN_EXTRAGALACTIC_Z = 0.03  # emission-line solutions below this are left to the stellar lines
_BIN = 8.0  # Angstrom: broad quasar lines span many bins, a stellar metal line does not
_MEDIAN_BINS = 51  # running-median continuum over ~400 A, wider than any broad line

QUALITIES = ("none", "low", "medium", "high", "pipeline")
# Appended only: trajectories store a source by its index here.
SOURCES = ("none", "emission lines", "pipeline", "cross-correlation")

# Cross-correlation quality from the Tonry & Davis (1979) r: above 7 the peak is unmistakable
# on the synthetic tests (galaxy and quasar templates at SNR ~10 give 9-50), 4-7 is a peak
# worth a look, below 4 noise and aliases reach it.
R_HIGH, R_MEDIUM = 7.0, 4.0
# An extragalactic match must beat the best match at rest (any template, |z| < STELLAR_Z) by
# this factor and this much: a real star correlates with something at z ~ 0, and a galaxy
# template fitted to its bands at a large z (M dwarf TiO as a galaxy at z ~ 0.8) never
# explains them as well as the stellar template does.
XCORR_RATIO, XCORR_GAIN = 2.0, 0.08
# ... and be a correlation of at least this: weaker peaks are where the positive residuals
# between a white dwarf's Balmer troughs line up with a galaxy's emission lines.
XCORR_MIN_HEIGHT = 0.2

# The features each extragalactic template is recognised by (vacuum rest Angstrom), in the
# order a zoom should show them; the first one inside the data is the redshift check's window.
TEMPLATE_FEATURES: dict[str, list[tuple[str, float]]] = {
    "galaxy, passive": [
        ("Ca II K", 3934.77),
        ("Ca II H", 3969.59),
        ("G band", 4301.51),
        ("Mg b", 5174.12),
        ("Na D", 5894.57),
    ],
    "galaxy, star-forming": [
        ("[O II] 3727", 3728.48),
        ("H-beta", 4862.69),
        ("[O III] 5007", 5008.24),
        ("H-alpha", 6564.61),
        ("[S II] 6716", 6718.29),
    ],
    "QSO": [
        ("Mg II 2800", 2799.12),
        ("C III] 1909", 1908.73),
        ("C IV 1549", 1549.06),
        ("H-beta", 4862.69),
        ("Ly-a 1216", 1215.67),
        ("H-alpha", 6564.61),
    ],
}

TEMPLATE_LABELS = {
    "galaxy, passive": "passive galaxy",
    "galaxy, star-forming": "star-forming galaxy",
    "QSO": "quasar",
}


@dataclass(frozen=True)
class Redshift:
    """A redshift, how sure it is and where it came from."""

    z: float
    quality: str  # one of QUALITIES
    source: str  # one of SOURCES
    lines: list[tuple[str, float]] = field(default_factory=list)  # (line, observed A)
    kind: str = ""  # "quasar", "galaxy", "star" or "" (unknown)
    fwhm_kms: float = float("nan")  # typical width of the matched lines
    template: str = ""  # cross-correlation: the best-matching template
    r: float = float("nan")  # cross-correlation: Tonry & Davis r of its peak
    set_aside: tuple[float, str] | None = None  # a pipeline z the data refuted, and why

    @property
    def extragalactic(self) -> bool:
        return self.z > STELLAR_Z and self.quality in ("medium", "high", "pipeline")

    def describe(self) -> str:
        """One sentence for the agent's thought."""
        if self.set_aside is not None:
            z, why = self.set_aside
            head = f"The survey pipeline gives z = {z:.3f}, but {why}, so I set it aside. "
            return head + replace(self, set_aside=None).describe()
        if self.source == "pipeline":
            if abs(self.z) < STELLAR_Z:
                return (
                    f"The survey pipeline gives z = {self.z:.5f} ({self.z * C_KMS:+.0f} km/s), "
                    "a star in our Galaxy."
                )
            return f"The survey pipeline gives z = {self.z:.3f}: an extragalactic object."
        if self.source == "emission lines":
            found = ", ".join(f"{n} at {w:.0f} Å" for n, w in self.lines)
            return (
                f"Emission bumps fit one redshift, z = {self.z:.3f} ({self.quality} quality: "
                f"{found}), as a {self.kind or 'quasar or galaxy'} shows; no star does that."
            )
        if self.source == "cross-correlation":
            names = [n for n, _ in self.lines]
            shown = (
                ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)
            )
            if self.kind == "star" or not self.extragalactic:
                return (
                    f"Cross-correlation against the templates matches it best at z = "
                    f"{self.z:.3f} ({self.quality} quality, r = {self.r:.1f}, {self.template} "
                    "template): no extragalactic redshift, so I read it as a star at z ~ 0."
                )
            what = TEMPLATE_LABELS.get(self.template, self.kind)
            return (
                f"Cross-correlation against the templates puts it at z = {self.z:.3f} "
                f"({self.quality} quality, r = {self.r:.1f}) as a {what}"
                + (f": {shown} all shift together." if shown else ".")
            )
        return "No emission lines fit an extragalactic redshift, so I read it as a star at z ~ 0."


NONE = Redshift(0.0, "none", "none")


def set_aside(spectrum: Spectrum) -> tuple[float, str] | None:
    """(pipeline z, reason) where the reader set the pipeline's value aside (`agent.frame`)."""
    extra = spectrum.meta.extra or {}
    if "pipeline_z" not in extra:
        return None
    return float(extra["pipeline_z"]), str(extra.get("pipeline_z_note", ""))


def at_rest(spectrum: Spectrum, why: str) -> Spectrum:
    """`spectrum` read at rest, its pipeline z and `why` it was set aside kept for `set_aside`."""
    extra = {**spectrum.meta.extra, "pipeline_z": float(spectrum.redshift), "pipeline_z_note": why}
    return spectrum.replace(redshift=0.0, meta=dataclasses.replace(spectrum.meta, extra=extra))


def estimate(spectrum: Spectrum, arr: Arrays | None = None) -> Redshift:
    """The pipeline's redshift, or an emission-line estimate where that one is stellar."""
    z_pipe = float(spectrum.redshift)
    if abs(z_pipe) >= STELLAR_Z:
        return Redshift(z_pipe, "pipeline", "pipeline")
    arr = arr if arr is not None else arrays_of(spectrum)
    aside = set_aside(spectrum)
    if aside is not None:
        # The reader found the pipeline's z refuted (agent.frame): what the data say instead.
        found = from_emission_lines(arr)
        if found.quality not in ("medium", "high"):
            found = from_templates(arr)
        return replace(found, set_aside=aside)
    found = from_emission_lines(arr)
    if found.quality in ("medium", "high"):
        return found
    # A low-quality match (two bumps that pair up by chance) is no redshift to report or
    # adopt. No emission bumps: an absorption-line galaxy or a quasar with weak lines still shows
    # its shape at its redshift. Only an extragalactic answer is taken from it.
    found = from_templates(arr)
    if found.extragalactic:
        if z_pipe != 0.0:  # the arrays are in the frame of the pipeline's (stellar) z
            found = replace(found, z=(1.0 + z_pipe) * (1.0 + found.z) - 1.0)
        return found
    if z_pipe != 0.0:  # readers store 0.0 where the file has no redshift
        return Redshift(z_pipe, "pipeline", "pipeline")
    return NONE


def _bumps(arr: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Binned wavelength, continuum-relative excess, bin good-flags and noise of the excess."""
    good = arr.good & np.isfinite(arr.flux)
    w, f = arr.wave[good], arr.flux[good]
    if w.size < 50:
        return np.zeros(0), np.zeros(0), np.zeros(0, bool), float("nan")
    edges = np.arange(w[0], w[-1] + _BIN, _BIN)
    idx = np.searchsorted(edges, w, side="right") - 1
    n = np.bincount(idx, minlength=edges.size)[: edges.size - 1]
    s = np.bincount(idx, weights=f, minlength=edges.size)[: edges.size - 1]
    ok = n >= 2
    centres = 0.5 * (edges[:-1] + edges[1:])
    centres, flux = centres[ok], s[ok] / n[ok]
    if flux.size < _MEDIAN_BINS + 4:
        return np.zeros(0), np.zeros(0), np.zeros(0, bool), float("nan")
    half = _MEDIAN_BINS // 2
    padded = np.pad(flux, half, mode="reflect")
    cont = np.median(np.lib.stride_tricks.sliding_window_view(padded, _MEDIAN_BINS), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ex = np.where(cont > 0, flux / cont - 1.0, np.nan)
    fin = np.isfinite(ex)
    if fin.sum() < 20:
        return np.zeros(0), np.zeros(0), np.zeros(0, bool), float("nan")
    d = np.diff(ex[fin])
    noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))
    return centres, np.where(fin, ex, 0.0), fin, max(noise, 1e-3)


def _peaks(wave: np.ndarray, ex: np.ndarray, noise: float) -> list[tuple[float, float, float]]:
    """(wavelength, height, FWHM in km/s) of significant, two-sided emission bumps."""
    if wave.size < 7:
        return []
    sm = np.convolve(ex, np.ones(3) / 3, mode="same")
    thresh = max(6.0 * noise / np.sqrt(3), 0.08)
    out = []
    core = sm[3:-3]
    cand = 3 + np.flatnonzero((core >= thresh) & (core >= sm[2:-4]) & (core >= sm[4:-2]))
    for i in cand:
        # Both sides must fall to half height: a band edge steps down on one side only.
        half = sm[i] / 2
        lo = i
        while lo > 0 and sm[lo] > half and i - lo < 40:
            lo -= 1
        hi = i
        while hi < sm.size - 1 and sm[hi] > half and hi - i < 40:
            hi += 1
        if sm[lo] > half or sm[hi] > half:
            continue
        # An emission line sits on continuum; the flux between two absorption troughs (broad
        # Balmer lines, molecular bands) looks like a bump against a running median too.
        w = max(hi - lo, 2)
        side = np.concatenate([sm[max(0, lo - 2 * w) : lo], sm[hi + 1 : hi + 1 + 2 * w]])
        if side.size and np.min(side) < -max(0.5 * sm[i], thresh):
            continue
        fwhm = float(wave[hi] - wave[lo]) / wave[i] * C_KMS
        out.append((float(wave[i]), float(sm[i]), fwhm))
    out.sort(key=lambda p: -p[1])
    return out[:8]


def _tol(obs: float) -> float:
    # Half a bin of centroiding plus ~1000 km/s of line-to-line velocity offsets in quasars.
    return max(1.5 * _BIN, 0.0035 * obs)


def from_emission_lines(arr: Arrays) -> Redshift:
    """The one z > 0.03 at which two or more emission bumps are quasar or galaxy lines."""
    wave, ex, _, noise = _bumps(arr)
    if wave.size == 0:
        return NONE
    peaks = _peaks(wave, ex, noise)
    if len(peaks) < 2:
        return NONE
    # Bumps at a star's own emission lines (a CV, Be star or active M dwarf) are explained
    # at z ~ 0; an extragalactic fit must explain more of them than that.
    at_rest = sum(
        1 for p in peaks if any(abs(p[0] - lw) <= max(_BIN, 0.0015 * lw) for lw in STELLAR_EMISSION)
    )
    lo, hi = float(wave[0]) + 30.0, float(wave[-1]) - 30.0
    best: tuple[int, float, float, list] | None = None
    for pw, _, _ in peaks:
        for rest in QSO_LINES.values():
            z = pw / rest - 1.0
            if not MIN_EXTRAGALACTIC_Z < z < 5.0:
                continue
            matched = []
            for name, lw in QSO_LINES.items():
                obs = lw * (1 + z)
                if not lo < obs < hi:
                    continue
                near = [p for p in peaks if abs(p[0] - obs) <= _tol(obs)]
                if near:
                    matched.append((name, max(near, key=lambda p: p[1])))
            if len(matched) < 2 or len(matched) <= at_rest:
                continue
            # The strongest bump must be one of the lines, or the fit explains the wrong thing.
            if not any(p is peaks[0] for _, p in matched):
                continue
            strength = sum(p[1] for _, p in matched)
            key = (len(matched), strength)
            if best is None or key > best[:2]:
                best = (len(matched), strength, z, matched)
    if best is None:
        return NONE
    n, _, _, matched = best
    zs = [p[0] / QSO_LINES[name] - 1.0 for name, p in matched]
    z = float(np.median(zs))
    spread = float(np.max(zs) - np.min(zs))
    heights = [p[1] / noise for _, p in matched]
    quality = "high" if n >= 3 or min(heights) > 12 else "medium" if min(heights) > 6 else "low"
    if spread > 0.01 * (1 + z):
        quality = "low"
    fwhm = float(np.median([p[2] for _, p in matched]))
    kind = "quasar" if fwhm > 1800.0 else "galaxy"
    if kind == "galaxy" and n < 3:
        # Two narrow bumps pair up by chance too often (chromospheric Ca II and Balmer lines).
        quality = "low"
    lines = [(name, p[0]) for name, p in sorted(matched, key=lambda t: -t[1][1])]
    return Redshift(z, quality, "emission lines", lines, kind, fwhm)


def _xcorr_quality(r: float) -> str:
    return "high" if r > R_HIGH else "medium" if r > R_MEDIUM else "low"


def from_templates(arr: Arrays) -> Redshift:
    """The redshift of the best cross-correlation match against the built-in templates.

    An extragalactic answer (a galaxy or the quasar at z > STELLAR_Z) needs its peak to beat
    the best match at rest by XCORR_RATIO and XCORR_GAIN; otherwise the answer is the best
    match at rest, with kind "star" (or NONE when nothing correlates at all). Quality comes
    from the Tonry & Davis r of the peak (R_HIGH, R_MEDIUM).
    """
    peaks = correlate(arr)
    rest = [p for p in peaks if abs(p.z) < STELLAR_Z]
    # Features in at least two stretches of the spectrum must line up at once.
    far = [p for p in peaks if p.kind in ("galaxy", "qso") and p.z > STELLAR_Z and p.parts >= 2]
    h0 = max((p.height for p in rest), default=0.0)
    if far:
        best = max(far, key=lambda p: p.height)
        if (
            best.height >= max(XCORR_RATIO * h0, XCORR_MIN_HEIGHT)
            and best.height - h0 >= XCORR_GAIN
        ):
            lo, hi = arr.lo + 20.0, arr.hi - 20.0
            lines = [
                (name, w * (1.0 + best.z))
                for name, w in TEMPLATE_FEATURES.get(best.template, [])
                if lo < w * (1.0 + best.z) < hi
            ]
            kind = "quasar" if best.kind == "qso" else "galaxy"
            q = _xcorr_quality(best.r)
            return Redshift(
                best.z, q, "cross-correlation", lines, kind, template=best.template, r=best.r
            )
    if not rest or rest[0].height <= 0:
        return NONE
    p = max(rest, key=lambda p: p.height)
    q = _xcorr_quality(p.r)
    return Redshift(p.z, q, "cross-correlation", [], "star", template=p.template, r=p.r)


# -- through a step's measurements -----------------------------------------------------------


def to_measurements(r: Redshift) -> dict[str, float]:
    """The redshift as numbers for a step's measurements (quality and source as codes)."""
    return {
        "redshift": float(r.z),
        "redshift_quality": float(QUALITIES.index(r.quality)),
        "redshift_source": float(SOURCES.index(r.source)),
    }


def from_measurements(m: dict[str, float]) -> dict[str, object] | None:
    """{"value", "quality", "source"} from a step's measurements, or None if absent."""
    try:
        z = float(m["redshift"])
        q = QUALITIES[int(m["redshift_quality"])]
        s = SOURCES[int(m["redshift_source"])]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return {"value": z, "quality": q, "source": s}
