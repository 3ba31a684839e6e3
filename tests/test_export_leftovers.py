"""An export killed outright (kill -9) leaves its staging folders and worker processes:
the workers die with it, and the folders go at the next start, the next export's or the
server's, whatever the next export's folder is named; a live export's are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, kill -9")

STAGING = """
import sys, time
from pathlib import Path
from annotate.export.manifest import staged
with staged(Path(sys.argv[1])) as (partial, scratch):
    (partial / "rows.jsonl").write_text("half")
    (scratch / "shard.arrow").write_text("half")
    print("ready", flush=True)
    time.sleep(120)
"""

WORKERS = """
import threading, time
from annotate.export import pipeline

def slow(job):
    time.sleep(120)

pipeline.build = slow
jobs = [pipeline.Job(i, "rl", None, "fast") for i in range(64)]
threading.Timer(2.0, lambda: print("ready", flush=True)).start()
list(pipeline.run_jobs(jobs, 2))
"""


def start(script: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if (
                d.name.isdigit()
                and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
            ):
                out.append(int(d.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def staging(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.endswith((".partial", ".scratch"))}


def test_a_killed_exports_folders_go_at_the_next_export_and_a_live_ones_stay(tmp_path):
    from annotate.export.manifest import staged

    exports = tmp_path / "exports"
    kill9(start(STAGING, str(exports / "rl-killed")))
    assert staging(exports) == {".rl-killed.partial", ".rl-killed.scratch"}
    live = start(STAGING, str(exports / "sft-live"))
    try:
        with staged(exports / "pairs-next") as (partial, _):  # the next export, another name
            (partial / "rows.jsonl").write_text("whole")
        assert (exports / "pairs-next" / "rows.jsonl").read_text() == "whole"
        assert staging(exports) == {".sft-live.partial", ".sft-live.scratch"}
    finally:
        kill9(live)
    # a folder some other program named alike is not ours: it stays
    (exports / ".notes.partial").mkdir()
    from app.main import make_context

    ctx = make_context(f"sqlite:///{tmp_path / 'l.db'}", data_roots=[str(tmp_path / "data")],
                       export_dir=str(exports))  # fmt: skip
    ctx.store.close()
    assert staging(exports) == {".notes.partial"}  # serve's start swept the killed one's
    assert not [p for p in exports.iterdir() if p.name.endswith(".lock")]


def test_export_workers_die_with_a_killed_export():
    parent = start(WORKERS)
    workers = children(parent.pid)
    try:
        assert len(workers) >= 2, workers
        kill9(parent)
        deadline = time.time() + 15
        while time.time() < deadline and any(alive(w) for w in workers):
            time.sleep(0.2)
        assert not any(alive(w) for w in workers), [w for w in workers if alive(w)]
    finally:
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)
