"""The learning schedule: a version is adopted only where grouped cross-validation says it
beats the current one, an adopted version re-scores the pending candidates (the queue
re-ranks) and is recorded in the audit log, the fit runs beside serving, and a failed fit
leaves the current version in place."""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest

from agent.policies.rules.learned import InspectorModel, TaskModel
from annotate.learning import schedule
from annotate.queue import Queue
from annotate.review import decide
from annotate.vetting.into_store import INSPECTOR_SETTING
from db.store import QueueConfig, Store
from tests.store_factory import refs, traj

SOFT = 0.4  # the plain rules' slope here: far too timid, so a refitted slope clearly wins
SHIFT = 1.5  # the true boundary sits at x = SHIFT, not where the rules put it (x = 0)


def _sig(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _campaign(store: Store, labelled: int = 150, pending: int = 40, seed: int = 0):
    """wd candidates whose trajectories store what a model reads; the first `labelled`
    decided by an expert with the true label (truth: x > SHIFT, with noise)."""
    rng = np.random.default_rng(seed)
    n = labelled + pending
    xs = np.concatenate([rng.uniform(-4, 6, labelled), np.linspace(-1.0, 3.0, pending)])
    store.add_candidates(refs(n, "wd", "w"))
    store.ensure_expert("ada")
    ids, truth = [], {}
    for i, x in enumerate(xs):
        p = _sig(SOFT * x)
        t = traj(f"w{i}", p, "wd")
        t.steps[-1].measurements = {"calibration_input": float(x), "capped": 0.0, "p_rules": p}
        store.record_trajectory(t)
        cid = store.find_candidate(f"w{i}", "wd").id
        ids.append(cid)
        truth[cid] = "YES" if x + rng.normal(0, 0.5) > SHIFT else "NO"
    for cid in ids[:labelled]:
        decide(store, "ada", cid, "correct", label=truth[cid])
    return ids, xs


def _events(store: Store, action: str) -> list:
    return [e for e in store.audit_events(entity="setting", limit=1000) if e.action == action]


def test_a_better_version_is_adopted_rescores_pending_and_the_queue_reranks(each_store, tmp_path):
    store = each_store
    ids, xs = _campaign(store)
    pending = ids[150:]
    # before: the rules' P(YES) puts the pending item at x = 0 nearest the threshold
    first = store.next_item("ada", QueueConfig())
    assert abs(xs[ids.index(first)]) < 0.06
    store.release("ada")

    got = schedule.learn(store, tmp_path / "inspector")
    assert got.adopted and got.version == 1 and got.tasks["wd"]["changed"]
    assert got.tasks["wd"]["after"]["log_loss"] < 0.95 * got.tasks["wd"]["before"]["log_loss"]
    model = InspectorModel.from_json(store.setting(INSPECTOR_SETTING))
    assert model.version == 1 and model.tasks["wd"].kind != "rules"
    # every pending candidate re-scored from its stored inputs, by version 1
    assert got.rescored == len(pending)
    tm = model.tasks["wd"]
    for cid in pending:
        c = store.candidate(cid)
        x = xs[ids.index(cid)]
        want = tm.p_yes(x, {}, _sig(SOFT * x))
        assert c.confidence == pytest.approx(want) and c.verdict == ("YES" if want > 0.5 else "NO")
    from sqlalchemy import select

    from db import models as m

    with store.engine.connect() as conn:  # the version that scored each verdict is kept
        by = dict(conn.execute(select(m.Candidate.id, m.Candidate.scored_by)).all())
    assert {by[c] for c in pending} == {1} and {by[c] for c in ids[:150]} == {None}
    # the queue re-ranks: now the item nearest the learned boundary comes first
    first = store.next_item("ada", QueueConfig())
    assert abs(xs[ids.index(first)] - SHIFT) < 0.6
    flips = sum((_sig(SOFT * x) > 0.5) != (tm.p_yes(x, {}, 0) > 0.5) for x in xs[150:])
    assert got.flips == flips > 0
    # the audit log records the adoption: version, CV before/after, re-scored, flips
    [ev] = _events(store, "adopt_inspector")
    p = ev.payload
    assert (p["version"], p["rescored"], p["flips"]) == (1, len(pending), flips)
    assert p["cv"]["wd"]["before"]["kind"] == "rules" and p["cv"]["wd"]["after"]["log_loss"] > 0
    assert schedule.status(store)["adopted"] is True


def test_a_refit_that_moves_nothing_is_not_a_new_version(mem_store, tmp_path):
    """The same labels again: the blend comes out the same, so no version is written, the
    pending candidates keep their scores and the outcome says why."""
    store = mem_store
    ids, xs = _campaign(store)
    first = schedule.learn(store, tmp_path / "inspector")
    assert first.adopted and first.version == 1
    before = {c: store.candidate(c).confidence for c in ids[150:]}

    got = schedule.learn(store, tmp_path / "inspector")
    assert not got.adopted and got.version == 1 and not got.tasks["wd"]["changed"]
    assert "no task's evidence supported a change" in got.why
    assert got.tasks["wd"]["status"] == "blended" and got.tasks["wd"]["model"].startswith("kept")
    assert store.setting(INSPECTOR_SETTING)["version"] == 1  # still the current version
    assert {c: store.candidate(c).confidence for c in ids[150:]} == before
    assert len(_events(store, "adopt_inspector")) == 1
    assert schedule.status(store)["adopted"] is False
    assert not (tmp_path / "inspector" / "inspector-v2.json").exists()


def test_a_current_version_worse_than_the_rules_gives_way(mem_store, tmp_path):
    store = mem_store
    _campaign(store)
    upside_down = InspectorModel(2, {"wd": TaskModel("platt", a=-2.0, b=0.0)})
    store.set_setting(INSPECTOR_SETTING, upside_down.to_json())
    got = schedule.learn(store, tmp_path / "inspector")
    assert got.adopted and got.version == 3
    r = got.tasks["wd"]
    assert r["before"]["log_loss"] > r["after"]["log_loss"] and r["after"]["f1"] > r["before"]["f1"]
    assert store.setting(INSPECTOR_SETTING)["tasks"]["wd"]["a"] > 0


def test_labels_count_towards_a_fit_and_only_with_a_schedule_attached(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        ids, _ = _campaign(store, labelled=20, pending=10)
        assert schedule.status(store) is None  # no schedule attached: labels do nothing
        store.set_setting(schedule.LEARN_EVERY_SETTING, 5)
        lr = schedule.attach(store, tmp_path / "inspector", background=False)
        assert lr.every == 5
        decide(store, "ada", ids[20], "accept")
        seen = schedule.status(store)["expert_labels"]  # 20 labels before it attached: due
        assert seen == 21
        for cid in ids[21:25]:
            decide(store, "ada", cid, "accept")
        assert schedule.status(store)["expert_labels"] == seen  # 4 new: not yet
        decide(store, "ada", ids[25], "skip")  # no label: not counted
        assert schedule.status(store)["expert_labels"] == seen
        decide(store, "ada", ids[25], "reject")
        assert schedule.status(store)["expert_labels"] == seen + 5
    finally:
        store.close()


def test_the_fit_runs_in_a_separate_process_while_the_app_serves(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        ids, _ = _campaign(store, labelled=150, pending=20)
        lr = schedule.attach(store, tmp_path / "inspector")
        assert lr.start("ada") is True and lr.running
        proc = lr._proc
        assert proc is not None and proc.pid != os.getpid()  # not a thread of the server
        assert lr.start("ada") is False  # one fit at a time
        # serving goes on while the fit runs: the queue serves, a decision is recorded
        cid = Queue(store, QueueConfig()).next_id("ada")
        assert cid is not None
        decide(store, "ada", cid, "accept")
        lr.join(240)
        assert not lr.running and lr.error is None and lr.last is not None
        # the child opened the store itself, adopted and recorded the outcome
        st = schedule.status(store)
        assert st["adopted"] is True and st["version"] == 1 and lr.last.version == 1
        assert store.setting(INSPECTOR_SETTING)["version"] == 1
        # the label recorded meanwhile counts towards the next fit unless the fit read it
        assert lr.pending == (0 if (cid, "YES") in lr._seen or (cid, "NO") in lr._seen else 1)
    finally:
        store.close()


def test_a_killed_fit_leaves_the_current_version_serving(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        ids, _ = _campaign(store, labelled=150, pending=20)
        current = InspectorModel(3, {"wd": TaskModel("platt", a=1.0, b=-1.0)})
        store.set_setting(INSPECTOR_SETTING, current.to_json())
        before = {c: store.candidate(c).confidence for c in ids[150:]}
        lr = schedule.attach(store, tmp_path / "inspector")
        assert lr.start("ada") is True
        lr._proc.kill()  # as an out-of-memory kill or an operator would
        lr.join(120)
        assert not lr.running and "exit code -9" in lr.error
        st = schedule.status(store)
        assert st["adopted"] is False and "ended without an answer" in st["error"]
        assert store.setting(INSPECTOR_SETTING)["version"] == 3
        assert {c: store.candidate(c).confidence for c in ids[150:]} == before
        assert lr.start("ada") is True  # and the schedule goes on
        lr.join(240)
        assert lr.error is None
    finally:
        store.close()


def test_a_fit_that_fails_in_its_process_is_recorded_and_the_version_stays(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        ids, _ = _campaign(store, labelled=150, pending=20)
        current = InspectorModel(3, {"wd": TaskModel("platt", a=1.0, b=-1.0)})
        store.set_setting(INSPECTOR_SETTING, current.to_json())
        blocked = tmp_path / "not-a-folder"
        blocked.write_text("a file where the model's folder should be")
        lr = schedule.attach(store, blocked)
        assert lr.start("ada", force=True) is True
        lr.join(240)
        assert lr.error and "not-a-folder" in lr.error
        assert "the fit failed" in schedule.status(store)["error"]
        assert store.setting(INSPECTOR_SETTING)["version"] == 3
    finally:
        store.close()


def test_taking_a_decision_back_and_again_starts_no_fit(tmp_path):
    """Accept/undo churn on one item is one label, not hundreds: fits start only on
    distinct new (candidate, label) pairs."""
    from annotate.review import undo

    store = Store(f"sqlite:///{tmp_path / 'u.db'}")
    try:
        ids, _ = _campaign(store, labelled=20, pending=10)
        store.set_setting(schedule.LEARN_EVERY_SETTING, 5)
        lr = schedule.attach(store, tmp_path / "inspector", background=False)
        lr.start("ada")  # the labels there so far are fitted on
        fits = schedule.status(store)["at"], lr.last
        assert lr.pending == 0
        for _ in range(210):
            decide(store, "ada", ids[20], "accept")
            undo(store, "ada")
        assert lr.last is fits[1] and lr.pending == 1  # one distinct new label, no fit
        other = "NO" if store.candidate(ids[20]).verdict == "YES" else "YES"
        decide(store, "ada", ids[20], "correct", label=other)  # another label: distinct
        assert lr.pending == 2 and lr.last is fits[1]
        for cid in ids[21:24]:
            decide(store, "ada", cid, "accept")
        assert lr.last is not fits[1] and lr.pending == 0  # 5 distinct new: a fit ran
    finally:
        store.close()


def test_a_failed_fit_is_logged_and_recorded_and_the_current_version_stays(
    mem_store, tmp_path, monkeypatch, caplog
):
    store = mem_store
    ids, _ = _campaign(store, labelled=30, pending=10)
    current = InspectorModel(3, {"wd": TaskModel("platt", a=1.0, b=-1.0)})
    store.set_setting(INSPECTOR_SETTING, current.to_json())
    before = {c: store.candidate(c).confidence for c in ids[30:]}

    real_fit = schedule.fit

    def broken(*a, **kw):
        raise RuntimeError("singular matrix")

    monkeypatch.setattr(schedule, "fit", broken)
    lr = schedule.Learner(store, tmp_path / "inspector", background=False)
    with caplog.at_level(logging.ERROR, logger="annotate.learning.schedule"):
        assert lr.start("ada") is True  # the failure does not reach the caller
    assert "the fit failed" in caplog.text and "singular matrix" in caplog.text
    assert lr.error == "RuntimeError: singular matrix"
    st = schedule.status(store)
    assert st["adopted"] is False and "singular matrix" in st["error"]
    assert store.setting(INSPECTOR_SETTING)["version"] == 3
    assert {c: store.candidate(c).confidence for c in ids[30:]} == before
    # and the schedule is still there for the next labels
    monkeypatch.setattr(schedule, "fit", real_fit)
    assert lr.start("ada") is True and lr.error is None


def test_accept_on_a_rescored_candidate_records_the_answer_the_expert_saw(mem_store, tmp_path):
    store = mem_store
    ids, xs = _campaign(store)
    schedule.learn(store, tmp_path / "inspector")
    flipped = next(c for c in ids[150:] if store.candidate(c).verdict != store.trajectory(
        store.candidate(c).trajectory_id).verdict)  # fmt: skip
    shown = store.trajectory(store.candidate(flipped).trajectory_id).verdict
    decide(store, "ada", flipped, "accept")
    assert store.candidate(flipped).label == shown


def test_a_task_with_three_positives_is_never_refitted_and_says_so(tmp_path):
    """Three S stars among hundreds of negatives: no fit is considered for the task, however
    well a calibration would fit them, and the outcome and `calibrate` say why."""
    import argparse

    from commands import calibrate as calibrate_cli

    db = tmp_path / "s.db"
    store = Store(f"sqlite:///{db}")
    rng = np.random.default_rng(3)
    n = 300
    store.add_candidates(refs(n, "s_type", "s"))
    store.ensure_expert("ada")
    for i in range(n):
        pos = i < 3
        # the rules score the three S stars low; a refitted map would raise them
        x = float(rng.normal(-0.5, 0.2)) if pos else float(rng.normal(-2.0, 0.5))
        p = _sig(SOFT * x)
        t = traj(f"s{i}", p, "s_type")
        t.steps[-1].measurements = {"calibration_input": x, "capped": 0.0, "p_rules": p}
        store.record_trajectory(t)
        decide(store, "ada", store.find_candidate(f"s{i}", "s_type").id, "correct",
               label="YES" if pos else "NO")  # fmt: skip
    got = schedule.learn(store, tmp_path / "inspector")
    r = got.tasks["s_type"]
    assert not got.adopted and r["status"] == "waited" and not r["changed"]
    assert "3 positive labels (needs 10)" in r["why"]
    assert "waiting for labels: s_type" in got.in_words()
    assert store.setting(INSPECTOR_SETTING) is None  # the plain rules still serve
    store.close()
    # calibrate (which adopts without --if-better) does not refit it either, and says why
    ns = argparse.Namespace(db=str(db), out=str(tmp_path / "models"), min_labels=50, folds=5,
                            seed=0, if_better=False, run=None)  # fmt: skip
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert calibrate_cli.main(ns) == 0
    said = buf.getvalue()
    assert "s_type" in said and "waited" in said and "3 positive labels (needs 10)" in said
    store = Store(f"sqlite:///{db}")
    try:
        assert store.setting(INSPECTOR_SETTING)["tasks"]["s_type"]["kind"] == "rules"
    finally:
        store.close()
