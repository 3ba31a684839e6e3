"""Cataclysmic variable: the evidence, the zoom plan and the calibration of the `cv` task."""

from __future__ import annotations

from agent.policies.rules.features import Evidence, cool_type, finite, in_emission
from agent.policies.rules.narration import Zoom, say_emission, say_he, say_tio

TARGET = "a cataclysmic variable"
HYPOTHESIS = "I will check the Balmer and helium lines for disc emission, and rule out active M dwarfs, Be stars and QSOs."
# p = sigmoid(a * x + b), x = score * (0.4 + 0.6 * coverage); see agent.policies.rules.calibration.
CALIBRATION = (1.625, 0.0)


def evidence(m: dict[str, float]) -> Evidence:
    e = Evidence()
    z = m.get("redshift", 0.0)
    if finite(z) and abs(z) > 0.005:
        e.add(
            -6.0, f"pipeline redshift z = {z:.3f}: extragalactic, while a CV sits at z ~ 0 (a QSO?)"
        )
    em = {}
    for name, lbl in (("ha", "H-alpha"), ("hb", "H-beta"), ("hg", "H-gamma")):
        ew, pk, fw = (m.get(f"{name}_{k}") for k in ("ew", "peak", "fwhm"))
        if not finite(ew):
            e.missing.append(lbl)
            continue
        e.checked += 1
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
        if not finite(m.get(f"{name}_ew")):
            continue
        e.checked += 1
        if in_emission(m, name):
            fw = m[f"{name}_fwhm"]
            e.add(
                pts if fw >= 8.0 else 0.3,
                f"{lbl} in emission (EW {m[f'{name}_ew']:.1f} Å, FWHM {fw:.0f} Å)",
            )
    ct = cool_type(m)
    if finite(ct) and ct > 0.4:
        if not (em.get("hb") and m.get("hb_fwhm", 0) >= 12):
            e.add(
                -2.0,
                f"TiO bands of an M dwarf (TiO strength {ct:.1f}) without broad H-beta emission: chromospheric activity at most",
            )
    if not any(em.values()):
        e.add(-2.0, "no Balmer emission")
    e.score -= 1.0
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
