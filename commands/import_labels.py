"""`launch.py import-labels CSV...`: record earlier verdicts from VI CSVs as experts' reviews.

The CSVs may be in Loupe's, Prospect's or Marz's layout; what a row means is
`annotate.intake.labels`'s."""

from __future__ import annotations

import argparse
import sys

from annotate.intake.labels import import_labels
from db.store import DEFAULT_DB, Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "csv", metavar="FILE.csv", help="CSV with id (or path,task), label, reason, comment."
    )
    parser.add_argument(
        "--expert",
        default=None,
        help="Whose reviews these become (rows of a VI CSV's `expert` column are that "
        "expert's); needed when the file names no expert.",
    )
    parser.add_argument(
        "--create-expert",
        action="store_true",
        help="Create the expert if there is none of that name (otherwise an unknown name "
        "is refused).",
    )
    parser.add_argument(
        "--task",
        default=None,
        help="The task of rows that name none. A row whose id (or TARGETID) belongs to "
        "candidates of several tasks is refused without it, never given to one of them.",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="Write nothing: print what each row would change (line by line), and the "
        "summary the import would give.",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="Database file or SQLAlchemy URL.")


def main(args: argparse.Namespace) -> int:
    """Exit 1 when some rows were refused (each named; the rest are recorded). An unknown
    expert or an unreadable file is a `StoreError`: launch.py prints it and exits 2."""
    from agent.formats.catalogue import normalise_task
    from agent.spectrum import SpectrumError
    from commands import UsageError

    task = getattr(args, "task", None)
    if task is not None:
        try:
            task = normalise_task(task)
        except SpectrumError as err:
            raise UsageError(str(err)) from None  # --task names no task
    store = Store(args.db, create=False)
    try:
        report = import_labels(
            store, args.csv, args.expert, create_expert=getattr(args, "create_expert", False),
            task=task, dry_run=getattr(args, "dry_run", False),
        )  # fmt: skip
    finally:
        store.close()
    for line, said in report.planned:
        print(f"import-labels: {args.csv} line {line}: {said}")
    for line, why in report.errors:
        print(f"import-labels: {args.csv} line {line}: {why}", file=sys.stderr)
    who = f"as {args.expert!r}" if args.expert else "as the experts the file names"
    dry = " (a dry run: nothing written)" if report.dry_run else ""
    print(f"import-labels: {report} {who}{dry}")
    return 1 if report.errors else 0
