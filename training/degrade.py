"""Turn a library spectrum into a survey-like (LAMOST) one.

    python launch.py degrade --input lib/*.fits --task m_giant --label YES --snr 20 --out survey/
    python launch.py degrade --catalog labelled.csv --snr 10 --snr 20 --realisations 3 --out survey/

`degrade()` applies, in order: air -> vacuum (when the source is in air), a radial-velocity
shift, a Gaussian convolution to the target resolving power (accounting for the source's
own resolution when known), resampling onto the LAMOST log-linear grid (3700-9100 A,
log10 step 1e-4), a smooth multiplicative flux-calibration error, and Gaussian noise at the
chosen median SNR per pixel (ivar set). Grid pixels the source does not cover are masked
(ivar 0), as are pixels the source itself marks bad. The command writes LAMOST-format FITS
files and a labelled catalogue CSV (`path,task,id,label`, paths relative to the CSV).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from agent.spectrum import Spectrum
from agent.units import C_KMS, LAMOST_NPIX  # noqa: F401
from training.sim.instrument import GRIDS, LAMOST_COEFF1, convolve_to_resolution, lamost_grid  # noqa: F401


def flux_calibration_error(
    wave: np.ndarray, amplitude: float, rng: np.random.Generator
) -> np.ndarray:
    """A smooth multiplicative error: exp of a random cubic Legendre series in wavelength.

    `amplitude` is the rms fractional error (0.1 = ~10% tilts and bends over the range).
    """
    if amplitude <= 0:
        return np.ones_like(wave)
    x = np.linspace(-1.0, 1.0, wave.size)
    coeffs = rng.normal(0.0, amplitude / 2.0, 4)
    coeffs[0] = 0.0
    return np.exp(np.polynomial.legendre.legval(x, coeffs))


def observe(
    spectrum: Spectrum,
    *,
    rv_kms: float = 0.0,
    redshift: float = 0.0,
    resolution: float = 1800.0,
    grid: str | np.ndarray = "lamost",
    source_resolution: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free survey view of `spectrum`: (grid wavelengths, flux with NaN where uncovered).

    Vacuum, moved to `redshift` (for rest-frame templates) and shifted by `rv_kms`, blurred to
    `resolution` and averaged into the grid's pixels. Grid pixels outside the source's
    coverage or inside its gaps are NaN.
    """
    src = spectrum.meta.source or spectrum.meta.id or "<memory>"
    # Libraries fill missing stretches with exact zeros; those are gaps, not dark flux.
    good = spectrum.good & ~_zero_runs(spectrum.flux)
    wave = spectrum.vacuum_wavelength()[good]
    flux = spectrum.flux[good]
    if wave.size < 10:
        raise ValueError(f"{src}: too few good pixels to degrade ({wave.size})")
    # Observed wavelengths stay where they are (a QSO keeps its redshift); the star's RV is
    # added on top, as a survey pipeline would see it.
    wave = wave * (1.0 + redshift) * (1.0 + rv_kms / C_KMS)
    out_wave = GRIDS[grid]() if isinstance(grid, str) else np.asarray(grid, dtype=float)
    # Only what lands near the grid is blurred (a survey arm sees a slice of a template).
    near = (wave > out_wave[0] * 0.98) & (wave < out_wave[-1] * 1.02)
    if np.count_nonzero(near) < 10:
        return out_wave, np.full(out_wave.size, np.nan)
    wave, flux = wave[near], flux[near]
    # The line-spread function is set in the observed frame; a redshifted source's own
    # resolution is stretched with it.
    fine, fconv = convolve_to_resolution(wave, flux, resolution, source_resolution)
    # Average the fine samples into each output pixel (flux-conserving for smooth input).
    edges = np.sqrt(out_wave[1:] * out_wave[:-1])
    edges = np.concatenate([[out_wave[0] ** 2 / edges[0]], edges, [out_wave[-1] ** 2 / edges[-1]]])
    idx = np.searchsorted(edges, fine) - 1
    inside = (idx >= 0) & (idx < out_wave.size)
    sums = np.bincount(idx[inside], weights=fconv[inside], minlength=out_wave.size)
    counts = np.bincount(idx[inside], minlength=out_wave.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    # Pixels the source does not cover (outside its range or inside its own gaps).
    covered = (out_wave >= wave[0]) & (out_wave <= wave[-1]) & (counts > 0)
    covered &= ~_source_gaps(wave, out_wave)
    return out_wave, np.where(covered, out, np.nan)


def degrade(
    spectrum: Spectrum,
    *,
    snr: float,
    rv_kms: float = 0.0,
    redshift: float = 0.0,
    resolution: float = 1800.0,
    grid: str | np.ndarray = "lamost",
    flux_cal_error: float = 0.1,
    source_resolution: float | None = None,
    rng: np.random.Generator | int | None = None,
) -> Spectrum:
    """A survey-like copy of `spectrum`: vacuum, shifted, blurred, regridded, mis-calibrated, noisy.

    `snr` is the median signal-to-noise per output pixel over the covered pixels; noise is
    Poisson-like (sigma grows as sqrt(flux)), so absorption troughs get noisier in relative
    terms, as in real data. Pixels outside the source's coverage are masked.
    """
    if snr <= 0:
        raise ValueError(f"snr must be positive (got {snr})")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    src = spectrum.meta.source or spectrum.meta.id or "<memory>"
    out_wave, out = observe(
        spectrum,
        rv_kms=rv_kms,
        redshift=redshift,
        resolution=resolution,
        grid=grid,
        source_resolution=source_resolution,
    )
    covered = np.isfinite(out)
    out = out * flux_calibration_error(out_wave, flux_cal_error, rng)
    sigma = poisson_sigma(out, covered, snr)
    noisy = out + rng.normal(0.0, 1.0, out.size) * sigma
    ivar = np.where(covered, 1.0 / sigma**2, 0.0)
    noisy = np.where(covered, noisy, 0.0)

    meta = replace(
        spectrum.meta,
        survey="LAMOST-like",
        snr=float(snr),
        simulated=True,
        extra={
            **spectrum.meta.extra,
            "degraded_from": src,
            "rv_kms": float(rv_kms),
            "resolution": float(resolution),
            "flux_cal_error": float(flux_cal_error),
        },
    )
    return Spectrum(
        wavelength=out_wave,
        flux=noisy,
        ivar=ivar,
        mask=~covered,
        frame="vacuum",
        redshift=float(spectrum.redshift) if not redshift else float(redshift),
        flux_unit=spectrum.flux_unit,
        meta=meta,
    )


def poisson_sigma(flux: np.ndarray, covered: np.ndarray, snr: float) -> np.ndarray:
    """Per-pixel sigma for a median SNR of `snr`: sigma = level/snr * sqrt(f/level).

    Floored at 5% of the median level so that dark troughs keep noise.
    """
    level = float(np.nanmedian(np.abs(flux[covered]))) if covered.any() else 1.0
    if not np.isfinite(level) or level <= 0:
        level = 1.0
    rel = np.clip(np.abs(np.nan_to_num(flux)) / level, 0.05, None)
    return level / snr * np.sqrt(rel)


def _zero_runs(flux: np.ndarray, min_run: int = 3) -> np.ndarray:
    """True on runs of at least `min_run` pixels that are exactly zero.

    >>> _zero_runs(np.array([1., 0, 0, 0, 2, 0, 3])).astype(int).tolist()
    [0, 1, 1, 1, 0, 0, 0]
    """
    z = flux == 0
    out = np.zeros_like(z)
    i, n = 0, z.size
    while i < n:
        if z[i]:
            j = i
            while j < n and z[j]:
                j += 1
            if j - i >= min_run:
                out[i:j] = True
            i = j
        else:
            i += 1
    return out


def _source_gaps(wave: np.ndarray, out_wave: np.ndarray) -> np.ndarray:
    """Output pixels that fall in a hole of the source sampling (> 5 source steps wide)."""
    d = np.diff(wave)
    typical = np.median(d)
    holes = np.flatnonzero(d > max(5 * typical, 0.0))
    bad = np.zeros(out_wave.size, dtype=bool)
    for i in holes:
        bad |= (out_wave > wave[i]) & (out_wave < wave[i + 1])
    return bad


# -- command line -------------------------------------------------------------------------


def degrade_candidates(
    cands: list,
    out: str | Path,
    *,
    snrs: list[float] | None = None,
    realisations: int = 1,
    rv_max: float = 300.0,
    resolution: float = 1800.0,
    source_resolution: float | None = None,
    flux_cal_error: float = 0.1,
    seed: int = 0,
    label: str | None = None,
) -> tuple[list[dict[str, str]], list[tuple[str, Exception]]]:
    """Degrade each candidate's spectrum at each SNR (`realisations` noisy copies each) into
    LAMOST FITS files in `out`, with `out/catalog.csv` (`path,task,id,label`). Returns the
    catalogue rows and the (path, error) of each input that could not be read, which is
    skipped."""
    from agent.formats import write_lamost_fits

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, str]] = []
    skipped: list[tuple[str, Exception]] = []
    for c in cands:
        try:
            spec = c.load()
        except Exception as exc:  # a bad file is reported and skipped
            skipped.append((str(c.path), exc))
            continue
        for snr in snrs or [20.0]:
            for k in range(realisations):
                rv = float(rng.uniform(-rv_max, rv_max))
                d = degrade(
                    spec,
                    snr=snr,
                    rv_kms=rv,
                    resolution=resolution,
                    flux_cal_error=flux_cal_error,
                    source_resolution=source_resolution,
                    rng=rng,
                )
                name = f"{_safe(c.id)}_snr{int(round(snr))}_{k}"
                d.meta.id = name
                write_lamost_fits(d, out / f"{name}.fits")
                row = {"path": f"{name}.fits", "task": c.task, "id": name}
                rows.append(row | {"label": c.label or label or ""})
    with open(out / "catalog.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["path", "task", "id", "label"])
        w.writeheader()
        w.writerows(rows)
    return rows, skipped


def _safe(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s)[:80] or "spectrum"
