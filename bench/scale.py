#!/usr/bin/env python
"""Scale: a million candidates in SQLite: ingest rate, queue latency, dashboard, exports.

    python bench/scale.py                                  # 1M candidates, 100k RL, 1k SFT
    python bench/scale.py --n 200000 --rl-n 5000           # quicker
    python bench/scale.py --before                         # also time the old full-read path

The store is filled as in `bench/store.py` (whose generators this reuses): `--ingest-n`
candidates through `Store.add_candidates` (timed), the rest by bulk insert; 20% reviewed
once by one of 8 experts, each decision timed (as the app records them). Then: next-item
p50/p99 (lease + review, 8 experts in turn), the dashboard (`Store.dashboard_stats` and the app's `dashboard` handler, all tasks and one
task, beside the same counts recounted by aggregates over every candidate and review;
`--before` adds the reads of the handler before that: every candidate and every review into
Python), the audit (drawn at 5% by the app's draw, the campaign closed, then the
Dashboard's audit read), and the exports: RL over `--rl-n` labelled rows and SFT over `--sft-n`
trajectories, each on small text spectra written for the purpose (the RL export renders one
overview image per row). Ends with `dashboard_ms: N` (all tasks, handler).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agent.refs import CandidateRef
from bench.store import TASK_NAMES, bulk_fill, bulk_reviews, export_figure, pct, time_next_item
from db.store import Filters, QueueConfig, Store


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    """Best of `repeat` wall times in ms (the first call warms the page cache)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best, out


def rl_export_figure(n: int, workdir: Path, workers: int | None) -> str:
    """RL export of n labelled candidates (one small text spectrum each)."""
    from annotate.export import run_export

    spec_dir = workdir / "spectra"
    spec_dir.mkdir(parents=True)
    w = np.linspace(3800.0, 9000.0, 300)
    rng = np.random.default_rng(5)
    store = Store(f"sqlite:///{workdir / 'rl.db'}")
    store.ensure_expert("ada")
    refs = []
    t0 = time.perf_counter()
    for i in range(n):
        p = spec_dir / f"r{i}.csv"
        f = 1.0 + 0.05 * rng.standard_normal(w.size)
        p.write_text("wavelength,flux\n" + "\n".join(f"{a:.1f},{b:.4f}" for a, b in zip(w, f)))
        refs.append(CandidateRef(id=f"r{i}", task=TASK_NAMES[i % len(TASK_NAMES)], path=str(p)))
    store.add_candidates(refs)
    with store.engine.begin() as c:  # every candidate labelled by one expert (bulk)
        c.exec_driver_sql(
            "INSERT INTO review (candidate_id, expert_id, action, label, source, revision,"
            " created, updated) SELECT c.id, e.id, 'correct', CASE WHEN c.id % 2 = 1 THEN 'YES'"
            " ELSE 'NO' END, 'bench', 1, c.created, c.created FROM candidate c, expert e"
            " WHERE e.name = 'ada'"
        )
        c.exec_driver_sql(
            "UPDATE candidate SET review_count = 1, label = CASE WHEN id % 2 = 1 THEN 'YES'"
            " ELSE 'NO' END, label_source = 'review'"
        )
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = run_export(store, "rl", workdir / "out", workers=workers)
    dt = time.perf_counter() - t0
    store.close()
    rows = res.manifest["rows"]
    return f"{dt:.1f} s for {rows} rows ({rows / dt:.0f} rows/s; set-up {setup:.0f} s)"


def recount_read(store: Store) -> int:
    """The Dashboard's counts as one aggregate each over every candidate and every review
    (what `dashboard_stats` read before it kept running counts): the baseline."""
    from db.store import tally

    with store.engine.connect() as c:
        n = len(c.execute(tally.candidate_keys(store.is_postgres)).all())
        return n + len(c.execute(tally.review_keys()).all())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="Candidates in the store.")
    ap.add_argument("--ingest-n", type=int, default=100_000, help="Candidates ingested (timed).")
    ap.add_argument("--calls", type=int, default=1000, help="next_item calls.")
    ap.add_argument("--rl-n", type=int, default=100_000, help="RL export rows (0: skip).")
    ap.add_argument("--sft-n", type=int, default=1000, help="SFT export trajectories (0: skip).")
    ap.add_argument("--workers", type=int, default=None, help="Export render processes.")
    ap.add_argument("--before", action="store_true", help="Also time the full-read dashboard.")
    ap.add_argument("--dir", default=None, help="Work folder (default: a temporary one).")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="loupe-scale-") if args.dir is None else None
    work = Path(tmp.name if tmp else args.dir)
    work.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{work / 'scale.db'}")

    n_ing = min(args.ingest_n, args.n)
    refs = [CandidateRef(id=f"i{i}", task=TASK_NAMES[i % len(TASK_NAMES)], path=f"/ingest/i{i}.fits")
            for i in range(n_ing)]  # fmt: skip
    t0 = time.perf_counter()
    rep = store.add_candidates(refs)
    dt = time.perf_counter() - t0
    print(f"ingest (Store.add_candidates): {rep.added:,} in {dt:.1f} s = {rep.added / dt:,.0f}/s")
    t0 = time.perf_counter()
    bulk_fill(store, n_ing, args.n)
    n_rev = bulk_reviews(store, 0.2)
    with store.engine.begin() as c:
        # as the app records them: every decision timed (2-60 s, spread deterministically)
        c.exec_driver_sql(
            "UPDATE review SET seconds = 2.0 + ((id * 7919) % 5800) / 100.0 WHERE seconds IS NULL"
        )
    store.recount_dashboard()  # the bulk load wrote with raw SQL, past the running counts
    with store.engine.connect() as c:
        c.exec_driver_sql("ANALYZE")
    total = store.count_candidates()
    print(f"fill to {total:,} candidates ({n_rev:,} reviewed): {time.perf_counter() - t0:.0f} s")

    ts = time_next_item(store, QueueConfig(gold_rate=0.05), args.calls)
    print(f"next_item (lease, then review): p50 {pct(ts, 50):.2f} ms, p99 {pct(ts, 99):.2f} ms")
    ts = time_next_item(
        store,
        QueueConfig(),
        args.calls // 2,
        lambda k: Filters(task=TASK_NAMES[k % len(TASK_NAMES)]),
    )
    print(f"next_item, task filter:          p50 {pct(ts, 50):.2f} ms, p99 {pct(ts, 99):.2f} ms")

    from app import context
    from app.pages import dashboard as dashboard_page

    ctx = context.Context(store=store, data_roots=[work], export_dir=work / "exports")
    ex = context.Viewer("bench", "admin")
    ms_stats, _ = timed(lambda: store.dashboard_stats())
    ms_recount, _ = timed(lambda: recount_read(store))
    ms_dash, view = timed(lambda: dashboard_page.dashboard(ctx, ex, "all", 0.95))
    ms_task, _ = timed(lambda: dashboard_page.dashboard(ctx, ex, TASK_NAMES[0], 0.95))
    print(f"dashboard: Store.dashboard_stats {ms_stats:.0f} ms; handler, all tasks {ms_dash:.0f} "
          f"ms; one task {ms_task:.0f} ms ({view.summary})")  # fmt: skip
    print(f"dashboard counts: recounted by aggregates over every candidate and review "
          f"{ms_recount:.0f} ms = {ms_recount / ms_stats:.1f}x the whole of dashboard_stats, "
          "which reads them from the running counts")  # fmt: skip
    # the audit: the app's draw over the confident verdicts, the close, then the Dashboard's
    # audit read (per-stratum counts aggregated in the database, and the audited points)
    from annotate.audit.sample import draw_for_store

    t0 = time.perf_counter()
    draws = draw_for_store(store, 0.05, seed=0, actor="bench")
    drawn_s = time.perf_counter() - t0
    with store.engine.begin() as c:  # the sample reviewed (in bulk: the expert agrees)
        c.exec_driver_sql(
            "UPDATE candidate SET label = verdict, label_source = 'review', review_count = 1"
            " WHERE audit_inclusion IS NOT NULL AND review_count = 0"
        )
    store.recount_dashboard()
    closed = store.auto_accept(0.9, actor="bench")
    with store.engine.connect() as c:
        c.exec_driver_sql("ANALYZE")
    from annotate.audit.estimate import yes_count_interval

    def audit_read():
        yes_count_interval.cache_clear()  # each read computes its intervals afresh
        return dashboard_page.audit_estimates(ctx, ex, "all")

    ms_audit, av = timed(audit_read)
    print(f"audit: drew {len(draws):,} in {drawn_s:.1f} s, closed {closed:,}; the Dashboard's "
          f"audit read {ms_audit:.0f} ms ({av.estimates['data'][0][4]} audited / drawn, "
          f"{av.estimates['data'][0][0]})")  # fmt: skip
    if args.before:
        t0 = time.perf_counter()
        cands = store.list_candidates(limit=10_000_000, order="id")
        revs = store.reviews()
        before = time.perf_counter() - t0
        print(f"dashboard before (every candidate and review into Python): {before:.1f} s "
              f"({len(cands):,} candidates, {len(revs):,} reviews) = "
              f"{before * 1000 / ms_dash:.0f}x the handler now")  # fmt: skip
    store.close()

    if args.rl_n > 0:
        print(f"export rl: {rl_export_figure(args.rl_n, work / 'rl', args.workers)}")
    if args.sft_n > 0:
        (work / "sft").mkdir(exist_ok=True)
        print(f"export sft (fast renderer): {export_figure(args.sft_n, work / 'sft')}")
    if tmp:
        tmp.cleanup()
    print(f"dashboard_ms: {ms_dash:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
