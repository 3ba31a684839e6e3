"""Generate simulated LAMOST-like demo spectra with known labels.

    python launch.py demo --out data/demo --labels data/demo-labels.csv

The class library is `training.sim.classes`, the instrument `training.sim.instrument`.

Every spectrum is SIMULATED (header SIMULATE = T, `meta.simulated`), made from physics:
a continuum (a blackbody, or a disc / power law for CVs and QSOs), lines with physical
shapes (pressure-broadened Voigt-like Balmer lines in DA white dwarfs, Gaussians in normal
stars, broad and sometimes double-peaked disc emission in CVs), molecular bands with a
sharp head fading in the right direction (C2 Swan to the blue, TiO, ZrO, LaO and CN-red
to the red), telluric O2/H2O absorption, the LAMOST instrumental resolution (R ~ 1800),
a radial velocity, and noise at a chosen SNR on LAMOST's 3700-9100 A log-linear grid.
The five target classes come with their usual contaminants (hard negatives), and the
catalogue rows say which task each spectrum is a candidate for and the truth (YES/NO).

File names and ids are neutral (`sim-<seed>-<n>`) so neither the file name nor the title
of the global view gives the class away. The same seed gives the same spectra.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from agent.spectrum import Spectrum, SpectrumMeta
from agent.units import C_KMS
from training.sim.classes import CLASS_BY_NAME, CLASSES, Model, gauss
from training.sim.instrument import (
    NPIX,
    SKY_LINES,
    convolve_lsf,
    lamost_grid,
    telluric,
    throughput,
)

__all__ = ["CLASSES", "CLASS_BY_NAME", "NPIX", "generate_demo", "plan", "simulate"]


def simulate(
    cls: str,
    seed: int | tuple[int, ...] = 0,
    *,
    snr: float | None = None,
    spec_id: str | None = None,
) -> tuple[Spectrum, dict[str, Any]]:
    """One simulated LAMOST-like spectrum of class `cls` (a name in CLASS_BY_NAME).

    Returns the Spectrum (vacuum, observed frame, `redshift` = the pipeline's z) and the
    simulation parameters. `snr` is the median S/N per pixel near 6200 A (default: drawn
    between 8 and 60, like LAMOST candidates).
    """
    if cls not in CLASS_BY_NAME:
        raise ValueError(f"unknown class {cls!r}; known: {', '.join(CLASS_BY_NAME)}")
    rng = np.random.default_rng(seed)
    wave = lamost_grid()
    sc = CLASS_BY_NAME[cls]
    rv = float(rng.normal(0, 40)) if cls not in ("qso",) else 0.0
    z_star = rv / C_KMS
    m = Model(wave / (1 + z_star), np.ones(NPIX))
    out = sc.make(m, rng)
    info, z_true = out if isinstance(out, tuple) else (out, z_star)
    # A gentle flux-calibration tilt, as in real survey spectra.
    tilt = 1 + rng.uniform(-0.08, 0.08) * (wave - 6400) / 2700
    flux = convolve_lsf(np.clip(m.flux, 0, None)) * tilt * telluric(wave, rng)
    flux /= np.median(flux[(wave > 6000) & (wave < 6400)])
    scale = float(rng.uniform(200, 3000))
    flux *= scale

    snr = float(snr) if snr is not None else float(rng.uniform(8, 60))
    ref = scale
    thr = throughput(wave)
    sigma = (ref / snr) * np.sqrt((0.75 * np.clip(flux, 0, None) / ref + 0.25) / thr)
    noisy = flux + rng.normal(0, 1, NPIX) * sigma
    for sky in SKY_LINES:  # imperfect sky subtraction
        noisy += rng.normal(0, 2.5) * sigma * gauss(wave, sky, 1.8)
    ivar = 1.0 / sigma**2
    bad = rng.random(NPIX) < 0.003
    if rng.random() < 0.15:  # a bad CCD column stretch
        i = int(rng.integers(100, NPIX - 100))
        bad[i : i + int(rng.integers(4, 20))] = True
    ivar[bad] = 0.0
    noisy[bad] = 0.0

    # The pipeline's redshift: stars get their RV (with a small error); a quasar that
    # reached a CV candidate list was taken for a star, so z ~ 0.
    z_pipe = z_star + float(rng.normal(0, 5)) / C_KMS if cls != "qso" else 0.0
    sid = spec_id or f"sim-{cls}"
    meta = SpectrumMeta(
        id=sid,
        survey="simulated",
        obsid=sid,
        ra=float(rng.uniform(0, 360)),
        dec=float(np.degrees(np.arcsin(rng.uniform(-0.2, 1.0)))),
        snr=round(snr, 2),
        simulated=True,
        extra={"sim_class": cls},
    )
    spec = Spectrum(
        wavelength=wave, flux=noisy, ivar=ivar, mask=bad, frame="vacuum", redshift=z_pipe, meta=meta
    )
    params = {"class": cls, "rv_kms": rv, "z": z_true, "snr": snr, "scale": scale, **info}
    return spec, params


# -- the demo set ---------------------------------------------------------------------------


def plan(n_per_class: int, seed: int) -> list[tuple[str, str]]:
    """(id, class) for every demo spectrum, in a seeded shuffled order with neutral ids."""
    classes = [c.name for c in CLASSES for _ in range(n_per_class)]
    order = np.random.default_rng([seed, 1]).permutation(len(classes))
    return [(f"sim-{seed}-{k:04d}", classes[i]) for k, i in enumerate(order)]


def generate_demo(
    out_dir: str | Path = "data/demo",
    n_per_class: int = 4,
    seed: int = 0,
    *,
    snr: float | None = None,
    labels: str | Path | None = None,
) -> list[dict[str, str]]:
    """Write the demo spectra as LAMOST FITS files into `out_dir`; return catalogue rows.

    One row per (spectrum, task) pair the spectrum is a candidate for:
    {"path": absolute file path, "task", "id", "label": "YES"/"NO", "class": simulated class}.
    With `labels`, also writes them as a catalogue CSV `path,task,id,label` whose paths are
    relative to the CSV.
    """
    from agent.formats import write_lamost_fits

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, str]] = []
    for k, (sid, cls) in enumerate(plan(n_per_class, seed)):
        spec, _ = simulate(cls, (seed, k), snr=snr, spec_id=sid)
        path = write_lamost_fits(spec, out / f"{sid}.fits")
        for task, truth in CLASS_BY_NAME[cls].tasks.items():
            rows.append(
                {"path": str(path.resolve()), "task": task, "id": sid, "label": truth, "class": cls}
            )
    if labels is not None:
        write_labels(rows, labels)
    return rows


def write_labels(rows: list[dict[str, str]], csv_path: str | Path) -> Path:
    """The catalogue CSV `path,task,id,label`, paths relative to the CSV's folder."""
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    base = csv_path.resolve().parent
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "task", "id", "label"])
        for r in rows:
            w.writerow([os.path.relpath(r["path"], base), r["task"], r["id"], r["label"]])
    return csv_path
