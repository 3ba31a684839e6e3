"""Where finished trajectories go: the `Sink` protocol, a JSONL file (`JsonlSink`) and the
store (`StoreSink`). A sink's `done_keys` is what makes a run resumable."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

from agent.errors import LoupeError
from agent.trajectory import Trajectory

log = logging.getLogger(__name__)

# The store sink's batch: trajectories per transaction, and the longest a finished one
# waits for its batch (checked as the next arrives). A kill loses at most one batch.
SINK_BATCH = 64
SINK_SECONDS = 2.0


class Sink(Protocol):
    """Where finished trajectories go. `done_keys` makes a run resumable; `flush` commits
    what a batching sink still holds."""

    def done_keys(self) -> set[tuple[str, str]]: ...

    def write(self, trajectory: Trajectory) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Append-only JSONL file, one Trajectory per line, crash-safe and resumable.

    On open it takes an exclusive lock (two runs cannot write one file), cuts off a
    half-written last line left by a kill, and reads the (id, task) of every complete
    line. Each write is flushed and fsynced before it returns.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+b")  # noqa: SIM115 (held for the sink's lifetime)
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.close()
            raise LoupeError(f"{self.path}: another vetting run is writing this file") from None
        self._done: set[tuple[str, str]] = set()
        self.repaired = 0  # bytes cut from a truncated last line
        self._load()

    def _load(self) -> None:
        # Streamed, so resuming a run of millions of lines does not hold the file in memory.
        self._fh.seek(0)
        good_end = 0
        for n, line in enumerate(iter(self._fh.readline, b""), 1):
            if not line.endswith(b"\n"):  # a line cut short by a kill: drop it, it is re-run
                self.repaired = len(line)
                break
            good_end += len(line)
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                key = (str(d["id"]), str(d["task"]))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s:%d: unreadable line skipped (%s)", self.path, n, exc)
                continue
            self._done.add(key)
        if self.repaired:
            self._fh.truncate(good_end)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self._fh.seek(0, os.SEEK_END)

    def done_keys(self) -> set[tuple[str, str]]:
        return set(self._done)

    def write(self, trajectory: Trajectory) -> None:
        key = (trajectory.id, trajectory.task)
        if key in self._done:
            return  # never a duplicate, even if a caller offers one twice
        self._fh.write(trajectory.to_json().encode("utf-8") + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._done.add(key)

    def flush(self) -> None:
        pass  # each write is already on disk

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class StoreSink:
    """The sink protocol over a `Store`.

    Trajectories go to the run named by (their policy, model and renderer, `params`); with
    `resume`, `done_keys` names the candidates that run (or, before the renderer is known,
    any run of this policy, model and params) has already recorded.

    Writes are batched: one transaction per `batch` trajectories, or per `seconds` since
    the oldest one waiting (checked as each trajectory arrives), and whatever waits at
    `flush` or `close`. A transaction per trajectory costs a commit (an fsync in SQLite)
    each, which caps a run at the store's commit rate whatever the cluster's size.
    """

    def __init__(
        self,
        store: Any,
        policy: str | None = None,
        model: str | None = None,
        *,
        renderer: str | None = None,
        params: dict[str, Any] | None = None,
        resume: bool = True,
        actor: str = "vet",
        batch: int = SINK_BATCH,
        seconds: float = SINK_SECONDS,
    ):
        self.store = store
        self.policy = policy
        self.model = model
        self.renderer = renderer
        self.params = dict(params or {})
        self.resume = resume
        self.actor = actor
        self.batch = max(1, int(batch))
        self.seconds = float(seconds)
        self.written = 0
        self._runs: dict[tuple[str, str | None, str], int] = {}
        self._waiting: list[Trajectory] = []
        self._since = 0.0

    def _matches(self, run: Any) -> bool:
        return (
            (self.policy is None or run.policy == self.policy)
            and run.model == self.model  # a fitted model's run is not the plain rules'
            and (self.renderer is None or run.renderer == self.renderer)
            and (run.params or {}) == self.params
        )

    def run_ids(self) -> list[int]:
        """The stored runs whose records count as done for this sink (none without resume)."""
        if not self.resume:
            return []
        return [run.id for run in self.store.runs() if self._matches(run)]

    def done_keys(self) -> set[tuple[str, str]]:
        done: set[tuple[str, str]] = set()
        for rid in self.run_ids():
            done |= self.store.done_keys(run_id=rid)
        return done

    def run_id(self, trajectory: Trajectory) -> int:
        key = (trajectory.policy, trajectory.model, trajectory.renderer or "fast")
        if key not in self._runs:
            self._runs[key] = self.store.start_run(*key, self.params, actor=self.actor)
        return self._runs[key]

    def write(self, trajectory: Trajectory) -> None:
        if not self._waiting:
            self._since = time.monotonic()
        self._waiting.append(trajectory)
        if len(self._waiting) >= self.batch or time.monotonic() - self._since >= self.seconds:
            self.flush()

    def flush(self) -> None:
        """Commit the waiting trajectories, one transaction per run. A batch the store
        refuses is retried one trajectory at a time, so the good ones are kept; every run
        group is tried, and the first trajectory the store refuses on its own is raised
        at the end. A batch whose every trajectory goes in on its own raises nothing."""
        groups: dict[int, list[Trajectory]] = {}
        for t in self._waiting:
            groups.setdefault(self.run_id(t), []).append(t)
        refused: Exception | None = None
        for rid, trajs in groups.items():
            problem = self._commit(rid, trajs)
            refused = refused or problem
            # Out of the queue only once tried: an interrupt leaves the untried groups.
            tried = {id(t) for t in trajs}
            self._waiting = [t for t in self._waiting if id(t) not in tried]
        if refused is not None:
            raise refused

    def _commit(self, rid: int, trajs: list[Trajectory]) -> Exception | None:
        """Record `trajs` under run `rid`, as one transaction or, refused, one by one;
        returns the first refusal of a single trajectory, None when all are in."""
        try:
            self.store.record_trajectories(trajs, rid, actor=self.actor)
            self.written += len(trajs)
            return None
        except Exception as exc:  # the store names the bad trajectory; found below
            log.info("a batch of %d was refused (%s); retrying one at a time", len(trajs), exc)
        refused = None
        for t in trajs:
            try:
                self.store.record_trajectories([t], rid, actor=self.actor)
                self.written += 1
            except Exception as exc:
                refused = refused or exc
        return refused

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.store.close()
