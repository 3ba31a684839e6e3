"""Vet candidates on a Ray cluster: `launch.py vet ... --ray [ADDRESS]`.

    ray start --head                       # on one node; `ray start --address HEAD:6379` on others
    python launch.py vet --catalog candidates.csv --policy rules --ray --db "$LOUPE_DB"
    python launch.py vet --catalog candidates.csv --policy rules --ray local --out results.jsonl

The driver (the process running `vet`) reads the candidates and the sink's done keys exactly
as a single-machine run does, so resuming and "nothing recorded twice" are the runner's
rules (`annotate.vetting.runner`), not this module's. The pending candidates become a Ray
Dataset; `map_batches` runs the agent loop in a pool of actors, each building its policy
once:

- rules (and hf without GPUs): one actor per CPU of the cluster;
- openai: actors that each keep --concurrency episodes in flight against a list of
  OpenAI-compatible endpoints (`--base-url URL1,URL2,...`: vLLM servers, Ray Serve LLM
  replicas), a candidate's episode going to one endpoint, round-robin;
- vllm (and hf with GPUs): one engine per GPU (`num_gpus=1`), --batch-size episodes
  advancing turn by turn together.

Trajectories stream back to the driver (`iter_rows`) and into the runner's sink (JSONL, or
the store with `--db`) as each batch finishes. Ray Data restarts an actor whose process
dies and re-runs the batch it held; a batch's results reach the driver only once it
completes, so a re-run batch is never recorded twice. A re-run batch is vetted one
candidate at a time, each start counted by a small `Attempts` actor on the driver's node:
a candidate whose worker died on each of MAX_ATTEMPTS tries is recorded as an "error"
trajectory naming that, instead of being retried forever (Ray Data's defaults are
unlimited restarts and retries). The task retries are capped too, as a backstop, at what
that rule can need. An exception inside the agent loop is recorded per candidate as an
"error" trajectory, as in the process pool, and logged with its traceback. When Ray itself
gives up (a node or one of its agents died), the run stops with `RunStopped`, whose one line
says that what finished is recorded and that the same command resumes.

Every node needs the same Loupe install and the spectra at the same paths (a shared
filesystem), since the actors open the files themselves. This module is imported only
for `--ray`, so Ray is an optional dependency (`pip install loupe[cluster]`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from agent.failure import failed
from agent.loop import run_batch
from agent.refs import CandidateRef
from agent.trajectory import Trajectory

log = logging.getLogger(__name__)

# Fault injection for the recovery tests: the first actor call that creates the file named
# by EXIT_ONCE_ENV exits its process mid-batch, as a lost worker would; an actor exits
# every time it starts vetting the candidate whose id EXIT_ON_ENV names, as a spectrum
# that crashes its worker would.
EXIT_ONCE_ENV = "LOUPE_RAY_EXIT_ONCE"
EXIT_ON_ENV = "LOUPE_RAY_EXIT_ON"

# Tries a candidate gets when its worker process dies while vetting it.
MAX_ATTEMPTS = 3
# Seconds this process waits, once its local raylet has exited, for Ray to end it.
NODE_GONE_GRACE_S = 30.0


class ClusterError(LoupeError):
    """Ray is missing, the cluster cannot be reached, or it lacks what the policy needs."""


class WorkerLost(ClusterError):
    """A candidate's worker process died on every try at vetting it."""


class Attempts:
    """Unfinished starts per key (a batch, a candidate), kept outside the workers so that
    they outlive a worker's death. Run as a Ray actor on the driver's node."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}

    def start(self, key: str) -> int:
        self.starts[key] = self.starts.get(key, 0) + 1
        return self.starts[key]

    def finish(self, key: str) -> None:
        self.starts.pop(key, None)


# -- actors ----------------------------------------------------------------------------
class Vetter:
    """One actor of the pool: builds its policy once, vets one batch of candidates per call."""

    def __init__(
        self,
        policy: str,
        kwargs: dict[str, Any],
        max_turns: int,
        renderer: str | None,
        params: dict[str, Any],
        threads: int = 1,
        exit_once: str | None = None,
        attempts: Any = None,
        exit_on: str | None = None,
    ):
        from agent.policies import get_policy

        self.name = policy
        urls = endpoints(kwargs.get("base_url")) if policy == "openai" else []
        if urls:
            self.policies = [get_policy(policy, **{**kwargs, "base_url": u}) for u in urls]
        else:
            self.policies = [get_policy(policy, **kwargs)]
        self.max_turns = max_turns
        self.renderer = renderer
        self.params = params
        self.threads = max(1, threads)
        self.exit_once = exit_once
        self.exit_on = exit_on
        self.attempts = attempts  # an `Attempts` actor handle; None counts nothing
        self.calls = 0

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        refs = [pickle.loads(b) for b in batch["ref"]]
        key = "batch:" + hashlib.sha1("\n".join(_key(c) for c in refs).encode()).hexdigest()
        if self._start(key) > 1:  # Ray re-runs it: a worker died on it
            trajs = self._one_by_one(refs)
        else:
            if self.exit_on and any(c.id == self.exit_on for c in refs):
                os._exit(1)
            trajs = self._threaded(refs) if self.threads > 1 else self._together(refs)
        self._maybe_exit()
        self._finish(key)
        return {"trajectory": [t.to_json() for t in trajs]}

    def _one_by_one(self, refs: list[CandidateRef]) -> list[Trajectory]:
        # The batch's first try counts as each candidate's first; a candidate's count is
        # cleared once it is vetted, so only the one its worker dies on keeps climbing.
        out = []
        for c in refs:
            tries = 1 + self._start(_key(c))
            if tries > MAX_ATTEMPTS:
                lost = WorkerLost(
                    f"the worker process died on each of {MAX_ATTEMPTS} tries at vetting it "
                    "(the spectrum may crash the reader or the policy); not retried"
                )
                out.append(failed(c, self.name, lost))
            else:
                if self.exit_on and c.id == self.exit_on:
                    os._exit(1)
                out.extend(self._together([c]))
            self._finish(_key(c))
        return out

    def _start(self, key: str) -> int:
        if self.attempts is None:
            return 1
        import ray

        return ray.get(self.attempts.start.remote(key))

    def _finish(self, key: str) -> None:
        if self.attempts is not None:
            import ray

            ray.get(self.attempts.finish.remote(key))

    def _together(self, refs: list[CandidateRef]) -> list[Trajectory]:
        try:
            return run_batch(
                refs,
                self.policies[0],
                max_turns=self.max_turns,
                renderer=self.renderer,
                params=self.params,
            )
        except Exception as exc:  # as in the process pool: the batch is recorded as failed
            log.exception("vetting a batch of %d failed", len(refs))
            return [failed(c, self.name, exc) for c in refs]

    def _threaded(self, refs: list[CandidateRef]) -> list[Trajectory]:
        # HTTP backends: each episode in its own thread, at most `threads` in flight per
        # actor; the endpoint's server batches the requests of all actors.
        from concurrent.futures import ThreadPoolExecutor

        def one(i: int) -> Trajectory:
            policy = self.policies[i % len(self.policies)]
            try:
                return run_batch(
                    [refs[i]],
                    policy,
                    max_turns=self.max_turns,
                    renderer=self.renderer,
                    params=self.params,
                )[0]
            except Exception as exc:  # recorded as the candidate's error trajectory
                log.exception("vetting %s (%s) failed", refs[i].id, refs[i].task)
                return failed(refs[i], self.name, exc)

        with ThreadPoolExecutor(max_workers=min(self.threads, len(refs))) as pool:
            return list(pool.map(one, range(len(refs))))

    def _maybe_exit(self) -> None:
        self.calls += 1
        if not self.exit_once:
            return
        try:
            os.close(os.open(self.exit_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)  # the batch's results are lost with the process; Ray re-runs it


def _key(c: CandidateRef) -> str:
    return f"{c.id}\t{c.task}"


def endpoints(base_url: str | None) -> list[str]:
    """`--base-url` as a list: comma-separated URLs, one per server or replica."""
    return [u.strip() for u in (base_url or "").split(",") if u.strip()]


# -- driver ----------------------------------------------------------------------------
def connect(address: str) -> bool:
    """Join (or, for 'local', start) a cluster; True if this call started Ray here."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'loupe[cluster]'") from None

    if ray.is_initialized():  # the caller (a test, a notebook) already set Ray up
        return False
    try:
        if address == "local":
            ray.init(include_dashboard=False)
        else:
            ray.init(address=address)
    except ConnectionError as exc:
        raise ClusterError(f"--ray {address}: cannot reach the cluster ({exc})") from None
    except Exception as exc:  # Ray raises a bare Exception when its node does not start
        log.exception("ray.init failed")
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"--ray {address}: Ray did not start ({first})") from None
    return True


def pool_plan(opts: Any, n: int, resources: dict[str, float]) -> dict[str, Any]:
    """Actors, per-actor resources, batch size and threads for the policy and cluster."""
    cpus = max(1, int(resources.get("CPU", 1)))
    gpus = int(resources.get("GPU", 0))
    policy = opts.policy
    threads = 1
    num_gpus = 0
    if policy == "openai":
        actors = opts.ray_actors or max(1, len(endpoints(opts.base_url)))
        threads = max(1, opts.concurrency)
        batch = 4 * threads  # a batch is lock-step: larger ones idle less on the slowest
    elif policy == "vllm" or (policy == "hf" and gpus):
        if not gpus:
            raise ClusterError(f"--policy {policy} --ray needs GPUs in the cluster (found none)")
        actors = opts.ray_actors or gpus
        num_gpus = 1
        batch = opts.batch_size or 256
    else:
        actors = opts.ray_actors or cpus
        batch = opts.batch_size or 8
    actors = max(1, min(actors, n))
    per_actor = -(-n // actors)
    if policy == "rules":
        # Small batches keep every actor busy and lose little work to a lost worker.
        batch = min(16, -(-per_actor // 4))
    batch = max(1, min(batch, per_actor))
    return {"actors": actors, "num_gpus": num_gpus, "batch_size": batch, "threads": threads}


def vet(
    todo: list[CandidateRef],
    opts: Any,
    kwargs: dict[str, Any],
    renderer: str | None,
) -> tuple[int, Iterator[Trajectory]]:
    """(actors, trajectories) for `todo` vetted on the cluster at `opts.ray` (`opts` a
    `annotate.vetting.runner.VetOptions`); the iterator
    yields each trajectory as its batch finishes and leaves Ray when it is exhausted."""
    if not todo:
        return 0, iter(())
    started = connect(opts.ray)
    import ray

    try:
        plan = pool_plan(opts, len(todo), ray.cluster_resources())
    except Exception:
        if started:
            ray.shutdown()
        raise
    return plan["actors"], _stream(todo, opts, kwargs, renderer, plan, started)


def _stream(todo, opts, kwargs, renderer, plan, started: bool) -> Iterator[Trajectory]:
    import ray
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the caller's bar is the progress
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    params = {} if opts.policy == "rules" else {"temperature": opts.temperature}
    # Beside the driver: it lives as long as the run, whichever workers die.
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    attempts = (
        ray.remote(Attempts).options(num_cpus=0, scheduling_strategy=here, max_restarts=0).remote()
    )
    stop_watching, node_gone = _watch_local_node()
    try:
        ds = ray.data.from_items([{"ref": pickle.dumps(c)} for c in todo])
        out = ds.map_batches(
            Vetter,
            fn_constructor_kwargs={
                "policy": opts.policy,
                "kwargs": kwargs,
                "max_turns": opts.max_turns,
                "renderer": renderer,
                "params": params,
                "threads": plan["threads"],
                "exit_once": os.environ.get(EXIT_ONCE_ENV) or None,
                "attempts": attempts,
                "exit_on": os.environ.get(EXIT_ON_ENV) or None,
            },
            batch_size=plan["batch_size"],
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=plan["actors"]),
            num_cpus=1,
            num_gpus=plan["num_gpus"],
            # Lost actors are replaced as often as a long run needs; a batch is re-run at
            # most as often as MAX_ATTEMPTS per candidate can require.
            max_restarts=-1,
            max_task_retries=MAX_ATTEMPTS * plan["batch_size"],
        )
        try:
            for row in out.iter_rows():
                yield Trajectory.from_json(row["trajectory"])
        except Exception as exc:
            # A node, a worker or one of Ray's own agents died and Ray gave up; Ray Data
            # raises its own types (not only RayError) for that. The sink holds what
            # finished, so the one thing to say is that a re-run resumes. Where the node
            # watch has said so already (its agent died first), this is the same event:
            # Python got Ray's error before Ray's core ended the process, and a second
            # line with Ray's traceback would say nothing new.
            if not node_gone.is_set():
                log.exception("the Ray run stopped")
            raise RunStopped(exc) from None
    finally:
        stop_watching.set()  # before a shutdown stops the node on purpose
        _quietly(ray.kill, attempts)
        if started:
            _quietly(ray.shutdown)


class RunStopped(ClusterError):
    """The cluster failed part-way through a run; what finished is recorded."""

    def __init__(self, cause: BaseException):
        first = (str(cause).strip().splitlines() or [""])[0]
        what = f"{type(cause).__name__}: {first}" if first else type(cause).__name__
        super().__init__(
            f"the Ray run stopped ({what}); what finished is recorded, "
            "run the same command again to vet the rest"
        )


def _watch_local_node() -> tuple[threading.Event, threading.Event]:
    """Watch this machine's raylet and Ray's agents beside it, when this process started
    them (`--ray local`), and log one line if one goes during the run; returns the event
    that ends the watch and the one set once that line is said.

    The raylet shares its fate with Ray's agents (killing the dashboard agent stops it),
    and once it is gone Ray's core ends this process from C++ (status 1) with no Python
    exception to catch. The agent goes a fraction of a second before the raylet; this
    line, logged as soon as either is seen gone, is the only chance to say what happened.
    """
    stop, said = threading.Event(), threading.Event()
    try:  # Ray's own record of the processes it started here (not a public API)
        import ray._private.worker as ray_worker
    except ImportError:
        return stop, said
    node = getattr(ray_worker, "_global_node", None)
    raylets = (getattr(node, "all_processes", None) or {}).get("raylet") or []
    proc = getattr(raylets[0], "process", None) if raylets else None
    if proc is None:  # joined a cluster: its raylet is not this process's to watch
        return stop, said
    agents = _agents_of(proc.pid)

    def gone() -> str | None:
        if proc.poll() is not None:
            return f"its raylet exited with status {proc.returncode}"
        for pid, name in agents.items():
            if not _alive(pid):
                return f"{name} died, and the raylet stops with it"
        return None

    def watch() -> None:
        while not stop.wait(0.02):
            what = gone()
            if what and not stop.is_set():
                said.set()
                log.error(
                    "Ray's node on this machine stopped during the run (%s); what finished "
                    "is recorded, run the same command again to vet the rest",
                    what,
                )
                break
        else:
            return
        # Once the raylet is gone nothing can finish, and Ray's core ends this process.
        # Should it not (seen once on a machine loaded far past its cores), end it as Ray
        # would, status 1, rather than hang: the sinks hold what finished.
        gone_at = None
        while not stop.wait(0.5):
            if proc.poll() is None:
                continue
            gone_at = gone_at or time.monotonic()
            if time.monotonic() - gone_at > NODE_GONE_GRACE_S:
                log.warning("Ray did not end this process %.0f s after its raylet stopped; "
                            "ending it", NODE_GONE_GRACE_S)  # fmt: skip
                logging.shutdown()
                os._exit(1)

    threading.Thread(target=watch, name="loupe-ray-node-watch", daemon=True).start()
    return stop, said


def _agents_of(raylet: int) -> dict[int, str]:
    """pid -> name of Ray's agent processes the raylet started (Linux /proc; none elsewhere)."""
    out = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            name = (d / "cmdline").read_bytes().split(b"\0")[0].decode().strip()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == raylet and name.startswith("ray::") and name.endswith("Agent"):
            out[int(d.name)] = name.removeprefix("ray::")
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has died; only its parent has not reaped it


def _quietly(fn: Any, *args: Any) -> None:
    """Tidying up after Ray, which may be what failed: its error is logged, not raised
    over the one that says what happened."""
    try:
        fn(*args)
    except Exception:
        log.warning("Ray clean-up failed", exc_info=True)
