"""Expert reviews of candidates: recording and revising them, reading them back, and
an admin's adjudication of conflicts.

On PostgreSQL a review locks its candidate row, so the denormalised counts stay exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db import models as m
from db.models import utcnow
from db.store.errors import NotFound, StoreError, StorePermissionError
from db.store.records import CandidateInfo, Filters


class ReviewsMixin:
    """Reviews and adjudication; each refreshes the candidate's label and queue columns."""

    def record_review(
        self,
        expert: str | int,
        candidate_id: int,
        action: str,
        *,
        label: str | None = None,
        explanation: str | None = None,
        wrong_step: int | None = None,
        comment: str | None = None,
        note: str | None = None,
        seconds: float | None = None,
        trajectory_id: int | None = None,
        review_id: int | None = None,
        source: str = "app",
        grade: int | None = None,
        redshift: float | None = None,
        redshift_source: str | None = None,
        issues: str | None = None,
        spectype: str | None = None,
        kind: str = "decision",
        hold_seconds: float | None = None,
        holder: str = "",
        overlap: int | None = None,
    ) -> m.Review:
        """Store `expert`'s review of a candidate as given (or a new version of it); returns
        the stored review. What a decision means (its label) is decided by the caller
        (`annotate.review`); the store checks only that the row is consistent: a known
        action, a label exactly on the actions that set one, a `wrong_step` inside the
        trajectory judged (`trajectory_id`, default the candidate's current one).

        One review per expert and candidate: a second call is a revision (the old version
        goes to review_history), and an identical repeat is a no-op, so a retried request
        never stores twice. `kind` ("decision", "edit" of a comment or grade, "undo") names
        the write in the audit trail, which is how a later undo finds the state before a
        decision. The expert's lease on the item ends, unless `hold_seconds` renews it (an
        undo gives the item back to its expert, held by `holder`: the page that undid). Passing `review_id` of another expert's
        review raises StorePermissionError. With `overlap` (the team's, from the app), a
        label from an expert who has none on the item is refused once other experts' labels
        reach it (gold items excepted): checked under the candidate's row lock, so two
        experts who both opened one item (a jump) cannot both label it.
        """
        if seconds is not None and (not math.isfinite(seconds) or seconds < 0):
            raise StoreError(f"seconds on item must be a non-negative number (got {seconds})")
        if action not in m.ACTIONS:
            raise StoreError(f"unknown review action {action!r} (expected one of {m.ACTIONS})")
        if kind not in KINDS:
            raise StoreError(f"unknown kind of review write {kind!r} (expected one of {KINDS})")
        _check_extras(grade, redshift, redshift_source, explanation, comment, note)
        _check_vi(issues, spectype)
        with self._tx() as s:
            e = self._expert(s, expert)
            if not e.active:
                raise StorePermissionError(f"expert {e.name!r} is deactivated")
            c = self._get_candidate(s, candidate_id, lock=True)
            existing = None
            if review_id is not None:
                existing = s.get(m.Review, review_id)
                if existing is None:
                    raise NotFound(f"no review #{review_id}")
                if existing.expert_id != e.id:
                    owner = s.get(m.Expert, existing.expert_id)
                    raise StorePermissionError(
                        f"review #{review_id} belongs to {owner.name!r}; "
                        f"{e.name!r} may revise only their own reviews"
                    )
                if existing.candidate_id != c.id:
                    raise StoreError(f"review #{review_id} is not about candidate #{c.id}")
            else:
                existing = s.scalars(
                    select(m.Review).where(
                        m.Review.candidate_id == c.id, m.Review.expert_id == e.id
                    )
                ).first()
            if (
                overlap is not None
                and action in m.LABEL_ACTIONS
                and (existing is None or existing.label is None)
                and not c.is_gold
            ):
                self._within_overlap(s, c, e, overlap)
            if (label in m.LABELS) != (action in m.LABEL_ACTIONS):
                raise StoreError(
                    f"candidate {c.key} (#{c.id}): a {action!r} review "
                    + ("needs a label YES or NO" if action in m.LABEL_ACTIONS else "has no label")
                    + f" (got {label!r})"
                )
            tid = trajectory_id if trajectory_id is not None else c.trajectory_id
            n_steps = None
            if tid is not None:
                tr = s.get(m.Trajectory, tid)
                if tr is None or tr.candidate_id != c.id:
                    raise StoreError(f"trajectory #{tid} is not a trajectory of candidate #{c.id}")
                n_steps = len(tr.steps or [])
            new_label = label
            if wrong_step is not None:
                if action not in ("correct", "reject"):
                    raise StoreError(f"wrong_step applies to reject/correct, not {action!r}")
                if n_steps is None or not 0 <= wrong_step < n_steps:
                    raise StoreError(
                        f"candidate {c.key}: wrong_step {wrong_step} is not a step "
                        f"of the trajectory judged ({n_steps or 0} steps)"
                    )
            values = dict(
                trajectory_id=tid,
                action=action,
                label=new_label,
                explanation=explanation,
                wrong_step=wrong_step,
                comment=comment,
                note=note,
                grade=grade,
                redshift=redshift,
                redshift_source=redshift_source,
                issues=issues or None,
                spectype=spectype or None,
            )
            if existing is not None:
                if kind != "undo" and all(getattr(existing, k) == v for k, v in values.items()):
                    return existing  # an identical retry
                s.add(
                    m.ReviewRevision(
                        review_id=existing.id,
                        revision=existing.revision,
                        trajectory_id=existing.trajectory_id,
                        action=existing.action,
                        label=existing.label,
                        explanation=existing.explanation,
                        wrong_step=existing.wrong_step,
                        comment=existing.comment,
                        note=existing.note,
                        seconds=existing.seconds,
                        grade=existing.grade,
                        redshift=existing.redshift,
                        redshift_source=existing.redshift_source,
                        issues=existing.issues,
                        spectype=existing.spectype,
                        recorded=existing.updated,
                    )
                )
                for k, v in values.items():
                    setattr(existing, k, v)
                existing.seconds = seconds
                existing.revision += 1
                existing.updated = utcnow()
                review, verb = existing, "revise_review"
            else:
                review = m.Review(
                    candidate_id=c.id, expert_id=e.id, seconds=seconds, source=source, **values
                )
                s.add(review)
                s.execute(
                    update(m.Expert)
                    .where(m.Expert.id == e.id)
                    .values(review_count=m.Expert.review_count + 1)
                )
                verb = "review"
            if kind != "decision":
                verb = f"{kind}_review"
            s.flush()
            if hold_seconds is None:
                s.execute(
                    delete(m.Lease).where(m.Lease.candidate_id == c.id, m.Lease.expert_id == e.id)
                )
            else:
                self._lease(s, c.id, e.id, utcnow(), hold_seconds, keep=None, holder=holder)
            self._refresh_candidate(s, c, self._threshold(s))
            self._audit(
                s,
                e.name,
                verb,
                "review",
                review.id,
                {
                    "candidate": c.id,
                    "action": action,
                    "label": new_label,
                    "revision": review.revision,
                    "source": source,
                    "grade": grade,
                },
            )
            return review

    @staticmethod
    def _within_overlap(s: Session, c: m.Candidate, e: m.Expert, overlap: int) -> None:
        labelled = labels_by_others(s, c.id, e.id)
        if labelled >= overlap:
            raise StorePermissionError(
                f"candidate {c.key} (#{c.id}) is already labelled by {labelled} other "
                f"expert(s) and the team's overlap is {overlap}: no further label is "
                "needed; take the next item"
            )

    def last_decision(self, expert: str | int) -> m.Review | None:
        """`expert`'s most recently written review that still holds a decision (not an
        undo), or None: what "undo" takes back."""
        with self._ro() as s:
            e = self._expert(s, expert)
            return s.scalars(
                select(m.Review)
                .where(m.Review.expert_id == e.id, m.Review.action != "undo")
                .order_by(m.Review.updated.desc(), m.Review.id.desc())
                .limit(1)
            ).first()

    def review(self, review_id: int) -> m.Review:
        with self._ro() as s:
            r = s.get(m.Review, review_id)
            if r is None:
                raise NotFound(f"no review #{review_id}")
            return r

    def reviews(
        self,
        *,
        candidate_id: int | None = None,
        expert: str | int | None = None,
        task: str | None = None,
        actions: Sequence[str] | None = None,
        since_id: int | None = None,
        limit: int | None = None,
    ) -> list[m.Review]:
        with self._ro() as s:
            q = select(m.Review)
            if candidate_id is not None:
                q = q.where(m.Review.candidate_id == candidate_id)
            if expert is not None:
                q = q.where(m.Review.expert_id == self._expert(s, expert).id)
            if task is not None:
                q = q.join(m.Candidate, m.Candidate.id == m.Review.candidate_id).where(
                    m.Candidate.task_id == self._task_id(s, task, create=False)
                )
            if actions is not None:
                q = q.where(m.Review.action.in_(list(actions)))
            if since_id is not None:
                q = q.where(m.Review.id > since_id)
            q = q.order_by(m.Review.id)
            if limit is not None:
                q = q.limit(limit)
            return list(s.scalars(q))

    def review_history(self, review_id: int) -> list[m.ReviewRevision]:
        """Superseded versions of a review, oldest first (the current one is `review`)."""
        with self._ro() as s:
            return list(
                s.scalars(
                    select(m.ReviewRevision)
                    .where(m.ReviewRevision.review_id == review_id)
                    .order_by(m.ReviewRevision.revision)
                )
            )

    def adjudicate(
        self, admin: str | int, candidate_id: int, label: str | None, comment: str | None = None
    ) -> CandidateInfo:
        """An admin's final label for a candidate (None withdraws the override)."""
        if label is not None and label not in m.LABELS:
            raise StoreError(f"adjudicated label must be YES or NO (got {label!r})")
        with self._tx() as s:
            e = self._expert(s, admin)
            if e.role != "admin":
                raise StorePermissionError(f"{e.name!r} is not an admin and cannot adjudicate")
            c = self._get_candidate(s, candidate_id, lock=True)
            c.adjudicated_label, c.adjudicator_id = label, (e.id if label else None)
            c.adjudication_comment = comment
            self._refresh_candidate(s, c, self._threshold(s))
            self._audit(
                s, e.name, "adjudicate", "candidate", c.id, {"label": label, "comment": comment}
            )
            s.flush()
            return self._info(s, c)

    def conflicts(self, task: str | None = None, limit: int = 1000) -> list[CandidateInfo]:
        """Candidates whose experts disagree and no adjudicator has decided yet."""
        return self.list_candidates(Filters(task=task, status="conflict"), limit=limit, order="id")


KINDS = ("decision", "edit", "undo")  # what a review write is, as the audit trail names it


def _check_extras(
    grade: int | None,
    redshift: float | None,
    redshift_source: str | None,
    explanation: str | None,
    comment: str | None,
    note: str | None = None,
) -> None:
    if grade is not None and (isinstance(grade, bool) or grade not in m.GRADES):
        raise StoreError(f"grade must be one of {m.GRADES} (got {grade!r})")
    if redshift is not None:
        if not math.isfinite(redshift) or redshift < -0.1:
            raise StoreError(f"redshift must be a finite number >= -0.1 (got {redshift})")
        if redshift_source not in m.REDSHIFT_SOURCES:
            raise StoreError(
                f"redshift_source must be one of {m.REDSHIFT_SOURCES} (got {redshift_source!r})"
            )
    elif redshift_source is not None:
        raise StoreError("redshift_source given without a redshift")
    for name, text in (("explanation", explanation), ("comment", comment), ("note", note)):
        if text is not None and len(text) > m.MAX_TEXT:
            raise StoreError(f"{name} is {len(text)} characters; at most {m.MAX_TEXT} are kept")


def _check_vi(issues: str | None, spectype: str | None) -> None:
    """Prospect's issue flags as it writes them (each of ISSUE_FLAGS once, in that order)
    and a spectral type that fits its column."""
    if issues and (set(issues) - set(m.ISSUE_FLAGS) or len(set(issues)) != len(issues)):
        raise StoreError(f"issues must be letters of {m.ISSUE_FLAGS!r}, each once (got {issues!r})")
    if issues and issues != "".join(f for f in m.ISSUE_FLAGS if f in issues):
        raise StoreError(f"issues are written in the order {m.ISSUE_FLAGS!r} (got {issues!r})")
    if spectype and len(spectype) > m.MAX_SPECTYPE:
        raise StoreError(
            f"spectral type is {len(spectype)} characters; at most {m.MAX_SPECTYPE} are kept"
        )


def labels_by_others(s: Session, candidate_id: int, expert_id: int) -> int:
    """How many other experts' reviews give this candidate a label: the overlap's count,
    whether a jump or the queue brought the expert to it."""
    return s.scalar(
        select(func.count())
        .select_from(m.Review)
        .where(
            m.Review.candidate_id == candidate_id,
            m.Review.expert_id != expert_id,
            m.Review.label.is_not(None),
        )
    )
