"""Vetting throughput of the `rules` policy, one core, fast vs speco3 renderer.

    python bench/vet.py [--spectra 40] [--repeat 2]

Runs the whole agent loop (global view, every zoom rendered as an image, parsing, the
record) with the rule-based inspector in this one process, over the same candidates with
each renderer. Candidates are real LAMOST files from ../shared/spectra when present (else
simulated LAMOST-like spectra from `training.sim.demo`), each vetted for all five tasks; one
(spectrum, task) pair counts as one spectrum vetted. Spectra are read before timing.
Prints spectra/s per core for each renderer and their ratio; the last line is the headline
`rules_spectra_per_s_per_core: N` (fast renderer).
"""

from __future__ import annotations

import argparse
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spectra", type=int, default=40, help="spectra (each vetted for 5 tasks)")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per renderer (median)")
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
    print(f"rules_spectra_per_s_per_core: {rate['fast']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
