"""`launch.py audit`: draw the random audit sample, and print the weighted figures per task.

    python launch.py audit --db data/loupe.db --draw    # draw each task's sample once
    python launch.py audit --db data/loupe.db           # precision, completeness, ECE so far
                                                        # (each with its estimator)
    python launch.py audit --db data/loupe.db --auto-accept  # close: sure verdicts become labels

The share is the team setting `audit_rate` (5% by default; `--rate` for this draw). The
queue serves the sample's items among the others (annotate.queue); docs/audit.md says how
to read the figures.
"""

from __future__ import annotations

import argparse
import sys

from annotate.audit.sample import (
    BAND_HEADERS,
    TABLE_HEADERS,
    accept_confident,
    band_rows,
    draw_for_store,
    store_estimates,
    table_rows,
)
from commands import flags
from db.store import DEFAULT_DB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, help="Store (file or SQLAlchemy URL).")
    parser.add_argument(
        "--draw", action="store_true", help="draw the sample of every task that has none yet"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="share of each task's confident verdicts to draw, half from its YES list (in "
        "proportion to its bands) and half from its NO list (by Neyman's allocation on the "
        "agent's P(YES)) (default: the team's audit_rate)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the draw")
    parser.add_argument(
        "--auto-accept",
        action="store_true",
        help="close the campaign: the agent's verdicts nobody reviewed that are at least "
        "--certainty sure become its labels (the catalogue's YES list, out of the queue)",
    )
    parser.add_argument(
        "--certainty",
        type=float,
        default=None,
        help="max(P, 1 - P) from which --auto-accept takes a verdict (default: the team's "
        "auto_accept, else 0.9)",
    )
    parser.add_argument("--task", type=flags.task, default=None, help="figures of this task only")


def _sides(draws) -> str:
    """Per task, how many of its YES and NO verdicts were drawn, of how many: the draw takes
    half from each list, which a reader of the figures should know."""
    seen: dict[str, dict[str, list[float]]] = {}
    for d in draws:  # each stratum's N_h is the sum of 1/pi over its n_h draws
        side = seen.setdefault(d.task, {"YES": [0, 0.0], "NO": [0, 0.0]})[d.band.side]
        side[0] += 1
        side[1] += 1.0 / d.inclusion
    if not seen:
        return " for no task"
    return ":" + ",".join(
        f" {t} {s['YES'][0]} of its {round(s['YES'][1])} YES and {s['NO'][0]} of its "
        f"{round(s['NO'][1])} NO verdicts"
        for t, s in sorted(seen.items())
    )


def _table(headers: list[str], rows: list[list]) -> str:
    cells = [headers, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def main(args: argparse.Namespace) -> int:
    from db.store import Store

    store = Store(args.db, create=False)
    try:
        if args.draw:
            draws = draw_for_store(store, args.rate, seed=args.seed, actor="audit")
            print(f"audit: drew {len(draws)} item(s){_sides(draws)}")
            sure = store.setting("auto_accept")
            if draws and sure is not None:
                print(f"audit: the queue serves the sample and the verdicts under {sure:g} sure; "
                      "the others wait for --auto-accept (team setting auto_accept)")  # fmt: skip
        if args.auto_accept:
            n, sure = accept_confident(store, args.certainty, task=args.task, actor="audit")
            print(
                f"audit: {n} verdict(s) at least {sure:g} sure auto-accepted"
                + (f" for {args.task}" if args.task else "")
                + " (the agent's labels now; an expert's decision replaces them)"
            )
        est = store_estimates(store, args.task)
    except ValueError as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(_table(TABLE_HEADERS, table_rows(est)))
    if any(e.band_errors for e in est.values()):
        print()
        print(_table(BAND_HEADERS, band_rows(est)))
    return 0
