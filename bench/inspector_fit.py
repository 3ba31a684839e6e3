"""Macro-F1 of the inspector before and after `calibrate`, on the survey benchmark.

    python bench/inspector_fit.py [--bench data/bench] [--min-labels 50]

Fits the inspector model (`annotate.learning.fit.fit`, as `launch.py calibrate` does from the
store) on the benchmark's labelled `tune` split, built from ../shared/spectra as
`training.benchmark` builds it (a small build is made if `--bench` holds none; the
measurements are read once and cached as `bench/learning_curve.py` caches them), and
prints per task and overall: the weight and the out-of-fold before/after on tune, then the
held-out before/after on `test`. The last line is `macro_f1_test_after_calibrate: VALUE`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from annotate.learning.fit import Example, cv_table, fit
from bench.learning_curve import examples, predictions
from training import benchmark


def macro_f1(ex: list[Example], probs: list[float]) -> tuple[float, dict[str, float]]:
    per = {}
    for t in sorted({e.task for e in ex}):
        idx = [i for i, e in enumerate(ex) if e.task == t]
        y = np.array([ex[i].label for i in idx])
        pred = np.array([probs[i] > 0.5 for i in idx])
        tp = np.sum(pred & y)
        den = 2 * tp + np.sum(pred & ~y) + np.sum(~pred & y)
        per[t] = float(2 * tp / den) if den else 0.0
    return float(np.mean(list(per.values()))), per


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--bench", default="data/bench", help="A built benchmark (tune/, test/).")
    ap.add_argument("--min-labels", type=int, default=50)
    args = ap.parse_args(argv)
    bench = Path(args.bench)
    if not (bench / "tune" / "catalog.csv").exists():
        print(f"building a small benchmark in {bench} ...", file=sys.stderr)
        benchmark.build(bench, snrs=(8.0, 20.0), max_objects=6, workers=2)
    tune = examples(bench, "tune")
    test = examples(bench, "test")
    model = fit(tune, version=0, min_labels=args.min_labels)
    print("on tune, out of fold (log-loss / F1 at 0.5), and the weight on the learned model:")
    print(cv_table(model))

    def after(ex: list[Example]) -> list[float]:
        return list(predictions(model, ex))

    for name, ex in (("tune (fitted on)", tune), ("test (held out)", test)):
        b, bt = macro_f1(ex, [e.p_rules for e in ex])
        a, at = macro_f1(ex, after(ex))
        tasks = ", ".join(f"{t} {bt[t]:.2f}->{at[t]:.2f}" for t in bt)
        print(f"{name}: macro-F1 {b:.3f} -> {a:.3f} ({tasks})")
    a, _ = macro_f1(test, after(test))
    print(f"macro_f1_test_after_calibrate: {a:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
