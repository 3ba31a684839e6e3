"""`launch.py degrade`: turn library spectra into survey-like LAMOST files plus a catalogue.

    python launch.py degrade --input lib/*.fits --task m_giant --label YES --snr 20 --out survey/
    python launch.py degrade --catalog labelled.csv --snr 10 --snr 20 --realisations 3 --out survey/

What is done to each spectrum is `training.degrade`'s; this module holds the flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from commands import UsageError, flags
from training.degrade import degrade_candidates


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="*", default=[], help="Spectrum files, globs or folders.")
    parser.add_argument(
        "--catalog", help="A labelled catalogue CSV (path,task[,id,hdu,row,label])."
    )
    parser.add_argument(
        "--task", help="Task for --input spectra (cv, carbon, s_type, m_giant, wd)."
    )
    parser.add_argument("--label", choices=["YES", "NO"], help="Label for --input spectra.")
    parser.add_argument(
        "--snr", type=flags.positive, action="append", help="Target SNR (repeatable)."
    )
    parser.add_argument(
        "--realisations", type=flags.at_least(1), default=1, help="Noisy copies per SNR."
    )
    parser.add_argument(
        "--rv-max", type=float, default=300.0, help="|RV| drawn uniformly up to this (km/s)."
    )
    parser.add_argument(
        "--resolution", type=flags.positive, default=1800.0, help="Target resolving power."
    )
    parser.add_argument(
        "--source-resolution",
        type=float,
        default=None,
        help="Resolving power of the input, if known.",
    )
    parser.add_argument(
        "--flux-cal-error", type=float, default=0.1, help="RMS fractional flux-calibration error."
    )
    parser.add_argument("--seed", type=int, default=0, help="Random seed.")
    parser.add_argument("--out", required=True, help="Output folder (FITS files + catalog.csv).")


def main(args: argparse.Namespace) -> int:
    from agent.candidates import read_candidates

    cands = []
    if args.catalog:
        cands += read_candidates(args.catalog)
    if args.input:
        if not args.task:
            raise UsageError("--input needs --task")
        cands += read_candidates(args.input, task=args.task)
    if not cands:
        raise UsageError("nothing to degrade (give --input or --catalog)")
    rows, skipped = degrade_candidates(
        cands,
        args.out,
        snrs=args.snr,
        realisations=args.realisations,
        rv_max=args.rv_max,
        resolution=args.resolution,
        source_resolution=args.source_resolution,
        flux_cal_error=args.flux_cal_error,
        seed=args.seed,
        label=args.label,
    )
    for path, exc in skipped:
        print(f"degrade: skipping {path}: {exc}")
    out = Path(args.out)
    print(
        f"degrade: wrote {len(rows)} spectra and {out / 'catalog.csv'} ({len(skipped)} inputs skipped)"
    )
    return 0 if rows else 1
