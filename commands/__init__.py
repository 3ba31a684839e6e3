"""The command line: one module per `launch.py` command, each with `add_arguments(parser)`
and `main(args) -> int`. These modules parse flags, call the library and print; the work
is done in the packages below them (`annotate`, `db`, `agent`, `training`)."""

from __future__ import annotations

from agent.errors import LoupeError


class UsageError(LoupeError):
    """The command line itself is wrong (a flag missing, a value out of range). A command
    raises it rather than printing: `launch.main` alone turns it into one line on stderr and
    exit status 2, as it does argparse's own errors."""
