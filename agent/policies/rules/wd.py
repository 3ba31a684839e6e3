"""White dwarf: the evidence, the zoom plan and the calibration of the `wd` task."""

from __future__ import annotations

from agent.policies.rules.features import (
    PRESENT_DEPTH,
    Evidence,
    balmer_absence,
    balmer_emission,
    balmer_wd,
    below_noise,
    depth_points,
    extragalactic,
    finite,
    series_resolved,
    unanchored,
)
from agent.policies.rules.narration import Zoom, say_balmer_wd, say_he, say_high_balmer

TARGET = "a white dwarf"
HYPOTHESIS = (
    "I will measure the Balmer line widths and check the A/B-star and subdwarf alternatives."
)
# p = sigmoid(a * x + b), x = Reading.x (the score after caps, shrunk by noise and coverage);
# see agent.policies.rules.calibration.
CALIBRATION = (2.402, 0.0)


def evidence(m: dict[str, float]) -> Evidence:
    e = Evidence()
    extragalactic(e, m, "a white dwarf sits at z ~ 0", -4.0)
    br = m.get("b_r")
    hot = finite(br) and br > 0.0
    bw = balmer_wd(m)
    balmer = 0.0
    strong_balmer = False
    if bw is None:
        # Windows read but holding no absorption (a cool star's net emission or noise) are
        # not a coverage gap: the thought must not say the plotted lines are missing.
        read = any(finite(m.get(f"{n}_ew")) for n in ("hb_w", "hg_w", "ha_w"))
        e.missing.append(
            "Balmer lines (no absorption profile to fit)"
            if read
            else "Balmer lines (outside the coverage or masked)"
        )
    else:
        e.checked += 1
        d, f, txt, n = bw
        keys = (f"{n}_fwhm", f"{n}_depth", f"{n}_ew")
        if hot_da_track(br, d, f):
            strong_balmer = True
            h9 = m.get("h9_contrast")
            if finite(h9) and h9 < HIGH_SERIES_MERGED:
                # The gravity sign (the merged high series) is weighed below, with the
                # resolved-series test that overrules it.
                balmer = 1.5
                e.add(
                    balmer,
                    f"{txt}, on a continuum as blue as log F4600/F6100 = {br:.2f}: shallow "
                    f"lines {HOT_DA_MIN_FWHM:.0f}-{HOT_DA_FWHM:.0f} Å wide, as a DA white dwarf "
                    "hotter than about 30,000 K shows (its hydrogen mostly ionised); a hot "
                    "subdwarf's lines this wide are deeper, an sdO's narrower",
                    keys,
                )
            else:
                said = f"H9 contrast {h9:.2f}, not merged" if finite(h9) else "H9 not measured"
                e.add(
                    0.0,
                    f"{txt}, on a continuum as blue as log F4600/F6100 = {br:.2f}: shallow "
                    "lines of this width fit a DA white dwarf hotter than about 30,000 K, "
                    f"but the high Balmer series that would tell its gravity ({said}) does "
                    "not show the merging of a white dwarf's",
                    keys + (("h9_contrast",) if finite(h9) else ()),
                )
                e.undecided = (
                    "the Balmer lines' width and depth fit a hot DA white dwarf and a hot "
                    "subdwarf alike, and the higher Balmer lines do not tell their gravity apart"
                )
        elif d >= 0.12 and f >= 35:
            strong_balmer = True
            partner, others = series_partner(m, n, f)
            if finite(br) and br > HOT_DA_COLOUR and f < HOT_DA_FWHM:
                # At log g 8 a DA as hot as an A star or hotter has Balmer lines 60-100 Å
                # wide (widest near 12,000 K); lines half that width on so blue a continuum
                # are a hot subdwarf's, whose gravity (log g 5-6) broadens them far less.
                e.add(
                    -1.5,
                    f"{txt}, on a continuum as blue as log F4600/F6100 = {br:.2f}: narrower "
                    f"than the {HOT_DA_FWHM:.0f} Å or more of a DA white dwarf this hot, "
                    "so the lower gravity of a hot subdwarf",
                    keys,
                )
            elif others:
                # A DA's lines are all broad: one clearly narrow Balmer line beside the wide
                # one is a hot subdwarf's (log g 5-6) or a main-sequence star's, and the
                # wide "line" a depressed stretch of continuum or noise.
                e.add(
                    -1.5,
                    f"{txt}, but {others[0][0]}: no higher-series partner at that width, "
                    "so not the pressure broadening of a DA white dwarf",
                    keys + (f"{others[0][1]}_fwhm",),
                )
            elif partner:
                balmer = min(4.0, 2.5 + (f - 35) / 15)
                e.add(
                    balmer,
                    f"{txt}, and {partner[0]}: pressure broadening of a DA white dwarf",
                    keys + (f"{partner[1]}_fwhm",),
                )
            else:
                balmer = 2.0
                e.add(
                    balmer,
                    f"{txt}: broad, as in a DA white dwarf, though no other Balmer line "
                    "could be measured to confirm the width",
                    keys,
                )
        elif d >= 0.2:
            strong_balmer = True
            if f >= 28:
                e.add(0.0, f"{txt}: broad, but short of a typical white dwarf's", keys)
            else:
                e.add(
                    -3.0,
                    f"{txt}: too narrow for a white dwarf (A/B star or hot subdwarf)",
                    keys,
                    decisive=True,
                )
        elif d >= 0.1 and f < 28:
            e.add(-1.0, f"{txt}: weak, narrow Balmer lines (hot subdwarf or B star)", keys)
        else:
            e.add(0.0, f"{txt}: no strong Balmer lines (not a DA)", keys)
    resolved = strong_balmer and balmer > 0 and series_resolved(m)
    if resolved:
        e.add(
            -3.0,
            f"H10, H11 and H12 sharp and apart (contrast {m['hser_contrast']:.2f} against the "
            f"flux between them, {m['hser_sig']:.0f} sigma): the Balmer series resolved to H12, "
            "which a white dwarf's pressure (log g ~8) merges beyond H8-H9, so the lower "
            "gravity of a hot subdwarf or an A/B star",
            ("hser_contrast",),
            decisive=True,
        )
    h9 = m.get("h9_contrast")
    if finite(h9) and strong_balmer:
        e.checked += 1
        if h9 > 0.3:
            e.add(
                -1.5,
                f"H9 is sharp and separate (contrast {h9:.2f}): the high series is resolved as in an A/B star",
                ("h9_contrast",),
            )
        elif h9 < HIGH_SERIES_MERGED and balmer > 0 and not resolved:
            e.add(
                0.5,
                f"H8-H10 merged (H9 contrast {h9:.2f}), as pressure broadening does",
                ("h9_contrast",),
            )
    cak, cakd = m.get("cak_ew"), m.get("cak_depth")
    if finite(cak):
        e.checked += 1
        if cak > 1.5 and finite(cakd) and cakd > 0.15:
            merged = finite(h9) and h9 < HIGH_SERIES_MERGED and not resolved
            if strong_balmer and balmer > 0 and merged:
                # Lines as broad as a DA's with its gravity sign (the high series merged):
                # the Ca II K line is a DAZ's accreted metal or interstellar, no A star's.
                e.add(
                    0.0,
                    f"Ca II K absorption EW {cak:.1f} Å beside broad Balmer lines and a merged "
                    "high series: a DAZ's metal line or interstellar calcium, not an A star's",
                    ("cak_ew",),
                )
            elif strong_balmer:
                e.add(
                    -1.5,
                    f"Ca II K absorption EW {cak:.1f} Å beside strong Balmer lines: an A star",
                    ("cak_ew",),
                )
            elif hot:
                absent, why, hkeys = balmer_absence(m)
                if absent:
                    e.add(
                        3.0,
                        f"Ca II K EW {cak:.1f} Å on a blue continuum with {why}: a DZ white dwarf",
                        ("cak_ew",) + hkeys,
                    )
                else:
                    e.add(
                        -1.0,
                        f"Ca II K EW {cak:.1f} Å on a blue continuum, but {why}: the metal "
                        "line of an A/F/G star, not a DZ white dwarf",
                        ("cak_ew",) + hkeys,
                    )
                    ha, err = m.get("ha_w_fitdepth"), m.get("ha_w_fiterr")
                    if hkeys == ("ha_w",) and finite(ha) and finite(err):
                        if ha - 2.0 * err < PRESENT_DEPTH and not e.undecided:
                            # H-beta to H-delta measured absent; the hydrogen the DZ
                            # reading turns on is H-alpha alone, within its noise of the
                            # depth that counts as a line.
                            e.undecided = (
                                f"the one Balmer line seen, H-alpha (depth {ha:.2f} +- "
                                f"{err:.2f}), is within its noise of the {PRESENT_DEPTH:.1f} "
                                "that counts as a line, so whether this is a DZ white dwarf "
                                "or a metal-line star cannot be told"
                            )
    if not strong_balmer:
        he_keys = [
            k
            for k in ("hei4473", "hei4923", "hei5877")
            if finite(m.get(f"{k}_ew")) and m.get(f"{k}_sig", 0.0) > 3.0
        ]
        he = [m[f"{k}_ew"] for k in he_keys]
        he2, he2_sig = m.get("heii4687_ew"), m.get("heii4687_sig")
        # He I 4713 sits beside He II 4686, and a DB's pressure-broadened He I wing reaches
        # into its window: weak "He II" beside strong He I is that wing, not a hotter star
        # (in O stars and He-rich subdwarfs He II 4686 is comparable to the He I lines).
        he2_abs = (
            finite(he2)
            and he2 > max(0.3, 0.25 * max(he, default=0.0))
            and finite(he2_sig)
            and he2_sig > 3
        )
        he_used = tuple(f"{k}_ew" for k, x in zip(he_keys, he) if x > 1.0)
        # A DB's He I lines are tens of Å wide and deep; an OB star's are 1-1.5 Å of EW.
        he_strong = [
            k
            for k in he_keys
            if m[f"{k}_ew"] >= DB_HE_EW and m.get(f"{k}_depth", 0.0) >= DB_HE_DEPTH
        ]
        absent, why, hkeys = balmer_absence(m)
        # Every star hotter than about 7,000 K with hydrogen in its atmosphere shows Balmer
        # lines: on a blue continuum their measured absence marks a white dwarf with a
        # helium atmosphere (DB, DC, DZ), unless He II marks a He-rich hot subdwarf.
        no_h = hot and absent and not he2_abs
        # A DO white dwarf (45,000-120,000 K) has a helium atmosphere hot enough to ionise
        # it: He II 4686 is its strongest line, hydrogen absent and He I weak or gone. An O
        # star or He-rich sdO shows He II too, but beside Balmer lines or He I as strong.
        do = (
            hot
            and absent
            and finite(he2)
            and he2 >= DO_HEII_EW
            and finite(he2_sig)
            and he2_sig > 4
            and max(he, default=0.0) < 0.5 * he2
        )
        if do:
            e.add(
                2.5,
                f"He II 4686 absorption (EW {he2:.1f} Å, {he2_sig:.0f} sigma) with {why}, and "
                "He I weaker: the ionised helium atmosphere of a DO white dwarf",
                ("heii4687_ew",) + hkeys,
            )
        dc = featureless(m, hot)
        c2 = m.get("c2_5165")
        dq = finite(c2) and c2 > 0.15 and finite(br) and br > -0.15
        if he and sum(1 for x in he if x > 1.0) >= 2 and hot and not do:
            if he2_abs:
                e.add(
                    -1.0,
                    f"He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) together with He II 4686 "
                    f"(EW {he2:.1f} Å): an O star or He-rich hot subdwarf; a DB white dwarf is too cool for He II",
                    he_used + ("heii4687_ew",),
                )
            elif bw is not None and bw[0] >= 0.1 and bw[1] < 28:
                # A DB's atmosphere has no hydrogen; He I beside Balmer lines is a B star's.
                e.add(
                    -0.5,
                    f"He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) beside weak, "
                    "narrow Balmer lines: a hot B star or subdwarf, not a DB white dwarf, "
                    "which has no hydrogen",
                    he_used + (f"{bw[3]}_depth",),
                )
            elif len(he_strong) >= 2 and absent:
                e.add(
                    3.0,
                    f"strong, broad He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) "
                    f"with {why} and no He II: a DB white dwarf",
                    tuple(f"{k}_ew" for k in he_strong) + hkeys,
                )
            elif len(he_strong) >= 2:
                e.add(
                    -0.5,
                    f"strong He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}), but "
                    f"{why}: a DB white dwarf has no hydrogen",
                    tuple(f"{k}_ew" for k in he_strong) + hkeys,
                )
            elif dc is not None or dq or no_h or any(i.points > 0 for i in e.items):
                # A DC reading (which counts these lines as noise), a DZ or a DQ reading
                # stands beside them: a thought that then calls them a hot star's lines
                # would contradict it.
                e.add(
                    -0.5,
                    f"He I absorption at most weak ({', '.join(f'EW {x:.1f} Å' for x in he)}): "
                    "no pair of strong, broad He I lines, so no DB white dwarf",
                    he_used,
                )
            else:
                e.add(
                    -0.5,
                    f"He I absorption ({', '.join(f'EW {x:.1f} Å' for x in he)}) weak and "
                    f"narrow: a hot star's, not the lines tens of Å wide of a DB white dwarf",
                    he_used,
                )
        if dq:
            e.add(
                3.0,
                f"C2 Swan 5165 head depth {depth_points(c2):.2f} on a warm continuum (log F4600/F6100 = {br:.2f}): a DQ white dwarf",
                ("c2_5165",),
            )
        if no_h and dc is None and not dq and not any(i.points > 0 for i in e.items):
            e.add(
                2.0,
                f"a continuum as blue as log F4600/F6100 = {br:.2f} with {why}: a star this "
                "hot shows Balmer lines unless its atmosphere is helium, as a DB, DC or DZ "
                "white dwarf's is",
                hkeys,
            )
        if dc is not None and not do:
            e.add(
                2.5,
                f"a featureless blue continuum: Balmer lines shallower than {dc:.2f} of the continuum "
                "and no He I 4471, He I 5876 or Ca II K line of EW above 1 Å at over 4 sigma, "
                "as in a DC white dwarf",
                tuple(k for k in ("hb_w_depth", "hg_w_depth") if finite(m.get(k))),
            )
    if (
        bw is not None
        and bw[0] == 0.0
        and hot
        and not e.undecided
        and not any(i.points > 0 or i.points <= -1.5 for i in e.items)
    ):
        absent, why, _ = balmer_absence(m)
        if not absent and "too noisy" in why:
            # No Balmer line stands above the noise, and the noise could hide one as deep
            # as a white dwarf's: the line the answer turns on was not measured.
            e.undecided = f"no Balmer line stands above the noise, yet {why}"
    if finite(br):
        e.checked += 1
        if br < -0.2:
            e.add(
                -2.0, f"red continuum (log F4600/F6100 = {br:.2f}): too cool for most white dwarfs"
            )
    else:
        e.missing.append("continuum colour")
    if finite(m.get("tio5")) and m["tio5"] < 0.75 and not hot:
        e.add(-2.0, f"TiO bands (TiO5 = {m['tio5']:.2f}): an M star dominates", ("tio5",))
    e.prior = -1.0  # most candidates are not white dwarfs
    return e


def featureless(m: dict[str, float], hot: bool) -> float | None:
    """The deepest Balmer line's depth where a hot continuum reads as a DC white dwarf's:
    no line at all (None otherwise). OB stars and hot subdwarfs always show Balmer or He I
    lines at these depths, so featurelessness is the test."""
    broad = [m.get(k) for k in ("hb_w_depth", "hg_w_depth") if finite(m.get(k))]
    narrow = [
        (m.get(f"{k}_ew"), m.get(f"{k}_sig", 0.0))
        for k in ("hb", "hg", "hei4473", "hei5877", "cak")
        if finite(m.get(f"{k}_ew"))
    ]
    # Any line clearly there is a feature: an O star's He I of EW 1.5 Å is no DC.
    lines_seen = [ew for ew, sig in narrow if ew > 1.0 and sig > 4.0]
    c2 = m.get("c2_5165")
    if (
        broad
        and len(narrow) >= 3
        and max(broad) < 0.12
        and not lines_seen
        and hot
        and not (finite(c2) and c2 > 0.15)
        and not balmer_emission(m)  # a Be star's or a CV's emission is a feature
    ):
        return max(broad)
    return None


# A continuum bluer than this (log F4600/F6100; the tune split's A stars read 0.15-0.42, its
# F and G dwarfs mostly below it) and a lead Balmer line narrower than HOT_DA_FWHM (Å) is no
# DA: the tune split's DAs on such a continuum read 58 Å and wider (the coolest, at 0.02-0.07,
# too), while hot subdwarfs' lines stay near 15-40 Å. The bound sits well below a 20,000-
# 40,000 K subdwarf's own colour (0.4-0.5) because a flux-calibration error or reddening of
# 0.1-0.3 in this colour must not let its narrow lines pass for a DA's.
HOT_DA_COLOUR, HOT_DA_FWHM = 0.1, 50.0

# A DA's Balmer lines follow its temperature: from ~12,000 K, where they are widest and
# deepest (depth 0.5-0.6, H-beta 80-130 Å), both shrink as the hydrogen ionises, to depth
# 0.1-0.3 and 30-50 Å above ~30,000 K (DA1-DA2; Koester and Tremblay model grids at log g
# 8). A hot subdwarf's lines as wide are deeper (its gravity is 100-1000 times lower, its
# hydrogen less ionised at 25,000-35,000 K), an sdO's shallow lines narrower (10-25 Å; the
# tune split's FEIGE34 reads 12-25 Å). On a continuum bluer than HOT_TRACK_COLOUR (above
# ~15,000 K, with 0.1 of flux-calibration error to spare), a lead line no deeper than
# HOT_DA_DEPTH and HOT_DA_MIN_FWHM to HOT_DA_FWHM wide sits on the hot DA's track; the merged
# high series (H9 contrast under HIGH_SERIES_MERGED) is the gravity sign that confirms it.
HOT_TRACK_COLOUR, HOT_DA_DEPTH, HOT_DA_MIN_FWHM = 0.25, 0.3, 28.0
HIGH_SERIES_MERGED = 0.2


def hot_da_track(br: float, depth: float, fwhm: float) -> bool:
    """A lead Balmer line as shallow and as wide as a DA's above ~30,000 K, on a continuum
    that hot (see HOT_TRACK_COLOUR)."""
    return (
        finite(br)
        and br > HOT_TRACK_COLOUR
        and PRESENT_DEPTH <= depth <= HOT_DA_DEPTH
        and HOT_DA_MIN_FWHM <= fwhm < HOT_DA_FWHM
    )


# A DO white dwarf's He II 4686: at least this EW (Å); DOs read 2-10 Å.
DO_HEII_EW = 1.5

# A DB white dwarf's He I: at least two lines this strong (EW, Å) and this deep.
DB_HE_EW, DB_HE_DEPTH = 2.5, 0.1


def series_partner(
    m: dict[str, float], lead: str, fwhm: float
) -> tuple[tuple[str, str] | None, list[tuple[str, str]]]:
    """Another of H-beta / H-gamma / H-delta as broad as a DA's lines are: (the first such
    partner as (sentence, feature), the clearly measured ones that are narrow). A partner's
    fitted depth is not compared: H-delta's short span lets the continuum take part of it."""
    good, bad = [], []
    for n, lbl in (("hb_w", "H-beta"), ("hg_w", "H-gamma"), ("hd_w", "H-delta")):
        f, d = m.get(f"{n}_fwhm"), m.get(f"{n}_depth")
        if n == lead or not (finite(f) and finite(d)) or below_noise(m, n) or unanchored(m, n):
            continue
        said = f"{lbl} FWHM {f:.0f} Å, depth {d:.2f}"
        if f >= 28.0:
            good.append((said, n))
        elif m.get(f"{n}_fitsig", 0.0) >= 5.0:
            bad.append((said, n))  # a narrow line measured clearly, not noise pinching it
    return (good[0] if good else None), bad


def say_balmer(m: dict[str, float], name: str, lbl: str) -> str:
    """The line's own reading, qualified where another Balmer line is the one judged by."""
    text = say_balmer_wd(m, name, lbl)
    bw = balmer_wd(m)
    # Nothing to weigh against where this line, or every line, is below the noise.
    if (
        bw is None
        or bw[3] == f"{name}_w"
        or bw[0] == 0.0
        or below_noise(m, f"{name}_w")
        or unanchored(m, f"{name}_w")
    ):
        return text
    lead = {"hb_w": "H-beta", "hg_w": "H-gamma", "ha_w": "H-alpha"}[bw[3]]
    f, d = m.get(f"{name}_w_fwhm"), m.get(f"{name}_w_depth")
    if finite(f) and finite(d) and ((f < 28) != (bw[1] < 28) or (f >= 35) != (bw[1] >= 35)):
        if d > bw[0]:
            # This line is the deeper one, yet not the one judged by: its broad window
            # as a whole reads no absorption (a narrow line in a window that is otherwise
            # continuum), which the sentence must say rather than call the lead deeper.
            return (
                f"{lbl} in absorption, FWHM {f:.0f} Å, depth {d:.2f}: a different width from "
                f"{lead} (FWHM {bw[1]:.0f} Å, depth {bw[0]:.2f}); its broad window as a whole "
                f"reads no absorption, so the broad profile is judged by {lead}."
            )
        return (
            f"{lbl} in absorption, FWHM {f:.0f} Å, depth {d:.2f}: a different width from {lead} "
            f"(FWHM {bw[1]:.0f} Å, depth {bw[0]:.2f}); a shallow line's width is the less "
            f"certain, so I judge by {lead}, the deeper and wider line."
        )
    return text


# Zoom windows (rest-frame vacuum Angstrom): the task's own diagnostics first, then those
# that rule in the competing explanations; each with the measurements its thought reports.
ZOOMS = [
    Zoom(
        (4650.0, 5080.0),
        "H-beta profile",
        ["hb_w_fwhm", "hb_w_depth", "hb_w_ew"],
        lambda m: say_balmer(m, "hb", "H-beta"),
    ),
    Zoom(
        (4040.0, 4500.0),
        "H-delta and H-gamma profiles",
        ["hg_w_fwhm", "hg_w_depth", "hg_w_ew", "hd_w_fwhm", "hd_w_depth"],
        lambda m: say_balmer(m, "hg", "H-gamma") + " " + say_balmer(m, "hd", "H-delta"),
    ),
    Zoom(
        (3725.0, 4000.0),
        "H8-H12 and Ca II K (A star and subdwarf check)",
        ["hser_contrast", "h9_contrast", "h8_contrast", "cak_ew"],
        lambda m: say_high_balmer(m),
    ),
    Zoom(
        (5820.0, 5940.0),
        "He I 5876 (DB check)",
        ["hei5877_ew", "hei5877_em"],
        lambda m: say_he(m, "hei5877", "He I 5876", "wd"),
    ),
    Zoom(
        (6400.0, 6730.0),
        "H-alpha",
        ["ha_w_fwhm", "ha_w_depth", "ha_ew"],
        lambda m: say_balmer(m, "ha", "H-alpha"),
    ),
]
