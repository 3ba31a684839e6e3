"""Review semantics: what an expert's decision means for a candidate's label.

- accept: the agent's verdict is right, so label = verdict;
- reject: the verdict is wrong, so the label flips;
- correct: the expert sets the label, and may say why (`explanation`) and which step of the
  trajectory went wrong (`wrong_step`);
- skip / flag: no label (a flag marks the item for an admin).

One review per expert and candidate. An expert may revise their own review (the earlier
version is kept in its history) but never another's. Several experts' labels resolve by
majority; an admin's adjudication overrides it; disagreements are listed as conflicts.
The rules themselves (`derive_label`, `resolve_label`) are applied by the store inside the
writing transaction; this module is the API the app and scripts call.
"""

from __future__ import annotations

from db.store import (
    CandidateInfo,
    Store,
    StoreError,
    StorePermissionError,
    derive_label,
    resolve_label,
)

__all__ = [
    "accept",
    "reject",
    "correct",
    "skip",
    "flag",
    "revise",
    "adjudicate",
    "conflicts",
    "history",
    "derive_label",
    "resolve_label",
    "ReviewError",
    "ReviewPermissionError",
]

ReviewError = StoreError
ReviewPermissionError = StorePermissionError


def accept(
    store: Store,
    expert: str,
    candidate_id: int,
    *,
    comment: str | None = None,
    seconds: float | None = None,
    trajectory_id: int | None = None,
):
    return store.record_review(
        expert,
        candidate_id,
        "accept",
        comment=comment,
        seconds=seconds,
        trajectory_id=trajectory_id,
    )


def reject(
    store: Store,
    expert: str,
    candidate_id: int,
    *,
    comment: str | None = None,
    wrong_step: int | None = None,
    seconds: float | None = None,
    trajectory_id: int | None = None,
):
    return store.record_review(
        expert,
        candidate_id,
        "reject",
        comment=comment,
        wrong_step=wrong_step,
        seconds=seconds,
        trajectory_id=trajectory_id,
    )


def correct(
    store: Store,
    expert: str,
    candidate_id: int,
    label: str,
    *,
    explanation: str | None = None,
    wrong_step: int | None = None,
    comment: str | None = None,
    seconds: float | None = None,
    trajectory_id: int | None = None,
):
    return store.record_review(
        expert,
        candidate_id,
        "correct",
        label=label,
        explanation=explanation,
        wrong_step=wrong_step,
        comment=comment,
        seconds=seconds,
        trajectory_id=trajectory_id,
    )


def skip(
    store: Store,
    expert: str,
    candidate_id: int,
    *,
    comment: str | None = None,
    seconds: float | None = None,
):
    return store.record_review(expert, candidate_id, "skip", comment=comment, seconds=seconds)


def flag(
    store: Store,
    expert: str,
    candidate_id: int,
    *,
    comment: str | None = None,
    seconds: float | None = None,
):
    return store.record_review(expert, candidate_id, "flag", comment=comment, seconds=seconds)


def revise(store: Store, expert: str, review_id: int, action: str, **fields):
    """Change an existing review; raises ReviewPermissionError if it is not `expert`'s."""
    candidate_id = store.review(review_id).candidate_id
    return store.record_review(expert, candidate_id, action, review_id=review_id, **fields)


def history(store: Store, review_id: int) -> list:
    """Every version of a review, oldest first; the last one is the current review."""
    return [*store.review_history(review_id), store.review(review_id)]


def adjudicate(
    store: Store, admin: str, candidate_id: int, label: str | None, comment: str | None = None
) -> CandidateInfo:
    return store.adjudicate(admin, candidate_id, label, comment)


def conflicts(store: Store, task: str | None = None) -> list[CandidateInfo]:
    return store.conflicts(task)
