"""`launch.py ingest SOURCES... [--task T] [--db URL]`: load candidates into the store.

SOURCES are spectrum files, folders, globs, catalogue CSVs (`path,task[,id,hdu,row,label,...]`,
paths relative to the CSV) and SpecVI-Bench parquet files. A bad file, or a bad catalogue
line (a missing file, an unknown task, an id already given to another spectrum, in this run
or in the store), is reported with the problem and skipped; everything else is ingested, and
the exit status is 1 (`--keep-first` lets an id given twice keep its first spectrum, the
stored one if any, without failing). Re-running is safe (`annotate.intake.ingest`).

    python launch.py ingest data/lamost/*.fits --task cv --db loupe.db
    python launch.py ingest catalogue.csv --split train --source-catalog "LAMOST DR9 CV"
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from commands import flags
from db.store import DEFAULT_DB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sources",
        nargs="+",
        help="Spectrum files, folders, globs, catalogue CSVs or SpecVI parquet.",
    )
    parser.add_argument(
        "--task",
        default=None,
        help="Task for inputs that carry none (plain files, folders, globs).",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="Database file or SQLAlchemy URL.")
    parser.add_argument(
        "--split",
        choices=["train", "test", "holdout"],
        default=None,
        help="Split for candidates whose catalogue gives none.",
    )
    parser.add_argument(
        "--source-catalog",
        default=None,
        help="Name of the catalogue the candidates come from, recorded with each.",
    )
    parser.add_argument(
        "--gold",
        action="store_true",
        help="Mark these candidates as gold-standard items (their label is the gold label).",
    )
    parser.add_argument(
        "--no-read",
        action="store_true",
        help="Do not open catalogue spectra to check them and read survey metadata.",
    )
    parser.add_argument(
        "--no-hash", action="store_true", help="Do not compute each file's sha256 content hash."
    )
    parser.add_argument(
        "--root",
        action="append",
        default=None,
        help="Refuse paths outside this folder (repeatable).",
    )
    parser.add_argument(
        "--batch-size", type=flags.at_least(1), default=2000, help="Candidates per transaction."
    )
    parser.add_argument(
        "--keep-first",
        action="store_true",
        help="When one id is given to two different spectra (in the input, or one in the "
        "input and another in the store), keep the first (the stored one) and go on (the "
        "conflict is still reported) instead of failing.",
    )


def report_refused(command: str, errors: list[tuple[str, str]], keep_first: bool = False) -> int:
    """One stderr line per refused item, as `ingest` words it (`vet --db` too); returns how
    many count as failed (a conflict kept as the first does not)."""
    from annotate.intake.ingest import Conflict

    failed = 0
    for error in errors:
        item, problem = error
        if keep_first and isinstance(error, Conflict):
            print(f"{command}: kept the first: {item}: {problem}", file=sys.stderr)
            continue
        failed += 1
        hint = " (--keep-first keeps the first)" if isinstance(error, Conflict) else ""
        print(f"{command}: skipped {item}: {problem}{hint}", file=sys.stderr)
    return failed


def main(args: argparse.Namespace) -> int:
    from agent.formats.catalogue import normalise_task
    from agent.spectrum import SpectrumError
    from annotate.intake.ingest import ingest
    from commands import UsageError
    from db.store import Store

    try:
        normalise_task(args.task)
    except SpectrumError as err:
        raise UsageError(str(err)) from None  # --task names no task
    t0 = time.time()
    with _named_file_limit():
        report, errors = _ingest(args, ingest, Store)
    failed = report_refused("ingest", errors, keep_first=getattr(args, "keep_first", False))
    print(
        f"ingest: {report.added} added, {report.existing} already present, "
        f"{len(errors)} refused ({time.time() - t0:.1f} s) -> {args.db}"
    )
    return 1 if failed else 0


@contextlib.contextmanager
def _named_file_limit():
    """A database that cannot be written under a shell file-size limit (`ulimit -f`) says
    so: SQLite only says "disk I/O error"."""
    import resource

    from db.store.errors import DatabaseError

    try:
        yield
    except DatabaseError as err:
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft == resource.RLIM_INFINITY:
            raise
        raise DatabaseError(
            f"{err}; the shell limits the files this process writes to {soft} bytes "
            "(`ulimit -f`): raise the limit, or write the database elsewhere"
        ) from None


def _ingest(args: argparse.Namespace, ingest, Store) -> tuple:
    store = Store(args.db)
    try:
        return ingest(
            store,
            args.sources,
            task=args.task,
            split=args.split,
            source_catalog=args.source_catalog,
            gold=args.gold,
            read=not args.no_read,
            hash_files=not args.no_hash,
            roots=[Path(r) for r in args.root] if args.root else None,
            batch_size=args.batch_size,
        )
    finally:
        store.close()
