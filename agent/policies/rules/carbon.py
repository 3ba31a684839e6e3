"""Carbon star: the evidence, the zoom plan and the calibration of the `carbon` task."""

from __future__ import annotations

import math

import numpy as np

from agent.policies.rules.features import (
    C2_HEADS,
    NAN,
    Evidence,
    cool_type,
    depth_points,
    extragalactic,
    finite,
)
from agent.policies.rules.narration import Zoom, say_head, say_tio

TARGET = "a carbon star"
HYPOTHESIS = "I will look for C2 Swan band heads and CN, and check for TiO of an M giant."
# p = sigmoid(a * x + b), x = Reading.x (the score after caps, shrunk by noise and coverage);
# see agent.policies.rules.calibration.
CALIBRATION = (1.795, 0.0)


def evidence(m: dict[str, float]) -> Evidence:
    e = Evidence(required=("c2_5165", "c2_5636", "c2_4737"))
    extragalactic(e, m, "a carbon star sits at z ~ 0", -4.0)
    j = m.get("c2_5165")
    ct = cool_type(m)
    tio = (finite(m.get("tio5")) and m["tio5"] < 0.8) or (
        finite(m.get("tio_7054")) and m["tio_7054"] > 0.15
    )
    if not finite(j):
        e.missing.append("C2 5165 head")
    else:
        e.checked += 1
        if j > 0.2:
            e.add(
                3.0,
                f"C2 Swan 5165 head: flux jumps by {math.exp(j):.2f}x across it, the band degrading to the blue",
                ("c2_5165",),
            )
        elif j > 0.1:
            e.add(1.5, f"weak C2 Swan 5165 head (depth {depth_points(j):.2f})", ("c2_5165",))
        elif j < 0.03:
            e.add(
                -2.5,
                f"no C2 Swan 5165 head (depth {max(0.0, depth_points(j)):.2f}"
                + ("; the TiO 5167 band degrades the other way)" if j < -0.1 else ")"),
                ("c2_5165",),
            )
    for k, lbl in (("c2_5636", "C2 5636"), ("c2_4737", "C2 4737")):
        v = m.get(k)
        if finite(v):
            e.checked += 1
            if v > 0.15 and not tio:
                e.add(
                    1.0 if k == "c2_5636" else 0.5, f"{lbl} head depth {depth_points(v):.2f}", (k,)
                )
        else:
            e.missing.append(lbl)
    cn_keys = tuple(k for k in ("cn_7874", "cn_8067") if finite(m.get(k)))
    cn = [m[k] for k in cn_keys]
    if cn and np.mean(cn) > 0.08 and not tio:
        e.add(
            0.5,
            f"CN bands (head depths {', '.join(f'{depth_points(x):.2f}' for x in cn)})",
            cn_keys,
        )
    if finite(ct) or finite(m.get("tio5")):
        e.checked += 1
        if tio:
            e.add(
                -2.5,
                f"TiO bands present (TiO5 {m.get('tio5', NAN):.2f}, 7054 head depth {depth_points(m.get('tio_7054', NAN)):.2f}): an oxygen-rich M or S star",
                tuple(k for k in ("tio5", "tio_7054") if finite(m.get(k))),
                decisive=True,
            )
    else:
        e.missing.append("TiO 7054")
    br = m.get("b_r")
    if finite(br):
        if br > -0.05:
            e.add(
                -4.0,
                f"blue continuum (log F4600/F6100 = {br:.2f}): too hot for a carbon star (a DQ white dwarf shows C2 too)",
                decisive=True,
            )
    e.prior = -0.5
    doubt = c2_doubt(m)
    if doubt and not e.vetoes():
        e.undecided = doubt
    return e


def combined_c2(m: dict[str, float]) -> tuple[float, float]:
    """The C2 Swan heads' log jumps combined by their inverse variances: (jump, its error);
    nan where no head has a jump and an error."""
    got = [
        (m[k], m[f"{k}_err"])
        for k in C2_HEADS
        if finite(m.get(k)) and finite(m.get(f"{k}_err")) and m[f"{k}_err"] > 0
    ]
    if not got:
        return NAN, NAN
    w = np.array([1.0 / e**2 for _, e in got])
    j = float(np.sum(w * np.array([v for v, _ in got])) / np.sum(w))
    return j, float(1.0 / math.sqrt(np.sum(w)))


def c2_doubt(m: dict[str, float]) -> str:
    """The sentence saying the C2 answer cannot be told: the 5165 head reads "no C2" (a jump
    under 0.03) only within its own noise of a weak band's 0.1, while the heads combined
    stand 3 sigma above zero; else ""."""
    j, ej = m.get("c2_5165", NAN), m.get("c2_5165_err", NAN)
    if not (finite(j) and finite(ej)) or j >= 0.03 or j + 2.0 * ej < 0.1:
        return ""
    c, ec = combined_c2(m)
    if not (finite(c) and c > 3.0 * ec):
        return ""
    return (
        f"the C2 5165 head ({depth_points(j):.2f} +- {ej:.2f}) reads no band only within its "
        f"own noise, while the three Swan heads together step {c:.2f} +- {ec:.2f}, so whether "
        "C2 is there cannot be told"
    )


# Zoom windows (rest-frame vacuum Angstrom): the task's own diagnostics first, then those
# that rule in the competing explanations; each with the measurements its thought reports.
ZOOMS = [
    Zoom(
        (5050.0, 5250.0),
        "C2 5165 head",
        ["c2_5165"],
        lambda m: say_head(
            m,
            "c2_5165",
            "C2 Swan 5165",
            "a carbon star, or a DQ white dwarf if the continuum is hot",
        ),
    ),
    Zoom(
        (5550.0, 5700.0),
        "C2 5636 head",
        ["c2_5636"],
        lambda m: say_head(m, "c2_5636", "C2 Swan 5636", "carbon molecules confirmed"),
    ),
    Zoom(
        (4650.0, 4800.0),
        "C2 4737 head",
        ["c2_4737"],
        lambda m: say_head(m, "c2_4737", "C2 Swan 4737", "carbon molecules confirmed"),
    ),
    Zoom(
        (7000.0, 7200.0),
        "TiO 7054 (M star check)",
        ["tio_7054", "tio5"],
        lambda m: say_tio(m, "carbon"),
    ),
    Zoom(
        (7800.0, 8150.0),
        "CN 7874 and 8067",
        ["cn_7874", "cn_8067"],
        lambda m: " ".join(
            say_head(m, k, lbl, "CN, strong in carbon stars")
            for k, lbl in (("cn_7874", "CN 7874"), ("cn_8067", "CN 8067"))
        ),
    ),
]
