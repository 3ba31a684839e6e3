"""Nothing lost: concurrent experts on one SQLite file, SIGKILL in the middle of ingest,
vet --db and review recording, and bad rows refused while the good ones are kept."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from agent.catalog import CandidateRef
from db.store import QueueConfig, Store
from tests.store_factory import refs, seeded, traj, write_text_spectrum

REPO = Path(__file__).resolve().parent.parent


def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'loupe.db'}"


def check_consistent(url: str) -> dict[str, int]:
    """Integrity check, no duplicate rows, denormalised counts equal to the rows behind them,
    and one audit event per review write. Returns row counts."""
    store = Store(url)
    assert store.integrity_check() == "ok"
    with store.engine.connect() as c:
        q = lambda sql: c.execute(text(sql)).all()  # noqa: E731
        assert (
            q("SELECT candidate_id, expert_id FROM review GROUP BY 1, 2 HAVING count(*) > 1") == []
        )
        assert q("SELECT ref_key FROM spectrum GROUP BY 1 HAVING count(*) > 1") == []
        assert q("SELECT key, task_id FROM candidate GROUP BY 1, 2 HAVING count(*) > 1") == []
        assert (
            q("SELECT run_id, candidate_id FROM trajectory GROUP BY 1, 2 HAVING count(*) > 1") == []
        )
        # the queue's denormalised columns agree with the reviews they summarise
        assert (
            q("""SELECT c.id FROM candidate c WHERE c.review_count != (SELECT count(*) FROM review r
                    WHERE r.candidate_id = c.id AND r.action IN ('accept','reject','correct'))""")
            == []
        )
        assert (
            q("""SELECT e.id FROM expert e WHERE e.review_count !=
                    (SELECT count(*) FROM review r WHERE r.expert_id = e.id)""")
            == []
        )
        n_review_events = c.execute(
            text("SELECT count(*) FROM audit_event WHERE action = 'review'")
        ).scalar()
        counts = {
            t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar()
            for t in ("candidate", "spectrum", "trajectory", "review")
        }
    assert n_review_events == counts["review"]
    store.close()
    return counts


# -- concurrent experts -------------------------------------------------------------------


@pytest.mark.slow
def test_eight_threads_record_reviews_exactly_once(tmp_path):
    store = Store(db_url(tmp_path))
    experts = [f"e{i}" for i in range(8)]
    for e in experts:
        store.create_expert(e)
    seeded(store, [random.Random(1).random() for _ in range(120)], prefix="q")
    direct = seeded(store, [0.5] * 12, prefix="d")
    served: dict[str, list[int]] = {e: [] for e in experts}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(experts))

    def work(e: str) -> None:
        try:
            barrier.wait()
            for cid in direct:  # everyone reviews these (retrying one identical request)
                store.record_review(e, cid, "accept", seconds=1.0)
                if cid == direct[0]:
                    store.record_review(e, cid, "accept", seconds=1.0)
            while (cid := store.next_item(e, QueueConfig(overlap=1))) is not None:
                served[e].append(cid)
                store.record_review(e, cid, "reject" if cid % 2 else "accept")
        except BaseException as err:  # surfaced in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(e,)) for e in experts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    all_served = [c for v in served.values() for c in v]
    assert len(all_served) == len(set(all_served)) == 120  # no item handed to two experts
    assert all(len(v) > 0 for v in served.values())  # everyone got work
    counts = check_consistent(db_url(tmp_path))
    assert counts["review"] == 120 + 12 * 8
    store.close()


def _process_worker(url: str, expert: str, direct: list[int], out) -> None:
    store = Store(url)
    got = []
    for cid in direct:
        store.record_review(expert, cid, "correct", label="YES", explanation="by process")
    while (cid := store.next_item(expert, QueueConfig(overlap=1))) is not None:
        got.append(cid)
        store.record_review(expert, cid, "accept")
    store.close()
    out.put((expert, got))


@pytest.mark.slow
def test_four_processes_record_reviews_exactly_once(tmp_path):
    url = db_url(tmp_path)
    store = Store(url)
    experts = [f"p{i}" for i in range(4)]
    for e in experts:
        store.create_expert(e)
    seeded(store, [0.3 + 0.004 * i for i in range(100)], prefix="q")
    direct = seeded(store, [0.5] * 10, prefix="d")
    store.close()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_process_worker, args=(url, e, direct, out)) for e in experts]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    all_served = [c for v in results.values() for c in v]
    assert len(all_served) == len(set(all_served)) == 100
    counts = check_consistent(url)
    assert counts["review"] == 100 + 10 * 4


# -- SIGKILL at random moments ------------------------------------------------------------


def run_and_kill(args: list[str], delay: float, env_extra: dict[str, str] | None = None) -> int:
    """Start `python args...` in the repo, SIGKILL it after `delay` s; its return code."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    p = subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
    return p.returncode


def run_ok(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r


@pytest.mark.slow
def test_sigkill_during_ingest_then_rerun_completes(tmp_path):
    folder = tmp_path / "spectra"
    folder.mkdir()
    for i in range(80):
        write_text_spectrum(folder / f"s{i:03d}.csv", seed=i, n=200)
    rng = random.Random(7)
    for trial in range(3):
        url = f"sqlite:///{tmp_path / f'ingest{trial}.db'}"
        args = [
            "launch.py",
            "ingest",
            str(folder),
            "--task",
            "cv",
            "--db",
            url,
            "--batch-size",
            "10",
        ]
        rc = run_and_kill(args, delay=rng.uniform(1.5, 5.0))
        if Path(url.removeprefix("sqlite:///")).exists():
            before = check_consistent(url)
            assert before["candidate"] == before["spectrum"] <= 80
        else:
            assert rc != 0  # killed before it opened the database
        run_ok(args)
        after = check_consistent(url)
        assert after["candidate"] == after["spectrum"] == 80
    run_ok(args)  # one more run adds nothing
    assert check_consistent(url) == after


VET_SCRIPT = textwrap.dedent("""
    import sys, time
    from db.vet import StoreSink
    from db.store import Store
    from tests.store_factory import traj
    url, n = sys.argv[1], int(sys.argv[2])
    sink = StoreSink(Store(url), policy="rules")
    done = sink.done_keys()
    for i in range(n):
        key = (f"v{i}", "cv")
        if key in done:
            continue
        sink.write(traj(f"v{i}", (i % 97) / 97, steps=6))
    sink.close()
""")


@pytest.mark.slow
def test_sigkill_during_vet_sink_then_resume_has_no_gaps(tmp_path):
    script = tmp_path / "vet_job.py"
    script.write_text(VET_SCRIPT)
    rng = random.Random(11)
    url = db_url(tmp_path)
    Store(url).close()
    for _ in range(3):
        run_and_kill([str(script), url, "400"], delay=rng.uniform(1.5, 4.0))
        check_consistent(url)
    run_ok([str(script), url, "400"])
    counts = check_consistent(url)
    assert counts["trajectory"] == counts["candidate"] == 400
    store = Store(url)
    assert len(store.done_keys("rules")) == 400
    store.close()


@pytest.mark.slow
def test_sigkill_during_vet_cli_then_resume(tmp_path):
    pytest.importorskip("agent.runner", reason="agent.runner (the batch runner) is not available")
    folder = tmp_path / "spectra"
    folder.mkdir()
    for i in range(40):
        write_text_spectrum(folder / f"s{i:03d}.csv", seed=i)
    url = db_url(tmp_path)
    args = [
        "launch.py",
        "vet",
        "--input",
        str(folder),
        "--task",
        "cv",
        "--policy",
        "rules",
        "--db",
        url,
        "--workers",
        "1",
        "--no-progress",
    ]
    rng = random.Random(5)
    for _ in range(2):
        run_and_kill(args, delay=rng.uniform(2.0, 8.0))
        if Path(url.removeprefix("sqlite:///")).exists():
            check_consistent(url)
    run_ok(args)
    counts = check_consistent(url)
    assert counts["trajectory"] == counts["candidate"] == 40


REVIEW_SCRIPT = textwrap.dedent("""
    import sys
    from db.store import QueueConfig, Store
    url, expert = sys.argv[1], sys.argv[2]
    store = Store(url)
    while (cid := store.next_item(expert, QueueConfig(overlap=1))) is not None:
        store.record_review(expert, cid, "reject" if cid % 3 else "accept", comment="x" * 50)
    store.close()
""")


@pytest.mark.slow
def test_sigkill_during_review_recording(tmp_path):
    url = db_url(tmp_path)
    store = Store(url)
    for e in ("ada", "bob"):
        store.create_expert(e)
    seeded(store, [((i * 37) % 100) / 100 for i in range(400)])
    store.close()
    script = tmp_path / "review_job.py"
    script.write_text(REVIEW_SCRIPT)
    rng = random.Random(3)
    for trial in range(3):
        run_and_kill([str(script), url, "ada" if trial % 2 else "bob"], delay=rng.uniform(1.5, 3.5))
        check_consistent(url)
    # the killed workers' leases expire; release them as an admin would, then finish
    s = Store(url)
    s.release("ada")
    s.release("bob")
    s.close()
    run_ok([str(script), url, "ada"])
    counts = check_consistent(url)
    assert counts["review"] == 400  # every candidate reviewed once, none twice, none skipped


# -- bad rows -----------------------------------------------------------------------------


def test_bad_rows_refused_good_rows_kept(tmp_path):
    store = Store(db_url(tmp_path))
    batch = refs(3) + [CandidateRef(id="bad", task="", path="/d/bad.fits")] + refs(2, prefix="k")
    rep = store.add_candidates(batch, batch_size=2)  # the bad row sits inside a batch
    assert rep.added == 5 and rep.errors == [(3, "bad", "empty task")]
    store.create_expert("ada")
    store.record_trajectory(traj("c0", 0.9))
    csv = tmp_path / "labels.csv"
    csv.write_text("id,label,comment\nc0,NO,wrong\nnope,YES,\nk0,MAYBE,\nk1,yes,ok\n")
    from annotate.importer import import_labels

    report = import_labels(store, csv, "ada")
    assert report.recorded == 2
    assert [line for line, _ in report.errors] == [3, 4]
    assert "nope" in report.errors[0][1] and "MAYBE" in report.errors[1][1]
    assert Counter(r.action for r in store.reviews()) == {"reject": 1, "correct": 1}
    store.close()
    check_consistent(db_url(tmp_path))
