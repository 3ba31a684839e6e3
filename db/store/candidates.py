"""Tasks, spectra and candidates: adding them in bulk, reading, filtering and the
denormalised review and queue columns each candidate row keeps current."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import JSON, and_, exists, func, select, update
from sqlalchemy.orm import Session

from agent.refs import CandidateRef
from db import models as m
from db.models import utcnow
from db.store import tally
from db.store.errors import NotFound, StoreError
from db.store.records import AddReport, CandidateInfo, Filters
from db.store.rules import VETTED, queue_priority, resolve_label
from db.store.spectra import SPECTRA
from db.store.values import float_or_none, hdu_out, jsonable, ref_key, str_or_none

# Survey metadata of a spectrum the store keeps in its own columns.
SURVEY_META = (
    "survey",
    "obsid",
    "ra",
    "dec",
    "snr",
    "survey_class",
    "survey_subclass",
    "simulated",
)
_KNOWN_INFO = {
    *SURVEY_META,
    "score",
    "split",
    "object_id",
    "source_catalog",
    "gold",
    "gold_label",
    "content_hash",
}


class CandidatesMixin:
    """Tasks, spectra and candidates of a `Store` (uses `CoreMixin`'s transactions)."""

    def _task_id(self, s: Session, name: str, create: bool = True) -> int:
        tid = s.scalar(select(m.Task.id).where(m.Task.name == name))
        if tid is None:
            if not create:
                raise NotFound(f"unknown task {name!r}")
            t = m.Task(name=name)
            s.add(t)
            s.flush()
            tid = t.id
        return tid

    def tasks(self) -> list[str]:
        with self._ro() as s:
            return list(s.scalars(select(m.Task.name).order_by(m.Task.name)))

    def surveys(self) -> list[str]:
        """The surveys named by any candidate, sorted."""
        with self._ro() as s:
            return sorted({v for v in s.scalars(select(m.Candidate.survey).distinct()) if v})

    def add_candidates(
        self,
        refs: Iterable[CandidateRef],
        *,
        source_catalog: str | None = None,
        split: str | None = None,
        gold: bool = False,
        meta: dict[int, dict[str, Any]] | None = None,
        hashes: dict[str, str] | None = None,
        actor: str = "ingest",
        batch_size: int = 5000,
    ) -> AddReport:
        """Insert candidates (and their spectra) that are not there yet.

        Idempotent: a candidate already present (same file reference and task, or same id
        and task) is counted in `existing`, never duplicated; but an id and task already
        given to another spectrum (another file, HDU or row, or a file whose content hash
        differs from the stored one) is a conflict, left out with its index and reason in
        `conflicts` (the stored candidate stands). A bad ref is refused with its index and
        reason in `errors`; the good ones are kept. `meta[i]` holds optional
        spectrum metadata for the i-th ref (survey, ra, dec, snr, obsid, survey_class, ...);
        `hashes` maps a path to its content hash. Each batch commits on its own.
        """
        report = AddReport()
        batch: list[tuple[int, CandidateRef, dict[str, Any]]] = []
        for i, ref in enumerate(refs):
            info = dict(ref.extra)
            if meta and i in meta:
                info.update(meta[i])
            problem = _check_ref(ref, info, split)
            if problem:
                report.errors.append((i, ref.id or ref.path or f"#{i}", problem))
                continue
            batch.append((i, ref, info))
            if len(batch) >= batch_size:
                self._add_batch(batch, report, source_catalog, split, gold, hashes, actor)
                batch = []
        if batch:
            self._add_batch(batch, report, source_catalog, split, gold, hashes, actor)
        return report

    def stored_spectra(self, refs: Sequence[CandidateRef]) -> set[int]:
        """Indices of the `refs` whose spectrum (file, HDU, row) the store already holds."""
        keys = [ref_key(r.path, r.hdu, r.row) for r in refs]
        with self._ro() as s:
            held = self._spectrum_ids(s, sorted(set(keys)))
        return {i for i, k in enumerate(keys) if k in held}

    def spectrum_holders(self, refs: Sequence[CandidateRef]) -> dict[int, str]:
        """Index -> id of the stored candidate that holds the ref's spectrum (file, HDU,
        row) for the ref's task: one spectrum is one candidate per task
        (uq_candidate_spectrum_task)."""
        keys = [ref_key(r.path, r.hdu, r.row) for r in refs]
        held: dict[tuple[str, str], str] = {}
        with self._ro() as s:
            wanted = sorted(set(keys))
            for j in range(0, len(wanted), 500):
                rows = s.execute(
                    select(m.Spectrum.ref_key, m.Task.name, m.Candidate.key)
                    .join(m.Candidate, m.Candidate.spectrum_id == m.Spectrum.id)
                    .join(m.Task, m.Task.id == m.Candidate.task_id)
                    .where(m.Spectrum.ref_key.in_(wanted[j : j + 500]))
                ).all()  # fmt: skip
                held.update({(k, t): key for k, t, key in rows})
        return {
            i: held[(k, r.task)] for i, (k, r) in enumerate(zip(keys, refs)) if (k, r.task) in held
        }

    @staticmethod
    def _spectrum_ids(s: Session, keys: Sequence[str]) -> dict[str, int]:
        """ref_key -> id of the stored spectra among `keys` (queried 500 at a time)."""
        out: dict[str, int] = {}
        for j in range(0, len(keys), 500):
            chunk = keys[j : j + 500]
            out.update(
                s.execute(
                    select(m.Spectrum.ref_key, m.Spectrum.id).where(m.Spectrum.ref_key.in_(chunk))
                ).all()
            )
        return out

    def _add_batch(self, batch, report, source_catalog, split, gold, hashes, actor) -> None:
        now = utcnow()
        with self._tx() as s:
            task_ids = {name: self._task_id(s, name) for name in {r.task for _, r, _ in batch}}
            batch = self._drop_conflicts(s, batch, task_ids, hashes, report)
            if not batch:
                return
            spec_rows: dict[str, dict[str, Any]] = {}
            for _, ref, info in batch:
                key = ref_key(ref.path, ref.hdu, ref.row)
                if key in spec_rows:
                    continue
                spec_rows[key] = {
                    "ref_key": key,
                    "path": ref.path,
                    "hdu": None if ref.hdu is None else str(ref.hdu),
                    "row": ref.row,
                    "content_hash": (hashes or {}).get(ref.path) or info.get("content_hash"),
                    "survey": info.get("survey"),
                    "obsid": str_or_none(info.get("obsid")),
                    "ra": float_or_none(info.get("ra")),
                    "dec": float_or_none(info.get("dec")),
                    "snr": float_or_none(info.get("snr")),
                    "survey_class": info.get("survey_class"),
                    "survey_subclass": info.get("survey_subclass"),
                    "simulated": bool(info.get("simulated", False)),
                    "extra": {
                        k: v for k, v in info.items() if k not in _KNOWN_INFO and jsonable(v)
                    },
                    "created": now,
                }
            conn = s.connection()
            self._bulk_insert_ignore(conn, m.Spectrum, list(spec_rows.values()))
            spec_ids = self._spectrum_ids(s, list(spec_rows))
            threshold = self._threshold(s)
            cand_rows = []
            seen: set[tuple[str, int]] = set()
            for _, ref, info in batch:
                sid = spec_ids[ref_key(ref.path, ref.hdu, ref.row)]
                tid = task_ids[ref.task]
                if (ref.id, tid) in seen:
                    continue
                seen.add((ref.id, tid))
                is_gold = bool(info.get("gold", gold))
                gold_label = info.get("gold_label") or (ref.label if is_gold else None)
                cand_rows.append(
                    {
                        "key": ref.id,
                        "object_id": str(info.get("object_id") or ref.id),
                        "spectrum_id": sid,
                        "task_id": tid,
                        "score": float_or_none(info.get("score")),
                        "source_catalog": info.get("source_catalog") or source_catalog,
                        "split": info.get("split") or split,
                        "survey": info.get("survey"),
                        "is_gold": is_gold,
                        "gold_label": gold_label,
                        "known_label": ref.label,
                        "priority": queue_priority(None, vetted=False, threshold=threshold),
                        "created": now,
                        "updated": now,
                    }
                )
            added = self._insert_counted(s, conn, cand_rows)
            report.added += added
            report.existing += len(batch) - added
            self._audit(
                s,
                actor,
                "add_candidates",
                "candidate",
                None,
                {
                    "added": added,
                    "offered": len(batch),
                    "first": batch[0][1].id,
                    "last": batch[-1][1].id,
                },
            )

    def _insert_counted(self, s: Session, conn, rows: list[dict[str, Any]]) -> int:
        """Insert new candidate rows in the order given (ids follow it) and count each one
        in the Dashboard's running counts; returns how many were inserted."""
        C = m.Candidate
        if self.is_sqlite:
            # one writer at a time: what this insert added is every row past the last id
            last = conn.execute(select(func.coalesce(func.max(C.id), 0))).scalar()
            added = self._bulk_insert_ignore(conn, m.Candidate, rows)
            tally.count_candidates(s, False, C.id > last, +1)
            return added
        # concurrent inserts take ids between these: each run of one task is counted by
        # its own insert's count (a new candidate: unreviewed, not auto-accepted, no label)
        added = 0
        for tid, run in itertools.groupby(rows, key=lambda r: r["task_id"]):
            n = self._bulk_insert_ignore(conn, m.Candidate, list(run))
            tally.add(s, tally.CANDIDATE, (tid, False, False, "", "", -1), n)
            added += n
        return added

    def _drop_conflicts(self, s: Session, batch, task_ids, hashes, report) -> list:
        """`batch` without the refs whose (id, task) the store, or an earlier ref of this
        batch, already gives to another spectrum; each one left out goes to
        `report.conflicts`. Re-offering the same spectrum is not a conflict."""
        stored: dict[tuple[str, int], tuple[str, str | None, str]] = {}
        keys = sorted({r.id for _, r, _ in batch})
        for j in range(0, len(keys), 500):
            rows = s.execute(
                select(m.Candidate.key, m.Candidate.task_id, m.Spectrum.ref_key,
                       m.Spectrum.content_hash, m.Spectrum.path)
                .join(m.Spectrum, m.Spectrum.id == m.Candidate.spectrum_id)
                .where(m.Candidate.key.in_(keys[j : j + 500]))
            ).all()  # fmt: skip
            stored.update({(k, t): (rk, h, p) for k, t, rk, h, p in rows})
        kept = []
        first: dict[tuple[str, int], CandidateRef] = {}
        for i, ref, info in batch:
            tid = task_ids[ref.task]
            new_hash = (hashes or {}).get(ref.path) or info.get("content_hash")
            problem = None
            if (ref.id, tid) in stored:
                key, old_hash, old_path = stored[(ref.id, tid)]
                problem = _conflict(ref, new_hash, key, old_hash, old_path)
            elif first.setdefault((ref.id, tid), ref).spectrum_ref != ref.spectrum_ref:
                seen = first[(ref.id, tid)]
                problem = (f"id {ref.id!r} (task {ref.task}) points at {ref.location} here but "
                           f"at {seen.location} in {seen.origin or seen.path} (conflict)")  # fmt: skip
            if problem:
                report.conflicts.append((i, ref.origin or ref.location, problem))
            else:
                kept.append((i, ref, info))
        return kept

    def _bulk_insert_ignore(self, conn, model: type[m.Base], rows: list[dict[str, Any]]) -> int:
        """INSERT ... ON CONFLICT DO NOTHING through the driver's executemany; returns the
        number of rows inserted. (SQLAlchemy's per-row parameter processing costs several
        times the insert itself at ingest sizes.)"""
        if not rows:
            return 0
        table = model.__table__
        defaults = {}
        for col in table.columns:  # the Python-side defaults Core would have applied
            if col.name not in rows[0] and col.default is not None and not col.primary_key:
                arg = col.default.arg
                defaults[col.name] = arg(None) if col.default.is_callable else arg
        rows = [{**defaults, **r} for r in rows] if defaults else rows
        cols = list(rows[0])
        json_cols = {c for c in cols if isinstance(table.c[c].type, JSON)}
        ph = "?" if self.is_sqlite else "%s"
        sql = (
            f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([ph] * len(cols))})"
            " ON CONFLICT DO NOTHING"
        )

        params = [[r[c] for c in cols] for r in rows]
        for i, c in enumerate(cols):
            if c in json_cols:
                for p in params:
                    p[i] = json.dumps(p[i])
            elif self.is_sqlite and isinstance(rows[0][c], dt.datetime):
                cache: dict[Any, str] = {}
                for p in params:
                    v = p[i]
                    if isinstance(v, dt.datetime):
                        p[i] = cache.get(v) or cache.setdefault(
                            v, v.strftime("%Y-%m-%d %H:%M:%S.%f")
                        )
        result = conn.exec_driver_sql(sql, [tuple(p) for p in params])
        return max(int(result.rowcount), 0)

    def _info(self, s: Session, c: m.Candidate) -> CandidateInfo:
        sp = s.get(m.Spectrum, c.spectrum_id)
        task = s.scalar(select(m.Task.name).where(m.Task.id == c.task_id))
        return CandidateInfo(
            id=c.id,
            key=c.key,
            task=task,
            object_id=c.object_id,
            spectrum_ref={"path": sp.path, "hdu": hdu_out(sp.hdu), "row": sp.row},
            spectrum_id=sp.id,
            survey=c.survey or sp.survey,
            split=c.split,
            score=c.score,
            source_catalog=c.source_catalog,
            is_gold=c.is_gold,
            gold_label=c.gold_label,
            known_label=c.known_label,
            trajectory_id=c.trajectory_id,
            verdict=c.verdict,
            confidence=c.confidence,
            disagreement=c.disagreement,
            priority=c.priority,
            review_count=c.review_count,
            n_yes=c.n_yes,
            n_no=c.n_no,
            flagged=c.flagged,
            auto=c.auto,
            label=c.label,
            label_source=c.label_source,
            adjudicated_label=c.adjudicated_label,
        )

    def candidate(self, candidate_id: int) -> CandidateInfo:
        with self._ro() as s:
            c = s.get(m.Candidate, candidate_id)
            if c is None:
                raise NotFound(f"no candidate #{candidate_id}")
            return self._info(s, c)

    def positions(self, candidate_ids: Iterable[int]) -> dict[int, tuple[Any, Any]]:
        """(ra, dec) in degrees as stored with each candidate's spectrum (None where the
        file gave none), by candidate id."""
        ids = list(dict.fromkeys(candidate_ids))
        out: dict[int, tuple[Any, Any]] = {}
        with self._ro() as s:
            for j in range(0, len(ids), 500):
                q = (
                    select(m.Candidate.id, m.Spectrum.ra, m.Spectrum.dec)
                    .join(m.Spectrum, m.Spectrum.id == m.Candidate.spectrum_id)
                    .where(m.Candidate.id.in_(ids[j : j + 500]))
                )
                out.update({cid: (ra, dec) for cid, ra, dec in s.execute(q)})
        return out

    def object_ids(self) -> list[tuple[int, str, str | None, str]]:
        """(candidate id, object id, survey, task) of every candidate, in one query: what a
        file that names objects by survey id alone is matched against."""
        C, S, T = m.Candidate, m.Spectrum, m.Task
        q = (
            select(C.id, C.object_id, func.coalesce(C.survey, S.survey), T.name)
            .join(S, S.id == C.spectrum_id)
            .join(T, T.id == C.task_id)
            .order_by(C.id)
        )
        with self._ro() as s:
            return [tuple(r) for r in s.execute(q)]

    def find_candidate(self, key: str, task: str | None = None) -> CandidateInfo | None:
        """Jump-to-id: the candidate with this id (and task, when the id has several);
        a number also matches the internal id."""
        with self._ro() as s:
            q = select(m.Candidate).where(m.Candidate.key == key)
            if task is not None:
                q = q.join(m.Task, m.Task.id == m.Candidate.task_id).where(m.Task.name == task)
            c = s.scalars(q.order_by(m.Candidate.id).limit(1)).first()
            if c is None and str(key).isdigit():
                c = s.get(m.Candidate, int(key))
            return None if c is None else self._info(s, c)

    def candidates_with_key(self, key: str, task: str | None = None) -> list[CandidateInfo]:
        """Every candidate with exactly this id (of `task`, if given), by internal id: what
        a file naming candidates by id matches, so that an id of several tasks is seen to
        be ambiguous instead of one of them being taken."""
        with self._ro() as s:
            q = select(m.Candidate).where(m.Candidate.key == key)
            if task is not None:
                q = q.join(m.Task, m.Task.id == m.Candidate.task_id).where(m.Task.name == task)
            return [self._info(s, c) for c in s.scalars(q.order_by(m.Candidate.id))]

    def find_by_path(self, path: str, task: str) -> CandidateInfo | None:
        with self._ro() as s:
            q = (
                select(m.Candidate)
                .join(m.Spectrum, m.Spectrum.id == m.Candidate.spectrum_id)
                .join(m.Task, m.Task.id == m.Candidate.task_id)
                .where(m.Spectrum.path == path, m.Task.name == task)
                .order_by(m.Candidate.id)
                .limit(1)
            )
            c = s.scalars(q).first()
            return None if c is None else self._info(s, c)

    def _filtered(self, s: Session, q, filters: Filters | None):
        if filters is None:
            return q
        if filters.task is not None:
            q = q.where(m.Candidate.task_id == self._task_id(s, filters.task, create=False))
        if filters.confidence_min is not None:
            q = q.where(m.Candidate.confidence >= filters.confidence_min)
        if filters.confidence_max is not None:
            q = q.where(m.Candidate.confidence <= filters.confidence_max)
        if filters.survey is not None:
            q = q.where(m.Candidate.survey == filters.survey)
        if filters.split is not None:
            q = q.where(m.Candidate.split == filters.split)
        if filters.max_reviews is not None:
            q = q.where(m.Candidate.review_count <= filters.max_reviews)
        if filters.gold is not None:
            q = q.where(m.Candidate.is_gold.is_(filters.gold))
        st = filters.status
        if st == "unreviewed":
            q = q.where(m.Candidate.review_count == 0)
        elif st == "reviewed":
            q = q.where(m.Candidate.review_count > 0)
        elif st == "conflict":
            q = q.where(
                m.Candidate.n_yes > 0, m.Candidate.n_no > 0, m.Candidate.adjudicated_label.is_(None)
            )
        elif st == "flagged":
            q = q.where(m.Candidate.flagged.is_(True))
        elif st is not None:
            raise StoreError(f"unknown status filter {st!r}")
        return q

    def list_candidates(
        self,
        filters: Filters | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        order: str = "priority",
    ) -> list[CandidateInfo]:
        order_by = {"priority": (m.Candidate.priority, m.Candidate.id), "id": (m.Candidate.id,)}[
            order
        ]
        with self._ro() as s:
            try:
                q = self._filtered(s, select(m.Candidate), filters)
            except NotFound:
                return []
            rows = s.scalars(q.order_by(*order_by).limit(limit).offset(offset)).all()
            return [self._info(s, c) for c in rows]

    def count_candidates(self, filters: Filters | None = None) -> int:
        with self._ro() as s:
            try:
                q = self._filtered(s, select(func.count()).select_from(m.Candidate), filters)
            except NotFound:
                return 0
            return int(s.scalar(q))

    def candidate_refs(
        self,
        task: str | None = None,
        *,
        skip_runs: Sequence[int] = (),
        limit: int | None = None,
    ) -> list[CandidateRef]:
        """The candidates (of `task`, else all) in the order they were added, leaving out
        those with a finished record (any state but 'running') from the runs `skip_runs`:
        what a run over the store's own candidates still has to vet. The filter runs in the
        database, so a resumed campaign of millions reads only what is left."""
        C, S, T, R = m.Candidate, m.Spectrum, m.Task, m.Trajectory
        q = (
            select(C.key, T.name, S.path, S.hdu, S.row, C.known_label)
            .join(T, T.id == C.task_id)
            .join(S, S.id == C.spectrum_id)
            .order_by(C.id)
        )
        if task is not None:
            q = q.where(T.name == task)
        if skip_runs:
            done = exists().where(
                and_(R.candidate_id == C.id, R.run_id.in_(list(skip_runs)), R.state != "running")
            )
            q = q.where(~done)
        if limit is not None:
            q = q.limit(max(0, limit))
        with self._ro() as s:
            return [
                CandidateRef(id=key, task=name, path=path, hdu=hdu_out(hdu), row=row, label=label)
                for key, name, path, hdu, row, label in s.execute(q)
            ]

    def load_spectrum(self, candidate_id: int):
        """The candidate's spectrum as the views draw it, read from its file in a limited
        worker (`agent.formats.sandbox`: the file is untrusted, and never parsed in this
        process) and kept in a cache bounded in bytes (`SPECTRA`). A spectrum of up to
        `agent.display.DISPLAY_PIXELS` pixels is the whole of it; a larger one is its
        display copy (`agent.display.display_copy`), every pixel of the windows of the
        candidate's trajectories kept."""
        from agent.display import DISPLAY_PIXELS
        from agent.formats.sandbox import display_spectrum, pool

        info = self.candidate(candidate_id)
        r = info.spectrum_ref
        windows = frozenset(self._windows(candidate_id))
        key = (r["path"], json.dumps(r["hdu"]), r["row"])
        spec = SPECTRA.get(key, windows)
        if spec is None:
            spec = pool().call(r["path"], display_spectrum, r["path"], r["hdu"], r["row"],
                               sorted(windows), DISPLAY_PIXELS)  # fmt: skip
            SPECTRA.put(key, spec, windows)
        return spec.replace(meta=type(spec.meta)(**{**spec.meta.__dict__, "id": info.key}))

    def spectrum_header(self, candidate_id: int) -> tuple[Any, float]:
        """The candidate's spectrum's metadata and redshift, read in a limited worker
        without bringing its arrays here (a VI file's pipeline columns)."""
        from agent.formats.sandbox import pool, spectrum_header

        r = self.candidate(candidate_id).spectrum_ref
        return pool().call(r["path"], spectrum_header, r["path"], r["hdu"], r["row"])

    def _windows(self, candidate_id: int) -> set[tuple[float, float]]:
        """The rest-frame windows the candidate's trajectories zoomed into."""
        out: set[tuple[float, float]] = set()
        with self._ro() as s:
            q = select(m.Trajectory.steps).where(m.Trajectory.candidate_id == candidate_id)
            for steps in s.scalars(q):
                for step in steps or []:
                    w = step.get("window") if isinstance(step, dict) else None
                    if isinstance(w, list | tuple) and len(w) == 2:
                        try:
                            out.add((float(w[0]), float(w[1])))
                        except (TypeError, ValueError):
                            continue
        return out

    def set_gold(self, candidate_id: int, label: str | None, actor: str = "admin") -> None:
        if label is not None and label not in m.LABELS:
            raise StoreError(f"gold label must be YES or NO (got {label!r})")
        with self._tx() as s:
            c = self._get_candidate(s, candidate_id)
            c.is_gold, c.gold_label = label is not None, label
            self._audit(s, actor, "set_gold", "candidate", c.id, {"label": label})

    def set_split(self, candidate_ids: Sequence[int], split: str, actor: str = "admin") -> None:
        if split not in m.SPLITS:
            raise StoreError(f"split must be one of {m.SPLITS} (got {split!r})")
        with self._tx() as s:
            s.execute(
                update(m.Candidate)
                .where(m.Candidate.id.in_(list(candidate_ids)))
                .values(split=split)
            )
            self._audit(
                s,
                actor,
                "set_split",
                "candidate",
                None,
                {"ids": list(candidate_ids), "split": split},
            )

    def _get_candidate(self, s: Session, candidate_id: int, lock: bool = False) -> m.Candidate:
        q = select(m.Candidate).where(m.Candidate.id == candidate_id)
        if lock:
            q = q.with_for_update()
        c = s.scalars(q).first()
        if c is None:
            raise NotFound(f"no candidate #{candidate_id}")
        return c

    def _refresh_candidate(self, s: Session, c: m.Candidate, threshold: float) -> None:
        """Recompute the candidate's denormalised review and queue columns."""
        rows = s.execute(
            select(m.Review.action, m.Review.label).where(m.Review.candidate_id == c.id)
        ).all()
        labels = [r.label for r in rows if r.action in m.LABEL_ACTIONS and r.label in m.LABELS]
        c.n_yes, c.n_no = labels.count("YES"), labels.count("NO")
        c.review_count = len(labels)
        c.flagged = any(r.action == "flag" for r in rows)
        verdicts = set(
            s.scalars(
                select(m.Trajectory.verdict).where(
                    m.Trajectory.candidate_id == c.id, m.Trajectory.verdict.is_not(None)
                )
            )
        )
        c.disagreement = len(verdicts) > 1 or (
            c.verdict is not None and any(lab != c.verdict for lab in labels)
        )
        c.priority = queue_priority(
            self._queue_confidence(s, c),
            # a failed run (unreadable file, backend error) gives a human nothing to judge
            vetted=c.trajectory_id is not None
            and getattr(s.get(m.Trajectory, c.trajectory_id), "state", "error") in VETTED,
            disagreement=c.disagreement,
            threshold=threshold,
        )
        label = resolve_label(c.n_yes, c.n_no, c.adjudicated_label)
        if c.adjudicated_label is not None:
            c.label, c.label_source = label, "adjudication"
        elif c.review_count:
            c.label, c.label_source = label, "review"
        elif c.auto:
            c.label, c.label_source = c.verdict, "auto"
        else:
            c.label, c.label_source = None, None
        c.updated = utcnow()


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _conflict(
    ref: CandidateRef, new_hash: str | None, key: str, old_hash: str | None, old_path: str
) -> str | None:
    """Why `ref` is not the spectrum its (id, task) already names in the store (stored as
    reference `key` from `old_path`, file hash `old_hash`), or None when it is."""
    new_key = ref_key(ref.path, ref.hdu, ref.row)
    old_where = key.rsplit("|", 2)
    same_ref = new_key == key or (
        # the same file named another way (relative to another folder, through a link)
        old_where[1:] == new_key.rsplit("|", 2)[1:] and _same_file(ref.path, old_path)
    )
    head = f"id {ref.id!r} (task {ref.task}) points at {ref.location} here"
    if not same_ref:
        stored = old_path + "".join(
            f"[{old_where[1]}]" if n == 1 else f" row {old_where[2]}"
            for n in (1, 2)
            if old_where[n]
        )
        return f"{head} but at {stored} in the store (conflict)"
    if new_hash and old_hash and new_hash != old_hash:
        return (
            f"{head}, whose content ({new_hash[:19]}...) is not the stored file's "
            f"({old_hash[:19]}...): the file changed since it was ingested (conflict)"
        )
    return None


def _check_ref(ref: CandidateRef, info: dict[str, Any], split: str | None) -> str | None:
    if not ref.id or not str(ref.id).strip():
        return "empty candidate id"
    if not ref.task or not str(ref.task).strip():
        return "empty task"
    if not ref.path:
        return "empty spectrum path"
    if ref.label is not None and ref.label not in m.LABELS:
        return f"label must be YES or NO (got {ref.label!r})"
    sp = info.get("split") or split
    if sp is not None and sp not in m.SPLITS:
        return f"split must be one of {m.SPLITS} (got {sp!r})"
    gl = info.get("gold_label")
    if gl is not None and gl not in m.LABELS:
        return f"gold_label must be YES or NO (got {gl!r})"
    for k in ("score", "ra", "dec", "snr"):
        v = info.get(k)
        if v is not None and v != "" and float_or_none(v) is None:
            return f"{k} is not a number ({v!r})"
    return None
