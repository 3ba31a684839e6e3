"""The survey instrument the simulator observes through, shared with `training.degrade`.

LAMOST's log-linear vacuum grid (from `agent.units`), its line-spread function, its
throughput, Earth's telluric absorption and the sky-line residuals.
"""

from __future__ import annotations

import math

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
    "fine_log_grid",
    "convolve_to_resolution",
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
    """The LSF on the LAMOST grid itself: the Gaussian of `convolve_to_resolution` at
    R ~ 1850, written in pixels because the simulator's spectra are born on that grid."""
    half = int(4 * sigma_pix) + 1
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma_pix) ** 2)
    k /= k.sum()
    padded = np.pad(flux, half, mode="edge")
    return np.convolve(padded, k, mode="valid")


def fine_log_grid(wave: np.ndarray, lo: float, hi: float) -> np.ndarray:
    # Sample at least as finely as the source (and as LAMOST / 4) in ln(lambda).
    dln = np.diff(np.log(wave))
    step = min(float(np.median(dln)) if dln.size else 1e-4, LAMOST_COEFF1 * math.log(10) / 4)
    step = max(step, 1e-6)
    n = int(math.ceil(math.log(hi / lo) / step)) + 1
    return np.exp(np.log(lo) + step * np.arange(n))


def convolve_to_resolution(
    wave: np.ndarray, flux: np.ndarray, resolution: float, source_resolution: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Flux on a fine log grid convolved to resolving power `resolution` (FWHM = lambda/R).

    If the source already has `source_resolution`, only the missing width is added.
    """
    fine = fine_log_grid(wave, float(wave[0]), float(wave[-1]))
    f = np.interp(fine, wave, flux)
    step = math.log(fine[1] / fine[0])
    fwhm_ln = 1.0 / resolution
    if source_resolution:
        src = 1.0 / source_resolution
        fwhm_ln = math.sqrt(max(fwhm_ln**2 - src**2, 0.0))
    sigma_px = fwhm_ln / 2.3548 / step
    if sigma_px > 0.3:
        half = int(math.ceil(4 * sigma_px))
        x = np.arange(-half, half + 1)
        k = np.exp(-0.5 * (x / sigma_px) ** 2)
        k /= k.sum()
        num = np.convolve(f, k, mode="same")
        den = np.convolve(np.ones_like(f), k, mode="same")  # no darkening at the edges
        f = num / den
    return fine, f
