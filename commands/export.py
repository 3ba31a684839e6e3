"""`launch.py export KIND --out PATH`: write reviewed decisions as training data, a VI CSV or a catalogue.

KIND is sft, rl or pairs (`annotate.export`: only what is new since the last batch of that
kind, unless --full), vi (every decision as a VI CSV, `annotate.export.vi`) or catalogue
(each task's YES list with its estimated precision, `annotate.export.catalogue`).
"""

from __future__ import annotations

import argparse
import sys

from annotate.export.batch import empty_reason, run_export
from annotate.export.catalogue import CatalogueError, write_catalogue
from annotate.export.record import DEFAULT_RENDERER, KINDS
from annotate.export.vi import LAYOUTS, VIError, write_vi
from commands import flags
from db.store import DEFAULT_DB, DatabaseError, Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kind",
        choices=(*KINDS, "vi", "catalogue"),
        help="sft trajectories, rl labels, DPO pairs, vi: the decisions as a VI CSV, or "
        "catalogue: each task's YES list as CSV and FITS with its estimated precision",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="database URL or SQLite file")
    parser.add_argument(
        "--out", required=True, help="new folder to write the export into (vi: the CSV file)"
    )
    parser.add_argument(
        "--renderer",
        default=DEFAULT_RENDERER,
        choices=("fast", "speco3"),
        help="renderer of the images, recorded in the manifest; the training scripts refuse a "
        "checkpoint or another export drawn with another one (speco3: the published tool's)",
    )
    parser.add_argument(
        "--test-fraction",
        type=flags.share,
        default=0.1,
        help="fraction of objects without a stored split that go to test (by hash of object id)",
    )
    parser.add_argument(
        "--full", action="store_true", help="export everything, not only what is new"
    )
    parser.add_argument(
        "--include-auto",
        action="store_true",
        help="also export labels the agent set by auto-accept (no expert saw them)",
    )
    parser.add_argument(
        "--min-grade",
        type=int,
        default=None,
        help="only decisions an expert graded at least N (1 a guess .. 4 certain); ungraded "
        "ones, gold and catalogue labels are left out too",
    )
    parser.add_argument("--force", action="store_true", help="replace --out if it is not empty")
    parser.add_argument(
        "--workers",
        type=flags.at_least(1),
        default=None,
        help="render processes; None: as many as CPUs, at most 4",
    )
    parser.add_argument("--actor", default="", help="who runs the export (recorded in the batch)")
    add_vi_arguments(parser)
    add_catalogue_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if args.kind == "vi":
        return vi_main(args)
    if args.kind == "catalogue":
        return catalogue_main(args)
    try:
        result = run_export(
            Store(args.db, create=False),
            args.kind,
            args.out,
            renderer=args.renderer,
            test_fraction=args.test_fraction,
            full=args.full,
            include_auto=args.include_auto,
            min_grade=args.min_grade,
            force=args.force,
            workers=args.workers,
            actor=args.actor,
        )
    except DatabaseError:
        raise  # the command line names the flag that chose the database
    except (FileExistsError, ValueError) as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    m = result.manifest
    if result.existing:
        print(f"{args.kind}: {result.out} already holds batch {result.batch_id} "
              f"({m['rows']} rows); nothing written")  # fmt: skip
        return 0
    print(f"{args.kind}: {m['rows']} rows into {result.out} ({result.seconds:.1f} s)")
    for name in ("split", "task", "label", "source"):
        print(f"  by {name}: {m['counts'][name]}")
    if m["left_out"]["total"]:
        print(f"  left out: {m['left_out']['total']} decision(s): {m['left_out']['reasons']}")
    for e in result.errors:
        print(f"  skipped {e['id']}: {e['reason']}", file=sys.stderr)
    if not m["rows"]:
        print(f"  {empty_reason(args.kind, m)}")
    return 0


def add_vi_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--campaign", default=None, help="only this campaign (catalogue or task)")
    parser.add_argument(
        "--layout",
        default="loupe",
        choices=LAYOUTS,
        help="Loupe's columns, or DESI Prospect's VI file / a Marz results file, each "
        "followed by Loupe's other columns",
    )


def vi_main(args: argparse.Namespace) -> int:
    from pathlib import Path

    if Path(args.out).exists() and not args.force:  # a file of decisions is never lost
        print(f"export vi: {args.out} exists; pass --force to replace it", file=sys.stderr)
        return 2
    store = Store(args.db, create=False)
    try:
        n = write_vi(store, args.out, campaign=args.campaign, layout=args.layout)
    except VIError as exc:
        print(f"export vi: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"vi: {n} decisions into {args.out}")
    return 0


def add_catalogue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task", action="append", default=None, help="catalogue: only this task (repeatable)"
    )


def catalogue_main(args: argparse.Namespace) -> int:
    from db.store import Store

    store = Store(args.db, create=False)
    try:
        cat = write_catalogue(store, args.out, tasks=args.task)
    except CatalogueError as exc:
        print(f"export catalogue: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    for t in cat.manifest["tasks"].values():
        print(t["quote"])
    print(f"catalogue: {len(cat.manifest['tasks'])} task(s) into {cat.out}")
    return 0
