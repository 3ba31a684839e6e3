"""`launch.py export`: collect from the store, write the export, record it as a batch.

python launch.py export sft   --db loupe.db --out exports/sft-1 --renderer speco3
python launch.py export rl    --db loupe.db --out exports/rl-1
python launch.py export pairs --db loupe.db --out exports/pairs-1
python launch.py export catalogue --db loupe.db --out exports/catalogue-1  # YES lists, purity
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from annotate.export.manifest import folder_state, record_batch
from annotate.export.pipeline import export_records
from annotate.export.record import DEFAULT_RENDERER, ExportResult
from annotate.export.selection import collect
from db.models import GRADES
from db.store import Store


class ExportError(LoupeError, ValueError):
    """The export could not be written where asked; the message says what to do."""


def run_export(
    db: Any,
    kind: str,
    out: str | Path,
    *,
    renderer: str = DEFAULT_RENDERER,
    test_fraction: float = 0.1,
    full: bool = False,
    include_auto: bool = False,
    min_grade: int | None = None,
    force: bool = False,
    workers: int | None = None,
    actor: str = "",
) -> ExportResult:
    """Collect from the store, write the export, and record it as an ExportBatch.

    Safe to re-run after a crash, with the same arguments, wherever it stopped: the files
    are renamed into `out` only when complete, and the batch is recorded (one transaction)
    only after that. A re-run into a folder that holds a complete export no batch records
    (killed between the rename and the commit) writes it again, byte-identical, and records
    it; a re-run into a folder whose batch is recorded changes nothing and returns that
    batch (`result.existing`).
    """
    store = db if isinstance(db, Store) else Store(db)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {str(out)!r} is a file, not a folder; name a new folder")
    if not force and out.is_dir() and any(out.iterdir()):
        state = folder_state(store, kind, out)
        if isinstance(state, ExportResult):
            return state
        force = state
    if min_grade is not None and min_grade not in GRADES:
        raise ExportError(f"--min-grade must be 1, 2, 3 or 4 (got {min_grade})")
    got = collect(store, kind, include_auto=include_auto, min_grade=min_grade)
    previous = {} if full else store.exported_items(kind, "candidate")
    batches = store.export_batches(kind)
    try:
        result = export_records(
            kind,
            got.records,
            out,
            renderer=renderer,
            previous=previous,
            test_fraction=test_fraction,
            existing_splits=got.existing_splits,
            not_exported=got.not_exported,
            workers=workers,
            force=force,
            version=store.code_version(),
            since_batch=None if full or not batches else batches[-1].id,
        )
    except OSError as err:  # disk full, no permission: the staged files are already removed
        if isinstance(err, FileExistsError) and err.errno is None:
            raise  # `out` holds something else: the pipeline's message says what to do
        raise ExportError(
            f"could not write the export into {str(out)!r}: {err.strerror or err}"
            + (f" ({err.filename})" if err.filename else "")
            + "; nothing was recorded: free space or choose a writable --out, then run again"
        ) from None
    result.batch_id = record_batch(store, kind, result, actor)
    return result


def empty_reason(kind: str, manifest: dict[str, Any]) -> str:
    """Why an export wrote no rows, and, where an earlier batch held them back, how to get
    every decision (an export of everything is not told to export everything).

    >>> empty_reason("sft", {"since_batch": 3, "unchanged_since_earlier_batches": 5,
    ...     "left_out": {"total": 0}})  # doctest: +NORMALIZE_WHITESPACE
    'empty: the 5 decision(s) to export are unchanged since earlier batches (this export holds
    only what is new since batch 3); run `launch.py export sft --full --out NEW_FOLDER` to
    export everything'
    >>> empty_reason("pairs", {"since_batch": None, "unchanged_since_earlier_batches": 0,
    ...     "left_out": {"total": 0}})
    'empty: no reject or correction to pair yet (a pair is what an expert rejected or corrected beside what they chose; accepts make none)'
    """
    unchanged = manifest.get("unchanged_since_earlier_batches") or 0
    since = manifest.get("since_batch")
    if unchanged:
        why = (
            f"the {unchanged} decision(s) to export are unchanged since earlier batches "
            f"(this export holds only what is new since batch {since})"
        )
    elif manifest.get("left_out", {}).get("total"):
        why = "every decision was left out (reasons above)"
    elif kind == "pairs":
        why = "no reject or correction to pair yet" + (
            f" since batch {since}"
            if since is not None
            else " (a pair is what an expert rejected or corrected beside what they chose; "
            "accepts make none)"
        )
    else:
        why = "no decision to export yet" + (
            f" since batch {since}" if since is not None else " (nothing reviewed)"
        )
    if since is None:  # everything was considered: --full would find nothing more
        return f"empty: {why}"
    return (
        f"empty: {why}; run `launch.py export {kind} --full --out NEW_FOLDER` to export everything"
    )
