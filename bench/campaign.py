#!/usr/bin/env python
"""A simulated vetting campaign on the survey-like benchmark: does the campaign see its own
confident mistakes, and does the agent learn while experts work?

    python bench/campaign.py                 # SNR 8 and 20, every object (~1,800 spectra)
    python bench/campaign.py --small         # a few objects per class (CI)

The benchmark (`training.benchmark`: real library spectra observed in the LAMOST, SDSS and
DESI layouts, ordinary A/F/G/K stars a negative for every task) is built from
$LOUPE_SPECTRA (default ../shared/spectra). Its tune split is the campaign: ingested into a
store without labels, vetted by the plain rules inspector (`vet_into_store`), the random
audit drawn (`annotate.audit.sample`, the team's `audit_rate`) and confident verdicts held
out of the queue (`auto_accept`). Simulated experts then take `--decisions` items from the
real queue (`annotate.queue`: least certain first, one in round(1/audit_rate) from the audit
sample) and answer with the true label through `annotate.review`, which is where the
learning schedule (`annotate.learning.schedule`, every `--learn-every` labels) counts and fits; in
the bench it fits inline rather than in a thread, by the same code. At the end the
remaining confident verdicts are auto-accepted, as a campaign closes.

The test split is held back (no object in both): each adopted version is scored on it
from the inspector's measurements of its spectra. Printed: the learning curve (macro-F1
over the tasks on the held-back split after each adopted version), per task the audit's
estimated precision of the YES list with its 95% interval against the true precision and
whether the interval covers it, and last `campaign_gain: X`, the macro-F1 gain of the last
adopted version over the plain rules on the held-back split.
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent.policies.rules.learned import InspectorModel, TaskModel
from agent.refs import CandidateRef
from annotate import review
from annotate.audit.sample import AUDIT_RATE_SETTING, draw_for_store, store_estimates
from annotate.learning import schedule
from annotate.learning.fit import Example, examples_from_spectra
from annotate.queue import Queue
from db.store import Store

TASKS = ("carbon", "cv", "m_giant", "s_type", "wd")
CONFIDENT = 0.9  # auto-accept: certainty max(P, 1 - P) from which no expert is asked


def build_benchmark(out: Path, small: bool, workers: int, seed: int) -> dict[str, Path]:
    from training import benchmark

    if small:
        return benchmark.build(out, snrs=(12.0,), layouts=("sdss", "lamost"), max_objects=4,
                               seed=seed, workers=workers)  # fmt: skip
    return benchmark.build(out, snrs=(8.0, 20.0), seed=seed, workers=workers)


def read_split(catalog: Path) -> list[dict[str, str]]:
    with open(catalog, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["path"] = str((catalog.parent / r["path"]).resolve())
    return rows


def held_back(rows: list[dict[str, str]]) -> list[Example]:
    """The held-back split as the learner sees it: the inspector's measurements of each
    spectrum (taken once), the true label, the object."""
    from agent.formats import load_one

    spectra: dict[str, Any] = {}
    items = []
    for r in rows:
        spec = spectra.get(r["path"])
        if spec is None:
            spec = spectra[r["path"]] = load_one(Path(r["path"]))
        items.append((spec, r["task"], r["label"] == "YES", r["object"]))
    return examples_from_spectra(items)


def macro_f1(model: InspectorModel | None, ex: list[Example]) -> tuple[float, dict[str, float]]:
    """Macro-F1 over the tasks of `model`'s verdicts (the plain rules' where None)."""
    per: dict[str, float] = {}
    for task in sorted({e.task for e in ex}):
        sub = [e for e in ex if e.task == task]
        tm = (model.tasks.get(task) if model else None) or TaskModel("rules")
        pred = np.array([tm.p_yes(e.x, e.m, e.p_rules, e.capped) > 0.5 for e in sub])
        y = np.array([e.label for e in sub])
        tp = float(np.sum(pred & y))
        den = 2 * tp + float(np.sum(pred & ~y)) + float(np.sum(~pred & y))
        per[task] = 2 * tp / den if den else 0.0
    return float(np.mean(list(per.values()))), per


def campaign_store(db: Path, rows: list[dict[str, str]], args: argparse.Namespace) -> Store:
    """The tune split as a campaign: ingested without its labels, vetted by the plain rules,
    the audit drawn, the team's settings stored."""
    from annotate.intake.ingest import ingest_refs
    from annotate.vetting.into_store import vet_into_store

    store = Store(f"sqlite:///{db}")
    refs = [CandidateRef(r["id"], r["task"], r["path"], extra=(("object_id", r["object"]),))
            for r in rows]  # fmt: skip
    _, problems, _ = ingest_refs(store, refs)
    if problems:
        raise SystemExit(f"campaign: ingest: {problems[:3]}")
    vet_into_store(store, policy="rules", model="none", workers=args.workers, actor="bench")
    for key, value in ((AUDIT_RATE_SETTING, args.audit_rate), ("auto_accept", CONFIDENT),
                       (schedule.LEARN_EVERY_SETTING, args.learn_every)):  # fmt: skip
        store.set_setting(key, value, actor="bench")
    draw_for_store(store, seed=args.seed, actor="bench")
    return store


def simulate(store: Store, truth: dict[str, str], k: int, test: list[Example], out: Path):
    """`k` decisions by two simulated experts following the queue; the learning schedule
    fits as labels come in. Returns (decisions made, audit items among them, the curve)."""
    for name in ("sim-ada", "sim-bob"):
        store.ensure_expert(name)
    lr = schedule.attach(store, out, background=False)
    curve = [("rules", 0, *macro_f1(None, test))]
    sample = {r.id for r in store.audit_population() if r.audit_inclusion is not None}
    made = audited = fits = 0
    for i in range(k):
        expert = ("sim-ada", "sim-bob")[i % 2]
        cid = Queue.from_settings(store).next_id(expert)
        if cid is None:
            break
        info = store.candidate(cid)
        shown = store.trajectory(info.trajectory_id).verdict
        action = "accept" if shown == truth[info.key] else "reject"
        before = lr.last
        review.decide(store, expert, cid, action)  # the schedule counts, and fits when due
        made += 1
        audited += cid in sample
        if lr.error:
            raise SystemExit(f"campaign: the fit failed: {lr.error}")
        fits += lr.last is not before
        if lr.last is not before and lr.last.adopted:
            curve.append((lr.last.model.tag, lr.last.labels, *macro_f1(lr.last.model, test)))
    return made, audited, fits, curve


def true_precision(store: Store, truth: dict[str, str]) -> dict[str, tuple[int, float | None]]:
    """Per task: the final YES list's size and the share of it that is truly YES."""
    out = {}
    for task in TASKS:
        listed = [r for r in store.catalogue_rows(task)]
        ok = sum(truth[r["key"]] == "YES" for r in listed)
        out[task] = (len(listed), ok / len(listed) if listed else None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a few objects per class (CI)")
    ap.add_argument("--decisions", type=int, default=None,
                    help="expert decisions (default 1200; --small: 80)")  # fmt: skip
    ap.add_argument("--learn-every", type=int, default=None,
                    help="labels between fits (default 100; --small: 10)")  # fmt: skip
    ap.add_argument("--audit-rate", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="working folder (default: a temp folder)")
    args = ap.parse_args(argv)
    args.decisions = args.decisions or (80 if args.small else 1200)
    args.learn_every = args.learn_every or (10 if args.small else 100)
    logging.basicConfig(level=logging.WARNING)

    tmp = tempfile.TemporaryDirectory(prefix="loupe-campaign-")
    out = Path(args.out or tmp.name)
    t0 = time.perf_counter()
    paths = build_benchmark(out / "benchmark", args.small, args.workers, args.seed)
    tune, test_rows = read_split(paths["tune"]), read_split(paths["test"])
    truth = {r["id"]: r["label"] for r in tune}
    print(f"benchmark: {len(tune)} campaign candidates (tune split), {len(test_rows)} held back "
          f"(test split, other objects) in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    for task in TASKS:
        pos = sum(r["label"] == "YES" for r in tune if r["task"] == task)
        n = sum(r["task"] == task for r in tune)
        print(f"  {task:8s} {n:5d} candidates, {pos:4d} YES")
    t0 = time.perf_counter()
    test = held_back(test_rows)
    store = campaign_store(out / "campaign.db", tune, args)
    print(f"vetted by the plain rules and measured the held-back split in "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip

    t0 = time.perf_counter()
    made, audited, fits, curve = simulate(store, truth, args.decisions, test, out / "inspector")
    auto = store.auto_accept(CONFIDENT, actor="bench")
    print(f"campaign: {made} expert decisions ({audited} of them audit items), {fits} fits "
          f"(one per {args.learn_every} labels), {len(curve) - 1} adopted, {auto} confident "
          f"verdicts auto-accepted at the close, "
          f"in {time.perf_counter() - t0:.0f} s")  # fmt: skip

    print("learning curve (macro-F1 over tasks on the held-back split, after each adopted "
          "version):")  # fmt: skip
    print(
        f"  {'version':14s} {'labels':>6s} {'macro-F1':>8s}  " + " ".join(f"{t:>8s}" for t in TASKS)
    )
    for tag, n, f1, per in curve:
        print(f"  {tag:14s} {n:6d} {f1:8.3f}  " + " ".join(f"{per.get(t, 0):8.3f}" for t in TASKS))

    est = store_estimates(store, reps=500, seed=args.seed)
    real = true_precision(store, truth)
    print("precision of the YES list: the audit's estimate [95%] against the truth:")
    print(f"  {'task':8s} {'listed':>6s} {'by agent':>8s} {'audited':>7s}  {'estimate [95%]':32s} "
          f"{'true':>6s}  covered")  # fmt: skip
    covered = judged = 0
    for task in TASKS:
        e, (listed, p) = est.get(task), real[task]
        pr = e.precision if e else None
        inside = None
        if pr is not None and pr.value is not None and p is not None:
            inside = pr.low - 1e-9 <= p <= pr.high + 1e-9
            covered += inside
            judged += 1
        # the interval always, even one known exactly, so the columns line up
        shown = "n/a" if pr is None else str(pr) if pr.value is None else pr.interval()
        print(f"  {task:8s} {listed:6d} {e.yes_by_agent if e else 0:8d} "
              f"{f'{e.audited}/{e.drawn}' if e else '0/0':>7s}  {shown:32s} "
              f"{'n/a' if p is None else f'{p:.3f}':>6s}  "
              f"{'n/a' if inside is None else ('yes' if inside else 'NO')}")  # fmt: skip
    print(f"intervals covering the true precision: {covered} of {judged}")
    gain = curve[-1][2] - curve[0][2]
    store.close()
    tmp.cleanup()
    print(f"campaign_gain: {gain:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
