"""The audit's draw and estimates on simulated campaigns: the 95% intervals cover the true
precision and completeness of the YES list in about 95% of repeated draws."""

from __future__ import annotations

import numpy as np
import pytest

from annotate.audit_sample import (
    CONFIDENT,
    Decided,
    band_of,
    band_rows,
    draw_audit,
    estimate,
    table_rows,
    weighted_rate,
)
from annotate.review import decide

# P(truly YES) per certainty band of the agent's verdict: confident YES verdicts hold ~6%
# contaminants (ordinary stars called white dwarfs), confident NO verdicts hide a few YES.
TRUE_YES = {
    ("YES", 0.9): 0.85,
    ("YES", 0.95): 0.92,
    ("YES", 0.99): 0.94,
    ("NO", 0.9): 0.05,
    ("NO", 0.95): 0.02,
    ("NO", 0.99): 0.004,
    ("YES", 0.5): 0.7,
    ("NO", 0.5): 0.3,
}


def campaign(rng: np.random.Generator, n: int = 1000, respond: float = 1.0, share: float = 0.1):
    """One simulated task: agent P(YES), the truth, the audit draw and the final labels."""
    p = np.concatenate(
        [
            rng.uniform(0.9, 1.0, n // 5),  # confident YES
            rng.uniform(0.0, 0.1, 3 * n // 5),  # confident NO
            rng.uniform(0.1, 0.9, n // 5),  # the uncertain ones experts see first
        ]
    )
    rate = np.array([TRUE_YES[(b.side, b.lo)] for b in map(band_of, p.tolist())])
    truth = rng.random(len(p)) < rate
    pop = [(i, "wd", v) for i, v in enumerate(p.tolist())]
    draws = {d.id: d.inclusion for d in draw_audit(pop, share, seed=rng)}
    items, listed_true = [], []
    for i, (pi, t) in enumerate(zip(p.tolist(), truth.tolist())):
        confident = max(pi, 1 - pi) >= CONFIDENT
        seen = not confident or (i in draws and rng.random() < respond)
        label = ("YES" if t else "NO") if seen else ("YES" if pi > 0.5 else "NO")
        items.append(Decided("wd", float(pi), label, not seen, draws.get(i)))
        if label == "YES":
            listed_true.append(t)
    true_yes_all = int(truth.sum())
    precision = float(np.mean(listed_true))
    completeness = sum(listed_true) / true_yes_all
    return items, precision, completeness


@pytest.mark.parametrize("respond", [1.0, 0.7])
def test_intervals_cover_the_true_precision_and_completeness(respond):
    rng = np.random.default_rng(20261201)
    reps = 200
    hit_p = hit_c = 0
    widths = []
    for _ in range(reps):
        items, precision, completeness = campaign(rng, respond=respond)
        e = estimate(items, reps=0)["wd"]
        assert e.precision.n > 0 and e.precision.value is not None
        hit_p += e.precision.low <= precision <= e.precision.high
        hit_c += e.completeness.low <= completeness <= e.completeness.high
        widths.append(e.precision.high - e.precision.low)
    # ~95% nominal; 200 repetitions put a correct interval above 0.91 with near certainty
    assert 0.91 <= hit_p / reps <= 0.995
    assert hit_c / reps >= 0.91  # the completeness interval is conservative by design
    assert float(np.mean(widths)) < 0.25  # informative, not [0, 1]


def test_unweighted_reviewed_items_would_not_cover():
    """The biased figure the audit replaces: precision over what experts reviewed (the
    uncertain items first) misses the YES list's true precision."""
    rng = np.random.default_rng(3)
    naive_hits = hits = 0
    for _ in range(50):
        items, precision, _ = campaign(rng)
        seen = [d for d in items if not d.by_agent and d.inclusion is None and d.p_yes > 0.5]
        naive = weighted_rate([d.label == "YES" for d in seen], [1.0] * len(seen))
        naive_hits += naive.low <= precision <= naive.high
        e = estimate(items, reps=0)["wd"]
        hits += e.precision.low <= precision <= e.precision.high
    assert naive_hits <= 10 and hits >= 43


def test_draw_is_stratified_with_its_inclusion_probabilities():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0.99, 1.0, 200), rng.uniform(0.9, 0.95, 60),
                        rng.uniform(0.2, 0.8, 500), [0.97]])  # fmt: skip
    pop = [(i, "cv", float(v)) for i, v in enumerate(p)] + [(9999, "wd", 0.995)]
    draws = draw_audit(pop, 0.05, seed=1)
    by = {}
    for d in draws:
        by.setdefault((d.task, str(d.band)), []).append(d)
    assert {k: len(v) for k, v in by.items()} == {
        ("cv", "YES 0.99-1.00"): 10,
        ("cv", "YES 0.90-0.95"): 3,
        ("cv", "YES 0.95-0.99"): 1,  # a stratum of one is always seen
        ("wd", "YES 0.99-1.00"): 1,
    }
    assert {d.inclusion for d in by[("cv", "YES 0.99-1.00")]} == {0.05}
    assert by[("cv", "YES 0.95-0.99")][0].inclusion == 1.0
    assert all(max(p[d.id], 1 - p[d.id]) >= CONFIDENT for d in draws if d.task == "cv")
    assert len({d.id for d in draws}) == len(draws)
    # seeded: the same draw again, in the same (random) order
    assert [d.id for d in draw_audit(pop, 0.05, seed=1)] == [d.id for d in draws]


def test_band_errors_and_ece_carry_their_counts():
    rng = np.random.default_rng(5)
    items, _, _ = campaign(rng)
    e = estimate(items, reps=200)["wd"]
    yes99 = e.band_errors["YES 0.99-1.00"]
    assert yes99.n == sum(1 for d in items if d.audited and band_of(d.p_yes).lo == 0.99
                          and d.p_yes > 0.5)  # fmt: skip
    assert yes99.low <= 0.06 <= yes99.high
    assert e.ece.value is not None and e.ece.low <= e.ece.value <= e.ece.high
    assert e.ece.n == e.audited
    d = e.to_dict()
    assert d["precision"]["n"] == e.precision.n and "YES 0.99-1.00" in d["band_errors"]
    rows = band_rows({"wd": e})
    assert len(rows) == len(e.band_errors) and ["wd", "YES 0.99-1.00", yes99.n, str(yes99)] in rows
    assert table_rows({"wd": e})[0][4] == f"{e.audited} / {e.drawn}"


def test_without_audit_precision_is_not_claimed():
    items = [Decided("cv", 0.99, "YES", True) for _ in range(10)]
    e = estimate(items, reps=0)["cv"]
    assert e.precision.value is None and e.precision.note == "no audited YES verdict yet"
    items = [Decided("cv", 0.7, "YES") for _ in range(3)]
    assert estimate(items, reps=0)["cv"].precision.value == 1.0


def test_store_draw_records_inclusion_and_estimates_read_it(each_store):
    from annotate.audit_sample import audit_rate, draw_for_store, store_estimates
    from db.store import StoreError
    from tests.store_factory import seeded

    seeded(each_store, [0.995] * 40 + [0.003] * 60 + [0.6] * 10, task="wd")
    assert each_store.auto_accept(0.9) == 100
    assert audit_rate(each_store) == 0.05
    each_store.set_setting("audit_rate", 0.1)
    draws = draw_for_store(each_store, seed=0)
    assert sorted(str(d.band) for d in draws) == ["NO 0.99-1.00"] * 6 + ["YES 0.99-1.00"] * 4
    rows = {r.id: r for r in each_store.audit_population("wd")}
    assert {rows[d.id].audit_inclusion for d in draws} == {0.1}
    assert sum(r.audit_inclusion is not None for r in rows.values()) == 10
    # a task that has its sample is not drawn again: that would change its probabilities
    assert draw_for_store(each_store, seed=1) == []
    assert each_store.mark_audit({draws[0].id: 0.5}) == 0  # keeps the probability it was drawn with
    with pytest.raises(StoreError, match="not in"):
        each_store.mark_audit({draws[0].id: 0.0})
    with pytest.raises(StoreError, match="no candidate #999"):
        each_store.mark_audit({999: 0.5})

    e = store_estimates(each_store, reps=50)["wd"]
    assert e.drawn == 10 and e.audited == 0 and e.precision.value is None
    each_store.ensure_expert("ada")
    yes = [d for d in draws if d.band.side == "YES"]
    decide(each_store, "ada", yes[0].id, "reject")  # a confident mistake
    for d in yes[1:]:
        decide(each_store, "ada", d.id, "accept")
    e = store_estimates(each_store, reps=50)["wd"]
    assert (e.yes_list, e.yes_by_expert, e.yes_by_agent, e.audited) == (39, 3, 36, 4)
    assert e.precision.value == pytest.approx((3 + 36 * 0.75) / 39)
    assert e.precision.low < e.precision.value < e.precision.high and e.precision.n == 4
    assert e.completeness.value is None  # no audited NO verdict yet: 6 drawn, none reviewed
    each_store.set_setting("audit_rate", 2)
    with pytest.raises(ValueError, match="audit_rate = 2.0 is not in"):
        audit_rate(each_store)


def test_queue_serves_the_audit_sample_among_the_rest(each_store):
    from annotate.audit_sample import draw_for_store, store_estimates
    from annotate.queue import Queue
    from tests.store_factory import seeded

    seeded(each_store, [0.995] * 100 + [0.55] * 30, task="wd")
    assert each_store.auto_accept(0.9) == 100  # out of the queue, unseen but for the audit
    each_store.set_setting("audit_rate", 0.1)
    sample = {d.id for d in draw_for_store(each_store, seed=0)}
    assert len(sample) == 10
    each_store.ensure_expert("ada")
    q = Queue.from_settings(each_store)
    served: list[int] = []
    while (cid := q.next_id("ada")) is not None:
        if len(served) == 15:  # an audit turn: the item stays leased until decided
            assert q.next_id("ada") == cid
        served.append(cid)
        decide(each_store, "ada", cid, "accept")
        assert len(served) <= 40
    assert len(served) == 40 and sample <= set(served)
    turns = [k for k, c in enumerate(served) if c in sample]
    # one in ten while other items last, then the rest of the sample
    assert turns == [5, 15, 25, *range(33, 40)]
    e = store_estimates(each_store, reps=0)["wd"]
    assert e.audited == 10 and e.precision.value == 1.0 and e.precision.low < 0.9


def test_completeness_when_every_yes_was_decided_by_an_expert():
    """Regression: with no agent-only YES the estimate of their true YES is 0, not NaN."""
    items = [Decided("cv", 0.7, "YES") for _ in range(8)]
    items += [Decided("cv", 0.02, "NO", True) for _ in range(95)]
    items += [Decided("cv", 0.02, "NO", inclusion=0.05) for _ in range(4)]
    items += [Decided("cv", 0.02, "YES", inclusion=0.05)]  # a YES the agent missed
    e = estimate(items, reps=0)["cv"]
    assert e.precision.value == 1.0
    # 9 true YES decided, and about 95/5 = 19 hidden among the agent's NO
    assert e.completeness.value == pytest.approx(9 / (9 + 19))
    assert e.completeness.low < e.completeness.value < e.completeness.high


def test_audit_command_draws_once_and_prints_the_figures(tmp_path, capsys):
    import launch
    from db.store import Store
    from tests.store_factory import seeded

    db = tmp_path / "loupe.db"
    store = Store(str(db))
    seeded(store, [0.995] * 40 + [0.3] * 5, task="wd")
    store.auto_accept(0.9)
    store.close()
    run = ["audit", "--db", str(db)]
    assert launch.main([*run, "--draw", "--rate", "0.1", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "drew 4 item(s) for wd" in out and "0 / 4" in out and "no audited YES" in out
    assert launch.main([*run, "--draw"]) == 0  # wd has its sample: nothing more is drawn
    assert "drew 0 item(s)" in capsys.readouterr().out
    assert launch.main([*run, "--draw", "--rate", "3"]) == 2
    assert "audit share must be in [0, 1]" in capsys.readouterr().err


def test_an_item_moved_past_does_not_hold_up_the_audit(mem_store):
    from annotate.audit_sample import draw_for_store
    from tests.store_factory import seeded

    seeded(mem_store, [0.995] * 20 + [0.55] * 3, task="wd")
    mem_store.auto_accept(0.9)
    sample = {d.id for d in draw_for_store(mem_store, 0.1, seed=0)}
    mem_store.ensure_expert("ada")
    shown = mem_store.next_item("ada")  # leased, not decided
    assert shown not in sample
    assert mem_store.next_audit_item("ada", 600) is None  # the item held comes first
    got = mem_store.next_audit_item("ada", 600, exclude=[shown], keep=[shown])
    assert got in sample
    # drawn ahead while `shown` is on screen: its lease stays, as next_item's keep does
    assert [lease.candidate_id for lease in mem_store.leases(shown)] == [shown]
    # another expert gets the other one: a leased audit item is not served twice
    mem_store.ensure_expert("bob")
    assert mem_store.next_audit_item("bob", 600) == (sample - {got}).pop()


def test_auto_accept_closes_the_campaign_into_the_catalogue(tmp_path, capsys):
    """`audit --auto-accept`: sure verdicts nobody reviewed become the agent's labels, so
    the catalogue lists the agent's YES beside the experts' and the audit can weigh them;
    an unsure verdict stays pending and an expert's decision is never overwritten."""
    import csv

    import launch
    from db.store import Store
    from tests.store_factory import seeded

    db = tmp_path / "loupe.db"
    store = Store(str(db))
    ids = seeded(store, [0.995] * 6 + [0.004] * 3 + [0.7, 0.96], task="wd")
    store.ensure_expert("ada")
    decide(store, "ada", ids[-1], "reject", explanation="an A star's narrow lines")
    store.close()
    run = ["audit", "--db", str(db)]
    assert launch.main([*run, "--auto-accept", "--certainty", "0.3"]) == 2
    assert "above 0.5" in capsys.readouterr().err
    assert launch.main([*run, "--auto-accept"]) == 0
    out = capsys.readouterr().out
    assert "9 verdict(s) at least 0.9 sure auto-accepted" in out
    assert launch.main(["export", "catalogue", "--db", str(db), "--out", str(tmp_path / "c")]) == 0
    with open(tmp_path / "c" / "wd.csv", newline="") as fh:
        listed = {r["id"]: r["decided_by"] for r in csv.DictReader(fh)}
    assert sorted(listed) == [f"c{i}" for i in range(6)]  # not c9 (unsure), not c10 (rejected)
    assert set(listed.values()) == {"rules"}
    store = Store(str(db))
    try:
        by_key = {c.key: c for c in store.list_candidates(limit=20)}
        assert by_key["c9"].label is None and by_key["c10"].label == "NO"
        assert {by_key[f"c{i}"].label for i in range(6, 9)} == {"NO"}
    finally:
        store.close()
    assert launch.main([*run, "--auto-accept"]) == 0  # nothing left to take
    assert "0 verdict(s)" in capsys.readouterr().out
