"""How each expert sets up the vet desk, remembered per expert: the queue's filters and the
display options (markers, error band, smoothing, frame, the model's images, the normalised
view, all markers, arms, sky). A reload, another tab
or another machine opens the desk as they left it.

Only the fields below are kept, each checked here (`PrefError` names the field and why);
what was stored before a field changed meaning is dropped on reading, never shown.

>>> parse("smooth", "5"), parse("frame", "observed"), parse("band", "0.2-0.4")
(5, 'observed', '0.2-0.4')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.errors import LoupeError
from agent.tasks import TASKS
from db.models import SPLITS

MAX_SMOOTH = 25  # px: the smoothing slider's range
STATUSES = ("any", "unreviewed", "reviewed", "conflict", "flagged")


class PrefError(LoupeError, ValueError):
    """A desk preference that is not one of its field's values."""


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if v in (0, 1, "0", "1", "true", "false", "True", "False"):
        return str(v).lower() in ("1", "true")
    raise ValueError("true or false")


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"one of {', '.join(choices)}")
        return str(v)

    return parse


def _smooth(v: Any) -> int:
    try:
        n = float(v)
    except (TypeError, ValueError):
        n = float("nan")
    if not (0 <= n <= MAX_SMOOTH and n == int(n)):
        raise ValueError(f"a whole number of pixels from 0 to {MAX_SMOOTH}")
    return int(n)


def _band(v: Any) -> str:
    """The band as kept: "all", or a P(YES) range "lo-hi" within 0-1."""
    text = str(v)
    if text == "all":
        return text
    try:
        lo, hi = (float(x) for x in text.split("-"))
    except ValueError:
        lo = hi = float("nan")
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError('"all" or a P(YES) range such as 0.2-0.4')
    return text


def _survey(v: Any) -> str:
    text = str(v)
    if not text or len(text) > 32:
        raise ValueError('"all" or a survey name of at most 32 characters')
    return text


# field -> (default, parse): the desk as a new expert finds it
FIELDS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "task": ("all", _one_of("all", *TASKS)),
    "band": ("all", _band),
    "status": ("any", _one_of(*STATUSES)),
    "survey": ("all", _survey),
    "split": ("all", _one_of("all", *SPLITS)),
    "markers": (True, _bool),
    "error": (True, _bool),
    "smooth": (0, _smooth),
    "frame": ("rest", _one_of("rest", "observed")),
    "images": (False, _bool),
    "normalised": (False, _bool),
    "all_markers": (False, _bool),
    "arms": (False, _bool),
    "sky": (False, _bool),
}
DEFAULTS = {k: d for k, (d, _) in FIELDS.items()}


def parse(field: str, value: Any) -> Any:
    """`value` as field `field` keeps it, or a `PrefError` naming both."""
    if field not in FIELDS:
        raise PrefError(f"no desk preference {field!r} (known: {', '.join(FIELDS)})")
    try:
        return FIELDS[field][1](value)
    except ValueError as e:
        raise PrefError(f"desk preference {field}: {value!r} is not {e}") from None


def remembered(store: Any, expert: str) -> dict[str, Any]:
    """`expert`'s desk: every field, their own value where one is kept, else the default."""
    out = dict(DEFAULTS)
    for k, v in store.prefs(expert).items():
        try:
            out[k] = parse(k, v)
        except PrefError:
            continue  # kept before the field changed: the default stands
    return out


def remember(store: Any, expert: str, **values: Any) -> dict[str, Any]:
    """Keep `values` as `expert`'s desk (the other fields stay as kept); returns the whole
    desk. Nothing is kept if any value is refused."""
    checked = {k: parse(k, v) for k, v in values.items()}
    kept = {k: v for k, v in remembered(store, expert).items() if v != DEFAULTS[k]}
    new = {**kept, **checked}
    store.put_prefs(expert, {k: v for k, v in new.items() if v != DEFAULTS[k]})
    return {**DEFAULTS, **new}
