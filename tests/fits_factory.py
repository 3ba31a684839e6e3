"""Small files in each layout Loupe reads, written from seeded synthetic spectra.

Each writer takes a folder and returns the path it wrote; the arrays are small so tests
stay fast. The LAMOST writer is production code (`agent.formats.write_lamost_fits`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from astropy.io import fits
from astropy.table import Table

H_ALPHA_VAC = 6564.61


def spectrum_arrays(n: int = 1200, seed: int = 0, lo: float = 3700.0, hi: float = 9100.0):
    """Wavelength (linear), flux with an H-alpha absorption line, ivar."""
    rng = np.random.default_rng(seed)
    wave = np.linspace(lo, hi, n)
    flux = 1.0 + wave / 1e4 - 0.5 * np.exp(-0.5 * ((wave - H_ALPHA_VAC) / 5.0) ** 2)
    flux = flux + rng.normal(0, 0.01, n)
    return wave, flux, np.full(n, 1e4)


def loglam_grid(n: int = 1200, c0: float = 3.5682, c1: float = 1e-4) -> np.ndarray:
    return c0 + c1 * np.arange(n)


def write_sdss_spec(folder: Path, plate=1234, mjd=56789, fiber=42, n=1200, seed=0) -> Path:
    loglam = loglam_grid(n)
    _, flux, ivar = spectrum_arrays(n, seed)
    and_mask = np.zeros(n, np.int32)
    and_mask[100:110] = 1 << 24  # NODATA: masked
    and_mask[200:210] = 1 << 23  # BRIGHTSKY: still measured
    primary = fits.PrimaryHDU()
    h = primary.header
    h["TELESCOP"], h["PLATEID"], h["MJD"], h["FIBERID"] = "SDSS 2.5-M", plate, mjd, fiber
    h["PLUG_RA"], h["PLUG_DEC"], h["VACUUM"] = 150.25, 2.5, True
    coadd = fits.BinTableHDU.from_columns(
        [
            fits.Column("flux", "E", array=flux),
            fits.Column("loglam", "E", array=loglam),
            fits.Column("ivar", "E", array=ivar),
            fits.Column("and_mask", "J", array=and_mask),
        ],
        name="COADD",
    )
    specobj = fits.BinTableHDU.from_columns(
        [
            fits.Column("CLASS", "6A", array=["STAR"]),
            fits.Column("SUBCLASS", "21A", array=["CV"]),
            fits.Column("Z", "E", array=[0.0002]),
            fits.Column("SN_MEDIAN_ALL", "E", array=[17.5]),
        ],
        name="SPECOBJ",
    )
    path = folder / f"spec-{plate:04d}-{mjd:05d}-{fiber:04d}.fits"
    fits.HDUList([primary, coadd, specobj]).writeto(path, overwrite=True)
    return path


DESI_ARMS = {"B": (3600.0, 5800.0), "R": (5760.0, 7620.0), "Z": (7520.0, 9824.0)}


def write_desi_coadd(folder: Path, nspec=3, step=0.8, redshifts=True, seed=0) -> Path:
    """A DESI coadd with B/R/Z arms on one 0.8 A grid (as DESI's are) and a FIBERMAP."""
    rng = np.random.default_rng(seed)
    hdus = [fits.PrimaryHDU()]
    for arm, (lo, hi) in DESI_ARMS.items():
        wave = np.arange(lo, hi + step / 2, step)
        flux = np.vstack([1.0 + i + wave / 1e4 for i in range(nspec)])
        flux = flux + rng.normal(0, 0.01, flux.shape)
        # The R arm is noisier, so in overlaps the merge should lean on B and Z.
        ivar = np.full(flux.shape, 100.0 if arm == "R" else 400.0)
        mask = np.zeros(flux.shape, np.int32)
        mask[:, :5] = 1
        hdus += [
            fits.ImageHDU(wave, name=f"{arm}_WAVELENGTH"),
            fits.ImageHDU(flux.astype(np.float32), name=f"{arm}_FLUX"),
            fits.ImageHDU(ivar.astype(np.float32), name=f"{arm}_IVAR"),
            fits.ImageHDU(mask, name=f"{arm}_MASK"),
        ]
    tids = np.arange(39600000000000, 39600000000000 + nspec, dtype=np.int64)
    hdus.append(
        fits.BinTableHDU.from_columns(
            [
                fits.Column("TARGETID", "K", array=tids),
                fits.Column("TARGET_RA", "D", array=np.linspace(10, 11, nspec)),
                fits.Column("TARGET_DEC", "D", array=np.linspace(-5, -4, nspec)),
            ],
            name="FIBERMAP",
        )
    )
    if redshifts:
        hdus.append(
            fits.BinTableHDU.from_columns(
                [
                    fits.Column("TARGETID", "K", array=tids[::-1]),
                    fits.Column("Z", "D", array=np.linspace(0.5, 0.0, nspec)),
                    fits.Column("SPECTYPE", "6A", array=["QSO"] * (nspec - 1) + ["STAR"]),
                ],
                name="REDSHIFTS",
            )
        )
    path = folder / "coadd-main-dark-1234.fits"
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path


def write_wcs_image(folder: Path, name="star.fits", n=1000, log=False, **cards) -> Path:
    _, flux, _ = spectrum_arrays(n)
    hdu = fits.PrimaryHDU(flux.astype(np.float32))
    if log:
        hdu.header.update({"CRVAL1": 3.5682, "CDELT1": 1e-4, "CRPIX1": 1, "DC-FLAG": 1})
    else:
        hdu.header.update({"CRVAL1": 3700.0, "CDELT1": 5.4, "CRPIX1": 1})
    hdu.header.update(cards)
    path = folder / name
    hdu.writeto(path, overwrite=True)
    return path


def write_template_rows(folder: Path, names=("A0", "Carbon", "WD"), n=800) -> Path:
    rows = np.vstack([spectrum_arrays(n, seed=i)[1] for i in range(len(names))])
    hdu = fits.PrimaryHDU(rows.astype(np.float32))
    hdu.header.update({"COEFF0": 3.5682, "COEFF1": 1e-4, "OBJECT": "STAR"})
    for i, name in enumerate(names):
        hdu.header[f"NAME{i}"] = name
    path = folder / "spEigenStar-test.fits"
    hdu.writeto(path, overwrite=True)
    return path


def write_fits_table(
    folder: Path, name="table.fits", wave_col="WAVELENGTH", flux_col="FLUX", err_col="ERROR",
    unit="Angstrom", descending=False, primary_cards=None,
) -> Path:  # fmt: skip
    wave, flux, ivar = spectrum_arrays(900)
    if descending:
        wave, flux, ivar = wave[::-1], flux[::-1], ivar[::-1]
    cols = [
        fits.Column(wave_col, "D", array=wave, unit=unit),
        fits.Column(flux_col, "E", array=flux),
    ]
    if err_col:
        cols.append(fits.Column(err_col, "E", array=1 / np.sqrt(ivar)))
    primary = fits.PrimaryHDU()
    primary.header.update(primary_cards or {})
    path = folder / name
    fits.HDUList([primary, fits.BinTableHDU.from_columns(cols)]).writeto(path, overwrite=True)
    return path


def write_csv(folder: Path, name="spec.csv", header=True, sep=",", columns=3) -> Path:
    wave, flux, ivar = spectrum_arrays(500)
    err = 1 / np.sqrt(ivar)
    lines = []
    if header:
        lines.append(sep.join(["wavelength", "flux", "error"][:columns]))
    for w, f, e in zip(wave, flux, err):
        lines.append(sep.join(f"{v:.6f}" for v in (w, f, e)[:columns]))
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def write_ecsv(folder: Path, name="spec.ecsv", frame="vacuum") -> Path:
    wave, flux, ivar = spectrum_arrays(500)
    t = Table({"wavelength": wave, "flux": flux, "ivar": ivar}, meta={"frame": frame})
    path = folder / name
    t.write(path, format="ascii.ecsv", overwrite=True)
    return path


def specvi_record(i: int, source="cv", label="YES", n=400, as_json=False) -> dict:
    wave, flux, _ = spectrum_arrays(n, seed=i)
    create = {"flux": flux.tolist(), "wavelength": wave.tolist(), "redshift": 0.001 * i}
    extra = {
        "index": i,
        "name": f"spec-55862-B6212_sp06-{i:03d}.fits",
        "tools_kwargs": {"spectral_visualization_tool": {"create_kwargs": create}},
    }
    reward = {"ground_truth": label, "style": "rule"}
    return {
        "data_source": source,
        "prompt": json.dumps([{"role": "user", "content": "<image>Is this a CV?"}]),
        "reward_model": json.dumps(reward) if as_json else reward,
        "extra_info": json.dumps(extra) if as_json else extra,
    }


def write_specvi_parquet(folder: Path, name="test_cv.parquet", records=None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = records or [
        specvi_record(0, "cv", "YES"),
        specvi_record(1, "cv", "NO"),
        specvi_record(2, "gm", "YES"),
    ]
    path = folder / name
    pq.write_table(pa.Table.from_pylist(records), path)
    return path
