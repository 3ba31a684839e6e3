"""Bad input on the command line: database URLs and files, a locked database, export folders
that cannot be written, a full disk. Each ends in one line naming the problem and exit 2,
never a traceback, and leaves what was there as it was."""

from __future__ import annotations

import pytest


def _one_line_error(capsys, rc: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)
    return err


def test_bad_database_urls_end_in_one_line(tmp_path, capsys):
    import launch

    text = tmp_path / "notes.txt"
    text.write_text("these are notes, not a database\n" * 50)
    cases = {
        str(text): ("not a SQLite database", str(text)),
        "nosuch://x": ("no database driver", "nosuch"),
        "postgresql+nodriver://u:pw@host/db": ("no database driver", "***"),
        str(tmp_path): ("cannot open the database file",),
        # a command other than ingest, demo and serve makes no store (nor its folder)
        str(text / "sub" / "x.db"): ("no database there", str(text / "sub" / "x.db")),
    }
    from db.store import DatabaseError, Store

    for db, words in cases.items():
        # the store names the database and the problem; the command names its flag
        with pytest.raises(DatabaseError) as raised:
            Store(db)
        assert "--" not in str(raised.value) and "launch" not in str(raised.value)
        rc = launch.main(["export", "rl", "--db", db, "--out", str(tmp_path / "o")])
        _one_line_error(capsys, rc, *words, "given with --db")
        rc = launch.main(["add-expert", "zed", "--db", db])
        assert rc != 0 and "Traceback" not in capsys.readouterr().err
    assert text.read_text().startswith("these are notes")  # left as it was
    assert not (tmp_path / "o").exists()


def test_a_database_locked_by_another_process(tmp_path, capsys, monkeypatch):
    import subprocess
    import sys

    import launch
    from db.store import Store, StoreError

    db = tmp_path / "locked.db"
    Store(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match="locked by another process"):
            Store(db, busy_timeout_ms=200)
        monkeypatch.setitem(Store.__init__.__kwdefaults__, "busy_timeout_ms", 200)
        rc = launch.main(["export", "rl", "--db", str(db), "--out", str(tmp_path / "o")])
        _one_line_error(capsys, rc, "locked by another process", "retry")
    finally:
        holder.kill()
        holder.wait()


def test_export_out_that_cannot_be_written(tmp_path, capsys):
    import launch
    from db.store import Store

    db = tmp_path / "e.db"
    Store(db).close()
    a_file = tmp_path / "taken.txt"
    a_file.write_text("mine")
    rc = launch.main(["export", "rl", "--db", str(db), "--out", str(a_file)])
    _one_line_error(capsys, rc, "is a file, not a folder", str(a_file))
    assert a_file.read_text() == "mine"
    rc = launch.main(["export", "rl", "--db", str(db), "--out", str(a_file / "inside")])
    _one_line_error(capsys, rc, "could not write the export", "writable --out")
    with Store(db) as store:
        assert store.export_batches() == []


def test_disk_full_during_export(tmp_path, capsys, monkeypatch):
    import errno

    import launch
    from annotate.export import pipeline
    from db.store import Store

    db = tmp_path / "e.db"
    Store(db).close()

    def full(folder, manifest):
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "manifest.json"))

    monkeypatch.setattr(pipeline, "write_manifest", full)
    out = tmp_path / "exports" / "rl-1"
    rc = launch.main(["export", "rl", "--db", str(db), "--out", str(out)])
    _one_line_error(capsys, rc, "No space left on device", str(out), "free space")
    assert not out.exists() and list(out.parent.iterdir()) == []  # nothing half-written
    with Store(db) as store:
        assert store.export_batches() == []
