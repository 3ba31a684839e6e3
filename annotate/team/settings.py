"""The team's campaign settings, read and changed in one place: how many experts review each
item, how often gold and audit items are served, when the inspector learns, how long a
served item stays leased.

The queue (`annotate.queue`), the audit (`annotate.audit.sample`) and the learning schedule
(`annotate.learning.schedule`) read these from the store's settings; `launch.py settings` and the
Experts tab (admins) change them here, so each value is checked once, with its reason.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from annotate.audit.sample import AUDIT_RATE, AUDIT_RATE_SETTING
from annotate.learning.schedule import LEARN_EVERY, LEARN_EVERY_SETTING
from db.store import QueueConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TeamSetting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


def _num(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not math.isfinite(v):
        raise ValueError("a number")
    return v


# Bounds (docs/deploy.md lists them): a team has a handful of experts per item, a rate
# below one item in MIN_RATE^-1 serves nothing in any campaign (and 1/rate must stay a
# period the queue can count in), and an inspector fit needs labels to learn from.
MAX_OVERLAP = 20
MIN_RATE = 1e-4
MAX_LEARN_EVERY = 1_000_000


def _share(text: str) -> float:
    v = _num(text)
    if v != 0.0 and not MIN_RATE <= v <= 1.0:
        raise ValueError(f"0 (none), or a share between {MIN_RATE:g} and 1 (0.05 is 5%)")
    return v


def _count(least: int, most: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = _num(text)
        if v != int(v) or not least <= v <= most:
            raise ValueError(f"a whole number, at least {least} and at most {most:,}")
        return int(v)

    return parse


def _seconds(text: str) -> float:
    v = _num(text)
    if not 60.0 <= v <= 7 * 24 * 3600.0:
        raise ValueError("seconds between 60 and a week (604800)")
    return v


def _auto_accept(text: str) -> float | None:
    if text.strip().lower() in ("", "none", "off"):
        return None
    v = _num(text)
    if not 0.5 < v <= 1.0:
        raise ValueError("a P(YES) certainty above 0.5 and at most 1, or 'none'")
    return v


SETTINGS = {
    s.name: s
    for s in (
        TeamSetting(
            "overlap",
            QueueConfig.overlap,
            _count(1, MAX_OVERLAP),
            "reviews asked of each item (2+: agreement)",
        ),
        TeamSetting(
            "gold_rate", QueueConfig.gold_rate, _share, "share of served items that are gold items"
        ),
        TeamSetting(
            AUDIT_RATE_SETTING,
            AUDIT_RATE,
            _share,
            "share of confident verdicts drawn into the random audit",
        ),  # fmt: skip
        TeamSetting(
            LEARN_EVERY_SETTING,
            LEARN_EVERY,
            _count(0, MAX_LEARN_EVERY),
            "new expert labels between two inspector fits (0: only on request)",
        ),  # fmt: skip
        TeamSetting(
            "auto_accept",
            QueueConfig.auto_accept,
            _auto_accept,
            "verdicts at least this certain are not served ('none': all are)",
        ),  # fmt: skip
        TeamSetting(
            "lease_seconds",
            QueueConfig.lease_seconds,
            _seconds,
            "how long a served item stays reserved for its expert",
        ),  # fmt: skip
    )
}
HEADERS = ["setting", "value", "default", "what it sets"]


def current(store: Any) -> dict[str, Any]:
    """Each team setting's value (the default where the team stored none)."""
    return store.settings({name: s.default for name, s in SETTINGS.items()})


def within_bounds(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`values` (team settings as stored) each checked as a change is: one out of its
    bounds (stored by an older version, or written to the store directly) is replaced by
    its default in `defaults`, with a warning naming it, so that no item is served under a
    value nobody could set (`overlap=1e19` made every next item an OverflowError)."""
    out = dict(values)
    for name, value in values.items():
        try:
            out[name] = check(name, "none" if value is None else repr(value))
        except ValueError as exc:
            log.warning("team setting %s; using its default %r", exc, defaults[name])
            out[name] = defaults[name]
    return out


def rows(store: Any) -> list[list[Any]]:
    """Rows of `HEADERS`, for a table."""
    now = current(store)
    return [[n, "none" if now[n] is None else now[n], "none" if s.default is None else s.default,
             s.help] for n, s in SETTINGS.items()]  # fmt: skip


def check(name: str, text: str) -> Any:
    """The value `text` sets `name` to; ValueError naming the setting and what it takes."""
    spec = SETTINGS.get(name)
    if spec is None:
        raise ValueError(f"no team setting {name!r} (there are: {', '.join(SETTINGS)})")
    try:
        return spec.parse(str(text).strip())
    except ValueError as exc:
        raise ValueError(f"{name} = {text!r} refused: it takes {exc}") from None


def change(store: Any, name: str, text: str, actor: str) -> Any:
    """Set one team setting from its text; the audit log records who changed it. Raises
    ValueError naming the setting and what it takes.

    >>> from db.store import Store
    >>> store = Store("sqlite://")
    >>> change(store, "audit_rate", "0.1", "ada"), current(store)["audit_rate"]
    (0.1, 0.1)
    >>> change(store, "audit_rate", "5", "ada")
    Traceback (most recent call last):
    ...
    ValueError: audit_rate = '5' refused: it takes 0 (none), or a share between 0.0001 and 1 (0.05 is 5%)
    """
    value = check(name, text)
    store.set_setting(name, value, actor=actor)
    return value
