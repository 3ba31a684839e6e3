"""Physical constants, wavelength conversions and the survey grid, defined once.

Every module that needs the speed of light, air/vacuum wavelengths or LAMOST's
log-linear pixel grid takes them from here.
"""

from __future__ import annotations

import numpy as np

C_KMS = 299_792.458  # speed of light, km/s

# LAMOST low-resolution grid: log10(lambda) = COEFF0 + COEFF1 * i, vacuum, 3909 pixels,
# 3700-9100 A. SDSS uses the same 1e-4 dex step.
LAMOST_COEFF0 = 3.5682  # log10 of the first pixel's wavelength (3700.0 A)
LAMOST_COEFF1 = 1e-4  # log10 step per pixel
LAMOST_NPIX = 3909  # reaches ~9100 A


def lamost_grid(npix: int = LAMOST_NPIX) -> np.ndarray:
    """The LAMOST DR log-linear vacuum wavelength grid (Angstrom).

    >>> g = lamost_grid()
    >>> round(float(g[0]), 1), len(g), 9090 < float(g[-1]) < 9110
    (3700.0, 3909, True)
    """
    return 10.0 ** (LAMOST_COEFF0 + LAMOST_COEFF1 * np.arange(npix))


def air_to_vacuum(wave_air: np.ndarray | float) -> np.ndarray:
    """Air to vacuum wavelengths (Angstrom), the IAU standard (Morton 1991 / Ciddor).

    >>> round(float(air_to_vacuum(6562.8)), 2)
    6564.61
    """
    wave_air = np.asarray(wave_air, dtype=np.float64)
    sigma2 = (1e4 / wave_air) ** 2
    n = 1.0 + 6.4328e-5 + 2.94981e-2 / (146.0 - sigma2) + 2.5540e-4 / (41.0 - sigma2)
    # Below 2000 A the convention keeps vacuum wavelengths as they are.
    return np.where(wave_air >= 2000.0, wave_air * n, wave_air)


def vacuum_to_air(wave_vac: np.ndarray | float) -> np.ndarray:
    """Vacuum to air wavelengths (Angstrom), the inverse of `air_to_vacuum`.

    >>> round(float(vacuum_to_air(air_to_vacuum(6562.8))), 2)
    6562.8
    """
    wave_vac = np.asarray(wave_vac, dtype=np.float64)
    sigma2 = (1e4 / wave_vac) ** 2
    n = 1.0 + 8.34254e-5 + 2.406147e-2 / (130.0 - sigma2) + 1.5998e-4 / (38.9 - sigma2)
    return np.where(wave_vac >= 2000.0, wave_vac / n, wave_vac)
