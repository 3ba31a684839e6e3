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

import json
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
from agent.spectrum import Spectrum

TOOL_NAME = "spectral_visualization_tool"
NAN = float("nan")

# Task names Loupe uses, with the SpecVI-Bench aliases.
_ALIASES = {"cc": "carbon", "c_star": "carbon", "ss": "s_type", "s_star": "s_type",
            "gm": "m_giant", "mgiant": "m_giant"}

# Per-task calibration p = sigmoid(a * score + b). Fitted by logistic regression of the
# tune-split labels on the rule score (python -m training.benchmark --fit-calibration).
CALIBRATION: dict[str, tuple[float, float]] = {
    "cv": (1.0, 0.0),
    "carbon": (1.0, 0.0),
    "s_type": (1.0, 0.0),
    "m_giant": (1.0, 0.0),
    "wd": (1.0, 0.0),
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
    ("c2_4737", "C2 4737"), ("c2_5165", "C2 5165"), ("c2_5636", "C2 5636"),
    ("tio_4955", "TiO 4955"), ("tio_5448", "TiO 5448"), ("tio_6159", "TiO 6159"),
    ("tio_7054", "TiO 7054"), ("tio_8432", "TiO 8432"),
    ("zro_4620", "ZrO 4620"), ("zro_5551", "ZrO 5551"), ("zro_6474", "ZrO 6474"),
    ("lao_7403", "LaO 7403"), ("cn_7874", "CN 7874"), ("cn_8067", "CN 8067"),
    ("vo_7334", "VO 7334"),
]


def _vac_air(a: float) -> float:
    # Reid et al. (1995) index bandpasses are quoted in air; shift to vacuum.
    return a * 1.000277


def _idx(num: tuple[float, float], den: tuple[float, float]) -> tuple[tuple[float, float], tuple[float, float]]:
    return (_vac_air(num[0]), _vac_air(num[1])), (_vac_air(den[0]), _vac_air(den[1]))


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


def _contrast(arr: Arrays, center: float, blue: tuple[float, float], red: tuple[float, float]) -> float:
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


def _c2(m: dict[str, float]) -> float:
    vals = [m[k] for k in ("c2_4737", "c2_5165", "c2_5636") if _fin(m.get(k))]
    return float(np.mean(vals)) if vals else NAN


def evidence_wd(m: dict[str, float]) -> Evidence:
    e = Evidence()
    fw = [(m.get(f"{n}_fwhm"), m.get(f"{n}_depth"), m.get(f"{n}_ew"), lbl)
          for n, lbl in (("hb_w", "H-beta"), ("hg_w", "H-gamma"), ("ha_w", "H-alpha"))]
    got = [(f, d, w, lbl) for f, d, w, lbl in fw if _fin(f) and _fin(d) and d > 0.08]
    if not any(_fin(m.get(f"{n}_depth")) for n in ("hb_w", "hg_w", "ha_w")):
        e.missing.append("Balmer lines")
    else:
        e.checked += 1
    balmer = 0.0
    if got:
        f, d, w, lbl = max(got, key=lambda t: t[1])
        if f >= 35 and d >= 0.2:
            balmer = min(3.0, 1.5 + (f - 35) / 20 + (d - 0.2) * 3)
            e.add(balmer, f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}, EW {w:.0f} Å: pressure-broadened like a DA white dwarf")
        elif f >= 22 and d >= 0.2:
            e.add(0.0, f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}: broad, but short of a white dwarf's")
        else:
            e.add(-2.0, f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}: too narrow for a white dwarf (A/B star or subdwarf)")
    # Higher Balmer members: sharp and separate in A/B stars and subdwarfs.
    h9 = m.get("h9_contrast")
    if _fin(h9):
        e.checked += 1
        if h9 > 0.25 and balmer < 2.5:
            e.add(-1.5, f"H9 stands out sharply (contrast {h9:.2f}): the high series is resolved as in an A/B star")
        elif h9 < 0.12 and balmer > 0:
            e.add(0.7, f"H8-H10 merged (H9 contrast {h9:.2f}), as pressure broadening does")
    cak = m.get("cak_ew")
    if _fin(cak):
        e.checked += 1
        if cak > 1.5 and m.get("cak_depth", 0) > 0.15:
            if balmer > 0:
                e.add(-1.5, f"Ca II K absorption EW {cak:.1f} Å: a metal line, typical of an A star")
            elif _fin(m.get("b_r")) and m["b_r"] > 0.0:
                e.add(1.0, f"Ca II K EW {cak:.1f} Å on a blue continuum with no hydrogen: a DZ white dwarf?")
    # DB: He I absorption without hydrogen.
    he = [m.get(k) for k in ("hei4473_ew", "hei4923_ew", "hei5877_ew")]
    he = [x for x in he if _fin(x)]
    hb_ew = m.get("hb_ew")
    if he and sum(1 for x in he if x > 1.0) >= 2 and (not _fin(hb_ew) or abs(hb_ew) < 2.0):
        e.add(2.5, f"He I absorption ({', '.join(f'{x:.1f}' for x in he)} Å EW) with no Balmer lines: a DB white dwarf")
    # Continuum colour.
    br = m.get("b_r")
    if _fin(br):
        e.checked += 1
        if br < -0.25:
            e.add(-1.5, f"red continuum (log F4600/F6100 = {br:.2f}): too cool for most white dwarfs")
        elif br > 0.15:
            e.add(0.3, f"blue continuum (log F4600/F6100 = {br:.2f})")
    else:
        e.missing.append("continuum colour")
    # DQ: C2 on a blue continuum.
    c2 = _c2(m)
    if _fin(c2) and c2 > 0.15 and _fin(br) and br > -0.1:
        e.add(2.5, f"C2 Swan bands (mean jump {c2:.2f}) on a blue continuum: a DQ white dwarf")
    # DC: featureless and blue.
    feats = [abs(m.get(k, 0.0)) for k in ("hb_w_ew", "hg_w_ew", "cak_ew", "hei4473_ew") if _fin(m.get(k))]
    if feats and max(feats) < 2.0 and _fin(br) and br > 0.0 and not (_fin(c2) and c2 > 0.15):
        e.add(1.0, "featureless blue continuum (all line EWs < 2 Å): a DC white dwarf is possible")
    if _fin(m.get("tio5")) and m["tio5"] < 0.75:
        e.add(-2.0, f"TiO bands (TiO5 = {m['tio5']:.2f}): an M star dominates")
    e.score -= 1.0  # prior: most candidates are not white dwarfs
    return e


def evidence_cv(m: dict[str, float]) -> Evidence:
    e = Evidence()
    z = m.get("redshift", 0.0)
    if _fin(z) and abs(z) > 0.005:
        e.add(-3.0, f"pipeline redshift z = {z:.3f}: extragalactic, a CV sits at z ~ 0")
    em_any = 0
    for name, lbl, w_em, w_abs in (("ha", "H-alpha", 2.5, -2.0), ("hb", "H-beta", 2.0, -1.5),
                                   ("hg", "H-gamma", 1.0, -0.5)):
        ew, pk, fw, sig = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm", "sig"))
        if not _fin(ew):
            e.missing.append(lbl)
            continue
        e.checked += 1
        if m.get(f"{name}_em") == 1.0 and sig > 3 and pk > 0.15:
            em_any += 1
            pts = w_em + (0.7 if _fin(fw) and fw > 12 else -0.5) + (0.5 if ew < -20 else 0.0)
            e.add(pts, f"{lbl} in emission: EW {ew:.1f} Å, peak {pk:.2f} above continuum, FWHM {fw:.0f} Å")
        elif ew > 1.0 and sig > 3:
            e.add(w_abs, f"{lbl} in absorption (EW {ew:.1f} Å)")
        else:
            e.add(-0.3, f"{lbl} neither clearly in emission nor absorption (EW {ew:.1f} Å)")
    for name, lbl, pts in (("hei5877", "He I 5876", 1.0), ("hei6680", "He I 6678", 1.0),
                           ("heii4687", "He II 4686", 1.5), ("hei4923", "He I 4922", 0.5)):
        ew, sig = m.get(f"{name}_ew"), m.get(f"{name}_sig")
        if not _fin(ew):
            continue
        e.checked += 1
        if m.get(f"{name}_em") == 1.0 and sig > 3:
            e.add(pts, f"{lbl} in emission (EW {ew:.1f} Å)")
    ct = _cool_type(m)
    ha_fw = m.get("ha_fwhm")
    if _fin(ct) and ct > 0.5 and em_any and (not _fin(ha_fw) or ha_fw < 10):
        e.add(-2.0, f"narrow H-alpha emission on a TiO-banded M-dwarf continuum (TiO strength {ct:.1f}): chromospheric activity")
    if em_any == 0:
        e.add(-1.5, "no Balmer emission")
    e.score -= 1.0
    return e


def evidence_carbon(m: dict[str, float]) -> Evidence:
    e = Evidence()
    c2s = [(k, m.get(k)) for k in ("c2_4737", "c2_5165", "c2_5636")]
    have = [(k, v) for k, v in c2s if _fin(v)]
    if not have:
        e.missing.append("C2 Swan heads")
    else:
        e.checked += 1
        c2 = float(np.mean([v for _, v in have]))
        txt = ", ".join(f"{k[3:]} {v:+.2f}" for k, v in have)
        if c2 > 0.12:
            e.add(2.0 + min(2.0, (c2 - 0.12) * 8), f"C2 Swan head jumps ({txt}): bands degrading to the blue")
        elif c2 > 0.05:
            e.add(0.5, f"weak C2 head jumps ({txt})")
        else:
            e.add(-2.0, f"no C2 Swan heads (jumps {txt})")
    cn = [m.get(k) for k in ("cn_7874", "cn_8067") if _fin(m.get(k))]
    if cn:
        e.checked += 1
        if np.mean(cn) > 0.08:
            e.add(1.0, f"CN bands (head jumps {', '.join(f'{x:+.2f}' for x in cn)})")
    ct = _cool_type(m)
    if _fin(ct):
        e.checked += 1
        if ct > 0.4:
            e.add(-2.0, f"TiO bands present (TiO strength {ct:.2f}, TiO5 {m.get('tio5', NAN):.2f}): an oxygen-rich M star")
        else:
            e.add(0.3, f"no TiO (TiO strength {ct:.2f})")
    else:
        e.missing.append("TiO 7054")
    br = m.get("b_r")
    if _fin(br):
        if br > 0.0:
            e.add(-2.5, f"blue continuum (log F4600/F6100 = {br:.2f}): too hot for a carbon star (a DQ white dwarf shows C2 too)")
        elif br < -0.3:
            e.add(0.5, f"red continuum (log F4600/F6100 = {br:.2f})")
    e.score -= 1.0
    return e


def evidence_s_type(m: dict[str, float]) -> Evidence:
    e = Evidence()
    zr = [(k, m.get(k)) for k in ("zro_4620", "zro_5551", "zro_6474")]
    have = [(k, v) for k, v in zr if _fin(v)]
    if not have:
        e.missing.append("ZrO heads")
    else:
        e.checked += 1
        z = float(np.mean([v for _, v in have]))
        txt = ", ".join(f"{k[4:]} {v:+.2f}" for k, v in have)
        if z > 0.12:
            e.add(2.0 + min(2.0, (z - 0.12) * 8), f"ZrO head jumps ({txt})")
        elif z > 0.06:
            e.add(0.5, f"weak ZrO head jumps ({txt})")
        else:
            e.add(-2.0, f"no ZrO heads (jumps {txt})")
    lao = m.get("lao_7403")
    if _fin(lao):
        e.checked += 1
        if lao > 0.08:
            e.add(1.0, f"LaO 7403 head jump {lao:+.2f}")
    else:
        e.missing.append("LaO 7403")
    ct = _cool_type(m)
    if _fin(ct):
        e.checked += 1
        if ct < 0.2:
            e.add(-1.5, f"no TiO (strength {ct:.2f}): not a cool oxygen-rich star")
    c2 = _c2(m)
    if _fin(c2) and c2 > 0.15:
        e.add(-2.0, f"C2 Swan heads (mean jump {c2:.2f}): a carbon star")
    br = m.get("b_r")
    if _fin(br) and br > -0.1:
        e.add(-2.0, f"continuum too blue for an S star (log F4600/F6100 = {br:.2f})")
    e.score -= 1.0
    return e


def evidence_m_giant(m: dict[str, float]) -> Evidence:
    e = Evidence()
    ct = _cool_type(m)
    if not _fin(ct):
        e.missing.append("TiO bands")
    else:
        e.checked += 1
        if ct > 0.35:
            e.add(1.5, f"TiO bands (strength {ct:.2f}; TiO5 {m.get('tio5', NAN):.2f}, 7054 head jump {m.get('tio_7054', NAN):+.2f}): an M-type star")
        else:
            e.add(-3.0, f"no TiO bands (strength {ct:.2f}): not an M star")
    # Gravity: CaH relative to TiO (Reid et al. 1995 indices).
    if _has(m, "cah2", "tio5"):
        e.checked += 1
        # Dwarfs: CaH2 falls with TiO5 (CaH2 ~ TiO5 - 0.1); giants keep CaH2 near 0.9.
        d = m["cah2"] - (0.85 * m["tio5"] + 0.05)
        if d > 0.08:
            e.add(1.5, f"CaH weak for the TiO strength (CaH2 {m['cah2']:.2f} vs TiO5 {m['tio5']:.2f}): low gravity")
        elif d < -0.02:
            e.add(-2.0, f"CaH strong for the TiO strength (CaH2 {m['cah2']:.2f} vs TiO5 {m['tio5']:.2f}): a dwarf")
    else:
        e.missing.append("CaH/TiO indices")
    na = m.get("na8190_ew")
    if _fin(na):
        e.checked += 1
        if na > 3.0:
            e.add(-2.0, f"Na I 8183/8195 EW {na:.1f} Å: strong, as in a dwarf")
        elif na < 2.0:
            e.add(1.0, f"Na I 8183/8195 EW {na:.1f} Å: weak, as in a giant")
    else:
        e.missing.append("Na I 8183/8195")
    cat = [m.get(k) for k in ("cat8544_ew", "cat8664_ew") if _fin(m.get(k))]
    if cat:
        e.checked += 1
        s = float(sum(cat))
        if s > 6.0:
            e.add(1.0, f"Ca II triplet strong (8542+8662 EW {s:.1f} Å): a giant")
        elif s < 4.0:
            e.add(-1.0, f"Ca II triplet weak (8542+8662 EW {s:.1f} Å)")
    else:
        e.missing.append("Ca II triplet")
    c2 = _c2(m)
    if _fin(c2) and c2 > 0.15:
        e.add(-2.0, f"C2 Swan heads (mean jump {c2:.2f}): a carbon star, not an M giant")
    e.score -= 0.5
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
    t = (task or "").strip().lower()
    return _ALIASES.get(t, t)


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
        return "YES" if self.p_yes >= 0.5 else "NO"


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


def _describe(label: str, m: dict[str, float]) -> str:
    keys = _ZOOM_KEYS.get(label, [])
    vals = [f"{k} = {m[k]:.2f}" for k in keys if _fin(m.get(k))]
    if not vals:
        return f"In the {label} window the feature could not be measured."
    return f"In the {label} window: " + ", ".join(vals) + "."


def _tool_call(window: tuple[float, float], label: str) -> str:
    call = {"name": TOOL_NAME, "arguments": {"wavelength_range": [float(window[0]), float(window[1])], "label": label}}
    return f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>"


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
            return Reply(text=f"<think>{thought.strip()}</think>{_tool_call(window, label)}", measurements=meas)
        # Final answer.
        self._cache.pop((ep.candidate_id, id(ep.spectrum), ep.task), None)
        v = plan.verdict
        ev = v.evidence
        parts = []
        if prev:
            parts.append(_describe(prev, m))
        parts += ev.notes
        if ev.missing:
            parts.append("Outside the coverage: " + ", ".join(ev.missing) + ", so I am less certain.")
        conf = v.p_yes if v.answer == "YES" else 1 - v.p_yes
        parts.append(f"Overall score {ev.score:+.1f}; P(YES) = {v.p_yes:.2f}.")
        target = {"wd": "a white dwarf", "cv": "a cataclysmic variable", "carbon": "a carbon star",
                  "s_type": "an S-type star", "m_giant": "an M giant"}[v.task]
        key_note = ev.notes[0] if ev.notes else "no diagnostic feature measured"
        expl = (f"{'Consistent with' if v.answer == 'YES' else 'Not'} {target} "
                f"(confidence {conf:.2f}): {key_note}.")
        text = f"<think>{' '.join(parts)}</think><answer>\\boxed{{{v.answer}}} {expl}</answer>"
        meas = {k: float(val) for k, val in m.items() if _fin(val)}
        meas["score"] = float(ev.score)
        meas["coverage"] = float(ev.coverage)
        return Reply(text=text, p_yes=float(v.p_yes), measurements=meas)
