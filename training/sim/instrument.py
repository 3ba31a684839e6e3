"""The survey instrument the simulator observes through, shared with `training.degrade`.

LAMOST's log-linear vacuum grid (from `agent.units`), its line-spread function, its
throughput, Earth's telluric absorption and the sky-line residuals.
"""

from __future__ import annotations

import numpy as np

from agent.units import LAMOST_COEFF1, LAMOST_NPIX, lamost_grid
from training.sim.classes import band, gauss

NPIX = LAMOST_NPIX
SIGMA_PIX = 1.0  # instrumental Gaussian sigma in pixels: R = 1 / (2.355 * ln10 * 1e-4) ~ 1850

GRIDS = {"lamost": lamost_grid}  # survey grids by name

__all__ = [
    "LAMOST_COEFF1",
    "NPIX",
    "SIGMA_PIX",
    "GRIDS",
    "lamost_grid",
    "telluric",
    "throughput",
    "SKY_LINES",
    "convolve_lsf",
]

# -- observing: telluric, resolution, noise ------------------------------------------------


def telluric(wave_obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Earth's atmosphere (observed frame, vacuum): O2 A and B, water vapour."""
    airmass = rng.uniform(1.0, 1.6)
    t = band(wave_obs, 7596.0, "red", 0.45 * airmass, 25.0)
    t *= band(wave_obs, 6869.0, "red", 0.15 * airmass, 20.0)
    water = rng.uniform(0.3, 1.2) * airmass
    for lo, hi, tau in ((7165, 7340, 0.1), (8130, 8350, 0.12), (8950, 9100, 0.25)):
        c, half = (lo + hi) / 2, (hi - lo) / 2
        t *= np.exp(-water * tau * np.exp(-0.5 * ((wave_obs - c) / (half / 1.5)) ** 2))
    return t


def throughput(wave_obs: np.ndarray) -> np.ndarray:
    """Relative LAMOST efficiency: low at the blue end, a dip at the dichroic (~5900 A)."""
    t = np.interp(
        wave_obs,
        [3700, 4000, 4600, 5500, 6500, 8000, 9100],
        [0.2, 0.45, 0.85, 1.0, 1.0, 0.75, 0.35],
    )
    return t * (1 - 0.5 * gauss(wave_obs, 5850.0, 60.0))


SKY_LINES = (5578.9, 5891.6, 6302.0, 6365.5, 7823.0, 8401.0, 8827.0)  # vacuum, residuals


def convolve_lsf(flux: np.ndarray, sigma_pix: float = SIGMA_PIX) -> np.ndarray:
    half = int(4 * sigma_pix) + 1
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma_pix) ** 2)
    k /= k.sum()
    padded = np.pad(flux, half, mode="edge")
    return np.convolve(padded, k, mode="valid")
