"""`launch.py vet`: run an agent policy over candidates, writing JSONL or, with --db, the store.

Every flag of the batch runner (`agent.runner`) applies. With `--db URL` finished
trajectories are committed to the store in batches (up to SINK_BATCH records, or every
SINK_SECONDS; a candidate not yet ingested is created from the trajectory's
spectrum reference) under one agent run that records the run's real set-up (policy, model,
renderer, max_turns, temperature), and candidates already recorded for that run are
skipped, so a killed run resumes where it stopped: a kill loses at most the batch not yet
committed, and the re-run vets exactly those again. Without --catalog/--input the
candidates are the store's own (ingested earlier, optionally only those of --task) that
this run has not recorded yet.

    python launch.py vet --input "data/*.fits" --task cv --policy rules --db loupe.db
    python launch.py vet --db loupe.db --task cv --ray local   # the store's pending ones

With the rules policy the store's current inspector model (`launch.py calibrate`, the
setting `inspector_model`) is used unless `--model FILE` names another or `--model none`
asks for the plain rules; the model's version is part of the run's set-up, so runs with and
without a fitted model, or with two versions, never resume over each other.

`vet_into_store` is the same pipeline for callers that hold a store (the app's uploads and
its demo seeding).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from agent.refs import CandidateRef
from agent.trajectory import Trajectory

log = logging.getLogger(__name__)

# The store sink's batch: trajectories per transaction, and the longest a finished one
# waits for its batch (checked as the next arrives). A kill loses at most one batch.
SINK_BATCH = 64
SINK_SECONDS = 2.0

# The store setting holding the current fitted inspector model (written by `calibrate`).
INSPECTOR_SETTING = "inspector_model"


def run_params(
    policy: str, max_turns: int, temperature: float, inspector_version: int | None = None
) -> dict[str, Any]:
    """The settings that make two runs of one policy, model and renderer comparable; the
    rules inspector samples nothing, so temperature is not part of its run, but the fitted
    model's version is (a file's name need not say it)."""
    params: dict[str, Any] = {"max_turns": int(max_turns)}
    if policy != "rules":
        params["temperature"] = float(temperature)
    if inspector_version is not None:
        params["inspector_version"] = int(inspector_version)
    return params


def rules_model(store: Any, model: Any) -> tuple[Any, str | None, int | None]:
    """The rules policy's `model` argument, the run's model id and the inspector version.

    None: the store's current model (its payload; the id is its tag, inspector-vN), or the
    plain rules where none was fitted; "none": the plain rules; a path: that file."""
    from agent.policies.rules.learned import InspectorModel, load

    if model is None:
        payload = store.setting(INSPECTOR_SETTING)
        if not payload:
            return None, None, None
        fitted = InspectorModel.from_json(payload, f"the store's {INSPECTOR_SETTING} setting")
        return payload, fitted.tag, fitted.version
    if isinstance(model, str) and model.strip().lower() == "none":
        return None, None, None
    return model, str(model), load(model).version


class StoreSink:
    """The runner's sink protocol (done_keys / write / flush / close) over a `Store`.

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
        refuses is retried one trajectory at a time, so the good ones are kept and the
        first refusal is raised."""
        waiting, self._waiting = self._waiting, []
        groups: dict[int, list[Trajectory]] = {}
        for t in waiting:
            groups.setdefault(self.run_id(t), []).append(t)
        for rid, trajs in groups.items():
            try:
                self.store.record_trajectories(trajs, rid, actor=self.actor)
                self.written += len(trajs)
                continue
            except Exception as exc:
                first: Exception = exc
            refused = None
            for t in trajs:
                try:
                    self.store.record_trajectories([t], rid, actor=self.actor)
                    self.written += 1
                except Exception as exc:
                    refused = refused or exc
            raise refused or first

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.store.close()


def store_candidates(
    store: Any,
    task: str | None = None,
    *,
    skip_runs: Sequence[int] = (),
    limit: int | None = None,
) -> list[CandidateRef]:
    """The store's candidates (of `task`, else all) in the order they were added, leaving
    out those with a finished record (any state but 'running') from the runs `skip_runs`:
    what `vet --db URL` without --catalog/--input vets. The filter runs in the database, so
    a resumed campaign of millions reads only what is left."""
    from sqlalchemy import and_, exists, select

    from db import models as m
    from db.store.values import hdu_out

    C, S, T, R = m.Candidate, m.Spectrum, m.Task, m.Trajectory
    q = (
        select(C.key, T.name, S.path, S.hdu, S.row, C.known_label)
        .join(T, T.id == C.task_id)
        .join(S, S.id == C.spectrum_id)
        .order_by(C.id)
    )
    if task is not None:
        q = q.where(T.name == task)
    if skip_runs:
        done = exists().where(
            and_(R.candidate_id == C.id, R.run_id.in_(list(skip_runs)), R.state != "running")
        )
        q = q.where(~done)
    if limit is not None:
        q = q.limit(max(0, limit))
    with store._ro() as s:
        return [
            CandidateRef(id=key, task=name, path=path, hdu=hdu_out(hdu), row=row, label=label)
            for key, name, path, hdu, row, label in s.execute(q)
        ]


def runner_options(
    options: argparse.Namespace | None = None, **settings: Any
) -> argparse.Namespace:
    """The batch runner's options: its defaults, then `options`, then `settings`."""
    from agent import runner

    parser = argparse.ArgumentParser(add_help=False)
    runner.add_arguments(parser)
    ns = parser.parse_args([])
    known = set(vars(ns))
    # the command's own flags (--db, ...) are not the runner's
    for name, value in vars(options or argparse.Namespace()).items():
        if name in known:
            setattr(ns, name, value)
    for name, value in settings.items():
        if name not in known:
            raise TypeError(f"vet_into_store: unknown runner option {name!r}")
        setattr(ns, name, value)
    return ns


def vet_into_store(
    store: Any,
    candidates: Sequence[CandidateRef] | None = None,
    *,
    policy: str = "rules",
    renderer: str | None = None,
    resume: bool = True,
    actor: str = "vet",
    options: argparse.Namespace | None = None,
    **settings: Any,
):
    """Vet `candidates` with `policy` and record each trajectory in `store` as it finishes.

    With `candidates` None they are the store's own that this run has not recorded yet
    (`store_candidates`; only --task's when `task` is set, at most `limit`). `settings`
    are the batch runner's options by their attribute names (model, max_turns, temperature,
    workers, concurrency, batch_size, base_url, ray, task, limit, no_progress, ...);
    `options` is a parsed runner namespace to start from (the CLI's). The run is recorded
    with its real parameters; with `resume`, candidates already recorded for it are
    skipped. Returns the runner's `Stats`. Bad policy settings raise ValueError.
    """
    from agent import runner

    ns = runner_options(options, policy=policy, renderer=renderer, **settings)
    model_id, version = ns.model, None
    if ns.policy == "rules":
        ns.model, model_id, version = rules_model(store, ns.model)
    kwargs = runner.policy_kwargs(ns)
    sink = StoreSink(
        store,
        policy=ns.policy,
        model=model_id,
        renderer=ns.renderer,
        params=run_params(ns.policy, ns.max_turns, ns.temperature, version),
        resume=resume,
        actor=actor,
    )
    if candidates is None:
        candidates = store_candidates(
            store, ns.task, skip_runs=sink.run_ids(), limit=getattr(ns, "limit", None)
        )
    todo = runner.pending(list(candidates), sink.done_keys())
    skipped = len(candidates) - len(todo)
    if skipped:
        log.info(
            "%d of %d candidates already vetted by this run; skipped", skipped, len(candidates)
        )
    return runner._run(todo, ns, kwargs, sink)  # flushes the sink's last batch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agent import runner

    runner.add_arguments(parser)
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="Record trajectories into this database (file or SQLAlchemy URL) "
        "instead of only writing JSONL.",
    )


def main(args: argparse.Namespace) -> int:
    from agent import runner
    from agent.errors import LoupeError
    from agent.formats.catalogue import normalise_task
    from db.store import Store

    if not getattr(args, "db", None):
        if args.policy == "rules" and str(args.model or "").strip().lower() == "none":
            args.model = None  # without a store the plain rules are the default anyway
        return int(runner.main(args) or 0)
    from_store = not (args.catalog or args.input)
    problems: list[Exception] = []
    try:
        if from_store:
            args.task = normalise_task(args.task)
        else:
            candidates, problems = runner.read_inputs(args)  # bad lines reported, rest kept
        runner.policy_kwargs(args)  # a missing --model or --base-url is said before any work
    except (ValueError, OSError) as exc:
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    store = Store(args.db)
    try:
        if from_store:
            candidates = None
            if not _has_candidates(store, args.task):
                which = f" for task {args.task}" if args.task else ""
                print(
                    f"vet: the store {args.db} has no candidates{which}: ingest some first "
                    "(launch.py ingest) or give --catalog CSV / --input PATH",
                    file=sys.stderr,
                )
                return 2
        stats = vet_into_store(
            store, candidates, policy=args.policy, renderer=args.renderer, options=args
        )
    except LoupeError as exc:  # an unreadable inspector model (the store's or --model's), Ray
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(runner.summary(stats))
    return runner.exit_status(problems, stats)


def _has_candidates(store: Any, task: str | None) -> bool:
    from db.store import Filters

    return store.count_candidates(Filters(task=task)) > 0
