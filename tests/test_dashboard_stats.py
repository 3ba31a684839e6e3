"""`Store.dashboard_stats` (aggregated in the database) against the same figures computed
by brute force from every candidate and review, on SQLite and (with LOUPE_TEST_PG_URL) on
PostgreSQL."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from annotate.review import decide
from db.store import Filters, Store
from tests.store_factory import seeded


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    url = (
        f"sqlite:///{tmp_path / 'dash.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    s = Store(url)
    yield s
    s.close()


def fill(store: Store) -> None:
    rng = random.Random(4)
    for e in ("ann", "bob", "cy"):
        store.create_expert(e)
    ids = {
        "cv": seeded(store, [rng.random() for _ in range(60)], task="cv", prefix="v"),
        "wd": seeded(store, [rng.random() for _ in range(40)], task="wd", prefix="w"),
    }
    seeded(store, [0.995, 0.002, 1.0], task="wd", prefix="sure")  # auto-accepted below
    store.set_gold(ids["cv"][0], "YES")
    store.set_gold(ids["wd"][1], "NO")
    for cids in ids.values():
        for k, cid in enumerate(cids):
            for e in ("ann", "bob", "cy")[: 1 + k % 3]:
                if rng.random() < 0.3:
                    continue
                action = rng.choice(["accept", "reject", "correct", "skip", "flag"])
                label = rng.choice(["YES", "NO"]) if action == "correct" else None
                seconds = None if rng.random() < 0.1 else round(rng.uniform(1, 30), 2)
                decide(store, e, cid, action, label=label, seconds=seconds)
    store.auto_accept(0.97)


def test_dashboard_stats_match_brute_force(store):
    fill(store)
    for task in (None, "cv", "wd"):
        st = store.dashboard_stats(task)
        cands = store.list_candidates(Filters(task=task), limit=10_000, order="id")
        by_id = {c.id: c for c in cands}
        reviews = [r for r in store.reviews() if r.candidate_id in by_id]
        names = {e.id: e.name for e in store.experts()}
        assert st.tasks == sorted({c.task for c in cands})
        assert st.total == dict(Counter(c.task for c in cands))
        assert st.reviewed == {t: sum(1 for c in cands if c.task == t and c.review_count)
                               for t in st.tasks}  # fmt: skip
        assert st.auto == {t: sum(1 for c in cands if c.task == t and c.auto and
                                  not c.review_count) for t in st.tasks}  # fmt: skip
        assert sum(st.auto.values()) > 0 if task in (None, "wd") else True
        actions = Counter((by_id[r.candidate_id].task, r.action) for r in reviews)
        assert {(t, a): n for t, d in st.actions.items() for a, n in d.items()} == dict(actions)
        assert st.n_reviews == len(reviews)
        assert st.n_reviewers == len({r.expert_id for r in reviews})
        labelled = [c for c in cands if c.label in ("YES", "NO") and c.label_source != "auto"]
        want = Counter((c.task, c.verdict, c.label) for c in labelled)
        assert {(t, v, lab): n for t, v, lab, n in st.confusion} == dict(want)
        hist = Counter()
        sums: Counter = Counter()
        for c in labelled:
            if c.confidence is not None:
                k = min(int(c.confidence * 1000), 999)
                hist[(k, c.label)] += 1
                sums[(k, c.label)] += c.confidence
        assert {(k, lab): n for k, lab, n, _ in st.confidence_hist} == dict(hist)
        for k, lab, _, sm in st.confidence_hist:
            assert sm == pytest.approx(sums[(k, lab)])
        timed: dict[str, list[float]] = {}
        for r in reviews:
            if r.seconds is not None:
                timed.setdefault(names[r.expert_id], []).append(r.seconds)
        assert set(st.seconds) == set(timed)
        for name, xs in timed.items():
            xs.sort()
            n = len(xs)
            q = st.seconds[name]
            assert q["n"] == n and q["min"] == xs[0] and q["max"] == xs[-1]
            assert q["median"] == xs[(n - 1) // 2]
            assert q["q1"] == xs[(n - 1) // 4] and q["q3"] == xs[3 * (n - 1) // 4]
        every = sorted(s for xs in timed.values() for s in xs)
        assert st.seconds_median == (every[(len(every) - 1) // 2] if every else None)
        multi = {cid for cid, n in Counter(r.candidate_id for r in reviews).items() if n >= 2}
        want_r = [(r.candidate_id, by_id[r.candidate_id].task, names[r.expert_id], r.label)
                  for r in reviews if r.candidate_id in multi and r.label in ("YES", "NO")]  # fmt: skip
        assert sorted(st.ratings) == sorted(want_r)
        gold = {c.id: c.gold_label for c in cands if c.is_gold and c.gold_label}
        want_g = [(r.candidate_id, by_id[r.candidate_id].task, names[r.expert_id], r.label,
                   gold[r.candidate_id]) for r in reviews
                  if r.candidate_id in gold and r.label in ("YES", "NO")]  # fmt: skip
        assert sorted(st.gold) == sorted(want_g)
    assert store.dashboard_stats("no such task").total == {}
