"""Spectral templates to hold against a spectrum at a trial redshift.

Built-in templates are generated from physics, noiselessly, on a rest-frame vacuum grid:
a Planck or power-law continuum, Voigt/Gaussian lines and molecular band heads from the
feature catalogue (`agent.lines`), the same ingredients as the demo simulator's classes.
They are shapes for the eye ("is this a quasar at z ~ 1.27?"), not fitted models: relative
flux, normalised to 1 at their median.

A folder of templates (`agent.formats.template_files.read_templates(folder)`) is read with
`agent.formats.read_spectra`,
one template per spectrum in each file (so a multi-row template FITS gives several), each
taken to be in its rest frame (its file's redshift is removed) and named after its id or file.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from agent.errors import LoupeError
from agent.lines import get as feature
from agent.units import C_KMS

HC_K = 1.4387769e8  # h c / k in Angstrom Kelvin
GRID = np.arange(900.0, 11000.0, 1.5)  # rest-frame vacuum Angstrom: Lyman alpha to Ca T at z=0


class TemplateError(LoupeError, ValueError):
    """A template folder or file that cannot be used; names the path and the problem."""


@dataclass(frozen=True)
class Template:
    name: str
    kind: str  # "star", "qso", "galaxy" or "file"
    wavelength: np.ndarray  # rest-frame vacuum Angstrom, increasing
    flux: np.ndarray  # relative; NaN where the template has no data

    def at(self, z: float) -> np.ndarray:
        """Observed-frame vacuum wavelengths of the template at redshift z."""
        return self.wavelength * (1.0 + float(z))


# -- physics -------------------------------------------------------------------------------


def planck(x: np.ndarray, teff: float) -> np.ndarray:
    return x**-5 / np.expm1(np.minimum(HC_K / (x * teff), 700.0))


def _gauss(x: np.ndarray, c: float, sigma: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - c) / sigma) ** 2)


def _voigt(x: np.ndarray, c: float, fwhm: float, eta: float) -> np.ndarray:
    lor = 1.0 / (1.0 + ((x - c) / (fwhm / 2)) ** 2)
    return eta * lor + (1 - eta) * _gauss(x, c, fwhm / 2.3548)


def _band(x: np.ndarray, key: str, tau: float, scale: float) -> np.ndarray:
    """Transmission of a band fading from its head over `scale` A on its degrade side."""
    f = feature(key)
    d = (f.wavelength - x) if f.degrade == "blue" else (x - f.wavelength)
    return np.exp(-np.where(d >= 0, tau * np.exp(-np.clip(d, 0, None) / scale), 0.0))


def _balmer(n: int) -> float:
    return 1e8 / (109677.58 * (0.25 - 1.0 / n**2))


def _emit(x, flux, c: float, ew: float, fwhm_kms: float) -> np.ndarray:
    sigma = c * fwhm_kms / C_KMS / 2.3548
    level = np.interp(c, x, flux)
    return level * ew / (np.sqrt(2 * np.pi) * sigma) * _gauss(x, c, sigma)


def _cool(x: np.ndarray, teff: float, blanket: float, edge: float) -> np.ndarray:
    return planck(x, teff) / (1.0 + blanket * (edge / x) ** 8)


def _da(x):
    f = planck(x, 15000.0)
    for n, fwhm, depth in ((3, 60, 0.45), (4, 80, 0.6), (5, 70, 0.62), (6, 60, 0.6),
                           (7, 48, 0.55), (8, 38, 0.5), (9, 30, 0.45), (10, 24, 0.4)):  # fmt: skip
        f = f * (1 - depth * _voigt(x, _balmer(n), fwhm, 0.7))
    return f


def _db(x):
    f = planck(x, 20000.0)
    for key, depth, fwhm in (("He I 4026", 0.25, 30), ("He I 4471", 0.35, 40),
                             ("He I 4922", 0.3, 35), ("He I 5876", 0.3, 40),
                             ("He I 6678", 0.2, 30)):  # fmt: skip
        f = f * (1 - depth * _voigt(x, feature(key).wavelength, fwhm, 0.5))
    return f


def _a_star(x):
    f = planck(x, 8500.0)
    for n in range(3, 13):
        f = f * (1 - 0.6 * _voigt(x, _balmer(n), 22 * (1 - 0.04 * (n - 3)), 0.35))
    return f * (1 - 0.35 * _gauss(x, feature("Ca II K").wavelength, 2.5))


def _k_giant(x):
    f = _cool(x, 4300.0, 0.4, 4300.0)
    for key, d, s in (("Ca II K", 0.8, 6), ("Ca II H", 0.75, 6), ("Mg I 5173", 0.4, 2),
                      ("Mg I 5184", 0.45, 2), ("Na I D2", 0.45, 2), ("Na I D1", 0.4, 2),
                      ("Ca II 8542", 0.45, 2.8), ("Ca II 8662", 0.4, 2.8)):  # fmt: skip
        f = f * (1 - d * _gauss(x, feature(key).wavelength, s))
    return f * _band(x, "CH 4300", 0.35, 25)


def _tio(x, scale: float):
    t = np.ones_like(x)
    for key, tau, sc in (("TiO 4955", 0.5, 60), ("TiO 5167", 0.6, 80), ("TiO 5448", 0.5, 80),
                         ("TiO 5847", 0.35, 80), ("TiO 6159", 0.7, 120), ("TiO 7054", 0.9, 140),
                         ("TiO 7589", 0.5, 90), ("TiO 8432", 0.3, 80)):  # fmt: skip
        t = t * _band(x, key, tau * scale, sc)
    return t


def _m_giant(x):
    f = _cool(x, 3400.0, 2.0, 4800.0) * _tio(x, 1.4)
    for key, d in (("Ca II 8498", 0.3), ("Ca II 8542", 0.45), ("Ca II 8662", 0.4),
                   ("Na I D2", 0.45), ("Na I D1", 0.4)):  # fmt: skip
        f = f * (1 - d * _gauss(x, feature(key).wavelength, 2.8))
    return f


def _m_dwarf(x):
    f = _cool(x, 3300.0, 2.0, 4800.0) * _tio(x, 1.0)
    f = f * _band(x, "CaH 6382", 0.4, 30) * _band(x, "CaH 6750", 0.7, 60)
    for key, d in (("Na I 8183", 0.35), ("Na I 8195", 0.38), ("K I 7665", 0.35),
                   ("K I 7699", 0.3), ("Na I D2", 0.5), ("Na I D1", 0.45)):  # fmt: skip
        f = f * (1 - d * _gauss(x, feature(key).wavelength, 2.2))
    return f


def _carbon(x):
    f = _cool(x, 3000.0, 3.0, 5000.0)
    for key, tau, sc in (("C2 4737", 0.8, 90), ("C2 5165", 1.0, 110), ("C2 5636", 0.8, 110),
                         ("C2 6191", 0.4, 100), ("CN 4216", 0.6, 60), ("CN 7874", 0.45, 110),
                         ("CN 8067", 0.4, 110)):  # fmt: skip
        f = f * _band(x, key, tau, sc)
    return f


def _s_star(x):
    f = _cool(x, 3200.0, 2.0, 4800.0) * _tio(x, 0.4)
    for key, tau, sc in (("ZrO 4620", 0.8, 80), ("ZrO 5551", 0.7, 100), ("ZrO 6474", 0.9, 110),
                         ("LaO 7403", 0.35, 60), ("LaO 7910", 0.3, 60)):  # fmt: skip
        f = f * _band(x, key, tau, sc)
    return f


def _cv(x):
    f = (x / 6000.0) ** -1.8
    cont = f.copy()
    for c, ew in ((_balmer(3), 80), (_balmer(4), 40), (_balmer(5), 28), (_balmer(6), 20),
                  (feature("He I 5876").wavelength, 14), (feature("He I 6678").wavelength, 9),
                  (feature("He II 4686").wavelength, 12)):  # fmt: skip
        f = f + _emit(x, cont, c, ew, 1500)
    return f


def _qso(x):
    """A composite-like quasar: a blue power law with broad UV and Balmer lines."""
    f = (x / 3000.0) ** -1.5
    cont = f.copy()
    for key, ew, fwhm in (
        ("Ly-alpha", 90, 4000), ("C IV 1549", 30, 4500), ("C III] 1909", 20, 4500),
        ("Mg II 2800", 35, 4000), ("H-gamma", 15, 3500), ("H-beta", 60, 3500),
        ("H-alpha", 250, 3000),
    ):  # fmt: skip
        c = 1215.67 if key == "Ly-alpha" else feature(key).wavelength
        f = f + _emit(x, cont, c, ew, fwhm)
    for key, ew in (("[O II] 3727", 4), ("[O III] 4959", 7), ("[O III] 5007", 20)):
        f = f + _emit(x, cont, feature(key).wavelength, ew, 450)
    return np.where(x < 1215.67, f * 0.6, f)  # the Lyman-alpha forest eats the blue side


def _galaxy_sf(x):
    """A star-forming galaxy: a flat blue continuum with narrow nebular lines."""
    f = (x / 5000.0) ** -0.6
    cont = f.copy()
    for key, ew in (("[O II] 3727", 30), ("H-beta", 12), ("[O III] 4959", 8),
                    ("[O III] 5007", 24), ("H-alpha", 45), ("[N II] 6583", 14),
                    ("[N II] 6548", 5), ("[S II] 6716", 7), ("[S II] 6731", 5)):  # fmt: skip
        f = f + _emit(x, cont, feature(key).wavelength, ew, 200)
    return f


def _galaxy_passive(x):
    """An early-type galaxy: an old, red stellar population, the 4000 A break, Ca H and K."""
    f = _cool(x, 4800.0, 0.6, 4100.0)
    f = f * np.where(x < 4000.0, 0.55, 1.0)
    for key, d, s in (("Ca II K", 0.5, 8), ("Ca II H", 0.45, 8), ("Mg I 5173", 0.25, 6),
                      ("Na I D2", 0.2, 5), ("H-beta", 0.1, 5)):  # fmt: skip
        f = f * (1 - d * _gauss(x, feature(key).wavelength, s))
    return f * _band(x, "CH 4300", 0.2, 30)


BUILTIN: tuple[tuple[str, str, object], ...] = (
    ("QSO", "qso", _qso),
    ("galaxy, star-forming", "galaxy", _galaxy_sf),
    ("galaxy, passive", "galaxy", _galaxy_passive),
    ("DA white dwarf", "star", _da),
    ("DB white dwarf", "star", _db),
    ("A star", "star", _a_star),
    ("K giant", "star", _k_giant),
    ("M giant", "star", _m_giant),
    ("M dwarf", "star", _m_dwarf),
    ("carbon star", "star", _carbon),
    ("S star", "star", _s_star),
    ("cataclysmic variable", "star", _cv),
)


def _normalised(flux: np.ndarray) -> np.ndarray:
    med = np.nanmedian(flux[np.isfinite(flux) & (flux > 0)]) if np.any(flux > 0) else 1.0
    return flux / med


@lru_cache(maxsize=1)
def builtin_templates() -> tuple[Template, ...]:
    """The built-in templates, generated once per process (a few milliseconds)."""
    out = []
    for name, kind, make in BUILTIN:
        flux = make(GRID)  # type: ignore[operator]
        out.append(Template(name, kind, GRID, _normalised(np.asarray(flux, dtype=float))))
    return tuple(out)
