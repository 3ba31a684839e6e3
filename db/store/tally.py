"""Running counts behind the Dashboard (`CandidateTally`, `ReviewTally`), kept in the
transaction of every write that moves a candidate or a review.

A candidate's or a review's place in the counts (its key) is computed in SQL, by one
expression (`candidate_keys`, `review_keys`), from the row as the database holds it. The
write sessions' flush hooks read the key of each candidate and review the flush touches
just before it (taken away) and just after it (added back), so no ORM write, whatever its
path, can move a counted figure without moving the counts. Writes that bypass the ORM
(`add_candidates`' bulk insert, `auto_accept`'s UPDATE) add their deltas with `add`. The
deltas of a transaction are applied at its end (`apply`, from `Store._tx`) in key order:
on PostgreSQL every writer takes the count rows' locks last and in one order, so two
writers never wait on each other in a circle. `recount` rebuilds both tables from
scratch, for bulk loaders that write with raw SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.orm import Session, sessionmaker

from db import models as m
from db.store.records import DashboardStats

BINS = DashboardStats.CONFIDENCE_BINS
# P(YES) is summed as floor(P(YES) * P_SCALE), an integer: a float sum kept by adding and
# taking away drifts from a recount, an integer one cancels exactly. 10^10 leaves room
# for 9 * 10^8 candidates in one 0.001-wide cell.
P_SCALE = 10**10
CANDIDATE, REVIEW = "candidate_tally", "review_tally"
_DELTAS, _PENDING = "loupe_tally_deltas", "loupe_tally_pending"
_CHUNK = 500


def candidate_keys(postgres: bool, where: Any = None):
    """Per key (task, reviewed, auto, expert label, verdict, bin): how many candidates
    (matching `where`) and the sum of their floor(P(YES) * P_SCALE), as a SELECT."""
    C = m.Candidate
    expert = C.label.in_(m.LABELS) & (C.label_source.is_(None) | (C.label_source != "auto"))
    binned = expert & C.confidence.is_not(None)
    # floor: SQLite's CAST truncates (= floor on [0, 1]), PostgreSQL's rounds
    k = C.confidence * BINS
    k = cast(func.floor(k), Integer) if postgres else cast(k, Integer)
    p = C.confidence * float(P_SCALE)
    p = cast(func.floor(p), BigInteger) if postgres else cast(p, BigInteger)
    q = select(
        C.task_id.label("task_id"),
        case((C.review_count > 0, 1), else_=0).label("reviewed"),
        case((C.auto.is_(True) & (C.review_count == 0), 1), else_=0).label("auto"),
        case((expert, C.label), else_="").label("label"),
        case((expert, func.coalesce(C.verdict, "")), else_="").label("verdict"),
        case((binned, case((C.confidence >= 1.0, BINS - 1), else_=k)), else_=-1).label("bin"),
        case((binned, p), else_=0).label("p"),
    )
    if where is not None:
        q = q.where(where)
    sub = q.subquery()
    cols = [sub.c.task_id, sub.c.reviewed, sub.c.auto, sub.c.label, sub.c.verdict, sub.c.bin]
    return select(*cols, func.count(), func.sum(sub.c.p)).group_by(*cols)


def review_keys(where: Any = None):
    """Per key (task, expert, action): how many reviews (matching `where`), as a SELECT."""
    C, R = m.Candidate, m.Review
    q = select(C.task_id, R.expert_id, R.action, func.count()).join(C, C.id == R.candidate_id)
    if where is not None:
        q = q.where(where)
    return q.group_by(C.task_id, R.expert_id, R.action)


def _candidate_rows(rows: Iterable[Sequence[Any]]) -> Iterable[tuple[tuple, int, int]]:
    for tid, rv, au, lab, v, b, n, p in rows:
        yield (int(tid), bool(rv), bool(au), lab, v, int(b)), int(n), int(p or 0)


def add(s: Session, table: str, key: tuple, n: int, p_sum: int = 0) -> None:
    """Count `n` more (fewer, if negative) under `key` of `table`, when the transaction of
    `s` ends."""
    if n == 0 and p_sum == 0:
        return
    d = s.info.setdefault(_DELTAS, {}).setdefault((table, key), [0, 0])
    d[0] += n
    d[1] += p_sum


def count_candidates(s: Session, postgres: bool, where: Any, sign: int) -> dict[int, int]:
    """Add the candidates matching `where`, each under its key as the database holds it
    now, `sign` times (-1 takes them away); returns how many per task."""
    per_task: dict[int, int] = {}
    for key, n, p in _candidate_rows(s.connection().execute(candidate_keys(postgres, where))):
        add(s, CANDIDATE, key, sign * n, sign * p)
        per_task[key[0]] = per_task.get(key[0], 0) + n
    return per_task


# The statements the flush hooks run, built once (building one costs more than running it).
_IDS = bindparam("ids", expanding=True)
_BY_ID = {
    "candidates": {pg: candidate_keys(pg, m.Candidate.id.in_(_IDS)) for pg in (False, True)},
    "reviews": review_keys(m.Review.id.in_(_IDS)),
    "lock": select(m.Candidate.id)
    .where(m.Candidate.id.in_(_IDS))
    .order_by(m.Candidate.id)
    .with_for_update(),
}


def _count_ids(s: Session, cids: list[int], rids: list[int], sign: int) -> None:
    conn = s.connection()
    postgres = conn.dialect.name == "postgresql"
    for j in range(0, len(cids), _CHUNK):
        ids = {"ids": cids[j : j + _CHUNK]}
        if postgres and sign < 0:
            # What is read here is taken away: it must stay what this transaction
            # overwrites, so the rows are locked (in id order) before they are read.
            # SQLite has one writer at a time.
            conn.execute(_BY_ID["lock"], ids).all()
        for key, n, p in _candidate_rows(conn.execute(_BY_ID["candidates"][postgres], ids)):
            add(s, CANDIDATE, key, sign * n, sign * p)
    for j in range(0, len(rids), _CHUNK):
        for tid, eid, action, n in conn.execute(_BY_ID["reviews"], {"ids": rids[j : j + _CHUNK]}):
            add(s, REVIEW, (int(tid), int(eid), action), sign * int(n))


def _before_flush(s: Session, _ctx: Any, _instances: Any) -> None:
    cids = sorted({o.id for o in chain(s.dirty, s.deleted) if isinstance(o, m.Candidate)})
    rids = sorted({o.id for o in chain(s.dirty, s.deleted) if isinstance(o, m.Review)})
    new = [o for o in s.new if isinstance(o, (m.Candidate, m.Review))]
    if not (cids or rids or new):
        return
    _count_ids(s, cids, rids, -1)  # as they stand before the flush
    s.info[_PENDING] = (cids, rids, new)


def _after_flush(s: Session, _ctx: Any) -> None:
    pending = s.info.pop(_PENDING, None)
    if pending is None:
        return
    cids, rids, new = pending
    cids = sorted({*cids, *(o.id for o in new if isinstance(o, m.Candidate))})
    rids = sorted({*rids, *(o.id for o in new if isinstance(o, m.Review))})
    _count_ids(s, cids, rids, +1)  # as the flush left them (a deleted row is gone)


def install(*makers: sessionmaker) -> None:
    """Keep the counts through the flushes of every session these makers open."""
    from sqlalchemy import event

    for maker in makers:
        event.listen(maker, "before_flush", _before_flush)
        event.listen(maker, "after_flush", _after_flush)


UPSERT = {
    CANDIDATE: text(
        "INSERT INTO candidate_tally (task_id, reviewed, auto, label, verdict, bin, n, p_sum)"
        " VALUES (:task_id, :reviewed, :auto, :label, :verdict, :bin, :n, :p_sum)"
        " ON CONFLICT (task_id, reviewed, auto, label, verdict, bin) DO UPDATE SET"
        " n = candidate_tally.n + excluded.n, p_sum = candidate_tally.p_sum + excluded.p_sum"
    ),
    REVIEW: text(
        "INSERT INTO review_tally (task_id, expert_id, action, n)"
        " VALUES (:task_id, :expert_id, :action, :n)"
        " ON CONFLICT (task_id, expert_id, action) DO UPDATE SET n = review_tally.n + excluded.n"
    ),
}
FIELDS = {
    CANDIDATE: ("task_id", "reviewed", "auto", "label", "verdict", "bin"),
    REVIEW: ("task_id", "expert_id", "action"),
}


def apply(s: Session) -> None:
    """Write the transaction's deltas, in key order (see the module's note)."""
    s.flush()
    deltas = s.info.pop(_DELTAS, None)
    if not deltas:
        return
    conn = s.connection()
    for table in (CANDIDATE, REVIEW):
        rows = [
            {**dict(zip(FIELDS[table], key)), "n": n} | ({"p_sum": p} if table == CANDIDATE else {})
            for (t, key), (n, p) in sorted(deltas.items())
            if t == table and (n or p)
        ]
        if rows:
            conn.execute(UPSERT[table], rows)


def recount(s: Session) -> None:
    """Rebuild both tables from every candidate and review (after a bulk load)."""
    postgres = s.get_bind().dialect.name == "postgresql"
    conn = s.connection()
    if postgres:  # what is counted is what no writer changes meanwhile
        conn.execute(text("LOCK TABLE candidate, review IN EXCLUSIVE MODE"))
    s.info.pop(_DELTAS, None)
    conn.execute(delete(m.CandidateTally))
    conn.execute(delete(m.ReviewTally))
    rows = [
        {**dict(zip(FIELDS[CANDIDATE], key)), "n": n, "p_sum": p}
        for key, n, p in _candidate_rows(conn.execute(candidate_keys(postgres)))
    ]
    if rows:
        conn.execute(insert(m.CandidateTally), rows)
    rows = [
        {"task_id": t, "expert_id": e, "action": a, "n": n}
        for t, e, a, n in conn.execute(review_keys())
    ]
    if rows:
        conn.execute(insert(m.ReviewTally), rows)
