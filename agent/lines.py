"""What astronomers look at: diagnostic atomic lines and molecular band heads, as data.

Every wavelength here is in VACUUM Angstrom, the frame of LAMOST, SDSS and DESI spectra and
of the zoom tool's ranges. Most stellar line lists and band-head tables are quoted in air;
those entries keep their air value in `Feature.air` and are converted with
`agent.units.air_to_vacuum` when this module is imported. Entries without an air value
(QSO rest-frame ultraviolet lines below 2000 A, telluric regions defined in vacuum) are
quoted in vacuum at the source.

A band's `wavelength` is its head: the sharp edge from which absorption fades away in the
`degrade` direction ("blue": the band lies blueward of the head, as for C2 Swan; "red":
redward, as for TiO). At LAMOST's resolution (R ~ 1800) a head shows as a step.

The catalogue is used by the renderers' markers, the rule-based inspector and the UI;
new features are added by appending a `Feature` to `FEATURES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.tasks import TASKS
from agent.units import air_to_vacuum

Kind = Literal["line", "band", "telluric"]
Degrade = Literal["blue", "red"]


@dataclass(frozen=True)
class Feature:
    """One diagnostic feature: a line centre, a band head or a telluric region."""

    key: str  # unique, e.g. "H-alpha", "TiO 7054"
    label: str  # short text for plot markers, e.g. "Hα", "TiO"
    species: str  # "H I", "He II", "C2", "TiO", "O2", ...
    wavelength: float  # vacuum Angstrom: line centre, band head, or telluric region centre
    kind: Kind
    window: tuple[float, float]  # vacuum Angstrom: a good window to zoom into
    tasks: tuple[str, ...]  # tasks this feature helps decide
    degrade: Degrade | None = None  # bands: side of the head the absorption lies on
    air: float | None = None  # the source (air) value, where the source was in air
    note: str = ""  # what it tells an astronomer

    @property
    def is_band(self) -> bool:
        return self.kind in ("band", "telluric")

    def extent(self, length: float = 150.0) -> tuple[float, float]:
        """The wavelength span the feature covers (a band from its head over `length` A)."""
        if self.kind == "telluric":
            return self.window
        if self.degrade == "blue":
            return (self.wavelength - length, self.wavelength)
        if self.degrade == "red":
            return (self.wavelength, self.wavelength + length)
        return (self.wavelength, self.wavelength)


R_H = 109677.58  # Rydberg constant for hydrogen, cm^-1


def balmer(n: int) -> float:
    """Vacuum wavelength (Angstrom) of the Balmer line from level n (n=3: H-alpha).

    >>> round(balmer(3), 1), round(balmer(11), 1)
    (6564.7, 3771.7)
    """
    return 1e8 / (R_H * (0.25 - 1.0 / n**2))


def _vac(air: float) -> float:
    return round(float(air_to_vacuum(air)), 2)


def _line(
    key: str,
    label: str,
    species: str,
    air: float | None,
    tasks: tuple[str, ...],
    half: float = 60.0,
    vacuum: float | None = None,
    note: str = "",
) -> Feature:
    wav = vacuum if vacuum is not None else _vac(air)  # type: ignore[arg-type]
    return Feature(
        key=key,
        label=label,
        species=species,
        wavelength=wav,
        kind="line",
        window=(round(wav - half), round(wav + half)),
        tasks=tasks,
        air=air if vacuum is None else None,
        note=note,
    )


def _band(
    key: str,
    label: str,
    species: str,
    air: float,
    degrade: Degrade | None,
    tasks: tuple[str, ...],
    note: str = "",
) -> Feature:
    wav = _vac(air)
    # Zoom windows show the continuum on the undisturbed side and the band on the other.
    if degrade == "blue":
        window = (round(wav - 200), round(wav + 100))
    elif degrade == "red":
        window = (round(wav - 100), round(wav + 200))
    else:
        window = (round(wav - 100), round(wav + 100))
    return Feature(
        key=key,
        label=label,
        species=species,
        wavelength=wav,
        kind="band",
        window=window,
        tasks=tasks,
        degrade=degrade,
        air=air,
        note=note,
    )


def _telluric(
    key: str, label: str, species: str, lo: float, hi: float, tasks: tuple[str, ...], note: str
) -> Feature:
    return Feature(
        key=key,
        label=label,
        species=species,
        wavelength=round((lo + hi) / 2, 1),
        kind="telluric",
        window=(lo, hi),
        tasks=tasks,
        degrade="red",
        note=note,
    )


_WD = ("wd",)
_CV = ("cv",)
_COOL = ("carbon", "s_type", "m_giant")

# Air wavelengths below are standard laboratory values (NIST ASD; Moore's multiplet table)
# and band heads as tabulated for late-type stellar spectra (Pearse & Gaydon; Keenan & McNeil;
# Kirkpatrick et al. 1991; Reid et al. 1995 for CaH).
FEATURES: tuple[Feature, ...] = (
    # -- hydrogen: Balmer series ---------------------------------------------------------
    _line(
        "H-alpha",
        "Hα",
        "H I",
        6562.80,
        ("cv", "wd"),
        100,
        note="emission in CVs, Be stars, active M dwarfs; broad absorption in DA white dwarfs",
    ),
    _line(
        "H-beta",
        "Hβ",
        "H I",
        4861.33,
        ("cv", "wd"),
        150,
        note="DA white dwarfs: pressure-broadened, tens to 100+ A wide; CVs: broad emission",
    ),
    _line("H-gamma", "Hγ", "H I", 4340.47, ("cv", "wd"), 120),
    _line("H-delta", "Hδ", "H I", 4101.74, ("wd",), 100),
    _line("H-epsilon", "Hε", "H I", 3970.07, ("wd",), 60, note="blends with Ca II H in A stars"),
    _line(
        "H8",
        "H8",
        "H I",
        3889.05,
        ("wd",),
        40,
        note="higher series members merge early in white dwarfs (low Balmer jump)",
    ),
    _line("H9", "H9", "H I", 3835.38, ("wd",), 30),
    # The lines a white dwarf's pressure merges and a subdwarf's or A/B star's show apart.
    _line("H10", "H10", "H I", 3797.90, ("wd",), 20),
    _line("H11", "H11", "H I", 3770.63, ("wd",), 15),
    _line("H12", "H12", "H I", 3750.15, ("wd",), 12),
    # -- helium -------------------------------------------------------------------------
    _line("He I 4026", "He I", "He I", 4026.19, ("wd",), 50),
    _line(
        "He I 4471",
        "He I",
        "He I",
        4471.48,
        ("wd", "cv"),
        60,
        note="DB white dwarfs in absorption; CV discs in emission",
    ),
    _line("He I 4922", "He I", "He I", 4921.93, ("wd", "cv"), 60),
    _line("He I 5016", "He I", "He I", 5015.68, ("wd", "cv"), 50),
    _line(
        "He I 5876",
        "He I",
        "He I",
        5875.62,
        ("wd", "cv"),
        80,
        note="strongest optical He I line; close to Na I D",
    ),
    _line("He I 6678", "He I", "He I", 6678.15, ("wd", "cv"), 60),
    _line("He I 7065", "He I", "He I", 7065.19, ("cv",), 60),
    _line(
        "He II 4686",
        "He II",
        "He II",
        4685.70,
        ("cv",),
        60,
        note="magnetic CVs (polars, intermediate polars) and nova-likes",
    ),
    _line(
        "Bowen 4640",
        "C III/N III",
        "C III/N III",
        4640.0,
        ("cv",),
        60,
        note="Bowen fluorescence blend beside He II 4686 in high-excitation CVs",
    ),
    # -- calcium ------------------------------------------------------------------------
    _line(
        "Ca II K",
        "Ca K",
        "Ca II",
        3933.66,
        ("wd", "cv"),
        50,
        note="present in A stars, absent in DA white dwarfs (DZ: strong); emission in active M dwarfs",
    ),
    _line("Ca II H", "Ca H", "Ca II", 3968.47, ("wd", "cv"), 50),
    _line(
        "Ca I 4227",
        "Ca I",
        "Ca I",
        4226.73,
        ("m_giant", "carbon"),
        50,
        note="strong in cool dwarfs",
    ),
    _line(
        "Ca II 8498",
        "Ca T",
        "Ca II",
        8498.02,
        ("m_giant", "s_type"),
        60,
        note="Ca II triplet: stronger in giants than in dwarfs",
    ),
    _line("Ca II 8542", "Ca T", "Ca II", 8542.09, ("m_giant", "s_type"), 60),
    _line("Ca II 8662", "Ca T", "Ca II", 8662.14, ("m_giant", "s_type"), 60),
    # -- sodium, potassium, magnesium, iron --------------------------------------------
    _line("Na I D2", "Na D", "Na I", 5889.95, ("m_giant", "carbon", "s_type"), 50),
    _line("Na I D1", "Na D", "Na I", 5895.92, ("m_giant", "carbon", "s_type"), 50),
    _line(
        "Na I 8183",
        "Na I",
        "Na I",
        8183.26,
        ("m_giant",),
        50,
        note="gravity-sensitive doublet: strong in M dwarfs, weak in M giants",
    ),
    _line("Na I 8195", "Na I", "Na I", 8194.82, ("m_giant",), 50),
    _line(
        "K I 7665",
        "K I",
        "K I",
        7664.90,
        ("m_giant",),
        60,
        note="gravity-sensitive; sits in the telluric O2 A band",
    ),
    _line("K I 7699", "K I", "K I", 7698.96, ("m_giant",), 60),
    _line(
        "Mg I 5167",
        "Mg b",
        "Mg I",
        5167.32,
        ("carbon", "m_giant"),
        60,
        note="Mg b triplet: gravity-sensitive in K stars; overlaps C2 5165 and TiO 5167",
    ),
    _line("Mg I 5173", "Mg b", "Mg I", 5172.68, ("carbon", "m_giant"), 60),
    _line("Mg I 5184", "Mg b", "Mg I", 5183.60, ("carbon", "m_giant"), 60),
    _line(
        "Mg II 4481",
        "Mg II",
        "Mg II",
        4481.13,
        ("wd",),
        50,
        note="present in A/B stars, absent in DA white dwarfs",
    ),
    _line("Fe I 4384", "Fe I", "Fe I", 4383.55, ("wd",), 40),
    _line("Fe I 5270", "Fe I", "Fe I", 5269.54, ("carbon",), 40),
    _line("Fe I 5328", "Fe I", "Fe I", 5328.04, ("carbon",), 40),
    # -- nebular and QSO emission (CV contaminants) ------------------------------------
    _line("[O II] 3727", "[O II]", "[O II]", 3727.42, _CV, 50),
    _line(
        "[O III] 4959",
        "[O III]",
        "[O III]",
        4958.91,
        _CV,
        50,
        note="narrow forbidden lines: planetary nebulae, AGN, H II regions, not CVs",
    ),
    _line("[O III] 5007", "[O III]", "[O III]", 5006.84, _CV, 50),
    _line("[O I] 6300", "[O I]", "[O I]", 6300.30, _CV, 40),
    _line("[N II] 6548", "[N II]", "[N II]", 6548.05, _CV, 40),
    _line("[N II] 6583", "[N II]", "[N II]", 6583.45, _CV, 40),
    _line("[S II] 6716", "[S II]", "[S II]", 6716.44, _CV, 40),
    _line("[S II] 6731", "[S II]", "[S II]", 6730.82, _CV, 40),
    # Rest-frame ultraviolet quasar lines are vacuum by convention (below 2000 A, or quoted so).
    _line(
        "C IV 1549",
        "C IV",
        "C IV",
        None,
        _CV,
        80,
        vacuum=1549.06,
        note="QSO broad line, observed in the optical at z > 1.4",
    ),
    _line("C III] 1909", "C III]", "C III]", None, _CV, 80, vacuum=1908.73),
    _line(
        "Mg II 2800",
        "Mg II",
        "Mg II",
        None,
        _CV,
        80,
        vacuum=2799.12,
        note="QSO broad line, observed in the optical at 0.35 < z < 2.2",
    ),
    # -- molecular bands: carbon stars -----------------------------------------------------
    _band(
        "C2 4737",
        "C2",
        "C2",
        4737.1,
        "blue",
        ("carbon", "wd"),
        note="Swan (1,0) head; carbon stars and DQ white dwarfs",
    ),
    _band(
        "C2 5165",
        "C2",
        "C2",
        5165.2,
        "blue",
        ("carbon", "wd"),
        note="Swan (0,0) head, the strongest",
    ),
    _band("C2 5636", "C2", "C2", 5635.5, "blue", ("carbon",), note="Swan (0,1) head"),
    _band("C2 6191", "C2", "C2", 6191.2, "blue", ("carbon",), note="Swan (0,2) head"),
    _band("CN 4216", "CN", "CN", 4215.2, "blue", ("carbon",), note="violet system (0,1) head"),
    _band(
        "CN 7874",
        "CN",
        "CN",
        7872.9,
        "red",
        ("carbon",),
        note="red system head; strong in carbon stars, with no TiO",
    ),
    _band("CN 8067", "CN", "CN", 8065.0, "red", ("carbon",)),
    _band(
        "CH 4300",
        "G band",
        "CH",
        4300.3,
        None,
        ("carbon",),
        note="CH G band; strong in CH and CEMP stars",
    ),
    # -- molecular bands: M and S stars ----------------------------------------------------
    _band("TiO 4955", "TiO", "TiO", 4954.6, "red", _COOL),
    _band("TiO 5167", "TiO", "TiO", 5166.7, "red", _COOL),
    _band("TiO 5448", "TiO", "TiO", 5448.0, "red", _COOL),
    _band("TiO 5847", "TiO", "TiO", 5847.0, "red", _COOL),
    _band("TiO 6159", "TiO", "TiO", 6158.7, "red", _COOL),
    _band(
        "TiO 7054",
        "TiO",
        "TiO",
        7053.7,
        "red",
        _COOL,
        note="the classic M-type marker; absent in carbon stars",
    ),
    _band("TiO 7589", "TiO", "TiO", 7589.0, "red", _COOL, note="overlaps the telluric O2 A band"),
    _band("TiO 8432", "TiO", "TiO", 8432.0, "red", _COOL),
    _band("VO 7334", "VO", "VO", 7334.0, "red", ("m_giant",), note="late M types (M7 and later)"),
    _band("VO 7851", "VO", "VO", 7851.0, "red", ("m_giant",)),
    _band(
        "CaH 6382",
        "CaH",
        "CaH",
        6382.0,
        None,
        ("m_giant",),
        note="gravity-sensitive: strong in M dwarfs, weak in M giants",
    ),
    _band("CaH 6750", "CaH", "CaH", 6750.0, None, ("m_giant",)),
    _band("ZrO 4620", "ZrO", "ZrO", 4620.7, "red", ("s_type",), note="S-type marker"),
    _band("ZrO 5551", "ZrO", "ZrO", 5551.6, "red", ("s_type",)),
    _band(
        "ZrO 6474",
        "ZrO",
        "ZrO",
        6474.0,
        "red",
        ("s_type",),
        note="with TiO 6159 and CaH the key ZrO/TiO ratio of S versus M stars",
    ),
    _band("LaO 7403", "LaO", "LaO", 7403.0, "red", ("s_type",), note="LaO: S stars"),
    _band("LaO 7910", "LaO", "LaO", 7910.0, "red", ("s_type",)),
    # -- telluric absorption (Earth's atmosphere; observed frame, vacuum) -----------------
    _telluric("O2 B", "O2 B", "O2", 6868.0, 6932.0, _COOL, "telluric O2 B band; not stellar"),
    _telluric(
        "O2 A",
        "O2 A",
        "O2",
        7596.0,
        7700.0,
        _COOL,
        "telluric O2 A band; not stellar, overlaps TiO 7589 and K I",
    ),
    _telluric("H2O 7200", "H2O", "H2O", 7165.0, 7340.0, _COOL, "telluric water vapour"),
    _telluric(
        "H2O 8200",
        "H2O",
        "H2O",
        8130.0,
        8350.0,
        _COOL,
        "telluric water vapour, around the Na I 8183/8195 doublet",
    ),
    _telluric("H2O 8950", "H2O", "H2O", 8920.0, 9100.0, _COOL, "telluric water vapour"),
)

BY_KEY: dict[str, Feature] = {f.key: f for f in FEATURES}
assert len(BY_KEY) == len(FEATURES), "feature keys must be unique"


def get(key: str) -> Feature:
    """The feature with this key; KeyError names the known keys' count when absent."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"no feature {key!r} in the catalogue ({len(BY_KEY)} features)") from None


def features_for(task: str, kinds: tuple[Kind, ...] | None = None) -> list[Feature]:
    """Features that matter for `task` (one of TASKS), in wavelength order."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    return sorted(
        (f for f in FEATURES if task in f.tasks and (kinds is None or f.kind in kinds)),
        key=lambda f: f.wavelength,
    )


def features_in(
    lo: float,
    hi: float,
    *,
    kinds: tuple[Kind, ...] | None = None,
    task: str | None = None,
) -> list[Feature]:
    """Features whose wavelength (line centre, band head) lies in [lo, hi], in order.

    Telluric regions count when they overlap the window at all.
    """
    out = []
    for f in FEATURES:
        if kinds is not None and f.kind not in kinds:
            continue
        if task is not None and task not in f.tasks:
            continue
        if f.kind == "telluric":
            if f.window[1] >= lo and f.window[0] <= hi:
                out.append(f)
        elif lo <= f.wavelength <= hi:
            out.append(f)
    return sorted(out, key=lambda f: f.wavelength)


def nearest(
    wavelength: float, n: int = 1, *, kinds: tuple[Kind, ...] | None = None
) -> list[Feature]:
    """The `n` features closest to `wavelength` (vacuum A), closest first."""
    pool = [f for f in FEATURES if kinds is None or f.kind in kinds]
    return sorted(pool, key=lambda f: abs(f.wavelength - wavelength))[:n]


def nearest_in_window(lo: float, hi: float, n: int = 3) -> list[Feature]:
    """The `n` features closest to the centre of [lo, hi] among those inside it."""
    centre = 0.5 * (lo + hi)
    return sorted(features_in(lo, hi), key=lambda f: abs(f.wavelength - centre))[:n]
