"""The audit's draw and estimates on simulated campaigns: the 95% intervals cover the true
precision and completeness of the YES list in at least 95% of repeated draws; small bands,
re-scoring after the draw and a campaign with nothing audited yet."""

from __future__ import annotations

import numpy as np
import pytest

from annotate.audit.sample import (
    CONFIDENT,
    Decided,
    band_of,
    band_rows,
    draw_audit,
    estimate,
    stratum_name,
    table_rows,
    wilson,
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
        stratum = stratum_name(1, band_of(pi)) if confident else None
        items.append(Decided("wd", float(pi), label, not seen, draws.get(i), stratum))
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
        e = estimate(items)["wd"]
        assert e.precision.n > 0 and e.precision.low is not None
        hit_p += e.precision.low <= precision <= e.precision.high
        hit_c += e.completeness.low <= completeness <= e.completeness.high
        widths.append(e.precision.high - e.precision.low)
    # exact intervals combined conservatively: at least 95% nominal
    assert hit_p / reps >= 0.93
    assert hit_c / reps >= 0.91  # the completeness interval is conservative by design
    # informative, not [0, 1] (unreviewed draws leave fewer audited items)
    assert float(np.mean(widths)) < (0.25 if respond == 1.0 else 0.3)


def test_unweighted_reviewed_items_would_not_cover():
    """The biased figure the audit replaces: precision over what experts reviewed (the
    uncertain items first) misses the YES list's true precision."""
    rng = np.random.default_rng(3)
    naive_hits = hits = 0
    for _ in range(50):
        items, precision, _ = campaign(rng)
        seen = [d for d in items if not d.by_agent and d.inclusion is None and d.p_yes > 0.5]
        rate = np.mean([d.label == "YES" for d in seen])
        low, high = wilson(float(rate), len(seen))
        naive_hits += low <= precision <= high
        e = estimate(items)["wd"]
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
    # cv: 5% of its 261 confident verdicts, all YES (the NO list is empty), spread over
    # the bands by their size (largest remainders)
    assert {k: len(v) for k, v in by.items()} == {
        ("cv", "YES 0.99-1.00"): 9,
        ("cv", "YES 0.90-0.95"): 3,
        ("cv", "YES 0.95-0.99"): 1,  # a stratum of one is always seen
        ("wd", "YES 0.99-1.00"): 1,
    }
    assert {d.inclusion for d in by[("cv", "YES 0.99-1.00")]} == {9 / 200}
    assert by[("cv", "YES 0.95-0.99")][0].inclusion == 1.0
    assert all(max(p[d.id], 1 - p[d.id]) >= CONFIDENT for d in draws if d.task == "cv")
    assert len({d.id for d in draws}) == len(draws)
    # seeded: the same draw again, in the same (random) order
    assert [d.id for d in draw_audit(pop, 0.05, seed=1)] == [d.id for d in draws]


def test_the_yes_list_gets_half_the_audit_whatever_the_no_list_holds():
    """Survey proportions: a YES list a hundredth of the NO list. A draw in proportion would
    audit 3 of the 300 YES verdicts; half the task's audit goes to each list instead, each
    list spread over its bands, and every inclusion probability is the stratum's n/N."""
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.uniform(0.991, 1.0, 200), rng.uniform(0.951, 0.989, 100),
                        rng.uniform(0.0, 0.009, 30000)])  # fmt: skip
    pop = [(i, "m_giant", float(v)) for i, v in enumerate(p)]
    draws = draw_audit(pop, 0.02, seed=0)
    sides = {s: [d for d in draws if d.band.side == s] for s in ("YES", "NO")}
    assert len(sides["YES"]) == 300  # min(300, half of 2% of 30,300 = 303): all of it
    assert len(sides["NO"]) == round(0.02 * 30300) - 300
    assert all(d.inclusion == 1.0 for d in sides["YES"])
    assert {d.inclusion for d in sides["NO"]} == {len(sides["NO"]) / 30000}
    # at 1%, the YES list's 152 draws spread over its two bands as 200:100
    by_band = {}
    for d in draw_audit(pop, 0.01, seed=0):
        by_band.setdefault(str(d.band), []).append(d)
    assert {b: len(v) for b, v in by_band.items()} == {
        "YES 0.99-1.00": 101,
        "YES 0.95-0.99": 51,
        "NO 0.99-1.00": 151,
    }
    assert {d.inclusion for d in by_band["YES 0.99-1.00"]} == {101 / 200}


def test_band_errors_and_ece_carry_their_counts():
    rng = np.random.default_rng(5)
    items, _, _ = campaign(rng)
    e = estimate(items)["wd"]
    yes99 = e.band_errors["1:YES 0.99-1.00"]
    assert yes99.n == sum(1 for d in items if d.audited and band_of(d.p_yes).lo == 0.99
                          and d.p_yes > 0.5)  # fmt: skip
    assert yes99.low <= 0.06 <= yes99.high
    assert e.ece.value is not None and e.ece.low <= e.ece.value <= e.ece.high
    assert e.ece.n == e.audited
    d = e.to_dict()
    assert d["precision"]["n"] == e.precision.n and "1:YES 0.99-1.00" in d["band_errors"]
    rows = band_rows({"wd": e})
    assert (
        len(rows) == len(e.band_errors) and ["wd", "1:YES 0.99-1.00", yes99.n, str(yes99)] in rows
    )
    assert table_rows({"wd": e})[0][4] == f"{e.audited} / {e.drawn}"


def test_without_audit_precision_is_not_claimed():
    items = [Decided("cv", 0.99, "YES", True, stratum="1:YES 0.99-1.00") for _ in range(10)]
    e = estimate(items)["cv"]
    assert e.precision.value is None and e.precision.note == "no audit sample drawn"
    items = [Decided("cv", 0.7, "YES") for _ in range(3)]
    assert estimate(items)["cv"].precision.value == 1.0


YES95 = "1:YES 0.95-0.99"
YES99 = "1:YES 0.99-1.00"


def test_one_audited_error_in_a_small_band_is_not_applied_to_the_whole_band():
    """A band of three: its one audited item is a confident mistake, the two others (listed
    by the agent) are right. One error seen in one item says little about the other two:
    the interval must reach 1 (a Wilson interval said [0, 0.79])."""
    items = [Decided("s_type", 0.97, "NO", False, 1 / 3, YES95)]  # the expert's correction
    items += [Decided("s_type", 0.97, "YES", True, stratum=YES95) for _ in range(2)]
    e = estimate(items)["s_type"]
    assert e.precision.low <= 1.0 <= e.precision.high and e.precision.high == 1.0
    assert e.precision.n == 1
    # and a band of one whose only item was audited wrong: it lists nothing, so the rest of
    # the list (another band, audited right) is not tainted by it
    items = [Decided("s_type", 0.995, "NO", False, 1.0, YES99)]
    items += [Decided("s_type", 0.97, "YES", False, 0.1, YES95)]
    items += [Decided("s_type", 0.97, "YES", True, stratum=YES95) for _ in range(9)]
    e = estimate(items)["s_type"]
    assert e.precision.high == 1.0 and e.precision.value == 1.0 and e.precision.low < 1.0
    assert e.band_errors[YES99].value == 1.0  # the band of one is exactly known: all wrong
    assert e.band_errors[YES99].low == e.band_errors[YES99].high == 1.0


def test_no_interval_has_zero_width_unless_exactly_known():
    items = [Decided("wd", 0.97, "YES", False, 0.5, YES95)]
    items += [Decided("wd", 0.97, "YES", True, stratum=YES95)]
    items += [Decided("wd", 0.01, "NO", False, 0.5, "1:NO 0.99-1.00")]
    items += [Decided("wd", 0.01, "NO", True, stratum="1:NO 0.99-1.00")]
    e = estimate(items)["wd"]
    for est in (e.precision, e.completeness, e.ece, *e.band_errors.values()):
        assert est.value is not None and est.high > est.low, est
    # every member audited: known exactly, and said with a zero-width interval
    items = [Decided("wd", 0.97, "YES", False, 1.0, YES95) for _ in range(3)]
    e = estimate(items)["wd"]
    assert e.band_errors[YES95].low == e.band_errors[YES95].high == 0.0
    assert e.ece.low == e.ece.high == e.ece.value


def test_nothing_audited_estimates_nothing():
    """n = 0: before any audit the figures say why they are missing; completeness is not
    '1.000 [1.000, 1.000] (n=0)' beside 'Nothing audited yet'."""
    pending = [Decided("m_giant", 0.97, None, stratum=YES95) for _ in range(5)]
    pending += [Decided("m_giant", 0.97, None, False, 0.2, YES95)]
    pending += [Decided("m_giant", 0.01, None, stratum="1:NO 0.99-1.00") for _ in range(20)]
    pending += [Decided("m_giant", 0.6, "YES")]  # an expert's YES from the queue
    e = estimate(pending)["m_giant"]
    assert e.audited == 0 and e.drawn == 1
    assert e.completeness.value is None and "close the campaign" in e.completeness.note
    assert e.ece.value is None and e.band_errors[YES95].value is None
    closed = [Decided(d.task, d.p_yes, d.label or ("YES" if d.p_yes > 0.5 else "NO"),
                      d.label is None, d.inclusion, d.stratum) for d in pending]  # fmt: skip
    e = estimate(closed)["m_giant"]
    for est in (e.precision, e.completeness, e.ece):
        assert est.value is None and est.note, est
        assert not str(est).startswith("1.000")
    assert e.precision.low is not None and e.precision.high == 1.0


def test_store_draw_records_inclusion_and_estimates_read_it(each_store):
    from annotate.audit.sample import audit_rate, draw_for_store, store_estimates
    from db.store import StoreError
    from tests.store_factory import seeded

    seeded(each_store, [0.995] * 40 + [0.003] * 60 + [0.6] * 10, task="wd")
    assert each_store.auto_accept(0.9) == 100
    assert audit_rate(each_store) == 0.05
    each_store.set_setting("audit_rate", 0.1)
    draws = draw_for_store(each_store, seed=0)
    # 10% of the 100 confident verdicts, half from each list
    assert sorted(str(d.band) for d in draws) == ["NO 0.99-1.00"] * 5 + ["YES 0.99-1.00"] * 5
    rows = {r.id: r for r in each_store.audit_population("wd")}
    assert {rows[d.id].audit_inclusion for d in draws} == {5 / 40, 5 / 60}
    assert sum(r.audit_inclusion is not None for r in rows.values()) == 10
    # every confident candidate keeps the stratum it had at the draw, drawn or not
    strata = [r.audit_stratum for r in rows.values()]
    assert strata.count("1:YES 0.99-1.00") == 40 and strata.count("1:NO 0.99-1.00") == 60
    assert strata.count(None) == 10  # the unsure ones are in no draw's population
    # no confident candidate is outside a draw: nothing more to draw (a second draw over
    # the same candidates would change the first one's probabilities)
    assert draw_for_store(each_store, seed=1) == []
    assert each_store.mark_audit({draws[0].id: 0.5}) == 0  # keeps the probability it was drawn with
    with pytest.raises(StoreError, match="not in"):
        each_store.mark_audit({draws[0].id: 0.0})
    with pytest.raises(StoreError, match="no candidate #999"):
        each_store.mark_audit({999: 0.5})

    e = store_estimates(each_store)["wd"]
    assert e.drawn == 10 and e.audited == 0 and e.precision.value is None
    each_store.ensure_expert("ada")
    yes = [d for d in draws if d.band.side == "YES"]
    decide(each_store, "ada", yes[0].id, "reject")  # a confident mistake
    for d in yes[1:]:
        decide(each_store, "ada", d.id, "accept")
    e = store_estimates(each_store)["wd"]
    assert (e.yes_list, e.yes_by_expert, e.yes_by_agent, e.audited) == (39, 4, 35, 5)
    assert e.precision.value == pytest.approx((4 + 35 * 0.8) / 39)
    assert e.precision.low < e.precision.value < e.precision.high and e.precision.n == 5
    assert e.completeness.value is None  # no audited NO verdict yet: 5 drawn, none reviewed
    # the aggregated read and the item-by-item one agree
    from annotate.audit.sample import estimate as from_items
    from annotate.audit.sample import store_decided

    assert from_items(store_decided(each_store))["wd"] == e
    each_store.set_setting("audit_rate", 2)
    with pytest.raises(ValueError, match="audit_rate = 2.0 is not in"):
        audit_rate(each_store)


def test_queue_serves_the_audit_sample_among_the_rest(each_store):
    from annotate.audit.sample import draw_for_store, store_estimates
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
    e = store_estimates(each_store)["wd"]
    assert e.audited == 10 and e.precision.value == 1.0 and e.precision.low < 0.9


def test_completeness_when_every_yes_was_decided_by_an_expert():
    """Regression: with no agent-only YES the estimate of their true YES is 0, not NaN."""
    no = "1:NO 0.95-0.99"
    items = [Decided("cv", 0.7, "YES") for _ in range(8)]
    items += [Decided("cv", 0.02, "NO", True, stratum=no) for _ in range(95)]
    items += [Decided("cv", 0.02, "NO", inclusion=0.05, stratum=no) for _ in range(4)]
    items += [Decided("cv", 0.02, "YES", inclusion=0.05, stratum=no)]  # a YES the agent missed
    e = estimate(items)["cv"]
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
    seeded(store, [0.995] * 40 + [0.002] * 20 + [0.3] * 5, task="wd")
    store.auto_accept(0.9)
    store.close()
    run = ["audit", "--db", str(db)]
    assert launch.main([*run, "--draw", "--rate", "0.1", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    # 10% of 60 confident verdicts, half from each list, and the reader is told so
    assert "drew 6 item(s): wd 3 of its 40 YES and 3 of its 20 NO verdicts" in out
    assert "0 / 6" in out and "has no audited item" in out
    assert launch.main([*run, "--draw"]) == 0  # wd has its sample: nothing more is drawn
    assert "drew 0 item(s)" in capsys.readouterr().out
    assert launch.main([*run, "--draw", "--rate", "3"]) == 2
    assert "audit share must be in [0, 1]" in capsys.readouterr().err


def test_an_item_moved_past_does_not_hold_up_the_audit(mem_store):
    from annotate.audit.sample import draw_for_store
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
    with open(tmp_path / "c" / "wd.csv", newline="") as fh:  # its comment lines first
        listed = {r["id"]: r["decided_by"]
                  for r in csv.DictReader(ln for ln in fh if not ln.startswith("#"))}  # fmt: skip
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


def test_rescoring_after_the_draw_keeps_the_design(each_store):
    """Learning re-scores pending candidates after the draw: they move to other bands (some
    to the other verdict) while audited items keep the P(YES) they were reviewed at. Each
    candidate still counts in the stratum it had at the draw, so the estimates stand
    (before, the moved YES sat in a band nobody audited: 'no audited YES verdict yet')."""
    from annotate.audit.sample import accept_confident, draw_for_store, store_estimates
    from tests.store_factory import seeded

    ids = seeded(each_store, [0.995] * 30 + [0.003] * 30 + [0.6] * 5, task="wd")
    each_store.set_setting("audit_rate", 0.2)
    draws = draw_for_store(each_store, seed=0)
    assert each_store.setting("auto_accept") == CONFIDENT  # the first draw's default
    each_store.ensure_expert("ada")
    yes = [d.id for d in draws if d.band.side == "YES"]
    decide(each_store, "ada", yes[0], "reject")
    for cid in [d.id for d in draws if d.id != yes[0]]:
        decide(each_store, "ada", cid, "accept")
    before = {r.id: r.audit_stratum for r in each_store.audit_population("wd")}
    moved = [cid for cid in ids[:30] if cid not in yes]
    p_new = [0.93] * 20 + [0.2] * (len(moved) - 20)  # to another band, some to NO
    assert each_store.adopt_scores(moved, p_new, 1) == len(moved)
    after = {r.id: r.audit_stratum for r in each_store.audit_population("wd")}
    assert after == before  # re-scoring changes verdicts, never the design
    n, _ = accept_confident(each_store, 0.9)
    e = store_estimates(each_store)["wd"]
    assert e.precision.value is not None and e.precision.n == len(yes)
    assert e.yes_by_agent == 20 and e.precision.low < e.precision.value <= e.precision.high
    assert e.completeness.value is not None and e.ece.value is not None
    # a later draw takes only candidates in no draw's population: a new design beside it
    seeded(each_store, [0.995] * 10, task="wd", prefix="new")
    again = draw_for_store(each_store, seed=1)
    assert len(again) == 2
    strata = {r.audit_stratum for r in each_store.audit_population("wd")}
    assert "2:YES 0.99-1.00" in strata and "1:YES 0.99-1.00" in strata


def test_closing_lists_only_verdicts_their_p_yes_agrees_with(each_store):
    """With several samples per candidate, its verdict (their vote) can disagree with its
    P(YES): a YES at P(YES) 0.05 is no sure YES and must not enter the catalogue's list."""
    from sqlalchemy import text

    from annotate.audit.sample import accept_confident
    from tests.store_factory import seeded

    ids = seeded(each_store, [0.05, 0.95, 0.97, 0.02, 0.5], task="wd")
    with each_store.engine.begin() as c:  # the vote went the other way on two of them
        c.execute(text("UPDATE candidate SET verdict = 'YES' WHERE id = :i"), {"i": ids[0]})
        c.execute(text("UPDATE candidate SET verdict = 'NO' WHERE id = :i"), {"i": ids[1]})
    n, sure = accept_confident(each_store, 0.9)
    assert (n, sure) == (2, 0.9)
    got = {r.id: (r.label, r.label_source) for r in each_store.audit_population("wd")}
    assert got[ids[0]] == (None, None) and got[ids[1]] == (None, None)
    assert got[ids[2]] == ("YES", "auto") and got[ids[3]] == ("NO", "auto")


def test_a_figure_known_without_sampling_says_so_rather_than_an_interval_of_nothing():
    from annotate.audit.estimate import StratumCounts, task_figures

    # every YES of the list was decided by an expert; the agent's NO were audited in part
    h = StratumCounts("1:NO 0.99-1.00", members=40, drawn=4, audited=4, audited_yes=0,
                      expert=4, agent_no=36)  # fmt: skip
    e = task_figures("cv", [h], expert_yes_total=4)
    assert str(e.precision) == "1.000 exactly (every YES was decided by an expert)"
    assert "(n=0)" not in str(e.precision)
    assert str(e.completeness).endswith("(n=4) model-assisted")
    assert "exactly" not in str(e.completeness)
