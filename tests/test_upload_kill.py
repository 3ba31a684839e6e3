"""A server killed (-9) while an upload is being vetted: the store is intact and the upload
is cleanly absent from it (its candidates go in only once vetted); the vet worker does not
outlive the server; the same file uploaded again is vetted and added."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.app_support import context, seeded_copy
from tests.test_upload_memory import big_fits_gz

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys
from pathlib import Path
from app import context as app_context
from app.main import make_context
from app.pages import upload as upload_page
db, data, path = sys.argv[1:4]
ctx = make_context(f"sqlite:///{db}", data_roots=[data], export_dir=str(Path(db).parent / "x"))
print("uploading", flush=True)
print(upload_page.ingest_upload(ctx, app_context.expert_for(ctx, None), [path], "cv"), flush=True)
"""


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out |= {int(c) for c in text}
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_server_killed_while_vetting_an_upload_leaves_the_store_as_it_was(
    tmp_path_factory, tmp_path
):
    root = seeded_copy(tmp_path_factory, tmp_path)
    db = tmp_path / "loupe.db"
    data = tmp_path / "data"
    data.mkdir()
    path = big_fits_gz(tmp_path, 1, n=3_000_000)  # the rules take several seconds on it
    before = sqlite3.connect(db).execute("select count(*) from candidate").fetchone()[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOUPE_VET_WORKERS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(db), str(data), str(path)],
        cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers: set[int] = set()
    try:
        # wait for the vetting: a second worker (the vet pool's) beside the read one(s)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            copies = list((data / "uploads").glob("*big01*")) if (data / "uploads").exists() else []
            kids = _children(proc.pid)
            if copies and len(kids) >= 2:
                workers = kids
                time.sleep(2.0)  # well into the vetting
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert workers, "the vetting never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert con.execute("select count(*) from candidate").fetchone()[0] == before
    assert con.execute("select count(*) from candidate where key like '%big01%'").fetchone()[0] == 0
    con.close()
    # the workers follow their server out (a vetting left running would burn a core)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.5)
    assert not any(_alive(w) for w in workers), "a worker outlived its server"
    # the same file again: vetted and added
    ctx = context(tmp_path_factory, tmp_path / "again")
    try:
        from app import context as app_context
        from app.pages import upload as upload_page

        out = upload_page.ingest_upload(ctx, app_context.expert_for(ctx, None), [str(path)], "cv")
        assert "1 candidate(s) vetted" in out, out
        (c,) = [c for c in ctx.store.list_candidates(limit=1000) if "big01" in c.key]
        assert ctx.store.trajectory(c.trajectory_id).state in ("done", "max_turns")
    finally:
        ctx.store.close()
    assert root.exists()
