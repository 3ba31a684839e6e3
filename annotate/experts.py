"""Expert accounts: `launch.py add-expert NAME --role expert|admin [--password-stdin]`.

Passwords are hashed with argon2id (a slow KDF); the store keeps only the hash, and a
login session only as the sha256 of its token. Running the command again for an existing
name updates its role and, when given, its password (which ends its open sessions).

    python launch.py add-expert ada --role admin --password-stdin < secret.txt
"""

from __future__ import annotations

import argparse
import getpass
import sys

from annotate.settings import DEFAULTS
from db.store import DEFAULT_DB, Store, StoreError, hash_password, verify_password_hash

__all__ = [
    "create_expert",
    "update_expert",
    "verify_password",
    "hash_password",
    "verify_password_hash",
    "login",
    "logout",
    "add_arguments",
    "main",
]


def create_expert(
    store: Store, name: str, role: str = "expert", password: str | None = None, actor: str = "admin"
):
    """A new account; `password` None makes one that cannot log in (single-user mode)."""
    return store.create_expert(
        name, role, password_hash=hash_password(password) if password else None, actor=actor
    )


def update_expert(
    store: Store,
    name: str,
    *,
    role: str | None = None,
    password: str | None = None,
    active: bool | None = None,
    actor: str = "admin",
):
    return store.update_expert(
        name,
        role=role,
        password_hash=hash_password(password) if password else None,
        active=active,
        actor=actor,
    )


def verify_password(store: Store, name: str, password: str):
    """The active expert if the password is right, else None."""
    return store.verify_password(name, password)


def login(
    store: Store, name: str, password: str, ttl_seconds: float = DEFAULTS.session_seconds
) -> str | None:
    """A new session token for the expert if the password is right, else None."""
    return store.login(name, password, ttl_seconds)


def logout(store: Store, token: str) -> None:
    """End the session with this token (a no-op for an unknown one)."""
    store.logout(token)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="Expert's login name.")
    parser.add_argument(
        "--role",
        choices=["expert", "admin"],
        default="expert",
        help="admin may adjudicate conflicts and approve authored trajectories.",
    )
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="Read the password from the first line of stdin (else prompt, "
        "when a terminal is attached; else no password).",
    )
    parser.add_argument(
        "--deactivate", action="store_true", help="Disable the account (its reviews are kept)."
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
    try:
        password = _read_password(args)
        store = Store(args.db)
        try:
            if store.expert(args.name) is None:
                create_expert(store, args.name, args.role, password, actor="add-expert")
                print(
                    f"created {args.role} {args.name!r}" + (" with a password" if password else "")
                )
            else:
                update_expert(
                    store,
                    args.name,
                    role=args.role,
                    password=password,
                    active=False if args.deactivate else None,
                    actor="add-expert",
                )
                print(
                    f"updated {args.name!r}: role {args.role}"
                    + (", new password" if password else "")
                    + (", deactivated" if args.deactivate else "")
                )
        finally:
            store.close()
    except StoreError as err:
        print(f"add-expert: {err}", file=sys.stderr)
        return 1
    return 0
