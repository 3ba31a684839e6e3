"""argparse types for the commands' numeric and task flags: a value out of range is refused
while the command line is read (one line, exit 2, through `launch.main`), never taken and
acted on (`export --test-fraction 2` put every object in test; `audit --task quasar` printed
an empty table).

>>> share("0.25"), at_least(2)("5"), positive("0.5"), task("cc")
(0.25, 5, 0.5, 'carbon')
>>> share("1.5")
Traceback (most recent call last):
argparse.ArgumentTypeError: 1.5 is not a share between 0 and 1
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _number(text: str, kind: type):
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def share(text: str) -> float:
    """A fraction from 0 to 1 (a rate, a test share)."""
    value = _number(text, float)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a share between 0 and 1")
    return value


def positive(text: str) -> float:
    """A number above 0 (an S/N, a size, a duration)."""
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def at_least(low: int) -> Callable[[str], int]:
    """A whole number of at least `low` (workers, folds, a batch size)."""

    def parse(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is below {low}")
        return value

    parse.__name__ = f"at_least_{low}"
    return parse


def task(text: str) -> str:
    """A task name or alias (`agent.formats.catalogue.normalise_task`), as its task."""
    from agent.formats.catalogue import normalise_task
    from agent.spectrum import SpectrumError

    try:
        return normalise_task(text)
    except SpectrumError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--task: ")) from None
