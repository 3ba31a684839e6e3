"""Campaigns as experts run them (`bench/expert_queue.py`): the labels come in the order the
app's own queue serves them, least certain first with the audit's share mixed in, the
schedule refitting as they come, until the queue runs dry; and the learning curve reads
them as it reads random draws."""

from __future__ import annotations

import math

import numpy as np

from annotate.audit.sample import CONFIDENT, audit_turn
from annotate.learning.fit import Example
from bench import expert_queue, learning_curve


def _pool(n: int = 240, seed: int = 0) -> list[Example]:
    """White-dwarf candidates of n // 2 objects: P(YES) spread from sure NO to sure YES."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = float(rng.normal(-1.0, 2.5))
        p = 1 / (1 + math.exp(-x))
        y = bool(rng.random() < 1 / (1 + math.exp(-(x + 0.5))))
        out.append(Example("wd", y, f"o{i // 2}", x, p, {"snr": float(rng.uniform(5, 30))}))
    return out


def test_the_queue_serves_the_least_certain_first_and_the_audit_in_its_turn():
    pool = _pool()
    order = expert_queue.served_order(pool, seed=0, stop=60, learn_every=1000)
    assert len(order) == len(set(order)) == 60
    audit = [k for k in range(60) if audit_turn(k, 0.05)]
    assert audit == [10, 30, 50]
    certainty = [max(pool[i].p_rules, 1 - pool[i].p_rules) for i in order]
    # the audit's items are confident verdicts, drawn at random among them
    assert all(certainty[k] >= CONFIDENT for k in audit)
    rest = [c for k, c in enumerate(certainty) if k not in audit]
    # the others come least certain first (the queue ranks in bands of 0.05 of |P - 0.5|)
    bands = [math.floor((c - 0.5) / 0.05 + 1e-9) for c in rest]
    assert bands == sorted(bands) and rest[0] < 0.6
    # a confident verdict is held out of the queue (only the audit serves one)
    uncertain = sum(max(e.p_rules, 1 - e.p_rules) < CONFIDENT for e in pool)
    assert sum(c < CONFIDENT for c in rest) == min(len(rest), uncertain)


def test_the_queue_runs_dry_and_the_curve_reads_all_it_served():
    pool = _pool(160, seed=1)
    camps = learning_curve.campaigns(pool, (0, 20, 10_000), 2, "queue")
    assert set(camps[20]) == {0, 1} and all(len(c) == 20 for c in camps[20].values())
    assert 10_000 not in camps  # never reached: the queue ran dry first
    end = max(camps)
    uncertain = sum(max(e.p_rules, 1 - e.p_rules) < CONFIDENT for e in pool)
    for camp in camps[end].values():  # the uncertain ones and the audit's share, once each
        assert uncertain < len(camp) < len(pool) and len({id(e) for e in camp}) == len(camp)
