"""`Store.dashboard_stats` (aggregated in the database) against the same figures computed
by brute force from every candidate and review, on SQLite and (with LOUPE_TEST_PG_URL) on
PostgreSQL."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlalchemy import select

from annotate.review import decide
from db import models as m
from db.store import Filters, Store, StoreError, tally
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


def assert_matches_brute_force(store: Store, task: str | None) -> None:
    """Every figure of `dashboard_stats(task)` equals the same figure recounted in Python
    from every candidate and review (the sums of P(YES) to float rounding)."""
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
    decided = [r for r in reviews if r.action != "undo"]  # a taken-back review decides nothing
    actions = Counter((by_id[r.candidate_id].task, r.action) for r in decided)
    assert {(t, a): n for t, d in st.actions.items() for a, n in d.items()} == dict(actions)
    assert st.n_reviews == len(decided)
    assert st.n_reviewers == len({r.expert_id for r in decided})
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
        assert sm == pytest.approx(sums[(k, lab)], rel=1e-12, abs=1e-9)
    timed: dict[str, list[float]] = {}
    for r in decided:
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


def test_dashboard_stats_match_brute_force(store):
    fill(store)
    for task in (None, "cv", "wd"):
        assert_matches_brute_force(store, task)
    assert sum(store.dashboard_stats("wd").auto.values()) > 0
    assert store.dashboard_stats("no such task").total == {}


# -- the running counts against a recount, through every write that moves them -----------


def tallies(store: Store) -> tuple[dict, dict]:
    """The counts the store keeps (rows of count 0 left out)."""
    CT, RT = m.CandidateTally, m.ReviewTally
    with store.engine.connect() as c:
        cand = {
            (t, bool(rv), bool(au), lab, v, k): (n, p)
            for t, rv, au, lab, v, k, n, p in c.execute(
                select(
                    CT.task_id, CT.reviewed, CT.auto, CT.label, CT.verdict, CT.bin, CT.n, CT.p_sum
                )  # fmt: skip
            )
            if n or p
        }
        rev = {
            (t, e, a): n
            for t, e, a, n in c.execute(select(RT.task_id, RT.expert_id, RT.action, RT.n))
            if n
        }
    return cand, rev


def recounted(store: Store) -> tuple[dict, dict]:
    """The same counts, recounted from every candidate and review."""
    with store.engine.connect() as c:
        rows = c.execute(tally.candidate_keys(store.is_postgres))
        cand = {key: (n, p) for key, n, p in tally._candidate_rows(rows)}
        rev = {(t, e, a): n for t, e, a, n in c.execute(tally.review_keys())}
    return cand, rev


def assert_counts_exact(store: Store, per_task: bool = True) -> None:
    assert tallies(store) == recounted(store)
    for task in (None, *(store.tasks() if per_task else ())):
        assert_matches_brute_force(store, task)


def random_writes(store: Store, rng: random.Random, steps: int, folder):
    """`steps` writes of every kind that moves a counted figure, drawn at random; yields
    (kind, made) after each (a refused write must change nothing)."""
    from annotate.intake.labels import import_labels
    from annotate.review import ReviewError, undo
    from tests.store_factory import refs, traj

    for e, role in (("ann", "expert"), ("bob", "expert"), ("boss", "admin")):
        store.create_expert(e, role=role)
    keys = {"cv": [], "wd": []}
    for t in keys:
        ps = [rng.choice([rng.random(), rng.random(), None, 1.0, 0.0]) for _ in range(8)]
        seeded(store, ps, task=t, prefix=f"{t}-")
        keys[t] += [f"{t}-{i}" for i in range(8)]
    fresh = 0

    def pick():
        t = rng.choice(sorted(keys))
        return t, rng.choice(keys[t])

    def cid(t, key):
        return store.find_candidate(key, t).id

    for step in range(steps):
        kind = rng.choice(["decide", "decide", "decide", "undo", "adjudicate", "auto",
                           "import", "vet", "vet_new", "ingest", "adopt", "gold"])  # fmt: skip
        e = rng.choice(["ann", "bob"])
        try:
            if kind == "decide":  # a first decision or a revision of one
                action = rng.choice(["accept", "reject", "correct", "skip", "flag"])
                label = rng.choice(["YES", "NO"]) if action == "correct" else None
                seconds = rng.choice([None, round(rng.uniform(1, 60), 2)])
                decide(store, e, cid(*pick()), action, label=label, seconds=seconds)
            elif kind == "undo":
                undo(store, e)
            elif kind == "adjudicate":
                store.adjudicate("boss", cid(*pick()), rng.choice(["YES", "NO", None]))
            elif kind == "auto":
                store.auto_accept(rng.uniform(0.6, 1.0), task=rng.choice([None, "cv", "wd"]))
            elif kind == "import":
                path = folder / f"vi{step}.csv"
                rows = [pick() for _ in range(rng.randint(1, 3))]
                path.write_text("id,task,label,seconds\n" + "".join(
                    f"{k},{t},{rng.choice(['YES', 'NO'])},{rng.uniform(1, 9):.2f}\n"
                    for t, k in rows))  # fmt: skip
                import_labels(store, path, e)
            elif kind == "vet":  # another run's trajectory: verdict and P(YES) move
                t, k = pick()
                p = rng.choice([rng.random(), None, 1.0, 0.0005])
                store.record_trajectory(traj(k, p, t, model=f"m{rng.randint(1, 3)}"))
            elif kind == "vet_new":  # a trajectory for a candidate not ingested yet
                t, fresh = rng.choice(sorted(keys)), fresh + 1
                store.record_trajectory(traj(f"new-{fresh}", rng.random(), t))
                keys[t].append(f"new-{fresh}")
            elif kind == "ingest":  # new candidates beside some already there
                t, fresh = rng.choice(sorted(keys)), fresh + 1
                new = refs(2, t, f"in{fresh}-")
                store.add_candidates([*new, *refs(1, t, f"{t}-")])
                keys[t] += [r.id for r in new]
            elif kind == "adopt":  # a fitted version re-scores what is still pending
                ids = [cid(*pick()) for _ in range(4)]
                store.adopt_scores(ids, [rng.random() for _ in ids], version=step + 1)
            elif kind == "gold":
                store.set_gold(cid(*pick()), rng.choice(["YES", "NO", None]))
        except (ReviewError, StoreError, PermissionError):
            yield kind, False
            continue
        yield kind, True


@pytest.mark.parametrize("seed", [0, 1])
def test_counts_stay_exact_through_random_writes(store, seed, tmp_path):
    """Decisions, revisions, undo, skip, flag, corrections, imports, two experts,
    adjudication, auto-accept, re-vetting, ingest and re-scoring, in a random order: after
    each write the kept counts equal a recount, and the Dashboard's figures a brute-force
    recount of every candidate and review."""
    made = set()
    for step, (kind, ok) in enumerate(random_writes(store, random.Random(seed), 90, tmp_path)):
        if ok:
            made.add(kind)
        assert_counts_exact(store, per_task=step % 10 == 9)
    assert len(made) == 10  # every kind of write was made at least once
    st = store.dashboard_stats()
    assert st.n_reviews and st.n_reviewers == 2 and st.confusion and st.auto


def test_migration_fills_the_counts_from_the_rows_there(store, tmp_path):
    """Downgraded below the counts and upgraded again, a store holding every kind of row
    has the counts it kept while writing."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from db.store import MIGRATIONS

    for _ in random_writes(store, random.Random(7), 60, tmp_path):
        pass  # written, not checked on the way
    kept = tallies(store)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    below = ScriptDirectory(str(MIGRATIONS)).get_revision("0010").down_revision
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, below)
    store.migrate()
    assert tallies(store) == kept == recounted(store)
    assert kept[0] and kept[1]


def test_summary_counts_every_expert_who_decided(tmp_path):
    """ "N decisions by M expert(s)": an expert whose decisions carry no seconds on item
    decided too."""
    from app import context
    from app.pages import dashboard as dashboard_page

    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    ids = seeded(store, [0.2, 0.4, 0.6])
    for e in ("ann", "bob"):
        store.create_expert(e)
    decide(store, "ann", ids[0], "accept", seconds=4.0)
    decide(store, "bob", ids[1], "reject")  # no time recorded (an import, an old client)
    decide(store, "bob", ids[2], "skip")
    ctx = context.Context(store=store, data_roots=[tmp_path], export_dir=tmp_path / "exports")
    view = dashboard_page.dashboard(ctx, context.Viewer("ann", "admin"), "all", 0.95)
    assert "**3** decisions by **2** expert(s)" in view.summary
    store.close()


def test_handler_confusions_from_counts_equal_the_per_item_ones(tmp_path):
    """The Dashboard scores each (verdict, label) pair once and counts it n times: the same
    confusions as scoring every item."""
    from annotate.audit import agreement as ag
    from app.pages import dashboard as dashboard_page

    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    fill(store)
    st = store.dashboard_stats()
    items = [(t, v, lab) for t, v, lab, n in st.confusion for _ in range(n)]
    assert {v for _, v, _ in items} >= {"YES", "NO"}
    assert dashboard_page._confusion_by_task(st.confusion) == ag.confusion_by_task(items)
    tot = dashboard_page._sum_confusions(ag.confusion_by_task(items).values())
    assert tot == ag.confusion((v, lab) for _, v, lab in items)
    store.close()


@pytest.mark.timeout(240)  # about 10 s alone on SQLite, 20 s on PostgreSQL
def test_counts_stay_exact_with_writers_at_once(store):
    """Four experts deciding and revising, a re-vetting run, auto-accept and adjudication,
    all at once (on PostgreSQL truly concurrent): no write waits forever on another, and
    the counts equal a recount at the end."""
    from tests.concurrency import run_threads
    from tests.store_factory import traj

    experts = ["e0", "e1", "e2", "e3"]
    for e in experts:
        store.create_expert(e)
    store.create_expert("boss", role="admin")
    ids = seeded(store, [i / 40 for i in range(40)], prefix="k")

    def work(who, seed):
        rng = random.Random(seed)
        for _ in range(25):
            cid = rng.choice(ids)
            if who in experts:
                action = rng.choice(["accept", "reject", "correct", "skip", "flag"])
                label = rng.choice(["YES", "NO"]) if action == "correct" else None
                decide(store, who, cid, action, label=label, seconds=rng.uniform(1, 9))
            elif who == "vet":
                k = ids.index(cid)
                store.record_trajectory(traj(f"k{k}", rng.random(), model="m2"))
            elif who == "auto":
                store.auto_accept(rng.uniform(0.7, 1.0))
            else:
                store.adjudicate("boss", cid, rng.choice(["YES", "NO", None]))

    who = [*experts, "vet", "auto", "boss"]
    run_threads(work, [(w, i) for i, w in enumerate(who)], barrier=True, timeout=200)
    assert_counts_exact(store)
