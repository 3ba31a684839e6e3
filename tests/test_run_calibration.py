"""`launch.py calibrate --run ID`: a model run's P(YES) calibrated on expert labels, stored
with the run, and used by the hand-off queue."""

from __future__ import annotations

import numpy as np
import pytest

import launch
from annotate.learning.run_calibration import CalibrationError, calibrate_run, calibrated_confidence
from db.store import Store, run_fingerprint
from db.store.rules import MODEL_CALIBRATION, queue_confidence
from tests.store_factory import refs, traj


def _overconfident(store: Store, n: int = 60, seed: int = 0) -> list[int]:
    """`n` labelled candidates vetted by an `hf` run that says 0.999/0.001 and is right 3
    times in 4; returns their ids."""
    rng = np.random.default_rng(seed)
    labels = ["YES" if i % 2 == 0 else "NO" for i in range(n)]
    rs = refs(n, prefix="m")
    rs = [type(r)(id=r.id, task=r.task, path=r.path, label=lab) for r, lab in zip(rs, labels)]
    store.add_candidates(rs)
    right = rng.random(n) < 0.75
    for i, lab in enumerate(labels):
        says_yes = (lab == "YES") == bool(right[i])
        store.record_trajectory(
            traj(f"m{i}", 0.999 if says_yes else 0.001, policy="hf", model="tiny")
        )
    return [store.find_candidate(f"m{i}", "cv").id for i in range(n)]


def _hf_run(store: Store):
    return next(r for r in store.runs() if r.policy == "hf")


def test_temperature_scaling_pulls_an_overconfident_run_in(tmp_path):
    store = Store(tmp_path / "s.db")
    _overconfident(store)
    run = _hf_run(store)
    entry = calibrate_run(store, run.id)
    cv = entry["cv"]["cv"]
    assert cv["chosen"] in ("platt", "isotonic")
    assert cv[cv["chosen"]]["log_loss"] < 0.6 * cv["rules"]["log_loss"]
    cal = store.setting(MODEL_CALIBRATION)[run.fingerprint]
    assert cal["run"] == run.id and cal["n"] == 60
    hi = calibrated_confidence(0.999, "cv", cal)
    lo = calibrated_confidence(0.001, "cv", cal)
    # right 3 times in 4: the calibrated P(YES) sits near 0.75 / 0.25, no longer at the edges
    assert 0.6 < hi < 0.9 and 0.1 < lo < 0.4
    # another task, or no calibration, leaves P(YES) as the model gave it
    assert calibrated_confidence(0.999, "m_giant", cal) == 0.999
    # the curve the store ranks by is the fitted map, without the model's code
    for p in (0.001, 0.2, 0.5, 0.8, 0.999):
        assert abs(queue_confidence(p, "cv", cal) - calibrated_confidence(p, "cv", cal)) < 1e-3
    store.close()


def test_queue_ranks_the_run_by_its_calibrated_confidence(tmp_path):
    store = Store(tmp_path / "s.db")
    ids = _overconfident(store)
    # an uncalibrated rules item at 0.85 is less certain than the hf run's raw 0.999 ...
    store.add_candidates(refs(1, prefix="r"))
    store.record_trajectory(traj("r0", 0.85))
    rules_item = store.find_candidate("r0", "cv")
    before = {i: store.candidate(i).priority for i in ids}
    assert all(p > rules_item.priority for p in before.values())
    calibrate_run(store, _hf_run(store).id)
    # ... but calibrated near 0.75 / 0.25, the hf items come first; confidence is untouched
    after = {i: store.candidate(i) for i in ids}
    assert all(c.priority < store.candidate(rules_item.id).priority for c in after.values())
    assert {c.confidence for c in after.values()} == {0.999, 0.001}
    assert store.candidate(rules_item.id).priority == rules_item.priority
    # a trajectory recorded later by the same run is ranked calibrated too (the refresh path)
    store.add_candidates(refs(1, prefix="n"))
    store.record_trajectory(traj("n0", 0.999, policy="hf", model="tiny"))
    assert store.find_candidate("n0", "cv").priority < store.candidate(rules_item.id).priority
    # ... and a threshold change keeps using it (the reprioritise path)
    store.set_setting("threshold", 0.5)
    assert store.find_candidate("n0", "cv").priority < store.candidate(rules_item.id).priority
    store.close()


def test_cli_and_bad_runs(tmp_path, capsys):
    db = tmp_path / "s.db"
    store = Store(db)
    _overconfident(store, n=40)
    run = _hf_run(store)
    store.add_candidates(refs(1, prefix="u"))
    store.record_trajectory(traj("u0", 0.7, policy="openai", model="unlabelled"))
    other = next(r for r in store.runs() if r.policy == "openai")
    with pytest.raises(CalibrationError, match="no trajectory with a P"):
        calibrate_run(store, other.id)
    store.close()
    assert launch.main(["calibrate", "--run", "999", "--db", str(db)]) == 2
    assert "no run #999" in capsys.readouterr().err
    assert launch.main(["calibrate", "--run", str(run.id), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"run #{run.id} (hf/tiny)" in out and "cv" in out
    store = Store(db)
    fp = run_fingerprint(run.policy, run.model, run.renderer, run.params)
    assert store.setting(MODEL_CALIBRATION)[fp]["tasks"]["cv"]["kind"] in ("platt", "isotonic")
    store.close()


def test_a_run_with_three_positives_gets_no_isotonic_map():
    """Three positive objects cannot carry a step map: only the two-parameter temperature
    scaling is tried for them."""
    from annotate.learning.fit import Example
    from annotate.learning.run_calibration import fit_run

    rng = np.random.default_rng(1)
    ex = []
    for i in range(150):
        pos = i < 3
        p = float(np.clip(rng.normal(0.3 if pos else 0.05, 0.03), 0.001, 0.999))
        ex.append(Example("s_type", pos, f"o{i}", float(np.log(p / (1 - p))), p, {}))
    _, cv = fit_run(ex)
    assert "isotonic" not in cv["s_type"] and cv["s_type"]["chosen"] in ("rules", "platt")
