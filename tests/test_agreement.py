"""Agreement statistics against values computed by hand and by brute force."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotate.audit.agreement import (
    Confusion,
    Rating,
    cohen_kappa,
    confusion,
    confusion_by_task,
    fleiss_kappa,
    gold_accuracy,
    handoff_plan,
    kappa_by_task,
    prf,
    reliability_diagram,
)


def test_cohen_textbook_example():
    # 50 items: a YES b YES 20, a YES b NO 5, a NO b YES 10, both NO 15
    # po = 35/50 = 0.7; pa(YES)=0.5, pb(YES)=0.6 -> pe = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.4
    a = ["YES"] * 25 + ["NO"] * 25
    b = ["YES"] * 20 + ["NO"] * 5 + ["YES"] * 10 + ["NO"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(b, a) == pytest.approx(0.4)


def test_cohen_undefined_and_errors():
    assert math.isnan(cohen_kappa([], []))
    assert math.isnan(cohen_kappa(["YES", "YES"], ["YES", "YES"]))
    with pytest.raises(ValueError):
        cohen_kappa(["YES"], ["YES", "NO"])


def test_fleiss_wikipedia_example():
    # The worked example of Fleiss' kappa (10 items, 14 raters, 5 categories) -> 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    items = [[cat for cat, n in enumerate(row) for _ in range(n)] for row in table]
    assert fleiss_kappa(items) == pytest.approx(0.20993, abs=1e-4)


def test_fleiss_equals_scotts_pi_for_two_raters():
    rng = random.Random(3)
    a = [rng.choice(["YES", "NO"]) for _ in range(40)]
    b = [x if rng.random() < 0.8 else rng.choice(["YES", "NO"]) for x in a]
    # Scott's pi: pe from the pooled marginals
    po = sum(x == y for x, y in zip(a, b)) / 40
    p_yes = (a.count("YES") + b.count("YES")) / 80
    pe = p_yes**2 + (1 - p_yes) ** 2
    assert fleiss_kappa(list(zip(a, b))) == pytest.approx((po - pe) / (1 - pe))


def test_fleiss_ignores_single_ratings():
    assert fleiss_kappa([["YES", "YES"], ["NO", "NO"], ["YES"]]) == 1.0
    assert math.isnan(fleiss_kappa([["YES"], ["NO"]]))


def test_kappa_by_task_last_rating_wins_and_tasks_separate():
    rs = [
        Rating("c1", "cv", "ann", "NO"),
        Rating("c1", "cv", "ann", "YES"),  # revised
        Rating("c1", "cv", "bob", "YES"),
        Rating("c2", "cv", "ann", "NO"),
        Rating("c2", "cv", "bob", "NO"),
        Rating("c1", "wd", "ann", "YES"),
        Rating("c1", "wd", "bob", "NO"),
    ]
    out = kappa_by_task(rs, min_shared=1)
    assert set(out) == {"cv", "wd"}
    assert out["cv"].fleiss == 1.0
    assert out["cv"].cohen_pairs[("ann", "bob")] == (1.0, 2)
    assert out["wd"].n_items == 1


def test_gold_accuracy_counts_each_item_once_per_rater():
    rs = [
        Rating("g1", "cv", "ann", "NO"),
        Rating("g1", "cv", "ann", "YES"),
        Rating("g2", "cv", "ann", "YES"),
        Rating("x", "cv", "ann", "YES"),  # not gold
    ]
    s = gold_accuracy(rs, {"g1": "YES", "g2": "NO"})
    assert (s["ann"].n, s["ann"].correct) == (2, 1)
    assert s["ann"].accuracy == 0.5


def test_confusion_and_prf_by_hand():
    pairs = [("YES", "YES")] * 6 + [("YES", "NO")] * 2 + [("NO", "YES")] * 3 + [("NO", "NO")] * 9
    c = confusion(pairs)
    assert (c.tp, c.fp, c.fn, c.tn) == (6, 2, 3, 9)
    assert c.as_matrix() == [[6, 3], [2, 9]]
    p = prf(c)
    assert p.precision == pytest.approx(0.75)
    assert p.recall == pytest.approx(6 / 9)
    assert p.f1 == pytest.approx(2 * 0.75 * (6 / 9) / (0.75 + 6 / 9))
    with pytest.raises(ValueError):
        confusion([("YES", "maybe")])
    assert prf(Confusion(tn=5)).f1 != prf(Confusion(tn=5)).f1  # nan: no positives at all
    assert prf(Confusion(fp=1)).f1 == 0.0
    by = confusion_by_task([("cv", "YES", "YES"), ("wd", None, "YES")])
    assert by["wd"].unanswered == 1 and by["wd"].fn == 1


def _brute_force(conf, labels, target, auto_reject=True):
    """Fewest human reviews over every pair of thresholds taken at observed values."""
    best = None
    yes_ts = [None] + sorted({p for p in conf if p >= 0.5})
    no_ts = [None] + (sorted({p for p in conf if p < 0.5}) if auto_reject else [])
    for ty in yes_ts:
        auto_yes = [lab for p, lab in zip(conf, labels) if ty is not None and p >= ty]
        if auto_yes and auto_yes.count("YES") / len(auto_yes) < target:
            continue
        for tn in no_ts:
            auto_no = [lab for p, lab in zip(conf, labels) if tn is not None and p <= tn]
            if auto_no and auto_no.count("NO") / len(auto_no) < target:
                continue
            human = len(conf) - len(auto_yes) - len(auto_no)
            if best is None or human < best:
                best = human
    return best


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20).map(lambda k: k / 20), st.sampled_from(["YES", "NO"])),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([0.6, 0.8, 0.9, 1.0]),
    st.booleans(),
)
def test_handoff_plan_minimises_human_load(rows, target, auto_reject):
    conf = [p for p, _ in rows]
    labels = [lab for _, lab in rows]
    plan = handoff_plan(conf, labels, target, auto_reject=auto_reject)
    assert plan.n_human == _brute_force(conf, labels, target, auto_reject)
    # what it promises holds on the data
    auto_yes = [
        lab for p, lab in rows if plan.yes_threshold is not None and p >= plan.yes_threshold
    ]
    auto_no = [lab for p, lab in rows if plan.no_threshold is not None and p <= plan.no_threshold]
    assert len(auto_yes) == plan.n_auto_yes and len(auto_no) == plan.n_auto_no
    if auto_yes:
        assert auto_yes.count("YES") / len(auto_yes) >= target
    if auto_no:
        assert auto_no.count("NO") / len(auto_no) >= target
    if not auto_reject:
        assert plan.n_auto_no == 0


def test_handoff_nothing_reaches_target():
    plan = handoff_plan([0.9, 0.8, 0.2], ["NO", "NO", "YES"], target_precision=0.9)
    assert plan.yes_threshold is None and plan.no_threshold is None
    assert plan.n_human == 3 and plan.human_fraction == 1.0


def test_handoff_min_auto_and_validation():
    conf = [0.99, 0.9, 0.8, 0.7]
    labels = ["YES", "NO", "NO", "NO"]
    assert handoff_plan(conf, labels, 0.9, min_auto=1).n_auto_yes == 1
    assert handoff_plan(conf, labels, 0.9, min_auto=2).n_auto_yes == 0
    with pytest.raises(ValueError):
        handoff_plan([1.2], ["YES"])
    with pytest.raises(ValueError):
        handoff_plan([0.5], ["YES"], target_precision=0)


def test_handoff_on_calibrated_agent_reduces_load():
    rng = random.Random(0)
    conf, labels = [], []
    for _ in range(2000):
        p = rng.random()
        conf.append(p)
        labels.append("YES" if rng.random() < p else "NO")
    plan = handoff_plan(conf, labels, target_precision=0.9)
    # a calibrated agent may auto-accept roughly p >= 0.8 and p <= 0.2 at 90% precision
    assert 0.7 < plan.yes_threshold < 0.9
    assert 0.1 < plan.no_threshold < 0.3
    assert 0.4 < plan.human_fraction < 0.8
    assert plan.precision_auto_yes >= 0.9 and plan.precision_auto_no >= 0.9


def test_reliability_diagram_bins_and_edges():
    r = reliability_diagram([0.0, 0.05, 0.5, 1.0, 1.0], ["NO", "NO", "YES", "YES", "NO"], n_bins=4)
    counts = [b.count for b in r.bins]
    assert counts == [2, 0, 1, 2]  # 1.0 lands in the last bin
    assert math.isnan(r.bins[1].yes_rate)
    assert r.bins[3].yes_rate == 0.5
    # ece: bin0 |0 - 0.025|*2, bin2 |1 - 0.5|*1, bin3 |0.5 - 1|*2 -> (0.05 + 0.5 + 1.0) / 5
    assert r.ece == pytest.approx(0.31)
    assert [(b.lo, b.hi) for b in r.bins][0] == (0.0, 0.25)


def test_agreement_by_grade_from_stored_reviews(mem_store):
    from annotate import review as rv
    from annotate.audit.agreement import agreement_by_grade
    from tests.store_factory import seeded

    mem_store.create_expert("ada")
    a, b, c = seeded(mem_store, [0.9, 0.9, 0.2])
    rv.decide(mem_store, "ada", a, "accept", grade=4)
    rv.decide(mem_store, "ada", b, "reject", grade=1)
    rv.decide(mem_store, "ada", c, "skip", grade=2)  # no label: not counted
    records = []
    for r in mem_store.reviews():
        cand = mem_store.candidate(r.candidate_id)
        records.append((r.grade, cand.verdict, r.label, cand.gold_label))
    g = agreement_by_grade(records)
    assert list(g) == [1, 4]
    assert (g[4].n, g[4].agreement) == (1, 1.0) and (g[1].n, g[1].agreement) == (1, 0.0)
