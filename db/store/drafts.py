"""Drafts: what an expert set on a candidate and has not saved with a decision yet.

One row per expert and candidate holding a JSON object of fields; the store keeps what it
is given (`annotate.drafts` holds the rules: which fields, what values).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from db import models as m
from db.models import utcnow


class DraftsMixin:
    """Read, replace and drop an expert's draft on a candidate."""

    def draft(self, expert: str | int, candidate_id: int) -> dict[str, Any]:
        """`expert`'s draft on the candidate ({} when none)."""
        with self._ro() as s:
            e = self._expert(s, expert)
            row = s.scalars(
                select(m.Draft).where(
                    m.Draft.expert_id == e.id, m.Draft.candidate_id == candidate_id
                )  # fmt: skip
            ).first()
            return dict(row.fields or {}) if row is not None else {}

    def put_draft(self, expert: str | int, candidate_id: int, fields: dict[str, Any]) -> None:
        """Replace `expert`'s draft on the candidate with `fields` (empty: drop it)."""
        with self._tx() as s:
            e = self._expert(s, expert)
            self._get_candidate(s, candidate_id)
            row = s.scalars(
                select(m.Draft).where(
                    m.Draft.expert_id == e.id, m.Draft.candidate_id == candidate_id
                )  # fmt: skip
            ).first()
            if not fields:
                if row is not None:
                    s.delete(row)
                return
            if row is None:
                s.add(m.Draft(expert_id=e.id, candidate_id=candidate_id, fields=dict(fields),
                              updated=utcnow()))  # fmt: skip
            else:
                row.fields = dict(fields)
                row.updated = utcnow()

    def drop_draft(self, expert: str | int, candidate_id: int) -> None:
        with self._tx() as s:
            e = self._expert(s, expert)
            s.execute(delete(m.Draft).where(m.Draft.expert_id == e.id,
                                            m.Draft.candidate_id == candidate_id))  # fmt: skip
