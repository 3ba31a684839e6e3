#!/usr/bin/env python
"""Re-scoring pending candidates with a new inspector version, from the store.

    python bench/rescore.py               # 100k pending candidates
    python bench/rescore.py --n 5000      # quicker

The store is a SQLite file of `--n` pending candidates over the five tasks, each with a
trajectory copied from a real rules-inspector run on a simulated spectrum of its task (the
whole steps, thoughts included, with the values a model reads jittered per candidate), so
the JSON read per candidate is the size the app stores. The new version is a combiner for
every task (the costliest kind: the rules' input plus every measurement the task's zooms
quote). Timed in this run:

- `rescore`: `annotate.learning.rescore.rescore_store`: read the stored values of every pending
  candidate and compute the new P(YES) (one process), then `Store.adopt_scores`: write
  back each one's P(YES), verdict, queue priority and version in one transaction (and
  check that the queue then serves what the new version is least sure of);
- baseline: the same candidates' whole final-step measurements read and scored one at a
  time through `TaskModel.p_yes` (what the agent does per verdict), checked equal;
- rerunning the agent: the rules inspector on `--agent-n` spectra, scaled to `--n` over
  two processes (what re-scoring would cost without the stored values).

Ends with `rescore_100k_seconds: N` (read, score and write-back, scaled to 100k candidates).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agent.loop import run_batch
from agent.policies.rules import RulesPolicy
from agent.policies.rules.learned import InspectorModel, TaskModel
from annotate.learning.fit import task_features
from annotate.learning.rescore import INPUTS, rescore_store
from db.store import QueueConfig, Store, queue_priority

CLASSES = {"cv": "cv", "wd": "wd_da", "carbon": "carbon", "s_type": "s_star",
           "m_giant": "m_giant"}  # fmt: skip
TASKS = tuple(CLASSES)


def templates(per_task: int, seed: int = 0) -> tuple[dict[str, list[list[dict]]], float]:
    """Real trajectories (steps as stored) per task, and the agent's seconds per spectrum."""
    from training.sim.demo import simulate

    items = [(simulate(CLASSES[t], seed=(seed, k, i))[0], t) for k, t in enumerate(TASKS)
             for i in range(per_task)]  # fmt: skip
    t0 = time.perf_counter()
    trajs = run_batch(items, RulesPolicy())
    per_spectrum = (time.perf_counter() - t0) / len(items)
    out: dict[str, list[list[dict]]] = {t: [] for t in TASKS}
    for tr in trajs:
        assert all(k in tr.steps[-1].measurements for k in INPUTS), tr.task
        out[tr.task].append([s.to_dict() for s in tr.steps])
    return out, per_spectrum


def build(path: Path, n: int, tmpl: dict[str, list[list[dict]]], seed: int = 0) -> Store:
    """`n` pending candidates with one finished rules trajectory each (raw bulk inserts)."""
    rng = np.random.default_rng(seed)
    store = Store(f"sqlite:///{path}")
    task_ids = {}
    with store.engine.begin() as c:
        for t in TASKS:
            c.exec_driver_sql("INSERT INTO task (name, description) VALUES (?, '')", (t,))
            task_ids[t] = c.exec_driver_sql("SELECT id FROM task WHERE name = ?", (t,)).scalar()
    run_id = store.start_run("rules", None, "fast", {"bench": True})
    # each template as its stored JSON up to the final step, the final step, and the values
    # a model reads (jittered per candidate; the rest of the text is copied as it is)
    parts: dict[str, list[tuple[str, dict, list[str]]]] = {}
    for t, trajs in tmpl.items():
        for steps in trajs:
            head = json.dumps(steps[:-1])[:-1] + (", " if len(steps) > 1 else "")
            meas = steps[-1]["measurements"]
            keys = [k for k in ("calibration_input", "p_rules", *task_features(t))
                    if isinstance(meas.get(k), float)]  # fmt: skip
            parts.setdefault(t, []).append((head, steps[-1], keys))
    now = "2026-01-01 00:00:00.000000"
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("BEGIN IMMEDIATE")
        for lo in range(0, n, 20_000):
            hi = min(n, lo + 20_000)
            cur.executemany(
                "INSERT INTO spectrum (ref_key, path, survey, simulated, extra, created)"
                " VALUES (?, ?, 'LAMOST', 1, '{}', ?)",
                [(f"/bench/s{i}.fits||", f"/bench/s{i}.fits", now) for i in range(lo, hi)],
            )
            s0 = cur.execute(
                "SELECT id FROM spectrum WHERE ref_key = ?", (f"/bench/s{lo}.fits||",)
            ).fetchone()[0]
            c0 = cur.execute("SELECT coalesce(max(id), 0) + 1 FROM candidate").fetchone()[0]
            t0 = cur.execute("SELECT coalesce(max(id), 0) + 1 FROM trajectory").fetchone()[0]
            cands, trajs = [], []
            for j, i in enumerate(range(lo, hi)):
                task = TASKS[i % len(TASKS)]
                head, final, keys = parts[task][i % len(parts[task])]
                meas = dict(final["measurements"])
                for k in keys:  # what the model reads differs from candidate to candidate
                    meas[k] = float(meas[k]) * float(rng.uniform(0.8, 1.2))
                p = min(max(meas["p_rules"], 0.0), 1.0)
                meas["p_rules"] = p
                steps = head + json.dumps({**final, "measurements": meas}) + "]"
                cands.append((f"b{i}", f"obj{i}", s0 + j, task_ids[task], "LAMOST", t0 + j,
                              "YES" if p > 0.5 else "NO", p, queue_priority(p), now, now))  # fmt: skip
                trajs.append((run_id, c0 + j, steps, "YES" if p > 0.5 else "NO", p, now))
            cur.executemany(
                "INSERT INTO candidate (key, object_id, spectrum_id, task_id, survey,"
                " trajectory_id, verdict, confidence, priority, is_gold, disagreement,"
                " review_count, n_yes, n_no, flagged, auto, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, 0, 0, ?, ?)",
                cands,
            )
            cur.executemany(
                "INSERT INTO trajectory (run_id, candidate_id, steps, verdict, explanation,"
                " confidence, format_ok, state, seconds, created)"
                " VALUES (?, ?, ?, ?, '', ?, 1, 'done', 0, ?)",
                trajs,
            )
        raw.commit()
    finally:
        raw.close()
    return store


def combiner_model(seed: int = 0) -> InspectorModel:
    rng = np.random.default_rng(seed)
    tasks = {}
    for t in TASKS:
        f = task_features(t)
        tasks[t] = TaskModel("combiner", a=float(rng.uniform(0.5, 1.5)), b=float(rng.normal()),
                             features=f, mean=rng.normal(0, 1, len(f)).tolist(),
                             scale=rng.uniform(0.5, 3, len(f)).tolist(),
                             weights=rng.normal(0, 0.5, len(f)).tolist())  # fmt: skip
    return InspectorModel(2, tasks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="pending candidates in the store")
    ap.add_argument("--agent-n", type=int, default=3, help="spectra per task the agent reruns")
    ap.add_argument("--db", default=None, help="SQLite file to build (default: a temp file)")
    args = ap.parse_args(argv)

    tmpl, agent_s = templates(args.agent_n)
    folder = tempfile.TemporaryDirectory(prefix="loupe-rescore-")
    db = Path(args.db) if args.db else Path(folder.name) / "rescore.db"
    t0 = time.perf_counter()
    store = build(db, args.n, tmpl)
    print(f"built {args.n} pending candidates in {time.perf_counter() - t0:.1f} s "
          f"({db.stat().st_size / 1e6:.0f} MB)")  # fmt: skip
    model = combiner_model()
    store.ensure_expert("bench")

    before = store.next_item("bench", QueueConfig())
    t0, c0 = time.perf_counter(), time.process_time()
    r = rescore_store(store, model)
    t_vec, c_vec = time.perf_counter() - t0, time.process_time() - c0
    assert len(r.ids) == args.n and r.kept == 0, (len(r.ids), r.kept)
    t0, c0 = time.perf_counter(), time.process_time()
    written = store.adopt_scores(r.ids.tolist(), r.new.tolist(), model.version,
                                 event={"bench": True}, actor="bench")  # fmt: skip
    t_write, c_write = time.perf_counter() - t0, time.process_time() - c0
    assert written == args.n, written
    # the queue now serves the item the new version is least sure of
    first = int(r.ids[np.argmin(np.abs(r.new - 0.5))])
    store.release("bench", before)
    after = store.next_item("bench", QueueConfig())

    t0 = time.perf_counter()
    rows = list(store.stored_scores())
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    scalar = {
        cid: model.tasks[task].p_yes(m["calibration_input"], m, m["p_rules"], m["capped"] > 0)
        for cid, task, _, m in rows
    }
    t_scalar = time.perf_counter() - t0
    diff = max(abs(scalar[int(c)] - p) for c, p in zip(r.ids, r.new))
    store.close()
    folder.cleanup()

    agent_total = agent_s * args.n / 2
    # CPU seconds beside the wall clock: on a shared machine the wall clock also counts the
    # time other processes held the cores
    print(f"rescore (read + score, vectorised): {t_vec:.2f} s (CPU {c_vec:.2f} s) for {args.n} "
          f"({r.flips} verdicts flip)")  # fmt: skip
    print(f"write-back (P(YES), verdict, priority, scored_by; one transaction): {t_write:.2f} s "
          f"(CPU {c_write:.2f} s); "
          f"the queue's first item {before} -> {after} (least sure under the new version: "
          f"{first})")  # fmt: skip
    print(f"baseline, whole measurements read {t_read:.2f} s + scored one at a time "
          f"{t_scalar:.2f} s "
          f"(max difference {diff:.1e})")  # fmt: skip
    print(f"rerunning the agent instead: {agent_s:.3f} s per spectrum, ~{agent_total:.0f} s "
          f"for {args.n} on 2 processes")  # fmt: skip
    if diff > 1e-9:
        print(f"rescore: vectorised and one-at-a-time differ by {diff}", file=sys.stderr)
        return 1
    if (
        after is None
        or abs(r.new[list(r.ids).index(after)] - 0.5)
        > abs(r.new[list(r.ids).index(first)] - 0.5) + 0.05
    ):  # the queue ranks in bands of 0.05
        print(f"rescore: the queue serves #{after}, not one near #{first}", file=sys.stderr)
        return 1
    print(f"rescore_100k_seconds: {(t_vec + t_write) * 100_000 / args.n:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
