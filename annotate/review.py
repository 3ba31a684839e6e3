"""Review semantics: what an expert's decision means for a candidate's label.

- accept: the agent's verdict is right, so label = verdict;
- reject: the verdict is wrong, so the label flips;
- correct: the expert sets the label, and may say why (`explanation`) and which step of the
  trajectory went wrong (`wrong_step`);
- skip / flag: no label (a flag marks the item for an admin);
- undo: the expert takes their decision back (the review becomes "undo", its earlier
  version stays in the history, and the item is theirs to decide again).

Beside the label a review carries what the expert adds: `explanation` is the reasoning the
model should learn (a correction's, or a reject's one-line reason: what the model should
have concluded), `comment` a note to other experts that is never trained on, `grade` the
expert's certainty 1-4 (as Marz's QOP / Prospect's VI quality: 4 certain, 3 probable,
2 possible, 1 a guess), and `redshift` with `redshift_source` ("agent" when adopted from
the agent's estimate, "expert" when typed).

One review per expert and candidate. An expert may revise their own review (the earlier
version is kept in its history) but never another's. Several experts' labels resolve by
majority; an admin's adjudication overrides it; disagreements are listed as conflicts.
The label rules themselves (`derive_label`, `resolve_label`) are applied by the store inside
the writing transaction; this module decides which fields a decision carries, and is what
the app and the importer call to record one.
"""

from __future__ import annotations

from typing import Any

from agent.errors import LoupeError
from db.store import CandidateInfo, Store

__all__ = [
    "ACTIONS",
    "MAX_TEXT",
    "ReviewError",
    "GRADES",
    "decide",
    "comment",
    "grade",
    "undo",
    "revise",
    "history",
    "adjudicate",
]

ACTIONS = ("accept", "reject", "correct", "skip", "flag")
GRADES = (1, 2, 3, 4)
KEPT = ("explanation", "wrong_step", "comment", "seconds", "trajectory_id", "grade", "redshift",
        "redshift_source")  # fmt: skip
# Longest explanation or comment, in characters: enough for a paragraph of reasoning; the
# API is reachable without the page's text box, so the limit is applied here.
MAX_TEXT = 2000


class ReviewError(LoupeError, ValueError):
    """A decision that cannot be recorded as given; the message names the field."""


def _check_text(**fields: str | None) -> None:
    for name, text in fields.items():
        if text is not None and len(text) > MAX_TEXT:
            raise ReviewError(
                f"the {name} is {len(text)} characters; the limit is {MAX_TEXT}: shorten it"
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
    comment: str | None = None,
    seconds: float | None = None,
    trajectory_id: int | None = None,
    source: str | None = None,
    grade: int | None = None,
    redshift: float | None = None,
    redshift_source: str | None = None,
):
    """Record `expert`'s decision on a candidate (their existing review is revised).

    Only `correct` sets a label; only `correct` and `reject` carry an explanation (the
    reasoning the model should learn) and name the step that went wrong: a form that still
    holds them from another action does not leak them into this one. `source` marks
    imported reviews.
    """
    _check_text(
        explanation=explanation if action in ("correct", "reject") else None, comment=comment
    )
    extra: dict[str, Any] = {} if source is None else {"source": source}
    return store.record_review(
        expert,
        candidate_id,
        action,
        label=label if action == "correct" else None,
        explanation=(explanation or "").strip() or None
        if action in ("correct", "reject")
        else None,
        wrong_step=wrong_step if action in ("correct", "reject") else None,
        comment=comment or None,
        seconds=seconds,
        trajectory_id=trajectory_id,
        grade=grade,
        redshift=redshift,
        redshift_source=redshift_source,
        **extra,
    )


def _same(review: Any, **changes: Any):
    fields = {k: getattr(review, k) for k in KEPT}
    fields["label"] = review.label if review.action == "correct" else None
    return {**fields, **changes}


def comment(store: Store, expert: str, review: Any, text: str):
    """Put `text` as the comment on `expert`'s own `review`, keeping the decision."""
    _check_text(comment=text)
    return store.record_review(
        expert, review.candidate_id, review.action, review_id=review.id,
        **_same(review, comment=text),
    )  # fmt: skip


def grade(store: Store, expert: str, review: Any, value: int):
    """Set the grade (1-4) on `expert`'s own `review`, keeping the decision: a revision."""
    return store.record_review(
        expert, review.candidate_id, review.action, review_id=review.id,
        **_same(review, grade=value),
    )  # fmt: skip


def undo(store: Store, expert: str):
    """Take back `expert`'s most recent decision: their review becomes "undo" (the decision
    stays in its history) and the item may be decided again. Returns the review taken back
    (as it was), or None when there is nothing to undo."""
    last = store.last_decision(expert)
    if last is None:
        return None
    store.record_review(
        expert, last.candidate_id, "undo", review_id=last.id, trajectory_id=last.trajectory_id
    )
    return last


def revise(store: Store, expert: str, review_id: int, action: str, **fields):
    """Change an existing review; raises PermissionError if it is not `expert`'s."""
    _check_text(explanation=fields.get("explanation"), comment=fields.get("comment"))
    candidate_id = store.review(review_id).candidate_id
    return store.record_review(expert, candidate_id, action, review_id=review_id, **fields)


def history(store: Store, review_id: int) -> list:
    """Every version of a review, oldest first; the last one is the current review."""
    return [*store.review_history(review_id), store.review(review_id)]


def adjudicate(
    store: Store, admin: str, candidate_id: int, label: str | None, comment: str | None = None
) -> CandidateInfo:
    """An admin's label for a candidate, overriding the majority (None withdraws it)."""
    return store.adjudicate(admin, candidate_id, label, comment)
