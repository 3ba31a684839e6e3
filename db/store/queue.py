"""The hand-off queue: which candidate an expert is served next, and the leases that
reserve it; also auto-accepting what the agent is sure of.

On PostgreSQL, lease hand-out takes an advisory lock, so two experts never race for one slot.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, exists, func, or_, select, text, update
from sqlalchemy.orm import Session, aliased

from db import models as m
from db.models import utcnow
from db.settings import DEFAULTS
from db.store import tally
from db.store.errors import NotFound, StoreError
from db.store.records import Filters, QueueConfig
from db.store.reviews import labels_by_others


def _held_elsewhere(expert_id: int, holder: str, now: dt.datetime, cid: Any = None) -> Any:
    """A live lease of the expert's on the candidate (`cid`, else the row's) held by another
    of their pages than `holder`."""
    other = aliased(m.Lease)  # not the lease a query around it may join
    return (
        exists()
        .where(
            other.candidate_id == (m.Candidate.id if cid is None else cid),
            other.expert_id == expert_id,
            other.expires > now,
            other.holder != holder,
        )
        .correlate_except(other)
    )


class QueueMixin:
    """Serving items to experts under leases (candidate filters from `CandidatesMixin`)."""

    def next_item(
        self,
        expert: str | int,
        config: QueueConfig | None = None,
        filters: Filters | None = None,
        *,
        gold: bool | None = None,
        exclude: Sequence[int] = (),
        keep: Sequence[int] = (),
        holder: str = "",
    ) -> int | None:
        """Lease and return the id of the next candidate `expert` should review, or None.

        Order: fewest reviews so far (every item gets its first look before second looks),
        then `priority` (closest to the threshold, disagreements first within a band). An
        item is served while its reviews plus other experts' live leases stay under
        `config.overlap`, never to an expert who already reviewed (or skipped) it. Every
        `round(1/gold_rate)`-th item is drawn from the gold set when `gold` is None. An item
        the expert already holds a live lease on is served again first. Items in `exclude`
        (those the expert has just moved past) are not served; an item whose review the
        expert took back ("undo") is served again. The expert's leases on other items end,
        except on those in `keep` (the item they are looking at while the next is drawn).

        Leases are held by a page (`holder`, the browser tab; "" for API callers): what one
        of the expert's pages holds is never served to another of their pages, and only
        this page's other leases end.
        """
        config = config or QueueConfig()
        if config.overlap < 1:
            raise StoreError(f"overlap must be >= 1 (got {config.overlap})")
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            if self.is_postgres:
                s.execute(text("SELECT pg_advisory_xact_lock(7402)"))
            now = utcnow()
            try:
                base = self._filtered(s, select(m.Candidate.id), filters)
            except NotFound:
                return None
            if exclude:
                base = base.where(m.Candidate.id.not_in(list(exclude)))
            base = base.where(~_held_elsewhere(e.id, holder, now))
            held = s.scalar(
                base.join(m.Lease, m.Lease.candidate_id == m.Candidate.id)
                .where(m.Lease.expert_id == e.id, m.Lease.expires > now, m.Lease.holder == holder)
                .order_by(m.Lease.created)
                .limit(1)
            )
            if held is not None and not s.scalar(
                select(
                    exists().where(
                        m.Review.candidate_id == held,
                        m.Review.expert_id == e.id,
                        m.Review.action != "undo",
                    )
                )
            ):
                cid = held
            else:
                if gold is None:
                    period = round(1 / config.gold_rate) if config.gold_rate > 0 else 0
                    gold = bool(period) and (e.review_count % period == period - 1)
                order = [gold, not gold] if config.gold_rate > 0 or gold else [False]
                cid = None
                for g in order:
                    cid = s.scalar(self._queue_query(base, e.id, now, config, g))
                    if cid is not None:
                        break
                if cid is None:
                    return None
            self._lease(s, cid, e.id, now, config.lease_seconds, keep, holder)
            return cid

    def _queue_query(self, base, expert_id: int, now, config: QueueConfig, gold: bool):
        C = m.Candidate
        mine = exists().where(
            m.Review.candidate_id == C.id,
            m.Review.expert_id == expert_id,
            m.Review.action != "undo",
        )
        q = base.where(C.is_gold.is_(gold), C.auto.is_(False), ~mine)
        if not gold:
            others = (
                select(func.count())
                .select_from(m.Lease)
                .where(
                    m.Lease.candidate_id == C.id,
                    m.Lease.expires > now,
                    m.Lease.expert_id != expert_id,
                )
                .scalar_subquery()
            )
            q = q.where(C.review_count < config.overlap, C.review_count + others < config.overlap)
        if config.auto_accept is not None:
            lo, hi = 1.0 - config.auto_accept, config.auto_accept
            q = q.where(or_(C.confidence.is_(None), (C.confidence > lo) & (C.confidence < hi)))
        return q.order_by(C.review_count, C.priority, C.id).limit(1)

    def _lease(
        self,
        s: Session,
        cid: int,
        expert_id: int,
        now,
        seconds: float,
        keep: Sequence[int] | None = (),
        holder: str = "",
    ) -> None:
        """Lease `cid` to the expert's page `holder` (taking it from another of their pages,
        where the caller allowed that). Serving a new item releases the page's other leases
        but those in `keep` (None keeps them all); the expert's other pages keep theirs."""
        expires = now + dt.timedelta(seconds=seconds)
        if keep is not None:
            s.execute(
                delete(m.Lease).where(
                    m.Lease.expert_id == expert_id,
                    m.Lease.holder == holder,
                    m.Lease.candidate_id.not_in([cid, *keep]),
                )
            )
        row = s.scalars(
            select(m.Lease).where(m.Lease.expert_id == expert_id, m.Lease.candidate_id == cid)
        ).first()
        if row is None:
            s.add(m.Lease(candidate_id=cid, expert_id=expert_id, expires=expires, created=now,
                          holder=holder))  # fmt: skip
        else:
            row.expires = expires
            if row.holder != holder:
                row.holder, row.created = holder, now

    def claim(
        self,
        expert: str | int,
        candidate_id: int,
        lease_seconds: float = DEFAULTS.lease_seconds,
        keep: Sequence[int] = (),
        overlap: int | None = None,
        holder: str = "",
    ) -> list[str]:
        """Lease a chosen item (jump-to-id, undo) to the page `holder` whatever others hold
        (another of the expert's pages that held it loses it: its writes are then refused);
        returns the names of other experts holding a live lease on it, so the app can warn.
        The page's other leases end, but those in `keep`. With `overlap`, an item whose
        label slots other experts have filled (and this one has not decided) is shown but
        not leased: a lease is no label slot, and only the queue hands out a gold item past
        its slots, so a jump finds a gold item and any other alike (`hold` refuses both)."""
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            self._get_candidate(s, candidate_id)
            now = utcnow()
            others = list(
                s.scalars(
                    select(m.Expert.name)
                    .join(m.Lease, m.Lease.expert_id == m.Expert.id)
                    .where(
                        m.Lease.candidate_id == candidate_id,
                        m.Lease.expires > now,
                        m.Lease.expert_id != e.id,
                    )
                )
            )
            if overlap is not None and labels_by_others(s, candidate_id, e.id) >= overlap:
                own = s.scalar(
                    select(exists().where(m.Review.candidate_id == candidate_id,
                                          m.Review.expert_id == e.id, m.Review.action != "undo"))
                )  # fmt: skip
                if not own:
                    s.execute(
                        delete(m.Lease).where(
                            m.Lease.expert_id == e.id,
                            m.Lease.holder == holder,
                            m.Lease.candidate_id.not_in([candidate_id, *keep]),
                        )
                    )
                    return others
            self._lease(s, candidate_id, e.id, now, lease_seconds, keep, holder)
            return others

    def hold(
        self,
        expert: str | int,
        candidate_id: int,
        config: QueueConfig | None = None,
        holder: str = "",
    ) -> bool:
        """Whether `expert`'s page `holder` may decide this item now, leasing it to that page
        if so: no other page of theirs holds a live lease on it, and they have reviewed it
        already, or this page holds a live lease on it, or its reviews plus other experts'
        live leases are under `config.overlap` (what the queue would serve). Taken in the
        queue's lock, so two experts (or two pages) never both get the last slot. Renewing a
        live lease leaves the page's others alone; taking a new one ends them."""
        config = config or QueueConfig()
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            if self.is_postgres:
                s.execute(text("SELECT pg_advisory_xact_lock(7402)"))
            c = self._get_candidate(s, candidate_id)
            now = utcnow()
            if s.scalar(select(_held_elsewhere(e.id, holder, now, c.id))):
                return False  # open in another page of theirs
            if s.scalar(
                select(
                    exists().where(
                        m.Review.candidate_id == c.id,
                        m.Review.expert_id == e.id,
                        m.Review.action != "undo",
                    )
                )
            ):
                # their own decision: theirs to look at and revise, in this page only
                self._lease(s, c.id, e.id, now, config.lease_seconds, keep=None, holder=holder)
                return True
            labelled = labels_by_others(s, c.id, e.id)
            full = labelled >= config.overlap
            if not c.is_gold and full:
                return False  # a lease (a jump takes one whatever others hold) is no label slot
            mine = exists().where(
                m.Lease.candidate_id == c.id, m.Lease.expert_id == e.id, m.Lease.expires > now
            )
            if s.scalar(select(mine)):
                # renewed; the item drawn ahead for them keeps its lease too
                self._lease(s, c.id, e.id, now, config.lease_seconds, keep=None, holder=holder)
                return True
            if full:
                # a gold item past its label slots is decided where the queue served it (a
                # live lease), never on a jump: else deciding would tell gold items apart
                return False
            others = s.scalar(
                select(func.count())
                .select_from(m.Lease)
                .where(
                    m.Lease.candidate_id == c.id,
                    m.Lease.expires > now,
                    m.Lease.expert_id != e.id,
                )
            )
            # gold items are served to every expert, as the queue does
            if not c.is_gold and c.review_count + others >= config.overlap:
                return False
            self._lease(s, c.id, e.id, now, config.lease_seconds, holder=holder)
            return True

    def held_elsewhere(self, expert: str | int, candidate_id: int, holder: str = "") -> bool:
        """Whether another page of `expert`'s than `holder` holds a live lease on the item."""
        with self._ro() as s:
            e = self._expert(s, expert)
            return bool(s.scalar(select(_held_elsewhere(e.id, holder, utcnow(), candidate_id))))

    def queue_census(
        self,
        expert: str | int,
        config: QueueConfig | None = None,
        filters: Filters | None = None,
        holder: str = "",
    ) -> dict[str, int]:
        """Why the candidates under `filters` are not served to `expert`'s page `holder`,
        each counted once, in this order: decided by them, reviewed as often as `overlap`
        asks, open in another page of theirs, held by other experts, left to the agent
        (auto-accepted, or at least `auto_accept` sure), audit items not reviewed yet (served
        at the audit's turns); what an empty queue says. A read: leases nothing."""
        config = config or QueueConfig()
        C, L, R = m.Candidate, m.Lease, m.Review
        with self._ro() as s:
            e = self._expert(s, expert)
            now = utcnow()
            try:
                base = self._filtered(s, select(func.count()).select_from(C), filters)
            except NotFound:
                return {"candidates": 0}
            mine = exists().where(R.candidate_id == C.id, R.expert_id == e.id, R.action != "undo")
            enough = (C.review_count >= config.overlap) & C.is_gold.is_(False)
            tabs = _held_elsewhere(e.id, holder, now)
            others = exists().where(L.candidate_id == C.id, L.expires > now, L.expert_id != e.id)
            sure = C.auto.is_(True)
            if config.auto_accept is not None:
                lo, hi = 1.0 - config.auto_accept, config.auto_accept
                sure = sure | (C.confidence <= lo) | (C.confidence >= hi)
            audit = C.audit_inclusion.is_not(None) & (C.review_count == 0)
            out = {"candidates": int(s.scalar(base)), "auto_accept": config.auto_accept or 1.0}
            before: list[Any] = []
            for name, cond in (("decided_by_you", mine), ("enough_reviews", enough),
                               ("other_tabs", tabs), ("other_experts", others),
                               ("audit_waiting", audit), ("auto_accepted", sure)):  # fmt: skip
                q = base.where(cond, *(~b for b in before))
                out[name] = int(s.scalar(q))
                before.append(cond)
            return out

    def release(self, expert: str | int, candidate_id: int | None = None) -> None:
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            q = delete(m.Lease).where(m.Lease.expert_id == e.id)
            if candidate_id is not None:
                q = q.where(m.Lease.candidate_id == candidate_id)
            s.execute(q)

    def leases(self, candidate_id: int | None = None, live: bool = True) -> list[m.Lease]:
        with self._ro() as s:
            q = select(m.Lease)
            if candidate_id is not None:
                q = q.where(m.Lease.candidate_id == candidate_id)
            if live:
                q = q.where(m.Lease.expires > utcnow())
            return list(s.scalars(q.order_by(m.Lease.id)))

    def auto_accept(
        self, min_certainty: float, task: str | None = None, actor: str = "admin"
    ) -> int:
        """Label unreviewed items with the agent's verdict (label_source 'auto') where their
        P(YES) agrees with it at least `min_certainty` sure (a YES at P(YES) >= it, a NO at
        P(YES) <= 1 - it), and take them out of the queue."""
        if not 0.5 <= min_certainty <= 1.0:
            raise StoreError(f"auto-accept certainty must be in [0.5, 1] (got {min_certainty})")
        C = m.Candidate
        with self._tx() as s:
            if self.is_postgres:
                # the rows counted below are the rows updated: no other writer meanwhile
                # (EXCLUSIVE waits for a review that holds its candidate row FOR UPDATE)
                s.execute(text("LOCK TABLE candidate IN EXCLUSIVE MODE"))
            q = (
                update(C)
                .where(
                    C.review_count == 0,
                    C.auto.is_(False),
                    C.is_gold.is_(False),
                    C.verdict.is_not(None),
                    C.confidence.is_not(None),
                    # the verdict and its P(YES) must agree: with several samples a
                    # candidate's verdict (their vote) can sit on the other side of P(YES)
                    or_(
                        (C.verdict == "YES") & (C.confidence >= min_certainty),
                        (C.verdict == "NO") & (C.confidence <= 1.0 - min_certainty),
                    ),
                )
                .values(auto=True, label=C.verdict, label_source="auto")
            )
            if task is not None:
                q = q.where(C.task_id == self._task_id(s, task, create=False))
            # the Dashboard's counts: each one leaves its key for the auto-accepted one
            # (no review, so neither reviewed nor expert-labelled)
            moved = tally.count_candidates(s, self.is_postgres, q.whereclause, -1)
            n = s.execute(q).rowcount
            for tid, k in moved.items():
                tally.add(s, tally.CANDIDATE, (tid, False, True, "", "", -1), k)
            self._audit(
                s,
                actor,
                "auto_accept",
                "candidate",
                None,
                {"min_certainty": min_certainty, "task": task, "count": n},
            )
            return n
