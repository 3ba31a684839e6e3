"""What LAMOST, SDSS/BOSS and DESI deliver, and files written in their layouts.

A `Layout` is a survey's spectrograph arms (grid and resolving power each), its throughput
(which sets where the noise grows: blue ends, dichroic crossovers, arm edges), its flux
unit and typical flux level, and the writer of its file format. `observe_survey` turns a
library spectrum into what that survey's pipeline would hand an expert: per arm, the
spectrum blurred to the arm's resolution on the arm's grid, one smooth flux-calibration
error across arms, photon + sky noise at a median SNR, sky-line residuals larger than the
pipeline's error estimate, bad columns flagged in the mask, and a partially corrected
telluric absorption. `write_survey` writes the arms as real files:

- LAMOST: the DR1-DR7 5-row image, log-linear 1e-4 dex, 3700-9100 A, R ~ 1800, one grid
  (the blue and red arms are joined by the pipeline at the ~5900 A dichroic).
- SDSS/BOSS: `spec-PLATE-MJD-FIBER.fits` with the COADD table (loglam, flux in 1e-17
  erg/s/cm2/A, ivar, and_mask), log-linear 1e-4 dex, 3600-10400 A; the blue (R ~ 1800) and
  red (R ~ 2200) cameras overlap 5800-6300 A and are inverse-variance co-added there, as
  the pipeline does, and so is the `sky` column. SPECOBJ carries the pipeline redshift Z (no
  CLASS: that would be the answer).
- DESI: a coadd with B/R/Z arms on linear 0.8 A grids (3600-5800, 5760-7620, 7520-9824 A;
  R ~ 2500, 3500, 4500), their IVAR, MASK and SKY (as desispec writes a Spectra object's
  sky), a FIBERMAP and a REDSHIFTS table with Z.
  The reader (`agent.formats.desi`) merges the arms where they overlap.

Resolving powers are per arm, not per pixel; the values are mid-arm figures from the
surveys' instrument papers, rounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from astropy.io import fits

from agent.spectrum import Spectrum
from agent.units import C_KMS
from training.degrade import flux_calibration_error, observe
from training.sim.instrument import SKY_LINES, lamost_grid, telluric, throughput

SDSS_UNIT = "1E-17 erg/cm^2/s/Ang"
# Bright sky lines (vacuum A): [O I] 5579/6302/6366, Na D, and the strongest OH bands in the
# red, where survey spectra carry most of their sky residuals.
OH_LINES = (
    6866.0, 6925.0, 7278.0, 7318.0, 7342.0, 7371.0, 7404.0, 7752.0, 7796.0, 7823.0, 7856.0,
    7916.0, 7995.0, 8292.0, 8346.0, 8401.0, 8432.0, 8467.0, 8763.0, 8829.0, 8888.0, 8921.0,
    8945.0, 9378.0, 9442.0, 9793.0, 9876.0, 10126.0, 10291.0,
)  # fmt: skip
ALL_SKY = tuple(sorted(set(SKY_LINES) | set(OH_LINES)))


def loglam_grid(lo: float, hi: float, step: float = 1e-4) -> np.ndarray:
    """A log-linear grid from `lo` to `hi` A with `step` dex per pixel (SDSS/BOSS, LAMOST)."""
    c0 = round(math.log10(lo), 4)
    n = int(math.floor((math.log10(hi) - c0) / step)) + 1
    return 10.0 ** (c0 + step * np.arange(n))


def linear_grid(lo: float, hi: float, step: float = 0.8) -> np.ndarray:
    return lo + step * np.arange(int(round((hi - lo) / step)) + 1)


@dataclass(frozen=True)
class Arm:
    name: str
    grid: Callable[[], np.ndarray]
    resolution: float


def _bell(wave: np.ndarray, lo: float, hi: float, floor: float = 0.25) -> np.ndarray:
    """An arm's efficiency: flat in the middle, falling to `floor` at its dichroic edges."""
    x = (wave - lo) / (hi - lo)
    return floor + (1 - floor) * np.clip(np.sin(np.pi * np.clip(x, 0, 1)) * 2.5, 0, 1)


def _boss_throughput(wave: np.ndarray) -> np.ndarray:
    return np.interp(
        wave,
        [3600, 4000, 4600, 5500, 6500, 8000, 9000, 10400],
        [0.2, 0.5, 0.85, 1.0, 1.0, 0.9, 0.65, 0.25],
    )


def _desi_eff(arm: str, w: np.ndarray) -> np.ndarray:
    lo, hi = {"B": (3600.0, 5800.0), "R": (5760.0, 7620.0), "Z": (7520.0, 9824.0)}[arm]
    return _boss_throughput(w) * _bell(w, lo, hi)


@dataclass(frozen=True)
class Layout:
    name: str
    arms: tuple[Arm, ...]
    flux_unit: str
    flux_level: tuple[float, float]  # median flux drawn log-uniformly in this range
    efficiency: Callable[[str, np.ndarray], np.ndarray]  # (arm, wave) -> relative throughput
    suffix: str = ".fits"


LAYOUTS: dict[str, Layout] = {
    "lamost": Layout(
        "lamost",
        (Arm("br", lamost_grid, 1800.0),),
        "arbitrary",  # LAMOST DR fluxes are relative (not absolutely calibrated)
        (50.0, 3000.0),
        lambda arm, w: throughput(w),
    ),
    "sdss": Layout(
        "sdss",
        (
            Arm("b", lambda: loglam_grid(3600.0, 6350.0), 1800.0),
            Arm("r", lambda: loglam_grid(5800.0, 10400.0), 2200.0),
        ),
        SDSS_UNIT,
        (1.0, 80.0),
        lambda arm, w: (
            _boss_throughput(w)
            * (_bell(w, 3600.0, 6350.0) if arm == "b" else _bell(w, 5800.0, 10400.0))
        ),
    ),
    "desi": Layout(
        "desi",
        (
            Arm("B", lambda: linear_grid(3600.0, 5800.0), 2500.0),
            Arm("R", lambda: linear_grid(5760.0, 7620.0), 3500.0),
            Arm("Z", lambda: linear_grid(7520.0, 9824.0), 4500.0),
        ),
        SDSS_UNIT,
        (0.5, 60.0),
        lambda arm, w: _desi_eff(arm, w),
    ),
}


@dataclass
class ArmData:
    name: str
    wave: np.ndarray
    flux: np.ndarray
    ivar: np.ndarray
    bad: np.ndarray  # flagged by the pipeline (bad column, no data)
    sky: np.ndarray | None = None  # the sky the noise was drawn with, in the flux unit


@dataclass
class Observation:
    layout: str
    arms: list[ArmData]
    z_true: float
    z_pipeline: float
    snr: float
    flux_unit: str

    def spectrum_like(self) -> Spectrum:
        """The arms on one grid, for quick looks and tests (files are what the benchmark reads)."""
        w = np.concatenate([a.wave for a in self.arms])
        order = np.argsort(w, kind="stable")
        f = np.concatenate([a.flux for a in self.arms])[order]
        iv = np.concatenate([np.where(a.bad, 0.0, a.ivar) for a in self.arms])[order]
        w = w[order]
        keep = np.concatenate([[True], np.diff(w) > 0])
        return Spectrum(w[keep], f[keep], ivar=iv[keep], frame="vacuum", flux_unit=self.flux_unit)


def observe_survey(
    spectrum: Spectrum,
    layout: str,
    *,
    snr: float,
    rng: np.random.Generator,
    rv_kms: float = 0.0,
    redshift: float = 0.0,
    source_resolution: float | None = None,
    flux_cal_error: float = 0.1,
    sky_residual: float = 1.0,
    bad_column_rate: float = 0.3,
    catastrophic_z: float = 0.03,
) -> Observation:
    """`spectrum` as `layout`'s pipeline delivers it (see the module docstring).

    `snr` is the median per-pixel SNR over all covered pixels of all arms. `sky_residual`
    scales the residuals left at sky lines (in units of the local noise); `bad_column_rate`
    is the chance that a spectrum has flagged bad columns; `catastrophic_z` the chance that
    the pipeline redshift is wrong.
    """
    if snr <= 0:
        raise ValueError(f"snr must be positive (got {snr})")
    lay = LAYOUTS[layout]
    z_obs = (1.0 + redshift) * (1.0 + rv_kms / C_KMS) - 1.0
    # One calibration error and one flux level for the whole spectrum, across arms.
    full = np.linspace(3500.0, 10500.0, 1400)
    cal = flux_calibration_error(full, flux_cal_error, rng)
    lo, hi = lay.flux_level
    level = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    airmass_t = telluric(full, rng)
    tell = np.interp
    arms_raw = []
    for arm in lay.arms:
        w, f = observe(
            spectrum,
            rv_kms=rv_kms,
            redshift=redshift,
            resolution=arm.resolution,
            grid=arm.grid(),
            source_resolution=source_resolution,
        )
        # Pipelines correct most of the telluric absorption, not all of it.
        f = f * np.interp(w, full, cal) * tell(w, full, airmass_t) ** 0.25
        arms_raw.append((arm, w, f))
    covered_all = np.concatenate([np.isfinite(f) for _, _, f in arms_raw])
    if not covered_all.any():
        raise ValueError(f"{spectrum.meta.source}: no coverage in the {layout} range")
    med = float(np.nanmedian(np.abs(np.concatenate([f for _, _, f in arms_raw]))))
    scale = level / med if med > 0 and np.isfinite(med) else 1.0
    # Photon noise of object + sky through the throughput: in counts c = f t, var = c + s t,
    # so sigma_f = sqrt(f t + s t) / t. The sky continuum is 30% of the object's median.
    sigmas, skies = [], []
    for arm, w, f in arms_raw:
        t = np.clip(lay.efficiency(arm.name, w), 0.05, None)
        sky = 0.3 * level * (1.0 + 8.0 * _sky_profile(w, arm.resolution))
        fl = np.clip(np.nan_to_num(f * scale), 0.0, None)
        sigmas.append(np.sqrt((fl + sky) * t) / t)
        skies.append(sky)
    # Normalise the noise so that the median SNR over covered pixels is `snr`.
    ratio = np.concatenate([np.abs(f * scale) / s for (_, _, f), s in zip(arms_raw, sigmas)])[
        covered_all
    ]
    k = float(np.median(ratio)) / snr
    out = []
    for (arm, w, f), s, sky in zip(arms_raw, sigmas, skies):
        covered = np.isfinite(f)
        sigma = s * k
        flux = f * scale + rng.normal(0.0, 1.0, w.size) * sigma
        # Sky subtraction leaves residuals at bright lines beyond what ivar admits.
        prof = _sky_profile(w, arm.resolution)
        flux = flux + sky_residual * rng.normal(0.0, 2.0) * prof * sigma * 3.0
        ivar = np.where(covered, 1.0 / sigma**2, 0.0)
        bad = ~covered
        if rng.random() < bad_column_rate:
            for _ in range(int(rng.integers(1, 4))):
                n = int(rng.integers(3, 16))
                i = int(rng.integers(0, max(1, w.size - n)))
                bad[i : i + n] = True
                flux[i : i + n] = rng.normal(0.0, 20.0, n) * level  # garbage, but flagged
        flux = np.where(~covered, 0.0, flux)
        ivar = np.where(bad, 0.0, ivar)
        out.append(ArmData(arm.name, w, flux, ivar, bad, sky))
    z_pipe = z_obs + rng.normal(0.0, 30.0 / C_KMS) * (1.0 + z_obs)
    if rng.random() < catastrophic_z:
        z_pipe = float(rng.uniform(0.0, 3.0))
    return Observation(layout, out, float(redshift), float(z_pipe), float(snr), lay.flux_unit)


def _sky_profile(w: np.ndarray, resolution: float) -> np.ndarray:
    """Sum of unit-height Gaussians at the sky lines, at the arm's resolution."""
    out = np.zeros_like(w)
    for c in ALL_SKY:
        if w[0] - 20 < c < w[-1] + 20:
            sig = c / resolution / 2.3548
            out += np.exp(-0.5 * ((w - c) / sig) ** 2)
    return np.clip(out, 0.0, 1.0)


# -- writers --------------------------------------------------------------------------------


def write_survey(obs: Observation, path: Path, obj_id: str) -> Path:
    """Write `obs` in its survey's file layout at `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if obs.layout == "lamost":
        return _write_lamost(obs, path, obj_id)
    if obs.layout == "sdss":
        return _write_sdss(obs, path, obj_id)
    if obs.layout == "desi":
        return _write_desi(obs, path, obj_id)
    raise ValueError(f"unknown layout {obs.layout!r}; known: {', '.join(LAYOUTS)}")


def _write_lamost(obs: Observation, path: Path, obj_id: str) -> Path:
    from agent.formats import write_lamost_fits
    from agent.spectrum import SpectrumMeta

    a = obs.arms[0]
    spec = Spectrum(
        a.wave,
        a.flux,
        ivar=a.ivar,
        mask=a.bad,
        frame="vacuum",
        redshift=obs.z_pipeline,
        meta=SpectrumMeta(id=obj_id, snr=obs.snr, simulated=True),
    )
    return write_lamost_fits(spec, path)


def _boss_coadd(obs: Observation) -> tuple[np.ndarray, ...]:
    """The BOSS pipeline's coadd: both cameras on one log grid, ivar-weighted where they
    overlap (the sky too, plain mean where no camera has weight)."""
    grid = np.unique(np.round(np.log10(np.concatenate([a.wave for a in obs.arms])), 6))
    num = np.zeros(grid.size)
    den = np.zeros(grid.size)
    sky_num, sky_plain, count = np.zeros(grid.size), np.zeros(grid.size), np.zeros(grid.size)
    nodata = np.ones(grid.size, dtype=bool)
    flagged = np.zeros(grid.size, dtype=bool)
    for a in obs.arms:
        idx = np.searchsorted(grid, np.round(np.log10(a.wave), 6))
        num[idx] += a.ivar * a.flux
        den[idx] += a.ivar
        nodata[idx] &= a.ivar <= 0
        flagged[idx] |= a.bad & (a.flux != 0)
        if a.sky is not None:
            sky_num[idx] += a.ivar * a.sky
            sky_plain[idx] += a.sky
            count[idx] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        flux = np.where(den > 0, num / den, 0.0)
        sky = np.where(den > 0, sky_num / den, sky_plain / np.maximum(count, 1))
    # NODATA (bit 24) where nothing is left; FULLREJECT (bit 18) on flagged bad columns.
    and_mask = np.where(nodata, 1 << 24, 0) | np.where(flagged & nodata, 1 << 18, 0)
    return grid, flux, den, and_mask.astype(np.int32), sky


def _write_sdss(obs: Observation, path: Path, obj_id: str) -> Path:
    loglam, flux, ivar, and_mask, sky = _boss_coadd(obs)
    n = loglam.size
    primary = fits.PrimaryHDU()
    h = primary.header
    plate, mjd, fiber = _ids(obj_id)
    h["TELESCOP"] = "SDSS 2.5-M"
    h["PLATEID"], h["MJD"], h["FIBERID"] = plate, mjd, fiber
    h["BUNIT"] = SDSS_UNIT
    h["VACUUM"] = (True, "Wavelengths are in vacuum")
    h["SIMULATE"] = (True, "Simulated spectrum, not an observation")
    h["OBJECT"] = obj_id
    coadd = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="flux", format="E", array=flux.astype(np.float32)),
            fits.Column(name="loglam", format="E", array=loglam.astype(np.float32)),
            fits.Column(name="ivar", format="E", array=ivar.astype(np.float32)),
            fits.Column(name="and_mask", format="J", array=and_mask),
            fits.Column(name="or_mask", format="J", array=and_mask),
            fits.Column(name="wdisp", format="E", array=np.ones(n, np.float32)),
            fits.Column(name="sky", format="E", array=sky.astype(np.float32)),
        ],
        name="COADD",
    )
    specobj = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="Z", format="E", array=np.array([obs.z_pipeline], np.float32)),
            fits.Column(name="SN_MEDIAN_ALL", format="E", array=np.array([obs.snr], np.float32)),
        ],
        name="SPECOBJ",
    )
    fits.HDUList([primary, coadd, specobj]).writeto(path, overwrite=True)
    return path


def _write_desi(obs: Observation, path: Path, obj_id: str) -> Path:
    tid = int(_ids(obj_id)[0]) * 100000 + _ids(obj_id)[2]
    hdus: list = [fits.PrimaryHDU()]
    hdus[0].header["SIMULATE"] = (True, "Simulated spectrum, not an observation")
    hdus.append(
        fits.BinTableHDU.from_columns(
            [
                fits.Column(name="TARGETID", format="K", array=np.array([tid])),
                fits.Column(name="TARGET_RA", format="D", array=np.array([0.0])),
                fits.Column(name="TARGET_DEC", format="D", array=np.array([0.0])),
            ],
            name="FIBERMAP",
        )
    )
    for a in obs.arms:
        hdus.append(fits.ImageHDU(a.wave.astype(np.float64), name=f"{a.name}_WAVELENGTH"))
        hdus.append(fits.ImageHDU(a.flux[None, :].astype(np.float32), name=f"{a.name}_FLUX"))
        hdus[-1].header["BUNIT"] = "10**-17 erg/(s cm2 Angstrom)"
        hdus.append(fits.ImageHDU(a.ivar[None, :].astype(np.float32), name=f"{a.name}_IVAR"))
        hdus.append(fits.ImageHDU(a.bad[None, :].astype(np.int32), name=f"{a.name}_MASK"))
        if a.sky is not None:
            hdus.append(fits.ImageHDU(a.sky[None, :].astype(np.float32), name=f"{a.name}_SKY"))
            hdus[-1].header["BUNIT"] = "10**-17 erg/(s cm2 Angstrom)"
    hdus.append(
        fits.BinTableHDU.from_columns(
            [
                fits.Column(name="TARGETID", format="K", array=np.array([tid])),
                fits.Column(name="Z", format="D", array=np.array([obs.z_pipeline])),
            ],
            name="REDSHIFTS",
        )
    )
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path


def _ids(obj_id: str) -> tuple[int, int, int]:
    """Stable plate/MJD/fiber-like numbers from a name (the real ones do not exist)."""
    import hashlib

    h = int(hashlib.sha1(obj_id.encode()).hexdigest()[:12], 16)
    return 3000 + h % 7000, 55000 + (h >> 13) % 5000, 1 + (h >> 26) % 1000
