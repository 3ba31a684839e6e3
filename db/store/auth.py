"""Password and session-token hashing for expert accounts.

Passwords are kept only as argon2id hashes, session tokens only as SHA-256 hashes, so a
copy of the database gives away neither.
"""

from __future__ import annotations

import hashlib

from db.store.errors import StoreError

_hasher = None

# argon2id at RFC 9106's second recommended setting (64 MiB, 3 passes, 4 lanes): about
# 50-100 ms and 64 MiB per guess, so a stolen database resists offline guessing. Pinned here
# rather than left to the library's defaults, which may change between releases.
ARGON2_PARAMS = {"time_cost": 3, "memory_cost": 64 * 1024, "parallelism": 4}


def _password_hasher():
    global _hasher
    if _hasher is None:
        from argon2 import PasswordHasher, Type

        _hasher = PasswordHasher(**ARGON2_PARAMS, hash_len=32, salt_len=16, type=Type.ID)
    return _hasher


def hash_password(password: str) -> str:
    """An argon2id hash (slow on purpose) of a non-empty password."""
    if not password:
        raise StoreError("password is empty")
    return _password_hasher().hash(password)


_DUMMY_HASH: str | None = None


def verify_password_hash(password_hash: str | None, password: str) -> bool:
    """True if `password` matches; an account without a hash never matches (but costs the
    same time, so a missing name cannot be told from a wrong password)."""
    global _DUMMY_HASH
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    hasher = _password_hasher()
    if password_hash is None:
        _DUMMY_HASH = _DUMMY_HASH or hasher.hash("not a password")
        password_hash, password = _DUMMY_HASH, password + "\0"
        try:
            hasher.verify(password_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            pass
        return False
    try:
        return hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
