"""Batch vetting (`annotate.vetting`, the `vet` command): JSONL sink, resume after kill -9
(no duplicates, no gaps), bad files, custom sinks, summary, the store sink's batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import launch
from agent.errors import LoupeError
from agent.formats.lamost import write_lamost_fits
from agent.spectrum import Spectrum, SpectrumMeta
from agent.trajectory import Trajectory
from annotate.vetting.runner import VetOptions, read_inputs, vet
from annotate.vetting.sinks import JsonlSink
from commands.vet import main

REPO = Path(__file__).resolve().parent.parent


def _spectrum(i: int) -> Spectrum:
    rng = np.random.default_rng(i)
    wave = 10 ** np.arange(np.log10(3700.0), np.log10(9100.0), 1e-4)
    cont = (wave / 5000.0) ** (-2.0 if i % 2 else 1.0)
    lines = sum(
        0.5 * np.exp(-0.5 * ((wave - c) / 25.0) ** 2) for c in (4102.9, 4341.7, 4862.7, 6564.6)
    )
    flux = cont * (1 - (lines if i % 2 else 0)) + rng.normal(0, 0.03, wave.size)
    ivar = np.full(wave.size, 1 / 0.03**2)
    return Spectrum(wave, flux, ivar=ivar, meta=SpectrumMeta(id=f"cand{i:03d}"))


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("cands")
    rows, ids = ["path,task,id,label"], []
    for i in range(60):
        write_lamost_fits(_spectrum(i), root / f"c{i:03d}.fits")
        ids.append(f"cand{i:03d}")
        rows.append(f"c{i:03d}.fits,wd,cand{i:03d},{'YES' if i % 2 else 'NO'}")
    (root / "broken.fits").write_bytes(b"SIMPLE  = nonsense")
    rows.append("broken.fits,wd,broken,")
    ids.append("broken")
    cat = root / "candidates.csv"
    cat.write_text("\n".join(rows) + "\n")
    return cat, ids


def _args(*argv: str):
    return launch.build_parser("vet").parse_args(list(argv))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_jsonl_sink_cuts_truncated_line_and_refuses_duplicates(tmp_path):
    out = tmp_path / "r.jsonl"
    t1 = Trajectory(id="a", task="wd", verdict="YES", state="done")
    sink = JsonlSink(out)
    sink.write(t1)
    sink.write(t1)  # duplicate offered: ignored
    sink.close()
    with open(out, "ab") as fh:
        fh.write(b'{"id": "b", "task": "wd", "ver')  # a kill in the middle of a write
    sink = JsonlSink(out)
    assert sink.done_keys() == {("a", "wd")} and sink.repaired > 0
    with pytest.raises(LoupeError, match="another vetting run"):
        JsonlSink(out)  # locked while the first is open
    sink.write(Trajectory(id="b", task="wd", state="done"))
    sink.close()
    assert [d["id"] for d in _lines(out)] == ["a", "b"]


def test_inline_run_records_everything_and_reports_bad_files(catalogue, tmp_path, capsys):
    cat, ids = catalogue
    out = tmp_path / "r.jsonl"
    rc = main(
        _args(
            "--catalog",
            str(cat),
            "--out",
            str(out),
            "--workers",
            "1",
            "--limit",
            "12",
            "--no-progress",
        )
    )
    assert rc == 0
    rows = _lines(out)
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    for r in rows:
        assert {"id", "task", "verdict", "confidence", "steps", "state"} <= set(r)
        assert r["state"] == "done" and r["verdict"] in ("YES", "NO")
        assert 0.0 <= r["confidence"] <= 1.0
    printed = capsys.readouterr()
    assert "vetted 12 candidates" in printed.out and "verdicts: YES" in printed.out
    # the broken file: recorded as an error trajectory with the reason; the run goes on
    rc = main(_args("--catalog", str(cat), "--out", str(out), "--workers", "2", "--no-progress"))
    assert rc == 1  # the broken file's line failed; the exit status says so
    rows = _lines(out)
    assert sorted(r["id"] for r in rows) == sorted(ids)
    broken = next(r for r in rows if r["id"] == "broken")
    assert broken["state"] == "error" and "broken.fits" in broken["error"]
    err = capsys.readouterr().err
    assert "already done; resuming" in err and "broken" in err


class ListSink:
    def __init__(self, done=()):
        self.rows: list[Trajectory] = []
        self.done = set(done)
        self.closed = False

    def done_keys(self):
        return set(self.done)

    def write(self, t):
        self.rows.append(t)

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_custom_sink_is_used_and_resumed(catalogue):
    cat, ids = catalogue
    sink = ListSink(done={("cand000", "wd"), ("cand001", "wd")})
    opts = VetOptions(catalog=[str(cat)], limit=5, workers=1)
    candidates, problems = read_inputs(opts)
    stats = vet(candidates, opts, sink)
    assert not problems and (stats.candidates, stats.skipped, stats.n) == (5, 2, 3)
    assert [t.id for t in sink.rows] == ["cand002", "cand003", "cand004"]
    assert not sink.closed  # the caller owns its sink


def test_missing_inputs_and_model_are_clear_errors(capsys, catalogue):
    assert main(_args("--out", "x.jsonl")) == 2
    assert main(_args("--catalog", str(catalogue[0]), "--policy", "hf")) == 2
    assert "needs --model" in capsys.readouterr().err


def _bad_catalogue(cat: Path) -> Path:
    """Three good lines around a missing file, an unknown task and an id given twice."""
    bad = cat.parent / "with-bad-lines.csv"
    bad.write_text(
        "path,task,id\n"
        "c000.fits,wd,cand000\n"
        "gone.fits,wd,gone\n"
        "c001.fits,white_dwarf,cand001\n"
        "c002.fits,wd,cand002\n"
        "c003.fits,wd,cand002\n"
        "c004.fits,wd,cand004\n"
    )
    return bad


def test_bad_lines_are_reported_and_the_rest_vetted(catalogue, capsys, tmp_path):
    cat, _ = catalogue
    out = tmp_path / "r.jsonl"
    argv = ("--catalog", str(_bad_catalogue(cat)), "--workers", "1", "--no-progress")
    assert main(_args(*argv, "--out", str(out))) == 1
    assert [r["id"] for r in _lines(out)] == ["cand000", "cand002", "cand004"]
    err = capsys.readouterr().err
    assert "with-bad-lines.csv line 3: spectrum file not found: gone.fits" in err
    assert "with-bad-lines.csv line 4: unknown task 'white_dwarf'; known tasks: cv" in err
    assert "with-bad-lines.csv line 6: id 'cand002' (task wd) points at" in err
    assert "with-bad-lines.csv line 5 (conflict)" in err
    assert "3 input line(s) skipped" in err


def test_strict_stops_at_the_first_bad_line(catalogue, capsys, tmp_path):
    cat, _ = catalogue
    out = tmp_path / "r.jsonl"
    argv = ("--catalog", str(_bad_catalogue(cat)), "--strict", "--workers", "1", "--no-progress")
    assert main(_args(*argv, "--out", str(out))) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "line 3: spectrum file not found" in err and "line 4" not in err


def test_input_list_with_missing_and_unreadable_files_vets_the_rest(catalogue, tmp_path, capsys):
    cat, _ = catalogue
    fifo = tmp_path / "pipe.fits"
    os.mkfifo(fifo)
    out = tmp_path / "r.jsonl"
    inputs = [cat.parent / "c005.fits", tmp_path / "nope.fits", fifo, cat.parent / "c006.fits"]
    argv = ("--input", *map(str, inputs), "--task", "wd", "--workers", "1", "--no-progress")
    assert main(_args(*argv, "--out", str(out))) == 1
    assert [r["id"] for r in _lines(out)] == ["cand005", "cand006"]
    err = capsys.readouterr().err
    assert "nope.fits: file not found" in err
    assert "pipe.fits: not a regular file (a FIFO)" in err


def test_unknown_task_flag_is_a_usage_error(catalogue, capsys, tmp_path):
    cat, _ = catalogue
    out = tmp_path / "r.jsonl"
    argv = ("--input", str(cat.parent / "c005.fits"), "--task", "bogus", "--no-progress")
    assert main(_args(*argv, "--out", str(out))) == 2
    assert not out.exists()
    assert "unknown task 'bogus'; known tasks: cv, carbon" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_after_kill_minus_9_has_no_duplicates_or_gaps(catalogue, tmp_path):
    cat, ids = catalogue
    out = tmp_path / "r.jsonl"
    cmd = [
        sys.executable,
        "launch.py",
        "vet",
        "--catalog",
        str(cat),
        "--out",
        str(out),
        "--workers",
        "2",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 8:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and its workers, mid-run
    proc.wait()
    first = out.read_bytes().count(b"\n")
    assert 8 <= first < len(ids), "the run should have been interrupted part way"
    with open(out, "ab") as fh:  # and a line torn in half by the kill
        fh.write(b'{"id": "cand059", "task": "wd", "steps": [')
    rerun = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    # exit 1: the catalogue's one broken file is reported again; everything else was vetted
    assert rerun.returncode == 1, rerun.stderr[-2000:]
    assert "broken.fits" in rerun.stderr
    rows = _lines(out)  # every line parses: the torn one was cut
    keys = [(r["id"], r["task"]) for r in rows]
    assert len(keys) == len(set(keys)), "duplicates after resume"
    assert sorted(r["id"] for r in rows) == sorted(ids), "gaps after resume"


def test_rules_path_imports_no_torch_or_http_client(catalogue, tmp_path):
    cat, _ = catalogue
    code = (
        "import sys, launch; "
        f"rc = launch.main(['vet', '--catalog', {str(cat)!r}, '--limit', '2', "
        f"'--workers', '1', '--no-progress', '--out', {str(tmp_path / 'r.jsonl')!r}]); "
        "heavy = [m for m in ('torch', 'transformers', 'httpx', 'vllm') if m in sys.modules]; "
        "print(heavy); sys.exit(rc or bool(heavy))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr[-1500:]


def _vet_db(*argv: str) -> int:
    return main(_args(*argv))


def _store_rows(db: Path) -> list[tuple[str, str, int]]:
    import sqlite3

    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT c.key, t.name, count(*) FROM trajectory tr JOIN candidate c "
            "ON c.id = tr.candidate_id JOIN task t ON t.id = c.task_id GROUP BY c.id ORDER BY 1, 2"
        ).fetchall()


def test_vet_db_alone_vets_the_stores_pending_candidates(catalogue, tmp_path, capsys):
    from dataclasses import replace

    from agent.candidates import read_candidates
    from db.store import Store

    cat, ids = catalogue
    db = tmp_path / "loupe.db"
    assert _vet_db("--db", str(db), "--no-progress") == 2  # no store there: none is made
    assert "no database there" in capsys.readouterr().err and not db.exists()
    Store(db).close()
    assert _vet_db("--db", str(db), "--no-progress") == 2  # an empty store: nothing to vet
    assert "has no candidates" in capsys.readouterr().err
    refs = read_candidates([str(cat)])[:8]
    store = Store(str(db))
    store.add_candidates(refs + [replace(r, task="cv") for r in refs[:2]])
    store.close()
    common = ("--policy", "rules", "--workers", "1", "--no-progress", "--db", str(db))
    # a run that recorded 3 from the catalogue; the store supplies the other wd ones only
    assert _vet_db("--catalog", str(cat), "--limit", "3", *common) == 0
    assert _vet_db("--task", "wd", *common) == 0
    assert "vetted 5 candidates" in capsys.readouterr().out
    assert _store_rows(db) == [(r.id, "wd", 1) for r in refs]
    assert _vet_db(*common) == 0  # then the cv ones, nothing twice
    assert "vetted 2 candidates" in capsys.readouterr().out
    want = [(r.id, "wd", 1) for r in refs] + [(r.id, "cv", 1) for r in refs[:2]]
    assert _store_rows(db) == sorted(want)
    assert _vet_db(*common) == 0
    out = capsys.readouterr().out  # nothing left, and it says why
    assert "vetted 0 candidates" in out
    assert ("nothing to vet: all 10 candidates in the store already have a finished "
            "trajectory from a run like this one (policy rules") in out  # fmt: skip


def test_store_sink_commits_in_batches(tmp_path):
    from annotate.vetting.sinks import StoreSink
    from db.store import Store, StoreError
    from tests.store_factory import traj

    db = tmp_path / "s.db"
    sink = StoreSink(Store(str(db)), policy="rules", batch=4, seconds=3600)
    for i in range(3):
        sink.write(traj(f"b{i}", 0.9))
    assert _store_rows(db) == []  # waiting for the batch
    sink.write(traj("b3", 0.1))
    assert len(_store_rows(db)) == 4  # one transaction for the four
    sink.write(traj("b4", 0.2))
    sink.flush()
    assert len(_store_rows(db)) == 5 and sink.done_keys() >= {("b4", "cv")}
    # a batch the store refuses keeps its good trajectories and raises the refusal
    bad = traj("b5", 0.3)
    bad.verdict = "MAYBE"
    for t in (traj("b6", 0.4), bad, traj("b7", 0.6)):
        sink.write(t)
    with pytest.raises(StoreError, match="b5: verdict must be"):
        sink.close()
    assert [k for k, _, _ in _store_rows(db)] == ["b0", "b1", "b2", "b3", "b4", "b6", "b7"]
    timed = StoreSink(Store(str(db)), policy="rules", batch=100, seconds=0.0)
    timed.write(traj("b8", 0.9))  # past its seconds: committed at once
    assert len(_store_rows(db)) == 8
    timed.close()


class _BatchRefusingStore:
    """A store whose multi-trajectory transactions fail (as a lock or a dropped connection
    might fail one) while single ones go in."""

    def __init__(self, store):
        self.store = store
        self.refused = 0

    def record_trajectories(self, trajs, run_id=None, actor="vet"):
        if len(trajs) > 1:
            self.refused += 1
            raise OSError("the batch's transaction failed")
        return self.store.record_trajectories(trajs, run_id, actor=actor)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_store_sink_flush_raises_nothing_when_each_retry_succeeds(tmp_path):
    from annotate.vetting.sinks import StoreSink
    from db.store import Store
    from tests.store_factory import traj

    db = tmp_path / "s.db"
    store = _BatchRefusingStore(Store(str(db)))
    sink = StoreSink(store, policy="rules", batch=100, seconds=3600)
    for i in range(3):
        sink.write(traj(f"r{i}", 0.2 * i))
    sink.flush()  # the batch failed, each one alone went in: nothing to raise
    assert store.refused == 1
    assert [k for k, _, _ in _store_rows(db)] == ["r0", "r1", "r2"]
    sink.close()


def test_store_sink_flush_keeps_the_run_groups_after_a_refusal(tmp_path):
    from annotate.vetting.sinks import StoreSink
    from db.store import Store, StoreError
    from tests.store_factory import traj

    db = tmp_path / "s.db"
    sink = StoreSink(Store(str(db)), policy="rules", batch=100, seconds=3600)
    bad = traj("g1", 0.3)
    bad.verdict = "MAYBE"
    first = [traj("g0", 0.9), bad]  # one run (renderer fast), refused in part
    later = [traj("g2", 0.1), traj("g3", 0.8)]
    for t in later:
        t.renderer = "speco3"  # another run: another group
    for t in first + later:
        sink.write(t)
    with pytest.raises(StoreError, match="g1: verdict must be"):
        sink.flush()
    assert [k for k, _, _ in _store_rows(db)] == ["g0", "g2", "g3"]  # the later group too
    sink.close()  # nothing left waiting, nothing raised again
    assert len(_store_rows(db)) == 3


def test_vet_db_refuses_an_id_the_store_gives_another_file_as_ingest_does(
    catalogue, tmp_path, capsys
):
    """An id the store holds for one file, offered by a catalogue for another: `vet --db`
    refuses the line with `ingest`'s words and exit status, and records nothing under the
    stored candidate."""
    cat, _ = catalogue
    db = tmp_path / "loupe.db"
    stored = tmp_path / "stored.csv"
    stored.write_text(f"path,task,id\n{cat.parent / 'c000.fits'},wd,cand000\n")
    assert launch.main(["ingest", str(stored), "--db", str(db)]) == 0
    other = tmp_path / "other.csv"
    other.write_text(
        f"path,task,id\n{cat.parent / 'c001.fits'},wd,cand000\n{cat.parent / 'c002.fits'},wd,cand002\n"
    )
    capsys.readouterr()
    rc_ingest = launch.main(["ingest", str(other), "--db", str(db), "--no-read"])
    ingest_err = capsys.readouterr().err
    conflict = [x for x in ingest_err.splitlines() if "cand000" in x]
    assert rc_ingest == 1 and len(conflict) == 1 and "c001.fits" in conflict[0]

    fresh = tmp_path / "fresh.db"
    assert launch.main(["ingest", str(stored), "--db", str(fresh)]) == 0
    capsys.readouterr()
    argv = ["vet", "--catalog", str(other), "--db", str(fresh), "--workers", "1"]
    rc_vet = launch.main([*argv, "--no-progress", "--out", str(tmp_path / "unused.jsonl")])
    vet_err = capsys.readouterr().err
    assert rc_vet == rc_ingest
    refused = [x for x in vet_err.splitlines() if "cand000" in x]
    assert refused == [conflict[0].replace("ingest: ", "vet: ", 1)]
    assert _store_rows(fresh) == [("cand002", "wd", 1)]  # nothing under the stored cand000
    assert launch.main([*argv, "--keep-first", "--no-progress"]) == 0
    assert "vet: kept the first: " in capsys.readouterr().err  # as `ingest --keep-first`
    assert _store_rows(fresh) == [("cand002", "wd", 1)]
