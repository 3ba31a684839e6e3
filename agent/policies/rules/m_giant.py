"""M giant: the evidence, the zoom plan and the calibration of the `m_giant` task."""

from __future__ import annotations

from agent.policies.rules.features import NAN, Evidence, depth_points, finite, has
from agent.policies.rules.narration import Zoom, say_cat, say_head, say_tio, unmeasured
from agent.policies.rules.s_type import ZRO_HEADS, zro_doubt, zro_excess

TARGET = "an M giant"
HYPOTHESIS = (
    "I will confirm TiO and then test gravity with CaH, Na I 8183/8195 and the Ca II triplet."
)
# p = sigmoid(a * x + b), x = Reading.x (the score after caps, shrunk by noise and coverage);
# see agent.policies.rules.calibration.
CALIBRATION = (1.249, 0.0)


TIO = ("tio5", "tio_7054")
# The TiO 7054 head jump below which the head is absent (a K star), whatever TiO5 reads.
HEAD_ABSENT = 0.08


def evidence(m: dict[str, float]) -> Evidence:
    # An M giant is an M star: a YES must rest on TiO, however giant-like the gravity of an
    # F/G/K star reads. Where gravity cannot be judged (a library spectrum ending at 7400 A,
    # ambiguous CaH) TiO alone leaves the prior, and most M stars in a survey are dwarfs.
    e = Evidence(required=TIO)
    e.prior = -0.5
    t5, j = m.get("tio5"), m.get("tio_7054")
    m_type = no_tio = False
    if not (finite(t5) or finite(j)):
        e.missing.append("TiO bands")
    else:
        e.checked += 1
        kind = tio_kind(t5, j)
        m_type, no_tio = kind == "m", kind == "none"
        txt = ", ".join(
            ([f"TiO5 index {t5:.2f}"] if finite(t5) else [])
            + ([f"TiO 7054 head depth {depth_points(j):.2f}"] if finite(j) else [])
        )
        if m_type:
            e.add(0.5, f"TiO bands ({txt}): an M-type star", TIO)
        elif no_tio:
            e.add(-4.0, f"no TiO bands ({txt}): not an M star", TIO, decisive=True)
        else:
            e.add(-0.5, f"weak TiO ({txt}): K/M boundary", TIO)
    # Gravity: CaH relative to TiO (Reid et al. 1995 indices). Dwarfs follow
    # CaH3 ~ 0.60 + 0.37 TiO5; giants have weaker CaH at the same TiO.
    g = gravity_cah(m)
    if g is not None:
        e.checked += 1
        kind, d, txt = g
        keys = ("cah3", "tio5")
        if kind == "giant":
            e.add(2.0 + min(1.0, (d - 0.04) * 20), f"{txt}: weak CaH, low gravity", keys)
        elif kind == "dwarf" and (others := giant_elsewhere(m, "cah3")):
            e.add(-1.5, f"{txt}: dwarf-like, {disagree(others)}", keys)
        elif kind == "dwarf":
            e.add(-2.5, f"{txt}: CaH as strong as a dwarf's", keys, decisive=True)
        else:
            e.add(0.0, f"{txt}: gravity ambiguous", keys)
    else:
        e.missing.append("CaH/TiO indices")
    g1 = gravity_cah1(m)
    if g1 is not None:
        e.checked += 1
        kind, txt = g1
        if kind == "dwarf" and (others := giant_elsewhere(m, "cah1")):
            e.add(-1.5, f"{txt}: dwarf-like, {disagree(others)}", ("cah1",))
        elif kind == "dwarf":
            e.add(-3.0, f"{txt}: strong, as only a dwarf shows", ("cah1",), decisive=True)
        elif kind == "leans dwarf":
            e.add(-1.5, f"{txt}: deeper than in most giants, leaning dwarf", ("cah1",))
        elif kind == "giant":
            e.add(1.0, f"{txt}: absent, as in a giant", ("cah1",))
    else:
        e.missing.append("CaH 6385")
    na = sodium(m)
    if na is not None:
        e.checked += 1
        if na == "dwarf" and (others := giant_elsewhere(m, "na")):
            e.add(
                -1.5,
                f"Na I 8183/8195 EW {m['na8190_ew']:.1f} Å: dwarf-like, {disagree(others)}",
                ("na8190_ew",),
            )
        elif na == "dwarf":
            e.add(
                -2.5,
                f"Na I 8183/8195 EW {m['na8190_ew']:.1f} Å: strong, as in a dwarf",
                ("na8190_ew",),
                decisive=True,
            )
        elif na == "giant":
            e.add(
                1.0,
                f"Na I 8183/8195 EW {m['na8190_ew']:.1f} Å: weak, as in a giant",
                ("na8190_ew",),
            )
    else:
        e.missing.append("Na I 8183/8195")
    cat = [m.get(k) for k in ("cat8544_ew", "cat8664_ew") if finite(m.get(k))]
    if cat:
        e.checked += 1
        s = float(sum(cat))
        if s > 7.0:
            e.add(
                0.5,
                f"Ca II triplet strong (8542+8662 EW {s:.1f} Å), as in giants",
                ("cat8544_ew", "cat8664_ew"),
            )
    else:
        e.missing.append("Ca II triplet")
    c2 = m.get("c2_5165")
    if finite(c2) and c2 > 0.15:
        e.add(
            -3.0,
            f"C2 Swan 5165 head depth {depth_points(c2):.2f}: a carbon star, not an M giant",
            ("c2_5165",),
            decisive=True,
        )
    zx, heads = zro_excess(m)
    if finite(zx) and zx > 2.5:
        # ZrO beyond what TiO explains marks an S star (as the s_type task reads it): its
        # giant-like gravity and TiO must not make it an ordinary M giant.
        k, jump, _ = next((h for h in heads if h[0] == "zro_6474"), heads[0])
        near = bool(zro_doubt(m))
        # Within its own noise of the S-star bound the excess is no veto (the answer is
        # then a can't-tell), and the note does not say what the data cannot tell.
        e.add(
            -3.0,
            f"ZrO {k[4:]} head depth {depth_points(jump):.2f}, {zx:.1f} sigma above an M "
            "giant of the same TiO: "
            + (
                "possibly an S star, within its noise of the bound"
                if near
                else "an S star, not an ordinary M giant"
            ),
            (k,),
            decisive=not near,
        )
    blue = blue_continuum(m)
    if blue:
        # An M star's continuum falls to the blue: a TiO-like step on a blue or white
        # continuum (an A or F star at low SNR) is noise or a sky residual, not TiO.
        e.add(-4.0, blue, decisive=True)
    doubt = tio_doubt(m) or (zro_doubt(m) if m_type else "")
    if doubt and not e.vetoes(apart_from=(*TIO, *ZRO_HEADS)):
        # Whether this is an M star at all turns on TiO, and its reading crosses the M-star
        # bound within its own noise: a can't-tell, not a confident answer either way.
        e.undecided = doubt
    # Gravity only matters for an M star: without TiO the answer is no, however giant-like.
    # At the K/M boundary (weak TiO) a YES would rest on gravity alone, which a K giant
    # shares: it leans NO, and the more so the weaker the TiO.
    if (finite(t5) or finite(j)) and not m_type:
        cap = -3.0 if no_tio else min(-0.5, 0.5 * e.score - 1.0)
        if e.score > cap:
            e.add(
                cap - e.score,
                "without the TiO of an M star, giant-like gravity does not make an M giant",
                TIO,
            )
    return e


def tio_kind(t5: float, j: float) -> str:
    """ "m" (the TiO of an M star), "none" (no TiO bands) or "weak" (the K/M boundary), from
    TiO5 and the TiO 7054 head jump (either may be nan)."""
    # TiO5's 4 A reference band makes it noisy at low SNR; the 7054 head jump, measured
    # over wider bands, overrules it where the head is plainly absent (a K giant).
    head_absent = finite(j) and j < HEAD_ABSENT
    if (finite(t5) and t5 < 0.82 and not head_absent) or (finite(j) and j > 0.12):
        return "m"
    if (not finite(t5) or t5 > 0.9) and (not finite(j) or j < 0.1):
        return "none"
    return "weak"


# How far (in each index's own sigma, from the flux errors) TiO5 and the 7054 head are
# moved to see whether the M-star call holds within the noise.
TIO_SIGMAS = 2.0


def tio_doubt(m: dict[str, float]) -> str:
    """The sentence saying the M-star call from TiO changes within TIO_SIGMAS of the
    indices' own errors (TiO5 and the 7054 head each moved up or down), else ""."""
    t5, j = m.get("tio5", NAN), m.get("tio_7054", NAN)
    if not (finite(t5) or finite(j)):
        return ""
    e5, ej = m.get("tio5_err", NAN), m.get("tio_7054_err", NAN)
    # An index without its error is taken at its value: no doubt is invented for it.
    d5 = TIO_SIGMAS * e5 if finite(t5) and finite(e5) else 0.0
    dj = TIO_SIGMAS * ej if finite(j) and finite(ej) else 0.0
    calls = {tio_kind(t5 + a * d5, j + b * dj) == "m" for a in (-1, 0, 1) for b in (-1, 0, 1)}
    if len(calls) == 1:
        return ""
    parts = ([f"TiO5 {t5:.2f} +- {e5:.2f}"] if d5 else []) + (
        [f"TiO 7054 head {depth_points(j):.2f} +- {ej:.2f}"] if dj else []
    )
    return (
        f"the TiO reading ({', '.join(parts)}) crosses the M-star bound within its own noise, "
        "so whether this is an M star at all cannot be told"
    )


# The reddest A/F/G stars of the tune split reach log F4600/F6100 = -0.16 (at SNR 5), the
# bluest M giants -0.24; an M0 III's continuum sits near -0.3. (colour key, bound, label)
_M_STAR_COLOURS = (
    ("b_r", -0.15, "log F4600/F6100"),
    ("v_i", -0.05, "log F5500/F7475"),
)


def blue_continuum(m: dict[str, float]) -> str:
    """The sentence saying the continuum is too blue for an M star ("" where it is red
    enough, or no colour is measured): the first colour measured decides."""
    for k, bound, lbl in _M_STAR_COLOURS:
        c = m.get(k)
        if finite(c):
            if c > bound:
                return f"continuum too blue for an M star ({lbl} = {c:.2f}; M stars lie below {bound:.2f})"
            return ""
    return ""


def gravity_readings(m: dict[str, float]) -> dict[str, str]:
    """What each gravity indicator reads: "giant", "dwarf" or "" (ambiguous, not measured)."""
    g, g1, na = gravity_cah(m), gravity_cah1(m), sodium(m)
    return {
        "cah3": "" if g is None else g[0],
        "cah1": "" if g1 is None else g1[0] if g1[0] in ("giant", "dwarf") else "",
        "na": na if na in ("giant", "dwarf") else "",
    }


_INDICATOR = {"cah3": "CaH3", "cah1": "CaH 6385", "na": "Na I 8183/8195"}


def giant_elsewhere(m: dict[str, float], key: str) -> list[str]:
    """The gravity indicators that read giant-like where at least as many read so as read
    dwarf-like: then the dwarf-like reading of `key` is a disagreement for the expert, not a
    verdict. Outvoted giant-like readings leave it decisive."""
    r = gravity_readings(m)
    giants = [_INDICATOR[k] for k, v in r.items() if k != key and v == "giant"]
    dwarfs = sum(v == "dwarf" for v in r.values())
    return giants if len(giants) >= dwarfs else []


def disagree(others: list[str]) -> str:
    return f"while {' and '.join(others)} read{'s' if len(others) == 1 else ''} giant-like: the gravity indicators disagree"


# CaH3 about the dwarf sequence: M dwarfs scatter by 0.02 at high SNR, and the noise of an
# index over a 4 A reference band adds about 0.28/SNR (both measured on the tune split's M
# dwarfs); M giants sit 0.08-0.15 above it. The giant reading needs the excess 2 sigma
# clear of both, or a noisy early-M dwarf or K giant reads as an M giant.
CAH3_GIANT = 0.04
CAH3_DWARF = 0.015
CAH3_GIANT_SIGMAS = 2.0


def dwarf_cah3(tio5: float) -> float:
    """CaH3 on the M-dwarf sequence at this TiO5 (Reid et al. 1995)."""
    return 0.60 + 0.37 * tio5


def cah3_sigma(snr: float) -> float:
    """Scatter of an M dwarf's CaH3 about the dwarf sequence: intrinsic plus noise."""
    return float((0.02**2 + (0.28 / max(snr, 1.0)) ** 2) ** 0.5)


def gravity_cah(m: dict[str, float]) -> tuple[str, float, str] | None:
    """("giant" | "dwarf" | "", CaH3 excess over the dwarf sequence at this TiO5, the
    sentence that quotes it); None if not measured."""
    if not has(m, "cah3", "tio5"):
        return None
    d = m["cah3"] - dwarf_cah3(m["tio5"])
    sig = cah3_sigma(m["snr"] if finite(m.get("snr")) else 10.0)
    txt = (
        f"CaH3 index {m['cah3']:.2f} at TiO5 {m['tio5']:.2f} ({d:+.2f} from the dwarf "
        f"sequence, dwarfs scatter +- {sig:.2f} at this SNR)"
    )
    if d > max(CAH3_GIANT, CAH3_GIANT_SIGMAS * sig):
        return "giant", d, txt
    if d < CAH3_DWARF:
        return "dwarf", d, txt
    return "", d, txt


# CaH 6385 in M giants sits at 0.00 +- 0.02 at high SNR, in M dwarfs from M0 on at >= 0.08
# (Reid et al. 1995 use it to separate the two). Its noise grows as 1/SNR: about 0.3/SNR
# in the band depth measured over 10 A against two 10 A sidebands.
CAH1_DWARF = 0.10
CAH1_LEAN = 0.07
CAH1_GIANT = 0.03
CAH1_MAX_TIO = 0.4  # TiO5 below this: late M, where TiO blends into the CaH 6385 band


def cah1_sigma(snr: float) -> float:
    """Scatter of an M giant's CaH 6385 depth: intrinsic (0.015) plus noise (0.3 / SNR)."""
    return float((0.015**2 + (0.3 / max(snr, 1.0)) ** 2) ** 0.5)


def gravity_cah1(m: dict[str, float]) -> tuple[str, str] | None:
    """("dwarf" | "leans dwarf" | "giant" | "blended" | "", sentence) from the CaH 6385 band depth; None
    if not measured.

    A dwarf needs the band deeper than 0.10 and 2.5 sigma above a giant's zero (0.07-0.10
    only leans dwarf: early M0 dwarfs sit there, and so do a few giants); a giant needs
    it shallower than 0.03 with the noise small enough (sigma < 0.035) that a dwarf's 0.08
    would have shown. In late-M stars (TiO5 < 0.4) TiO bands reach 6385 and deepen it in
    giants too, so there it gives no verdict.
    """
    d = m.get("cah1")
    if not finite(d):
        return None
    sig = cah1_sigma(m["snr"] if finite(m.get("snr")) else 10.0)
    # A negative depth is noise about an absent band: quoted as 0.00, not as an impossible depth.
    txt = f"CaH 6385 band depth {max(d, 0.0):.2f} (giants 0.00 +- {sig:.2f} at this SNR)"
    t5 = m.get("tio5")
    if finite(t5) and t5 < CAH1_MAX_TIO:
        return "blended", f"{txt}, but TiO this strong (TiO5 {t5:.2f}) blends into it"
    if d > CAH1_DWARF and d > 2.5 * sig:
        return "dwarf", txt
    if d > CAH1_LEAN and d > 2.5 * sig:
        return "leans dwarf", txt
    if d < CAH1_GIANT and sig < 0.035:
        return "giant", txt
    return "", txt


# Na I 8183/8195 EW (Å) of M giants reaches about this; dwarfs read 2-8 Å.
NA_GIANT_MAX, NA_CLEAR_SIGMA = 1.0, 2.5


def sodium(m: dict[str, float]) -> str | None:
    """ "dwarf", "giant", "" (intermediate or within the noise) or None (not measured)."""
    na, sig = m.get("na8190_ew"), m.get("na8190_sig")
    if not finite(na):
        return None
    # A dwarf's reading must stand clear of the giants' EW (up to NA_GIANT_MAX) by its own
    # error (EW / significance, from the flux errors), not only of zero: at SNR 8 an EW of
    # 2 Å at 3 sigma is within 1.5 sigma of a giant's.
    err = na / sig if finite(sig) and sig > 0 else NAN
    if na > 1.8 and finite(err) and (na - NA_GIANT_MAX) / err >= NA_CLEAR_SIGMA:
        return "dwarf"
    if na < 1.0:
        return "giant"
    if na > 1.3 and finite(sig) and sig > 3.0:
        return "leans dwarf"
    return ""


# Zoom windows (rest-frame vacuum Angstrom): the task's own diagnostics first, then those
# that rule in the competing explanations; each with the measurements its thought reports.
ZOOMS = [
    Zoom(
        (7000.0, 7200.0),
        "TiO 7054 head and TiO5",
        ["tio_7054", "tio5"],
        lambda m: say_tio(m, "m_giant"),
    ),
    Zoom(
        (6780.0, 7060.0),
        "CaH 6750-6990 (gravity)",
        ["cah2", "cah3"],
        lambda m: say_gravity_cah(m),
    ),
    Zoom(
        (6330.0, 6450.0),
        "CaH 6385 (gravity)",
        ["cah1"],
        lambda m: say_cah1(m),
    ),
    Zoom(
        (8150.0, 8240.0),
        "Na I 8183/8195 (gravity)",
        ["na8190_ew"],
        lambda m: say_na(m),
    ),
    Zoom(
        (8480.0, 8700.0),
        "Ca II triplet",
        ["cat8544_ew", "cat8664_ew"],
        lambda m: say_cat(m),
    ),
    Zoom(
        (5050.0, 5250.0),
        "C2 5165 / TiO 5167 (carbon check)",
        ["c2_5165"],
        lambda m: say_head(m, "c2_5165", "C2 Swan 5165", "a carbon star, not an M giant"),
    ),
]


def say_gravity_cah(m: dict[str, float]) -> str:
    g = gravity_cah(m)
    if g is None:
        return "The CaH bands fall outside the coverage, so gravity from CaH cannot be judged."
    kind, d, txt = g
    if kind == "giant":
        return f"{txt}: CaH weak for the TiO strength, giant-like low gravity."
    if kind == "dwarf" and (others := giant_elsewhere(m, "cah3")):
        return f"{txt}: dwarf-like, {disagree(others)}."
    if kind == "dwarf":
        return f"{txt}: CaH as strong as a dwarf's, pointing to an M dwarf."
    return f"{txt}: between giants and dwarfs, gravity ambiguous."


def say_cah1(m: dict[str, float]) -> str:
    g = gravity_cah1(m)
    if g is None:
        return unmeasured(m, "cah1", "CaH 6385")
    kind, txt = g
    if kind == "dwarf" and (others := giant_elsewhere(m, "cah1")):
        return f"{txt}: dwarf-like, {disagree(others)}."
    if kind == "dwarf":
        return f"{txt}: a deep CaH band, as only a high-gravity M dwarf shows."
    if kind == "leans dwarf":
        return f"{txt}: deeper than in most giants, leaning to a dwarf."
    if kind == "giant":
        return f"{txt}: no CaH band, as in a low-gravity giant."
    if kind == "blended":
        return f"{txt}: no gravity verdict from CaH 6385."
    return f"{txt}: within the noise of both, no gravity verdict from CaH 6385."


def say_na(m: dict[str, float]) -> str:
    na = sodium(m)
    if na is None:
        return unmeasured(m, "na8190", "Na I 8183/8195")
    ew = m["na8190_ew"]
    if na == "dwarf" and (others := giant_elsewhere(m, "na")):
        return f"Na I 8183/8195 EW {ew:.1f} Å: dwarf-like, {disagree(others)}."
    if na == "dwarf":
        return f"Na I 8183/8195 EW {ew:.1f} Å: strong, as in a high-gravity dwarf."
    if na == "giant":
        return f"Na I 8183/8195 EW {ew:.1f} Å: weak, as in a low-gravity giant."
    if ew > 1.8:
        return (
            f"Na I 8183/8195 EW {ew:.1f} Å, but within the noise: no gravity verdict from sodium."
        )
    return f"Na I 8183/8195 EW {ew:.1f} Å: intermediate, no gravity verdict from sodium."
