"""python -m training.benchmark: build the benchmark, refit calibration, write the report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from training import benchmark
from training.benchmark.report import write_report
from training.benchmark.sources import DEFAULT_SPECTRA, build, freeze_splits, load_sources
from training.benchmark.tuning import fit_calibration


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m training.benchmark",
        description=(benchmark.__doc__ or "").strip().splitlines()[0],
    )
    ap.add_argument("--spectra", default=str(DEFAULT_SPECTRA), help="Folder holding manifest.csv.")
    ap.add_argument("--out", default="data/bench", help="Where the benchmark is written.")
    ap.add_argument(
        "--realisations", type=int, default=1, help="Noisy copies per source, layout and SNR."
    )
    ap.add_argument(
        "--workers", type=int, default=min(2, os.cpu_count() or 1), help="Build processes."
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-build", action="store_true", help="Reuse an existing --out.")
    ap.add_argument(
        "--split",
        choices=("tune", "test"),
        help="Build only this split (set rules on tune before the test split is built).",
    )
    ap.add_argument("--fit-calibration", action="store_true", help="Print refitted CALIBRATION.")
    ap.add_argument(
        "--report", help="Evaluate `rules` on both splits and write this markdown file."
    )
    ap.add_argument("--policy", default="rules", help="Policy for the report (default: rules).")
    ap.add_argument("--bootstrap", type=int, default=1000, help="Bootstrap resamples for CIs.")
    ap.add_argument("--no-demo", action="store_true", help="Leave the demo's numbers out.")
    ap.add_argument(
        "--reuse-results", action="store_true", help="Resume from results already in OUT/eval-*."
    )
    ap.add_argument(
        "--freeze-splits",
        action="store_true",
        help="Write the split of each library object that training/benchmark/splits.csv "
        "does not hold yet into it (rows already there never change), then stop.",
    )
    args = ap.parse_args(argv)
    if args.freeze_splits:
        added = freeze_splits(load_sources(Path(args.spectra)))
        print(f"benchmark: froze the split of {len(added)} new object(s) {' '.join(added)}")
        return 0
    out = Path(args.out)
    if not args.skip_build:
        paths = build(
            out,
            Path(args.spectra),
            realisations=args.realisations,
            seed=args.seed,
            workers=args.workers,
            splits=(args.split,) if args.split else ("tune", "test"),
        )
        for sp, p in paths.items():
            print(f"benchmark: {sp}: {p}")
    if args.fit_calibration:
        cal = fit_calibration(out / "tune" / "catalog.csv")
        print("CALIBRATION = {")
        for t, (a, b) in cal.items():
            print(f'    "{t}": ({a:.3f}, {b:.3f}),')
        print("}")
    if args.report:
        write_report(
            out,
            Path(args.report),
            policy=args.policy,
            command="python -m training.benchmark --out data/bench --report docs/accuracy.md",
            n_boot=args.bootstrap,
            demo=not args.no_demo,
            fresh=not args.reuse_results,
        )
        print(f"benchmark: wrote {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
