"""`vet --ray`: the demo on a local 2-CPU Ray cluster gives the single-process run's records,
a worker lost mid-run costs nothing (every candidate recorded once), a candidate that kills
its worker every time is recorded as failed after MAX_ATTEMPTS tries, the store resumes and
supplies its own pending candidates, Ray giving up part-way is said in one line (a re-run
resumes), the `openai` policy drives OpenAI-compatible endpoints from the actors, and `vet`
without `--ray` never imports Ray."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import launch
from annotate.vetting import cluster
from commands.vet import main

ray = pytest.importorskip("ray", reason="Ray is the optional 'cluster' extra")

REPO = Path(__file__).resolve().parent.parent
TIMINGS = ("seconds", "started_at")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    labels = root / "labels.csv"
    # in this process: a second interpreter would import Loupe again for a few files
    argv = ["demo", "--out", str(root), "--labels", str(labels), "--n-per-class", "2"]
    assert launch.main(argv) == 0
    return labels


@pytest.fixture(scope="module")
def local_cluster():
    # `--ray local` joins the Ray already started in this process: a 2-CPU cluster.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def single(demo, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("single") / "one.jsonl"
    assert _vet(demo, out, "--workers", "1") == 0
    return _records(out)


def build_parser():
    return launch.build_parser("vet")


def _vet(catalog: Path, out: Path, *extra: str) -> int:
    argv = ["--catalog", str(catalog), "--policy", "rules", "--no-progress", "--out", str(out)]
    return main(build_parser().parse_args(argv + list(extra)))


def _records(path: Path) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    keys = [(r["id"], r["task"]) for r in rows]
    assert len(keys) == len(set(keys)), "a candidate recorded twice"
    return {k: _without_timings(r) for k, r in zip(keys, rows)}


def _without_timings(record: dict) -> dict:
    record = {k: v for k, v in record.items() if k not in TIMINGS}
    record["steps"] = [{k: v for k, v in s.items() if k not in TIMINGS} for s in record["steps"]]
    return record


@pytest.mark.slow
def test_demo_on_ray_matches_the_single_process_run(demo, local_cluster, single, tmp_path):
    out = tmp_path / "ray.jsonl"
    assert _vet(demo, out, "--ray", "local") == 0
    got = _records(out)
    assert len(single) == 32 and got.keys() == single.keys()
    assert {k: r["verdict"] for k, r in got.items()} == {k: r["verdict"] for k, r in single.items()}
    assert got == single  # the whole trajectory: every zoom, reasoning, confidence


@pytest.mark.slow
def test_a_worker_lost_mid_run_costs_nothing(demo, local_cluster, single, tmp_path, monkeypatch):
    marker = tmp_path / "exited"
    monkeypatch.setenv(cluster.EXIT_ONCE_ENV, str(marker))
    out = tmp_path / "ray.jsonl"
    assert _vet(demo, out, "--ray", "local", "--ray-actors", "2") == 0
    assert marker.exists(), "no worker process exited: the test did not test recovery"
    got = _records(out)  # asserts each candidate is recorded once
    assert got == single  # the lost batch was re-run, not recorded as failed


@pytest.mark.slow
def test_a_candidate_that_always_kills_its_worker_is_recorded_failed(
    demo, local_cluster, single, tmp_path, monkeypatch
):
    poison = sorted(single)[5]
    monkeypatch.setenv(cluster.EXIT_ON_ENV, poison[0])
    out = tmp_path / "ray.jsonl"
    assert _vet(demo, out, "--ray", "local", "--ray-actors", "2") == 1  # one failed
    got = _records(out)  # each candidate once, the poisoned one too
    assert got.keys() == single.keys()
    bad = got.pop(poison)
    assert bad["state"] == "error" and bad["verdict"] is None
    assert f"died on each of {cluster.MAX_ATTEMPTS} tries" in bad["error"]
    assert got == {k: r for k, r in single.items() if k != poison}  # the rest as ever


@pytest.mark.slow
def test_ray_giving_up_part_way_says_so_in_one_line_and_a_rerun_resumes(
    demo, local_cluster, single, tmp_path, monkeypatch, capsys
):
    """Ray Data raises its own exception types (not RayError) when a node or one of Ray's
    agents dies: the run stops with one line saying what finished is kept and that the
    same command resumes, never a traceback."""
    from ray.data.exceptions import SystemException

    real = ray.data.Dataset.iter_rows

    def dies_after_three(self, *args, **kwargs):
        for i, row in enumerate(real(self, *args, **kwargs)):
            if i == 3:
                raise SystemException("the local raylet died")
            yield row

    monkeypatch.setattr(ray.data.Dataset, "iter_rows", dies_after_three)
    out = tmp_path / "ray.jsonl"
    argv = ["vet", "--catalog", str(demo), "--policy", "rules", "--no-progress"]
    argv += ["--out", str(out), "--ray", "local", "--ray-actors", "2"]
    assert launch.main(argv) == 2
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("vet:")]
    assert said == [
        "vet: the Ray run stopped (SystemException: the local raylet died); what finished "
        "is recorded, run the same command again to vet the rest"
    ]
    assert len(_records(out)) == 3  # what finished before the failure is kept
    monkeypatch.undo()
    assert launch.main(argv) == 0
    assert _records(out) == single  # the re-run vetted the rest, none twice


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds Ray's agent in /proc")
def test_killing_rays_dashboard_agent_is_said_in_one_line(demo, tmp_path):
    """The dashboard agent killed mid-run stops the raylet, and Ray ends the driver from C++
    (status 1, nothing to catch): a Loupe line says what happened and that a re-run
    resumes, and the re-run does."""
    import signal
    import time

    # Six candidates per demo line (ids apart), so that the run is still going when the
    # raylet stops: 32 were done on a loaded machine before the kill took effect.
    with demo.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    n = 6 * len(rows)
    many = demo.parent / "six_times.csv"
    with many.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "id": f"{r['id']}-{k}"} for k in range(6) for r in rows)
    out = tmp_path / "ray.jsonl"
    cmd = [sys.executable, "launch.py", "vet", "--catalog", str(many), "--policy", "rules"]
    cmd += ["--no-progress", "--out", str(out), "--ray", "local", "--ray-actors", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    killed = None
    try:
        deadline = time.time() + 240
        while proc.poll() is None and time.time() < deadline and killed is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 3:
                for raylet in _children(proc.pid):
                    agents = {n: p for p, n in cluster._agents_of(raylet).items()}
                    if "DashboardAgent" in agents:
                        killed = agents["DashboardAgent"]
                        os.kill(killed, signal.SIGKILL)
            time.sleep(0.1)
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            raise AssertionError(
                f"the run did not end 240 s after {killed=}: {err[-3000:]}"
            ) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert killed, "the dashboard agent was not found before the run ended: " + err[-2000:]
    said = [x for x in err.splitlines() if "annotate.vetting" in x and "ERROR" in x]
    # Ray's core ends the driver (status 1); on a loaded machine Python may get Ray's
    # error first, and the run stops as a Loupe error (status 2), without a second line.
    assert proc.returncode in (1, 2) and len(said) == 1, err[-3000:]
    assert "DashboardAgent died" in said[0] and "run the same command again" in said[0]
    done = len(_records(out))
    # The re-run resumes from the sink, with or without Ray; without, it does not depend on
    # a second local cluster starting in time on a loaded machine.
    cmd = cmd[: cmd.index("--ray")] + ["--workers", "1"]
    rerun = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert 0 < done < n
    assert f"{done} of {n} candidates already done; resuming" in rerun.stderr
    assert len(_records(out)) == n  # each once


@pytest.mark.slow
def test_store_pending_candidates_on_ray(demo, local_cluster, single, tmp_path):
    from db.store import Store

    db = tmp_path / "loupe.db"
    store = Store(str(db))
    from agent.candidates import read_candidates

    store.add_candidates(read_candidates([str(demo)]))
    store.close()

    def run(*extra: str) -> int:
        argv = ["--policy", "rules", "--no-progress", "--db", str(db), "--ray", "local"]
        return main(build_parser().parse_args(argv + list(extra)))

    tasks = sorted({t for _, t in single})
    assert run("--task", tasks[0]) == 0  # only that task's candidates
    assert _store_verdicts(db) == {
        f"{i}/{t}": r["verdict"] for (i, t), r in single.items() if t == tasks[0]
    }
    assert run() == 0  # the rest, none twice
    assert _store_verdicts(db) == {f"{i}/{t}": r["verdict"] for (i, t), r in single.items()}


def _store_verdicts(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT c.key || '/' || t.name, tr.verdict FROM trajectory tr "
            "JOIN candidate c ON c.id = tr.candidate_id JOIN task t ON t.id = c.task_id"
        ).fetchall()
    assert len(rows) == len(dict(rows)), "a candidate recorded twice"
    return dict(rows)


@pytest.mark.slow
def test_store_sink_resumes_and_records_each_candidate_once(demo, local_cluster, single, tmp_path):
    from db.store import Store

    db = tmp_path / "loupe.db"
    Store(db).close()  # vet --db records into a store that exists

    def run(*extra: str) -> int:
        argv = ["--catalog", str(demo), "--policy", "rules", "--no-progress", "--db", str(db)]
        return main(build_parser().parse_args(argv + ["--ray", "local", *extra]))

    assert run("--limit", "10") == 0  # a run stopped part-way
    assert run() == 0  # the re-run completes the rest
    with sqlite3.connect(db) as con:
        per_candidate = con.execute(
            "SELECT candidate_id, count(*) FROM trajectory GROUP BY candidate_id"
        ).fetchall()
        verdicts = dict(
            con.execute(
                "SELECT c.key || '/' || t.name, tr.verdict FROM trajectory tr "
                "JOIN candidate c ON c.id = tr.candidate_id JOIN task t ON t.id = c.task_id"
            ).fetchall()
        )
    assert len(per_candidate) == len(single) and {n for _, n in per_candidate} == {1}
    assert verdicts == {f"{i}/{t}": r["verdict"] for (i, t), r in single.items()}


@pytest.mark.slow
def test_openai_policy_drives_endpoints_from_actors(demo, local_cluster, tmp_path):
    from tests.test_policy_openai import ANSWER, ZOOM, Server, ok

    def reply(body: dict):  # zoom once, then answer
        return ok(ZOOM) if len(body["messages"]) <= 2 else ok(ANSWER)

    servers = [Server(), Server()]
    try:
        for s in servers:
            s.default = reply
        out = tmp_path / "openai.jsonl"
        argv = ["--catalog", str(demo), "--policy", "openai", "--model", "spec-o3-7b"]
        argv += ["--base-url", ",".join(s.url for s in servers), "--renderer", "fast"]
        argv += ["--samples", "1", "--concurrency", "4", "--timeout", "10", "--limit", "12"]
        argv += ["--ray", "local", "--ray-actors", "2", "--no-progress", "--out", str(out)]
        assert main(build_parser().parse_args(argv)) == 0
        got = _records(out)
        assert len(got) == 12
        assert {r["state"] for r in got.values()} == {"done"}
        assert {r["verdict"] for r in got.values()} == {"YES"}
        assert all(len(r["steps"]) == 2 for r in got.values())
        assert all(s.requests for s in servers), "an endpoint got no episode"
        assert sum(len(s.requests) for s in servers) == 24  # two turns per episode
    finally:
        for s in servers:
            s.httpd.shutdown()
            s.httpd.server_close()


def test_pool_plan_follows_policy_and_cluster():
    args = build_parser().parse_args(["--input", "x", "--ray"])
    plan = cluster.pool_plan(args, 1000, {"CPU": 8.0})
    assert plan["actors"] == 8 and plan["num_gpus"] == 0 and plan["batch_size"] == 16
    assert cluster.pool_plan(args, 3, {"CPU": 8.0})["actors"] == 3  # no idle actors
    args = build_parser().parse_args(["--input", "x", "--policy", "vllm", "--model", "m", "--ray"])
    plan = cluster.pool_plan(args, 1000, {"CPU": 64.0, "GPU": 4.0})
    assert plan["actors"] == 4 and plan["num_gpus"] == 1
    with pytest.raises(cluster.ClusterError, match="needs GPUs"):
        cluster.pool_plan(args, 1000, {"CPU": 64.0})
    args = build_parser().parse_args(
        ["--input", "x", "--policy", "openai", "--base-url", "http://a/v1, http://b/v1", "--ray"]
    )
    assert cluster.pool_plan(args, 1000, {"CPU": 8.0})["actors"] == 2


def test_vet_without_ray_never_imports_it(demo, tmp_path):
    code = (
        "import sys, launch; "
        f"launch.main(['ingest', {str(demo)!r}, '--db', {str(tmp_path / 'x.db')!r}]); "
        f"rc = launch.main(['vet', '--catalog', {str(demo)!r}, '--limit', '3', "
        f"'--workers', '1', '--no-progress', '--db', {str(tmp_path / 'x.db')!r}]); "
        "print('ray' in sys.modules); sys.exit(rc or 'ray' in sys.modules)"
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


@pytest.fixture
def fake_node(monkeypatch):
    """A stand-in raylet process recorded as Ray records this process's local node, a
    short grace, and `os._exit` replaced: yields (raylet, the statuses it was called with)."""
    import types

    import ray._private.worker as ray_worker

    raylet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    node = types.SimpleNamespace(all_processes={"raylet": [types.SimpleNamespace(process=raylet)]})
    monkeypatch.setattr(ray_worker, "_global_node", node, raising=False)
    monkeypatch.setattr(cluster, "NODE_GONE_GRACE_S", 0.5)
    ended: list[int] = []
    monkeypatch.setattr(cluster.os, "_exit", ended.append)
    yield raylet, ended
    raylet.kill()
    raylet.wait()


def test_a_process_whose_raylet_is_gone_is_ended_not_left_hanging(fake_node, caplog):
    """The watch on `--ray local`'s node: a raylet that exits is said once, and should Ray
    not end the driver after it (it always should), the watch ends it with status 1."""
    raylet, ended = fake_node
    stop, said_it = cluster._watch_local_node()
    try:
        time.sleep(0.3)
        assert not ended and not [r for r in caplog.records if r.levelname == "ERROR"]
        assert not said_it.is_set()
        raylet.kill()
        raylet.wait()
        deadline = time.time() + 10
        while not ended and time.time() < deadline:
            time.sleep(0.1)
        assert ended == [1]
        said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(said) == 1 and "its raylet exited" in said[0]
        assert said_it.is_set()  # so the run's own error handler says nothing more
    finally:
        stop.set()


def test_the_watch_ends_nothing_once_the_run_is_over(fake_node):
    raylet, ended = fake_node
    stop, said_it = cluster._watch_local_node()
    stop.set()  # the run ended and shuts its node down on purpose
    raylet.kill()
    raylet.wait()
    time.sleep(1.5)
    assert ended == [] and not said_it.is_set()
