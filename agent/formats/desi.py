"""DESI coadd and spectra files: one spectrum per FIBERMAP row, B/R/Z arms merged.

Each arm X has image HDUs X_WAVELENGTH (npix), X_FLUX, X_IVAR, X_MASK (nspec x npix).
The arms overlap (about 5700-5800 and 7500-7600 A); Loupe merges them onto the union of
their wavelength grids, weighting each arm by its inverse variance where they overlap, so
the noisier arm edge does not dominate. DESI wavelengths are vacuum. A REDSHIFTS HDU, when
present (redrock output), supplies Z and SPECTYPE per TARGETID.

The merged spectrum is what the agent reads. Each spectrum also keeps its arms as the file
holds them (`Spectrum.arms`) and, where every arm has an X_SKY HDU (desispec writes a
Spectra object's per-arm extras, such as its sky, as X_<NAME> images of the flux's shape),
the sky merged the way the flux is (`Spectrum.sky`), for the expert's view.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from astropy.io import fits

from agent.formats.common import (
    LayoutError,
    file_stem,
    hdu_data,
    make_spectrum,
    plausible_redshift,
    rows_to_read,
)
from agent.spectrum import Arm, Spectrum, SpectrumError

log = logging.getLogger(__name__)

FLUX_UNIT = "1e-17 erg/(s cm2 Angstrom)"


def _sky_unit(units: Any) -> str:
    """The sky's unit: the flux's where the SKY HDUs say none or the same in other words
    (DESI writes `10**-17 erg/(s cm2 Angstrom)`), else what they say."""
    from astropy import units as u

    for text in units:
        if not text:
            continue
        try:
            if u.Unit(text) == u.Unit(FLUX_UNIT):
                continue
        except (ValueError, TypeError):
            pass
        return text
    return FLUX_UNIT


def _arms(hdul: fits.HDUList) -> list[str]:
    names = {h.name.upper() for h in hdul}
    return [
        n[: -len("_WAVELENGTH")]
        for n in sorted(names)
        if n.endswith("_WAVELENGTH") and n[: -len("_WAVELENGTH")] + "_FLUX" in names
    ]


def is_desi(hdul: fits.HDUList) -> bool:
    names = {h.name.upper() for h in hdul}
    return "FIBERMAP" in names and bool(_arms(hdul))


def merge_arms(
    waves: list[np.ndarray], fluxes: list[np.ndarray], ivars: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse-variance weighted merge of overlapping arms onto the union grid.

    Arms are interpolated onto the union of their grids (exact where grids coincide, as in
    DESI coadds); where no arm has weight the pixel gets ivar 0 (masked) and the plain mean.
    """
    grid = np.unique(np.round(np.concatenate(waves), 4))
    num = np.zeros_like(grid)
    den = np.zeros_like(grid)
    plain = np.zeros_like(grid)
    count = np.zeros_like(grid)
    for w, f, iv in zip(waves, fluxes, ivars):
        inside = (grid >= w[0]) & (grid <= w[-1])
        g = grid[inside]
        fi = np.interp(g, w, np.where(np.isfinite(f), f, 0.0))
        ok = np.isfinite(iv) & (iv > 0) & np.isfinite(f)
        # A pixel drawn from a bad neighbour is bad: interpolate the weight, zero it if any
        # neighbour is bad.
        ivi = np.interp(g, w, np.where(ok, iv, 0.0))
        bad = np.interp(g, w, (~ok).astype(float)) > 0
        ivi[bad] = 0.0
        num[inside] += ivi * fi
        den[inside] += ivi
        plain[inside] += fi
        count[inside] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        flux = np.where(den > 0, num / den, plain / np.maximum(count, 1))
    return grid, flux, den


def read(path: Path, hdul: fits.HDUList, row: int | None = None) -> list[Spectrum]:
    arms = _arms(hdul)
    fibermap = hdu_data(path, hdul, hdul.index_of("FIBERMAP"))
    if fibermap is None or not hasattr(fibermap, "columns"):
        raise LayoutError(path, "FIBERMAP HDU is not a table")
    nspec = len(fibermap)
    fcols = {c.upper(): c for c in fibermap.columns.names}
    arrays = {}
    skies: dict[str, np.ndarray] = {}
    sky_units: dict[str, str] = {}
    for arm in arms:
        wave = hdu_data(path, hdul, hdul.index_of(f"{arm}_WAVELENGTH"))
        flux = hdu_data(path, hdul, hdul.index_of(f"{arm}_FLUX"))
        if wave is None or flux is None:
            raise SpectrumError(path, f"{arm} arm has an empty WAVELENGTH or FLUX HDU")
        wave = np.asarray(wave, dtype=np.float64).reshape(-1)
        flux = np.atleast_2d(np.asarray(flux, dtype=np.float64))
        if flux.shape != (nspec, wave.size):
            raise SpectrumError(
                path,
                f"{arm}_FLUX has shape {flux.shape}, expected ({nspec}, {wave.size}) "
                f"from FIBERMAP rows and {arm}_WAVELENGTH",
            )
        ivar = mask = sky = None
        if f"{arm}_IVAR" in hdul:
            ivar = np.atleast_2d(np.asarray(hdu_data(path, hdul, hdul.index_of(f"{arm}_IVAR"))))
        if f"{arm}_MASK" in hdul:
            mask = np.atleast_2d(np.asarray(hdu_data(path, hdul, hdul.index_of(f"{arm}_MASK"))))
        if f"{arm}_SKY" in hdul:
            sky = hdu_data(path, hdul, hdul.index_of(f"{arm}_SKY"))
            if sky is None or not isinstance(sky, np.ndarray) or sky.dtype.names:
                raise SpectrumError(path, f"{arm}_SKY HDU is not an image of sky flux")
            sky = np.atleast_2d(np.asarray(sky, dtype=np.float64))
            sky_units[arm] = str(hdul[f"{arm}_SKY"].header.get("BUNIT", "")).strip()
        for name, arr in (("IVAR", ivar), ("MASK", mask), ("SKY", sky)):
            if arr is not None and arr.shape != flux.shape:
                raise SpectrumError(
                    path, f"{arm}_{name} has shape {arr.shape}, {arm}_FLUX {flux.shape}"
                )
        if np.any(np.diff(wave) <= 0):
            raise SpectrumError(path, f"{arm}_WAVELENGTH is not strictly increasing")
        arrays[arm] = (wave, flux, ivar, mask)
        if sky is not None:
            skies[arm] = sky
    # A sky is shown only where every arm has one: a merged sky with an arm missing would
    # draw that arm's range as if it had no sky lines.
    if skies and len(skies) < len(arrays):
        log.warning("%s: sky in %s only, not shown", path, ", ".join(f"{a}_SKY" for a in skies))
        skies = {}

    redshifts = {}
    if "REDSHIFTS" in hdul:
        rz = hdu_data(path, hdul, hdul.index_of("REDSHIFTS"))
        rc = {c.upper(): c for c in rz.columns.names}
        if "TARGETID" in rc:
            for rec in rz:
                redshifts[int(rec[rc["TARGETID"]])] = {
                    "z": rec[rc["Z"]] if "Z" in rc else None,
                    "class": str(rec[rc["SPECTYPE"]]).strip() if "SPECTYPE" in rc else None,
                    "subclass": str(rec[rc["SUBTYPE"]]).strip() if "SUBTYPE" in rc else None,
                    "DELTACHI2": rec[rc["DELTACHI2"]] if "DELTACHI2" in rc else None,
                }

    def field(i: int, *names: str):
        for n in names:
            if n in fcols:
                v = fibermap[i][fcols[n]]
                return v
        return None

    # What a DESI VI file (Prospect's) records of the observation and the pipeline's run:
    # from the fibermap row, else the primary header.
    primary = hdul[0].header

    def observed(i: int) -> dict[str, str]:
        out = {}
        for key in ("TARGETID", "EXPID", "NIGHT", "TILEID", "SPECPROD", "RRVER", "TEMNAM"):
            v = field(i, key)
            v = primary.get(key) if v is None else v
            if v is not None:
                out[key] = str(v).strip()
        return out

    spectra = []
    for i in rows_to_read(path, row, nspec, "FIBERMAP"):
        if row is None and not any(
            np.any(ivar[i] > 0) if ivar is not None else True for _, _, ivar, _ in arrays.values()
        ):
            continue  # unassigned or broken fibre: no data in any arm
        waves, fluxes, ivars, kept = [], [], [], []
        for arm, (wave, flux, ivar, mask) in arrays.items():
            iv = np.ones(wave.size) if ivar is None else ivar[i].astype(np.float64)
            if mask is not None:
                iv = np.where(mask[i] != 0, 0.0, iv)
            waves.append(wave)
            fluxes.append(flux[i])
            ivars.append(iv)
            # copies of the row: a view would keep every row of the file alive in a cache
            kept.append(
                Arm(arm, wave, flux[i].copy(), None if ivar is None else iv.copy(),
                    ~(np.isfinite(flux[i]) & np.isfinite(iv) & (iv > 0)))
            )  # fmt: skip
        grid, flux, ivar = merge_arms(waves, fluxes, ivars)
        sky = None
        if skies:
            # weighted as the flux is, so the sky is on the merged spectrum's own pixels
            sky = merge_arms(waves, [skies[a][i] for a in arrays], ivars)[1]
        tid = field(i, "TARGETID")
        tid = int(tid) if tid is not None else None
        rz = redshifts.get(tid, {})
        ra, dec = field(i, "TARGET_RA", "RA"), field(i, "TARGET_DEC", "DEC")
        spectra.append(
            make_spectrum(
                path,
                grid,
                flux,
                ivar=ivar,
                frame="vacuum",
                hdu=None,
                row=i,
                redshift=plausible_redshift(rz.get("z")) or 0.0,
                flux_unit=FLUX_UNIT,
                sky=sky,
                sky_unit=_sky_unit(sky_units.values()),
                arms=tuple(kept),
                id=str(tid) if tid is not None else f"{file_stem(path)}-{i}",
                obsid=str(tid) if tid is not None else None,
                survey="DESI",
                ra=float(ra) if ra is not None else None,
                dec=float(dec) if dec is not None else None,
                survey_class=rz.get("class"),
                survey_subclass=rz.get("subclass"),
                extra={
                    "arms": list(arrays),
                    "desi": {
                        **observed(i),
                        **(
                            {}
                            if rz.get("DELTACHI2") is None
                            else {"DELTACHI2": f"{float(rz['DELTACHI2']):.2f}"}
                        ),
                    },
                },  # fmt: skip
            )
        )
    if not spectra:
        raise SpectrumError(path, f"none of the {nspec} FIBERMAP rows has valid data")
    return spectra
