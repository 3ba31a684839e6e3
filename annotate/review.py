"""Review semantics: what an expert's decision means for a candidate's label.

- accept: the agent's verdict is right, so label = verdict;
- reject: the verdict is wrong, so the label flips;
- correct: the expert sets the label, and may say why (`explanation`) and which step of the
  trajectory went wrong (`wrong_step`);
- skip / flag: no label (a flag marks the item for an admin);
- undo: the expert takes their last decision back: the review returns to what it was
  before that decision (the earlier accept, label, grade and all), or to "undo", no
  decision, if there was none. Each undo is a revision (the history keeps every version)
  and never a decision: nothing exports or counts an "undo" review.

Beside the label a review carries what the expert adds: `explanation` is the reasoning the
model should learn (a correction's, or a reject's one-line reason: what the model should
have concluded), `comment` a note to other experts that is never trained on (and `note`, a
correction's note to them, beside it and never trained on either), `grade` the
expert's certainty 1-4 (as Marz's QOP / Prospect's VI quality: 4 certain, 3 probable,
2 possible, 1 a guess), `redshift` with `redshift_source` ("agent" when adopted from
the agent's estimate, "expert" when typed), Prospect's issue flags `issues` (`ISSUE_FLAGS`:
R bad redshift fit, C bad spectral type, S bad spectrum; kept as the letters set, "RS") and
the expert's spectral type `spectype` (the template chosen on the desk, or typed).

One review per expert and candidate. An expert may revise their own review (the earlier
version is kept in its history) but never another's. Several experts' labels resolve by
majority; an admin's adjudication (`Store.adjudicate`) overrides it; disagreements are
listed as conflicts.

This module holds the rules (`derive_label`: what an action means for the label; which
fields a decision carries; what undo restores) and is what the app and the importer call to
record a decision; the store keeps what it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from annotate.learning import schedule
from db.models import (
    ACTIONS,
    DECISIONS,
    GRADES,
    ISSUE_FLAGS,
    LABEL_ACTIONS,
    LABELS,
    MAX_SPECTYPE,
    MAX_TEXT,
)
from db.settings import DEFAULTS
from db.store import Store, StoreError

__all__ = [
    "ACTIONS",
    "DECISIONS",
    "GRADES",
    "ISSUE_FLAGS",
    "MAX_TEXT",
    "ReviewError",
    "Undone",
    "amend",
    "comment",
    "decide",
    "decisions",
    "derive_label",
    "grade",
    "history",
    "issue_flags",
    "last_decision",
    "my_decision",
    "revise",
    "revision",
    "spectral_type",
    "undo",
]

KEPT = ("explanation", "wrong_step", "comment", "note", "seconds", "trajectory_id", "grade",
        "redshift", "redshift_source", "issues", "spectype")  # fmt: skip


class ReviewError(StoreError):
    """A decision that cannot be recorded as given; the message names the item and field."""


def derive_label(action: str, verdict: str | None, label: str | None) -> str | None:
    """The label a review sets: accept keeps the agent's verdict, reject flips it, correct
    takes the expert's; skip, flag and undo set none.

    >>> derive_label("accept", "YES", None), derive_label("reject", "YES", None)
    ('YES', 'NO')
    >>> derive_label("correct", "YES", "YES"), derive_label("skip", "NO", None)
    ('YES', None)
    """
    if action not in ACTIONS:
        raise ReviewError(f"unknown review action {action!r} (expected one of {ACTIONS})")
    if action not in LABEL_ACTIONS:
        return None
    if action == "correct":
        if label not in LABELS:
            raise ReviewError(f"'correct' needs a label YES or NO (got {label!r})")
        return label
    if verdict not in LABELS:
        raise ReviewError(
            f"{action!r} judges the agent's verdict, but this item has none; use 'correct'"
        )
    if action == "accept":
        if label is not None and label != verdict:
            raise ReviewError(f"accept keeps the agent's verdict {verdict}, not {label}")
        return verdict
    flipped = "NO" if verdict == "YES" else "YES"
    if label is not None and label != flipped:
        raise ReviewError(f"reject flips the agent's verdict {verdict} to {flipped}, not {label}")
    return flipped


def _check_text(**fields: str | None) -> None:
    for name, text in fields.items():
        if text is not None and len(text) > MAX_TEXT:
            raise ReviewError(
                f"the {name} is {len(text)} characters; the limit is {MAX_TEXT}: shorten it"
            )


def _record(
    store: Store,
    expert: str,
    candidate_id: int,
    action: str,
    label: str | None,
    fields: dict[str, Any],
    **write: Any,
):
    """Write the review with the label `action` gives on the trajectory judged."""
    info = store.candidate(candidate_id)
    tid = fields.get("trajectory_id")
    if tid is None:
        tid = info.trajectory_id
    # the judged trajectory's own answer, what the expert saw: a newer inspector version may
    # have re-scored the candidate's verdict since (annotate.learning.schedule)
    verdict = info.verdict if tid is None else store.trajectory(tid).verdict
    try:
        stored = derive_label(action, verdict, label)
    except ReviewError as err:
        raise ReviewError(f"candidate {info.key} (#{info.id}): {err}") from None
    return store.record_review(
        expert, candidate_id, action, label=stored, **{**fields, "trajectory_id": tid}, **write
    )


def decide(
    store: Store,
    expert: str,
    candidate_id: int,
    action: str,
    *,
    label: str | None = None,
    explanation: str | None = None,
    wrong_step: int | None = None,
    source: str | None = None,
    verbatim: bool = False,
    overlap: int | None = None,
    **fields: Any,
):
    """Record `expert`'s decision on a candidate (their existing review is revised).
    With `overlap` (the team's: the app passes it), a first label is refused once other
    experts' labels reach it (`Store.record_review`), however the item was opened.

    Only `correct` sets a label; only `correct` and `reject` carry an explanation (the
    reasoning the model should learn) and name the step that went wrong: a form that still
    holds them from another action does not leak them into this one. `source` marks
    imported reviews; `verbatim` keeps the explanation exactly as given (an import: the
    file's text as written), where the desk trims what was typed. Other `fields`: comment,
    note (a correction's only), seconds, trajectory_id, grade, redshift, redshift_source,
    issues, spectype (as
    `db.models.Review` holds them; issue flags in any order or case, see `issue_flags`).
    """
    if action not in DECISIONS:
        raise ReviewError(f"unknown review action {action!r} (expected one of {DECISIONS})")
    reasoned = action in ("correct", "reject")
    _check_text(explanation=explanation if reasoned else None, comment=fields.get("comment"),
                note=fields.get("note"))  # fmt: skip
    fields.update(
        issues=issue_flags(fields.get("issues")),
        spectype=spectral_type(fields.get("spectype")),
        explanation=(explanation if verbatim else explanation.strip())
        if reasoned and explanation and explanation.strip()
        else None,
        wrong_step=wrong_step if reasoned else None,
        comment=fields.get("comment") or None,
        note=(fields.get("note") or None) if action == "correct" else None,
    )
    extra: dict[str, Any] = {} if source is None else {"source": source}
    if overlap is not None:
        extra["overlap"] = overlap
    review = _record(
        store, expert, candidate_id, action, label if action == "correct" else None, fields,
        **extra,
    )  # fmt: skip
    if action in LABEL_ACTIONS:
        # the (candidate, label) pair: taking a decision back and making it again counts
        # once; a fit, when enough distinct new labels are due, runs in its own process
        schedule.note_labels(store, candidate=candidate_id, label=getattr(review, "label", None))
    return review


def _same(review: Any, **changes: Any) -> dict[str, Any]:
    return {**{k: getattr(review, k) for k in KEPT}, **changes}


def comment(store: Store, expert: str, review: Any, text: str):
    """Put `text` as the comment on `expert`'s own `review`, keeping the decision."""
    _check_text(comment=text)
    return store.record_review(
        expert, review.candidate_id, review.action, label=review.label, review_id=review.id,
        kind="edit", **_same(review, comment=text),
    )  # fmt: skip


def issue_flags(text: str | None) -> str | None:
    """Prospect's issue flags as it writes them: the letters of ISSUE_FLAGS set, in that
    order ("sr" -> "RS"); None for none.

    >>> issue_flags("sr"), issue_flags(""), issue_flags("C")
    ('RS', None, 'C')
    """
    raw = (text or "").replace(",", "").replace(" ", "").upper()
    bad = sorted(set(raw) - set(ISSUE_FLAGS))
    if bad:
        raise ReviewError(
            f"issue flag {''.join(bad)!r} is not one of R (bad redshift fit), "
            "C (bad spectral type), S (bad spectrum)"
        )
    return "".join(f for f in ISSUE_FLAGS if f in raw) or None


def spectral_type(text: str | None) -> str | None:
    """The expert's spectral type as kept: trimmed, None when empty, refused when long."""
    t = (text or "").strip()
    if len(t) > MAX_SPECTYPE:
        raise ReviewError(
            f"the spectral type is {len(t)} characters; the limit is {MAX_SPECTYPE}: shorten it"
        )
    return t or None


def amend(store: Store, expert: str, review: Any, **changes: Any):
    """Change issue flags or spectral type on `expert`'s own `review`, keeping the decision:
    a revision, as a grade is."""
    if "issues" in changes:
        changes["issues"] = issue_flags(changes["issues"])
    if "spectype" in changes:
        changes["spectype"] = spectral_type(changes["spectype"])
    return store.record_review(
        expert, review.candidate_id, review.action, label=review.label, review_id=review.id,
        kind="edit", **_same(review, **changes),
    )  # fmt: skip


def grade(store: Store, expert: str, review: Any, value: int):
    """Set the grade (1-4) on `expert`'s own `review`, keeping the decision: a revision."""
    return store.record_review(
        expert, review.candidate_id, review.action, label=review.label, review_id=review.id,
        kind="edit", **_same(review, grade=value),
    )  # fmt: skip


@dataclass
class Undone:
    """What an undo did: the decision taken back, the review as it is now (the earlier
    decision, or action "undo" when there was none), and the other experts holding a lease
    on the item (it is leased back to the expert who undid)."""

    taken: Any  # db.models.Review, as it was
    now: Any  # db.models.Review
    others: list[str]


def _before_last_decision(store: Store, review: Any) -> Any:
    """The version of `review` before its latest decision, or None if that decision was
    its first. Read from the audit trail as a stack: a decision pushes its revision, an
    edit (comment, grade) replaces the top, an undo pops and its own revision (a copy of
    the new top) replaces that."""
    events = store.audit_events(entity="review", entity_id=review.id, limit=1_000_000)
    stack: list[int] = []
    for ev in events:
        rev = ev.payload.get("revision")
        if ev.action == "undo_review" or ev.payload.get("action") == "undo":
            if stack:
                stack.pop()
            if stack:
                stack[-1] = rev
        elif ev.action == "edit_review" and stack:
            stack[-1] = rev
        elif ev.action in ("review", "revise_review", "edit_review"):
            stack.append(rev)
    if len(stack) < 2:
        return None
    return next((v for v in history(store, review.id) if v.revision == stack[-2]), None)


def undo(
    store: Store,
    expert: str,
    *,
    lease_seconds: float = DEFAULTS.lease_seconds,
    keep: Sequence[int] = (),
    holder: str = "",
    candidate_id: int | None = None,
) -> Undone | None:
    """Take back `expert`'s most recent decision: their review returns to the state before
    it (see `_before_last_decision`), and the item is leased back to them for
    `lease_seconds` (the team's lease) in the same write, held by their page `holder`, so the
    queue cannot hand it to another expert (or another of their pages) meanwhile. Their
    leases on items in `keep` (the one they are looking at) stay. With `candidate_id`, the
    decision taken back is theirs on that candidate (the one a page decided last). None when
    there is nothing to undo."""
    if candidate_id is None:
        last = store.last_decision(expert)
    else:
        last = my_decision(store, expert, candidate_id)
    if last is None:
        return None
    prior = _before_last_decision(store, last)
    others = store.claim(expert, last.candidate_id, lease_seconds, keep=keep, holder=holder)
    if prior is None:
        action, label, fields = "undo", None, {"trajectory_id": last.trajectory_id}
    else:
        action, label, fields = prior.action, prior.label, _same(prior)
    now = store.record_review(
        expert, last.candidate_id, action, label=label, review_id=last.id, kind="undo",
        hold_seconds=lease_seconds, holder=holder, **fields,
    )  # fmt: skip
    return Undone(last, now, others)


def revise(store: Store, expert: str, review_id: int, action: str, **fields):
    """Change an existing review as `decide` would; raises PermissionError if it is not
    `expert`'s."""
    reasoned = action in ("correct", "reject")
    _check_text(explanation=fields.get("explanation"), comment=fields.get("comment"))
    label = fields.pop("label", None)
    candidate_id = store.review(review_id).candidate_id
    if not reasoned:
        fields.pop("explanation", None), fields.pop("wrong_step", None)
    return _record(
        store, expert, candidate_id, action, label if action == "correct" else None, fields,
        review_id=review_id,
    )  # fmt: skip


def history(store: Store, review_id: int) -> list:
    """Every version of a review, oldest first; the last one is the current review."""
    return [*store.review_history(review_id), store.review(review_id)]


def last_decision(store: Store, expert: str) -> Any:
    """`expert`'s most recently written review that holds a decision, or None."""
    return store.last_decision(expert)


def my_decision(store: Store, expert: str, candidate_id: int) -> Any:
    """`expert`'s review of the candidate while it holds a decision, else None (none made,
    or taken back)."""
    me = store.expert(expert)
    if me is None:
        return None
    r = next(iter(store.reviews(candidate_id=candidate_id, expert=me.id)), None)
    return None if r is None or r.action == "undo" else r


def revision(store: Store, candidate_id: int) -> int:
    """How many times the candidate's reviews have been written (every expert's decisions,
    edits and undos): what a page saw when it last drew the candidate. A write from a page
    that names an older count is a conflict (decided meanwhile in another tab, by another
    expert, or taken back), never applied to what the page did not show."""
    return sum(int(r.revision or 0) for r in store.reviews(candidate_id=candidate_id))


def decisions(store: Store, candidate_id: int) -> list:
    """The candidate's reviews that hold a decision (a taken-back one does not)."""
    return store.reviews(candidate_id=candidate_id, actions=DECISIONS)
