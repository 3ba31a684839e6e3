"""Nothing lost: concurrent experts on one SQLite file; SIGKILL in the middle of ingest,
vet --db, review recording and export (LOUPE_CRASH_TRIALS kills per case, default 6, at
seeded random moments); bad rows refused while the good ones are kept."""

from __future__ import annotations

import json
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
from tests.crash_support import TRIALS, ForkServer
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


@pytest.fixture(scope="module")
def forks():
    server = ForkServer()
    yield server
    server.close()


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
    killed = 0
    for k in range(TRIALS):
        url, name = make_db(f"t{k}"), f"t{k}"
        # The first three quarters of the reference run: a trial can run faster than the
        # reference did (a load spike during the reference), and a kill after the end tests nothing.
        delay = rng.uniform(0.0, 0.75 * ref_run["seconds"])
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
    # Most kills must land inside the work (a kill after the end tests nothing).
    assert killed >= TRIALS // 2, f"only {killed}/{TRIALS} runs were killed before the end"
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
        return {"script": str(script), "argv": [url, "150"]}

    out = kill_trials(forks, tmp_path, _fresh(tmp_path), job, _trajectories, seed=11)
    assert len(out["reference"]) == 150


@pytest.mark.slow
def test_sigkill_during_vet_cli_then_resume(tmp_path, forks):
    folder = tmp_path / "spectra"
    folder.mkdir()
    for i in range(24):
        write_text_spectrum(folder / f"s{i:03d}.csv", seed=i)

    def job(url, name):
        return {"launch": ["vet", "--input", str(folder), "--task", "cv", "--policy", "rules",
                           "--db", url, "--workers", "1", "--no-progress"]}  # fmt: skip

    def after_kill(url, ref):
        assert set(_trajectories(url)) <= set(ref)

    out = kill_trials(
        forks, tmp_path, _created(tmp_path), job, _trajectories, seed=5, after_kill=after_kill
    )
    assert len(out["reference"]) == 24


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
    seeded(store, [((i * 37) % 100) / 100 for i in range(120)])
    store.close()
    script = tmp_path / "review_job.py"
    script.write_text(REVIEW_SCRIPT)

    def job(url, name):  # the re-run is the same expert: their live lease is served again
        return {"script": str(script), "argv": [url, "ada"]}

    def state(url):
        return sorted(_rows(url, "SELECT candidate_id, action, revision FROM review"))

    out = kill_trials(forks, tmp_path, _copies(tmp_path, template), job, state, seed=3)
    # every candidate reviewed once, none twice, none skipped
    assert len(out["reference"]) == 120 and all(r[2] == 1 for r in out["reference"])


def _export_world(tmp_path: Path, n: int = 30) -> Path:
    """A store with n vetted candidates (text spectra) and an expert's mixed reviews."""
    data = tmp_path / "spectra"
    data.mkdir()
    template = tmp_path / "template.db"
    store = Store(f"sqlite:///{template}")
    refs = []
    for i in range(n):
        path = write_text_spectrum(data / f"s{i:03d}.csv", seed=i)
        refs.append(CandidateRef(id=f"x{i}", task="cv", path=str(path),
                                 label="YES" if i % 7 == 0 else None))  # fmt: skip
    store.add_candidates(refs)
    store.create_expert("ann")
    for i in range(n):
        t = traj(f"x{i}", (i % 10) / 10 + 0.05)
        t.spectrum_ref = {"path": str(data / f"s{i:03d}.csv")}
        store.record_trajectory(t)
    cid = {c.key: c.id for c in store.list_candidates(limit=1000, order="id")}
    for i in range(n):
        if i % 5 == 4:
            continue  # unreviewed: a catalogue label at most
        if i % 3 == 0:
            decide(store, "ann", cid[f"x{i}"], "correct", label="NO" if i % 2 else "YES",
                                explanation="The expert's reading.", wrong_step=1)  # fmt: skip
        else:
            decide(store, "ann", cid[f"x{i}"], "accept" if i % 3 == 1 else "reject")
    store.close()
    assert not Path(f"{template}-wal").exists() or Path(f"{template}-wal").stat().st_size == 0
    return template


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sft", "rl"])
def test_sigkill_during_export_then_rerun_is_byte_identical(tmp_path, forks, kind):
    pytest.importorskip("datasets")
    template = _export_world(tmp_path)

    def job(url, name):
        return {"launch": ["export", kind, "--db", url, "--out", str(tmp_path / f"out-{name}"),
                           "--workers", "1"]}  # fmt: skip

    def batches(url):
        return _rows(url, "SELECT b.id, b.content_hash, b.manifest, count(i.id), "
                          "count(DISTINCT i.entity_id) FROM export_batch b "
                          "LEFT JOIN export_item i ON i.batch_id = b.id GROUP BY b.id")  # fmt: skip

    def state(url):
        (bid, chash, manifest, n_items, n_distinct), *more = batches(url)
        assert not more, "one export, one batch"
        manifest = json.loads(manifest)
        assert n_items == n_distinct == manifest["rows"]  # every row recorded once
        out = Path(_rows(url, "SELECT path FROM export_batch")[0][0])
        assert json.loads((out / "manifest.json").read_text())["content_hash"] == chash
        leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
        assert not leftovers, leftovers
        return {"files": _tree(out), "rows": manifest["rows"], "hash": chash}

    def after_kill(url, ref):
        got = batches(url)
        assert len(got) <= 1  # a batch is recorded whole or not at all
        for _, chash, manifest, n_items, _ in got:
            assert chash == ref["hash"] and n_items == json.loads(manifest)["rows"]

    out = kill_trials(
        forks, tmp_path, _copies(tmp_path, template), job, state, seed=13, after_kill=after_kill
    )
    ref = out["reference"]
    assert ref["rows"] >= 10
    if kind == "rl":  # one row per labelled object, none twice
        ids = [json.loads(line)["id"] for name, data in ref["files"].items()
               if name.endswith(".jsonl") for line in data.decode().splitlines()]  # fmt: skip
        assert len(ids) == len(set(ids)) == ref["rows"]


@pytest.mark.slow
def test_export_killed_between_files_and_commit_is_completed_by_rerun(tmp_path):
    """The narrowest window: files renamed into place, batch not yet committed."""
    pytest.importorskip("datasets")
    from annotate.export import collect, export_records, run_export

    template = _export_world(tmp_path, n=12)
    url = f"sqlite:///{template}"
    store = Store(url)
    got = collect(store, "rl")
    # what a run killed after its rename and before its commit leaves behind
    export_records("rl", got.records, tmp_path / "rl", existing_splits=got.existing_splits,
                   not_exported=got.not_exported, workers=1,
                   version=store.code_version())  # fmt: skip
    files = _tree(tmp_path / "rl")
    assert store.export_batches() == []
    res = run_export(store, "rl", tmp_path / "rl", workers=1)
    assert not res.existing and _tree(tmp_path / "rl") == files
    (batch,) = store.export_batches()
    assert batch.content_hash == json.loads(files["manifest.json"])["content_hash"]
    again = run_export(store, "rl", tmp_path / "rl", workers=1)  # and once more: a no-op
    assert again.existing and again.batch_id == batch.id and len(store.export_batches()) == 1
    store.close()


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
