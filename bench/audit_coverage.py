#!/usr/bin/env python
"""Do the audit's 95% intervals cover the truth? The app's own draw, queue, close and
estimates, repeated over seeds and audit shares on a labelled catalogue.

    python -m training.benchmark --split tune --out data/bench   # builds data/bench/tune
    python bench/audit_coverage.py --catalog data/bench/tune/catalog.csv --where snr=20

`--catalog` is a CSV with the columns path,row,task,id,label (`row` may be empty or absent;
a path is relative to the catalogue's folder; `label`, YES or NO, is the truth); `--where`
keeps the rows holding a column's value. The candidates are ingested into a scratch store
without their labels and vetted by the plain rules, once (kept in `--work` and reused
while the catalogue and `--where` are unchanged). Simulated
experts answer, with the true label, every item the app's queue serves while the team's
`auto_accept` (0.9) holds the confident verdicts out: the uncertain items, the same for
every seed, are answered once in the vetted store. Then for each seed and share, on a copy
of that store: the audit is drawn (`annotate.audit.sample.draw_for_store`), the experts
answer what the queue serves (`annotate.queue`: the sample) until it is empty, the campaign
is closed (`accept_confident`) and the figures estimated (`store_estimates`). Each interval
is compared with the true value over the whole catalogue: the precision of the YES list,
completeness among decided candidates, ECE over the audit's population (binned by the
draw's strata) and each stratum's error rate.

Printed: per task, figure and share, how often the interval covered the truth, its median
width and how often the figure was not estimated; last `audit_coverage_min: X`, the lowest
coverage. `--baseline FILE` also scores an earlier `annotate/audit/sample.py` (its
`estimate` over `Decided(task, p_yes, label, by_agent, inclusion)`) on the same draws.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent.refs import CandidateRef
from annotate import review
from annotate.audit.sample import (
    AUDIT_RATE_SETTING,
    CONFIDENT,
    accept_confident,
    draw_for_store,
    store_estimates,
)
from annotate.queue import Queue
from db.store import Store

FIGURES = ("precision", "completeness", "ECE", "band error")
EXPERT = "sim"


def read_catalog(path: Path, where: list[str] = ()) -> list[dict[str, Any]]:
    """The catalogue's rows (those whose columns hold the `where` COLUMN=VALUE pairs); a
    clear error for a missing column or a label not YES/NO."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for cond in where:
        col, eq, value = cond.partition("=")
        if not eq or (rows and col not in rows[0]):
            raise SystemExit(f"audit_coverage: --where {cond!r}: COLUMN=VALUE of {path}'s columns")
        rows = [r for r in rows if r[col] == value]
    need = {"path", "task", "id", "label"}
    if not rows or not need <= set(rows[0]):
        raise SystemExit(f"audit_coverage: {path} needs the columns path,row,task,id,label")
    for k, r in enumerate(rows, start=2):
        if r["label"] not in ("YES", "NO"):
            raise SystemExit(f"audit_coverage: {path} line {k}: label {r['label']!r} is not YES/NO")
        r["path"] = str((path.parent / r["path"]).resolve())
        r["row"] = int(r["row"]) if (r.get("row") or "").strip() else None
    return rows


def vetted_store(rows: list[dict[str, Any]], truth: dict[tuple[str, str], str], db: Path,
                 workers: int) -> None:  # fmt: skip
    """Ingest and vet the catalogue by the plain rules into `db`, then answer every item
    the queue serves before any draw (the uncertain ones): what no seed changes."""
    from annotate.intake.ingest import ingest_refs
    from annotate.vetting.into_store import vet_into_store

    part = db.with_suffix(".partial")
    part.unlink(missing_ok=True)
    store = Store(f"sqlite:///{part}")
    refs = [CandidateRef(r["id"], r["task"], r["path"], row=r["row"]) for r in rows]
    _, problems, _ = ingest_refs(store, refs)
    if problems:
        raise SystemExit(f"audit_coverage: ingest: {problems[:3]}")
    vet_into_store(store, policy="rules", model="none", workers=workers, actor="bench")
    store.set_setting("auto_accept", CONFIDENT, actor="bench")
    answer_queue(store, truth)
    store.close()
    part.rename(db)


def answer_queue(store: Store, truth: dict[tuple[str, str], str]) -> int:
    """The simulated expert answers, with the true label, whatever the queue serves."""
    store.ensure_expert(EXPERT)
    q = Queue.from_settings(store)
    n = 0
    while (cid := q.next_id(EXPERT)) is not None:
        info = store.candidate(cid)
        said = truth[(info.key, info.task)] == info.verdict
        review.decide(store, EXPERT, cid, "accept" if said else "reject")
        n += 1
    return n


def true_figures(store: Store, truth: dict[tuple[str, str], str]) -> dict[str, dict[str, Any]]:
    """Per task, the true value of each figure over the whole catalogue."""
    out: dict[str, dict[str, Any]] = {}
    strata: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for r in store.audit_population():
        t = out.setdefault(r.task, {"listed": 0, "listed_yes": 0, "decided_yes": 0})
        yes = truth[(key_of[r.id], r.task)] == "YES"
        if r.label == "YES":
            t["listed"] += 1
            t["listed_yes"] += yes
        if r.label in ("YES", "NO"):
            t["decided_yes"] += yes
        if r.audit_stratum:
            strata.setdefault((r.task, r.audit_stratum), []).append((r.confidence, yes))
    for task, t in out.items():
        t["precision"] = t["listed_yes"] / t["listed"] if t["listed"] else None
        t["completeness"] = t["listed_yes"] / t["decided_yes"] if t["decided_yes"] else None
        mine = {st: v for (tk, st), v in strata.items() if tk == task}
        n = sum(len(v) for v in mine.values())
        gap = sum(abs(sum(y for _, y in v) - sum(p for p, _ in v)) for v in mine.values())
        t["ECE"] = gap / n if n else None
        t["band error"] = {
            st: sum(y != st.partition(":")[2].startswith("YES") for _, y in v) / len(v)
            for st, v in mine.items()
        }
    return out


key_of: dict[int, str] = {}


def judge(est: Any, true: float | None) -> tuple[bool | None, float | None, bool]:
    """(covered, width, not estimated) of one figure against its true value."""
    if true is None or est is None or est.low is None or est.high is None:
        return None, None, est is not None and est.value is None
    return est.low - 1e-9 <= true <= est.high + 1e-9, est.high - est.low, est.value is None


def load_baseline(path: str | None):
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("baseline_audit", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["baseline_audit"] = mod
    spec.loader.exec_module(mod)
    return mod


def one_run(base: Path, work: Path, share: float, seed: int, truth, baseline) -> list[tuple]:
    """One campaign: copy, draw, answer the queue, close, estimate, judge. Rows of
    (estimator, task, figure, covered, width, not estimated)."""
    db = work / "run.db"
    shutil.copyfile(base, db)
    store = Store(f"sqlite:///{db}", create=False)
    try:
        store.set_setting(AUDIT_RATE_SETTING, share, actor="bench")
        draw_for_store(store, seed=seed, actor="bench")
        answer_queue(store, truth)
        accept_confident(store, actor="bench")
        est = store_estimates(store)
        true = true_figures(store, truth)
        old = None
        if baseline is not None:
            items = [baseline.Decided(r.task, r.confidence, r.label, r.label_source == "auto",
                                      r.audit_inclusion) for r in store.audit_population()]  # fmt: skip
            old = baseline.estimate(items, reps=200, seed=seed)
    finally:
        store.close()
    out = []
    for task, t in sorted(true.items()):
        for name, got in (("new", est), ("baseline", old)):
            if got is None or task not in got:
                continue
            e = got[task]
            out.append((name, task, "precision", *judge(e.precision, t["precision"])))
            out.append((name, task, "completeness", *judge(e.completeness, t["completeness"])))
            out.append((name, task, "ECE", *judge(e.ece, t["ECE"])))
            if name == "new":
                for st, err in t["band error"].items():
                    out.append((name, task, "band error", *judge(e.band_errors.get(st), err)))
    return out


def print_table(results: dict[tuple, list[tuple]]) -> float:
    """Coverage, median width and how often not estimated, per estimator, task, figure and
    share; returns the lowest coverage of the app's estimator."""
    print(f"\n{'estimator':9s} {'task':8s} {'figure':12s} {'share':>5s} {'runs':>5s} "
          f"{'covered':>8s} {'median width':>12s} {'not est.':>8s}")  # fmt: skip
    lowest = 1.0
    for (name, task, fig, share), v in sorted(results.items()):
        judged = [(c, w) for c, w, _ in v if c is not None]
        missing = sum(m for _, _, m in v)
        if not judged:
            print(f"{name:9s} {task:8s} {fig:12s} {share:5g} {len(v):5d} {'-':>8s} {'-':>12s} "
                  f"{missing:8d}")  # fmt: skip
            continue
        cover = float(np.mean([c for c, _ in judged]))
        width = float(np.median([w for _, w in judged]))
        if name == "new":
            lowest = min(lowest, cover)
        print(f"{name:9s} {task:8s} {fig:12s} {share:5g} {len(judged):5d} {cover:8.3f} "
              f"{width:12.3f} {missing:8d}")  # fmt: skip
    return lowest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--catalog", required=True, help="CSV: path,row,task,id,label (the truth)")
    ap.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                    help="only the rows holding this value (e.g. snr=20 of the benchmark's "
                    "catalog.csv); may be repeated")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--shares", default="0.05,0.1,0.2", help="audit shares, comma-separated")
    ap.add_argument("--workers", type=int, default=2, help="vetting processes")
    ap.add_argument("--work", default=None, help="scratch folder (keeps the vetted store)")
    ap.add_argument("--baseline", default=None, help="an earlier audit_sample.py to score too")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        shares = [float(s) for s in args.shares.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(
            f"audit_coverage: --shares {args.shares!r}: numbers, comma-separated"
        ) from None
    if not shares or any(not 0 < s <= 1 for s in shares):
        raise SystemExit(f"audit_coverage: --shares {args.shares!r}: each in (0, 1]")
    catalog = Path(args.catalog)
    rows = read_catalog(catalog, args.where)
    truth = {(r["id"], r["task"]): r["label"] for r in rows}
    tmp = tempfile.TemporaryDirectory(prefix="loupe-coverage-") if args.work is None else None
    work = Path(tmp.name if tmp else args.work)
    work.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(catalog.read_bytes() + repr(args.where).encode()).hexdigest()[:12]
    base = work / f"vetted-{digest}.db"
    t0 = time.perf_counter()
    if not base.exists():
        vetted_store(rows, truth, base, args.workers)
    store = Store(f"sqlite:///{base}", create=False)
    key_of.update({r.id: store.candidate(r.id).key for r in store.audit_population()})
    pop = store.audit_population()
    reviewed = sum(r.label is not None for r in pop)
    store.close()
    by_task: dict[str, list[int]] = {}
    for r in rows:
        by_task.setdefault(r["task"], [0, 0])[0] += 1
        by_task[r["task"]][1] += r["label"] == "YES"
    print(f"catalogue: {len(rows)} candidates ("
          + ", ".join(f"{t} {n} ({y} YES)" for t, (n, y) in sorted(by_task.items()))
          + f"); vetted, {reviewed} uncertain items answered from the queue, "
          f"in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    baseline = load_baseline(args.baseline)
    results: dict[tuple[str, str, str, float], list[tuple]] = {}
    t0 = time.perf_counter()
    for share in shares:
        for seed in range(args.seeds):
            for name, task, fig, cov, width, missing in one_run(base, work, share, seed, truth,
                                                                baseline):  # fmt: skip
                results.setdefault((name, task, fig, share), []).append((cov, width, missing))
        print(f"share {share:g}: {args.seeds} seeds done ({time.perf_counter() - t0:.0f} s)",
              flush=True)  # fmt: skip
        if share != shares[-1]:  # what is known so far, should the run be cut short
            print_table({k: v for k, v in results.items() if k[3] == share})
            print(flush=True)
    lowest = print_table(results)
    if tmp:
        tmp.cleanup()
    print(f"audit_coverage_min: {lowest:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
