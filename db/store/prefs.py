"""An expert's desk preferences: one JSON object per expert, kept as given
(`annotate.team.prefs` holds the rules: which fields, what values)."""

from __future__ import annotations

from typing import Any

from db import models as m
from db.models import utcnow


class PrefsMixin:
    """Read and replace an expert's desk preferences."""

    def prefs(self, expert: str | int) -> dict[str, Any]:
        """`expert`'s preferences ({} when none were kept)."""
        with self._ro() as s:
            row = s.get(m.ExpertPref, self._expert(s, expert).id)
            return dict(row.fields or {}) if row is not None else {}

    def put_prefs(self, expert: str | int, fields: dict[str, Any]) -> None:
        """Replace `expert`'s preferences with `fields`."""
        with self._tx() as s:
            e = self._expert(s, expert)
            row = s.get(m.ExpertPref, e.id)
            if row is None:
                s.add(m.ExpertPref(expert_id=e.id, fields=dict(fields), updated=utcnow()))
            else:
                row.fields = dict(fields)
                row.updated = utcnow()
