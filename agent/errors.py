"""The one base type for errors a user can act on.

A `LoupeError` carries a message meant for people: the CLI prints it as one line and exits
non-zero, the app shows it as is. Anything else that escapes is a bug, so the entry points
log it with its traceback instead of dressing it up as a message.
"""

from __future__ import annotations


class LoupeError(Exception):
    """A problem with the user's input or environment; the message names the item and what to do."""
