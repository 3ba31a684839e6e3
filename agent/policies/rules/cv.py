"""Cataclysmic variable: the evidence, the zoom plan and the calibration of the `cv` task."""

from __future__ import annotations

from agent.policies.rules.features import Evidence, cool_type, extragalactic, finite, in_emission
from agent.policies.rules.narration import Zoom, say_emission, say_he, say_tio

TARGET = "a cataclysmic variable"
HYPOTHESIS = "I will check the Balmer and helium lines for disc emission, and rule out active M dwarfs, Be stars and QSOs."
# p = sigmoid(a * x + b), x = Reading.x (the score after caps, shrunk by noise and coverage);
# see agent.policies.rules.calibration.
CALIBRATION = (1.795, 0.0)


BALMER = (("ha", "H-alpha"), ("hb", "H-beta"), ("hg", "H-gamma"))


def evidence(m: dict[str, float]) -> Evidence:
    e = Evidence(required=("ha_ew", "hb_ew", "hg_ew"))
    extragalactic(e, m, "a CV sits at z ~ 0", -6.0)
    em = {}
    for name, lbl in BALMER:
        ew, pk, fw = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm"))
        if not finite(ew):
            e.missing.append(lbl)
            continue
        e.checked += 1
        keys = (f"{name}_ew", f"{name}_peak", f"{name}_fwhm")
        em[name] = in_emission(m, name)
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
                keys,
            )
        elif ew > 1.0 and m.get(f"{name}_sig", 0) > 3:
            e.add(
                {"ha": -1.5, "hb": -2.0, "hg": -1.0}[name],
                f"{lbl} in absorption (EW {ew:.1f} Å)",
                keys,
            )
    emitting = tuple(f"{n}_fwhm" for n, _ in BALMER if em.get(n))
    broad_any = any(em.get(n) and m.get(f"{n}_fwhm", 0) >= 12.0 for n, _ in BALMER)
    if any(em.values()) and not broad_any:
        e.add(
            -1.5,
            "all Balmer emission is narrow (FWHM < 12 Å): a Be star, a chromosphere or a nebula rather than a disc",
            emitting,
        )
    if em.get("ha") and em.get("hb") is False and "hb" in em:
        e.add(
            -1.0,
            "H-alpha emission without H-beta emission: a steep decrement, as in Be stars and chromospheres",
            ("ha_ew", "hb_ew"),
        )
    for name, lbl, pts in (
        ("hei5877", "He I 5876", 1.0),
        ("hei6680", "He I 6678", 1.0),
        ("heii4687", "He II 4686", 1.5),
        ("hei4923", "He I 4922", 0.5),
    ):
        if not finite(m.get(f"{name}_ew")):
            continue
        e.checked += 1
        if in_emission(m, name):
            fw = m[f"{name}_fwhm"]
            e.add(
                pts if fw >= 8.0 else 0.3,
                f"{lbl} in emission (EW {m[f'{name}_ew']:.1f} Å, FWHM {fw:.0f} Å)",
                (f"{name}_ew", f"{name}_fwhm"),
            )
    ct = cool_type(m)
    if finite(ct) and ct > 0.4:
        if not (em.get("hb") and m.get("hb_fwhm", 0) >= 12):
            e.add(
                -2.0,
                f"TiO bands of an M dwarf (TiO strength {ct:.1f}) without broad H-beta emission: chromospheric activity at most",
                tuple(k for k in ("tio5", "tio_7054") if finite(m.get(k))),
            )
    if not any(em.values()):
        e.add(-2.0, "no Balmer emission", tuple(f"{n}_ew" for n, _ in BALMER if n in em))
    e.prior = -1.0
    return e


# Zoom windows (rest-frame vacuum Angstrom): the task's own diagnostics first, then those
# that rule in the competing explanations; each with the measurements its thought reports.
ZOOMS = [
    Zoom(
        (6450.0, 6720.0),
        "H-alpha and He I 6678",
        ["ha_ew", "ha_peak", "ha_fwhm", "hei6680_ew"],
        lambda m: say_emission(m, "ha", "H-alpha") + " " + say_he(m, "hei6680", "He I 6678", "cv"),
    ),
    Zoom(
        (4780.0, 4950.0),
        "H-beta",
        ["hb_ew", "hb_peak", "hb_fwhm"],
        lambda m: say_emission(m, "hb", "H-beta"),
    ),
    Zoom(
        (4280.0, 4400.0),
        "H-gamma",
        ["hg_ew", "hg_peak", "hg_fwhm"],
        lambda m: say_emission(m, "hg", "H-gamma"),
    ),
    Zoom(
        (5830.0, 5930.0),
        "He I 5876",
        ["hei5877_ew", "hei5877_em"],
        lambda m: say_he(m, "hei5877", "He I 5876", "cv"),
    ),
    Zoom(
        (4630.0, 4730.0),
        "He II 4686 and Bowen blend",
        ["heii4687_ew", "heii4687_em"],
        lambda m: (
            say_emission(m, "heii4687", "He II 4686")
            + " (He II emission marks a magnetic CV or a nova-like when present.)"
        ),
    ),
    Zoom(
        (7000.0, 7200.0),
        "TiO 7054 (M dwarf check)",
        ["tio_7054", "tio5"],
        lambda m: say_tio(m, "cv"),
    ),
]
