"""Expert accounts: `launch.py add-expert NAME --role expert|admin [--password-stdin]`.

Passwords are hashed with argon2id (a slow KDF); the store keeps only the hash, and a
login session only as the sha256 of its token. Running the command again for an existing
name changes only what is given: `--role`, the password (which ends its open sessions),
`--activate`/`--deactivate`, and `--unlock` (lifts the login throttle others' wrong guesses
put on the name).

    python launch.py add-expert ada --role admin --password-stdin < secret.txt
    python launch.py add-expert ada --unlock
"""

from __future__ import annotations

import argparse
import getpass
import sys

from db.settings import DEFAULTS
from db.store import DEFAULT_DB, Store, StoreError, hash_password, verify_password_hash

__all__ = [
    "create_expert",
    "update_expert",
    "verify_password",
    "hash_password",
    "verify_password_hash",
    "login",
    "set_password",
    "check_password",
    "MIN_PASSWORD_LENGTH",
    "logout",
    "unlock_login",
    "login_unlock_marker",
    "add_arguments",
    "main",
]


MIN_PASSWORD_LENGTH = 10  # characters; argon2 makes guessing slow, not a short password long


def check_password(password: str, name: str = "") -> str:
    """The password if it is long enough, else StoreError naming the account and the rule."""
    if len(password) < MIN_PASSWORD_LENGTH:
        who = f" for {name!r}" if name else ""
        raise StoreError(
            f"password{who} is {len(password)} characters; at least {MIN_PASSWORD_LENGTH} "
            "are required"
        )
    return password


def create_expert(
    store: Store, name: str, role: str = "expert", password: str | None = None, actor: str = "admin"
):
    """A new account; `password` None makes one that cannot log in (single-user mode)."""
    if password:
        check_password(password, name)
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
    if password:
        check_password(password, name)
    return store.update_expert(
        name,
        role=role,
        password_hash=hash_password(password) if password else None,
        active=active,
        actor=actor,
    )


def set_password(store: Store, name: str, password: str, actor: str = "admin"):
    """A new password for an account (at least MIN_PASSWORD_LENGTH characters); ends its
    open sessions."""
    return store.set_password(name, check_password(password or "", name), actor=actor)


def verify_password(store: Store, name: str, password: str):
    """The active expert if the password is right, else None."""
    return store.verify_password(name, password)


def login(
    store: Store, name: str, password: str, ttl_seconds: float = DEFAULTS.session_seconds
) -> str | None:
    """A new session token for the expert if the password is right, else None."""
    return store.login(name, password, ttl_seconds)


def unlock_login(store: Store, name: str, actor: str = "admin"):
    """Lift the running apps' login throttle for `name` (locked by someone else's guesses)."""
    return store.unlock_login(name, actor=actor)


def login_unlock_marker(store: Store, name: str) -> int | None:
    """Changes each time `name` is unlocked; the login route compares it with the last seen."""
    return store.login_unlock_marker(name.strip())


def logout(store: Store, token: str) -> None:
    """End the session with this token (a no-op for an unknown one)."""
    store.logout(token)


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
