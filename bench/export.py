#!/usr/bin/env python
"""Export benchmark: SFT rows per second with the faithful `speco3` images.

    python bench/export.py [--n 200] [--workers 1,4] [--renderer speco3]

Seeds a store with `--n` accepted two-step trajectories (global view + one zoom, so two
images a row) on LAMOST-like 3909-pixel text spectra, then times
`annotate.export.run_export` (the `launch.py export sft` path) once per worker count in
`--workers`; every run after the first is checked to be byte-identical to the first (the
same files, the same hashes), so a parallel export is only counted if it writes what a
single process writes. Prints each run's rows/s and the machine's load average (the
figure depends on what else runs), and ends with `<renderer>_export_rows_per_s: N`, the
best of the runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agent.protocol import TOOL_NAME
from agent.refs import CandidateRef
from agent.tasks import TASKS
from agent.trajectory import Step, Trajectory

TASK_NAMES = tuple(TASKS)  # indexable, in the tasks' own order


def seed_store(url: str, spec_dir: Path, n: int, seed: int = 0):
    """A store with `n` candidates, each with one accepted rules trajectory that zooms once."""
    from db.store import Store

    spec_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909))
    store = Store(url)
    store.ensure_expert("ada")
    refs = []
    for i in range(n):
        path = spec_dir / f"x{i}.csv"
        flux = 1000 * (wave / 6000) ** rng.uniform(-2, 2) + rng.normal(0, 20, wave.size)
        path.write_text(
            "wavelength,flux\n" + "\n".join(f"{a:.3f},{b:.3f}" for a, b in zip(wave, flux))
        )
        refs.append(CandidateRef(id=f"x{i}", task=TASK_NAMES[i % len(TASK_NAMES)], path=str(path)))
    store.add_candidates(refs)
    trajs = []
    for i, r in enumerate(refs):
        verdict = "YES" if i % 2 else "NO"
        lo = 4800.0 + 40.0 * (i % 50)  # zooms of several spans and places
        window = (lo, lo + 120.0 + 10.0 * (i % 7))
        steps = [
            Step(
                thought="Look closer.",
                tool_call={
                    "name": TOOL_NAME,
                    "arguments": {"wavelength_range": list(window)},
                },
                window=window,
                observation_text="ok",
            ),
            Step(thought="Decide.", answer=verdict, explanation="Line strengths."),
        ]
        trajs.append(
            Trajectory(
                id=r.id,
                task=r.task,
                spectrum_ref=r.spectrum_ref,
                policy="rules",
                steps=steps,
                verdict=verdict,
                confidence=0.8,
                state="done",
            )
        )
    store.record_trajectories(trajs)
    with store.engine.begin() as c:  # every trajectory accepted (the figure is the export's)
        c.exec_driver_sql(
            "INSERT INTO review (candidate_id, expert_id, trajectory_id, action, label, source,"
            " revision, created, updated) SELECT c.id, e.id, c.trajectory_id, 'accept', c.verdict,"
            " 'bench', 1, c.created, c.created FROM candidate c, expert e WHERE e.name = 'ada'"
        )
        c.exec_driver_sql(
            "UPDATE candidate SET review_count = 1, label = verdict, label_source = 'review',"
            " n_yes = (verdict = 'YES'), n_no = (verdict = 'NO')"
        )
    return store


def folder_digest(folder: Path) -> str:
    """One hash over every file's relative path and bytes, manifest included."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="Accepted trajectories to export.")
    ap.add_argument("--workers", default="1,4", help="Comma-separated worker counts, one run each.")
    ap.add_argument("--renderer", default="speco3", help="Renderer of the images.")
    args = ap.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w.strip()]

    from annotate.export import run_export

    with tempfile.TemporaryDirectory(prefix="loupe-bench-export-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        store = seed_store(f"sqlite:///{work / 'bench.db'}", work / "spectra", args.n)
        print(f"seeded {args.n} accepted trajectories in {time.perf_counter() - t0:.1f} s")
        best, first = 0.0, None
        for i, workers in enumerate(counts):
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = run_export(
                store, "sft", work / f"out{i}", renderer=args.renderer, workers=workers, full=True
            )
            dt = time.perf_counter() - t0
            rows = res.manifest["rows"]
            if res.errors:
                print(f"{len(res.errors)} rows not built, first: {res.errors[0]}", file=sys.stderr)
                return 1
            digest = folder_digest(work / f"out{i}")
            same = ""
            if first is None:
                first = digest
            elif digest != first:
                print(f"workers={workers}: output differs from the first run", file=sys.stderr)
                return 1
            else:
                same = ", byte-identical to the first run"
            rate = rows / dt
            best = max(best, rate)
            print(
                f"export sft --renderer {args.renderer} --workers {workers}: {rows} rows in "
                f"{dt:.1f} s = {rate:.2f} rows/s (load average {load:.1f} on "
                f"{os.cpu_count()} CPUs{same})"
            )
    print(f"{args.renderer}_export_rows_per_s: {best:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
