"""The inspector versions read back from the audit log as a learning curve, and a proposed
version's effect on pending verdicts in words."""

from __future__ import annotations

from agent.policies.rules import task_module
from agent.policies.rules.learned import InspectorModel, TaskModel
from annotate.learning.versions import learning_curve, proposal, versions
from tests.store_factory import seeded, traj


def _model(version: int, n: int, f1: float) -> InspectorModel:
    cv = {"wd": {"n": n, "positives": n // 4, "chosen": "platt",
                 "rules": {"f1": 0.7, "log_loss": 0.5},
                 "platt": {"f1": f1, "log_loss": 0.3}}}  # fmt: skip
    return InspectorModel(version, {"wd": TaskModel("platt", a=-2.0, b=0.0)}, info={"cv": cv})


def test_versions_make_a_learning_curve_and_a_proposal_counts_its_flips(mem_store):
    for v, n, f1 in ((1, 100, 0.75), (2, 200, 0.82)):
        mem_store.set_setting("inspector_model", _model(v, n, f1).to_json())
    mem_store.set_setting("inspector_model", _model(2, 200, 0.84).to_json())  # saved again
    mem_store.set_setting("threshold", 0.5)  # another setting: not a version
    got = versions(mem_store)
    assert [m.tag for m in got] == ["inspector-v1", "inspector-v2"]
    rows = learning_curve(got)  # a version recorded before the blend: its chosen kind's F1
    assert [(r[0], r[2], r[5], r[11]) for r in rows] == [("inspector-v1", 100, "platt", 0.75),
                                                         ("inspector-v2", 200, "platt", 0.84)]  # fmt: skip
    assert rows[1][7] == round(0.84 - 0.7, 3) and rows[1][8] is None  # no interval recorded

    seeded(mem_store, [0.9, 0.2, 0.8], task="wd")
    for k, p in enumerate([0.9, 0.2]):
        t = traj(f"c{k}", p, "wd")
        t.steps[-1].measurements = {"calibration_input": 1.0 if p > 0.5 else -1.0,
                                    "capped": 0.0, "p_rules": p}  # fmt: skip
        mem_store.record_trajectory(t)
    out = proposal(mem_store, got[-1])  # a negative slope turns both stored verdicts
    assert (out["rescored"], out["kept"], out["flips"]) == (2, 1, 2)
    assert out["flips_by_task"] == {"wd": 2}
    ratio = -2.0 / task_module("wd").CALIBRATION[0]
    assert out["in_words"] == [f"wd: the rules' evidence weighs {ratio:.1f}x the rules' default"]
