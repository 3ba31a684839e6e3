"""One export from records to a finished folder: dedup and splits, what is new, rows built
in worker processes, the format's writer, the manifest.

- Deterministic: rows sorted by (split, task, object, candidate), no timestamps or random
  values inside any file; the same inputs give byte-identical files.
- Incremental: only rows whose content is new since the earlier batches of that kind. A
  row that changed (a new review, an approved authored version) is exported again with
  the same `id` (object:task); keep the last one when concatenating batches.
  `manifest.json` counts it under `revised`.
- A row that cannot be built (a spectrum file that no longer reads, a step the tool
  refuses) is reported in the manifest with its id and reason; the other rows are kept.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from annotate.export import lifetime, pairs, rl, sft
from annotate.export.conversation import Images, load_spectrum
from annotate.export.manifest import (
    build_manifest,
    file_hashes,
    staged,
    write_manifest,
)
from annotate.export.record import DEFAULT_RENDERER, KINDS, ExportRecord, ExportResult
from annotate.export.selection import PAIR_RANK, SOURCE_RANK, assign_splits, dedup, sort_key
from annotate.export.writing import Built
from db.store import code_version

log = logging.getLogger(__name__)

# kind -> the module with its `build_row` (in a worker) and `write` (in this process)
FORMATS = {"sft": sft, "rl": rl, "pairs": pairs}


@dataclass
class Job:
    index: int
    kind: str
    record: ExportRecord
    renderer: str


def build(job: Job) -> Built:
    """One row, or why it could not be built; runs in a worker process."""
    r = job.record
    try:
        spectrum = load_spectrum(r.spectrum_ref)
        imgs = Images(spectrum, job.renderer)
        return FORMATS[job.kind].build_row(job.index, r, spectrum, imgs)
    except Exception as exc:  # one bad row must not end the export
        log.debug("export row %s not built", r.row_id, exc_info=True)
        text = str(exc) or type(exc).__name__
        return Built(
            job.index, error=text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"
        )


# Rows below which a worker pool costs more than it saves: a `speco3` row (matplotlib,
# a global view and its zooms) takes tenths of a second, a `fast` one milliseconds.
MIN_POOL_ROWS = {"speco3": 8}
MIN_POOL_ROWS_DEFAULT = 32


def run_jobs(jobs: list[Job], workers: int) -> Iterable[Built]:
    """Each job's row, in order; in `workers` processes when there are enough rows.

    Each worker keeps its renderer's state between rows (`speco3` keeps one matplotlib
    figure per size), so rows go to workers in chunks of consecutive jobs; about eight
    chunks per worker keep them evenly loaded. A worker builds a row exactly as this
    process would, and results come back in submission order, so the files are the
    same byte for byte whatever `workers` is.
    """
    renderer = jobs[0].renderer if jobs else ""
    if workers <= 1 or len(jobs) < MIN_POOL_ROWS.get(renderer, MIN_POOL_ROWS_DEFAULT):
        for j in jobs:
            yield build(j)
        return
    workers = min(workers, len(jobs))
    with worker_pool(workers) as pool:
        yield from pool.map(build, jobs, chunksize=max(1, min(64, len(jobs) // (workers * 8))))


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """The export's pool of rendering processes; each dies with this process (a worker
    orphaned by a killed export would hold the database's files open, rendering for
    nobody)."""
    return ProcessPoolExecutor(
        max_workers=workers, initializer=lifetime.die_with_parent, initargs=(os.getpid(),)
    )


def export_records(
    kind: str,
    records: Sequence[ExportRecord],
    out: str | Path,
    *,
    renderer: str = DEFAULT_RENDERER,
    previous: dict[int, set[str]] | None = None,
    test_fraction: float = 0.1,
    split_salt: str = "loupe",
    existing_splits: dict[str, set[str]] | None = None,
    not_exported: dict[str, int] | None = None,
    workers: int | None = None,
    force: bool = False,
    version: str | None = None,
    since_batch: int | None = None,
) -> ExportResult:
    """Write `records` as a `kind` export into `out` (a new folder) and return what was written.

    `previous` maps candidate id -> content hashes already exported in earlier batches of
    this kind; a record whose hash is among them is left out. `existing_splits` maps object
    id -> the splits its candidates carry in the store (all of them, not only exported).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown export kind {kind!r}; choose one of {', '.join(KINDS)}")
    t0 = time.perf_counter()
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise FileExistsError(f"{out} exists and is not empty; choose a new folder or --force")
    previous = previous or {}
    recs = [
        dataclasses.replace(r)
        for r in dedup(records, PAIR_RANK if kind == "pairs" else SOURCE_RANK)
    ]
    assign_splits(recs, existing_splits or {}, test_fraction, split_salt)
    hashes = {id(r): r.content_hash() for r in recs}
    fresh = [r for r in recs if hashes[id(r)] not in previous.get(r.candidate_id, set())]
    revised = sum(1 for r in fresh if previous.get(r.candidate_id))
    fresh.sort(key=sort_key)

    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    jobs = [Job(i, kind, r, renderer) for i, r in enumerate(fresh)]
    errors: list[dict[str, str]] = []
    with staged(out) as (partial, scratch):
        written = FORMATS[kind].write(fresh, run_jobs(jobs, workers), partial, scratch, errors)
        manifest = build_manifest(
            kind,
            written,
            errors,
            file_hashes(partial),
            renderer=renderer,
            test_fraction=test_fraction,
            salt=split_salt,
            revised=revised,
            not_exported=not_exported or {},
            version=version or code_version(),
            since_batch=since_batch,
            n_candidates=len(recs),
            n_unchanged=len(recs) - len(fresh),
        )
        write_manifest(partial, manifest)
    return ExportResult(
        kind=kind,
        out=out,
        manifest=manifest,
        items=[(r.candidate_id, hashes[id(r)]) for r in written],
        errors=errors,
        seconds=time.perf_counter() - t0,
    )
