"""`launch.py demo`: write the simulated demo spectra (and optionally their labels).

    python launch.py demo --out data/demo --labels data/demo/labels.csv

The spectra and their physics are `training.sim.demo`'s; this module holds the flags.
"""

from __future__ import annotations

import argparse
import time

from commands import UsageError
from training.sim.demo import CLASSES, generate_demo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="data/demo", help="folder for the simulated FITS files")
    parser.add_argument(
        "--n-per-class",
        type=int,
        default=4,
        help=f"spectra per simulated class ({len(CLASSES)} classes: targets and contaminants)",
    )
    parser.add_argument(
        "--snr",
        type=float,
        default=None,
        help="S/N per pixel near 6200 A for every spectrum (default: drawn between 8 and 60)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same spectra)")
    parser.add_argument(
        "--labels",
        default=None,
        metavar="FILE.csv",
        help="also write the truth as a catalogue CSV path,task,id,label (paths relative to it)",
    )


def main(args: argparse.Namespace) -> int:
    if args.n_per_class < 1:
        raise UsageError("--n-per-class must be at least 1")
    if args.snr is not None and not args.snr > 0:
        raise UsageError("--snr must be positive")
    t0 = time.perf_counter()
    rows = generate_demo(args.out, args.n_per_class, args.seed, snr=args.snr, labels=args.labels)
    n = len({r["id"] for r in rows})
    by_task: dict[str, list[int]] = {}
    for r in rows:
        yes_no = by_task.setdefault(r["task"], [0, 0])
        yes_no[0 if r["label"] == "YES" else 1] += 1
    summary = ", ".join(f"{t} {y} YES/{no} NO" for t, (y, no) in sorted(by_task.items()))
    print(f"wrote {n} simulated spectra to {args.out} in {time.perf_counter() - t0:.1f} s")
    print(f"candidates: {summary}")
    if args.labels:
        print(f"labels: {args.labels}")
    return 0
