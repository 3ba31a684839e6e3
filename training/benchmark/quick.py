"""Scoring a built split from the inspector's own reading of each file, without the runner.

    python -m training.benchmark.quick --bench data/bench --split tune

reads each survey file of the split once, keeps its measurements (`measure_all`) and the
pixel coverage the zoom plan needs in `BENCH/quick-SPLIT.pkl`, and scores every row of the
catalogue with `inspect`, the function the rules policy plays. While rules that read the
measurements are being set, a rerun takes seconds; `--remeasure` reads the files again
after a change to what is measured. It prints the figures the accuracy report's first
section holds: macro-F1 with its object-bootstrap interval, per layout and SNR, per task,
the base-rate precision and the false-positive rate on each ordinary class.

The conversation itself (narration and its contradictions) is not played here:
`--contradictions` plays it through `agent.loop.run_batch` for every row (minutes).
"""

from __future__ import annotations

import argparse
import csv
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from agent.tasks import TASKS

# What `inspect` reads of a spectrum besides its measurements: which pixels are good, as
# (rest-frame wavelength in float32, good-pixel mask); plain arrays so the cache unpickles
# whichever module wrote it.
Lite = tuple[np.ndarray, np.ndarray]


def _lite_spectrum(lite: Lite):
    from agent.spectrum import Spectrum

    wave, good = lite
    return Spectrum(wave.astype(np.float64), np.where(good, 1.0, np.nan))


def _read(path: str) -> tuple[Lite, dict]:
    from agent.formats import load_one
    from agent.measure import arrays_of
    from agent.policies.rules import measure_all

    spec = load_one(path)
    arr = arrays_of(spec)
    return (arr.wave.astype(np.float32), np.asarray(arr.good, bool)), measure_all(spec)


def measured(bench: Path, split: str, remeasure: bool = False, workers: int = 1) -> dict:
    """path -> (Lite, Measurements) for every file of the split, cached beside it."""
    cache = bench / f"quick-{split}.pkl"
    if cache.exists() and not remeasure:
        with open(cache, "rb") as fh:
            return pickle.load(fh)
    with open(bench / split / "catalog.csv", newline="") as fh:
        paths = sorted({r["path"] for r in csv.DictReader(fh)})
    full = [str(bench / split / p) for p in paths]
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as ex:
            got = list(ex.map(_read, full, chunksize=16))
    else:
        got = [_read(p) for p in full]
    out = dict(zip(paths, got))
    with open(cache, "wb") as fh:
        pickle.dump(out, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return out


def readings(bench: Path, split: str, remeasure: bool = False, workers: int = 1) -> list[dict]:
    """Each catalogue row with the inspector's P(YES) and evidence notes for its task."""
    from agent.policies.rules import inspect
    from agent.policies.rules.policy import task_module

    for name, t in TASKS.items():  # the rules as they are now, not as edited while measuring
        if t.inspector:
            task_module(name)
    files = measured(bench, split, remeasure, workers)
    with open(bench / split / "catalog.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # A Measurements object keeps its unreliable readings and redshift: evidence may use
    # them, and inspect must not re-estimate the redshift from the stand-in spectrum.
    spectra = {}
    out = []
    for r in rows:
        lite, m = files[r["path"]]
        spec = spectra.get(r["path"]) or spectra.setdefault(r["path"], _lite_spectrum(lite))
        v = inspect(spec, r["task"], m)
        out.append({**r, "p_yes": v.p_yes, "x": v.x, "notes": v.evidence.notes})
    return out


def as_report_rows(rows: list[dict]):
    """The rows as `training.benchmark.report.Row`s, for its tables and statistics."""
    from training.benchmark.report import Row
    from training.evaluate import Scored

    return [
        Row(
            Scored(r["task"], r["label"] == "YES", r["p_yes"] > 0.5, r["p_yes"]),
            r["layout"],
            str(r["snr"]),
            r["object"],
            r["class"],
            r.get("ordinary", ""),
        )
        for r in rows
    ]


def summary(rows: list[dict], n_boot: int = 200) -> str:
    """The figures of the accuracy report's first section, as text."""
    from training.benchmark.report import (
        base_rate_table,
        confident_errors,
        confusers,
        ordinary_table,
        summarise,
        survey_stats,
    )
    from training.evaluate import ece, per_task_f1

    rr = as_report_rows(rows)
    s = summarise(rr, n_boot)
    lines = [
        f"macro-F1 {s['macro_f1']:.3f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}]  "
        f"ECE {s['ece']:.3f}  10% to experts {s['hitl10']:.3f}",
        "wrong at P(YES) < 0.05 or > 0.95: {} of {}".format(*confident_errors(rr)),
    ]
    for attr in ("layout", "snr"):
        groups = defaultdict(list)
        for r in rr:
            groups[getattr(r, attr)].append(r)
        parts = []
        for k in sorted(groups, key=lambda v: float(v) if attr == "snr" else v):
            g = summarise(groups[k], n_boot)
            parts.append(f"{k}: {g['macro_f1']:.3f} [{g['ci'][0]:.2f}, {g['ci'][1]:.2f}]")
        lines.append(f"per {attr}: " + ", ".join(parts))
    eces = []
    for k in sorted({r.snr for r in rr}, key=float):
        g = [r.scored for r in rr if r.snr == k]
        eces.append(f"{k}: {ece([x.p_yes for x in g], [x.label for x in g]):.3f}")
    lines.append("ECE per snr: " + ", ".join(eces))
    f1 = per_task_f1([r.scored for r in rr])
    lines.append("per task F1: " + ", ".join(f"{t} {f1[t]:.3f}" for t in TASKS if t in f1))
    lines += ["", base_rate_table(survey_stats(rr)), "", ordinary_table(rr), "", confusers(rr)]
    return "\n".join(lines)


def confident_error_lines(rows: list[dict], lo: float = 0.05, hi: float = 0.95) -> list[str]:
    """One line per wrong answer given at P(YES) < lo or > hi, with the evidence it read:
    the errors never handed to an expert, grouped by task and class to find their causes."""
    from training.benchmark.report import confidently_wrong

    bad = [r for r in rows if confidently_wrong(r["p_yes"], r["label"] == "YES", lo, hi)]
    bad.sort(key=lambda r: (r["task"], r["class"], r["object"], r["layout"], float(r["snr"])))
    return [
        f"{r['task']} {r['label']} {r['class']} {r['object']} {r['layout']} snr{r['snr']} "
        f"p={r['p_yes']:.3f}: " + " | ".join(r["notes"])
        for r in bad
    ]


def contradictions(bench: Path, split: str) -> tuple[int, int, list[str]]:
    """Play every row's conversation; (contradicting trajectories, all, the first few)."""
    from agent.formats import load_one
    from agent.loop import run_batch
    from agent.policies.rules import RulesPolicy
    from agent.policies.rules.contradiction import found

    with open(bench / split / "catalog.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_path: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_path[r["path"]].append(r["task"])
    policy = RulesPolicy()
    n = bad = 0
    seen: list[str] = []
    for p, tasks in by_path.items():
        spec = load_one(bench / split / p)
        for t in run_batch([(spec, task) for task in tasks], policy):
            text = " ".join(s.thought or "" for s in t.steps) + " " + (t.explanation or "")
            n += 1
            hits = found(t.task, t.confidence, text)
            if hits:
                bad += 1
                seen.append(f"{p} {t.task} p={t.confidence}: {hits}")
    return bad, n, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.benchmark.quick", description=__doc__)
    ap.add_argument("--bench", default="data/bench")
    ap.add_argument("--split", choices=("tune", "test"), default="tune")
    ap.add_argument("--remeasure", action="store_true", help="Read the files again.")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--contradictions", action="store_true", help="Also play the narration.")
    ap.add_argument(
        "--errors",
        action="store_true",
        help="Also list each wrong answer at P(YES) < 0.05 or > 0.95 with its evidence notes.",
    )
    args = ap.parse_args(argv)
    bench = Path(args.bench)
    rows = readings(bench, args.split, args.remeasure, args.workers)
    print(summary(rows, args.bootstrap))
    if args.errors:
        lines = confident_error_lines(rows)
        print(f"\nconfident errors: {len(lines)}")
        for line in lines:
            print("  " + line)
    if args.contradictions:
        bad, n, seen = contradictions(bench, args.split)
        print(f"\ncontradicting trajectories: {bad} of {n}")
        for s in seen[:20]:
            print("  " + s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
