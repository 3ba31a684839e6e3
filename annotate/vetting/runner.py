"""The batch run: a policy over many candidates, each trajectory into a sink as it finishes.

Resumable: the sink (a JSONL file, or the store) is read first and every (id, task) it
already holds is skipped (`pending`), so a run killed at any moment (even kill -9)
continues where it stopped, with no duplicates and no gaps.

Parallelism follows the backend: worker processes for `rules` (each loads and vets its own
candidates), a sliding window of episodes sharing one connection pool for `openai` (at most
`concurrency` requests in flight), batched generation for `hf` and `vllm` (`batch_size`
episodes advance turn by turn together). With `ray` set the same candidates run in a Ray
actor pool across a cluster (`annotate.vetting.cluster`, imported only then) and stream back
into the same sink.

Failure policy: a bad input line (a missing or unreadable file, an unknown task, an id
given to two different spectra) is returned by `read_inputs` beside the good candidates, and
the caller decides (the `vet` command reports it and vets the rest, or stops with
`--strict`). A candidate whose spectrum cannot be read when vetted, or whose worker dies, is
recorded as a trajectory with state "error" and the reason, so a resume does not retry it
forever; delete its line (or its record) to try it again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol, TypeVar

from agent.candidates import collect_candidates
from agent.failure import failed as _crashed
from agent.failure import task_key
from agent.loop import DEFAULT_MAX_TURNS, run_batch
from agent.refs import CandidateRef
from agent.spectrum import SpectrumError
from agent.trajectory import Trajectory
from annotate.vetting.sinks import Sink

log = logging.getLogger(__name__)

POLICY_CHOICES = ["rules", "hf", "openai", "vllm"]

T = TypeVar("T")


@dataclasses.dataclass
class VetOptions:
    """How a batch run vets: the policy and its settings, the throughput knobs, and (for
    runs that read their own inputs) the candidates' sources. The `vet` command's flags
    carry the same names and defaults."""

    # candidates
    catalog: list[str] = dataclasses.field(default_factory=list)
    input: list[str] = dataclasses.field(default_factory=list)
    task: str | None = None
    limit: int | None = None
    # policy
    policy: str = "rules"
    model: str | None = None
    base_url: str | None = None
    renderer: str | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    temperature: float = 0.0
    max_new_tokens: int = 1024
    samples: int = 1
    timeout: float = 120.0
    # throughput
    workers: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    concurrency: int = 16
    batch_size: int = 8
    ray: str | None = None
    ray_actors: int | None = None
    # each candidate in the vet pool's limited workers (untrusted files: the app's uploads)
    sandbox: bool = False

    @classmethod
    def of(cls, source: Any = None, **settings: Any) -> VetOptions:
        """The defaults, then the same-named attributes of `source` (a parsed command line;
        others, such as the command's own flags, are left out), then `settings`; an unknown
        setting is a TypeError."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {n: getattr(source, n) for n in names if hasattr(source, n)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise TypeError(f"unknown vetting option(s): {', '.join(unknown)}")
        return cls(**{**values, **settings})


class Progress(Protocol):
    """What a caller sees of a run as it goes (the `vet` command's progress bar)."""

    def start(self, stats: Stats) -> None: ...

    def update(self, trajectory: Trajectory, stats: Stats) -> None: ...

    def close(self) -> None: ...


def policy_kwargs(opts: VetOptions) -> dict[str, Any]:
    """The keyword arguments of `agent.policies.get_policy` for `opts`; ValueError when the
    policy lacks a setting it needs."""
    name = opts.policy
    if name == "rules":
        return {"model": opts.model} if opts.model else {}
    kw: dict[str, Any] = {"model": opts.model, "temperature": opts.temperature}
    if opts.renderer:
        kw["renderer"] = opts.renderer
    if name in ("hf", "vllm"):
        kw.update(max_new_tokens=opts.max_new_tokens, batch_size=_batch_size(opts))
    if name == "vllm":
        kw["max_turns"] = opts.max_turns
    if name == "openai":
        kw.update(
            base_url=opts.base_url,
            concurrency=opts.concurrency,
            samples=opts.samples,
            timeout=opts.timeout,
            max_tokens=opts.max_new_tokens,
        )
    if name in ("hf", "vllm", "openai") and not opts.model:
        raise ValueError(f"--policy {name} needs --model")
    if name == "openai" and not opts.base_url:
        raise ValueError("--policy openai needs --base-url")
    return kw


def _batch_size(opts: VetOptions) -> int:
    if opts.batch_size:
        return opts.batch_size
    return 256 if opts.policy == "vllm" else 8


def read_inputs(opts: VetOptions) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """The candidates of `opts.catalog` and `opts.input` (at most `opts.limit`), and the bad
    lines, each naming its file, line and reason. An unknown `opts.task` raises
    SpectrumError (a ValueError): nothing can be read with it."""
    from agent.formats.catalogue import normalise_task

    normalise_task(opts.task)
    candidates, problems = collect_candidates(list(opts.catalog) + list(opts.input), task=opts.task)
    if opts.limit is not None:
        candidates = candidates[: max(0, opts.limit)]
    return candidates, list(problems)


def pending(candidates: list[CandidateRef], done: set[tuple[str, str]]) -> list[CandidateRef]:
    """Candidates not yet recorded, each (id, task) once, in input order."""
    seen = set(done)
    out = []
    for c in candidates:
        key = (c.id, task_key(c.task))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


class Stats:
    """What a run did: candidates offered and skipped as done, then per trajectory its
    verdict and state."""

    def __init__(self, candidates: int = 0, skipped: int = 0) -> None:
        self.candidates = candidates
        self.skipped = skipped
        self.verdicts: Counter[str] = Counter()
        self.states: Counter[str] = Counter()
        self.format_errors = 0
        self.n = 0
        self.agent_seconds = 0.0
        self.t0 = time.perf_counter()
        self.wall = 0.0
        self.workers = 1

    @property
    def todo(self) -> int:
        return self.candidates - self.skipped

    def add(self, t: Trajectory) -> None:
        self.n += 1
        self.verdicts[t.verdict or "none"] += 1
        self.states[t.state] += 1
        self.format_errors += int(not t.format_ok and t.state != "error")
        self.agent_seconds += t.seconds


def summary(s: Stats) -> str:
    v = s.verdicts
    per = s.wall / s.n if s.n else 0.0
    return "\n".join(
        [
            f"vetted {s.n} candidates in {s.wall:.1f} s ({per:.3f} s/spectrum wall, "
            f"{(s.agent_seconds / s.n if s.n else 0.0):.3f} s/spectrum per worker, "
            f"{s.workers} worker(s))",
            f"verdicts: YES {v['YES']}, NO {v['NO']}, none {v['none']}",
            "states: " + ", ".join(f"{k} {s.states[k]}" for k in ("done", "max_turns", "error")),
            f"format errors: {s.format_errors}; errors: {s.states['error']}",
        ]
    )


def vet(
    candidates: list[CandidateRef],
    opts: VetOptions,
    sink: Sink,
    progress: Progress | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Stats:
    """Vet the `candidates` that `sink` does not hold yet and write each trajectory to it;
    the sink's last batch is flushed before this returns (the caller closes the sink).
    `kwargs` are the policy's (default `policy_kwargs(opts)`)."""
    kwargs = policy_kwargs(opts) if kwargs is None else kwargs
    todo = pending(candidates, sink.done_keys())
    stats = Stats(len(candidates), len(candidates) - len(todo))
    if stats.skipped:
        log.info("%d of %d candidates already done; skipped", stats.skipped, len(candidates))
    if progress is not None:
        progress.start(stats)
    try:
        if opts.sandbox:
            from agent.formats.sandbox import vet_pool

            stats.workers = vet_pool().limits.workers
            results = run_sandboxed(todo, opts, kwargs, opts.renderer)
        elif opts.ray:  # a Ray cluster: imported only here
            from annotate.vetting import cluster

            stats.workers, results = cluster.vet(todo, opts, kwargs, opts.renderer)
        elif opts.policy == "rules" and opts.workers > 1 and len(todo) > 1:
            stats.workers = opts.workers
            results = run_processes(todo, opts, kwargs, opts.renderer)
        elif opts.policy == "openai":
            stats.workers = opts.concurrency
            results = run_threads(todo, opts, kwargs, opts.renderer)
        else:
            results = run_inline(todo, opts, kwargs, opts.renderer)
        for t in results:
            sink.write(t)
            stats.add(t)
            if progress is not None:
                progress.update(t, stats)
    finally:
        try:
            sink.flush()  # a batching sink commits the rest
        finally:
            if progress is not None:
                progress.close()
            stats.wall = time.perf_counter() - stats.t0
    return stats


def _chunks(items: list[CandidateRef], size: int) -> Iterator[list[CandidateRef]]:
    size = max(1, size)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _windowed(
    pool: Executor, fn: Callable[[T], Any], items: Iterable[T], depth: int
) -> Iterator[tuple[T, Future]]:
    """`fn` over `items` on `pool`, at most `depth` in flight; yields (item, future) as each
    completes and only then submits the next, so results stream out while work goes in and
    a slow consumer holds back the producers."""
    inflight: dict[Future, T] = {}
    it = iter(items)
    for item in it:
        inflight[pool.submit(fn, item)] = item
        if len(inflight) >= depth:
            break
    while inflight:
        done, _ = wait(inflight, return_when=FIRST_COMPLETED)
        for fut in done:
            yield inflight.pop(fut), fut
            nxt = next(it, None)
            if nxt is not None:
                inflight[pool.submit(fn, nxt)] = nxt


def run_inline(todo, opts: VetOptions, kwargs, renderer) -> Iterable[Trajectory]:
    from agent.policies import get_policy

    if not todo:
        return
    policy = get_policy(opts.policy, **kwargs)
    size = 1 if opts.policy == "rules" else _batch_size(opts)
    params = {"temperature": opts.temperature} if opts.policy != "rules" else {}
    for chunk in _chunks(todo, size):
        yield from run_batch(
            chunk, policy, max_turns=opts.max_turns, renderer=renderer, params=params
        )


def run_threads(todo, opts: VetOptions, kwargs, renderer) -> Iterable[Trajectory]:
    """HTTP backends: a sliding window of episodes, each in its own thread, sharing one
    policy (one connection pool, at most `concurrency` requests in flight). No lock-step:
    a slow episode never holds up the others."""
    from concurrent.futures import ThreadPoolExecutor

    from agent.policies import get_policy

    if not todo:
        return
    policy = get_policy(opts.policy, **kwargs)
    params = {"temperature": opts.temperature}

    def one(c: CandidateRef) -> Trajectory:
        return run_batch([c], policy, max_turns=opts.max_turns, renderer=renderer, params=params)[0]

    try:
        with ThreadPoolExecutor(max_workers=max(1, opts.concurrency)) as pool:
            for c, fut in _windowed(pool, one, todo, 2 * opts.concurrency):
                try:
                    yield fut.result()
                except Exception as exc:  # recorded as the candidate's error trajectory
                    log.exception("vetting %s (%s) failed", c.id, c.task)
                    yield _crashed(c, opts.policy, exc)
    finally:
        close = getattr(policy, "close", None)
        if close is not None:
            close()


def run_sandboxed(todo, opts: VetOptions, kwargs, renderer) -> Iterable[Trajectory]:
    """Each candidate vetted in one of the vet pool's limited workers
    (`agent.formats.sandbox.vet_pool`), for files nobody vouches for: the file is read and
    judged there, never in this process, and a candidate past a limit (memory, CPU time)
    gets an "error" trajectory naming it while the others go on. A worker that cannot
    start at all raises (`WorkerStartError`, naming why): nothing could be vetted."""
    from concurrent.futures import ThreadPoolExecutor

    from agent.formats.sandbox import WorkerStartError, vet_pool
    from agent.vet_worker import vet_one

    if not todo:
        return
    pool = vet_pool()
    params = {"temperature": opts.temperature} if opts.policy != "rules" else {}

    def one(c: CandidateRef) -> Trajectory:
        try:
            got = pool.call(c.path, vet_one, c, opts.policy, kwargs, opts.max_turns, renderer,
                            params)  # fmt: skip
        except WorkerStartError:
            raise
        except Exception as exc:  # a limit passed, a worker lost: this candidate's record
            log.warning("vetting %s (%s) failed: %s", c.id, c.task, exc)
            return _crashed(c, opts.policy, exc)
        return Trajectory.from_dict(got)

    workers = max(1, pool.limits.workers)
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for _, fut in _windowed(ex, one, todo, 2 * workers):
            yield fut.result()


# Worker-process state: each worker builds its policy once.
_WORKER: dict[str, Any] = {}


def _worker_init(policy: str, kwargs: dict, max_turns: int, renderer: str | None) -> None:
    from agent.policies import get_policy

    _WORKER.update(policy=get_policy(policy, **kwargs), max_turns=max_turns, renderer=renderer)
    if policy == "rules":  # a model's weights need what they need; the rules need little
        from agent.formats.sandbox import limit_batch_worker

        limit_batch_worker()


def _worker_run(chunk: list[CandidateRef]) -> list[dict]:
    trajs = run_batch(
        chunk, _WORKER["policy"], max_turns=_WORKER["max_turns"], renderer=_WORKER["renderer"]
    )
    return [t.to_dict() for t in trajs]


def run_processes(todo, opts: VetOptions, kwargs, renderer) -> Iterable[Trajectory]:
    # Small chunks keep every worker busy and lose little work to a kill.
    size = max(1, min(16, len(todo) // (opts.workers * 4) or 1))
    chunks = list(_chunks(todo, size))
    with ProcessPoolExecutor(
        max_workers=opts.workers,
        initializer=_worker_init,
        initargs=(opts.policy, kwargs, opts.max_turns, renderer),
    ) as pool:
        for chunk, fut in _windowed(pool, _worker_run, chunks, opts.workers * 2):
            try:
                dicts = fut.result()
            except Exception as exc:  # a worker died: record its chunk, go on
                log.exception("a worker failed on %d candidate(s)", len(chunk))
                dicts = [_crashed(c, opts.policy, exc).to_dict() for c in chunk]
            for d in dicts:
                yield Trajectory.from_dict(d)
