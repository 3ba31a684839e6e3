"""S-type star: the evidence, the zoom plan and the calibration of the `s_type` task."""

from __future__ import annotations

import numpy as np

from agent.policies.rules.features import NAN, Evidence, depth_points, finite
from agent.policies.rules.narration import Zoom, say_lao, say_tio

TARGET = "an S-type star"
HYPOTHESIS = "I will look for ZrO and LaO band heads beside the TiO of an ordinary M giant."
# p = sigmoid(a * x + b), x = Reading.x (the score after caps, shrunk by noise and coverage);
# see agent.policies.rules.calibration.
CALIBRATION = (1.795, 0.0)


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
    if not finite(t):
        return NAN, []
    got = []
    for k, (a, b, sd) in _ZRO_OF_M_GIANTS.items():
        if finite(m.get(k)):
            got.append((k, m[k], (m[k] - (a + b * t)) / sd))
    if not got:
        return NAN, []
    lead = [z for k, _, z in got if k == "zro_6474"]
    z = lead[0] if lead else float(np.mean([z for _, _, z in got])) - 1.0
    return float(z), got


ZRO_HEADS = tuple(_ZRO_OF_M_GIANTS)

# The ZrO excess (in sigma) beyond which ZrO marks an S star.
S_EXCESS = 2.5


def zro_excess_error(m: dict[str, float]) -> float:
    """The error of `zro_excess` from the heads' own flux errors, in the same units (the
    M giants' scatter); nan where a head read lacks its error."""
    t = m.get("tio_7054")
    if not finite(t):
        return NAN
    et = m.get("tio_7054_err", 0.0)
    zs = []
    for k, (_, b, sd) in _ZRO_OF_M_GIANTS.items():
        if finite(m.get(k)):
            e = m.get(f"{k}_err", NAN)
            zs.append((k, float(np.hypot(e, b * et)) / sd if finite(e) and finite(et) else NAN))
    lead = [z for k, z in zs if k == "zro_6474"]
    if lead:
        return lead[0]
    return float(np.sqrt(np.sum(np.square([z for _, z in zs]))) / len(zs)) if zs else NAN


def zro_doubt(m: dict[str, float]) -> str:
    """The sentence saying the ZrO excess is within two of its own errors of the S-star
    bound, so that ZrO cannot tell an S star from an M giant; else ""."""
    zx, _ = zro_excess(m)
    ez = zro_excess_error(m)
    if not (finite(zx) and finite(ez)) or abs(zx - S_EXCESS) >= 2.0 * ez:
        return ""
    return (
        f"the ZrO excess over an M giant's ({zx:.1f} +- {ez:.1f} sigma) is within its own "
        f"noise of the {S_EXCESS:.1f} that marks an S star, so ZrO cannot tell an S star "
        "from an M giant"
    )


def evidence(m: dict[str, float]) -> Evidence:
    e = Evidence(required=tuple(_ZRO_OF_M_GIANTS))
    zmean, heads = zro_excess(m)
    if not heads:
        e.missing.append("ZrO 4620/5551/6474 heads")
    else:
        e.checked += 1
        txt = ", ".join(f"ZrO {k[4:]} depth {depth_points(j):.2f}" for k, j, _ in heads)
        txt += f" at TiO 7054 depth {depth_points(m['tio_7054']):.2f}"
        keys = tuple(k for k, _, _ in heads) + ("tio_7054",)
        if zmean > 2.5:
            e.add(
                3.5,
                f"{txt}: ZrO stands {zmean:.1f} sigma above an M giant of the same TiO strength, the mark of an S star",
                keys,
            )
        elif zmean > 1.5:
            e.add(
                1.0,
                f"{txt}: ZrO {zmean:.1f} sigma above an M giant's, possibly a weak MS-type star",
                keys,
            )
        else:
            e.add(
                -1.0,
                f"{txt}: ZrO no stronger than in an M giant of the same TiO ({zmean:+.1f} sigma), so TiO alone explains the heads",
                keys,
            )
    lao = m.get("lao_7403")
    if finite(lao):
        e.checked += 1
        if lao > 0.08:
            e.add(
                1.5,
                f"LaO 7403 head depth {depth_points(lao):.2f}: LaO, found only in S stars",
                ("lao_7403",),
            )
        elif lao < 0.0:
            e.add(-0.5, "no LaO 7403 head: the flux steps the wrong way across it", ("lao_7403",))
    else:
        e.missing.append("LaO 7403")
    if finite(m.get("tio5")):
        e.checked += 1
        if m["tio5"] > 0.92 and not (finite(zmean) and zmean > 2.5):
            e.add(
                -2.0,
                f"no TiO (TiO5 index {m['tio5']:.2f}) and no ZrO: not a cool S or M star",
                ("tio5",),
            )
    c2 = m.get("c2_5165")
    if finite(c2) and c2 > 0.15:
        e.add(
            -4.0,
            f"C2 Swan 5165 head depth {depth_points(c2):.2f}: a carbon star, whose ZrO-like heads are C2 and CN",
            ("c2_5165",),
            decisive=True,
        )
    br = m.get("b_r")
    if finite(br) and br > -0.1:
        e.add(-2.0, f"continuum too blue for an S star (log F4600/F6100 = {br:.2f})")
    e.prior = -1.0
    if not finite(lao) and oxide_star(m) and not (finite(zmean) and zmean > 2.5):
        # Without LaO, a weak S (MS) star's ZrO heads are within an M giant's scatter at
        # the same TiO: the one band that tells them apart is not there to read.
        hi = m.get("wave_hi")
        where = (
            f"the spectrum ends at {hi:.0f} Å"
            if finite(hi) and hi < LAO_NEEDS
            else "its window is masked or unreliable"
        )
        e.undecided = (
            f"LaO 7403, the band only S stars show, is not measured ({where}), and ZrO "
            "alone does not tell a weak S star from an M giant"
        )
    # Only an S-type candidate's ZrO can leave it undecided: a star without TiO, with C2 or
    # a blue continuum is no S star whatever its ZrO heads read.
    doubt = zro_doubt(m) if oxide_star(m) else ""
    if doubt and not e.undecided and not e.vetoes():
        e.undecided = doubt
    return e


# The LaO 7403 head is read against the flux up to this wavelength (Å).
LAO_NEEDS = 7440.0


def oxide_star(m: dict[str, float]) -> bool:
    """A cool oxygen-rich star whose oxide bands make it an S-type candidate: TiO there,
    no carbon star's C2, a red continuum."""
    tio = (finite(m.get("tio5")) and m["tio5"] < 0.92) or (
        finite(m.get("tio_7054")) and m["tio_7054"] > 0.1
    )
    c2 = m.get("c2_5165")
    br = m.get("b_r")
    return tio and not (finite(c2) and c2 > 0.15) and not (finite(br) and br > -0.1)


def say_zro(m: dict[str, float], key: str, lbl: str) -> str:
    j = m.get(key)
    if not finite(j):
        return f"The {lbl} head falls outside the coverage (or in a gap)."
    a, b, sd = _ZRO_OF_M_GIANTS[key]
    t = m.get("tio_7054")
    if not finite(t):
        return f"{lbl} band-head depth {depth_points(j):.2f}, but without TiO 7054 there is no M-giant reference to compare it with."
    exp = a + b * t
    z = (j - exp) / sd
    txt = (
        f"{lbl} band-head depth {depth_points(j):.2f}, where an M giant with this TiO (7054 depth "
        f"{depth_points(t):.2f}) shows {depth_points(exp):.2f}: {z:+.1f} sigma"
    )
    if z > 2.5:
        return f"{txt}, ZrO beyond what TiO explains, as in an S star."
    if z > 1.5:
        return (
            f"{txt}, a hint of ZrO (a weak MS-type star?) but within reach of an M giant's scatter."
        )
    return f"{txt}, nothing an ordinary M giant would not show."


# Zoom windows (rest-frame vacuum Angstrom): the task's own diagnostics first, then those
# that rule in the competing explanations; each with the measurements its thought reports.
ZOOMS = [
    Zoom(
        (6400.0, 6560.0),
        "ZrO 6474 head",
        ["zro_6474"],
        lambda m: say_zro(m, "zro_6474", "ZrO 6474"),
    ),
    Zoom(
        (5480.0, 5650.0),
        "ZrO 5551 head",
        ["zro_5551"],
        lambda m: say_zro(m, "zro_5551", "ZrO 5551"),
    ),
    Zoom(
        (4560.0, 4700.0),
        "ZrO 4620 head",
        ["zro_4620"],
        lambda m: say_zro(m, "zro_4620", "ZrO 4620"),
    ),
    Zoom(
        (7340.0, 7470.0),
        "LaO 7403",
        ["lao_7403"],
        lambda m: say_lao(m),
    ),
    Zoom(
        (7000.0, 7200.0),
        "TiO 7054 (M giant check)",
        ["tio_7054", "tio5"],
        lambda m: say_tio(m, "s_type"),
    ),
]
