"""The hand-off queue: order, leases, overlap, gold rate, auto-accept, filters, jump-to-id."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import update

from annotate.queue import Filters, Queue, QueueConfig, queue_priority
from annotate.review import decide
from db import models as m
from tests.store_factory import refs, seeded, traj


@pytest.fixture
def store(mem_store):
    for name in ("ada", "bob", "cy"):
        mem_store.create_expert(name)
    return mem_store


def drain(queue: Queue, expert: str, filters=None) -> list[str]:
    """Keys served to `expert`, accepting each, until the queue is empty."""
    out = []
    while (c := queue.next(expert, filters)) is not None:
        out.append(c.key)
        decide(
            queue.store,
            expert,
            c.id,
            "accept" if c.verdict else "correct",
            label=None if c.verdict else "YES",
        )
        assert len(out) < 1000
    return out


def test_priority_function_orders_by_band_then_disagreement():
    ps = [queue_priority(p) for p in (0.5, 0.53, 0.6, 0.9, 0.05)]
    assert ps == sorted(ps[:4]) + [ps[4]] and ps[4] > ps[2]
    assert queue_priority(0.58, disagreement=True) < queue_priority(0.57)
    assert queue_priority(0.3, threshold=0.3) < queue_priority(0.5, threshold=0.3)
    assert queue_priority(None) == queue_priority(0.5)  # unknown confidence: a human must look


def test_queue_reads_the_team_settings_with_defaults_for_the_rest(store):
    assert Queue.from_settings(store).config == QueueConfig(
        overlap=1, gold_rate=0.0, auto_accept=None, lease_seconds=600.0, audit_rate=0.05
    )
    store.set_setting("overlap", 2)
    store.set_setting("auto_accept", 0.97)
    store.set_setting("audit_rate", 0.1)
    assert Queue.from_settings(store).config == QueueConfig(
        overlap=2, gold_rate=0.0, auto_accept=0.97, lease_seconds=600.0, audit_rate=0.1
    )


def test_lowest_confidence_distance_first_then_disagreement(store):
    seeded(store, [0.95, 0.51, 0.2, 0.61, 0.45, 0.63])
    # c5 gets a second policy that disagrees: in the same band as c3, it comes first
    store.record_trajectory(traj("c5", 0.4, policy="hf", model="m"))
    store.add_candidates(refs(1, prefix="u"))  # never vetted: last
    order = drain(Queue(store), "ada")
    assert order == ["c1", "c4", "c5", "c3", "c2", "c0", "u0"]


def test_leases_keep_two_experts_apart_and_expire(store):
    seeded(store, [0.5, 0.6])
    q = Queue(store, QueueConfig(lease_seconds=60))
    a = q.next("ada")
    b = q.next("bob")
    assert a.id != b.id
    assert q.next("cy") is None  # both items leased, overlap 1
    assert q.next("ada").id == a.id  # the held item is served again
    with store._tx() as s:  # ada's lease runs out
        s.execute(
            update(m.Lease)
            .where(m.Lease.candidate_id == a.id)
            .values(expires=m.utcnow() - dt.timedelta(seconds=1))
        )
    assert q.next("cy").id == a.id


def test_overlap_k_serves_each_item_to_k_experts(store):
    seeded(store, [0.5, 0.8])
    q = Queue(store, QueueConfig(overlap=2))
    a, b = q.next("ada"), q.next("bob")
    assert a.id == b.id  # overlap asks for two looks at the same item
    assert q.next("cy").key == "c1"  # a third expert is not given the doubly-leased item
    decide(store, "ada", a.id, "accept")
    c1 = q.next("ada")  # ada has reviewed c0; c1 is leased to cy, but k=2 leaves room
    assert c1.key == "c1"
    assert drain(q, "bob") == ["c0"]  # c1 is leased to two experts: its two looks are under way
    decide(store, "cy", c1.id, "accept")
    decide(store, "ada", c1.id, "reject")
    assert q.next("bob") is None and q.remaining() == 0


def test_first_looks_before_second_looks(store):
    seeded(store, [0.5, 0.9])
    q = Queue(store, QueueConfig(overlap=2))
    assert drain(q, "ada") == ["c0", "c1"]
    # bob gets the lower-priority c1? no: both have one review, so priority decides
    assert q.next("bob").key == "c0"


def test_skip_is_not_served_again_to_the_same_expert(store):
    a, _ = seeded(store, [0.5, 0.9])
    q = Queue(store)
    assert q.next("ada").id == a
    decide(store, "ada", a, "skip")
    assert q.next("ada").key == "c1"
    store.release("ada")
    assert q.next("bob").id == a  # a skip is not a review: someone else still gets it


def test_gold_items_mixed_in_at_the_set_rate(store):
    seeded(store, [0.5 + 0.01 * i for i in range(12)])
    store.add_candidates(refs(4, prefix="g", label="YES"), gold=True)
    for i in range(4):
        store.record_trajectory(traj(f"g{i}", 0.9))
    q = Queue(store, QueueConfig(gold_rate=0.25))
    served = drain(q, "ada")
    assert len(served) == 16
    assert [k for k in served[:8]] == ["c0", "c1", "c2", "g0", "c3", "c4", "c5", "g1"]
    # every expert sees the gold items (they measure each expert); without a rate, none
    assert [k for k in drain(q, "bob") if k.startswith("g")] == ["g0", "g1", "g2", "g3"]
    assert all(not k.startswith("g") for k in drain(Queue(store), "cy"))


def test_auto_accept_threshold(store):
    seeded(store, [0.5, 0.97, 0.02, 0.8])
    q = Queue(store, QueueConfig(auto_accept=0.95))
    assert drain(q, "ada") == ["c0", "c3"]
    n = store.auto_accept(0.95)
    assert n == 2
    c1 = store.find_candidate("c1")
    assert (c1.label, c1.label_source, c1.status) == ("YES", "auto", "auto")
    assert store.find_candidate("c2").label == "NO"
    # auto-accepted items are out of the queue even without the setting
    assert drain(Queue(store, QueueConfig(overlap=2)), "bob") == ["c0", "c3"]


def test_filters_and_jump_to_id(store):
    seeded(store, [0.5, 0.6], task="cv", extra=(("split", "train"),))
    seeded(store, [0.55, 0.9], task="wd", prefix="w", extra=(("split", "test"),))
    q = Queue(store)
    assert drain(q, "ada", Filters(task="wd")) == ["w0", "w1"]
    assert drain(q, "bob", Filters(split="train")) == ["c0", "c1"]
    assert drain(q, "cy", Filters(confidence_min=0.8)) == []  # reviewed by ada already (k=1)
    assert q.next("cy", Filters(task="nope")) is None
    info, others = q.jump("cy", "c1")
    assert info.key == "c1" and others == []
    store.add_candidates(refs(1, prefix="z"))
    store.record_trajectory(traj("z0", 0.5))
    assert q.next("ada").key == "z0"
    assert q.jump("bob", "z0")[1] == ["ada"]  # the app can warn bob that ada holds it
    assert q.jump("bob", "nope") == (None, [])


def test_queue_query_walks_an_index_without_sorting(store):
    seeded(store, [0.5, 0.6])
    from sqlalchemy import select

    now = m.utcnow()
    for f in (None, Filters(task="cv")):
        with store._ro() as s:
            base = store._filtered(s, select(m.Candidate.id), f)
            q = store._queue_query(base, 1, now, QueueConfig(overlap=2), False)
            sql = str(q.compile(store.engine, compile_kwargs={"literal_binds": True}))
            plan = " | ".join(
                r[-1] for r in s.connection().exec_driver_sql("EXPLAIN QUERY PLAN " + sql)
            )
        assert "ix_candidate_queue" in plan and "TEMP B-TREE" not in plan, plan


def test_the_store_and_the_workflow_take_their_defaults_from_the_serve_settings():
    import inspect

    from annotate.team import experts
    from db.settings import DEFAULTS
    from db.store import Store

    def default(fn, name):
        return inspect.signature(fn).parameters[name].default

    assert QueueConfig().lease_seconds == DEFAULTS.lease_seconds == 600.0
    assert default(Store.claim, "lease_seconds") == DEFAULTS.lease_seconds
    assert default(Queue.from_settings, "lease_seconds") == DEFAULTS.lease_seconds
    assert default(Store.login, "ttl_seconds") == DEFAULTS.session_seconds == 12 * 3600
    assert default(experts.login, "ttl_seconds") == DEFAULTS.session_seconds
