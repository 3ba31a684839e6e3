"""Review semantics: what an expert's decision means for a candidate's label.

- accept: the agent's verdict is right, so label = verdict;
- reject: the verdict is wrong, so the label flips;
- correct: the expert sets the label, and may say why (`explanation`) and which step of the
  trajectory went wrong (`wrong_step`);
- skip / flag: no label (a flag marks the item for an admin).

One review per expert and candidate. An expert may revise their own review (the earlier
version is kept in its history) but never another's. Several experts' labels resolve by
majority; an admin's adjudication overrides it; disagreements are listed as conflicts.
The label rules themselves (`derive_label`, `resolve_label`) are applied by the store inside
the writing transaction; this module decides which fields a decision carries, and is what
the app and the importer call to record one.
"""

from __future__ import annotations

from typing import Any

from db.store import CandidateInfo, Store

__all__ = ["ACTIONS", "decide", "comment", "revise", "history", "adjudicate"]

ACTIONS = ("accept", "reject", "correct", "skip", "flag")


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
):
    """Record `expert`'s decision on a candidate (their existing review is revised).

    Only `correct` sets a label and an explanation, and only `correct` and `reject` name the
    step that went wrong: a form that still holds them from another action does not leak
    them into this one. `source` marks imported reviews.
    """
    extra: dict[str, Any] = {} if source is None else {"source": source}
    return store.record_review(
        expert,
        candidate_id,
        action,
        label=label if action == "correct" else None,
        explanation=(explanation or None) if action == "correct" else None,
        wrong_step=wrong_step if action in ("correct", "reject") else None,
        comment=comment or None,
        seconds=seconds,
        trajectory_id=trajectory_id,
        **extra,
    )


def comment(store: Store, expert: str, review: Any, text: str):
    """Put `text` as the comment on `expert`'s own `review`, keeping the decision."""
    return store.record_review(
        expert,
        review.candidate_id,
        review.action,
        label=review.label if review.action == "correct" else None,
        explanation=review.explanation,
        wrong_step=review.wrong_step,
        comment=text,
        seconds=review.seconds,
        trajectory_id=review.trajectory_id,
        review_id=review.id,
    )


def revise(store: Store, expert: str, review_id: int, action: str, **fields):
    """Change an existing review; raises PermissionError if it is not `expert`'s."""
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
