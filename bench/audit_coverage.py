#!/usr/bin/env python
"""Do the audit's 95% intervals cover the truth? The app's own draw, queue, close and
estimates, repeated over seeds and audit shares on a labelled catalogue, with a calibrated
agent and a miscalibrated one, each figure by both estimators side by side.

    python -m training.benchmark --split tune --out data/bench   # builds data/bench/tune
    python bench/audit_coverage.py --catalog data/bench/tune/catalog.csv --where snr=20

`--catalog` is a CSV with the columns path,row,task,id,label (`row` may be empty or absent;
a path is relative to the catalogue's folder; `label`, YES or NO, is the truth); `--where`
keeps the rows holding a column's value. The candidates are ingested into a scratch store
without their labels and vetted by the plain rules, once (kept in `--work` and reused
while the catalogue and `--where` are unchanged). Two agents start from that store: the
rules as they are (calibrated on the benchmark's tune split), and the same with the odds
of P(YES) on the NO list multiplied by `--miscalibrate` (0.1: a verdict at P(YES) 0.3 reads
0.04, so misses the rules were unsure of become confident NO verdicts whose P(YES) promises
fewer misses than there are). For each agent, simulated experts answer, with the true
label, every item the app's queue serves while the team's `auto_accept` (0.9) holds the
confident verdicts out: the uncertain items, the same for every seed, answered once. Then
for each seed and share, on a copy of that store: the audit is drawn
(`annotate.audit.sample.draw_for_store`), the experts answer what the queue serves
(`annotate.queue`: the sample) until it is empty, the campaign is closed
(`accept_confident`) and the figures estimated (`store_estimates`), each by both
estimators (`TaskEstimates.by_estimator`: exact per stratum, and model-assisted). Each
interval is compared with the true value over the whole catalogue: the precision of the
YES list, completeness among decided candidates, ECE over the audit's population (binned by
the draw's strata) and each stratum's error rate (exact only).

Printed: per agent, task, figure and share, each estimator's coverage (how often its
interval covered the truth), median width and how often it was not estimated, side by
side, `*` marking the one the app quotes (`annotate.audit.estimate.FIGURE_ESTIMATOR`);
then the goals of docs/audit.md against the quoted estimators' worst case; last
`audit_coverage_min: X`, the lowest coverage of a quoted figure. `--baseline FILE` also
scores an earlier `annotate/audit/sample.py` (its `estimate` over `Decided(task, p_yes,
label, by_agent, inclusion)`) on the same draws.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.refs import CandidateRef
from annotate import review
from annotate.audit.estimate import ASSISTED, EXACT, FIGURE_ESTIMATOR
from annotate.audit.sample import (
    AUDIT_RATE_SETTING,
    CONFIDENT,
    Decided,
    accept_confident,
    draw_for_store,
    estimate,
    plan_draw,
    store_estimates,
)
from annotate.queue import Queue
from db.store import Store

FIGURES = ("precision", "completeness", "ECE", "band error")
EXPERT = "sim"
MISCALIBRATE = 0.1  # the miscalibrated agent: odds of P(YES) on its NO list x this


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


def vetted_store(rows: list[dict[str, Any]], db: Path, workers: int) -> None:
    """Ingest the catalogue and vet it by the plain rules into `db`, once."""
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
    store.close()
    part.rename(db)


def shrink(p: float, odds: float) -> float:
    """P(YES) of a NO verdict with its odds multiplied by `odds` (< 1: toward 0).

    >>> round(shrink(0.3, 0.1), 4), shrink(0.8, 0.1), shrink(0.0, 0.1)
    (0.0411, 0.8, 0.0)
    """
    if p > 0.5 or p <= 0.0:
        return p
    o = odds * p / (1.0 - p)
    return o / (1.0 + o)


def agent_store(vetted: Path, db: Path, truth: dict[tuple[str, str], str], odds: float) -> None:
    """The campaign's start for one agent, from the vetted store: with `odds` < 1 the
    agent's P(YES) on its NO list shrunk toward 0 (a miscalibrated agent, sure of NO verdicts
    it has no reason to be sure of: some of its uncertain misses become confident NO);
    then the team's `auto_accept` (0.9) and the simulated expert's answers to every item the
    queue serves before any draw (the uncertain ones): what no seed changes."""
    part = db.with_suffix(".partial")
    shutil.copyfile(vetted, part)
    store = Store(f"sqlite:///{part}", create=False)
    if odds != 1.0:
        rows = [r for r in store.audit_population() if r.confidence is not None]
        store.adopt_scores([r.id for r in rows], [shrink(r.confidence, odds) for r in rows], 0,
                           actor="bench")  # fmt: skip
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


@dataclass(frozen=True)
class Record:
    """One candidate at the end of a campaign, with its truth."""

    id: int
    task: str
    p: float | None
    label: str | None
    by_agent: bool
    inclusion: float | None
    stratum: str | None
    yes: bool  # truly YES

    def decided(self) -> Decided:
        return Decided(self.task, self.p, self.label, self.by_agent, self.inclusion, self.stratum)


def records(store: Store, truth: dict[tuple[str, str], str]) -> list[Record]:
    """The store's candidates as records: what the estimates read, and the truth."""
    return [
        Record(r.id, r.task, r.confidence, r.label, r.label_source == "auto", r.audit_inclusion,
               r.audit_stratum, truth[(key_of[r.id], r.task)] == "YES")
        for r in store.audit_population()
    ]  # fmt: skip


def true_figures(recs: list[Record]) -> dict[str, dict[str, Any]]:
    """Per task, the true value of each figure over the whole catalogue."""
    out: dict[str, dict[str, Any]] = {}
    strata: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for r in recs:
        t = out.setdefault(r.task, {"listed": 0, "listed_yes": 0, "decided_yes": 0})
        if r.label == "YES":
            t["listed"] += 1
            t["listed_yes"] += r.yes
        if r.label in ("YES", "NO"):
            t["decided_yes"] += r.yes
        if r.stratum:
            strata.setdefault((r.task, r.stratum), []).append((r.p, r.yes))
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


def store_run(base: Path, work: Path, share: float, seed: int, truth) -> tuple[list[Record], Any]:
    """One campaign in the app's store: copy, draw, answer the queue, close; the records
    and the app's estimates (aggregated in the database)."""
    db = work / "run.db"
    for left in ("-wal", "-shm", "-journal"):  # a run cut short leaves these beside it
        Path(f"{db}{left}").unlink(missing_ok=True)
    shutil.copyfile(base, db)
    store = Store(f"sqlite:///{db}", create=False)
    try:
        store.set_setting(AUDIT_RATE_SETTING, share, actor="bench")
        draw_for_store(store, seed=seed, actor="bench")
        answer_queue(store, truth)
        accept_confident(store, actor="bench")
        return records(store, truth), store_estimates(store)
    finally:
        store.close()


@dataclass(frozen=True)
class BaseRow:
    """A candidate of an agent's vetted store before the draw (`replay` reads these)."""

    id: int
    task: str
    confidence: float | None
    verdict: str | None
    label: str | None
    label_source: str | None
    audit_inclusion: float | None
    audit_stratum: str | None
    is_gold: bool
    yes: bool


def base_rows(base: Path, truth: dict[tuple[str, str], str]) -> list[BaseRow]:
    store = Store(f"sqlite:///{base}", create=False)
    try:
        verdicts = {c.id: c.verdict for c in store.list_candidates(limit=10_000_000)}
        return [
            BaseRow(r.id, r.task, r.confidence, verdicts[r.id], r.label, r.label_source,
                    r.audit_inclusion, r.audit_stratum, r.is_gold,
                    truth[(key_of[r.id], r.task)] == "YES")
            for r in store.audit_population()
        ]  # fmt: skip
    finally:
        store.close()


def replay(rows: list[BaseRow], share: float, seed: int) -> tuple[list[Record], Any]:
    """The same campaign without the store: the draw `draw_for_store` records
    (`plan_draw`, same seed, same candidates in the same order), every drawn item answered
    with its truth (the queue serves the whole sample before it runs dry), the close's rule
    (`Store.auto_accept` at the team's 0.9: an unreviewed verdict its P(YES) agrees with)
    and the estimates from the same per-stratum counts, summed in Python."""
    draws, strata = plan_draw(rows, share, seed=seed)
    drawn = {d.id: d.inclusion for d in draws}
    out = []
    for r in rows:
        label, by_agent = r.label, r.label_source == "auto"
        p = r.confidence
        if label is None and r.id in drawn:
            label, by_agent = ("YES" if r.yes else "NO"), False
        elif label is None and not r.is_gold and p is not None and r.verdict is not None:
            if (r.verdict == "YES" and p >= CONFIDENT) or (
                r.verdict == "NO" and p <= 1 - CONFIDENT
            ):
                label, by_agent = r.verdict, True
        out.append(Record(r.id, r.task, p, label, by_agent, drawn.get(r.id, r.audit_inclusion),
                          strata.get(r.id, r.audit_stratum), r.yes))  # fmt: skip
    return out, estimate([x.decided() for x in out])


def judged(recs: list[Record], est: dict[str, Any], baseline=None, seed: int = 0) -> list[tuple]:
    """Rows of (estimator, task, figure, covered, width, not estimated): each figure by
    each estimator, each stratum's error rate by the exact one."""
    true = true_figures(recs)
    old = None
    if baseline is not None:
        items = [baseline.Decided(r.task, r.p, r.label, r.by_agent, r.inclusion) for r in recs]
        old = baseline.estimate(items, reps=200, seed=seed)
    out = []
    for task, t in sorted(true.items()):
        if task in est:
            e = est[task]
            for fig in ("precision", "completeness", "ECE"):
                for name, got in e.by_estimator(fig).items():
                    out.append((name, task, fig, *judge(got, t[fig])))
            for st, err in t["band error"].items():
                out.append((EXACT, task, "band error", *judge(e.band_errors.get(st), err)))
        if old is not None and task in old:
            e = old[task]
            out.append(("baseline", task, "precision", *judge(e.precision, t["precision"])))
            out.append(("baseline", task, "completeness",
                        *judge(e.completeness, t["completeness"])))  # fmt: skip
            out.append(("baseline", task, "ECE", *judge(e.ece, t["ECE"])))
    return out


Key = tuple[str, str, str, str, float]  # agent, estimator, task, figure, share


def summarise(v: list[tuple]) -> tuple[int, float | None, float | None, int]:
    """(runs judged, coverage, median width, not estimated) of one cell's runs."""
    judged = [(c, w) for c, w, _ in v if c is not None]
    missing = sum(m for _, _, m in v)
    if not judged:
        return 0, None, None, missing
    return (len(judged), float(np.mean([c for c, _ in judged])),
            float(np.median([w for _, w in judged])), missing)  # fmt: skip


def print_table(results: dict[Key, list[tuple]]) -> float:
    """Per agent, task, figure and share, each estimator side by side: how often its
    interval covered the truth, its median width and how often the figure was not
    estimated; `*` marks the estimator the app quotes. Returns the lowest coverage of
    the quoted estimators."""
    names = sorted({k[1] for k in results}, key=lambda n: (n != EXACT, n != ASSISTED, n))
    cells = sorted({(a, t, f, s) for a, _, t, f, s in results})
    head = " | ".join(f"{n[:14]:>14s} cover  width  n/e" for n in names)
    print(f"\n{'agent':13s} {'task':8s} {'figure':12s} {'share':>5s} {'runs':>4s} | {head}")
    lowest = 1.0
    for agent, task, fig, share in cells:
        runs, row = 0, []
        for name in names:
            v = results.get((agent, name, task, fig, share))
            if v is None:
                row.append(f"{'':>14s} {'':5s} {'':6s} {'':4s}")
                continue
            runs, cover, width, missing = summarise(v)
            quoted = name == (EXACT if fig == "band error" else FIGURE_ESTIMATOR.get(fig))
            if cover is None:
                row.append(f"{'*' if quoted else '':>14s} {'-':>5s} {'-':>6s} {missing:4d}")
                continue
            if quoted:
                lowest = min(lowest, cover)
            row.append(f"{'*' if quoted else '':>14s} {cover:5.3f} {width:6.3f} {missing:4d}")
        print(f"{agent:13s} {task:8s} {fig:12s} {share:5g} {runs:4d} | " + " | ".join(row))
    return lowest


def print_goals(results: dict[Key, list[tuple]], positives: dict[str, int]) -> None:
    """The quoted estimators' figures against the goals of docs/audit.md: coverage at least
    0.93 everywhere; at a 20% share, completeness at most 0.30 wide for a task with 10
    positive candidates or more and ECE at most 0.15; at 10%, completeness at most 0.45."""
    worst: dict[str, tuple[float, str]] = {}

    def note(goal: str, value: float, where: str, higher_is_worse: bool = True) -> None:
        old = worst.get(goal)
        if old is None or (value > old[0]) == higher_is_worse and value != old[0]:
            worst[goal] = (value, where)

    for (agent, name, task, fig, share), v in results.items():
        if name != (EXACT if fig == "band error" else FIGURE_ESTIMATOR.get(fig)):
            continue
        _, cover, width, _ = summarise(v)
        if cover is None:
            continue
        where = f"{agent} {task} {fig} {share:g}"
        note("coverage >= 0.93", cover, where, higher_is_worse=False)
        big = positives.get(task, 0) >= 10
        if fig == "completeness" and big and share == 0.2:
            note("completeness width at 20% <= 0.30", width, where)
        if fig == "completeness" and big and share == 0.1:
            note("completeness width at 10% <= 0.45", width, where)
        if fig == "ECE" and share == 0.2:
            note("ECE width at 20% <= 0.15", width, where)
    limits = {"coverage >= 0.93": (0.93, False), "completeness width at 20% <= 0.30": (0.30, True),
              "completeness width at 10% <= 0.45": (0.45, True),
              "ECE width at 20% <= 0.15": (0.15, True)}  # fmt: skip
    print("\ngoals (the quoted estimators; worst case):")
    for goal, (value, where) in worst.items():
        limit, upper = limits[goal]
        ok = value <= limit if upper else value >= limit
        print(f"  {goal:36s} {value:6.3f}  {'met' if ok else 'NOT MET'}  ({where})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--catalog", required=True, help="CSV: path,row,task,id,label (the truth)")
    ap.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                    help="only the rows holding this value (e.g. snr=20 of the benchmark's "
                    "catalog.csv); may be repeated")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--shares", default="0.05,0.1,0.2", help="audit shares, comma-separated")
    ap.add_argument("--miscalibrate", type=float, default=MISCALIBRATE,
                    help="the miscalibrated agent: the odds of its P(YES) on the NO list "
                    "multiplied by this (1: the calibrated agent only)")  # fmt: skip
    ap.add_argument("--engine", choices=("store", "replay"), default="store",
                    help="store: each campaign in a copy of the app's store (its draw, queue, "
                    "close and aggregated estimates); replay: the same draw, answers, close "
                    "rule and estimates without the store, about 50x faster (identical "
                    "figures, tests/test_bench_audit_coverage.py)")  # fmt: skip
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
    if not 0 < args.miscalibrate <= 1:
        raise SystemExit(f"audit_coverage: --miscalibrate {args.miscalibrate}: in (0, 1]")
    catalog = Path(args.catalog)
    rows = read_catalog(catalog, args.where)
    truth = {(r["id"], r["task"]): r["label"] for r in rows}
    tmp = tempfile.TemporaryDirectory(prefix="loupe-coverage-") if args.work is None else None
    work = Path(tmp.name if tmp else args.work)
    work.mkdir(parents=True, exist_ok=True)
    # "v2": the vetted store is kept unanswered since the two agents (an earlier bench kept
    # it answered under the same name)
    key = catalog.read_bytes() + repr(args.where).encode() + b"v2"
    digest = hashlib.sha256(key).hexdigest()[:12]
    vetted = work / f"vetted-{digest}.db"
    t0 = time.perf_counter()
    if not vetted.exists():
        vetted_store(rows, vetted, args.workers)
    agents = {"calibrated": 1.0}
    if args.miscalibrate < 1:
        agents["miscalibrated"] = args.miscalibrate
    bases = {}
    for agent, odds in agents.items():
        bases[agent] = work / f"agent-{digest}-{odds:g}.db"
        if not bases[agent].exists():
            agent_store(vetted, bases[agent], truth, odds)
    store = Store(f"sqlite:///{vetted}", create=False)
    key_of.update({r.id: store.candidate(r.id).key for r in store.audit_population()})
    store.close()
    by_task: dict[str, list[int]] = {}
    for r in rows:
        by_task.setdefault(r["task"], [0, 0])[0] += 1
        by_task[r["task"]][1] += r["label"] == "YES"
    answered = []
    for agent, base in bases.items():
        store = Store(f"sqlite:///{base}", create=False)
        pop = store.audit_population()
        answered.append(f"{agent} {sum(r.label is not None for r in pop)}")
        store.close()
    print(f"catalogue: {len(rows)} candidates ("
          + ", ".join(f"{t} {n} ({y} YES)" for t, (n, y) in sorted(by_task.items()))
          + f"); vetted, uncertain items answered from the queue ({', '.join(answered)}), "
          f"in {time.perf_counter() - t0:.0f} s; miscalibrated agent: odds of P(YES) on "
          f"the NO list x {args.miscalibrate:g}; engine: {args.engine}")  # fmt: skip
    baseline = load_baseline(args.baseline)
    results: dict[Key, list[tuple]] = {}
    t0 = time.perf_counter()
    rows_of = {a: base_rows(b, truth) for a, b in bases.items()} if args.engine == "replay" else {}
    for share in shares:
        for agent, base in bases.items():
            for seed in range(args.seeds):
                if args.engine == "replay":
                    recs, est = replay(rows_of[agent], share, seed)
                else:
                    recs, est = store_run(base, work, share, seed, truth)
                for name, task, fig, cov, width, missing in judged(recs, est, baseline, seed):
                    results.setdefault((agent, name, task, fig, share), []).append(
                        (cov, width, missing)
                    )
        print(f"share {share:g}: {args.seeds} seeds done ({time.perf_counter() - t0:.0f} s)",
              flush=True)  # fmt: skip
        if share != shares[-1]:  # what is known so far, should the run be cut short
            print_table({k: v for k, v in results.items() if k[4] == share})
            print(flush=True)
    lowest = print_table(results)
    print_goals(results, {t: y for t, (_, y) in by_task.items()})
    if tmp:
        tmp.cleanup()
    print(f"audit_coverage_min: {lowest:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
