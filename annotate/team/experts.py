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

from db.settings import DEFAULTS
from db.store import Store, StoreError, hash_password, verify_password_hash

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
