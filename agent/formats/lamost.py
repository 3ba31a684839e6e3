"""LAMOST low-resolution spectra: the DR1-DR7 5-row image and the newer binary-table layout.

Image layout (DR1-DR7): primary HDU of shape (5, npix), rows flux, ivar, third row
(sub-continuum in DR1, wavelength from DR2), and-mask, or-mask; wavelength from
log10(lambda) = COEFF0 + COEFF1 * i. Table layout (DR8 on): HDU 1 "COADD", one row of array
columns FLUX, IVAR, WAVELENGTH, ANDMASK, ORMASK (+ NORMALIZATION). LAMOST wavelengths are
vacuum (header VACUUM = T) and heliocentric.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from astropy.io import fits

from agent.formats.common import (
    LayoutError,
    file_stem,
    frame_from_header,
    hdu_data,
    header_value,
    make_spectrum,
    plausible_redshift,
)
from agent.spectrum import Spectrum, SpectrumError
from agent.units import LAMOST_COEFF1, air_to_vacuum

LOG_STEP = LAMOST_COEFF1
# and-mask bits that make a pixel unusable: BADCCD (1), BADPROFILE (2), BADCENTER (16),
# NODATA (32). NOSKY and BRIGHTSKY pixels are still measured and stay visible.
BAD_PIXEL_BITS = 1 | 2 | 16 | 32  # LAMOST and SDSS pixel width in log10(lambda)


def is_lamost(hdul: fits.HDUList) -> bool:
    h = hdul[0].header
    tag = f"{h.get('TELESCOP', '')} {h.get('ORIGIN', '')}".upper()
    return "LAMOST" in tag


def is_lamost_image(hdul: fits.HDUList) -> bool:
    h = hdul[0].header
    return (
        is_lamost(hdul)
        and h.get("NAXIS") == 2
        and 3 <= int(h.get("NAXIS2", 0)) <= 9
        and "COEFF0" in h
    )


def find_table(hdul: fits.HDUList) -> int | None:
    """Index of the first table HDU with FLUX and WAVELENGTH columns."""
    for i, h in enumerate(hdul):
        if isinstance(h, fits.BinTableHDU):
            names = {n.upper() for n in h.columns.names}
            if {"FLUX", "WAVELENGTH"} <= names:
                return i
    return None


def _meta(path: Path, header: fits.Header) -> dict:
    obsid = header_value(header, "OBSID", cast=str)
    z = plausible_redshift(header_value(header, "Z", cast=float))
    simulated = bool(header.get("SIMULATE", False))
    return {
        "id": obsid or file_stem(path),
        "obsid": obsid,
        # A simulated file is written in LAMOST's layout but is no LAMOST observation.
        "survey": "simulated" if simulated else "LAMOST",
        "ra": header_value(header, "RA", "RA_OBS", cast=float),
        "dec": header_value(header, "DEC", "DEC_OBS", cast=float),
        "snr": header_value(header, "SNRR", "SN_R", "SNR", cast=float),
        "survey_class": header_value(header, "CLASS", cast=str),
        "survey_subclass": header_value(header, "SUBCLASS", cast=str),
        "simulated": simulated,
        "redshift": z or 0.0,
        "extra": {"designation": header_value(header, "DESIG", cast=str)}
        if "DESIG" in header
        else {},
    }


def read_image(path: Path, hdul: fits.HDUList) -> list[Spectrum]:
    header = hdul[0].header
    data = hdu_data(path, hdul, 0)
    if data is None or data.ndim != 2 or data.shape[0] < 2:
        raise LayoutError(
            path, f"LAMOST image expected (5, npix), got {getattr(data, 'shape', None)}"
        )
    npix = data.shape[1]
    c0 = header_value(header, "COEFF0", cast=float)
    c1 = header_value(header, "COEFF1", cast=float)
    if c0 is None or c1 is None or c1 <= 0:
        raise SpectrumError(path, "LAMOST image lacks a usable COEFF0/COEFF1 wavelength solution")
    wave = 10.0 ** (c0 + c1 * np.arange(npix))
    mask = bad_pixels(data[3]) if data.shape[0] > 3 else None
    return [
        make_spectrum(
            path,
            wave,
            data[0],
            ivar=data[1],
            mask=mask,
            frame=frame_from_header(header, "vacuum"),
            hdu=0,
            flux_unit=str(header.get("BUNIT", "arbitrary")).strip() or "arbitrary",
            **_meta(path, header),
        )
    ]


def bad_pixels(andmask: np.ndarray) -> np.ndarray:
    """Pixels whose and-mask sets a bad-pixel bit. A NaN, inf or out-of-range mask value
    flags nothing (flux and ivar still decide the pixel) and never reaches the integer
    cast, whose RuntimeWarning would otherwise leak to the terminal."""
    values = np.asarray(andmask, dtype=np.float64)
    usable = np.isfinite(values) & (np.abs(values) < 2.0**62)
    bits = np.where(usable, values, 0.0).astype(np.int64)
    return (bits & BAD_PIXEL_BITS) != 0


def read_table(path: Path, hdul: fits.HDUList, hdu: int) -> list[Spectrum]:
    """One spectrum from a LAMOST table HDU (array columns in a single row)."""
    if not isinstance(hdul[hdu], fits.BinTableHDU):
        raise LayoutError(path, f"HDU {hdu} is a {type(hdul[hdu]).__name__}, not a LAMOST table")
    table = hdu_data(path, hdul, hdu)
    names = {n.upper(): n for n in (table.columns.names if table is not None else [])}
    missing = [c for c in ("FLUX", "WAVELENGTH") if c not in names]
    if missing:
        raise LayoutError(path, f"HDU {hdu}: LAMOST table lacks column(s) {', '.join(missing)}")
    if len(table) == 0:
        raise SpectrumError(path, f"HDU {hdu}: LAMOST table has no rows")

    def col(name: str):
        if name not in names:
            return None
        values = np.asarray(table[names[name]])
        return values[0] if values.ndim == 2 else values  # array columns in one row

    andmask = col("ANDMASK")
    header = hdul[0].header
    return [
        make_spectrum(
            path,
            col("WAVELENGTH"),
            col("FLUX"),
            ivar=col("IVAR"),
            mask=None if andmask is None else bad_pixels(andmask),
            frame=frame_from_header(header, "vacuum"),
            hdu=hdu,
            **_meta(path, header),
        )
    ]


def write_lamost_fits(
    spectrum: Spectrum, path: str | Path, layout: Literal["image", "table"] = "image"
) -> Path:
    """Write `spectrum` as a LAMOST low-resolution file that `read_spectra` reads back.

    LAMOST is vacuum, so air spectra are converted. The image layout needs a log-lambda grid:
    spectra on any other grid are interpolated onto one with LAMOST's 1e-4 dex step. Masked
    pixels are written with ivar 0 and and-mask 1. The spectrum's id goes into OBSID.
    """
    path = Path(path)
    if layout not in ("image", "table"):
        raise ValueError(f"layout must be 'image' or 'table', not {layout!r}")
    wave = spectrum.wavelength
    if spectrum.frame == "air":
        wave = air_to_vacuum(wave)
    good = spectrum.good
    flux = np.where(good, spectrum.flux, 0.0)
    ivar = np.where(good, spectrum.ivar, 0.0) if spectrum.ivar is not None else good.astype(float)
    bad = (~good).astype(float)

    if layout == "image":
        loglam = np.log10(wave)
        if not np.allclose(np.diff(loglam), loglam[1] - loglam[0], rtol=1e-4, atol=1e-9):
            grid = np.arange(loglam[0], loglam[-1] + LOG_STEP / 2, LOG_STEP)
            flux = np.interp(grid, loglam, flux)
            ivar = np.interp(grid, loglam, ivar)
            # A grid pixel is bad if either neighbour it was drawn from was bad.
            bad = (np.interp(grid, loglam, bad) > 0).astype(float)
            ivar[bad > 0] = 0.0
            loglam = grid
        c0, c1 = float(loglam[0]), float((loglam[-1] - loglam[0]) / (loglam.size - 1))
        cont = np.zeros_like(flux)
        data = np.vstack([flux, ivar, cont, bad, bad]).astype(np.float32)
        primary = fits.PrimaryHDU(data)
        h = primary.header
        h["EXTEN0"] = "Flux Inverse Subcontinuum Andmask Ormask"
        h["NWORDER"] = (2, "Number of linear-log10 coefficients")
        h["WFITTYPE"] = ("LOG-LINEAR", "Linear-log10 dispersion")
        h["COEFF0"] = (c0, "Central wavelength (log10) of first pixel")
        h["COEFF1"] = (c1, "Log10 dispersion per pixel")
        h["CRVAL1"], h["CD1_1"], h["CRPIX1"] = c0, c1, 1
        h["CTYPE1"], h["DC-FLAG"] = "LINEAR", 1
        hdus = [primary]
    else:
        primary = fits.PrimaryHDU()
        h = primary.header
        n = wave.size
        cols = [
            fits.Column(name="FLUX", format=f"{n}E", array=flux[None, :]),
            fits.Column(name="IVAR", format=f"{n}E", array=ivar[None, :]),
            fits.Column(name="WAVELENGTH", format=f"{n}D", array=wave[None, :]),
            fits.Column(name="ANDMASK", format=f"{n}J", array=bad[None, :].astype(np.int32)),
            fits.Column(name="ORMASK", format=f"{n}J", array=bad[None, :].astype(np.int32)),
        ]
        hdus = [primary, fits.BinTableHDU.from_columns(cols, name="COADD")]

    m = spectrum.meta
    h["TELESCOP"] = ("LAMOST", "GuoShouJing Telescope")
    h["ORIGIN"] = "NAOC-LAMOST"
    h["VACUUM"] = (True, "Wavelengths are in vacuum")
    h["OBSID"] = str(m.obsid or m.id or file_stem(path))
    for key, val in (("RA", m.ra), ("DEC", m.dec), ("SNRR", m.snr)):
        if val is not None:
            h[key] = float(val)
    for key, val in (("CLASS", m.survey_class), ("SUBCLASS", m.survey_subclass)):
        if val:
            h[key] = str(val)
    h["Z"] = float(spectrum.redshift)
    if m.simulated:
        h["SIMULATE"] = (True, "Simulated spectrum, not an observation")
    if spectrum.flux_unit and spectrum.flux_unit != "arbitrary":
        h["BUNIT"] = spectrum.flux_unit
    path.parent.mkdir(parents=True, exist_ok=True)
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path
