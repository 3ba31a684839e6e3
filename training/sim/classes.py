"""The simulated class library: physics of continua, lines and bands, and one recipe per
class (the five targets and their usual contaminants) with the tasks each is a candidate for.

A recipe draws its parameters from a seeded generator and builds the rest-frame spectrum on
a `Model`; `training.sim.demo.simulate` observes it through `training.sim.instrument`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.lines import balmer
from agent.lines import get as feature
from agent.policies.rules.m_giant import dwarf_cah3
from agent.units import C_KMS

HC_K = 1.4387769e8  # h c / k in Angstrom Kelvin


# -- profiles --------------------------------------------------------------------------


def gauss(x: np.ndarray, c: float, sigma: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - c) / sigma) ** 2)


def lorentz(x: np.ndarray, c: float, hwhm: float) -> np.ndarray:
    return 1.0 / (1.0 + ((x - c) / hwhm) ** 2)


def pseudo_voigt(x: np.ndarray, c: float, fwhm: float, eta: float) -> np.ndarray:
    """Peak-normalised mix of Lorentzian (fraction eta) and Gaussian of the same FWHM."""
    return eta * lorentz(x, c, fwhm / 2) + (1 - eta) * gauss(x, c, fwhm / 2.3548)


def band(x: np.ndarray, head: float, degrade: str | None, tau: float, scale: float) -> np.ndarray:
    """Transmission of a molecular band: optical depth `tau` at the head, fading over `scale` A
    on the `degrade` side, nothing on the other side."""
    if degrade == "blue":
        d = head - x
    elif degrade == "red":
        d = x - head
    else:  # unresolved head: symmetric-ish dip
        return np.exp(-tau * gauss(x, head, scale / 2))
    return np.exp(-np.where(d >= 0, tau * np.exp(-np.clip(d, 0, None) / scale), 0.0))


def planck(x: np.ndarray, teff: float) -> np.ndarray:
    """B_lambda(T), normalised to 1 at 6000 A."""

    def b(w):
        return w**-5 / np.expm1(np.minimum(HC_K / (w * teff), 700.0))

    return b(x) / b(np.array(6000.0))


# -- a spectrum under construction -------------------------------------------------------


@dataclass
class Model:
    wave: np.ndarray  # rest-frame vacuum wavelength of each pixel
    flux: np.ndarray  # relative flux

    def absorb(self, c: float, depth: float, sigma: float) -> None:
        self.flux *= 1.0 - depth * gauss(self.wave, c, sigma)

    def absorb_voigt(self, c: float, depth: float, fwhm: float, eta: float) -> None:
        self.flux *= 1.0 - depth * pseudo_voigt(self.wave, c, fwhm, eta)

    def emit(self, c: float, ew: float, sigma: float, cont: np.ndarray | None = None) -> None:
        """Gaussian emission of equivalent width |ew| (A; astronomers write emission EWs
        negative) on the local continuum."""
        base = self.flux if cont is None else cont
        level = np.interp(c, self.wave, base)
        self.flux += level * abs(ew) / (np.sqrt(2 * np.pi) * sigma) * gauss(self.wave, c, sigma)

    def bands(self, key: str, tau: float, scale: float) -> None:
        f = feature(key)
        self.flux *= band(self.wave, f.wavelength, f.degrade, tau, scale)


def blanketing(x: np.ndarray, strength: float, edge: float = 4800.0) -> np.ndarray:
    """Line blanketing of cool stars: the crowd of metal lines and molecules that leaves
    little flux blueward of ~4500 A in M and carbon stars."""
    return 1.0 / (1.0 + strength * (edge / x) ** 8)


def balmer_confluence(x: np.ndarray, depth: float) -> np.ndarray:
    """High Balmer lines merging towards the series limit (3646 A) depress the far blue."""
    return 1.0 - depth / (1.0 + np.exp((x - 3790.0) / 25.0))


def _stellar_lines(m: Model, rng: np.random.Generator, strength: float) -> None:
    """A sprinkling of weak unresolved metal lines (blends), stronger in cool stars."""
    n = int(120 * strength)
    centres = rng.uniform(3750, 9050, n)
    depths = rng.uniform(0.02, 0.12, n) * strength * np.where(centres < 5500, 1.5, 0.7)
    for c, d in zip(centres, depths):
        m.absorb(c, min(d, 0.5), rng.uniform(0.8, 1.6))


# -- the classes ---------------------------------------------------------------------------


def sim_da(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(9000, 35000)
    m.flux[:] = planck(m.wave, teff)
    # Balmer lines are strongest near 12,000 K and weaken towards hot DAs.
    s = np.exp(-0.5 * ((np.log10(teff) - 4.08) / 0.22) ** 2)
    width = rng.uniform(0.8, 1.3)
    # Stark widths grow with the upper level (about as n^2), so beyond H8 the lines of a
    # log g 8 atmosphere overlap into one trough (its Inglis-Teller limit): H9-H12 wider
    # than their spacing, and shallower, never the separate lines of an A star or sdB.
    for n, fwhm, depth in (
        (3, 55, 0.45),
        (4, 75, 0.6),
        (5, 65, 0.62),
        (6, 55, 0.6),
        (7, 45, 0.55),
        (8, 35, 0.5),
        (9, 45, 0.4),
        (10, 55, 0.3),
        (11, 65, 0.25),
        (12, 75, 0.2),
    ):
        m.absorb_voigt(balmer(n), depth * (0.45 + 0.55 * s), fwhm * width * (0.85 + 0.35 * s), 0.7)
    m.flux *= balmer_confluence(m.wave, 0.45 * (0.45 + 0.55 * s))
    return {"teff": teff}


def sim_db(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(12000, 30000)
    m.flux[:] = planck(m.wave, teff)
    w = rng.uniform(0.8, 1.3)
    for key, depth, fwhm in (
        ("He I 4026", 0.25, 30),
        ("He I 4471", 0.35, 40),
        ("He I 4922", 0.3, 35),
        ("He I 5016", 0.2, 25),
        ("He I 5876", 0.3, 40),
        ("He I 6678", 0.2, 30),
        ("He I 7065", 0.12, 25),
    ):
        m.absorb_voigt(feature(key).wavelength, depth, fwhm * w, 0.5)
    return {"teff": teff}


def _balmer_star(m: Model, scale: float, depth: float, top: int) -> None:
    for n in range(3, top + 1):
        fwhm = scale * (1.0 if n >= 5 else 1.15)
        m.absorb_voigt(
            balmer(n), depth * (0.85 if n == 3 else 1.0), fwhm * (1 - 0.04 * (n - 3)), 0.35
        )
    m.flux *= balmer_confluence(m.wave, 0.5 * depth)


def sim_a_star(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(7500, 9800)
    m.flux[:] = planck(m.wave, teff)
    _balmer_star(m, rng.uniform(16, 28), rng.uniform(0.55, 0.7), 16)
    k_depth = np.interp(teff, [7500, 9800], [0.55, 0.15])
    m.absorb(feature("Ca II K").wavelength, k_depth, 2.5)
    m.absorb(feature("Mg II 4481").wavelength, 0.15, 1.8)
    _stellar_lines(m, rng, 0.3)
    return {"teff": teff}


def sim_sdb(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(24000, 36000)
    m.flux[:] = planck(m.wave, teff)
    _balmer_star(m, rng.uniform(14, 22), rng.uniform(0.35, 0.5), 14)
    for key in ("He I 4471", "He I 5876", "He I 4026"):
        m.absorb(feature(key).wavelength, rng.uniform(0.05, 0.15), 3.0)
    return {"teff": teff}


def _m_dwarf_continuum(m: Model, rng: np.random.Generator, teff: float, tio: float) -> None:
    m.flux[:] = planck(m.wave, teff) * blanketing(m.wave, np.interp(teff, [2900, 3900], [3.0, 1.0]))
    for key, t, sc in (
        ("TiO 4955", 0.5, 60),
        ("TiO 5167", 0.6, 80),
        ("TiO 5448", 0.5, 80),
        ("TiO 5847", 0.35, 80),
        ("TiO 6159", 0.7, 120),
        ("TiO 7054", 0.9, 140),
        ("TiO 7589", 0.5, 90),
        ("TiO 8432", 0.3, 80),
    ):
        m.bands(key, t * tio, sc)
    _stellar_lines(m, rng, 1.0)


def _window_mean(m: Model, lo: float, hi: float) -> float:
    return float(np.mean(m.flux[(m.wave >= lo) & (m.wave <= hi)]))


def _cah_on_dwarf_sequence(m: Model, rng: np.random.Generator) -> None:
    """CaH absorption reaching 6960-6990 A as deep as an M dwarf's: CaH3 about
    `dwarf_cah3(TiO5)` with 0.02 scatter, both read off the noise-free model.
    The 6750 band head alone fades before the CaH3 window, which left every simulated
    dwarf reading CaH3 0.97-1.0, as weak as a giant's."""
    ref = _window_mean(m, 7042.0, 7046.0)
    tio5 = _window_mean(m, 7126.0, 7135.0) / ref
    cah3 = _window_mean(m, 6960.0, 6990.0) / ref
    want = min(dwarf_cah3(tio5) + rng.normal(0.0, 0.02), cah3)
    # a smooth plateau over the CaH bands, clear of the 7042-7046 reference window
    edge = 1.0 / (1.0 + np.exp(-(m.wave - 6820.0) / 8.0)) / (1.0 + np.exp((m.wave - 7015.0) / 5.0))
    m.flux *= (want / cah3) ** edge


def sim_m_dwarf(m: Model, rng: np.random.Generator, active: bool = False) -> dict:
    teff = rng.uniform(2900, 3800)
    tio = np.interp(teff, [2900, 3800], [1.6, 0.5])
    _m_dwarf_continuum(m, rng, teff, tio)
    cah = rng.uniform(0.6, 1.0) * tio
    m.bands("CaH 6382", 0.5 * cah, 30)
    m.bands("CaH 6750", 0.8 * cah, 60)
    _cah_on_dwarf_sequence(m, rng)
    for key, d in (
        ("Na I 8183", 0.35),
        ("Na I 8195", 0.38),
        ("K I 7665", 0.35),
        ("K I 7699", 0.3),
        ("Na I D2", 0.5),
        ("Na I D1", 0.45),
        ("Ca I 4227", 0.5),
    ):
        m.absorb(feature(key).wavelength, d, 2.2)
    for key, d in (("Ca II 8498", 0.12), ("Ca II 8542", 0.18), ("Ca II 8662", 0.15)):
        m.absorb(feature(key).wavelength, d, 1.8)
    out = {"teff": teff}
    if active:
        cont = m.flux.copy()
        ew = rng.uniform(3, 12)
        for n, frac in ((3, 1.0), (4, 0.6), (5, 0.45), (6, 0.35)):
            m.emit(balmer(n), -ew * frac, 1.3, cont=np.maximum(cont, 0.02 * cont.max()))
        for key in ("Ca II K", "Ca II H"):
            m.emit(feature(key).wavelength, -ew * 0.8, 1.2, cont=np.full_like(cont, 0.03))
        out["halpha_ew"] = ew
    return out


def sim_m_giant(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(3000, 3900)
    tio = np.interp(teff, [3000, 3900], [2.2, 0.6])
    _m_dwarf_continuum(m, rng, teff, tio)
    m.bands("CaH 6382", 0.06, 30)
    m.bands("CaH 6750", 0.08, 60)
    if teff < 3300:  # late M giants show VO
        m.bands("VO 7334", 0.4 * (3300 - teff) / 300 + 0.1, 80)
        m.bands("VO 7851", 0.3 * (3300 - teff) / 300 + 0.1, 80)
    for key, d in (
        ("Na I 8183", 0.08),
        ("Na I 8195", 0.1),
        ("K I 7665", 0.12),
        ("K I 7699", 0.1),
        ("Na I D2", 0.45),
        ("Na I D1", 0.4),
        ("Ca I 4227", 0.3),
    ):
        m.absorb(feature(key).wavelength, d, 2.0)
    for key, d in (("Ca II 8498", 0.3), ("Ca II 8542", 0.45), ("Ca II 8662", 0.4)):
        m.absorb(feature(key).wavelength, d, 2.8)
    return {"teff": teff}


def sim_k_giant(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(3900, 4700)
    m.flux[:] = planck(m.wave, teff) * blanketing(m.wave, 0.4, 4300.0)
    _stellar_lines(m, rng, 0.9)
    for key, d, s in (
        ("Ca II K", 0.8, 6),
        ("Ca II H", 0.75, 6),
        ("Ca I 4227", 0.45, 2.0),
        ("Mg I 5167", 0.35, 1.8),
        ("Mg I 5173", 0.4, 1.8),
        ("Mg I 5184", 0.45, 1.8),
        ("Na I D2", 0.45, 2.0),
        ("Na I D1", 0.4, 2.0),
        ("Fe I 5270", 0.2, 1.5),
        ("Fe I 5328", 0.18, 1.5),
        ("Ca II 8498", 0.3, 2.5),
        ("Ca II 8542", 0.45, 2.8),
        ("Ca II 8662", 0.4, 2.8),
    ):
        m.absorb(feature(key).wavelength, d, s)
    m.bands("CH 4300", 0.35, 25)
    m.absorb(balmer(3), 0.25, 2.0)
    m.absorb(balmer(4), 0.2, 2.0)
    if teff < 4100:  # a trace of TiO in the coolest K giants
        m.bands("TiO 7054", 0.1, 120)
        m.bands("TiO 6159", 0.08, 100)
    return {"teff": teff}


def sim_carbon(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(2600, 3400)
    m.flux[:] = planck(m.wave, teff) * blanketing(m.wave, rng.uniform(2.0, 5.0), 5000.0)
    c2 = rng.uniform(0.7, 1.5)
    for key, t, sc in (
        ("C2 4737", 0.8, 90),
        ("C2 5165", 1.0, 110),
        ("C2 5636", 0.8, 110),
        ("C2 6191", 0.4, 100),
        ("CN 4216", 0.6, 60),
    ):
        m.bands(key, t * c2, sc)
    cn = rng.uniform(0.5, 1.0)
    # CN red system: a sequence of heads degrading to the red.
    for head, t in ((6925.0, 0.25), (7088.0, 0.3), (7259.0, 0.3), (7437.0, 0.35)):
        m.flux *= band(m.wave, head, "red", t * cn, 60)
    m.bands("CN 7874", 0.6 * cn, 110)
    m.bands("CN 8067", 0.5 * cn, 110)
    _stellar_lines(m, rng, 0.8)
    for key, d in (("Na I D2", 0.55), ("Na I D1", 0.5), ("K I 7699", 0.3), ("K I 7665", 0.35)):
        m.absorb(feature(key).wavelength, d, 2.2)
    if rng.random() < 0.3:  # Mira-like carbon stars show H-alpha emission
        m.emit(balmer(3), -rng.uniform(3, 10), 2.0)
    return {"teff": teff, "c2": c2}


def sim_s_star(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(2900, 3600)
    zr = rng.uniform(0.7, 1.4)
    tio = rng.uniform(0.2, 0.8)
    _m_dwarf_continuum(m, rng, teff, tio)
    for key, t, sc in (
        ("ZrO 4620", 0.8, 80),
        ("ZrO 5551", 0.7, 100),
        ("ZrO 6474", 0.9, 110),
        ("LaO 7403", 0.35, 60),
        ("LaO 7910", 0.3, 60),
    ):
        m.bands(key, t * zr, sc)
    m.flux *= band(m.wave, 6345.0, "red", 0.4 * zr, 70)  # another ZrO head
    for key, d in (
        ("Ca II 8498", 0.3),
        ("Ca II 8542", 0.4),
        ("Ca II 8662", 0.35),
        ("Na I D2", 0.45),
        ("Na I D1", 0.4),
    ):
        m.absorb(feature(key).wavelength, d, 2.5)
    if rng.random() < 0.4:
        m.emit(balmer(3), -rng.uniform(3, 15), 2.0)
    return {"teff": teff, "zro": zr}


def _disc_line(m: Model, rng, c: float, ew: float, fwhm_kms: float, sep_kms: float, cont) -> None:
    sigma = c * fwhm_kms / C_KMS / 2.3548
    if sep_kms > 0:  # double-peaked: the two sides of a Keplerian disc
        dc = c * sep_kms / 2 / C_KMS
        m.emit(c - dc, -ew / 2, sigma * 0.75, cont=cont)
        m.emit(c + dc, -ew / 2, sigma * 0.75, cont=cont)
    else:
        m.emit(c, -ew, sigma, cont=cont)


def sim_cv(m: Model, rng: np.random.Generator) -> dict:
    # Accretion disc (hot, steep blue) plus, in some systems, the M-dwarf donor.
    disc = (m.wave / 6000.0) ** -rng.uniform(1.3, 2.3)
    donor = np.zeros_like(disc)
    frac = rng.uniform(0, 0.7) if rng.random() < 0.5 else 0.0
    if frac:
        dm = Model(m.wave, np.ones_like(m.wave))
        _m_dwarf_continuum(dm, rng, rng.uniform(3000, 3500), 1.0)
        donor = dm.flux / np.interp(7500, m.wave, dm.flux)
    m.flux[:] = disc + frac * donor * 2
    cont = m.flux.copy()
    ew = rng.uniform(25, 120)
    fwhm = rng.uniform(900, 2200)
    sep = rng.uniform(500, 1300) if rng.random() < 0.5 else 0.0
    for n, k in ((3, 1.0), (4, 0.5), (5, 0.35), (6, 0.25), (7, 0.18), (8, 0.12)):
        _disc_line(m, rng, balmer(n), ew * k, fwhm, sep, cont)
    for key, k in (
        ("He I 4471", 0.1),
        ("He I 5876", 0.18),
        ("He I 6678", 0.12),
        ("He I 7065", 0.08),
        ("He I 4922", 0.06),
    ):
        _disc_line(m, rng, feature(key).wavelength, ew * k, fwhm, sep, cont)
    magnetic = rng.random() < 0.35
    if magnetic:
        _disc_line(
            m, rng, feature("He II 4686").wavelength, ew * rng.uniform(0.15, 0.35), fwhm, 0.0, cont
        )
    return {"halpha_ew": ew, "fwhm_kms": fwhm, "double_peaked": bool(sep), "he_ii": magnetic}


def sim_be(m: Model, rng: np.random.Generator) -> dict:
    teff = rng.uniform(14000, 26000)
    m.flux[:] = planck(m.wave, teff)
    _balmer_star(m, rng.uniform(18, 26), rng.uniform(0.4, 0.55), 14)
    for key in ("He I 4026", "He I 4471", "He I 5876"):
        m.absorb(feature(key).wavelength, rng.uniform(0.08, 0.18), 3.5)
    cont = m.flux.copy()
    ew = rng.uniform(8, 40)
    sep = rng.uniform(150, 350) if rng.random() < 0.6 else 0.0
    _disc_line(m, rng, balmer(3), ew, rng.uniform(250, 450), sep, cont)
    _disc_line(m, rng, balmer(4), ew * 0.15, rng.uniform(250, 450), sep, cont)
    return {"teff": teff, "halpha_ew": ew}


def sim_qso(m: Model, rng: np.random.Generator) -> tuple[dict, float]:
    """A quasar at redshift z; its lines land at non-rest wavelengths. Returns (info, z)."""
    z = float(rng.choice([rng.uniform(0.08, 0.35), rng.uniform(0.9, 1.6)]))
    rest = m.wave / (1 + z)
    q = Model(rest, (rest / 3000.0) ** -rng.uniform(1.2, 1.8))
    cont = q.flux.copy()
    fwhm = rng.uniform(2500, 6000)
    for key_or_wave, ew in (
        (balmer(3), 300),
        (balmer(4), 80),
        (balmer(5), 35),
        (feature("Mg II 2800").wavelength, 45),
        (feature("C III] 1909").wavelength, 25),
    ):
        c = float(key_or_wave)
        q.emit(c, -ew * rng.uniform(0.6, 1.3), c * fwhm / C_KMS / 2.3548, cont=cont)
    for key, ew in (("[O III] 5007", 20), ("[O III] 4959", 7), ("[O II] 3727", 5)):
        c = feature(key).wavelength
        q.emit(c, -ew * rng.uniform(0.3, 1.5), c * 400 / C_KMS / 2.3548, cont=cont)
    m.flux[:] = q.flux
    return {"z": z}, z


@dataclass(frozen=True)
class SimClass:
    name: str
    make: Callable[..., Any]
    tasks: dict[str, str]  # task -> truth ("YES"/"NO") for the tasks it is a candidate for
    description: str


CLASSES: tuple[SimClass, ...] = (
    SimClass("wd_da", sim_da, {"wd": "YES"}, "DA white dwarf: broad pressure-broadened Balmer"),
    SimClass("wd_db", sim_db, {"wd": "YES"}, "DB white dwarf: broad He I absorption"),
    SimClass("a_star", sim_a_star, {"wd": "NO"}, "A star: narrower Balmer, Ca II K"),
    SimClass("sdb", sim_sdb, {"wd": "NO"}, "hot subdwarf: moderately broad Balmer, weak He I"),
    SimClass("cv", sim_cv, {"cv": "YES"}, "cataclysmic variable: broad disc emission"),
    SimClass("be_star", sim_be, {"cv": "NO"}, "Be star: narrow H-alpha emission, B-star lines"),
    SimClass(
        "m_dwarf_active",
        lambda m, rng: sim_m_dwarf(m, rng, active=True),
        {"cv": "NO", "m_giant": "NO"},
        "active M dwarf: narrow Balmer and Ca II emission on an M dwarf",
    ),
    SimClass("qso", sim_qso, {"cv": "NO"}, "quasar: broad lines at the wrong wavelengths"),
    SimClass("carbon", sim_carbon, {"carbon": "YES"}, "carbon star: C2 Swan and CN, no TiO"),
    SimClass("k_giant", sim_k_giant, {"carbon": "NO"}, "K giant: atomic lines, G band"),
    SimClass(
        "m_giant",
        sim_m_giant,
        {"m_giant": "YES", "carbon": "NO", "s_type": "NO"},
        "M giant: TiO, weak Na I 8183/8195 and CaH, strong Ca II triplet",
    ),
    SimClass("s_star", sim_s_star, {"s_type": "YES"}, "S star: ZrO and LaO with weak TiO"),
    SimClass("m_dwarf", sim_m_dwarf, {"m_giant": "NO"}, "M dwarf: TiO, strong CaH and Na I"),
)
CLASS_BY_NAME = {c.name: c for c in CLASSES}
