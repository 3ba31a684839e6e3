"""Vetting throughput of the `rules` policy, one core, fast vs speco3 renderer.

    python bench/vet.py [--spectra 40] [--repeat 2]

Runs the whole agent loop (global view, every zoom rendered as an image, parsing, the
record) with the rule-based inspector in this one process, over the same candidates with
each renderer. Candidates are real LAMOST files from ../shared/spectra when present (else
simulated LAMOST-like spectra from `training.sim.demo`), each vetted for all five tasks; one
(spectrum, task) pair counts as one spectrum vetted. Spectra are read before timing.
Prints spectra/s per core for each renderer and their ratio.

Then the same candidates (from their files) through the two ways `launch.py vet` spreads
work, with the same number of workers (--workers, default 2): the process pool of one
machine and a Ray actor pool on a local Ray cluster of that many CPUs (`vet --ray`), both
timed from the first candidate submitted to the last trajectory back, worker start-up
included (Ray's cluster start is not: a campaign pays it once), and in steady state (from
the first trajectory back to the last: what a long campaign runs at). Give enough
candidates (--pool-spectra) that Ray's few seconds of actor start-up are amortised before
reading the end-to-end overhead; the load average is printed beside it, since other jobs
on the machine move both rates. The Ray part is skipped when Ray is not installed
(`pip install loupe[cluster]`). The pool's trajectories are also written into a fresh
SQLite store through the driver's sink, one transaction per trajectory and batched as
`vet --db` writes them, each as trajectories/s. The last line is the headline
`rules_spectra_per_s_per_core: N` (fast renderer, one process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from agent.formats import read_spectra
from agent.loop import run_batch
from agent.spectrum import Spectrum
from agent.tasks import TASKS

REPO = Path(__file__).resolve().parent.parent


def real_spectra(n: int) -> list[Spectrum]:
    folder = REPO.parent / "shared" / "spectra" / "lamost"
    out: list[Spectrum] = []
    for path in sorted(folder.glob("*.fits")):
        try:
            out.extend(read_spectra(path))
        except Exception:  # an unreadable file is simply not part of the benchmark
            continue
        if len(out) >= n:
            break
    return out[:n]


def simulated_spectra(n: int) -> list[Spectrum]:
    from training.sim.demo import CLASSES, simulate

    names = [c.name for c in CLASSES]
    return [simulate(names[i % len(names)], (7, i), spec_id=f"bench-{i}")[0] for i in range(n)]


def run(spectra: list[Spectrum], renderer: str) -> tuple[float, float]:
    """(seconds, zooms) for vetting every spectrum for every task with a fresh policy."""
    from agent.policies import get_policy

    policy = get_policy("rules")  # fresh: no cached measurements from an earlier run
    items = [(s, task) for s in spectra for task in TASKS]
    t0 = time.perf_counter()
    trajs = [t for item in items for t in run_batch([item], policy, renderer=renderer)]
    seconds = time.perf_counter() - t0
    bad = [t for t in trajs if t.state != "done"]
    if bad:
        raise SystemExit(f"{len(bad)} runs did not finish, e.g. {bad[0].id}: {bad[0].error}")
    return seconds, sum(len(t.zooms) for t in trajs) / len(trajs)


def candidate_refs(n: int, tmp: Path) -> tuple[list, str]:
    """n files x 5 tasks as CandidateRefs: real LAMOST files, else simulated ones."""
    from agent.candidates import read_candidates

    files = sorted((REPO.parent / "shared" / "spectra" / "lamost").glob("*.fits"))[:n]
    source = "real LAMOST files"
    if len(files) < n:
        from training.sim.demo import CLASSES, generate_demo

        generate_demo(tmp, n_per_class=-(-n // len(CLASSES)), seed=7)
        files = sorted(tmp.glob("*.fits"))[:n]
        source = "simulated spectra"
    refs = [r for task in TASKS for r in read_candidates([str(f) for f in files], task=task)]
    return refs, source


def pool_args(workers: int, ray: bool):
    from annotate.vetting.runner import VetOptions

    opts = VetOptions(input=["unused"], workers=workers, renderer="fast")
    if ray:
        opts.ray, opts.ray_actors = "local", workers
    return opts


def timed(results, keep: list | None = None) -> tuple[float, float, int, int]:
    """(seconds, seconds to the first trajectory, trajectories, errors) of a stream; the
    trajectories go into `keep` when given."""
    t0 = time.perf_counter()
    first = 0.0
    n = errors = 0
    for t in results:
        if keep is not None:
            keep.append(t)
        n += 1
        first = first or time.perf_counter() - t0
        errors += t.state == "error"
    return time.perf_counter() - t0, first, n, errors


def report(name: str, sec: float, first: float, n: int, errors: int) -> tuple[float, float]:
    """Prints the run's rate end to end and after its first result (start-up excluded);
    returns both."""
    rate = n / sec
    steady = (n - 1) / (sec - first) if n > 1 and sec > first else rate
    print(
        f"{name:28s} {rate:7.1f} spectra/s end to end ({sec:.1f} s, first result after "
        f"{first:.1f} s), {steady:7.1f} spectra/s after it; {errors} errors"
    )
    return rate, steady


def sink_rates(trajs: list, tmp: Path) -> None:
    """The driver's sink: the pool's trajectories into a fresh SQLite store, one
    transaction each (`batch=1`) and batched as `vet --db` writes them."""
    from annotate.vetting.sinks import SINK_BATCH, StoreSink
    from db.store import Store

    for name, batch in (("one per transaction", 1), ("batched (vet --db)", SINK_BATCH)):
        sink = StoreSink(Store(str(tmp / f"sink-{batch}.db")), policy="rules", batch=batch)
        t0 = time.perf_counter()
        for t in trajs:
            sink.write(t)
        sink.close()
        rate = len(trajs) / (time.perf_counter() - t0)
        print(f"SQLite store sink, {name:20s} {rate:7.1f} trajectories/s ({len(trajs)})")
        print(f"sqlite_sink_rows_per_s_batch_{batch}: {rate:.1f}")


def pool_vs_ray(n_files: int, workers: int) -> None:
    import tempfile

    from annotate.vetting import runner

    with tempfile.TemporaryDirectory() as tmp:
        refs, source = candidate_refs(n_files, Path(tmp))
        n = len(refs)
        print(f"{n} candidates ({source}, {len(TASKS)} tasks each); {workers} workers")
        trajs: list = []
        args = pool_args(workers, ray=False)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        pool, pool_steady = report(
            f"process pool, {workers} workers:",
            *timed(runner.run_processes(refs, args, {}, "fast"), trajs),
        )
        sink_rates(trajs, Path(tmp))
        try:
            import ray
        except ImportError:
            print("ray: not installed (pip install loupe[cluster]); Ray run skipped")
            return
        from annotate.vetting import cluster

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        try:
            args = pool_args(workers, ray=True)
            actors, results = cluster.vet(refs, args, {}, "fast")
            rate, steady = report(f"ray actor pool, {actors} actors:", *timed(results))
        finally:
            ray.shutdown()
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        print(f"pool_spectra_per_s_{workers}_workers: {pool:.1f}")
        print(f"ray_spectra_per_s_{workers}_workers: {rate:.1f}")
        print(f"ray_overhead_vs_pool_pct: {100 * (pool / rate - 1):.1f}")
        print(f"ray_overhead_vs_pool_steady_pct: {100 * (pool_steady / steady - 1):.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spectra", type=int, default=40, help="spectra (each vetted for 5 tasks)")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per renderer (median)")
    ap.add_argument(
        "--pool-spectra", type=int, default=60, help="files (x 5 tasks) for process pool vs Ray"
    )
    ap.add_argument("--workers", type=int, default=2, help="process pool workers and Ray actors")
    args = ap.parse_args()

    spectra = real_spectra(args.spectra)
    source = "real LAMOST files (../shared/spectra)"
    if len(spectra) < args.spectra:
        spectra = simulated_spectra(args.spectra)
        source = "simulated LAMOST-like spectra (training.sim.demo)"
    n = len(spectra) * len(TASKS)
    print(f"{len(spectra)} spectra x {len(TASKS)} tasks = {n} runs; {source}; one process")

    run(spectra[:2], "fast")  # warm-up: imports, fonts, caches
    run(spectra[:2], "speco3")
    rate = {}
    for renderer in ("fast", "speco3"):
        times, zooms = [], 0.0
        for _ in range(max(1, args.repeat)):
            sec, zooms = run(spectra, renderer)
            times.append(sec)
        sec = statistics.median(times)
        rate[renderer] = n / sec
        print(
            f"rules + {renderer:6s} renderer: {rate[renderer]:8.1f} spectra/s per core "
            f"({1000 * sec / n:6.1f} ms per spectrum, {zooms:.1f} zooms + 1 global view each)"
        )
    print(f"ratio fast/speco3: {rate['fast'] / rate['speco3']:.1f}")
    if args.pool_spectra > 0:
        pool_vs_ray(args.pool_spectra, args.workers)
    print(f"rules_spectra_per_s_per_core: {rate['fast']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
