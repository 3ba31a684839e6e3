"""What exports read from the store, and the export batches they record."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import or_, select

from db import models as m
from db.store.errors import StoreError
from db.store.records import CandidateInfo


class ExportsMixin:
    """Reads for the exporters and the record of finished export batches."""

    def labelled_candidates(self, task: str | None = None) -> list[CandidateInfo]:
        """Every candidate with a resolved label (reviews, adjudication or auto), by id."""
        with self._ro() as s:
            q = select(m.Candidate).where(m.Candidate.label.is_not(None))
            if task is not None:
                q = q.where(m.Candidate.task_id == self._task_id(s, task, create=False))
            return [self._info(s, c) for c in s.scalars(q.order_by(m.Candidate.id))]

    def object_splits(self) -> dict[str, set[str]]:
        """object id -> the splits its candidates are already assigned to."""
        out: dict[str, set[str]] = {}
        with self._ro() as s:
            rows = s.execute(
                select(m.Candidate.object_id, m.Candidate.split).where(
                    m.Candidate.split.is_not(None)
                )
            )
            for oid, split in rows:
                out.setdefault(oid, set()).add(split)
        return out

    def reference_labelled_ids(self) -> list[int]:
        """Candidates without a resolved label but with a gold or catalogue label, by id."""
        with self._ro() as s:
            q = (
                select(m.Candidate.id)
                .where(m.Candidate.label.is_(None))
                .where(
                    or_(m.Candidate.gold_label.is_not(None), m.Candidate.known_label.is_not(None))
                )
                .order_by(m.Candidate.id)
            )
            return list(s.scalars(q))

    def exported_items(self, kind: str, entity: str) -> dict[int, set[str]]:
        """entity id -> hashes of its versions already exported in batches of `kind`."""
        out: dict[int, set[str]] = {}
        with self._ro() as s:
            rows = s.execute(
                select(m.ExportItem.entity_id, m.ExportItem.item_hash).where(
                    m.ExportItem.kind == kind, m.ExportItem.entity == entity
                )
            )
            for eid, h in rows:
                out.setdefault(eid, set()).add(h)
        return out

    def record_export(
        self,
        kind: str,
        items: Iterable[tuple[str, int, str]],
        *,
        manifest: dict[str, Any],
        path: str | None = None,
        content_hash: str | None = None,
        actor: str = "export",
    ) -> int:
        """Record a finished export batch and the (entity, id, item_hash) it holds."""
        with self._tx() as s:
            b = m.ExportBatch(
                kind=kind,
                actor=actor,
                path=path,
                content_hash=content_hash,
                manifest=manifest,
                code_version=self.code_version(),
            )
            s.add(b)
            s.flush()
            rows = [
                {"batch_id": b.id, "kind": kind, "entity": en, "entity_id": int(i), "item_hash": h}
                for en, i, h in items
            ]
            if rows:
                s.execute(m.ExportItem.__table__.insert(), rows)
            self._audit(
                s,
                actor,
                "export",
                "export_batch",
                b.id,
                {"kind": kind, "items": len(rows), "hash": content_hash},
            )
            return b.id

    def export_batches(self, kind: str | None = None) -> list[m.ExportBatch]:
        with self._ro() as s:
            q = select(m.ExportBatch)
            if kind is not None:
                q = q.where(m.ExportBatch.kind == kind)
            return list(s.scalars(q.order_by(m.ExportBatch.id)))

    def record_export_files(
        self,
        files: Iterable[tuple[str, str, str]],
        *,
        owner: str | None = None,
        actor: str = "export",
    ) -> list[m.ExportFile]:
        """Record (token, path, name) of files an export wrote, for download by token only:
        `owner` None, for admins only; else that expert too."""
        with self._tx() as s:
            rows = [m.ExportFile(token=t, path=str(p), name=n[:255], owner=owner, actor=actor)
                    for t, p, n in files]  # fmt: skip
            s.add_all(rows)
            s.flush()
            if rows:
                self._audit(s, actor, "offer_download", "export_file", rows[0].id,
                            {"files": len(rows), "owner": owner})  # fmt: skip
            return rows

    def export_file(self, token: str) -> m.ExportFile | None:
        """The export file recorded under `token`, or None."""
        if not token or len(token) > 64:
            return None
        with self._ro() as s:
            return s.scalars(select(m.ExportFile).where(m.ExportFile.token == token)).first()

    def set_review_time(self, review_id: int, when: dt.datetime) -> m.Review:
        """An imported decision keeps the time it was made (a VI file's `time`, UTC): the
        review's `updated`, and its `created` while it has no earlier revision."""
        with self._tx() as s:
            r = s.get(m.Review, review_id)
            if r is None:
                raise StoreError(f"no review #{review_id}")
            if r.updated != when:
                r.updated = when
                if r.revision == 1:
                    r.created = when
                self._audit(s, "import", "set_review_time", "review", r.id,
                            {"time": when.isoformat()})  # fmt: skip
            s.flush()
            return r
