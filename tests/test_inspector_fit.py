"""`launch.py calibrate`: labels in the store -> a versioned inspector model -> vet records it."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from agent.policies.rules.learned import InspectorModel, ModelError, TaskModel, load
from annotate.learning.fit import Example, fit, fit_task
from annotate.vetting.into_store import INSPECTOR_SETTING
from commands import calibrate as calibrate_cli


def _examples(n: int, informative_rules: bool, seed: int = 0) -> list[Example]:
    """m_giant decisions where either the rules' input or one measurement tells the truth."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        y = i % 2 == 0
        x = (2.0 if y else -2.0) + rng.normal(0, 0.5) if informative_rules else rng.normal(0, 1)
        p = 1 / (1 + math.exp(-x))
        na = (0.5 if y else 3.0) + rng.normal(0, 0.3)  # Na I 8190: weak in giants
        out.append(Example("m_giant", y, f"obj{i}", x, p, {"na8190_ew": na, "tio5": 0.5}))
    return out


def test_combiner_switched_on_only_where_it_beats_the_rules():
    tm, rep = fit_task(_examples(80, informative_rules=False), min_labels=50)
    assert rep["chosen"] == "combiner" and tm.kind == "combiner"
    assert rep["combiner"]["log_loss"] < rep["rules"]["log_loss"]
    # Weak Na I must push towards YES for the M-giant task.
    i = tm.features.index("na8190_ew")
    assert tm.weights[i] < 0
    # Where the rules already separate the classes nothing learned is switched on.
    tm2, rep2 = fit_task(_examples(80, informative_rules=True), min_labels=50)
    assert rep2["chosen"] in ("rules", "platt", "isotonic")
    assert rep2[rep2["chosen"]]["f1"] >= rep2["rules"]["f1"]
    # Too few labels for a combiner: calibration is all it may try.
    _, rep3 = fit_task(_examples(30, informative_rules=False), min_labels=50)
    assert "combiner" not in rep3 and "calibration only" in rep3["why"]


def test_model_round_trips_and_bad_files_are_refused(tmp_path):
    model = fit(_examples(80, informative_rules=False), version=3)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(model.to_json()))
    back = load(p)
    assert back.tag == "inspector-v3" and back.tasks["m_giant"].kind == "combiner"
    m = {"na8190_ew": 0.4, "tio5": 0.5}
    assert back.tasks["m_giant"].p_yes(0.0, m, 0.5) > 0.5
    p.write_text(json.dumps({"version": 1, "tasks": {"cv": {"kind": "magic"}}}))
    with pytest.raises(ModelError, match="unknown kind"):
        load(p)
    with pytest.raises(ModelError, match="cannot read"):
        load(tmp_path / "missing.json")


def test_platt_model_changes_p_yes_but_not_the_quoted_evidence():
    from agent.policies.rules import Evidence, Reading

    ev = Evidence()
    ev.add(2.0, "TiO bands (TiO5 index 0.50): an M-type star")
    ev.checked = 1
    v = Reading("m_giant", 0.9, ev, {"tio5": 0.5})
    model = InspectorModel(2, {"m_giant": TaskModel("platt", a=0.1, b=-1.0)})
    out = model.apply(v)
    assert out.p_yes < 0.5 and out.evidence.notes[0].startswith("TiO bands")


def test_a_fitted_model_cannot_undo_the_veto_or_the_noise():
    from agent.policies.rules import Evidence, Reading, inspect
    from agent.policies.rules.calibration import VETO_CAP
    from agent.spectrum import Spectrum

    steep = InspectorModel(4, {"m_giant": TaskModel("platt", a=5.0, b=0.0)})
    ev = Evidence()
    ev.add(3.0, "TiO bands (TiO5 index 0.50): an M-type star")
    ev.checked = 1
    capped = Reading("m_giant", VETO_CAP, ev, {}, capped="a decisive reading speaks against it")
    capped.x = 3.0
    assert steep.apply(capped).p_yes <= VETO_CAP
    # Pure noise (SNR 2): the rules shrink the evidence to the task's prior (not to even
    # odds), and the model reads that.
    from agent.policies.rules.calibration import calibration_input, sigmoid

    rng = np.random.default_rng(0)
    w = np.linspace(3800, 9000, 4000)
    noise = Spectrum(w, 1 + rng.normal(0, 0.5, w.size), ivar=np.full(w.size, 4.0))
    v = inspect(noise, "m_giant")
    assert v.x == pytest.approx(calibration_input(v.evidence.prior, v.evidence.coverage))
    assert v.x < 0
    assert steep.apply(v).p_yes == pytest.approx(sigmoid(5.0 * v.x))


@pytest.mark.slow
def test_calibrate_end_to_end(tmp_path):
    """Store with labels -> calibrate -> vet with the fitted version -> version recorded."""
    from annotate.intake.ingest import ingest
    from commands import vet
    from db.store import Store
    from training.sim.demo import generate_demo

    cat = tmp_path / "demo" / "labels.csv"
    generate_demo(tmp_path / "demo", 3, 5, labels=cat)
    db = tmp_path / "loupe.db"
    store = Store(str(db))
    _, errors = ingest(store, [str(cat)])
    assert not errors
    store.close()

    ns = argparse.Namespace(
        db=str(db), out=str(tmp_path / "models"), min_labels=10, folds=3, seed=0
    )
    assert calibrate_cli.main(ns) == 0
    store = Store(str(db))
    saved = store.setting(INSPECTOR_SETTING)
    assert saved["version"] == 1 and set(saved["tasks"]) >= {"cv", "m_giant", "wd"}
    for t, r in saved["info"]["cv"].items():
        assert r["chosen"] in ("kept", "rules", "platt", "isotonic", "combiner"), t
        assert r["status"] in ("waited", "kept", "adopted", "fell back"), t
    path = saved["path"]
    store.close()
    assert load(path).version == 1

    from annotate.vetting import runner

    p = argparse.ArgumentParser()
    vet.add_arguments(p)
    common = ["--catalog", str(cat), "--policy", "rules", "--db", str(db), "--workers", "1"]
    # The plain rules (--model none), the store's current model (the default) and the file:
    # three set-ups, three runs, none resuming over another's trajectories.
    for i, extra in enumerate((["--model", "none"], [], ["--model", path])):
        args = p.parse_args([*common, *extra, "--no-progress", "--out", str(tmp_path / f"{i}.j")])
        assert vet.main(args) == 0
    assert runner.policy_kwargs(args) == {"model": path}

    store = Store(str(db))
    runs = store.runs()
    assert {r.model for r in runs} == {None, "inspector-v1", path}
    assert len({r.fingerprint for r in runs}) == 3
    n = len(store.done_keys(run_id=runs[0].id))
    assert n and all(len(store.done_keys(run_id=r.id)) == n for r in runs)
    for r in runs:
        assert r.params.get("inspector_version") == (None if r.model is None else 1)
    cands = store.labelled_candidates() or [
        store.candidate(i) for i in store.reference_labelled_ids()
    ]
    recs = [rec for c in cands for _, rec in store.trajectories(c.id) if rec.model is not None]
    assert recs and all(r.steps[-1].measurements.get("inspector_version") == 1.0 for r in recs)
    plain = [rec for c in cands for _, rec in store.trajectories(c.id) if rec.model is None]
    assert plain and all("inspector_version" not in r.steps[-1].measurements for r in plain)
    store.close()

    # A second fit is a new version; the first stays on disk for the runs that used it.
    assert calibrate_cli.main(ns) == 0
    store = Store(str(db))
    assert store.setting(INSPECTOR_SETTING)["version"] == 2
    store.close()


def test_a_learned_weighting_is_said_in_the_thought_and_never_contradicts_it():
    """A combiner that leans hard towards YES for every task: the thoughts still quote the
    measurements, say the weighting was learned from N expert labels of version N, and a
    reading quoted against the target holds the answer at even odds (the contradiction
    table holds)."""
    from agent.loop import run_batch
    from agent.policies.rules import RulesPolicy, inspect
    from agent.policies.rules.contradiction import AGAINST, found
    from annotate.learning.models import task_features
    from training.sim.demo import CLASS_BY_NAME, plan, simulate

    tasks = {}
    for t in ("cv", "carbon", "s_type", "m_giant", "wd"):
        f = task_features(t)
        tasks[t] = TaskModel("combiner", a=1.0, b=4.0, features=f, mean=[0.0] * len(f),
                             scale=[1.0] * len(f), weights=[0.0] * len(f), labels=137)  # fmt: skip
    model = InspectorModel(7, tasks, info={"cv": {}})
    items = []
    for k, (sid, cls) in enumerate(plan(2, 5)):
        spec, _ = simulate(cls, (5, k), spec_id=sid)
        items += [(spec, task) for task in CLASS_BY_NAME[cls].tasks]
    trajs = run_batch(items, RulesPolicy(model=model.to_json()))
    held = 0
    for (spec, task), t in zip(items, trajs):
        assert t.state == "done", t.error
        thoughts = " ".join(s.thought for s in t.steps) + " " + t.explanation
        assert not found(task, t.confidence, thoughts), (task, t.confidence)
        v = inspect(spec, task, max_zooms=5)
        moved = "inspector-v7 combiner moved p(yes)" in thoughts.lower()
        assert moved and "the weighting was learned from 137 expert labels" in thoughts
        notes = " ".join(i.note for i in v.evidence.items)
        if any(s in notes for s in AGAINST.get(task, ())) and not v.capped:
            assert t.confidence <= 0.5, (task, t.confidence)
            held += "held at 0.50" in thoughts
        for i in v.evidence.items:  # the measurements the verdict rests on are still quoted
            assert not i.points or i.note in thoughts, i.note
    assert held, "no learned YES was held over a reading quoted against its task"
