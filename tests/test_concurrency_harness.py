"""The shared thread harness reports what its workers did wrong."""

from __future__ import annotations

import threading

import pytest

from tests.concurrency import run_threads


def test_workers_run_together_and_their_errors_surface():
    seen: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        with lock:
            seen.append(i)
        if i == 2:
            raise ValueError("worker two failed")

    with pytest.raises(AssertionError, match=r"work\(2,\) raised:(.|\n)*worker two failed"):
        run_threads(work, [(i,) for i in range(4)], barrier=True, timeout=10)
    assert sorted(seen) == [0, 1, 2, 3]  # one failure does not stop the others


def test_a_worker_past_the_deadline_is_named():
    release = threading.Event()

    def hang() -> None:
        release.wait(30)

    try:
        with pytest.raises(AssertionError, match="still running after 0 s: hang-0"):
            run_threads(hang, [()], timeout=0.2)
    finally:
        release.set()
