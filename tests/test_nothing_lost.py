"""Nothing lost: concurrent experts on one SQLite file; SIGKILL in the middle of ingest,
vet --db and review recording (LOUPE_CRASH_TRIALS kills per case, default 6, at seeded
random moments; export: tests/test_nothing_lost_export.py); bad rows refused while the
good ones are kept."""

from __future__ import annotations

import multiprocessing as mp
import random
import shutil
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from agent.refs import CandidateRef
from annotate.review import decide
from db.store import QueueConfig, Store
from tests.concurrency import run_threads
from tests.crash_support import TRIALS
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
    # Every expert claims a first item before anyone goes on: those eight claims race each
    # other and must all succeed, with distinct items. Without this gate, "everyone got
    # work" would depend on the thread scheduler (a slow thread can find the queue drained).
    first_claims = threading.Barrier(len(experts))

    def work(e: str) -> None:
        for cid in direct:  # everyone reviews these (retrying one identical request)
            decide(store, e, cid, "accept", seconds=1.0)
            if cid == direct[0]:
                decide(store, e, cid, "accept", seconds=1.0)
        cid = store.next_item(e, QueueConfig(overlap=1))
        first_claims.wait(60)
        while cid is not None:
            served[e].append(cid)
            decide(store, e, cid, "reject" if cid % 2 else "accept")
            cid = store.next_item(e, QueueConfig(overlap=1))

    run_threads(work, [(e,) for e in experts], barrier=True)
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
        decide(store, expert, cid, "correct", label="YES", explanation="by process")
    while (cid := store.next_item(expert, QueueConfig(overlap=1))) is not None:
        got.append(cid)
        decide(store, expert, cid, "accept")
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
# Each case: one uninterrupted reference run on a fresh database; then LOUPE_CRASH_TRIALS
# (default 6; set it higher for a deeper run) runs on fresh copies, each SIGKILLed at a
# seeded random moment in (0, the reference run's duration x 0.75), checked for a sound
# database, re-run to the end and compared with the reference. Jobs run in a fork server
# (tests.crash_support) that has Loupe imported, so the kill moments fall in the work, not
# in interpreter start-up.


def kill_trials(forks, tmp_path: Path, make_db, job, state, seed: int, after_kill=None) -> dict:
    """Run the case described above; returns {"reference", "killed", "seconds"}.

    make_db(name) -> url of a fresh database; job(url, name) -> ForkServer job kwargs;
    state(url) -> what a finished run must leave (compared with the reference run's);
    after_kill(url, ref_state) checks a killed run's database (after the integrity check).
    """
    ref_url = make_db("ref")
    ref_run = forks.ok(log=tmp_path / "ref.log", **job(ref_url, "ref"))
    check_consistent(ref_url)
    reference = state(ref_url)
    rng = random.Random(seed)
    killed = k = 0
    span = ref_run["seconds"]
    # TRIALS trials, and more (up to twice as many) until half of TRIALS kills landed inside
    # the work: a kill after the end tests nothing.
    while k < TRIALS or (killed < TRIALS // 2 and k < 2 * TRIALS):
        url, name = make_db(f"t{k}"), f"t{k}"
        # The first three quarters of the shortest run seen: a run can be faster than the
        # reference was (a load spike during the reference).
        delay = rng.uniform(0.0, 0.75 * span)
        res = forks.run(delay, log=tmp_path / f"{name}.log", **job(url, name))
        killed += res["killed"]
        if Path(url.removeprefix("sqlite:///")).exists():
            check_consistent(url)
            if after_kill is not None:
                after_kill(url, reference)
        else:
            assert res["killed"]  # killed before it opened the database
        forks.ok(log=tmp_path / f"{name}.log", **job(url, name))
        check_consistent(url)
        assert state(url) == reference, f"trial {k} (killed at {delay:.2f} s) differs"
        if not res["killed"]:  # the run ended before its kill: a whole run takes this long
            span = min(span, res["seconds"])
        k += 1
    assert killed >= TRIALS // 2, f"only {killed}/{k} runs were killed before the end"
    return {"reference": reference, "killed": killed, "seconds": ref_run["seconds"]}


def _rows(url: str, sql: str) -> list[tuple]:
    store = Store(url)
    with store.engine.connect() as c:
        rows = [tuple(r) for r in c.execute(text(sql)).all()]
    store.close()
    return rows


def _fresh(tmp_path: Path):
    return lambda name: f"sqlite:///{tmp_path / f'{name}.db'}"


def _created(tmp_path: Path):
    """Like `_fresh`, with the empty store made first (`vet --db` refuses a missing one)."""
    from db.store import Store

    def make(name: str) -> str:
        url = _fresh(tmp_path)(name)
        Store(url).close()
        return url

    return make


def _copies(tmp_path: Path, template: Path):
    def make(name: str) -> str:
        dest = tmp_path / f"{name}.db"
        shutil.copyfile(template, dest)
        return f"sqlite:///{dest}"

    return make


@pytest.mark.slow
def test_sigkill_during_ingest_then_rerun_completes(tmp_path, forks):
    folder = tmp_path / "spectra"
    folder.mkdir()
    for i in range(80):
        write_text_spectrum(folder / f"s{i:03d}.csv", seed=i, n=200)

    def job(url, name):
        return {"launch": ["ingest", str(folder), "--task", "cv", "--db", url,
                           "--batch-size", "10"]}  # fmt: skip

    def state(url):
        return sorted(_rows(url, "SELECT c.key, s.path, s.content_hash FROM candidate c "
                                 "JOIN spectrum s ON s.id = c.spectrum_id"))  # fmt: skip

    def after_kill(url, ref):
        got = state(url)
        assert set(got) <= set(ref)  # what is there is right; the rest comes on the re-run
        counts = check_consistent(url)
        assert counts["candidate"] == counts["spectrum"] == len(got)

    out = kill_trials(forks, tmp_path, _fresh(tmp_path), job, state, seed=7, after_kill=after_kill)
    assert len(out["reference"]) == 80
    url = _fresh(tmp_path)("t0")
    forks.ok(**job(url, "t0"))  # one more run adds nothing
    assert state(url) == out["reference"]


VET_SCRIPT = textwrap.dedent("""
    import sys, time
    from annotate.vetting.sinks import StoreSink
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


def _trajectories(url: str) -> list[tuple]:
    return sorted(_rows(url, "SELECT c.key, t.verdict, t.confidence, t.state FROM trajectory t "
                             "JOIN candidate c ON c.id = t.candidate_id"))  # fmt: skip


@pytest.mark.slow
def test_sigkill_during_vet_sink_then_resume_has_no_gaps(tmp_path, forks):
    script = tmp_path / "vet_job.py"
    script.write_text(VET_SCRIPT)

    def job(url, name):
        return {"script": str(script), "argv": [url, "80"]}

    out = kill_trials(forks, tmp_path, _fresh(tmp_path), job, _trajectories, seed=11)
    assert len(out["reference"]) == 80


@pytest.mark.slow
def test_sigkill_during_vet_cli_then_resume(tmp_path, forks):
    folder = tmp_path / "spectra"
    folder.mkdir()
    for i in range(16):
        write_text_spectrum(folder / f"s{i:03d}.csv", seed=i)

    def job(url, name):
        return {"launch": ["vet", "--input", str(folder), "--task", "cv", "--policy", "rules",
                           "--db", url, "--workers", "1", "--no-progress"]}  # fmt: skip

    def after_kill(url, ref):
        assert set(_trajectories(url)) <= set(ref)

    out = kill_trials(
        forks, tmp_path, _created(tmp_path), job, _trajectories, seed=5, after_kill=after_kill
    )
    assert len(out["reference"]) == 16


REVIEW_SCRIPT = textwrap.dedent("""
    import sys
    from annotate.review import decide
    from db.store import QueueConfig, Store
    url, expert = sys.argv[1], sys.argv[2]
    store = Store(url)
    while (cid := store.next_item(expert, QueueConfig(overlap=1))) is not None:
        decide(store, expert, cid, "reject" if cid % 3 else "accept", comment="x" * 50)
    store.close()
""")


@pytest.mark.slow
def test_sigkill_during_review_recording(tmp_path, forks):
    template = tmp_path / "template.db"
    store = Store(f"sqlite:///{template}")
    store.create_expert("ada")
    seeded(store, [((i * 37) % 100) / 100 for i in range(60)])
    store.close()
    script = tmp_path / "review_job.py"
    script.write_text(REVIEW_SCRIPT)

    def job(url, name):  # the re-run is the same expert: their live lease is served again
        return {"script": str(script), "argv": [url, "ada"]}

    def state(url):
        return sorted(_rows(url, "SELECT candidate_id, action, revision FROM review"))

    out = kill_trials(forks, tmp_path, _copies(tmp_path, template), job, state, seed=3)
    # every candidate reviewed once, none twice, none skipped
    assert len(out["reference"]) == 60 and all(r[2] == 1 for r in out["reference"])


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
    from annotate.intake.labels import import_labels

    report = import_labels(store, csv, "ada")
    assert report.recorded == 2
    assert [line for line, _ in report.errors] == [3, 4]
    assert "nope" in report.errors[0][1] and "MAYBE" in report.errors[1][1]
    assert Counter(r.action for r in store.reviews()) == {"reject": 1, "correct": 1}
    store.close()
    check_consistent(db_url(tmp_path))
