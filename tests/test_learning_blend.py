"""The blend: a learned model weighs what the evidence supports against the plain rules.

A synthetic population where the learned model is genuinely better by a small margin (a
measurement the rules leave out carries a little of the truth) is blended in at a weight
between 0 and 1, and the blend scores better than the rules on new objects; three positive
labels still wait and say why; a population where the measurement carries nothing keeps
the rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent.policies.rules.learned import InspectorModel, TaskModel
from annotate.learning.evidence import blend_task, f1, log_loss
from annotate.learning.fit import Example, fit
from annotate.learning.models import predict, rules_constants

A0, B0 = rules_constants("m_giant")


def _population(objects: int, beta: float, seed: int, per: int = 3, base: float = -1.5):
    """M-giant candidates of `objects` objects, `per` spectra each. The truth: logit
    P(YES) = A0 x + base + beta * tio5 (standardised), one draw per object; the rules read
    x alone (their P(YES) is sigmoid(A0 x + base)), so with beta > 0 a learned model that
    also reads tio5 is better, by a margin beta sets."""
    rng = np.random.default_rng(seed)
    out = []
    for o in range(objects):
        x0, f0 = rng.normal(0.0, 1.6), rng.normal(0.0, 1.0)
        y = rng.random() < 1 / (1 + math.exp(-(A0 * x0 + base + beta * f0)))
        for _ in range(per):
            x = x0 + rng.normal(0, 0.15)
            m = {"tio5": 0.5 + 0.1 * (f0 + rng.normal(0, 0.1)), "snr": float(rng.uniform(8, 30))}
            p = 1 / (1 + math.exp(-(A0 * x + base)))
            out.append(Example("m_giant", bool(y), f"s{seed}-{o}", x, p, m))
    return out


def _scores(p: np.ndarray, ex: list[Example]) -> dict[str, float]:
    y = np.array([e.label for e in ex], float)
    return {"log_loss": float(log_loss(p, y).mean()), "f1": f1(p, y)}


def test_a_small_real_gain_is_blended_in_and_holds_on_new_objects():
    train = _population(300, beta=0.9, seed=1)
    tm, rep = blend_task(train, seed=0)
    assert rep["status"] == "blended", rep["why"]
    assert 0.0 < tm.weight < 1.0 and tm.kind in ("combiner", "platt")
    assert tm.labels == len(train) and tm.positives == rep["positives"]
    # the record names the weight and the evidence it rests on
    assert f"weight {tm.weight:.2f}" in rep["why"] and f"from {len(train)} labels" in rep["why"]
    assert rep["blend"]["log_loss"] <= rep["rules"]["log_loss"]
    # out of sample: new objects of the same population
    new = _population(1500, beta=0.9, seed=2)
    rules = _scores(np.array([e.p_rules for e in new]), new)
    blended = _scores(predict(tm, new), new)
    assert blended["log_loss"] < rules["log_loss"] - 0.005, (blended, rules)
    assert blended["f1"] >= rules["f1"], (blended, rules)
    # the learned model alone, at full weight, is what the blend holds back from
    alone = TaskModel(**{**vars(tm), "weight": 1.0})
    assert not np.allclose(predict(alone, new), predict(tm, new))


def test_the_weight_grows_with_the_evidence():
    """The same small gain seen on more objects earns a larger weight."""
    few = blend_task(_population(120, beta=0.9, seed=3), seed=0)[1]
    many = blend_task(_population(600, beta=0.9, seed=3), seed=0)[1]
    assert many["status"] == "blended"
    assert few["weight"] < many["weight"], (few["weight"], many["weight"])


def test_a_measurement_that_carries_nothing_keeps_the_rules():
    tm, rep = blend_task(_population(300, beta=0.0, seed=4), seed=0)
    assert rep["status"] == "rules" and rep["weight"] == 0.0 and tm.kind == "rules"
    assert "gives the" in rep["why"] and "no weight" in rep["why"]


def test_three_positives_still_wait_and_say_why():
    rng = np.random.default_rng(5)
    ex = [Example("s_type", i < 3, f"o{i}", float(rng.normal()), 0.2, {}) for i in range(300)]
    current = TaskModel("platt", a=1.0, b=0.0, weight=0.3)
    tm, rep = blend_task(ex, current)
    assert rep["status"] == "waited" and tm is current
    assert rep["why"].startswith("3 positive labels (needs ")
    model = fit(ex, version=2)
    assert model.tasks["s_type"].kind == "rules"
    assert model.info["cv"]["s_type"]["status"] == "waited"


def test_the_thought_names_the_weight_and_the_labels():
    from agent.policies.rules import Evidence, Reading

    ev = Evidence()
    ev.add(1.0, "TiO bands (TiO5 index 0.40): an M-type star")
    ev.checked = 1
    v = Reading("m_giant", 0.4, ev, {"tio5": 0.4})
    v.x = 0.0
    tm = TaskModel("platt", a=1.0, b=2.0, labels=640, weight=0.5, positives=41, objects=9)
    out = InspectorModel(3, {"m_giant": tm}).apply(v)
    assert out.p_yes == pytest.approx(1 / (1 + math.exp(-(0.5 * math.log(0.4 / 0.6) + 0.5 * 2))))
    assert "inspector-v3 platt moved P(YES) from 0.40" in out.correction
    assert "learned from 640 expert labels (41 YES, from 9 objects)" in out.correction
    assert "weighs 0.50 against the rules' 0.50" in out.correction
