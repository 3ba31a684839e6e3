"""What the inspector measures on a spectrum, and the signals several tasks read from it.

`measure_all` gives every number once per spectrum (nan where not measurable); a task's
evidence function turns them into an `Evidence` score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from agent import lines, redshift
from agent.measure import (
    Arrays,
    arrays_of,
    band_depth,
    continuum_slope,
    coverage,
    fit_profile,
    flux_ratio,
    flux_ratio_error,
    head_jump,
    head_jump_error,
    measure_line,
    snr_estimate,
)
from agent.spectrum import Spectrum
from agent.units import air_to_vacuum

NAN = float("nan")


def wavelength_of(key: str) -> float:
    return lines.get(key).wavelength


def finite(x: float | None) -> bool:
    return x is not None and isinstance(x, float | int) and math.isfinite(x)


def value(x: float | None) -> float:
    return float(x) if finite(x) else NAN


# (name, catalogue key, integration half-width, continuum sidebands relative to centre)
_NARROW: list[tuple[str, str, float, list[tuple[float, float]]]] = [
    ("ha", "H-alpha", 30.0, [(-95, -55), (55, 95)]),
    ("hb", "H-beta", 30.0, [(-70, -40), (45, 75)]),
    ("hg", "H-gamma", 22.0, [(-60, -40), (40, 60)]),
    ("hei5877", "He I 5876", 10.0, [(-45, -20), (33, 53)]),
    ("hei6680", "He I 6678", 12.0, [(-40, -20), (20, 40)]),
    ("hei4473", "He I 4471", 12.0, [(-32, -18), (18, 32)]),
    ("hei4923", "He I 4922", 12.0, [(-32, -18), (18, 32)]),
    ("heii4687", "He II 4686", 12.0, [(-32, -18), (18, 32)]),
    ("cak", "Ca II K", 8.0, [(-24, -12), (12, 20)]),
    ("cat8544", "Ca II 8542", 10.0, [(-28, -14), (16, 30)]),
    ("cat8664", "Ca II 8662", 10.0, [(-34, -20), (20, 34)]),
    ("nad", "Na I D2", 12.0, [(-40, -25), (30, 45)]),
]


# Broad (white dwarf) Balmer windows: sidebands far out, beyond pressure-broadened wings.
_BROAD: list[tuple[str, str, float, list[tuple[float, float]]]] = [
    ("hb_w", "H-beta", 150.0, [(-242, -202), (218, 258)]),
    ("hg_w", "H-gamma", 100.0, [(-152, -127), (138, 178)]),
    # H-delta sits 132 A from H-epsilon and 239 A from H-gamma: its continuum is read
    # midway to each, and the span is too short for a blanketed stretch to pass as a line.
    ("hd_w", "H-delta", 50.0, [(-75, -55), (105, 130)]),
    ("ha_w", "H-alpha", 150.0, [(-215, -165), (185, 235)]),
]
BROAD_NAMES = frozenset(n for n, *_ in _BROAD)


# Molecular band heads: (name, catalogue key)
_HEADS: list[tuple[str, str]] = [
    ("c2_4737", "C2 4737"),
    ("c2_5165", "C2 5165"),
    ("c2_5636", "C2 5636"),
    ("tio_4955", "TiO 4955"),
    ("tio_5448", "TiO 5448"),
    ("tio_6159", "TiO 6159"),
    ("tio_7054", "TiO 7054"),
    ("tio_8432", "TiO 8432"),
    ("zro_4620", "ZrO 4620"),
    ("zro_5551", "ZrO 5551"),
    ("zro_6474", "ZrO 6474"),
    ("lao_7403", "LaO 7403"),
    ("cn_7874", "CN 7874"),
    ("cn_8067", "CN 8067"),
    ("vo_7334", "VO 7334"),
]


def _idx(
    num: tuple[float, float], den: tuple[float, float]
) -> tuple[tuple[float, float], tuple[float, float]]:
    # Reid et al. (1995) index bandpasses are quoted in air; shift to vacuum.
    (a, b), (c, d) = (tuple(float(x) for x in air_to_vacuum(w)) for w in (num, den))
    return (a, b), (c, d)


_TIO5 = _idx((7126, 7135), (7042, 7046))


_CAH2 = _idx((6814, 6846), (7042, 7046))


_CAH3 = _idx((6960, 6990), (7042, 7046))


class Measurements(dict):
    """The numbers (nan where not measurable) and, in `unreliable`, the measurements the data
    cannot support: feature name (e.g. "hb_w", "c2_5165") -> the reason. An unreliable
    feature's numbers are nan, so no evidence rests on them; the narration says why."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unreliable: dict[str, str] = {}
        self.redshift: redshift.Redshift = redshift.NONE


# Where each measured feature sits (rest-frame vacuum Angstrom): a zoom shows a feature when
# its anchor lies inside the zoom's window. Features of the whole continuum have none; the
# global view shows them.
ANCHORS: dict[str, float] = {}
for _n, _k, _hw, _s in _NARROW + _BROAD:
    ANCHORS[_n] = lines.get(_k).wavelength
for _n, _k in _HEADS:
    ANCHORS[_n] = lines.get(_k).wavelength
ANCHORS.update(
    {
        "na8190": 8191.0,
        "h8_contrast": lines.get("H8").wavelength,
        "h9_contrast": lines.get("H9").wavelength,
        "hser": lines.get("H11").wavelength,
        "tio5": 0.5 * sum(_TIO5[0]),
        "cah2": 0.5 * sum(_CAH2[0]),
        "cah3": 0.5 * sum(_CAH3[0]),
        "cah1": 6387.0,
    }
)
GLOBAL_KEYS = ("snr", "wave_lo", "wave_hi", "b_r", "b_i", "u_b", "v_i", "r_z", "blue_frac")


def feature_of(key: str) -> str:
    """The feature a measurement key belongs to: "hb_w_fwhm" -> "hb_w", "tio5" -> "tio5"."""
    if key in ANCHORS:
        return key
    head, _, _ = key.rpartition("_")
    return head if head in ANCHORS else key


def anchor(key: str) -> float | None:
    """Rest wavelength where the measurement `key` is made; None for whole-continuum ones."""
    return ANCHORS.get(feature_of(key))


def _line_problem(ln, half_width: float, window_snr: float) -> str | None:
    if ln.coverage < 0.6:
        return f"{100 * (1 - ln.coverage):.0f}% of the line window is masked"
    if not math.isfinite(ln.noise) or not math.isfinite(ln.ew):
        return "the continuum fit failed (no usable sideband)"
    if finite(window_snr) and window_snr < 3.0:
        return f"the window is noise (SNR ~{window_snr:.1f} per pixel)"
    if not ln.emission and ln.depth > 1.0:
        return "the flux dips below zero there: noise or a bad continuum fit"
    size = ln.peak if ln.emission else ln.depth
    # Noise pinches a shallow core's width and wings add EW, so only a gross mismatch counts.
    big = abs(ln.ew) > max(5.0, 10.0 * size * ln.fwhm + 1.0)
    if math.isfinite(ln.fwhm) and not ln.fwhm_limited and big:
        # A Lorentzian holds ~1.6 x depth x FWHM: ten times that is noise or a bad continuum.
        return (
            f"an EW of {abs(ln.ew):.0f} Å cannot come from a line {ln.fwhm:.0f} Å wide and "
            f"{size:.2f} {'high' if ln.emission else 'deep'}"
        )
    if not ln.emission and ln.ew > 2.0 * half_width + 1.0:
        # Depth <= 1 over the integration window bounds an absorption EW by its width.
        return f"an absorption EW of {ln.ew:.0f} Å exceeds the {2 * half_width:.0f} Å window"
    return None


def measure_all(spectrum: Spectrum) -> Measurements:
    """Every number the inspector uses, for one spectrum (nan where not measurable)."""
    arr = arrays_of(spectrum)
    m = Measurements()
    m["snr"] = value(snr_estimate(arr))
    m["wave_lo"], m["wave_hi"] = arr.lo, arr.hi
    m["z_pipeline"] = float(spectrum.redshift)
    for name, key, hw, side in _NARROW + _BROAD:
        c = wavelength_of(key)
        windows = [(c + a, c + b) for a, b in side]
        ln = measure_line(arr, name, c, hw, windows)
        if name in BROAD_NAMES:
            # A white dwarf's width decides its verdict: take it from a fitted profile,
            # which noise does not pinch as it does a half-depth width read off pixels.
            # Fitted even where the pixels read as emission (He I lines in a DB's sidebands
            # lift the window's centre): an absent line's limit needs the fit's error.
            prof = fit_profile(arr, c, windows) if ln is not None else None
            m[f"{name}_fitsig"] = prof.sig if prof else NAN
            m[f"{name}_fitdepth"] = prof.depth if prof else NAN
            m[f"{name}_fiterr"] = prof.error if prof else NAN
            m[f"{name}_fitbound"] = float(prof.at_bound) if prof else NAN
            if prof and not ln.emission and prof.depth > 0 and math.isfinite(prof.fwhm):
                ln = replace(ln, depth=prof.depth, fwhm=prof.fwhm, fwhm_limited=prof.limited)
            if prof and not ln.emission and prof.sig >= 3.0 and prof.at_bound:
                # A width that ends at the fit's bound is no measurement: near H-gamma the
                # G band and metal-line blanketing pull down a stretch as wide as the span.
                m.unreliable[name] = (
                    f"the fitted width ran to the {prof.fwhm:.0f} Å bound of the fit, so no "
                    "width was measured"
                )
                for k in ("ew", "depth", "peak", "fwhm", "em", "sig"):
                    m[f"{name}_{k}"] = NAN
                continue
        problem = None
        if ln is not None:
            # The continuum's SNR over line and sidebands: a deep line's core is always noisier.
            span = (c + min(a for a, _ in side), c + max(b for _, b in side))
            problem = _line_problem(ln, hw, snr_estimate(arr, *span))
        elif arr.wave[0] <= c - hw and arr.wave[-1] >= c + hw:
            # On the grid but not measurable: the window is masked or the continuum failed.
            cov = coverage(arr, c - hw, c + hw)
            problem = (
                f"{100 * (1 - cov):.0f}% of the line window is masked"
                if cov < 0.3
                else "the continuum fit failed (the pseudo-continuum is not positive)"
            )
        if ln is None or problem:
            if problem:
                m.unreliable[name] = problem
            for k in ("ew", "depth", "peak", "fwhm", "em", "sig"):
                m[f"{name}_{k}"] = NAN
            continue
        m[f"{name}_ew"] = ln.ew
        m[f"{name}_depth"] = ln.depth
        m[f"{name}_peak"] = ln.peak
        m[f"{name}_fwhm"] = ln.fwhm
        m[f"{name}_em"] = 1.0 if ln.emission else 0.0
        m[f"{name}_sig"] = abs(ln.ew) / max(ln.ew_error, 1e-3)
    # Na I 8183/8195 doublet integrated as one feature (it is blended at R ~ 1800).
    na = measure_line(arr, "na8190", 8191.0, 13.0, [(8140.0, 8165.0), (8212.0, 8232.0)])
    problem = _line_problem(na, 13.0, snr_estimate(arr, 8170.0, 8210.0)) if na else None
    if problem:
        m.unreliable["na8190"] = problem
    ok = na is not None and not problem
    m["na8190_ew"] = na.ew if ok else NAN
    m["na8190_sig"] = abs(na.ew) / max(na.ew_error, 1e-3) if ok else NAN
    # Higher Balmer lines: contrast against the peaks between them. Sharp, separate lines
    # (A/B stars, subdwarfs) give a high contrast; merged white-dwarf wings do not.
    m["h8_contrast"] = _contrast(arr, wavelength_of("H8"), (3858.0, 3868.0), (3912.0, 3922.0))
    m["h9_contrast"] = _contrast(arr, wavelength_of("H9"), (3812.0, 3820.0), (3858.0, 3868.0))
    m["hser_contrast"], m["hser_sig"] = series_contrast(arr)
    for name, key in _HEADS:
        f = lines.get(key)
        j = value(head_jump(arr, f.wavelength, f.degrade or "red"))
        if finite(j) and abs(j) > 2.0:
            # A factor > 7 across a head is no molecular band: a gap edge or bad columns.
            m.unreliable[name] = f"the flux changes {math.exp(abs(j)):.0f}-fold across the head"
            j = NAN
        m[name] = j
        m[f"{name}_err"] = value(head_jump_error(arr, f.wavelength, f.degrade or "red"))
    m["tio5"] = value(flux_ratio(arr, *_TIO5))
    for k, bands in (("tio5", _TIO5), ("cah2", _CAH2), ("cah3", _CAH3)):
        # Each index's own error, from the flux errors of its bands.
        m[f"{k}_err"] = value(flux_ratio_error(arr, *bands))
    m["cah2"] = value(flux_ratio(arr, *_CAH2))
    m["cah3"] = value(flux_ratio(arr, *_CAH3))
    for k in ("tio5", "cah2", "cah3"):
        if finite(m[k]) and not 0.0 < m[k] < 2.0:
            m.unreliable[k] = f"index {m[k]:.2f} is outside what a stellar band gives (0-2)"
            m[k] = NAN
    m["cah1"] = value(band_depth(arr, (6382.0, 6392.0), [(6347.0, 6357.0), (6412.0, 6422.0)]))
    m.update(continuum_slope(arr))
    m["blue_frac"] = _blue_fraction(arr)
    m.redshift = redshift.estimate(spectrum, arr)
    bands = "TiO" if molecular_bands(m) else "C2" if carbon_bands(m) else ""
    if m.redshift.source in ("emission lines", "cross-correlation") and bands:
        # Between the TiO bands of a cool M star, or the C2 Swan bands of a carbon star,
        # the continuum peaks; at low resolution those peaks pass for broad emission lines
        # at a quasar's redshift. A quasar shows no flux step at every band head at once.
        m.unreliable["redshift"] = (
            f"the {m.redshift.kind} redshift z = {m.redshift.z:.3f} "
            f"({m.redshift.source}) rests on the peaks between {bands} bands"
        )
        z_pipe = float(spectrum.redshift)
        m.redshift = redshift.Redshift(z_pipe, "pipeline", "pipeline") if z_pipe else redshift.NONE
    m.update(redshift.to_measurements(m.redshift))
    return m


TIO_HEADS = ("tio_4955", "tio_5448", "tio_6159", "tio_7054")


def molecular_bands(m: dict[str, float], least: float = 0.15) -> bool:
    """At least three of the TiO heads 4955, 5448, 6159 and 7054 measured, and the flux
    drops redward of each by a log jump of `least` or more: the bands of an M star."""
    got = [m[k] for k in TIO_HEADS if finite(m.get(k))]
    return len(got) >= 3 and min(got) >= least


C2_HEADS = ("c2_4737", "c2_5165", "c2_5636")


def carbon_bands(m: dict[str, float], least: float = 0.15) -> bool:
    """The three C2 Swan heads 4737, 5165 and 5636 measured, the flux stepping down blueward
    of each by a log jump of `least` or more: the bands of a carbon star."""
    got = [m[k] for k in C2_HEADS if finite(m.get(k))]
    return len(got) == len(C2_HEADS) and min(got) >= least


def _contrast(
    arr: Arrays, center: float, blue: tuple[float, float], red: tuple[float, float]
) -> float:
    if min(coverage(arr, *blue), coverage(arr, *red), coverage(arr, center - 4, center + 4)) < 0.5:
        return NAN
    _, fb = arr.window(*blue)
    _, fr = arr.window(*red)
    _, fc = arr.window(center - 3.0, center + 3.0)
    if not (fb.size and fr.size and fc.size):  # coarse grids can leave a window with no pixel
        return NAN
    peak = 0.5 * (np.max(_sm(fb)) + np.max(_sm(fr)))
    if peak <= 0:
        return NAN
    return float(1.0 - np.min(_sm(fc)) / peak)


def series_contrast(arr: Arrays, half: float = 2.0) -> tuple[float, float]:
    """H10, H11 and H12 against the flux midway between them: (contrast, its significance).

    The pressure in a white dwarf's atmosphere (log g ~8) merges the Balmer lines beyond
    H8-H9 into one depressed stretch, so their cores and the flux between them are alike
    (contrast ~0). A hot subdwarf (log g 5-6) or an A/B star keeps them apart to H12 and
    beyond (0.1-0.5). Means over +-`half` Å windows, not extremes, so noise does not make
    a contrast; its error comes from the region's SNR per pixel.

    >>> w = np.arange(3700.0, 3900.0, 0.5)
    >>> f = np.ones_like(w)
    >>> for n in (9, 10, 11, 12, 13):
    ...     f = f - 0.3 * np.exp(-0.5 * ((w - lines.balmer(n)) / 2.5) ** 2)
    >>> c, sig = series_contrast(Arrays(w, f, np.ones_like(w, bool)))
    >>> round(c, 2)
    0.27
    >>> merged = np.random.default_rng(0).normal(0.7, 0.02, w.size)  # a DA's blend, SNR 35
    >>> c, sig = series_contrast(Arrays(w, merged, np.ones_like(w, bool)))
    >>> abs(c) < 0.02 and abs(sig) < 3
    True
    """
    at = {n: lines.balmer(n) for n in range(9, 14)}
    cores = [at[n] for n in (10, 11, 12)]
    mids = [0.5 * (at[n] + at[n + 1]) for n in range(9, 13)]
    got = []
    for centres in (cores, mids):
        means, npix = [], 0
        for c in centres:
            sel = (arr.wave >= c - half) & (arr.wave <= c + half) & arr.good
            if sel.sum() < 2:
                return NAN, NAN
            means.append(float(np.mean(arr.flux[sel])))
            npix += int(sel.sum())
        got.append((float(np.mean(means)), npix))
    (core, n_core), (peak, n_peak) = got
    snr = snr_estimate(arr, mids[-1] - 10.0, at[9] + 30.0)
    if not (peak > 0 and finite(snr) and snr > 0):
        return NAN, NAN
    sigma = peak / snr  # per pixel, at the level of the flux between the lines
    contrast = 1.0 - core / peak
    err = math.hypot(sigma / math.sqrt(n_core), core / peak * sigma / math.sqrt(n_peak)) / peak
    return contrast, contrast / err


# A Balmer series resolved to H12: contrast and significance no white dwarf of the tune
# split reaches (its DAs read at most 0.16 at 4 sigma, and 0.10 where over 4 sigma), while
# its A and OB stars read 0.2-0.6.
SERIES_CONTRAST, SERIES_SIG = 0.12, 5.0


def series_resolved(m: dict[str, float]) -> bool:
    """H10-H12 stand apart as no white dwarf's do (see `series_contrast`)."""
    c, sig = m.get("hser_contrast"), m.get("hser_sig")
    return finite(c) and finite(sig) and c >= SERIES_CONTRAST and sig >= SERIES_SIG


def _sm(f: np.ndarray) -> np.ndarray:
    if f.size < 3:
        return f
    return np.convolve(f, np.ones(3) / 3, mode="valid")


def _blue_fraction(arr: Arrays) -> float:
    """Share of the 4000-9000 A flux that falls below 5500 A (hot objects ~0.5, cool ~0.1)."""
    if coverage(arr, 4000.0, 5500.0) < 0.6 or coverage(arr, 5500.0, 9000.0) < 0.6:
        return NAN
    wb, fb = arr.window(4000.0, 5500.0)
    wr, fr = arr.window(5500.0, 9000.0)
    b = float(np.mean(fb)) * 1500.0
    r = float(np.mean(fr)) * 3500.0
    if b + r <= 0:
        return NAN
    return b / (b + r)


@dataclass
class Item:
    """One piece of evidence: its weight (positive for the target class, negative against),
    the sentence that says it, and the measurement keys it rests on."""

    points: float
    note: str
    keys: tuple[str, ...] = ()
    decisive: bool = False  # a discriminant the verdict may not overrule (see policy.verdict)
    at: tuple[float, ...] = ()  # extra rest wavelengths it is read at (e.g. a redshifted line)

    @property
    def direction(self) -> str:
        return "for" if self.points > 0 else "against" if self.points < 0 else "neutral"

    def anchors(self) -> list[float]:
        """Where a zoom must look to show this item (empty: the global view shows it)."""
        out = [a for k in self.keys if (a := anchor(k)) is not None]
        return out + list(self.at)


@dataclass
class Evidence:
    """What a task's checklist found: the items, a prior offset, and coverage.

    The score, the verdict, its confidence and the narration all read `items`; an item the
    inspector could not draw is moved to `unused` and counts for nothing.
    """

    items: list[Item] = field(default_factory=list)
    prior: float = 0.0
    missing: list[str] = field(default_factory=list)
    checked: int = 0
    unused: list[Item] = field(default_factory=list)
    # Readings made for a star at rest, set aside once emission lines or a template put
    # the spectrum at an extragalactic redshift (they fall on other lines there).
    at_rest: list[Item] = field(default_factory=list)
    required: tuple[str, ...] = ()  # a YES needs a "for" item resting on one of these keys
    # Why the measurement the answer turns on cannot decide it (failed, ran to its bound or
    # sits within the noise): the answer is then a can't-tell, handed to an expert at no
    # more certainty than the task's base rate gives (`policy.verdict_probability`).
    undecided: str = ""

    def add(
        self,
        points: float,
        note: str,
        keys: tuple[str, ...] | list[str] = (),
        *,
        decisive: bool = False,
        at: tuple[float, ...] = (),
    ) -> Item:
        item = Item(float(points), note, tuple(keys), decisive, tuple(at))
        self.items.append(item)
        return item

    @property
    def score(self) -> float:
        return self.prior + sum(i.points for i in self.items)

    @property
    def notes(self) -> list[str]:
        return [i.note for i in self.items if i.note]

    @property
    def coverage(self) -> float:
        total = self.checked + len(self.missing)
        return 1.0 if total == 0 else self.checked / total

    def drop(self, item: Item) -> None:
        self.items.remove(item)
        self.unused.append(item)

    def vetoes(self, apart_from: Iterable[str] = ()) -> list[Item]:
        """The decisive readings against the target, less those resting on any of the keys
        `apart_from` (the reading a can't-tell is about does not veto its own doubt)."""
        skip = set(apart_from)
        return [i for i in self.items if i.decisive and i.points < 0 and not skip & set(i.keys)]

    def strongest(self, direction: str) -> Item | None:
        sel = [i for i in self.items if i.direction == direction and i.note]
        if not sel:
            return None
        return max(sel, key=lambda i: abs(i.points))


def has(m: dict[str, float], *keys: str) -> bool:
    return all(finite(m.get(k)) for k in keys)


def cool_type(m: dict[str, float]) -> float:
    """TiO strength: 0 for no TiO, ~1 for a mid-M star (from TiO5 and the 7054 head)."""
    parts = []
    if finite(m.get("tio5")):
        parts.append(np.clip((1.0 - m["tio5"]) / 0.5, -0.5, 2.0))
    if finite(m.get("tio_7054")):
        parts.append(np.clip(m["tio_7054"] / 0.4, -0.5, 2.0))
    if finite(m.get("tio_6159")):
        parts.append(np.clip(m["tio_6159"] / 0.3, -0.5, 2.0))
    return float(np.mean(parts)) if parts else NAN


def depth_points(jump: float) -> float:
    """Band-head depth (fraction of the flux lost across the head) from a log jump.

    A head with the flux stepping the wrong way has no band: depth 0, never negative.
    """
    return max(0.0, 1.0 - math.exp(-jump)) if finite(jump) else NAN


def c2_strength(m: dict[str, float]) -> float:
    vals = [m[k] for k in ("c2_4737", "c2_5165", "c2_5636") if finite(m.get(k))]
    return float(np.mean(vals)) if vals else NAN


def below_noise(m: dict[str, float], n: str) -> bool:
    """The profile fitted to a broad Balmer window is under 3 sigma: no line to measure."""
    return finite(m.get(f"{n}_fitsig")) and m[f"{n}_fitsig"] < 3.0


def span_reach(n: str) -> float:
    """Distance (Å) from a broad Balmer line's centre to the nearer end of the span its
    profile and continuum are fitted over (`_BROAD`)."""
    side = next(s for name, _, _, s in _BROAD if name == n)
    return min(-min(a for a, _ in side), max(b for _, b in side))


def unanchored(m: dict[str, float], n: str) -> bool:
    """The profile fitted to a broad Balmer window is so wide that it still holds a quarter
    of its depth at the nearer end of the span (a Lorentzian wider than 2/sqrt(3) of the
    distance): no stretch of continuum anchors it, and its width is the curvature of a
    blanketed continuum, not a measurement (a DA's lines stay near 40-130 Å wide)."""
    f = m.get(f"{n}_fwhm")
    return finite(f) and f > 2.0 / math.sqrt(3.0) * span_reach(n)


def unanchored_text(m: dict[str, float], n: str, lbl: str) -> str:
    return (
        f"{lbl}: a profile {m[f'{n}_fwhm']:.0f} Å wide still holds a quarter of its depth "
        f"{span_reach(n):.0f} Å out, where the continuum is read, so no width was measured"
    )


def no_line_text(m: dict[str, float], n: str, lbl: str) -> str:
    if not m.get(f"{n}_fitdepth", 0.0) > 0:
        return f"{lbl}: no absorption line fits the data"
    return (
        f"{lbl}: no line above the noise (fitted depth {m[f'{n}_fitdepth']:.2f} "
        f"at {m[f'{n}_fitsig']:.1f} sigma)"
    )


# Balmer lines a hydrogen-free (DB, DZ) white dwarf must be seen to lack. A line is there
# when its fit stands 3 sigma clear at a depth of PRESENT_DEPTH or more; its absence is
# measured only where the noise could not hide a line of ABSENT_BELOW (3 sigma), as deep
# as an A/F/G star's narrow Balmer lines at the surveys' resolution.
ABSENCE_LINES = (("hb_w", "H-beta"), ("hg_w", "H-gamma"), ("hd_w", "H-delta"))
PRESENT_DEPTH, ABSENT_BELOW = 0.1, 0.3


def balmer_emission(m: dict[str, float]) -> str | None:
    """H-alpha clearly in emission (EW under -2 Å at over 5 sigma): the sentence, else None.

    Emission filling the absorption (a Be star, a CV) leaves no Balmer absorption to fit,
    yet hydrogen is there all the same. H-beta's narrow window is not read for this: a DB's
    He I 4922 in its red sideband makes its centre look like emission.

    >>> balmer_emission({"ha_ew": -9.5, "ha_sig": 30.0})
    'H-alpha is in emission (EW -9.5 Å)'
    >>> balmer_emission({"ha_ew": -1.0, "ha_sig": 30.0}) is None
    True
    """
    ew, sig = m.get("ha_ew"), m.get("ha_sig")
    if finite(ew) and ew < -2.0 and finite(sig) and sig > 5.0:
        return f"H-alpha is in emission (EW {ew:.1f} Å)"
    return None


def balmer_absence(m: dict[str, float]) -> tuple[bool, str, tuple[str, ...]]:
    """Whether H-beta, H-gamma and H-delta were each looked at and none is there at the
    SNR in hand, nor H-alpha clearly: (absent, the sentence that says so or names the line
    that is not absent, the keys it rests on)."""
    said, keys = [], []
    for n, lbl in ABSENCE_LINES:
        d, err = m.get(f"{n}_fitdepth"), m.get(f"{n}_fiterr")
        if not (finite(d) and finite(err)):
            return (
                False,
                f"{lbl} could not be looked at, so no absence of hydrogen is measured",
                (n,),
            )
        limit = max(d, 0.0) + 3.0 * err
        # A fit at its width bound is a depressed stretch of continuum, not a Balmer line.
        if not below_noise(m, n) and d >= PRESENT_DEPTH and m.get(f"{n}_fitbound") != 1.0:
            why = f"{lbl} is there (fitted depth {d:.2f} at {m[f'{n}_fitsig']:.0f} sigma)"
            return False, why, (n,)
        if limit >= ABSENT_BELOW:
            return False, f"{lbl} is too noisy to rule out a line of depth {limit:.2f}", (n,)
        if m.get(f"{n}_fitbound") == 1.0 and not below_noise(m, n):
            # Its width is no measurement (the narration says so); what it shows is that
            # no line of a star's width stands there, the fit preferring a shallow spread.
            said.append(f"{lbl} no line, only a depression as wide as its fit allows")
        else:
            said.append(f"{lbl} depth < {limit:.2f}")
        keys.append(n)
    emission = balmer_emission(m)
    if emission:
        return False, emission, ("ha",)
    d = m.get("ha_w_depth")
    if (
        finite(d)
        and d >= PRESENT_DEPTH
        and not below_noise(m, "ha_w")
        and not unanchored(m, "ha_w")
    ):
        # H-beta to H-delta under the noise, but H-alpha, a cool star's strongest Balmer
        # line, stands clear of it: hydrogen is there.
        return False, f"H-alpha is there (FWHM {m['ha_w_fwhm']:.0f} Å, depth {d:.2f})", ("ha_w",)
    return True, "no hydrogen: " + ", ".join(said), tuple(keys)


def balmer_wd(m: dict[str, float]) -> tuple[float, float, str, str] | None:
    """The white-dwarf reading of the strongest of H-beta / H-gamma (H-alpha as fallback):
    (depth, FWHM, sentence, feature name such as "hb_w"). Where no line stands above the
    noise the depth is 0: the data show no hydrogen line, which is a reading too."""
    got, absent = [], []
    for n, lbl in (("hb_w", "H-beta"), ("hg_w", "H-gamma"), ("ha_w", "H-alpha")):
        f, d, w = m.get(f"{n}_fwhm"), m.get(f"{n}_depth"), m.get(f"{n}_ew")
        # An absorption reading needs a positive EW; depth ~1 means a data hole.
        if finite(f) and finite(d) and finite(w) and d < 0.95 and w > 0 and not unanchored(m, n):
            (absent if below_noise(m, n) else got).append((f, d, w, lbl, n))
    if not got:
        if not absent:
            return None
        f, _, _, lbl, n = absent[0]
        return 0.0, f, no_line_text(m, n, lbl), n
    blue = [g for g in got if g[3] != "H-alpha"] or got
    # A shallow line's width is the less certain; of the lines nearly as deep as the
    # deepest, the widest is the one least hurt by noise.
    dmax = max(t[1] for t in blue)
    f, d, w, lbl, n = max((t for t in blue if t[1] >= 0.75 * dmax), key=lambda t: t[0])
    return d, f, f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}, EW {w:.0f} Å", n


def in_emission(m: dict[str, float], name: str) -> bool:
    fw = m.get(f"{name}_fwhm")
    return (
        m.get(f"{name}_em") == 1.0
        and finite(m.get(f"{name}_sig"))
        and m[f"{name}_sig"] > 3
        and m.get(f"{name}_peak", 0) > 0.15
        and finite(fw)
        and 2.0 < fw < 60.0
    )


def extragalactic(e: Evidence, m: dict[str, float], why: str, points: float) -> None:
    """Add the redshift's evidence: a quasar or galaxy is a contaminant for this task."""
    r = getattr(m, "redshift", None)
    z = m.get("z_pipeline", m.get("redshift"))
    if r is not None and r.source == "emission lines" and r.extragalactic:
        found = ", ".join(f"{n} at {w:.0f} Å" for n, w in r.lines)
        e.add(
            points,
            f"broad emission lines fit one redshift, z = {r.z:.3f} ({found}): a {r.kind}, "
            f"while {why}",
            ("redshift",),
            decisive=True,
            at=tuple(w for _, w in r.lines[:1]),
        )
    elif r is not None and r.source == "cross-correlation" and r.extragalactic:
        found = ", ".join(f"{n} at {w:.0f} Å" for n, w in r.lines[:3])
        e.add(
            points,
            f"the {redshift.TEMPLATE_LABELS.get(r.template, r.template)} template matches at z = {r.z:.3f} (r = {r.r:.1f}"
            + (f"; {found}" if found else "")
            + f"): a {r.kind}, while {why}",
            ("redshift",),
            decisive=True,
            at=tuple(w for _, w in r.lines[:1]),
        )
    elif finite(z) and abs(z) > 0.005:
        e.add(
            points,
            f"pipeline redshift z = {z:.3f}: extragalactic (a quasar or galaxy), while {why}",
            ("redshift",),
            decisive=True,
        )
