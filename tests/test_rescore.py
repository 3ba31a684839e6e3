"""Re-scoring from stored values gives the P(YES) rerunning the agent with the new inspector
version gives; the store hands those values back for pending candidates only."""

from __future__ import annotations

import numpy as np
import pytest

from agent.loop import run_batch
from agent.policies.rules import RulesPolicy
from agent.policies.rules.learned import InspectorModel, TaskModel
from annotate.learning.fit import task_features
from annotate.learning.rescore import INPUTS, rescore, rescore_store
from annotate.review import decide
from tests.store_factory import seeded, traj


def _model(seed: int = 0) -> InspectorModel:
    rng = np.random.default_rng(seed)
    feats = task_features("wd")
    return InspectorModel(
        7,
        {
            "cv": TaskModel("platt", a=0.6, b=-0.4),
            "m_giant": TaskModel("isotonic", knots_x=[-3.0, 0.0, 3.0], knots_y=[0.05, 0.4, 0.9]),
            "wd": TaskModel(
                "combiner",
                a=0.8,
                b=0.1,
                features=feats,
                mean=rng.normal(0, 1, len(feats)).tolist(),
                scale=rng.uniform(0.5, 3, len(feats)).tolist(),
                weights=rng.normal(0, 0.7, len(feats)).tolist(),
            ),
        },
    )


@pytest.fixture(scope="module")
def spectra():
    from training.sim.demo import simulate

    items = []
    for k, (cls, task) in enumerate([("wd_da", "wd"), ("a_star", "wd"), ("cv", "cv"),
                                     ("m_dwarf_active", "cv"), ("m_giant", "m_giant"),
                                     ("k_giant", "m_giant"), ("wd_db", "wd")]):  # fmt: skip
        spec, _ = simulate(cls, seed=100 + k, snr=25)
        items.append((spec, task))
    return items


def test_stored_values_give_what_rerunning_the_agent_gives(spectra):
    model = _model()
    plain = run_batch(spectra, RulesPolicy())
    fitted = run_batch(spectra, RulesPolicy(model=model.to_json()))
    rows = []
    for i, t in enumerate(plain):
        meas = t.steps[-1].measurements
        assert all(k in meas for k in INPUTS), t.id
        assert meas["p_rules"] == pytest.approx(t.confidence)
        rows.append((i, t.task, t.confidence, meas))
    r = rescore(model, rows)
    assert r.kept == 0 and sorted(r.ids.tolist()) == list(range(len(spectra)))
    by_id = dict(zip(r.ids.tolist(), r.new.tolist()))
    want = [t.confidence for t in fitted]
    got = [by_id[i] for i in range(len(spectra))]
    assert got == pytest.approx(want, abs=1e-9)
    # the model moved something, so the comparison means something
    assert max(abs(a - b) for a, b in zip(want, [t.confidence for t in plain])) > 0.05
    # a fitted run keeps p_rules: re-scoring its verdicts with the plain rules gives them back
    back = rescore(InspectorModel(8, {}), [(i, t.task, t.confidence, t.steps[-1].measurements)
                                           for i, t in enumerate(fitted)])  # fmt: skip
    got = dict(zip(back.ids.tolist(), back.new.tolist()))
    assert [got[i] for i in range(len(plain))] == pytest.approx([t.confidence for t in plain])


def test_store_hands_back_pending_stored_values_only(each_store):
    stored = {"calibration_input": 1.5, "capped": 0.0, "p_rules": 0.8, "ha_ew": 3.0}
    ids = seeded(each_store, [0.8, 0.3, 0.9], task="cv")
    # the first two get the inspector's stored inputs, the third is an older trajectory
    for k, p in enumerate([0.8, 0.3]):
        t = traj(f"c{k}", p, "cv")
        t.steps[-1].measurements = {**stored, "p_rules": p}
        each_store.record_trajectory(t)
    each_store.ensure_expert("ada")
    decide(each_store, "ada", ids[1], "accept")  # decided: no longer pending
    rows = list(each_store.stored_scores())
    assert [r[0] for r in rows] == [ids[0], ids[2]]
    assert rows[0][3]["calibration_input"] == 1.5 and rows[1][3] == {}
    r = rescore_store(each_store, InspectorModel(2, {"cv": TaskModel("platt", a=-1.0)}))
    assert r.ids.tolist() == [ids[0]] and r.kept == 1 and r.flips == 1
    assert list(each_store.stored_scores("wd")) == []
    some = list(each_store.stored_scores(keys=["calibration_input", "ha_ew", "not_measured"]))
    assert [r[3] for r in some] == [{"calibration_input": 1.5, "ha_ew": 3.0}, {}]
    # batches walk on by id
    assert [x[0] for x in each_store.stored_scores(batch=1)] == [ids[0], ids[2]]


@pytest.mark.slow
def test_bench_rescore_runs_small(capsys):
    from bench import rescore as bench

    assert bench.main(["--n", "300", "--agent-n", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "max difference" in lines[-3] and lines[-1].startswith("rescore_100k_seconds: ")
    float(lines[-1].split(": ")[1])
