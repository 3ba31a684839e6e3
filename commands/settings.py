"""`launch.py settings`: show the team's campaign settings, or change them (KEY=VALUE).

    python launch.py settings --db data/loupe.db                   # every setting and its default
    python launch.py settings --db data/loupe.db audit_rate=0.1 learn_every=200

The settings and what each takes are `annotate.team.settings`'s; the Experts tab shows and
changes the same for admins. A refused value changes nothing (not even the others given).
"""

from __future__ import annotations

import argparse
import sys

from annotate.team import settings as team_settings
from commands import UsageError
from db.store import DEFAULT_DB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, help="Store (file or SQLAlchemy URL).")
    parser.add_argument(
        "changes",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"settings to change: {', '.join(team_settings.SETTINGS)}",
    )
    parser.add_argument("--actor", default="cli", help="who the audit log names for a change")


def main(args: argparse.Namespace) -> int:
    from db.store import Store

    pairs = []
    for item in args.changes:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"{item!r} is not KEY=VALUE")
        pairs.append((key.strip(), value))
    store = Store(args.db, create=False)
    try:
        for key, value in pairs:  # all checked before any is stored
            team_settings.check(key, value)
        for key, value in pairs:
            team_settings.change(store, key, value, args.actor)
        rows = team_settings.rows(store)
    except ValueError as exc:
        print(f"settings: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    width = max(len(r[0]) for r in rows)
    for name, value, default, what in rows:
        print(f"{name.ljust(width)}  {str(value):>8}  (default {default}; {what})")
    return 0
