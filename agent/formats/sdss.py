"""SDSS/BOSS/eBOSS `spec-PLATE-MJD-FIBER.fits` files (DR8 and later).

HDU 1 "COADD" holds the coadded spectrum as table columns loglam (log10 Angstrom, vacuum),
flux (1e-17 erg/s/cm^2/A), ivar, and_mask and sky (the sky the pipeline subtracted, in the
flux's unit; kept as `Spectrum.sky` for the expert's view, never read by the agent); HDU 2 "SPECOBJ" (or "SPALL" in BOSS
pipeline outputs) holds the pipeline's CLASS, SUBCLASS and Z. Per-exposure HDUs (B1-, R2-
...) are not read: the coadd is what experts vet.
"""

from __future__ import annotations

from pathlib import Path

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
    pow10_wavelength,
)
from agent.spectrum import Spectrum

# and_mask bits that make a pixel unusable: NOPLUG, BADTRACE, BADFLAT, BADARC, FULLREJECT,
# NODATA. Others (BRIGHTSKY, MANYBADCOLUMNS, NEARBADPIXEL ...) flag pixels that are still
# measured; masking them would hide half of many DR7-era spectra and every sky-line region.
BAD_PIXEL_BITS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 18) | (1 << 24)


def _columns(h: fits.hdu.base.ExtensionHDU) -> set[str]:
    return {n.lower() for n in h.columns.names} if isinstance(h, fits.BinTableHDU) else set()


def coadd_index(hdul: fits.HDUList) -> int | None:
    for i, h in enumerate(hdul):
        if {"loglam", "flux"} <= _columns(h) and (h.name.upper() == "COADD" or i == 1):
            return i
    return None


def is_sdss_spec(hdul: fits.HDUList) -> bool:
    return coadd_index(hdul) is not None


def _cell(rec: fits.FITS_record, cols: dict[str, str], key: str) -> str | float | None:
    if key not in cols:
        return None
    val = rec[cols[key]]
    if isinstance(val, (bytes, str)):
        val = val.decode(errors="replace") if isinstance(val, bytes) else val
        return val.strip() or None
    val = np.asarray(val)
    return float(val) if val.ndim == 0 and np.isfinite(val) else None


def _specobj(path: Path, hdul: fits.HDUList) -> dict:
    """CLASS/SUBCLASS/Z/S/N from SPECOBJ (SDSS) or SPALL (BOSS pipeline), if present."""
    for name in ("SPECOBJ", "SPALL"):
        if name in hdul and isinstance(hdul[name], fits.BinTableHDU):
            table = hdu_data(path, hdul, hdul.index_of(name))
            if table is None or len(table) == 0:
                return {}
            rec, cols = table[0], {c.upper(): c for c in table.columns.names}
            keys = {
                "survey_class": "CLASS",
                "survey_subclass": "SUBCLASS",
                "z": "Z",
                "snr": "SN_MEDIAN_ALL",
                "ra": "PLUG_RA",
                "dec": "PLUG_DEC",
            }
            return {k: _cell(rec, cols, col) for k, col in keys.items()}
    return {}


def read(path: Path, hdul: fits.HDUList) -> list[Spectrum]:
    index = coadd_index(hdul)
    if index is None:
        raise LayoutError(path, "no COADD table with loglam and flux columns")
    table = hdu_data(path, hdul, index)
    if table is None or len(table) == 0:
        raise LayoutError(path, f"HDU {index}: COADD table has no rows")
    cols = {c.lower(): c for c in table.columns.names}
    header = hdul[0].header
    wave = pow10_wavelength(path, table[cols["loglam"]])
    ivar = table[cols["ivar"]] if "ivar" in cols else None
    mask_col = cols.get("and_mask") or cols.get("mask")
    mask = (
        None
        if mask_col is None
        else (np.asarray(table[mask_col]).astype(np.int64) & BAD_PIXEL_BITS) != 0
    )

    unit = str(header.get("BUNIT", "1E-17 erg/cm^2/s/Ang")).strip()
    plate = header_value(header, "PLATEID", "PLATE", cast=int)
    mjd = header_value(header, "MJD", cast=int)
    fiber = header_value(header, "FIBERID", "FIBER", cast=int)
    if None not in (plate, mjd, fiber):
        sid = f"{plate:04d}-{mjd:05d}-{fiber:04d}"
    else:
        sid = file_stem(path)
    obj = _specobj(path, hdul)
    z = plausible_redshift(obj.get("z"))
    return [
        make_spectrum(
            path,
            wave,
            table[cols["flux"]],
            ivar=ivar,
            mask=mask,
            # SDSS spectra are always vacuum; a header VACUUM card agrees.
            frame=frame_from_header(header, "vacuum"),
            hdu=index,
            redshift=z or 0.0,
            flux_unit=unit,
            sky=table[cols["sky"]] if "sky" in cols else None,
            sky_unit=unit,
            id=sid,
            obsid=sid,
            survey="SDSS",
            ra=obj.get("ra") or header_value(header, "PLUG_RA", "RA", cast=float),
            dec=obj.get("dec") or header_value(header, "PLUG_DEC", "DEC", cast=float),
            snr=obj.get("snr"),
            survey_class=obj.get("survey_class"),
            survey_subclass=obj.get("survey_subclass"),
        )
    ]
