"""Vetting into the store: the run's set-up, and the pipeline `vet --db`, the app's uploads
and its demo seeding share.

Finished trajectories are committed in batches (`annotate.vetting.sinks.StoreSink`) under
one agent run that records the run's real set-up (policy, model, renderer, max_turns,
temperature), and candidates already recorded for that run are skipped, so a killed run
resumes where it stopped: a kill loses at most the batch not yet committed, and the re-run
vets exactly those again. Without candidates the store's own are vetted (ingested earlier,
optionally only those of one task) that this run has not recorded yet.

With the rules policy the store's current inspector model (`launch.py calibrate`, the
setting `inspector_model`) is used unless the model names another file or "none" asks for
the plain rules; the model's version is part of the run's set-up, so runs with and without
a fitted model, or with two versions, never resume over each other.

Candidates from files go into the store first (`annotate.intake.ingest.ingest_refs`, as the
`vet --db` command and the app's uploads do): an id the store already gives to another
spectrum is refused there as a conflict, so a verdict is never recorded under another
file's candidate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from agent.failure import task_key
from agent.refs import CandidateRef
from annotate.vetting.runner import (
    Progress,
    Stats,
    VetOptions,
    pending,
    policy_kwargs,
    run_sandboxed,
    vet,
)
from annotate.vetting.sinks import StoreSink

log = logging.getLogger(__name__)

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


def _sink(store: Any, opts: VetOptions, resume: bool, actor: str) -> tuple[StoreSink, dict]:
    """The sink recording `opts`'s run (the store's inspector model resolved) and the
    policy's keyword arguments."""
    model_id, version = opts.model, None
    if opts.policy == "rules":
        opts.model, model_id, version = rules_model(store, opts.model)
    kwargs = policy_kwargs(opts)
    sink = StoreSink(
        store,
        policy=opts.policy,
        model=model_id,
        renderer=opts.renderer,
        params=run_params(opts.policy, opts.max_turns, opts.temperature, version),
        resume=resume,
        actor=actor,
    )
    return sink, kwargs


def vet_then_add(
    store: Any,
    refs: Sequence[CandidateRef],
    *,
    policy: str = "rules",
    actor: str = "app",
    problems: list[tuple[str, str]] | None = None,
    known: dict[str, dict[str, Any]] | None = None,
) -> Stats:
    """Vet candidates from files nobody vouches for (the app's uploads) in the vet pool's
    limited workers, then add them to the store and record their trajectories.

    Nothing of an untrusted file is processed in this process: the workers read and judge
    it (`annotate.vetting.runner.run_sandboxed`), this process only records what they
    answer. The candidates go into the store only once vetted, so a server killed during
    the vetting leaves no trace of them (the store as it was); the add and the record are
    two commits a few milliseconds apart, and a candidate a kill left between them unvetted
    is vetted when its file is added again (already-vetted ones are skipped, as a resumed
    run skips them). Candidates the store refuses (an id given to another spectrum) are
    left out, each with its problem added to `problems`; `known` is survey metadata read
    already (`annotate.intake.ingest.read_upload`). Returns the run's `Stats`."""
    from annotate.intake.ingest import ingest_refs, one_candidate_per_spectrum

    opts = VetOptions.of(policy=policy, sandbox=True)
    sink, kwargs = _sink(store, opts, True, actor)
    refs, refused = one_candidate_per_spectrum(store, list(refs))  # before any vetting
    todo = pending(refs, sink.done_keys())
    stats = Stats(len(refs), len(refs) - len(todo))
    stats.workers = 1
    vetted = list(run_sandboxed(todo, opts, kwargs, opts.renderer))
    _, not_added, added = ingest_refs(store, refs, actor=actor, known=known)
    refused += not_added
    if problems is not None:
        problems.extend(refused)
    keys = {(r.id, task_key(r.task)) for r in added}
    try:
        for t in vetted:
            if (t.id, task_key(t.task)) in keys:
                sink.write(t)
                stats.add(t)
    finally:
        sink.flush()
        stats.wall = time.perf_counter() - stats.t0
    return stats


def vet_into_store(
    store: Any,
    candidates: Sequence[CandidateRef] | None = None,
    *,
    policy: str = "rules",
    renderer: str | None = None,
    resume: bool = True,
    actor: str = "vet",
    options: Any = None,
    progress: Progress | None = None,
    **settings: Any,
) -> Stats:
    """Vet `candidates` with `policy` and record each trajectory in `store` as it finishes.

    With `candidates` None they are the store's own that this run has not recorded yet
    (`Store.candidate_refs`; only `task`'s when set, at most `limit`). `settings` are
    `VetOptions` fields (model, max_turns, temperature, workers, concurrency, batch_size,
    base_url, ray, task, limit, ...); `options` is an object to take them from first (a
    parsed command line). The run is recorded with its real parameters; with `resume`,
    candidates already recorded for it are skipped. Returns the run's `Stats`. Bad policy
    settings raise ValueError; an unknown setting, TypeError.
    """
    opts = VetOptions.of(options, policy=policy, renderer=renderer, **settings)
    sink, kwargs = _sink(store, opts, resume, actor)
    if candidates is None:
        candidates = store.candidate_refs(opts.task, skip_runs=sink.run_ids(), limit=opts.limit)
    return vet(list(candidates), opts, sink, progress, kwargs)  # flushes the last batch
