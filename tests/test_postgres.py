"""The store on PostgreSQL. Needs a server: set LOUPE_TEST_PG_URL (`.ci/run` starts a
throwaway cluster and sets it), e.g. postgresql+psycopg://postgres@127.0.0.1:54329/loupe_test.
Each test runs in a database of its own, created and dropped here."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from annotate.review import decide
from db.store import QueueConfig, Store, StorePermissionError
from tests.concurrency import run_threads
from tests.store_factory import refs, seeded, traj

pytestmark = pytest.mark.postgres


def head() -> str:
    """The newest migration's revision: what a store opened now is migrated to."""
    from alembic.script import ScriptDirectory

    from db.store import MIGRATIONS

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def test_schema_flow_and_append_only_audit(pg_url):
    store = Store(pg_url)
    assert store.is_postgres
    assert store.add_candidates(refs(5)).added == 5
    assert store.add_candidates(refs(5)).existing == 5  # ON CONFLICT DO NOTHING
    store.create_expert("ada")
    store.create_expert("bob")
    store.create_expert("boss", "admin")
    [cid] = seeded(store, [0.8], prefix="p")
    r = decide(store, "ada", cid, "accept")
    decide(store, "ada", cid, "reject")
    assert [h.action for h in store.review_history(r.id)] == ["accept"]
    with pytest.raises(StorePermissionError):
        store.record_review("bob", cid, "accept", review_id=r.id)
    decide(store, "bob", cid, "accept")
    assert store.candidate(cid).status == "conflict"
    assert store.adjudicate("boss", cid, "YES").label == "YES"
    back = store.trajectory(store.candidate(cid).trajectory_id)
    assert back.steps == traj("p0", 0.8).steps
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as c:
        c.execute(text("DELETE FROM audit_event"))
    store.set_password("ada", "pw")
    token = store.login("ada", "pw")
    assert store.session_expert(token) == "ada"
    store.close()


def test_concurrent_open_migrates_once(pg_url):
    def open_close():
        Store(pg_url).close()

    run_threads(open_close, [()] * 4, timeout=60, barrier=True)
    with create_engine(pg_url).connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).all() == [(head(),)]


def test_eight_experts_at_once(pg_url):
    store = Store(pg_url)
    experts = [f"e{i}" for i in range(8)]
    for e in experts:
        store.create_expert(e)
    seeded(store, [0.3 + 0.005 * i for i in range(80)], prefix="q")
    shared = seeded(store, [0.5] * 5, prefix="s")
    served = {e: [] for e in experts}

    def work(e):
        for cid in shared:
            decide(store, e, cid, "accept")
        while (cid := store.next_item(e, QueueConfig(overlap=1))) is not None:
            served[e].append(cid)
            decide(store, e, cid, "accept")

    run_threads(work, [(e,) for e in experts], barrier=True)
    got = [c for v in served.values() for c in v]
    assert len(got) == len(set(got)) == 80
    for cid in shared:  # the row lock keeps the denormalised counts exact
        assert store.candidate(cid).review_count == 8
    assert len(store.reviews()) == 80 + 5 * 8
    store.close()
