"""An expert's draft on a candidate: what they set on it before deciding it.

The desk keeps one draft per expert and candidate in the store (`Store.draft`): the grade,
issue flags, spectral type, redshift (with where it came from), the template drawn over
the spectrum, a comment given through the API, and a correction's label and wrong step as
chosen in its panel. A page reload shows it again (only one page of an expert holds a
candidate at a time: `Store.hold`); moving to another candidate shows that candidate's own
draft, never this one's.

`set_field` is the one way the desk changes any of these: on a candidate the expert has
not decided, the draft holds the value and the decision saves it (then the whole draft is
dropped: a decision leaves none behind); on one they have decided, the value amends their
decision as a revision (the redshift as the grade), except a correction's label and step,
which wait in the draft for the correction to be saved, and the template, a view.
The text an expert types in the page (comment, a reject's reason, a correction's reasoning
and note) is kept by the page itself, per expert and candidate (app/keys.js), and sent with
the decision: the draft seeds the form when a candidate is opened, and the form the expert
sees is what the decision saves.
"""

from __future__ import annotations

import math
from typing import Any

from annotate import review
from db.models import GRADES, MAX_SPECTYPE, MAX_TEXT, REDSHIFT_SOURCES
from db.store import Store

# The fields a draft holds. The view's own and a correction's choices never amend a decision
# already made (a correction is saved whole, with its texts); the rest are saved with the
# decision, or amend it.
FIELDS = ("grade", "issues", "spectype", "redshift", "redshift_source", "template", "comment",
          "label", "wrong_step")  # fmt: skip
VIEW_ONLY = ("template", "label", "wrong_step")
SAVED = tuple(f for f in FIELDS if f not in VIEW_ONLY)


class DraftError(review.ReviewError):
    """A draft value the desk cannot keep; the message names the field and the value."""


def clean(name: str, value: Any) -> Any:
    """`value` as a draft keeps `name` (None: not set), or a DraftError naming both."""
    if name not in FIELDS:
        raise DraftError(f"a draft has no field {name!r} (expected one of {FIELDS})")
    if value is None or value == "":
        return None
    if name == "grade":
        try:
            g = int(value)
        except (TypeError, ValueError):
            raise DraftError(f"a grade is 1-4 (got {value!r})") from None
        if g not in GRADES:
            raise DraftError(f"a grade is 1-4 (got {g})")
        return g
    if name == "issues":
        return review.issue_flags("".join(value) if isinstance(value, (list, tuple)) else value)
    if name == "spectype":
        return review.spectral_type(value)
    if name == "redshift":
        try:
            z = float(value)
        except (TypeError, ValueError):
            raise DraftError(f"a redshift is a number (got {value!r})") from None
        if not math.isfinite(z):
            raise DraftError(f"a redshift is a finite number (got {value!r})")
        return z
    if name == "label":
        if value not in ("YES", "NO"):
            raise DraftError(f"a correction's label is YES or NO (got {value!r})")
        return value
    if name == "wrong_step":  # 1-based, as the panel shows it ("none" is no step)
        if value == "none":
            return None
        try:
            step = int(value)
        except (TypeError, ValueError):
            raise DraftError(f"a wrong step is a step number (got {value!r})") from None
        if step < 1:
            raise DraftError(f"a wrong step is a step number from 1 (got {step})")
        return step
    if name == "redshift_source":
        if value not in REDSHIFT_SOURCES:
            raise DraftError(f"a redshift's source is one of {REDSHIFT_SOURCES} (got {value!r})")
        return value
    text = str(value)
    limit = MAX_SPECTYPE if name == "template" else MAX_TEXT
    if len(text) > limit:
        raise DraftError(f"the {name} is {len(text)} characters; the limit is {limit}")
    return text


def clean_all(fields: dict[str, Any]) -> dict[str, Any]:
    """Every field of `fields` cleaned (`clean`); the first bad one raises."""
    return {k: clean(k, v) for k, v in fields.items()}


def get(store: Store, expert: str, candidate_id: int) -> dict[str, Any]:
    """`expert`'s draft on the candidate: its fields that are set."""
    d = store.draft(expert, candidate_id)
    return {k: v for k, v in d.items() if k in FIELDS and v is not None}


def _cleaned(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` cleaned, with the redshift's source: none for no redshift, the expert's
    where a redshift comes without one."""
    values = {k: clean(k, v) for k, v in changes.items()}
    if "redshift" in values and values["redshift"] is None:
        values["redshift_source"] = None
    if values.get("redshift") is not None and values.get("redshift_source") is None:
        values["redshift_source"] = "expert"
    return values


def set_field(store: Store, expert: str, candidate_id: int, **changes: Any) -> Any:
    """Set draft fields on the candidate (None or "" clears one). Returns the expert's
    decision when the saved fields amended it (a revision), else None (kept in the draft).
    The template is always kept in the draft: it is how the page draws the candidate."""
    values = _cleaned(changes)
    mine = review.my_decision(store, expert, candidate_id)
    d = get(store, expert, candidate_id)
    saved = {k: v for k, v in values.items() if k in SAVED}
    amended = None
    if mine is not None and saved:
        if "comment" in saved:
            amended = review.comment(store, expert, mine, saved.pop("comment"))
            mine = amended
        if saved:
            amended = review.amend(store, expert, mine, **saved)
        values = {k: v for k, v in values.items() if k in VIEW_ONLY}
    for k, v in values.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    if mine is not None:
        d = {k: v for k, v in d.items() if k in VIEW_ONLY}
    store.put_draft(expert, candidate_id, d)
    return amended


def unchanged(store: Store, expert: str, candidate_id: int, **changes: Any) -> bool:
    """Whether setting `changes` (`set_field`'s) would change nothing: each field already
    holds that value, in the expert's decision where it amends one, else in their draft.
    A write that changes nothing acts on nothing, so no later write can have made it stale."""
    values = _cleaned(changes)
    mine = review.my_decision(store, expert, candidate_id)
    d = get(store, expert, candidate_id)
    for k, v in values.items():
        if mine is not None and k in SAVED:
            have = getattr(mine, k, None)
            have = None if have == "" else have
        else:
            have = d.get(k)
        if have != v:
            return False
    return True


def take(store: Store, expert: str, candidate_id: int) -> dict[str, Any]:
    """The draft's fields a decision saves (grade, flags, type, redshift, comment)."""
    return {k: v for k, v in get(store, expert, candidate_id).items() if k in SAVED}


def settle(store: Store, expert: str, candidate_id: int) -> None:
    """After a decision saved the draft: none is left behind (the decision holds what it
    saved; the template drawn is its spectral type)."""
    store.drop_draft(expert, candidate_id)


def restore(store: Store, expert: str, candidate_id: int, taken: Any, undecided: bool = True
            ) -> None:  # fmt: skip
    """After an undo: a correction's label and wrong step are its draft again, and where the
    candidate is undecided again (no earlier decision came back) the undone decision's grade,
    flags, type, redshift and comment are too (what the form shows; the page puts its texts
    back)."""
    d = get(store, expert, candidate_id)
    if undecided:
        for k in SAVED:
            v = getattr(taken, k, None)
            if v is not None and v != "":
                d[k] = v
    if getattr(taken, "action", None) == "correct":
        d["label"] = taken.label
        if taken.wrong_step is not None:
            d["wrong_step"] = int(taken.wrong_step) + 1  # shown 1-based
    store.put_draft(expert, candidate_id, d)
