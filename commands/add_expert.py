"""`launch.py add-expert NAME`: create or update an expert account (role, password, active).
The account rules (password length, hashing, sessions) are `annotate.team.experts`'s."""

from __future__ import annotations

import argparse
import getpass
import sys

from annotate.team.experts import create_expert, unlock_login, update_expert
from db.store import DEFAULT_DB, Store, StoreError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="Expert's login name.")
    parser.add_argument(
        "--role",
        choices=["expert", "admin"],
        default=None,
        help="admin may adjudicate conflicts, export and manage experts. A new account is an "
        "expert unless given; an existing one keeps its role unless given.",
    )
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="Read the password from the first line of stdin (else prompt, "
        "when a terminal is attached; else no password).",
    )
    active = parser.add_mutually_exclusive_group()
    active.add_argument(
        "--deactivate",
        action="store_true",
        help="Disable an existing account (its reviews are kept; its sessions end).",
    )
    active.add_argument(
        "--activate", action="store_true", help="Enable a deactivated account again."
    )
    parser.add_argument(
        "--unlock",
        action="store_true",
        help="Lift the running app's login throttle for this name (after someone else's "
        "wrong guesses locked it out).",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="Database file or SQLAlchemy URL.")


def _read_password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise StoreError("--password-stdin: stdin held no password")
        return line
    if sys.stdin.isatty():
        pw = getpass.getpass(f"password for {args.name} (empty: none): ")
        if pw and pw != getpass.getpass("again: "):
            raise StoreError("the two passwords differ")
        return pw or None
    return None


def main(args: argparse.Namespace) -> int:
    """Create or update the account. A refusal (no password on stdin, the passwords differ,
    a bad role or name) is a `StoreError`: launch.py prints it on one line and exits 2."""
    password = _read_password(args)
    store = Store(args.db, create=False)
    try:
        print(_add_or_update(store, args, password))
    finally:
        store.close()
    return 0


def _add_or_update(store: Store, args: argparse.Namespace, password: str | None) -> str:
    """Create the account, or change on it only what the flags name; returns what was done."""
    if store.expert(args.name) is None:
        for flag in ("deactivate", "unlock"):
            if getattr(args, flag):
                raise StoreError(f"no expert {args.name!r}: --{flag} applies to an existing one")
        role = args.role or "expert"
        create_expert(store, args.name, role, password, actor="add-expert")
        return f"created {role} {args.name!r}" + (" with a password" if password else "")
    active = True if args.activate else False if args.deactivate else None
    done = []
    if args.role is not None or password or active is not None:
        update_expert(
            store,
            args.name,
            role=args.role,
            password=password,
            active=active,
            actor="add-expert",
        )
        done += [f"role {args.role}"] if args.role else []
        done += ["new password"] if password else []
        done += ["activated" if active else "deactivated"] if active is not None else []
    if args.unlock:
        unlock_login(store, args.name, actor="add-expert")
        done.append("login unlocked")
    e = store.expert(args.name)
    state = f"{e.role}, {'active' if e.active else 'inactive'}"
    return (
        f"updated {args.name!r}: {', '.join(done)} ({state})"
        if done
        else (
            f"{args.name!r} unchanged ({state}); give --role, a password, --activate, "
            "--deactivate or --unlock to change it"
        )
    )
