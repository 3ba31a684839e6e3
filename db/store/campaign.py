"""What the campaign's own figures read and write: the audit sample's inclusion
probabilities and the lease that serves its items, the decided population the estimates
weight, the catalogue's rows, the inspector inputs stored with each candidate's trajectory
(for re-scoring and for learning), and the write-back of an adopted inspector version's
P(YES) to the pending candidates."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    bindparam,
    cast,
    exists,
    func,
    literal,
    select,
    text,
    update,
)

from db import models as m
from db.models import utcnow
from db.store.errors import NotFound, StoreError
from db.store.records import Filters
from db.store.rules import queue_priority


@dataclass(frozen=True)
class PopulationRow:
    """One candidate as the audit's estimates see it."""

    id: int
    task: str
    confidence: float | None  # the agent's P(YES) shown for it
    label: str | None  # resolved label (None while pending)
    label_source: str | None  # review / adjudication / auto / ...
    audit_inclusion: float | None
    is_gold: bool
    audit_stratum: str | None = None  # "<draw>:<verdict> <band>" at the draw


class CampaignMixin:
    """Audit sample, catalogue and stored-score reads of a `Store`."""

    def audit_population(self, task: str | None = None) -> list[PopulationRow]:
        """Every candidate with its P(YES), resolved label and audit inclusion, by id."""
        C = m.Candidate
        with self._ro() as s:
            q = select(
                C.id, m.Task.name, C.confidence, C.label, C.label_source,
                C.audit_inclusion, C.is_gold, C.audit_stratum,
            ).join(m.Task, m.Task.id == C.task_id)  # fmt: skip
            if task is not None:
                q = q.where(m.Task.name == task)
            return [PopulationRow(*r) for r in s.execute(q.order_by(C.id))]

    def mark_audit(
        self,
        inclusion: dict[int, float],
        actor: str = "audit",
        strata: dict[int, str] | None = None,
    ) -> int:
        """Put candidates into the audit sample with their inclusion probabilities, and record
        the draw's stratum of every candidate of its population (`strata`, drawn or not), in
        one transaction. A candidate already in a sample keeps the probability it was drawn
        with, and one already in a draw's population its stratum. Returns how many joined."""
        bad = {cid: p for cid, p in inclusion.items() if not 0.0 < float(p) <= 1.0}
        if bad:
            cid, p = next(iter(bad.items()))
            raise StoreError(f"candidate #{cid}: inclusion probability {p} is not in (0, 1]")
        strata = dict(strata or {})
        C = m.Candidate
        with self._tx() as s:
            ids = sorted(set(inclusion) | set(strata))
            known: set[int] = set()
            for j in range(0, len(ids), 500):
                known |= set(s.scalars(select(C.id).where(C.id.in_(ids[j : j + 500]))))
            missing = sorted(set(ids) - known)
            if missing:
                raise StoreError(f"no candidate #{missing[0]} (of {len(missing)} unknown)")
            n = 0
            for cid, p in inclusion.items():
                n += s.execute(
                    update(C)
                    .where(C.id == cid, C.audit_inclusion.is_(None))
                    .values(audit_inclusion=float(p))
                ).rowcount
            by_stratum: dict[str, list[int]] = {}
            for cid, st in strata.items():
                by_stratum.setdefault(str(st), []).append(int(cid))
            for st, members in sorted(by_stratum.items()):
                for j in range(0, len(members), 500):
                    s.execute(
                        update(C)
                        .where(C.id.in_(members[j : j + 500]), C.audit_stratum.is_(None))
                        .values(audit_stratum=st)
                    )
            self._audit(
                s, actor, "audit_draw", "candidate", None,
                {"drawn": n, "population": len(strata),
                 "strata": {k: len(v) for k, v in sorted(by_stratum.items())}},
            )  # fmt: skip
            return n

    def audit_counts(self, task: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Per task, its candidates counted per audit stratum (the fields of
        `annotate.audit.estimate.StratumCounts`, the stratum None last): one GROUP BY over
        the candidate index the estimates read, so reading the audit's figures does not grow
        with what each candidate holds."""
        C = m.Candidate
        # grouped by the index's own columns, in its order: the database streams the index
        # (no sort, no table row read); the groups are few (a stratum has one inclusion)
        cols = (C.task_id, C.audit_stratum, C.label, C.label_source, C.audit_inclusion)
        q = select(
            *cols, func.count(), func.coalesce(func.sum(func.coalesce(C.confidence, 0.5)), 0.0)
        ).group_by(*cols)
        with self._ro() as s:
            names = dict(s.execute(select(m.Task.id, m.Task.name)).tuples().all())
            if task is not None:
                tid = next((i for i, n in names.items() if n == task), None)
                if tid is None:
                    return {}
                q = q.where(C.task_id == tid)
            rows = [
                (tid_, st, "pending" if label is None else "agent" if src == "auto" else "expert",
                 label, int(bool(incl and incl > 0)), n, psum)
                for tid_, st, label, src, incl, n, psum in s.execute(q)
            ]  # fmt: skip
        acc: dict[tuple[str, str | None], dict[str, Any]] = {}
        zero = dict.fromkeys(("members", "drawn", "audited", "audited_yes", "expert",
                              "expert_yes", "agent_yes", "agent_no", "pending"), 0)  # fmt: skip
        sums = dict.fromkeys(("p_sum", "p_agent_yes", "p_agent_no", "p_expert", "p_audited",
                              "p_audited_yes"), 0.0)  # fmt: skip
        for tid, st, k, label, d, n, psum in rows:
            h = acc.setdefault((names[tid], st), {"stratum": st, **zero, **sums})
            n, psum = int(n), float(psum)
            yes = label == "YES"
            h["members"] += n
            h["p_sum"] += psum
            h["drawn"] += n * d
            if k == "expert":
                h["expert"] += n
                h["expert_yes"] += n * yes
                h["p_expert"] += psum
                h["audited"] += n * d
                h["audited_yes"] += n * d * yes
                h["p_audited"] += psum * d
                h["p_audited_yes"] += psum * d * yes
            elif k == "pending":
                h["pending"] += n
            else:
                side = "yes" if label == "YES" else "no"
                h[f"agent_{side}"] += n
                h[f"p_agent_{side}"] += psum
        out: dict[str, list[dict[str, Any]]] = {}
        for (t, _st), h in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1] is None,
                                                              kv[0][1] or "")):  # fmt: skip
            out.setdefault(t, []).append(h)
        return out

    def audited_items(self, task: str | None = None) -> list[tuple[str, str | None, Any, str]]:
        """(task, stratum at the draw, P(YES), the expert's label) of each item of the audit
        sample an expert labelled: the points of the audit's reliability diagram."""
        C = m.Candidate
        # the partial index alone (no task join, no order): a few percent of the candidates
        q = (
            select(C.task_id, C.audit_stratum, C.confidence, C.label)
            .where(C.audit_inclusion.is_not(None), C.audit_inclusion > 0)
            .where(C.label.in_(("YES", "NO")))
            .where(C.label_source.is_(None) | (C.label_source != "auto"))
        )
        with self._ro() as s:
            names = dict(s.execute(select(m.Task.id, m.Task.name)).tuples().all())
            if task is not None:
                tid = next((i for i, n in names.items() if n == task), None)
                if tid is None:
                    return []
                q = q.where(C.task_id == tid)
            return [(names[t], st, p, label) for t, st, p, label in s.execute(q)]

    def next_audit_item(
        self,
        expert: str | int,
        lease_seconds: float,
        filters: Filters | None = None,
        exclude: Sequence[int] = (),
        keep: Sequence[int] = (),
        holder: str = "",
    ) -> int | None:
        """Lease to `expert` (their page `holder`) an item of the audit sample nobody has reviewed yet (auto-accepted
        ones included: that is the point), in an order unrelated to ingest order; None when
        none is left or the expert still holds an item it has not decided, other than those in
        `exclude` (the queue serves that one first). The expert's other leases end, but those
        in `keep`, as `next_item` does."""
        C, L, R = m.Candidate, m.Lease, m.Review
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            if self.is_postgres:
                s.execute(text("SELECT pg_advisory_xact_lock(7402)"))
            now = utcnow()
            try:
                base = self._filtered(s, select(C.id), filters)
            except NotFound:
                return None
            if exclude:  # items the expert has moved past do not hold the queue up
                base = base.where(C.id.not_in(list(exclude)))
            decided = exists().where(
                R.candidate_id == C.id, R.expert_id == e.id, R.action != "undo"
            )
            held = base.join(L, L.candidate_id == C.id).where(
                L.expert_id == e.id, L.expires > now, L.holder == holder, ~decided
            )
            if s.scalar(held.limit(1)) is not None:
                return None
            # another expert's lease, or another page of this expert's
            leased = exists().where(
                L.candidate_id == C.id,
                L.expires > now,
                (L.expert_id != e.id) | (L.holder != holder),
            )
            mine = exists().where(R.candidate_id == C.id, R.expert_id == e.id)
            q = base.where(C.audit_inclusion.is_not(None), C.review_count == 0, ~leased, ~mine)
            # a multiplicative hash of the id: the sample's unreviewed remainder, when the
            # campaign stops, is then a random part of it rather than the latest ingested
            # (in 64 bits: PostgreSQL types the product as the id's 32-bit integer)
            big = cast(C.id, BigInteger) * literal(2654435761, BigInteger)
            cid = s.scalar(q.order_by(big % literal(4294967296, BigInteger), C.id).limit(1))
            if cid is not None:
                self._lease(s, cid, e.id, now, lease_seconds, keep, holder)
            return cid

    def catalogue_rows(self, task: str) -> list[dict[str, Any]]:
        """The task's candidates labelled YES, one dict per candidate, by id: identity,
        position, P(YES), who decided, the experts' grades and redshifts, and the agent's
        run and final-step measurements (its redshift and inspector version ride there;
        `scored_by` is the version that re-scored P(YES) since, if one did)."""
        C, S, Tr, R = m.Candidate, m.Spectrum, m.Trajectory, m.AgentRun
        with self._ro() as s:
            tid = s.scalar(select(m.Task.id).where(m.Task.name == task))
            if tid is None:
                return []
            rows = s.execute(
                select(
                    C.id, C.key, C.object_id, C.survey, S.survey, S.ra, S.dec, C.confidence,
                    C.label_source, C.audit_inclusion, C.is_gold, R.policy, R.model, R.params,
                    Tr.steps, C.scored_by,
                )
                .join(S, S.id == C.spectrum_id)
                .outerjoin(Tr, Tr.id == C.trajectory_id)
                .outerjoin(R, R.id == Tr.run_id)
                .where(C.task_id == tid, C.label == "YES")
                .order_by(C.id)
            ).all()  # fmt: skip
            ids = [r[0] for r in rows]
            reviews: dict[int, list[tuple[int | None, float | None, str]]] = {}
            for j in range(0, len(ids), 500):
                q = (
                    select(m.Review.candidate_id, m.Review.grade, m.Review.redshift, m.Expert.name)
                    .join(m.Expert, m.Expert.id == m.Review.expert_id)
                    .where(m.Review.candidate_id.in_(ids[j : j + 500]), m.Review.label == "YES")
                    .order_by(m.Review.id)
                )
                for cid, grade, z, who in s.execute(q):
                    reviews.setdefault(cid, []).append((grade, z, who))
        out = []
        for (cid, key, oid, survey, sp_survey, ra, dec, p, source, incl, gold, policy,
             model, params, steps, scored_by) in rows:  # fmt: skip
            last = (steps or [{}])[-1] or {}
            out.append(
                {
                    "id": cid,
                    "key": key,
                    "object_id": oid,
                    "survey": survey or sp_survey,
                    "ra": ra,
                    "dec": dec,
                    "p_yes": p,
                    "label_source": source,
                    "audit_inclusion": incl,
                    "is_gold": bool(gold),
                    "policy": policy,
                    "model": model,
                    "params": dict(params or {}),
                    "measurements": dict(last.get("measurements") or {}),
                    "scored_by": scored_by,  # the inspector version that re-scored P(YES)
                    "reviews": reviews.get(cid, []),
                }
            )
        return out

    def stored_scores(
        self, task: str | None = None, keys: Sequence[str] | None = None, *, batch: int = 20000
    ) -> Iterator[tuple[int, str, float | None, dict[str, float]]]:
        """(candidate id, task, P(YES), the final step's measurements) of every pending
        candidate (no label yet) whose shown trajectory is finished, by id, in batches: what
        re-scoring with another inspector version reads instead of rerunning the agent.
        With `keys`, only those measurements are read (the database extracts them; a
        trajectory holds thoughts and every window, many times what a model reads)."""
        C, Tr = m.Candidate, m.Trajectory
        keys = list(dict.fromkeys(keys)) if keys is not None else None
        bad = [k for k in keys or [] if not k.replace("_", "").isalnum()]
        if keys == []:
            raise StoreError("stored_scores: name at least one measurement, or none for all")
        if bad:
            raise StoreError(f"measurement name {bad[0]!r} is not a plain identifier")
        if keys is not None and self.is_postgres:
            last = text("json_build_array(" + ", ".join(
                f"trajectory.steps -> -1 -> 'measurements' -> '{k}'" for k in keys) + ")::text")  # fmt: skip
        elif keys is not None:
            # two paths at least: json_extract of one path returns the bare value, not an array
            last = text("json_extract(trajectory.steps, " + ", ".join(
                f"'$[#-1].measurements.\"{k}\"'" for k in [*keys, *keys[:1]]) + ")")  # fmt: skip
        elif self.is_postgres:
            last = text("(trajectory.steps -> -1 -> 'measurements')::text")
        else:
            last = text("json_extract(trajectory.steps, '$[#-1].measurements')")
        after = 0
        while True:
            with self._ro() as s:
                q = (
                    select(C.id, m.Task.name, C.confidence, last)
                    .join(Tr, Tr.id == C.trajectory_id)
                    .join(m.Task, m.Task.id == C.task_id)
                    .where(C.label.is_(None), Tr.state.in_(("done", "max_turns")), C.id > after)
                    .order_by(C.id)
                    .limit(batch)
                )
                if task is not None:
                    q = q.where(m.Task.name == task)
                rows = s.execute(q).all()
            if not rows:
                return
            for cid, t, p, meas in rows:
                got = json.loads(meas) if meas else {}
                if keys is not None:
                    # an array in `keys` order (SQLite's json_extract of several paths); a
                    # measurement the step lacks comes back null
                    got = {k: v for k, v in zip(keys, got or []) if v is not None}
                yield cid, t, p, got
            after = rows[-1][0]

    def _final_measurements_sql(self):
        if self.is_postgres:
            return text("(trajectory.steps -> -1 -> 'measurements')::text")
        return text("json_extract(trajectory.steps, '$[#-1].measurements')")

    def final_measurements(
        self, ids: Sequence[int], *, batch: int = 500
    ) -> dict[int, dict[str, float]]:
        """Candidate id -> the final-step measurements of its shown trajectory, for those of
        `ids` whose trajectory finished: what the learner reads for a labelled candidate
        instead of measuring its spectrum again."""
        C, Tr = m.Candidate, m.Trajectory
        out: dict[int, dict[str, float]] = {}
        ids = list(ids)
        for j in range(0, len(ids), batch):
            with self._ro() as s:
                q = (
                    select(C.id, self._final_measurements_sql())
                    .join(Tr, Tr.id == C.trajectory_id)
                    .where(C.id.in_(ids[j : j + batch]), Tr.state.in_(("done", "max_turns")))
                )
                for cid, meas in s.execute(q):
                    out[cid] = json.loads(meas) if meas else {}
        return out

    def count_expert_labels(self) -> int:
        """Candidates labelled by an expert's decision (reviews and adjudications): the
        learning schedule counts new labels from this."""
        C = m.Candidate
        with self._ro() as s:
            return int(
                s.scalar(
                    select(func.count())
                    .select_from(C)
                    .where(C.label_source.in_(("review", "adjudication")))
                )
                or 0
            )

    def adopt_scores(
        self,
        ids: Sequence[int],
        p_yes: Sequence[float],
        version: int,
        *,
        setting: tuple[str, Any] | None = None,
        event: dict[str, Any] | None = None,
        actor: str = "learning",
        batch: int = 20000,
    ) -> int:
        """Adopt an inspector version in one transaction: store `setting` (key, value) as
        `set_setting` does, give each still pending candidate of `ids` its new P(YES), the
        verdict it implies (YES above 0.5, as the agent answers), the queue priority that
        follows and `scored_by` = `version`, and record the adoption (`event`, with the
        count written) in the audit log. A candidate labelled since it was read keeps its
        P(YES). Returns how many were written."""
        if len(ids) != len(p_yes):
            raise StoreError(f"adopt_scores: {len(ids)} ids but {len(p_yes)} P(YES) values")
        C = m.Candidate
        T = C.__table__
        now = utcnow()
        with self._tx() as s:
            if setting is not None:
                key, value = setting
                row = s.get(m.Setting, key)
                if row is None:
                    s.add(m.Setting(key=key, value={"value": value}))
                else:
                    row.value = {"value": value}
                    row.updated = now
                self._audit(s, actor, "set", "setting", None, {"key": key, "value": value})
            threshold = self._threshold(s)
            pending = dict(s.execute(select(C.id, C.disagreement).where(C.label.is_(None))).all())
            stmt = (
                update(T)
                .where(T.c.id == bindparam("cid"), T.c.label.is_(None))
                .values(
                    confidence=bindparam("p"),
                    verdict=bindparam("v"),
                    priority=bindparam("pr"),
                    scored_by=int(version),
                    updated=now,
                )
            )
            conn = s.connection()
            n = 0
            rows: list[dict[str, Any]] = []
            for cid, p in zip(ids, p_yes):
                cid, p = int(cid), float(p)
                if cid not in pending:
                    continue
                pr = queue_priority(p, disagreement=bool(pending[cid]), threshold=threshold)
                rows.append({"cid": cid, "p": p, "v": "YES" if p > 0.5 else "NO", "pr": pr})
                if len(rows) >= batch:
                    conn.execute(stmt, rows)
                    n, rows = n + len(rows), []
            if rows:
                conn.execute(stmt, rows)
                n += len(rows)
            self._audit(
                s, actor, "adopt_inspector", "setting", None,
                {**(event or {}), "version": int(version), "rescored": n},
            )  # fmt: skip
            return n
