"""Trajectories written by experts: drafts, submission and peer review."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.trajectory import Step
from db import models as m
from db.models import utcnow
from db.store.errors import NotFound, StoreError, StorePermissionError
from db.store.values import json_default


class AuthoredMixin:
    """Expert-written trajectories: draft -> submitted -> approved or rejected."""

    def create_authored(
        self,
        author: str | int,
        candidate_id: int,
        steps: Sequence[Step | dict],
        verdict: str | None = None,
        explanation: str = "",
        renderer: str = "fast",
    ) -> m.AuthoredTrajectory:
        if verdict is not None and verdict not in m.LABELS:
            raise StoreError(f"verdict must be YES or NO (got {verdict!r})")
        with self._tx() as s:
            e = self._expert(s, author)
            self._get_candidate(s, candidate_id)
            a = m.AuthoredTrajectory(
                candidate_id=candidate_id,
                author_id=e.id,
                steps=_steps_json(steps),
                verdict=verdict,
                explanation=explanation or "",
                renderer=renderer,
            )
            s.add(a)
            s.flush()
            self._audit(
                s,
                e.name,
                "create_authored",
                "authored_trajectory",
                a.id,
                {"candidate": candidate_id},
            )
            return a

    def update_authored(
        self,
        authored_id: int,
        author: str | int,
        *,
        steps: Sequence[Step | dict] | None = None,
        verdict: str | None = None,
        explanation: str | None = None,
    ) -> m.AuthoredTrajectory:
        """The author edits a draft (or a rejected one, which returns it to draft)."""
        if verdict is not None and verdict not in m.LABELS:
            raise StoreError(f"verdict must be YES or NO (got {verdict!r})")
        with self._tx() as s:
            e = self._expert(s, author)
            a = self._authored(s, authored_id)
            if a.author_id != e.id:
                raise StorePermissionError(f"{e.name!r} cannot edit another expert's trajectory")
            if a.status not in ("draft", "rejected"):
                raise StoreError(
                    f"authored trajectory #{a.id} is {a.status}; only drafts are edited"
                )
            if steps is not None:
                a.steps = _steps_json(steps)
            if verdict is not None:
                a.verdict = verdict
            if explanation is not None:
                a.explanation = explanation
            a.status, a.updated = "draft", utcnow()
            self._audit(s, e.name, "update_authored", "authored_trajectory", a.id)
            return a

    def submit_authored(self, authored_id: int, author: str | int) -> m.AuthoredTrajectory:
        with self._tx() as s:
            e = self._expert(s, author)
            a = self._authored(s, authored_id)
            if a.author_id != e.id:
                raise StorePermissionError(f"{e.name!r} cannot submit another expert's trajectory")
            if a.status != "draft":
                raise StoreError(f"authored trajectory #{a.id} is {a.status}, not a draft")
            if a.verdict not in m.LABELS or not a.steps:
                raise StoreError(f"authored trajectory #{a.id} needs steps and a YES/NO verdict")
            a.status, a.updated = "submitted", utcnow()
            self._audit(s, e.name, "submit_authored", "authored_trajectory", a.id)
            return a

    def review_authored(
        self, authored_id: int, reviewer: str | int, approve: bool, comment: str | None = None
    ) -> m.AuthoredTrajectory:
        """A second expert (any expert but the author) approves or sends back a submitted
        trajectory: the audit of cold-start data is peer review, as in the method's paper."""
        with self._tx() as s:
            e = self._expert(s, reviewer)
            a = self._authored(s, authored_id)
            if a.author_id == e.id:
                raise StorePermissionError("an author cannot approve their own trajectory")
            if a.status != "submitted":
                raise StoreError(f"authored trajectory #{a.id} is {a.status}, not submitted")
            a.status = "approved" if approve else "rejected"
            a.reviewer_id, a.reviewer_comment, a.updated = e.id, comment, utcnow()
            self._audit(s, e.name, a.status, "authored_trajectory", a.id, {"comment": comment})
            return a

    def _authored(self, s: Session, authored_id: int) -> m.AuthoredTrajectory:
        a = s.get(m.AuthoredTrajectory, authored_id)
        if a is None:
            raise NotFound(f"no authored trajectory #{authored_id}")
        return a

    def authored(self, authored_id: int) -> m.AuthoredTrajectory:
        with self._ro() as s:
            return self._authored(s, authored_id)

    def list_authored(
        self,
        *,
        status: str | None = None,
        author: str | int | None = None,
        candidate_id: int | None = None,
    ) -> list[m.AuthoredTrajectory]:
        with self._ro() as s:
            q = select(m.AuthoredTrajectory)
            if status is not None:
                q = q.where(m.AuthoredTrajectory.status == status)
            if author is not None:
                q = q.where(m.AuthoredTrajectory.author_id == self._expert(s, author).id)
            if candidate_id is not None:
                q = q.where(m.AuthoredTrajectory.candidate_id == candidate_id)
            return list(s.scalars(q.order_by(m.AuthoredTrajectory.id)))


def _steps_json(steps: Sequence[Step | dict]) -> list[dict[str, Any]]:
    out = [st.to_dict() if isinstance(st, Step) else Step.from_dict(st).to_dict() for st in steps]
    return json.loads(json.dumps(out, default=json_default))
