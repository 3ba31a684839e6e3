"""Reading untrusted files in child processes under OS limits.

The readers' own limits (`agent.formats.common.LIMITS`) refuse every bomb they know of;
this is what refuses the next one. A read runs in a long-lived worker process whose
address space, CPU time and largest written file are capped with `resource.setrlimit`,
and whose answer may not pass an output size. Whatever a file makes the parser do, it
ends as `ReadRefused` ("refused: <file> needs more than N MB to read"), the worker is
replaced, and the server or the batch goes on with the next file.

The limits are read from the environment when the pool starts:
`LOUPE_MAX_READ_MB` (memory one read may add, default 2048), `LOUPE_MAX_READ_SECONDS`
(CPU seconds of one read, default 60; the wall clock is allowed twice that plus 10 s),
`LOUPE_MAX_READ_OUTPUT_MB` (what one read may send back, default 256) and
`LOUPE_READ_WORKERS` (worker processes, default up to 4).

Vetting an untrusted file (an upload) runs in a second pool of the same workers
(`vet_pool`), so a long vetting never holds up the reads the views wait on: its own
limits are `LOUPE_MAX_VET_MB` (memory one vetting may add, default 4096; 0: no cap, for a
GPU policy whose runtime reserves address space it never uses), `LOUPE_MAX_VET_SECONDS`
(CPU seconds of one candidate's vetting, default 300) and `LOUPE_VET_WORKERS` (default 1),
and its workers run at a lower priority (nice 10), so an expert's next item is served
first on a busy machine.

A limit the shell already set lower (`ulimit -f`, `ulimit -v`) is kept: a worker only
ever lowers a limit. Where a worker cannot start at all, the refusal says why (the
limit it met), not only that it did not start.

Workers are started once (`spawn`: a server's threads are never forked) and reused, so a
read costs one round trip over a pipe on top of the parse: about a millisecond for a
survey spectrum (bench/reader_memory.py measures it). The readers' `LIMITS` of the
calling process travel with every job, so a caller's settings hold in the worker too.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from agent.formats.common import LIMITS, LimitError
from agent.spectrum import SpectrumError

MB = 2**20


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """What one read in a worker may take."""

    memory_mb: int = dataclasses.field(default_factory=lambda: _env_int("LOUPE_MAX_READ_MB", 2048))
    cpu_seconds: int = dataclasses.field(
        default_factory=lambda: _env_int("LOUPE_MAX_READ_SECONDS", 60)
    )
    output_mb: int = dataclasses.field(
        default_factory=lambda: _env_int("LOUPE_MAX_READ_OUTPUT_MB", 256)
    )
    workers: int = dataclasses.field(
        default_factory=lambda: max(1, _env_int("LOUPE_READ_WORKERS", min(4, os.cpu_count() or 1)))
    )
    nice: int = 0  # added to the worker's scheduling priority (higher: yields the CPU)
    # the wall clock a job may take, in CPU limits (+ 10 s): it catches a worker that hangs
    # without using CPU; a low-priority worker on a busy machine needs more of it
    wall_factor: int = 2

    @classmethod
    def for_vetting(cls) -> SandboxLimits:
        """The vet pool's limits (`LOUPE_MAX_VET_*`, `LOUPE_VET_WORKERS`)."""
        return cls(
            memory_mb=max(0, _env_int("LOUPE_MAX_VET_MB", 4096)),
            cpu_seconds=max(1, _env_int("LOUPE_MAX_VET_SECONDS", 300)),
            workers=max(1, _env_int("LOUPE_VET_WORKERS", 1)),
            nice=10,
            wall_factor=4,
        )

    @property
    def wall_seconds(self) -> float:
        return self.wall_factor * self.cpu_seconds + 10


class WorkerStartError(LoupeError, RuntimeError):
    """A worker process could not start; the message says why (a limit the shell set)."""


class ReadRefused(LimitError):
    """A read that passed a sandbox limit: the file is refused, nothing else is harmed."""

    def __init__(self, source: str | Path | None, problem: str):
        super().__init__(source, problem)

    def __str__(self) -> str:
        return f"refused: {self.source} {self.problem}"


# -- the worker side ---------------------------------------------------------------------
def _vm_bytes() -> int:
    """The process's address space now (VmSize), what its limit is counted from."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _warm() -> None:
    """Import what the readers use, so the limit counts the reads, not the imports."""
    import astropy.io.fits  # noqa: F401
    import astropy.table  # noqa: F401
    import astropy.units  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import yaml  # noqa: F401
    from astropy.io.ascii import ecsv  # noqa: F401

    import agent.candidates  # noqa: F401
    import agent.formats  # noqa: F401
    import agent.formats.generic  # noqa: F401
    import agent.formats.specvi  # noqa: F401
    import agent.frame  # noqa: F401


def _limit_self(limits: SandboxLimits) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if limits.nice:
        os.nice(limits.nice)
    _warm()
    try:
        import pyarrow

        pyarrow.set_cpu_count(1)
        pyarrow.set_io_thread_count(1)
    except Exception:  # noqa: BLE001 (threads only cost address space)
        pass
    _cap_memory(limits)
    import resource

    _lower(resource.RLIMIT_FSIZE, limits.output_mb * MB)  # a reader writes nothing big


# What each limit is called where a shell sets it, for a refusal that names it.
_SHELL_NAMES = {"RLIMIT_FSIZE": "file size (ulimit -f)", "RLIMIT_AS": "address space (ulimit -v)",
                "RLIMIT_CORE": "core file size (ulimit -c)", "RLIMIT_CPU": "CPU time (ulimit -t)"}  # fmt: skip


def _lower(which: int, value: int) -> None:
    """Set the limit `which` to `value`, or keep the lower one already set (a process may
    not raise its hard limit): only ever lowers. A limit the shell set below what this
    process already uses is named in the error."""
    import resource

    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft != resource.RLIM_INFINITY and soft < value:
        value = soft
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError) as exc:
        name = next((v for k, v in _SHELL_NAMES.items() if getattr(resource, k) == which), "")
        raise WorkerStartError(
            f"cannot set its {name or 'resource'} limit to {value} bytes under the shell's "
            f"(soft {soft}, hard {hard}): {exc}"
        ) from None


def _cap_memory(limits: SandboxLimits) -> None:
    """The address space capped at what this process holds now plus `limits.memory_mb`
    (past it an allocation raises MemoryError; 0: not capped), and no core file."""
    import resource

    if limits.memory_mb:
        need = _vm_bytes()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        shell = min(v for v in (soft, hard, 2**63) if v != resource.RLIM_INFINITY)
        if shell <= need:
            raise WorkerStartError(
                f"the shell's address-space limit (ulimit -v, {shell // MB} MiB) is below "
                f"what a worker needs to start ({need // MB} MiB)"
            )
        _lower(resource.RLIMIT_AS, need + limits.memory_mb * MB)
    _lower(resource.RLIMIT_CORE, 0)


def limit_batch_worker(limits: SandboxLimits | None = None) -> None:
    """Cap a batch vetting worker's address space as a read worker's is, so a file that
    would take the machine's memory fails its own candidate with MemoryError (recorded as a
    refusal naming the file) instead of the batch. Only the address space: a worker's CPU
    time is its whole batch's."""
    _warm()
    _cap_memory(limits or SandboxLimits())


def _cpu_budget(seconds: int) -> None:
    """RLIMIT_CPU counts the process's whole life, so each job moves the soft limit to
    what is used now plus its budget; SIGXCPU then ends the worker."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    now = int(used.ru_utime + used.ru_stime) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (now + seconds, resource.RLIM_INFINITY))


def _main() -> None:
    """A worker: jobs come as length-prefixed pickles on stdin, answers go back the same
    way on what was stdout (fd 1 then points at stderr, so a reader's prints go there)."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    _follow_parent()
    limits = SandboxLimits(**pickle.loads(_recv(proto_in)))
    try:
        _limit_self(limits)
    except Exception as exc:  # noqa: BLE001 (said to the caller, which names it)
        _send(proto_out, pickle.dumps(("failed", f"{exc}")))
        return
    _send(proto_out, pickle.dumps(("ready", None)))
    out_cap = limits.output_mb * MB
    while True:
        try:
            fn, args, reader_limits = pickle.loads(_recv(proto_in))
        except (EOFError, OSError):
            return
        for key, value in reader_limits.items():
            setattr(LIMITS, key, value)
        _cpu_budget(limits.cpu_seconds)
        data = b""
        try:
            answer: tuple = ("ok", fn(*args))
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except (MemoryError, RecursionError):  # RecursionError: nested past the stack
            answer = ("memory", None)
        except SpectrumError as exc:
            answer = ("spectrum", (type(exc).__name__, exc.source, exc.problem))
        except Exception as exc:  # noqa: BLE001 (sent back, named)
            answer = ("error", (type(exc).__name__, str(exc)[:300]))
        if answer[0] != "ok":
            data = pickle.dumps(answer)
        elif len(data) > out_cap:
            data = pickle.dumps(("output", len(data)))
        _send(proto_out, data)
        if answer[0] == "memory":
            os._exit(0)  # a heap that ran out is not trusted with the next file


def _follow_parent() -> None:
    """End this worker when the process that started it is gone (killed, even with -9):
    a vetting left running would burn a core for minutes for nobody. Watched from a
    thread, since a worker busy with a job never reads its closed pipe."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _recv(fh: Any) -> bytes:
    head = _read_exact(fh, 8)
    return _read_exact(fh, int.from_bytes(head, "little"))


def _read_exact(fh: Any, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = fh.read(n - len(buf))
        if not chunk:
            raise EOFError("worker pipe closed")
        buf += chunk
    return bytes(buf)


def _send(fh: Any, data: bytes) -> None:
    fh.write(len(data).to_bytes(8, "little") + data)


# -- the caller side ---------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


class _Worker:
    def __init__(self, limits: SandboxLimits) -> None:
        import subprocess
        import sys

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        # A fresh interpreter, not a fork: a server's threads and open database
        # connections never reach the worker, nor the caller's __main__.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from agent.formats.sandbox import _main; _main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=str(ROOT),
        )  # fmt: skip
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        _send(self.stdin, pickle.dumps(dataclasses.asdict(limits)))
        self.stdin.flush()
        try:
            status, why = pickle.loads(_recv(self.stdout))
        except (EOFError, OSError):
            status, why = "dead", None
        if status != "ready":
            code = self.proc.poll()
            self.kill()
            if why is None:
                why = _death_cause(code)
            raise WorkerStartError(f"the read worker did not start: {why}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        finally:
            for fh in (self.stdin, self.stdout):
                try:
                    fh.close()
                except OSError:
                    pass


def _death_cause(code: int | None) -> str:
    """Why a worker that died before it was ready died, as far as its exit says: a signal
    a shell limit sends is named with the limit."""
    import resource

    names = {signal.SIGXFSZ: "file size (ulimit -f)", signal.SIGXCPU: "CPU time (ulimit -t)",
             signal.SIGKILL: "killed (out of memory?)", signal.SIGSEGV: "crashed (out of memory?)"}  # fmt: skip
    if code is not None and code < 0 and -code in names:
        return f"it met the {names[-code]} limit" if -code in (signal.SIGXFSZ, signal.SIGXCPU) \
            else names[-code]  # fmt: skip
    limits = []
    for what, which in (("file size (ulimit -f)", resource.RLIMIT_FSIZE),
                        ("address space (ulimit -v)", resource.RLIMIT_AS)):  # fmt: skip
        soft, _ = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY:
            limits.append(f"{what} {soft} bytes")
    shell = f"; the shell limits {', '.join(limits)}" if limits else ""
    return f"it exited with status {code} (its messages are above){shell}"


class ReadPool:
    """Long-lived limited workers; `call` runs a function of `agent` in one of them."""

    def __init__(self, limits: SandboxLimits | None = None, verb: str = "read") -> None:
        self.limits = limits or SandboxLimits()
        self.verb = verb  # what a refusal says the file needs the time or memory to do
        self._idle: list[_Worker] = []
        self._started = 0
        self._cond = threading.Condition()
        self._closed = False

    def _take(self) -> _Worker:
        with self._cond:
            while not self._idle and self._started >= self.limits.workers:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._started += 1
        try:
            return _Worker(self.limits)
        except BaseException:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _give(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None or self._closed:
                self._started -= 1
            else:
                self._idle.append(worker)
            self._cond.notify()
        if worker is not None and self._closed:
            worker.kill()

    def call(self, what: str | Path, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a limited worker; `what` (the file) names it in a refusal. A
        `SpectrumError` the reader raised comes back as one; a passed limit, as
        `ReadRefused`."""
        if self._closed:
            raise RuntimeError("the read pool is closed")
        worker = self._take()
        try:
            status, value = self._run(worker, fn, args)
        except BaseException:
            worker.kill()
            self._give(None)
            raise
        if status in ("ok", "spectrum", "error", "output"):
            self._give(worker)
        else:
            worker.kill()
            self._give(None)
        return self._answer(what, status, value)

    def _run(self, worker: _Worker, fn: Callable[..., Any], args: tuple) -> tuple[str, Any]:
        import select

        job = pickle.dumps((fn, args, dataclasses.asdict(LIMITS)))
        try:
            _send(worker.stdin, job)
            worker.stdin.flush()
        except OSError:
            return self._death(worker)
        deadline = time.monotonic() + self.limits.wall_seconds
        while True:
            ready, _, _ = select.select([worker.stdout], [], [], 0.2)
            if ready:
                break
            if time.monotonic() > deadline:
                return "cpu", None
            if not worker.alive():
                return self._death(worker)
        try:
            return pickle.loads(_recv(worker.stdout))
        except (EOFError, OSError):
            return self._death(worker)

    @staticmethod
    def _death(worker: _Worker) -> tuple[str, Any]:
        try:
            code = worker.proc.wait(5)
        except Exception:  # noqa: BLE001
            code = None
        if code == -signal.SIGXCPU:
            return "cpu", None
        return "memory", code  # killed, or crashed where an allocation failed

    def _answer(self, what: str | Path, status: str, value: Any) -> Any:
        lim = self.limits
        if status == "ok":
            return value
        if status == "spectrum":
            kind, source, problem = value
            from agent.formats import common

            cls = getattr(common, kind, None)
            if not (isinstance(cls, type) and issubclass(cls, SpectrumError)):
                cls = SpectrumError
            return _raise(cls(source, problem))
        if status == "error":
            kind, text = value
            return _raise(SpectrumError(what, f"corrupt or unsupported content ({kind}: {text})"))
        if status == "output":
            return _raise(
                ReadRefused(what, f"gives more than {lim.output_mb} MB when read ({value} bytes)")
            )
        if status == "cpu":
            return _raise(ReadRefused(what, f"needs more than {lim.cpu_seconds} s to {self.verb}"))
        return _raise(ReadRefused(what, f"needs more than {lim.memory_mb} MB to {self.verb}"))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


def _raise(exc: BaseException) -> Any:
    raise exc


_POOLS: dict[str, ReadPool] = {}
_POOL_LOCK = threading.Lock()


def pool() -> ReadPool:
    """The process's read pool, started on first use with the environment's limits."""
    return _named("read", SandboxLimits, "read")


def vet_pool() -> ReadPool:
    """The process's pool for vetting untrusted files (`SandboxLimits.for_vetting`): apart
    from the read pool, so the reads a view waits on never queue behind a vetting."""
    return _named("vet", SandboxLimits.for_vetting, "vet")


def _named(name: str, limits: Callable[[], SandboxLimits], verb: str) -> ReadPool:
    with _POOL_LOCK:
        found = _POOLS.get(name)
        if found is None or found._closed:
            found = _POOLS[name] = ReadPool(limits(), verb)
            atexit.register(found.close)
        return found


# -- what workers run ---------------------------------------------------------------------
def read_metas(path: str, locs: list[tuple[Any, Any]]) -> list[Any]:
    """For each (hdu, row) of one file: its spectrum's `SpectrumMeta`, or the
    (kind, source, problem) of why it cannot be read. The file is read whole once when
    several spectra are asked for; each one on its own otherwise (or to name a bad one)."""
    from agent.formats import load_one, read_spectra

    index: dict[tuple[Any, Any], Any] = {}
    if len(locs) > 1:
        try:
            for spec in read_spectra(path):
                index[(_norm(spec.meta.hdu), spec.meta.row)] = spec.meta
        except SpectrumError:
            index = {}
    out: list[Any] = []
    for hdu, row in locs:
        meta = index.get((_norm(hdu), row))
        if meta is None:
            try:
                meta = load_one(Path(path), hdu=hdu, row=row).meta
            except SpectrumError as err:
                meta = (type(err).__name__, err.source, err.problem)
        out.append(meta)
    return out


def _norm(hdu: Any) -> Any:
    return str(hdu) if hdu is not None else None


def checked_candidates(path: str, task: str, roots: list[Path] | None) -> list[Any]:
    """The candidates a file (or catalogue) names, each spectrum read once to prove it
    readable: what an upload is checked with before anything is kept."""
    return [ref for ref, _ in checked_upload(path, task, roots)]


def checked_upload(path: str, task: str, roots: list[Path] | None) -> list[tuple[Any, Any]]:
    """`checked_candidates` with each one's `SpectrumMeta` (what ingesting it records), so
    the file need not be read again for it."""
    found = expand_limited(path, task, roots)
    return [(ref, ref.load().meta) for ref in found]


def expand_limited(path: str, task: str, roots: list[Path] | None) -> list[Any]:
    """The candidates a path names (files it points at are read only where a file must be
    read to list its spectra)."""
    from agent.candidates import expand_candidates

    return expand_candidates([str(path)], task=task, roots=roots)


def display_spectrum(
    path: str, hdu: Any, row: Any, windows: list[tuple[float, float]], max_pixels: int
) -> Any:
    """The spectrum at (path, hdu, row) as the views draw it (`agent.display.display_copy`):
    whole where it has at most `max_pixels` pixels, else a reduced copy, read and reduced
    here so that the server only ever holds the copy."""
    from agent.display import display_copy
    from agent.formats import load_one

    return display_copy(load_one(Path(path), hdu=hdu, row=row), windows, max_pixels)


def spectrum_header(path: str, hdu: Any, row: Any) -> tuple[Any, float]:
    """The spectrum's metadata and redshift, without its arrays (what a VI file's pipeline
    columns need)."""
    from agent.formats import load_one

    spec = load_one(Path(path), hdu=hdu, row=row)
    return spec.meta, float(spec.redshift)
