"""Batch vetting: run a policy over many candidates and write one Trajectory per line.

    python launch.py vet --catalog candidates.csv --policy rules --out results.jsonl
    python launch.py vet --input 'spectra/*.fits' --task wd --policy openai \\
        --base-url http://localhost:8000/v1 --model spec-o3-7b --concurrency 32

Resumable: the output (a JSONL file, or the store via `launch.py vet --db`) is read first
and every (id, task) already recorded is skipped, so a run killed at any moment (even
kill -9) continues where it stopped, with no duplicates and no gaps. Each line is flushed
and fsynced as it is written; a half-written last line is cut off on the next start.

Parallelism follows the backend: worker processes for `rules` (each loads and vets its own
candidates), a sliding window of episodes sharing one connection pool for `openai` (at most
--concurrency requests in flight), batched generation for `hf` and `vllm` (--batch-size
episodes advance turn by turn together). With `--ray [ADDRESS]` the same candidates run in a
Ray actor pool across a cluster (`agent.cluster`, imported only then) and stream back into
the same sink.

A bad input line (a missing or unreadable file, an unknown task, an id given to two
different spectra) is reported on stderr with its file, line and reason, and the rest is
vetted; `--strict` stops at the first one instead. A candidate whose spectrum cannot be read
when vetted is recorded as a trajectory with state "error" and the reason, so a resume does
not retry it forever; delete its line (or its record) to try it again. Exit status: 0 when
every line was vetted, 1 when some failed, 2 for a usage or fatal error.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agent.candidates import collect_candidates
from agent.errors import LoupeError
from agent.failure import failed as _crashed
from agent.failure import task_key
from agent.loop import DEFAULT_MAX_TURNS, run_batch
from agent.refs import CandidateRef
from agent.trajectory import Trajectory

POLICY_CHOICES = ["rules", "hf", "openai", "vllm"]

T = TypeVar("T")


class Sink(Protocol):
    """Where finished trajectories go. `done_keys` makes a run resumable."""

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
            raise RuntimeError(f"{self.path}: another vetting run is writing this file") from None
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
                print(f"{self.path}:{n}: unreadable line skipped ({exc})", file=sys.stderr)
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


# -- command line ----------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("candidates")
    src.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="CSV",
        help="catalogue CSV with columns path,task[,id,hdu,row,label] (repeatable)",
    )
    src.add_argument(
        "--input",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="spectrum files, globs, folders or SpecVI-Bench parquet files",
    )
    src.add_argument(
        "--task",
        default=None,
        help="task for inputs that carry none: cv, carbon, s_type, m_giant, wd",
    )
    src.add_argument("--limit", type=int, default=None, help="vet at most this many candidates")
    src.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad input line instead of reporting it and vetting the rest",
    )

    pol = parser.add_argument_group("policy")
    pol.add_argument(
        "--policy", choices=POLICY_CHOICES, default="rules", help="backend that plays the agent"
    )
    pol.add_argument(
        "--model",
        default=None,
        help="checkpoint folder (hf, vllm), model name (openai) or inspector model JSON (rules)",
    )
    pol.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
        "(key from OPENAI_API_KEY or LOUPE_API_KEY)",
    )
    pol.add_argument(
        "--renderer",
        choices=["fast", "speco3"],
        default=None,
        help="zoom renderer (default: the policy's; speco3 for Spec-o3 weights)",
    )
    pol.add_argument(
        "--max-turns",
        type=int,
        default=DEFAULT_MAX_TURNS,
        help="assistant turns per candidate (zooms + the answer)",
    )
    pol.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    pol.add_argument(
        "--max-new-tokens",
        type=int,
        default=1024,
        help="token budget per assistant turn (model backends)",
    )
    pol.add_argument(
        "--samples",
        type=int,
        default=1,
        help="openai: answers sampled per final turn for agreement-based "
        "confidence when the server returns no logprobs",
    )
    pol.add_argument("--timeout", type=float, default=120.0, help="openai: seconds per request")

    par = parser.add_argument_group("throughput")
    par.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="rules: worker processes"
    )
    par.add_argument("--concurrency", type=int, default=16, help="openai: requests in flight")
    par.add_argument(
        "--batch-size", type=int, default=8, help="hf/vllm: episodes generated together"
    )

    out = parser.add_argument_group("output")
    out.add_argument(
        "--out", default="results.jsonl", help="JSONL file of trajectories (appended to; resumes)"
    )
    out.add_argument("--no-progress", action="store_true", help="no progress bar")

    from agent.cluster import add_arguments as add_cluster_arguments  # imports no Ray

    add_cluster_arguments(parser)


def policy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    name = args.policy
    if name == "rules":
        return {"model": args.model} if getattr(args, "model", None) else {}
    kw: dict[str, Any] = {"model": args.model, "temperature": args.temperature}
    if args.renderer:
        kw["renderer"] = args.renderer
    if name in ("hf", "vllm"):
        kw.update(max_new_tokens=args.max_new_tokens, batch_size=_batch_size(args))
    if name == "vllm":
        kw["max_turns"] = args.max_turns
    if name == "openai":
        kw.update(
            base_url=args.base_url,
            concurrency=args.concurrency,
            samples=args.samples,
            timeout=args.timeout,
            max_tokens=args.max_new_tokens,
        )
    if name in ("hf", "vllm", "openai") and not args.model:
        raise ValueError(f"--policy {name} needs --model")
    if name == "openai" and not args.base_url:
        raise ValueError("--policy openai needs --base-url")
    return kw


def _batch_size(args: argparse.Namespace) -> int:
    if args.batch_size:
        return args.batch_size
    return 256 if args.policy == "vllm" else 8


def main(args: argparse.Namespace, sink: Sink | None = None) -> int:
    """0: every line vetted; 1: some input lines or candidates failed (each reported on
    stderr, the rest vetted); 2: a usage or fatal error, or any bad line with --strict."""
    try:
        candidates, problems = read_inputs(args)
        kwargs = policy_kwargs(args)
    except (ValueError, OSError) as exc:
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    own_sink = sink is None
    try:
        sink = sink or JsonlSink(args.out)
    except RuntimeError as exc:
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    try:
        todo = pending(candidates, sink.done_keys())
        skipped = len(candidates) - len(todo)
        if skipped:
            print(
                f"vet: {skipped} of {len(candidates)} candidates already done; resuming",
                file=sys.stderr,
            )
        stats = _run(todo, args, kwargs, sink)
    except LoupeError as exc:
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    finally:
        if own_sink:
            sink.close()
    print(summary(stats))
    return exit_status(problems, stats)


def read_inputs(args: argparse.Namespace) -> tuple[list[CandidateRef], list[Exception]]:
    """The candidates of --catalog/--input, and the bad lines, each already reported on
    stderr (file, line, reason). ValueError when the run must not start: no sources, an
    unknown --task, or any bad line with --strict."""
    from agent.formats.catalogue import normalise_task

    sources = list(args.catalog) + list(args.input)
    if not sources:
        raise ValueError(
            "give candidates with --catalog CSV or --input PATH ... "
            "(or --db URL alone for the store's own)"
        )
    normalise_task(args.task)
    candidates, problems = collect_candidates(sources, task=args.task)
    if problems and getattr(args, "strict", False):
        raise ValueError(f"{problems[0]} (--strict: nothing vetted)")
    for err in problems:
        print(f"vet: skipped {err}", file=sys.stderr)
    if args.limit is not None:
        candidates = candidates[: max(0, args.limit)]
    return candidates, list(problems)


def exit_status(problems: list[Exception], stats: Stats) -> int:
    """0 when every line was vetted, 1 when some input lines or candidates failed."""
    if problems:
        print(f"vet: {len(problems)} input line(s) skipped (listed above)", file=sys.stderr)
    return 1 if problems or stats.states["error"] else 0


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


# -- running ---------------------------------------------------------------------------
class Stats:
    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.states: Counter[str] = Counter()
        self.format_errors = 0
        self.n = 0
        self.agent_seconds = 0.0
        self.t0 = time.perf_counter()
        self.wall = 0.0
        self.workers = 1

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


def _run(todo: list[CandidateRef], args: argparse.Namespace, kwargs: dict, sink: Sink) -> Stats:
    stats = Stats()
    bar = _progress(len(todo), disable=args.no_progress)
    renderer = args.renderer
    try:
        if getattr(args, "ray", None):  # a Ray cluster: agent.cluster, imported only here
            from agent import cluster

            stats.workers, results = cluster.vet(todo, args, kwargs, renderer)
        elif args.policy == "rules" and args.workers > 1 and len(todo) > 1:
            stats.workers = args.workers
            results = _run_processes(todo, args, kwargs, renderer)
        elif args.policy == "openai":
            stats.workers = args.concurrency
            results = _run_threads(todo, args, kwargs, renderer)
        else:
            results = _run_inline(todo, args, kwargs, renderer)
        for t in results:
            if t.state == "error" and t.error:
                bar.write(f"vet: {t.id} ({t.task}): {t.error}", file=sys.stderr)
            sink.write(t)
            stats.add(t)
            bar.set_postfix(stats.states, refresh=False)  # counts per state
            bar.update(1)
    finally:
        # A sink that batches its writes commits the rest; one without flush (a plain
        # writer) wrote each as it came.
        flush = getattr(sink, "flush", None)
        try:
            if flush is not None:
                flush()
        finally:
            bar.close()
        stats.wall = time.perf_counter() - stats.t0
    return stats


def _progress(total: int, disable: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="spectrum",
        file=sys.stderr,
        disable=disable,
        dynamic_ncols=True,
        smoothing=0.1,
    )


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


def _run_inline(todo, args, kwargs, renderer) -> Iterable[Trajectory]:
    from agent.policies import get_policy

    if not todo:
        return
    policy = get_policy(args.policy, **kwargs)
    size = _batch_size(args)
    if args.policy == "rules":
        size = 1
    params = {"temperature": args.temperature} if args.policy != "rules" else {}
    for chunk in _chunks(todo, size):
        yield from run_batch(
            chunk, policy, max_turns=args.max_turns, renderer=renderer, params=params
        )


def _run_threads(todo, args, kwargs, renderer) -> Iterable[Trajectory]:
    """HTTP backends: a sliding window of episodes, each in its own thread, sharing one
    policy (one connection pool, at most --concurrency requests in flight). No lock-step:
    a slow episode never holds up the others."""
    from concurrent.futures import ThreadPoolExecutor

    from agent.policies import get_policy

    if not todo:
        return
    policy = get_policy(args.policy, **kwargs)
    params = {"temperature": args.temperature}

    def one(c: CandidateRef) -> Trajectory:
        return run_batch([c], policy, max_turns=args.max_turns, renderer=renderer, params=params)[0]

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.concurrency)) as pool:
            for c, fut in _windowed(pool, one, todo, 2 * args.concurrency):
                try:
                    yield fut.result()
                except Exception as exc:
                    yield _crashed(c, args.policy, exc)
    finally:
        close = getattr(policy, "close", None)
        if close is not None:
            close()


# Worker-process state: each worker builds its policy once.
_WORKER: dict[str, Any] = {}


def _worker_init(policy: str, kwargs: dict, max_turns: int, renderer: str | None) -> None:
    from agent.policies import get_policy

    _WORKER.update(policy=get_policy(policy, **kwargs), max_turns=max_turns, renderer=renderer)


def _worker_run(chunk: list[CandidateRef]) -> list[dict]:
    trajs = run_batch(
        chunk, _WORKER["policy"], max_turns=_WORKER["max_turns"], renderer=_WORKER["renderer"]
    )
    return [t.to_dict() for t in trajs]


def _run_processes(todo, args, kwargs, renderer) -> Iterable[Trajectory]:
    # Small chunks keep every worker busy and lose little work to a kill.
    size = max(1, min(16, len(todo) // (args.workers * 4) or 1))
    chunks = list(_chunks(todo, size))
    with ProcessPoolExecutor(
        max_workers=args.workers,
        initializer=_worker_init,
        initargs=(args.policy, kwargs, args.max_turns, renderer),
    ) as pool:
        for chunk, fut in _windowed(pool, _worker_run, chunks, args.workers * 2):
            try:
                dicts = fut.result()
            except Exception as exc:  # a worker died: record its chunk, go on
                dicts = [_crashed(c, args.policy, exc).to_dict() for c in chunk]
            for d in dicts:
                yield Trajectory.from_dict(d)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent.runner", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main(build_parser().parse_args()))
