"""Cells of the CSV files an admin opens in a spreadsheet, written so that no cell runs as a
formula, and read back exactly.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and, in some, a tab or a
carriage return, the full-width forms, or any of them after blanks) as a formula: an id, reason or comment such as
`=HYPERLINK(...)` would run on the admin's machine. Every text cell that starts with one of
these is written with a single quote `'` in front, as OWASP recommends; so that the quote can
be taken off again without doubt, a text that itself starts with `'` gets one more. A plain
number (`-0.5`, `+3`, `-1e-3`) runs nothing and is written as it is, so numeric columns stay
numbers. Reading a cell back (`uncell`) takes one leading `'` off: `cell` then `uncell` gives
back every text exactly.

>>> [cell(v) for v in ("=1+1", "-0.5", "'quoted", "@SUM(A1)", "plain", "-", " =A1", 3)]
["'=1+1", '-0.5', "''quoted", "'@SUM(A1)", 'plain', "'-", "' =A1", 3]
>>> all(uncell(cell(t)) == t for t in ("=1+1", "-0.5", "'quoted", "''", "\\t x", "", "a"))
True
"""

from __future__ import annotations

import re
from typing import Any

QUOTE = "'"
# OWASP's list (CSV injection), with the full-width forms some spreadsheets also run
TRIGGERS = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def cell(value: Any) -> Any:
    """`value` as written into a spreadsheet's CSV: a text that a spreadsheet would run (or
    that starts with the escape quote itself) gets a leading `'`; numbers and other texts
    are returned as they are."""
    if not isinstance(value, str) or not value:
        return value
    # blanks or line breaks before the sign do not stop every spreadsheet from running it
    runs = value[0] in TRIGGERS or value.lstrip()[:1] in TRIGGERS
    if value[0] == QUOTE or (runs and not _NUMBER.fullmatch(value)):
        return QUOTE + value
    return value


def uncell(text: str) -> str:
    """A cell as `cell` wrote it, back to the text it holds."""
    return text[1:] if text.startswith(QUOTE) else text


def row(values: list[Any]) -> list[Any]:
    """Every cell of a row through `cell`."""
    return [cell(v) for v in values]


# Python's `str.splitlines` (astropy's and many another reader's) breaks a line at each of
# these, and readers strip blanks at either end of a cell they do not find quoted.
_QUOTED = re.compile('[,"\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]|^\\s|\\s$')


def csv_line(values: list[Any]) -> str:
    r"""One CSV line (RFC 4180: comma-separated, CRLF-terminated) of the cells `cell` makes of
    `values`. A cell is quoted, its quotes doubled, where it holds a comma, a quote, any line
    break (U+2028, U+2029, U+0085 too), or blanks at either end: every reader then finds
    the same cells, and the same text in each.

    >>> csv_line(["a", "=b", 'a "b" c', "x\u2028y", " pad", -0.5, ""])
    'a,\'=b,"a ""b"" c","x\u2028y"," pad",-0.5,\r\n'
    """
    out = []
    for v in values:
        text = "" if v is None else str(cell(v))
        out.append(f'"{text.replace(chr(34), chr(34) * 2)}"' if _QUOTED.search(text) else text)
    return ",".join(out) + "\r\n"
