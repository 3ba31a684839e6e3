"""The store's errors: bad input names the item and the problem."""

from __future__ import annotations

from agent.errors import LoupeError


class StoreError(LoupeError, ValueError):
    """Bad input for the store; the message names the item and the problem."""


class NotFound(StoreError, LookupError):
    pass


class StorePermissionError(PermissionError):
    """An expert tried something their account may not do."""
