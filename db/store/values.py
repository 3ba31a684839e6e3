"""Conversions of caller-supplied values into what the store keeps in its columns."""

from __future__ import annotations

import json
import math
from typing import Any


def ref_key(path: str, hdu: Any, row: Any) -> str:
    """The unique key of a spectrum reference (file, HDU, row)."""
    return f"{path}|{'' if hdu is None else hdu}|{'' if row is None else row}"


def hdu_out(hdu: str | None) -> int | str | None:
    """A stored HDU (text) as the reference gave it: a number, a name or None."""
    if hdu is None or hdu == "":
        return None
    return int(hdu) if hdu.lstrip("-").isdigit() else hdu


def json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def float_or_none(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def str_or_none(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


def jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False
