"""The store's errors: bad input names the item and the problem."""

from __future__ import annotations

from agent.errors import LoupeError


class StoreError(LoupeError, ValueError):
    """Bad input for the store; the message names the item and the problem."""


class DatabaseError(StoreError):
    """The database itself cannot be opened or used (a bad URL, a missing driver, a file
    that is no database, a locked or unwritable one); the message names the database. The
    command that was given it says which flag chose it."""


class NotFound(StoreError, LookupError):
    pass


class StorePermissionError(PermissionError):
    """An expert tried something their account may not do."""
