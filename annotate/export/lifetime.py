"""What a killed export leaves behind, and how the next start clears it.

An export writes into `.NAME.partial` and `.NAME.scratch` beside its folder and renames the
partial folder when complete (`manifest.staged`). A run killed outright (kill -9, the
machine's OOM killer) leaves both; the app names each export folder afresh, so the next
run never reuses those names. Each run therefore holds an advisory lock on `.NAME.lock`
while it writes (`hold`), released by the kernel however the process ends, and removes
the file when done; `sweep(folder)` (at `serve` start and before each export) removes the
staging folders of every name whose lock file is there and held by nobody: a live
export's folders are never touched, nor folders some other program named alike.

Its worker processes (the rendering pool) die with the process that started them
(`die_with_parent`): forked from it, they hold its open files (the database among them),
and an orphan would keep rendering for nobody.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIXES = (".partial", ".scratch")
LOCK = ".lock"
PARENT_POLL_SECONDS = 0.5


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}{LOCK}"


def staging(out: Path) -> tuple[Path, ...]:
    """The folders an export of `out` writes before its rename (`SUFFIXES`' order:
    partial, scratch), beside it."""
    return tuple(out.parent / f".{out.name}{s}" for s in SUFFIXES)


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextmanager
def hold(out: Path) -> Iterator[None]:
    """Hold `out`'s staging lock while an export writes it (waits for another run writing
    the same folder to finish)."""
    import fcntl

    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        try:
            path.unlink()
        except OSError:
            pass
        os.close(fd)  # closing releases the lock


def sweep(folder: str | Path) -> list[Path]:
    """Remove the staging folders a killed export left in `folder` (those whose lock no
    live process holds); returns what was removed. Never raises: a folder that cannot be
    read or removed is left, with a warning."""
    folder = Path(folder)
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    names = {
        e.name[1 : -len(s)]
        for e in entries
        for s in SUFFIXES
        if e.name.startswith(".") and e.name.endswith(s) and e.is_dir()
    }
    for name in sorted(names):
        out = folder / name
        try:
            # only an export's own leftovers: its lock file says a run of ours made them
            fd = os.open(lock_path(out), os.O_RDWR)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot check the leftovers of export %s: %s", out, exc)
            continue
        try:
            if not _try_lock(fd):
                continue  # an export is writing it now
            for left in staging(out):
                if left.is_dir():
                    shutil.rmtree(left, ignore_errors=True)
                    if not left.exists():
                        removed.append(left)
                    else:
                        log.warning("could not remove %s, left by a killed export", left)
            lock_path(out).unlink(missing_ok=True)
        finally:
            os.close(fd)
    if removed:
        log.warning("removed %d folder(s) a killed export left: %s", len(removed),
                    ", ".join(p.name for p in removed))  # fmt: skip
    return removed


def die_with_parent(parent: int) -> None:
    """Make this (worker) process end when `parent` does: the kernel's parent-death
    signal on Linux, and everywhere a thread that watches the parent's pid."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="loupe-parent-watch").start()
