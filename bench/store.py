#!/usr/bin/env python
"""Store benchmark: ingest rate, next-item latency at 1M candidates, export time.

    python bench/store.py                       # 1M candidates, 10k-trajectory export
    python bench/store.py --n 200000 --export-n 1000   # quicker

Ingest is timed through `Store.add_candidates` (the `launch.py ingest` path, file reading
excluded) on `--ingest-n` candidates; the rest of the `--n` candidates are generated with
raw bulk inserts so the queue can be timed at scale. The synthetic set: 5 tasks, agent
P(YES) drawn from Beta(0.5, 0.5) (agents are mostly sure), 1% gold items, 20% already
reviewed by one of 8 experts. Next-item is timed as the app calls it (the query plus the
lease write, one SQLite transaction) for 8 experts in turn, each reviewing what it gets.
The export figure runs `annotate.export.run_export` (sft, fast renderer) over `--export-n`
accepted trajectories of small text spectra. Ends with `next_item_p99_ms: N`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agent.protocol import TOOL_NAME
from agent.refs import CandidateRef
from agent.tasks import TASKS
from agent.trajectory import Step, Trajectory
from annotate.review import decide
from db import models as m
from db.store import Filters, QueueConfig, Store, queue_priority

TASK_NAMES = tuple(TASKS)  # indexable, in the tasks' own order
EXPERTS = [f"expert{i}" for i in range(8)]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def bulk_fill(store: Store, start: int, n: int, seed: int = 0) -> None:
    """Candidates start..n-1 with a vetted state, written with raw executemany."""
    rng = np.random.default_rng(seed)
    conf = rng.beta(0.5, 0.5, n - start)
    task_ids = {}
    for t in TASKS:
        store.add_candidates([CandidateRef(id=f"seed-{t}", task=t, path=f"/bench/seed-{t}.fits")])
    with store.engine.connect() as c:
        for t in TASKS:
            task_ids[t] = c.exec_driver_sql("SELECT id FROM task WHERE name = ?", (t,)).scalar()
    run_id = store.start_run("rules", None, "fast", {"bench": True})
    # Bulk load the usual way: drop the secondary indexes, insert, build them again.
    indexes = list(m.Candidate.__table__.indexes) + list(m.Trajectory.__table__.indexes)
    with store.engine.begin() as c:
        for idx in indexes:
            c.exec_driver_sql(f"DROP INDEX IF EXISTS {idx.name}")
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("BEGIN IMMEDIATE")
        now = "2026-01-01 00:00:00.000000"
        chunk = 100_000
        for lo in range(start, n, chunk):
            hi = min(n, lo + chunk)
            cur.executemany(
                "INSERT INTO spectrum (ref_key, path, hdu, row, survey, simulated, extra, created)"
                " VALUES (?, ?, NULL, NULL, 'LAMOST', 0, '{}', ?)",
                [(f"/bench/s{i}.fits||", f"/bench/s{i}.fits", now) for i in range(lo, hi)],
            )
            first = cur.execute(
                "SELECT id FROM spectrum WHERE ref_key = ?", (f"/bench/s{lo}.fits||",)
            ).fetchone()[0]
            # rowids are handed out in order: the chunk's candidates and trajectories get
            # consecutive ids, so each can name the other up front (checked below)
            c0 = cur.execute("SELECT coalesce(max(id), 0) + 1 FROM candidate").fetchone()[0]
            t0 = cur.execute("SELECT coalesce(max(id), 0) + 1 FROM trajectory").fetchone()[0]
            rows = []
            trajs = []
            for j, i in enumerate(range(lo, hi)):
                p = float(conf[i - start])
                gold = i % 100 == 0
                rows.append(
                    (
                        f"b{i}",
                        f"obj{i}",
                        first + j,
                        task_ids[TASK_NAMES[i % len(TASK_NAMES)]],
                        "LAMOST",
                        int(gold),
                        "YES" if gold else None,
                        t0 + j,
                        "YES" if p >= 0.5 else "NO",
                        p,
                        queue_priority(p),
                        now,
                        now,
                    )
                )
            cur.executemany(
                "INSERT INTO candidate (key, object_id, spectrum_id, task_id, survey, is_gold,"
                " gold_label, trajectory_id, verdict, confidence, priority, disagreement,"
                " review_count, n_yes, n_no, flagged, auto, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, 0, ?, ?)",
                rows,
            )
            trajs = [(run_id, c0 + j, r[8], r[9], now) for j, r in enumerate(rows)]
            cur.executemany(
                "INSERT INTO trajectory (run_id, candidate_id, steps, verdict, explanation,"
                " confidence, format_ok, state, seconds, created)"
                " VALUES (?, ?, '[]', ?, '', ?, 1, 'done', 0, ?)",
                trajs,
            )
            last_c = cur.execute("SELECT max(id) FROM candidate").fetchone()[0]
            last_t = cur.execute("SELECT max(id) FROM trajectory").fetchone()[0]
            assert (last_c - c0, last_t - t0) == (len(rows) - 1, len(rows) - 1)
        raw.commit()
        for idx in indexes:
            idx.create(store.engine)
    finally:
        raw.close()


def bulk_reviews(store: Store, fraction: float, seed: int = 1) -> int:
    """Mark `fraction` of the non-gold candidates as reviewed once (accept) by some expert."""
    for e in EXPERTS:
        store.ensure_expert(e)
    rng = np.random.default_rng(seed)
    with store.engine.connect() as c:
        ids = [
            r[0]
            for r in c.exec_driver_sql(
                "SELECT id FROM candidate WHERE is_gold = 0 AND verdict IS NOT NULL ORDER BY id"
            )
        ]
        eids = [r[0] for r in c.exec_driver_sql("SELECT id FROM expert ORDER BY id")]
    pick = rng.choice(len(ids), int(len(ids) * fraction), replace=False)
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("BEGIN IMMEDIATE")
        now = "2026-01-01 00:00:00.000000"
        rows = [(ids[k], eids[k % len(eids)], now, now) for k in pick]
        cur.executemany(
            "INSERT INTO review (candidate_id, expert_id, action, label, source, revision,"
            " created, updated) SELECT ?, ?, 'accept', verdict, 'bench', 1, ?, ? FROM candidate"
            " WHERE id = ?",
            [(a, b, c_, d, a) for a, b, c_, d in rows],
        )
        cur.executemany(
            "UPDATE candidate SET review_count = 1, label = verdict, label_source = 'review',"
            " n_yes = (verdict = 'YES'), n_no = (verdict = 'NO') WHERE id = ?",
            [(r[0],) for r in rows],
        )
        raw.commit()
    finally:
        raw.close()
    return len(rows)


def time_next_item(
    store: Store, config: QueueConfig, calls: int, filters=None, review: bool = True
) -> list[float]:
    times = []
    for k in range(calls):
        e = EXPERTS[k % len(EXPERTS)]
        f = filters(k) if callable(filters) else filters
        t0 = time.perf_counter()
        cid = store.next_item(e, config, f)
        times.append((time.perf_counter() - t0) * 1000)
        if cid is not None and review:
            decide(store, e, cid, "accept", seconds=3.0)
    return times


def export_figure(n: int, workdir: Path) -> str:
    try:
        from annotate.export import run_export
    except ImportError as err:
        return f"skipped (annotate.export not importable: {err})"
    from db.store import Store as S

    spec_dir = workdir / "spectra"
    spec_dir.mkdir()
    w = np.linspace(3800.0, 9000.0, 300)
    rng = np.random.default_rng(3)
    store = S(f"sqlite:///{workdir / 'export.db'}")
    store.ensure_expert("ada")
    refs = []
    for i in range(n):
        p = spec_dir / f"x{i}.csv"
        f = 1.0 + 0.05 * rng.standard_normal(w.size)
        p.write_text("wavelength,flux\n" + "\n".join(f"{a:.1f},{b:.4f}" for a, b in zip(w, f)))
        refs.append(CandidateRef(id=f"x{i}", task=TASK_NAMES[i % len(TASK_NAMES)], path=str(p)))
    store.add_candidates(refs)
    trajs = []
    for i, r in enumerate(refs):
        verdict = "YES" if i % 2 else "NO"
        steps = [
            Step(
                thought="Look at Halpha.",
                tool_call={
                    "name": TOOL_NAME,
                    "arguments": {"wavelength_range": [6450, 6680]},
                },
                window=(6450.0, 6680.0),
                observation_text="ok",
                raw="<think>Look at Halpha.</think><tool_call>{}</tool_call>",
            ),
            Step(
                thought="Decide.",
                answer=verdict,
                explanation="Balmer lines.",
                raw=f"<think>Decide.</think><answer>\\boxed{{{verdict}}} Balmer lines.</answer>",
            ),
        ]
        trajs.append(
            Trajectory(
                id=r.id,
                task=r.task,
                spectrum_ref=r.spectrum_ref,
                policy="rules",
                steps=steps,
                verdict=verdict,
                confidence=0.8,
                state="done",
            )
        )
    for j in range(0, n, 1000):
        store.record_trajectories(trajs[j : j + 1000])
    # every trajectory accepted by one expert (written in bulk: the figure is the export's)
    with store.engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO review (candidate_id, expert_id, trajectory_id, action, label, source,"
            " revision, created, updated) SELECT c.id, e.id, c.trajectory_id, 'accept', c.verdict,"
            " 'bench', 1, c.created, c.created FROM candidate c, expert e WHERE e.name = 'ada'"
        )
        c.exec_driver_sql(
            "UPDATE candidate SET review_count = 1, label = verdict, label_source = 'review',"
            " n_yes = (verdict = 'YES'), n_no = (verdict = 'NO')"
        )
    t0 = time.perf_counter()
    try:
        res = run_export(store, "sft", workdir / "out", renderer="fast")
    except Exception as err:  # report, do not hide the other figures
        return f"failed ({type(err).__name__}: {err})"
    dt = time.perf_counter() - t0
    counts = json.dumps(res.manifest.get("counts", {}))[:120] if hasattr(res, "manifest") else ""
    return f"{dt:.1f} s for {n} trajectories ({n / dt:.0f}/s) {counts}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="Candidates in the store.")
    ap.add_argument(
        "--ingest-n",
        type=int,
        default=100_000,
        help="Candidates ingested through Store.add_candidates (timed).",
    )
    ap.add_argument("--calls", type=int, default=1000, help="next_item calls per configuration.")
    ap.add_argument(
        "--export-n", type=int, default=10_000, help="Trajectories to export (0: skip)."
    )
    ap.add_argument("--dir", default=None, help="Work folder (default: a temporary one).")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="loupe-bench-") if args.dir is None else None
    work = Path(tmp.name if tmp else args.dir)
    work.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{work / 'bench.db'}")

    n_ing = min(args.ingest_n, args.n)
    refs = [
        CandidateRef(
            id=f"i{i}",
            task=TASK_NAMES[i % len(TASK_NAMES)],
            path=f"/ingest/i{i}.fits",
            extra=(("score", "0.5"),),
        )
        for i in range(n_ing)
    ]
    t0 = time.perf_counter()
    rep = store.add_candidates(refs, meta={i: {"survey": "LAMOST"} for i in range(0, n_ing, 7)})
    dt_ing = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep2 = store.add_candidates(refs[: min(20_000, n_ing)])
    dt_re = time.perf_counter() - t0
    print(
        f"ingest (Store.add_candidates): {rep.added} candidates in {dt_ing:.1f} s "
        f"= {rep.added / dt_ing:,.0f}/s; re-ingest of {rep2.existing} present: "
        f"{rep2.existing / max(dt_re, 1e-9):,.0f}/s, {rep2.added} added"
    )

    t0 = time.perf_counter()
    bulk_fill(store, n_ing, args.n)
    n_rev = bulk_reviews(store, 0.2)
    with store.engine.connect() as c:
        c.exec_driver_sql("ANALYZE")
    total = store.count_candidates()
    print(
        f"synthetic fill to {total:,} candidates ({n_rev:,} reviewed) in "
        f"{time.perf_counter() - t0:.1f} s"
    )

    configs = [
        ("default (overlap 1, gold 5%)", QueueConfig(gold_rate=0.05), None),
        ("overlap 3", QueueConfig(overlap=3), None),
        (
            "task filter",
            QueueConfig(gold_rate=0.05),
            lambda k: Filters(task=TASK_NAMES[k % len(TASK_NAMES)]),
        ),
        ("auto-accept 0.95 + survey", QueueConfig(auto_accept=0.95), Filters(survey="LAMOST")),
    ]
    headline = None
    for name, cfg, flt in configs:
        ts = time_next_item(store, cfg, args.calls, flt)
        print(
            f"next_item {name}: p50 {pct(ts, 50):.2f} ms, p99 {pct(ts, 99):.2f} ms, "
            f"max {max(ts):.1f} ms over {len(ts)} calls"
        )
        if headline is None:
            headline = pct(ts, 99)
    ts = time_next_item(store, QueueConfig(), args.calls // 4, None, review=False)
    print(f"next_item re-serving a held lease: p50 {pct(ts, 50):.2f} ms, p99 {pct(ts, 99):.2f} ms")
    store.close()

    if args.export_n > 0:
        ex = work / "export"
        ex.mkdir(exist_ok=True)
        print(f"export (sft, fast renderer): {export_figure(args.export_n, ex)}")
    else:
        print("export: skipped (--export-n 0)")
    if tmp:
        tmp.cleanup()
    print(f"next_item_p99_ms: {headline:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
