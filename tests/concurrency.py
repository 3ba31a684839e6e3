"""The harness of the concurrency tests: one function run in several threads at once.

Exceptions in a worker thread would otherwise vanish (a thread prints them and ends); here
they are collected with their tracebacks and raised in the test's thread, together with any
worker still running at the deadline.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any


def run_threads(
    target: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    *,
    timeout: float = 120.0,
    barrier: bool = False,
) -> None:
    """Run `target(*a)` for every `a` in `args`, each in its own thread, and wait for all.

    `barrier`: the workers start their work together (the widest window for a race).
    Raises AssertionError naming every worker that raised (with its traceback) or was still
    running after `timeout` seconds (counted from the start, not per thread).
    """
    failures: list[str] = []
    lock = threading.Lock()
    gate = threading.Barrier(len(args)) if barrier else None

    def run(a: tuple[Any, ...]) -> None:
        try:
            if gate is not None:
                gate.wait(timeout)
            target(*a)
        except BaseException:  # surfaced in the test's thread below
            with lock:
                failures.append(f"{target.__name__}{a!r} raised:\n{traceback.format_exc()}")

    threads = [
        threading.Thread(target=run, args=(a,), name=f"{target.__name__}-{i}", daemon=True)
        for i, a in enumerate(args)
    ]
    deadline = time.monotonic() + timeout
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        failures.append(f"still running after {timeout:.0f} s: {', '.join(stuck)}")
    assert not failures, "\n".join(failures[:5])
