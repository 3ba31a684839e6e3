"""The rule-based inspector: an expert's checklist, measured on the flux arrays.

No weights, no GPU, no torch; deterministic. For each candidate it measures everything an
astronomer would look at once (continuum-normalised depths, equivalent widths, Balmer
FWHM, emission versus absorption, molecular band-head jumps and Reid-style band indices,
gravity-sensitive Na I and Ca II triplet, the continuum colours), caches the numbers, then
plays the Spec-o3 conversation: a hypothesis from the global shape, one zoom per
diagnostic window of the task and of its usual contaminants (each thought quoting what the
previous window showed), and a final `\\boxed{YES|NO}` with a calibrated P(YES).

Per task the evidence is summed into a score (log-odds-like, positive = the target class);
`p_yes = sigmoid(a * score * coverage + b)` with (a, b) per task fitted by logistic
regression on the tune split of the survey-like benchmark:

    python -m training.benchmark --out data/bench --fit-calibration

prints refitted constants for `CALIBRATION` below.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent import lines
from agent.measure import (
    Arrays,
    arrays_of,
    band_depth,
    continuum_slope,
    coverage,
    flux_ratio,
    head_jump,
    measure_line,
    snr_estimate,
)
from agent.policies.base import Episode, Reply
from agent.protocol import format_turn
from agent.spectrum import Spectrum
from agent.tasks import task_name
from agent.units import air_to_vacuum

NAN = float("nan")


# Per-task calibration p = sigmoid(a * x + b), x = score * (0.4 + 0.6 * coverage). Fitted on
# the tune split of the survey-like benchmark (slope by logistic regression with the
# intercept held at the physics threshold, pooled over tasks with < 5 positive objects):
#     python -m training.benchmark --out data/bench --skip-build --fit-calibration
CALIBRATION: dict[str, tuple[float, float]] = {
    "carbon": (1.625, 0.000),
    "cv": (1.625, 0.000),
    "m_giant": (1.619, 0.000),
    "s_type": (1.625, 0.000),
    "wd": (1.399, 0.000),
}


def _w(key: str) -> float:
    return lines.get(key).wavelength


def _fin(x: float | None) -> bool:
    return x is not None and isinstance(x, float | int) and math.isfinite(x)


def _f(x: float | None) -> float:
    return float(x) if _fin(x) else NAN


# -- measurements -----------------------------------------------------------------------

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
    ("ha_w", "H-alpha", 150.0, [(-215, -165), (185, 235)]),
]
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


def measure_all(spectrum: Spectrum) -> dict[str, float]:
    """Every number the inspector uses, for one spectrum (nan where not measurable)."""
    arr = arrays_of(spectrum)
    m: dict[str, float] = {}
    m["snr"] = _f(snr_estimate(arr))
    m["wave_lo"], m["wave_hi"] = arr.lo, arr.hi
    m["redshift"] = float(spectrum.redshift)
    for name, key, hw, side in _NARROW + _BROAD:
        c = _w(key)
        ln = measure_line(arr, name, c, hw, [(c + a, c + b) for a, b in side])
        if ln is None:
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
    m["na8190_ew"] = na.ew if na is not None else NAN
    # Higher Balmer lines: contrast against the peaks between them. Sharp, separate lines
    # (A/B stars, subdwarfs) give a high contrast; merged white-dwarf wings do not.
    m["h8_contrast"] = _contrast(arr, _w("H8"), (3858.0, 3868.0), (3912.0, 3922.0))
    m["h9_contrast"] = _contrast(arr, _w("H9"), (3812.0, 3820.0), (3858.0, 3868.0))
    for name, key in _HEADS:
        f = lines.get(key)
        m[name] = _f(head_jump(arr, f.wavelength, f.degrade or "red"))
    m["tio5"] = _f(flux_ratio(arr, *_TIO5))
    m["cah2"] = _f(flux_ratio(arr, *_CAH2))
    m["cah3"] = _f(flux_ratio(arr, *_CAH3))
    m["cah1"] = _f(band_depth(arr, (6382.0, 6392.0), [(6347.0, 6357.0), (6412.0, 6422.0)]))
    m.update(continuum_slope(arr))
    m["blue_frac"] = _blue_fraction(arr)
    return m


def _contrast(
    arr: Arrays, center: float, blue: tuple[float, float], red: tuple[float, float]
) -> float:
    if min(coverage(arr, *blue), coverage(arr, *red), coverage(arr, center - 4, center + 4)) < 0.5:
        return NAN
    _, fb = arr.window(*blue)
    _, fr = arr.window(*red)
    _, fc = arr.window(center - 3.0, center + 3.0)
    peak = 0.5 * (np.max(_sm(fb)) + np.max(_sm(fr)))
    if peak <= 0:
        return NAN
    return float(1.0 - np.min(_sm(fc)) / peak)


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


# -- evidence per task -------------------------------------------------------------------


@dataclass
class Evidence:
    """What a task's checklist found: a score, the sentences behind it, and coverage."""

    score: float = 0.0
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    checked: int = 0

    def add(self, points: float, note: str) -> None:
        self.score += points
        if note:
            self.notes.append(note)

    @property
    def coverage(self) -> float:
        total = self.checked + len(self.missing)
        return 1.0 if total == 0 else self.checked / total


def _has(m: dict[str, float], *keys: str) -> bool:
    return all(_fin(m.get(k)) for k in keys)


def _cool_type(m: dict[str, float]) -> float:
    """TiO strength: 0 for no TiO, ~1 for a mid-M star (from TiO5 and the 7054 head)."""
    parts = []
    if _fin(m.get("tio5")):
        parts.append(np.clip((1.0 - m["tio5"]) / 0.5, -0.5, 2.0))
    if _fin(m.get("tio_7054")):
        parts.append(np.clip(m["tio_7054"] / 0.4, -0.5, 2.0))
    if _fin(m.get("tio_6159")):
        parts.append(np.clip(m["tio_6159"] / 0.3, -0.5, 2.0))
    return float(np.mean(parts)) if parts else NAN


def _depth(jump: float) -> float:
    """Band-head depth (fraction of the flux lost across the head) from a log jump."""
    return 1.0 - math.exp(-jump) if _fin(jump) else NAN


def _c2(m: dict[str, float]) -> float:
    vals = [m[k] for k in ("c2_4737", "c2_5165", "c2_5636") if _fin(m.get(k))]
    return float(np.mean(vals)) if vals else NAN


def _balmer_wd(m: dict[str, float]) -> tuple[float, str] | None:
    """The white-dwarf reading of the strongest of H-beta / H-gamma (H-alpha as fallback)."""
    got = []
    for n, lbl in (("hb_w", "H-beta"), ("hg_w", "H-gamma"), ("ha_w", "H-alpha")):
        f, d, w = m.get(f"{n}_fwhm"), m.get(f"{n}_depth"), m.get(f"{n}_ew")
        if _fin(f) and _fin(d) and _fin(w) and d < 0.95:  # depth ~1 means a data hole
            got.append((f, d, w, lbl))
    if not got:
        return None
    blue = [g for g in got if g[3] != "H-alpha"] or got
    # Noise at low SNR pinches a shallow line's half-depth width; of the lines nearly as
    # deep as the deepest, the widest is the one least hurt.
    dmax = max(t[1] for t in blue)
    f, d, w, lbl = max((t for t in blue if t[1] >= 0.75 * dmax), key=lambda t: t[0])
    return d, f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}, EW {w:.0f} Å"


def evidence_wd(m: dict[str, float]) -> Evidence:
    e = Evidence()
    br = m.get("b_r")
    hot = _fin(br) and br > 0.0
    bw = _balmer_wd(m)
    balmer = 0.0
    strong_balmer = False
    if bw is None:
        e.missing.append("Balmer lines")
    else:
        e.checked += 1
        d, txt = bw
        f = float(txt.split("FWHM ")[1].split(" ")[0])
        if d >= 0.12 and f >= 35:
            strong_balmer = True
            balmer = min(4.0, 2.5 + (f - 35) / 15)
            e.add(balmer, f"{txt}: pressure broadening of a DA white dwarf")
        elif d >= 0.2:
            strong_balmer = True
            if f >= 28:
                e.add(0.0, f"{txt}: broad, but short of a typical white dwarf's")
            else:
                e.add(-3.0, f"{txt}: too narrow for a white dwarf (A/B star or hot subdwarf)")
        elif d >= 0.1 and f < 28:
            e.add(-1.0, f"{txt}: weak, narrow Balmer lines (hot subdwarf or B star)")
        else:
            e.add(0.0, f"{txt}: no strong Balmer lines (not a DA)")
    h9 = m.get("h9_contrast")
    if _fin(h9) and strong_balmer:
        e.checked += 1
        if h9 > 0.3:
            e.add(
                -1.5,
                f"H9 is sharp and separate (contrast {h9:.2f}): the high series is resolved as in an A/B star",
            )
        elif h9 < 0.2 and balmer > 0:
            e.add(0.5, f"H8-H10 merged (H9 contrast {h9:.2f}), as pressure broadening does")
    cak, cakd = m.get("cak_ew"), m.get("cak_depth")
    if _fin(cak):
        e.checked += 1
        if cak > 1.5 and _fin(cakd) and cakd > 0.15:
            if strong_balmer:
                e.add(
                    -1.5, f"Ca II K absorption EW {cak:.1f} Å beside strong Balmer lines: an A star"
                )
            elif hot:
                e.add(
                    3.0,
                    f"Ca II K EW {cak:.1f} Å on a blue continuum with no hydrogen: a DZ white dwarf",
                )
    if not strong_balmer:
        he = [
            m.get(f"{k}_ew")
            for k in ("hei4473", "hei4923", "hei5877")
            if _fin(m.get(f"{k}_ew")) and m.get(f"{k}_sig", 0.0) > 3.0
        ]
        he2, he2_sig = m.get("heii4687_ew"), m.get("heii4687_sig")
        he2_abs = _fin(he2) and he2 > 0.3 and _fin(he2_sig) and he2_sig > 3
        if he and sum(1 for x in he if x > 1.0) >= 2 and hot:
            if he2_abs:
                e.add(
                    -1.0,
                    f"He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) together with He II 4686 "
                    f"(EW {he2:.1f} Å): an O star or He-rich hot subdwarf; a DB white dwarf is too cool for He II",
                )
            else:
                e.add(
                    3.0,
                    f"He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) with no Balmer lines "
                    "and no He II: a DB white dwarf",
                )
        c2 = m.get("c2_5165")
        if _fin(c2) and c2 > 0.15 and _fin(br) and br > -0.15:
            e.add(
                3.0,
                f"C2 Swan 5165 head depth {_depth(c2):.2f} on a warm continuum (log F4600/F6100 = {br:.2f}): a DQ white dwarf",
            )
        # A DC white dwarf: a hot continuum and no line at all. OB stars and hot subdwarfs
        # always show Balmer or He I lines at these depths, so featurelessness is the test.
        broad = [m.get(k) for k in ("hb_w_depth", "hg_w_depth") if _fin(m.get(k))]
        narrow = [
            (m.get(f"{k}_ew"), m.get(f"{k}_sig", 0.0))
            for k in ("hb", "hg", "hei4473", "hei5877", "cak")
            if _fin(m.get(f"{k}_ew"))
        ]
        lines_seen = [ew for ew, sig in narrow if ew > 2.0 and sig > 4.0]
        if (
            broad
            and len(narrow) >= 3
            and max(broad) < 0.12
            and not lines_seen
            and hot
            and not (_fin(c2) and c2 > 0.15)
        ):
            e.add(
                2.5,
                f"a featureless blue continuum: Balmer lines shallower than {max(broad):.2f} of the continuum "
                "and no He I or Ca II line of EW above 2 Å, as in a DC white dwarf",
            )
    if _fin(br):
        e.checked += 1
        if br < -0.2:
            e.add(
                -2.0, f"red continuum (log F4600/F6100 = {br:.2f}): too cool for most white dwarfs"
            )
    else:
        e.missing.append("continuum colour")
    if _fin(m.get("tio5")) and m["tio5"] < 0.75 and not hot:
        e.add(-2.0, f"TiO bands (TiO5 = {m['tio5']:.2f}): an M star dominates")
    e.score -= 1.0  # prior: most candidates are not white dwarfs
    return e


def _emission(m: dict[str, float], name: str) -> bool:
    fw = m.get(f"{name}_fwhm")
    return (
        m.get(f"{name}_em") == 1.0
        and _fin(m.get(f"{name}_sig"))
        and m[f"{name}_sig"] > 3
        and m.get(f"{name}_peak", 0) > 0.15
        and _fin(fw)
        and 2.0 < fw < 60.0
    )


def evidence_cv(m: dict[str, float]) -> Evidence:
    e = Evidence()
    z = m.get("redshift", 0.0)
    if _fin(z) and abs(z) > 0.005:
        e.add(
            -6.0, f"pipeline redshift z = {z:.3f}: extragalactic, while a CV sits at z ~ 0 (a QSO?)"
        )
    em = {}
    for name, lbl in (("ha", "H-alpha"), ("hb", "H-beta"), ("hg", "H-gamma")):
        ew, pk, fw = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm"))
        if not _fin(ew):
            e.missing.append(lbl)
            continue
        e.checked += 1
        em[name] = _emission(m, name)
        if em[name]:
            broad = fw >= 12.0
            pts = (
                {"ha": 1.5, "hb": 2.0, "hg": 1.0}[name] + 1.0
                if broad
                else {"ha": 0.0, "hb": 0.5, "hg": 0.3}[name]
            )
            e.add(
                pts,
                f"{lbl} in emission: EW {ew:.1f} Å, peak {pk:.2f} above the continuum, FWHM {fw:.0f} Å"
                + (" (broad, as from a disc)" if broad else " (narrow)"),
            )
        elif ew > 1.0 and m.get(f"{name}_sig", 0) > 3:
            e.add(
                {"ha": -1.5, "hb": -2.0, "hg": -1.0}[name], f"{lbl} in absorption (EW {ew:.1f} Å)"
            )
    broad_any = any(em.get(n) and m.get(f"{n}_fwhm", 0) >= 12.0 for n in ("ha", "hb", "hg"))
    if any(em.values()) and not broad_any:
        e.add(
            -1.5,
            "all Balmer emission is narrow (FWHM < 12 Å): a Be star, a chromosphere or a nebula rather than a disc",
        )
    if em.get("ha") and em.get("hb") is False and "hb" in em:
        e.add(
            -1.0,
            "H-alpha emission without H-beta emission: a steep decrement, as in Be stars and chromospheres",
        )
    for name, lbl, pts in (
        ("hei5877", "He I 5876", 1.0),
        ("hei6680", "He I 6678", 1.0),
        ("heii4687", "He II 4686", 1.5),
        ("hei4923", "He I 4922", 0.5),
    ):
        if not _fin(m.get(f"{name}_ew")):
            continue
        e.checked += 1
        if _emission(m, name):
            fw = m[f"{name}_fwhm"]
            e.add(
                pts if fw >= 8.0 else 0.3,
                f"{lbl} in emission (EW {m[f'{name}_ew']:.1f} Å, FWHM {fw:.0f} Å)",
            )
    ct = _cool_type(m)
    if _fin(ct) and ct > 0.4:
        if not (em.get("hb") and m.get("hb_fwhm", 0) >= 12):
            e.add(
                -2.0,
                f"TiO bands of an M dwarf (TiO strength {ct:.1f}) without broad H-beta emission: chromospheric activity at most",
            )
    if not any(em.values()):
        e.add(-2.0, "no Balmer emission")
    e.score -= 1.0
    return e


def evidence_carbon(m: dict[str, float]) -> Evidence:
    e = Evidence()
    j = m.get("c2_5165")
    ct = _cool_type(m)
    tio = (_fin(m.get("tio5")) and m["tio5"] < 0.8) or (
        _fin(m.get("tio_7054")) and m["tio_7054"] > 0.15
    )
    if not _fin(j):
        e.missing.append("C2 5165 head")
    else:
        e.checked += 1
        if j > 0.2:
            e.add(
                3.0,
                f"C2 Swan 5165 head: flux jumps by {math.exp(j):.2f}x across it, the band degrading to the blue",
            )
        elif j > 0.1:
            e.add(1.5, f"weak C2 Swan 5165 head (depth {_depth(j):.2f})")
        elif j < 0.03:
            e.add(
                -2.5,
                f"no C2 Swan 5165 head (depth {_depth(j):.2f}"
                + ("; the TiO 5167 band degrades the other way)" if j < -0.1 else ")"),
            )
    for k, lbl in (("c2_5636", "C2 5636"), ("c2_4737", "C2 4737")):
        v = m.get(k)
        if _fin(v):
            e.checked += 1
            if v > 0.15 and not tio:
                e.add(1.0 if k == "c2_5636" else 0.5, f"{lbl} head depth {_depth(v):.2f}")
        else:
            e.missing.append(lbl)
    cn = [m.get(k) for k in ("cn_7874", "cn_8067") if _fin(m.get(k))]
    if cn and np.mean(cn) > 0.08 and not tio:
        e.add(0.5, f"CN bands (head depths {', '.join(f'{_depth(x):.2f}' for x in cn)})")
    if _fin(ct) or _fin(m.get("tio5")):
        e.checked += 1
        if tio:
            e.add(
                -2.5,
                f"TiO bands present (TiO5 {m.get('tio5', NAN):.2f}, 7054 head depth {_depth(m.get('tio_7054', NAN)):.2f}): an oxygen-rich M or S star",
            )
    else:
        e.missing.append("TiO 7054")
    br = m.get("b_r")
    if _fin(br):
        if br > -0.05:
            e.add(
                -4.0,
                f"blue continuum (log F4600/F6100 = {br:.2f}): too hot for a carbon star (a DQ white dwarf shows C2 too)",
            )
    e.score -= 0.5
    return e


# ZrO band-head jumps of ordinary (oxygen-rich, Zr-poor) M giants grow with their TiO: the
# heads sit on TiO bands (ZrO 4620 beside TiO 4626, ZrO 5551 inside the TiO 5448 system).
# The reference is a straight line in the TiO 7054 head jump with its robust scatter,
# fitted on the M giants of the benchmark's tune split; an S star is an M giant whose
# ZrO heads stand above that line. (head: intercept, slope, scatter)
_ZRO_OF_M_GIANTS: dict[str, tuple[float, float, float]] = {
    "zro_4620": (-0.046, 0.429, 0.114),
    "zro_5551": (-0.014, 0.201, 0.073),
    "zro_6474": (0.103, -0.060, 0.081),
}


def zro_excess(m: dict[str, float]) -> tuple[float, list[tuple[str, float, float]]]:
    """Excess of ZrO 6474 over an M giant's at the same TiO, in units of its scatter.

    ZrO 6474 leads: it is the cleanest head (tune-split M giants never exceed 2.2 sigma
    there, while the 4620 and 5551 heads, blended with TiO, scatter to 4-6 sigma); the mean
    over the other heads stands in where 6474 is not covered. Returns (z, [(head, jump, z)]);
    nan without TiO 7054 or any ZrO head.
    """
    t = m.get("tio_7054")
    if not _fin(t):
        return NAN, []
    got = []
    for k, (a, b, sd) in _ZRO_OF_M_GIANTS.items():
        if _fin(m.get(k)):
            got.append((k, m[k], (m[k] - (a + b * t)) / sd))
    if not got:
        return NAN, []
    lead = [z for k, _, z in got if k == "zro_6474"]
    z = lead[0] if lead else float(np.mean([z for _, _, z in got])) - 1.0
    return float(z), got


def evidence_s_type(m: dict[str, float]) -> Evidence:
    e = Evidence()
    zmean, heads = zro_excess(m)
    if not heads:
        e.missing.append("ZrO 4620/5551/6474 heads")
    else:
        e.checked += 1
        txt = ", ".join(f"ZrO {k[4:]} depth {_depth(j):.2f}" for k, j, _ in heads)
        txt += f" at TiO 7054 depth {_depth(m['tio_7054']):.2f}"
        if zmean > 2.5:
            e.add(
                3.5,
                f"{txt}: ZrO stands {zmean:.1f} sigma above an M giant of the same TiO strength, the mark of an S star",
            )
        elif zmean > 1.5:
            e.add(
                1.0,
                f"{txt}: ZrO {zmean:.1f} sigma above an M giant's, possibly a weak MS-type star",
            )
        else:
            e.add(
                -1.0,
                f"{txt}: ZrO no stronger than in an M giant of the same TiO ({zmean:+.1f} sigma), so TiO alone explains the heads",
            )
    lao = m.get("lao_7403")
    if _fin(lao):
        e.checked += 1
        if lao > 0.08:
            e.add(1.5, f"LaO 7403 head depth {_depth(lao):.2f}: LaO, found only in S stars")
        elif lao < 0.0:
            e.add(-0.5, f"no LaO 7403 head (depth {_depth(lao):.2f})")
    else:
        e.missing.append("LaO 7403")
    if _fin(m.get("tio5")):
        e.checked += 1
        if m["tio5"] > 0.92 and not (_fin(zmean) and zmean > 2.5):
            e.add(-2.0, f"no TiO (TiO5 index {m['tio5']:.2f}) and no ZrO: not a cool S or M star")
    c2 = m.get("c2_5165")
    if _fin(c2) and c2 > 0.15:
        e.add(
            -4.0,
            f"C2 Swan 5165 head depth {_depth(c2):.2f}: a carbon star, whose ZrO-like heads are C2 and CN",
        )
    br = m.get("b_r")
    if _fin(br) and br > -0.1:
        e.add(-2.0, f"continuum too blue for an S star (log F4600/F6100 = {br:.2f})")
    e.score -= 1.0
    return e


def evidence_m_giant(m: dict[str, float]) -> Evidence:
    e = Evidence()
    t5, j = m.get("tio5"), m.get("tio_7054")
    m_type = no_tio = False
    if not (_fin(t5) or _fin(j)):
        e.missing.append("TiO bands")
    else:
        e.checked += 1
        m_type = (_fin(t5) and t5 < 0.82) or (_fin(j) and j > 0.12)
        no_tio = (not _fin(t5) or t5 > 0.9) and (not _fin(j) or j < 0.06)
        txt = f"TiO5 index {t5:.2f}, TiO 7054 head depth {_depth(j):.2f}"
        if m_type:
            e.add(1.0, f"TiO bands ({txt}): an M-type star")
        elif no_tio:
            e.add(-4.0, f"no TiO bands ({txt}): not an M star")
        else:
            e.add(-0.5, f"weak TiO ({txt}): K/M boundary")
    # Gravity: CaH relative to TiO (Reid et al. 1995 indices). Dwarfs follow
    # CaH3 ~ 0.60 + 0.37 TiO5; giants have weaker CaH at the same TiO.
    if _has(m, "cah3", "tio5"):
        e.checked += 1
        d = m["cah3"] - (0.60 + 0.37 * m["tio5"])
        txt = f"CaH3 {m['cah3']:.2f} at TiO5 {m['tio5']:.2f} (excess {d:+.2f} over the dwarf sequence)"
        if d > 0.04:
            e.add(2.0 + min(1.0, (d - 0.04) * 20), f"{txt}: weak CaH, low gravity")
        elif d < 0.015:
            e.add(-2.5, f"{txt}: CaH as strong as a dwarf's")
        else:
            e.add(0.0, f"{txt}: gravity ambiguous")
    else:
        e.missing.append("CaH/TiO indices")
    na = m.get("na8190_ew")
    if _fin(na):
        e.checked += 1
        if na > 1.8:
            e.add(-1.5, f"Na I 8183/8195 EW {na:.1f} Å: strong, as in a dwarf")
        elif na < 1.0:
            e.add(1.0, f"Na I 8183/8195 EW {na:.1f} Å: weak, as in a giant")
    else:
        e.missing.append("Na I 8183/8195")
    cat = [m.get(k) for k in ("cat8544_ew", "cat8664_ew") if _fin(m.get(k))]
    if cat:
        e.checked += 1
        s = float(sum(cat))
        if s > 7.0:
            e.add(0.5, f"Ca II triplet strong (8542+8662 EW {s:.1f} Å), as in giants")
    else:
        e.missing.append("Ca II triplet")
    c2 = m.get("c2_5165")
    if _fin(c2) and c2 > 0.15:
        e.add(-3.0, f"C2 Swan 5165 head depth {_depth(c2):.2f}: a carbon star, not an M giant")
    # Gravity only matters for an M star: without TiO the answer is no, however giant-like.
    if (_fin(t5) or _fin(j)) and not m_type:
        e.score = min(e.score, -3.0 if no_tio else 0.5 * e.score - 1.0)
    return e


EVIDENCE: dict[str, Callable[[dict[str, float]], Evidence]] = {
    "cv": evidence_cv,
    "carbon": evidence_carbon,
    "s_type": evidence_s_type,
    "m_giant": evidence_m_giant,
    "wd": evidence_wd,
}

# Zoom windows per task (rest-frame vacuum Angstrom): the task's own diagnostics first,
# then those that rule in the competing explanations.
ZOOMS: dict[str, list[tuple[tuple[float, float], str]]] = {
    "wd": [
        ((4650.0, 5080.0), "H-beta profile"),
        ((4150.0, 4500.0), "H-gamma profile"),
        ((3760.0, 4000.0), "H8-H10 and Ca II K (A star check)"),
        ((5820.0, 5940.0), "He I 5876 (DB check)"),
        ((6400.0, 6730.0), "H-alpha"),
    ],
    "cv": [
        ((6450.0, 6720.0), "H-alpha and He I 6678"),
        ((4780.0, 4950.0), "H-beta"),
        ((5830.0, 5930.0), "He I 5876"),
        ((4630.0, 4730.0), "He II 4686 and Bowen blend"),
        ((7000.0, 7200.0), "TiO 7054 (M dwarf check)"),
    ],
    "carbon": [
        ((5050.0, 5250.0), "C2 5165 head"),
        ((5550.0, 5700.0), "C2 5636 head"),
        ((4650.0, 4800.0), "C2 4737 head"),
        ((7000.0, 7200.0), "TiO 7054 (M star check)"),
        ((7800.0, 8150.0), "CN 7874 and 8067"),
    ],
    "s_type": [
        ((6400.0, 6560.0), "ZrO 6474 head"),
        ((5480.0, 5650.0), "ZrO 5551 head"),
        ((4560.0, 4700.0), "ZrO 4620 head"),
        ((7340.0, 7470.0), "LaO 7403"),
        ((7000.0, 7200.0), "TiO 7054 (M giant check)"),
    ],
    "m_giant": [
        ((7000.0, 7200.0), "TiO 7054 head and TiO5"),
        ((6780.0, 7060.0), "CaH 6750-6990 (gravity)"),
        ((8150.0, 8240.0), "Na I 8183/8195 (gravity)"),
        ((8480.0, 8700.0), "Ca II triplet"),
        ((5050.0, 5250.0), "C2 5165 / TiO 5167 (carbon check)"),
    ],
}

# Which measurements each zoom's thought reports.
_ZOOM_KEYS: dict[str, list[str]] = {
    "H-beta profile": ["hb_w_fwhm", "hb_w_depth", "hb_w_ew"],
    "H-gamma profile": ["hg_w_fwhm", "hg_w_depth", "hg_w_ew"],
    "H8-H10 and Ca II K (A star check)": ["h9_contrast", "h8_contrast", "cak_ew"],
    "He I 5876 (DB check)": ["hei5877_ew", "hei5877_em"],
    "H-alpha": ["ha_w_fwhm", "ha_w_depth", "ha_ew"],
    "H-alpha and He I 6678": ["ha_ew", "ha_peak", "ha_fwhm", "hei6680_ew"],
    "H-beta": ["hb_ew", "hb_peak", "hb_fwhm"],
    "He I 5876": ["hei5877_ew", "hei5877_em"],
    "He II 4686 and Bowen blend": ["heii4687_ew", "heii4687_em"],
    "TiO 7054 (M dwarf check)": ["tio_7054", "tio5"],
    "C2 5165 head": ["c2_5165"],
    "C2 5636 head": ["c2_5636"],
    "C2 4737 head": ["c2_4737"],
    "TiO 7054 (M star check)": ["tio_7054", "tio5"],
    "CN 7874 and 8067": ["cn_7874", "cn_8067"],
    "ZrO 6474 head": ["zro_6474"],
    "ZrO 5551 head": ["zro_5551"],
    "ZrO 4620 head": ["zro_4620"],
    "LaO 7403": ["lao_7403"],
    "TiO 7054 (M giant check)": ["tio_7054", "tio5"],
    "TiO 7054 head and TiO5": ["tio_7054", "tio5"],
    "CaH 6750-6990 (gravity)": ["cah2", "cah3"],
    "Na I 8183/8195 (gravity)": ["na8190_ew"],
    "Ca II triplet": ["cat8544_ew", "cat8664_ew"],
    "C2 5165 / TiO 5167 (carbon check)": ["c2_5165"],
}


def resolve(task: str) -> str:
    return task_name(task)


def calibrated(task: str, score: float, coverage_frac: float) -> float:
    a, b = CALIBRATION.get(task, (1.0, 0.0))
    # Missing diagnostics shrink the evidence towards the prior rather than inventing any.
    x = a * score * (0.4 + 0.6 * coverage_frac) + b
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))


@dataclass
class Verdict:
    task: str
    p_yes: float
    evidence: Evidence
    measurements: dict[str, float]

    @property
    def answer(self) -> str:
        return "YES" if self.p_yes > 0.5 else "NO"


def inspect(spectrum: Spectrum, task: str, measurements: dict[str, float] | None = None) -> Verdict:
    """The inspector's verdict on one spectrum for one task, without the conversation."""
    t = resolve(task)
    if t not in EVIDENCE:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(EVIDENCE)}")
    m = measurements if measurements is not None else measure_all(spectrum)
    ev = EVIDENCE[t](m)
    return Verdict(t, calibrated(t, ev.score, ev.coverage), ev, m)


# -- the conversation ----------------------------------------------------------------------


def _global_thought(m: dict[str, float], task: str) -> str:
    br, ct, c2 = m.get("b_r"), _cool_type(m), _c2(m)
    parts = [f"The spectrum covers {m['wave_lo']:.0f}-{m['wave_hi']:.0f} Å at SNR ~{m['snr']:.0f}."]
    if _fin(m.get("snr")) and m["snr"] < 8:
        parts.append(
            "That is noisy: lines weaker than a few Å of EW will not be trusted either way."
        )
    if _fin(br):
        if br > 0.15:
            parts.append(f"The continuum is blue (log F4600/F6100 = {br:.2f}): a hot object.")
        elif br < -0.25:
            parts.append(f"The continuum is red (log F4600/F6100 = {br:.2f}): a cool object.")
        else:
            parts.append(f"The continuum is moderate in colour (log F4600/F6100 = {br:.2f}).")
    if _fin(ct) and ct > 0.35:
        parts.append("Saw-tooth bands in the red suggest TiO.")
    if _fin(c2) and c2 > 0.12:
        parts.append("Sharp band edges in the green suggest C2.")
    hyp = {
        "wd": "I will measure the Balmer line widths and check the A/B-star and subdwarf alternatives.",
        "cv": "I will check the Balmer and helium lines for disc emission, and rule out active M dwarfs, Be stars and QSOs.",
        "carbon": "I will look for C2 Swan band heads and CN, and check for TiO of an M giant.",
        "s_type": "I will look for ZrO and LaO band heads beside the TiO of an ordinary M giant.",
        "m_giant": "I will confirm TiO and then test gravity with CaH, Na I 8183/8195 and the Ca II triplet.",
    }[task]
    return " ".join(parts + [hyp])


def _noisy(m: dict[str, float], name: str) -> bool:
    """A line whose EW is under 3 sigma of the continuum noise tells nothing either way."""
    sig = m.get(f"{name}_sig")
    return not _fin(sig) or sig < 3.0


def _say_balmer_wd(m: dict[str, float], name: str, lbl: str) -> str:
    f, d, w = (m.get(f"{name}_w_{k}") for k in ("fwhm", "depth", "ew"))
    if not (_fin(f) and _fin(d) and _fin(w)):
        return f"{lbl} could not be measured here (outside the coverage or in a gap)."
    head = f"{lbl} in absorption, FWHM {f:.0f} Å, depth {d:.2f}, EW {w:.0f} Å"
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
    if f < 28:
        return (
            f"{head}: narrow, as in an A/B star or a hot subdwarf, not the pressure-broadened "
            "line of a DA white dwarf."
        )
    return f"{head}: between a main-sequence star's and a white dwarf's width, so this line alone does not decide."


def _say_emission(m: dict[str, float], name: str, lbl: str) -> str:
    ew, pk, fw = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm"))
    if not _fin(ew):
        return f"{lbl} could not be measured here (outside the coverage or in a gap)."
    if _noisy(m, name):
        return f"{lbl}: nothing above the noise (EW {ew:+.1f} Å, under 3 sigma), so it neither supports nor rules out a disc."
    if _emission(m, name):
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


def _say_head(m: dict[str, float], key: str, lbl: str, meaning: str) -> str:
    j = m.get(key)
    if not _fin(j):
        return f"The {lbl} band head falls outside the coverage (or in a gap), so it cannot be checked."
    d = _depth(j)
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


def _say_tio(m: dict[str, float], purpose: str) -> str:
    t5, j = m.get("tio5"), m.get("tio_7054")
    if not (_fin(t5) or _fin(j)):
        return "TiO 7054 falls outside the coverage, so the M-star check cannot be made."
    parts = []
    if _fin(j):
        parts.append(f"TiO 7054 band-head depth {_depth(j):.2f}")
    if _fin(t5):
        parts.append(f"TiO5 index {t5:.2f}")
    strong = (_fin(t5) and t5 < 0.82) or (_fin(j) and j > 0.12)
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


def _say_gravity_cah(m: dict[str, float]) -> str:
    if not _has(m, "cah3", "tio5"):
        return "The CaH bands fall outside the coverage, so gravity from CaH cannot be judged."
    d = m["cah3"] - (0.60 + 0.37 * m["tio5"])
    txt = f"CaH3 index {m['cah3']:.2f} at TiO5 {m['tio5']:.2f} ({d:+.2f} from the dwarf sequence)"
    if d > 0.04:
        return f"{txt}: CaH weak for the TiO strength, giant-like low gravity."
    if d < 0.015:
        return f"{txt}: CaH as strong as a dwarf's, pointing to an M dwarf."
    return f"{txt}: between giants and dwarfs, gravity ambiguous."


def _say_na(m: dict[str, float]) -> str:
    na = m.get("na8190_ew")
    if not _fin(na):
        return "Na I 8183/8195 falls outside the coverage (or in a gap)."
    if na > 1.8:
        return f"Na I 8183/8195 EW {na:.1f} Å: strong, as in a high-gravity dwarf."
    if na < 1.0:
        return f"Na I 8183/8195 EW {na:.1f} Å: weak, as in a low-gravity giant."
    return f"Na I 8183/8195 EW {na:.1f} Å: intermediate, no gravity verdict from sodium."


def _say_cat(m: dict[str, float]) -> str:
    cat = [m.get(k) for k in ("cat8544_ew", "cat8664_ew") if _fin(m.get(k))]
    if not cat:
        return "The Ca II triplet falls outside the coverage."
    s = float(sum(cat))
    if s > 7.0:
        return f"Ca II 8542+8662 EW {s:.1f} Å: strong, as in giants."
    return f"Ca II 8542+8662 EW {s:.1f} Å: not strong enough to argue for a giant on its own."


def _say_high_balmer(m: dict[str, float]) -> str:
    h9, cak, cakd = m.get("h9_contrast"), m.get("cak_ew"), m.get("cak_depth")
    parts = []
    if _fin(h9):
        if h9 > 0.3:
            parts.append(
                f"H9 stands out sharply (contrast {h9:.2f} against its neighbours): the high "
                "series is resolved as in an A/B star"
            )
        elif h9 < 0.2:
            parts.append(
                f"H8-H10 blend together (H9 contrast {h9:.2f}), as pressure broadening in a white dwarf does"
            )
        else:
            parts.append(f"H9 contrast {h9:.2f}: partly resolved, inconclusive")
    if _fin(cak):
        if cak > 1.5 and _fin(cakd) and cakd > 0.15:
            parts.append(
                f"Ca II K in absorption, EW {cak:.1f} Å: an A star beside Balmer lines, a DZ white "
                "dwarf on a featureless hot continuum"
            )
        else:
            parts.append(f"Ca II K weak (EW {cak:.1f} Å): no metal line of an A star")
    if not parts:
        return "H8-H10 and Ca II K fall outside the coverage (the blue end is missing)."
    return "; ".join(parts) + "."


def _say_he(m: dict[str, float], name: str, lbl: str, task: str) -> str:
    ew = m.get(f"{name}_ew")
    if not _fin(ew):
        return f"{lbl} falls outside the coverage (or in a gap)."
    if task == "cv":
        return _say_emission(m, name, lbl)
    if _noisy(m, name):
        return f"{lbl}: nothing above the noise (EW {ew:+.1f} Å), so no helium atmosphere shows."
    if ew > 1.0:
        return (
            f"{lbl} in absorption, EW {ew:.1f} Å: helium, as in a DB white dwarf (if Balmer lines are "
            "absent) or a hot B/sdO star (if narrow Balmer lines are present)."
        )
    return f"{lbl} EW {ew:.1f} Å: weak at most."


def _say_lao(m: dict[str, float]) -> str:
    lao = m.get("lao_7403")
    if not _fin(lao):
        return "LaO 7403 falls outside the coverage (or in a gap), so that S-star check is unavailable."
    if lao > 0.08:
        return f"LaO 7403 band-head depth {_depth(lao):.2f}: LaO, seen only in S stars."
    return f"LaO 7403 band-head depth {_depth(lao):.2f}: no LaO, as in an ordinary M giant (weak MS stars lack it too)."


def _say_zro(m: dict[str, float], key: str, lbl: str) -> str:
    j = m.get(key)
    if not _fin(j):
        return f"The {lbl} head falls outside the coverage (or in a gap)."
    a, b, sd = _ZRO_OF_M_GIANTS[key]
    t = m.get("tio_7054")
    if not _fin(t):
        return f"{lbl} band-head depth {_depth(j):.2f}, but without TiO 7054 there is no M-giant reference to compare it with."
    exp = a + b * t
    z = (j - exp) / sd
    txt = (
        f"{lbl} band-head depth {_depth(j):.2f}, where an M giant with this TiO (7054 depth "
        f"{_depth(t):.2f}) shows {_depth(exp):.2f}: {z:+.1f} sigma"
    )
    if z > 2.5:
        return f"{txt}, ZrO beyond what TiO explains, as in an S star."
    if z > 1.5:
        return (
            f"{txt}, a hint of ZrO (a weak MS-type star?) but within reach of an M giant's scatter."
        )
    return f"{txt}, nothing an ordinary M giant would not show."


def _describe(label: str, m: dict[str, float], task: str = "") -> str:
    """What a zoom window showed, in an astronomer's words with the measured numbers."""
    say: dict[str, Callable[[], str]] = {
        "H-beta profile": lambda: _say_balmer_wd(m, "hb", "H-beta"),
        "H-gamma profile": lambda: _say_balmer_wd(m, "hg", "H-gamma"),
        "H8-H10 and Ca II K (A star check)": lambda: _say_high_balmer(m),
        "He I 5876 (DB check)": lambda: _say_he(m, "hei5877", "He I 5876", "wd"),
        "H-alpha": lambda: _say_balmer_wd(m, "ha", "H-alpha"),
        "H-alpha and He I 6678": lambda: (
            _say_emission(m, "ha", "H-alpha") + " " + _say_he(m, "hei6680", "He I 6678", "cv")
        ),
        "H-beta": lambda: _say_emission(m, "hb", "H-beta"),
        "He I 5876": lambda: _say_he(m, "hei5877", "He I 5876", "cv"),
        "He II 4686 and Bowen blend": lambda: (
            _say_emission(m, "heii4687", "He II 4686")
            + " (He II emission marks a magnetic CV or a nova-like when present.)"
        ),
        "TiO 7054 (M dwarf check)": lambda: _say_tio(m, "cv"),
        "C2 5165 head": lambda: _say_head(
            m,
            "c2_5165",
            "C2 Swan 5165",
            "a carbon star, or a DQ white dwarf if the continuum is hot",
        ),
        "C2 5636 head": lambda: _say_head(
            m, "c2_5636", "C2 Swan 5636", "carbon molecules confirmed"
        ),
        "C2 4737 head": lambda: _say_head(
            m, "c2_4737", "C2 Swan 4737", "carbon molecules confirmed"
        ),
        "TiO 7054 (M star check)": lambda: _say_tio(m, "carbon"),
        "CN 7874 and 8067": lambda: " ".join(
            _say_head(m, k, lbl, "CN, strong in carbon stars")
            for k, lbl in (("cn_7874", "CN 7874"), ("cn_8067", "CN 8067"))
        ),
        "ZrO 6474 head": lambda: _say_zro(m, "zro_6474", "ZrO 6474"),
        "ZrO 5551 head": lambda: _say_zro(m, "zro_5551", "ZrO 5551"),
        "ZrO 4620 head": lambda: _say_zro(m, "zro_4620", "ZrO 4620"),
        "LaO 7403": lambda: _say_lao(m),
        "TiO 7054 (M giant check)": lambda: _say_tio(m, "s_type"),
        "TiO 7054 head and TiO5": lambda: _say_tio(m, "m_giant"),
        "CaH 6750-6990 (gravity)": lambda: _say_gravity_cah(m),
        "Na I 8183/8195 (gravity)": lambda: _say_na(m),
        "Ca II triplet": lambda: _say_cat(m),
        "C2 5165 / TiO 5167 (carbon check)": lambda: _say_head(
            m, "c2_5165", "C2 Swan 5165", "a carbon star, not an M giant"
        ),
    }
    fn = say.get(label)
    if fn is None:
        return f"In the {label} window nothing was measured."
    return fn()


@dataclass
class _Plan:
    zooms: list[tuple[tuple[float, float], str]]
    skipped: list[str]
    verdict: Verdict


class RulesPolicy:
    """Deterministic expert-style inspector (the default backend)."""

    name = "rules"
    model_id: str | None = None
    renderer = "fast"

    def __init__(self, max_zooms: int = 5, cache_size: int = 256):
        self.max_zooms = max_zooms
        self._cache: OrderedDict[tuple[str, int, str], _Plan] = OrderedDict()
        self._cache_size = cache_size

    def _plan(self, ep: Episode) -> _Plan:
        key = (ep.candidate_id, id(ep.spectrum), ep.task)
        plan = self._cache.get(key)
        if plan is not None:
            return plan
        task = resolve(ep.task)
        verdict = inspect(ep.spectrum, task)
        arr = arrays_of(ep.spectrum)
        zooms, skipped = [], []
        for window, label in ZOOMS.get(task, []):
            if coverage(arr, *window) < 0.2:
                skipped.append(f"{label} ({window[0]:.0f}-{window[1]:.0f} Å)")
            else:
                zooms.append((window, label))
        limit = max(0, min(self.max_zooms, ep.max_turns - 1))
        plan = _Plan(zooms[:limit], skipped, verdict)
        self._cache[key] = plan
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return plan

    def act(self, episodes: list[Episode]) -> list[Reply]:
        out = []
        for ep in episodes:
            try:
                out.append(self._act_one(ep))
            except Exception as exc:  # one bad spectrum never ends a batch
                out.append(Reply(text="", error=f"rules: {type(exc).__name__}: {exc}"))
        return out

    def _act_one(self, ep: Episode) -> Reply:
        plan = self._plan(ep)
        m = plan.verdict.measurements
        n_zoom = sum(1 for s in ep.steps if s.tool_call is not None)
        i = n_zoom
        prev = plan.zooms[i - 1][1] if 0 < i <= len(plan.zooms) else None
        if i < len(plan.zooms):
            window, label = plan.zooms[i]
            if i == 0:
                thought = _global_thought(m, plan.verdict.task)
                if plan.skipped:
                    thought += " Not covered by the data: " + "; ".join(plan.skipped) + "."
            else:
                thought = _describe(prev, m) if prev else ""
            thought += f" Next I zoom into {label}."
            keys = _ZOOM_KEYS.get(prev or "", [])
            meas = {k: float(m[k]) for k in keys if _fin(m.get(k))}
            return Reply(
                text=format_turn(thought, window, label=label),
                measurements=meas,
            )
        # Final answer.
        self._cache.pop((ep.candidate_id, id(ep.spectrum), ep.task), None)
        v = plan.verdict
        ev = v.evidence
        parts = []
        if prev:
            parts.append(_describe(prev, m))
        parts += [n.rstrip(".") + "." for n in ev.notes]
        if ev.missing:
            parts.append(
                "Outside the coverage: " + ", ".join(ev.missing) + ", so I am less certain."
            )
        conf = v.p_yes if v.answer == "YES" else 1 - v.p_yes
        parts.append(f"Overall score {ev.score:+.1f}; P(YES) = {v.p_yes:.2f}.")
        target = {
            "wd": "a white dwarf",
            "cv": "a cataclysmic variable",
            "carbon": "a carbon star",
            "s_type": "an S-type star",
            "m_giant": "an M giant",
        }[v.task]
        key_note = ev.notes[0] if ev.notes else "no diagnostic feature measured"
        expl = (
            f"{'Consistent with' if v.answer == 'YES' else 'Not'} {target} "
            f"(confidence {conf:.2f}): {key_note}."
        )
        text = format_turn(" ".join(parts), answer=v.answer, explanation=expl)
        meas = {k: float(val) for k, val in m.items() if _fin(val)}
        meas["score"] = float(ev.score)
        meas["coverage"] = float(ev.coverage)
        return Reply(text=text, p_yes=float(v.p_yes), measurements=meas)
