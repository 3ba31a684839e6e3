"""One model run's P(YES), calibrated per task on the experts' labels (`launch.py calibrate
--run ID`). The rule-based inspector is fitted elsewhere (`annotate.learning.fit`).

    python launch.py calibrate --run 3 --db data/loupe.db

The P(YES) that the `hf`, `vllm` and `openai` policies read off the answer token clusters
near 0 and 1, so the hand-off queue (least certain first) barely separates them. This fits,
per task, a map from the run's P(YES) to the experts' labels (reviews, adjudications,
imported labels, else gold and catalogue labels: the labels `calibrate` gathers for the
inspector) and keeps it with the run, keyed by the run's fingerprint in the store's
settings (`model_calibration`). The queue then ranks that run's candidates by the
calibrated P(YES); the stored confidence and verdict stay as the model gave them.

Per task, cross-validation with folds grouped by object compares the raw P(YES) with
temperature scaling (a logistic fit on logit P(YES): a temperature and a bias) and, with
200 labels of each class, an isotonic map (fewer cannot carry a step map); the lower
cross-validated log-loss wins, and a task keeps its raw P(YES)
unless the winner clearly beats it (the inspector's rule, `annotate.learning.fit.fit_task`).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from agent.errors import LoupeError
from agent.policies.rules.learned import TaskModel
from annotate.learning.fit import Example, expert_labels, fit_task
from db.store.rules import MODEL_CALIBRATION


class CalibrationError(LoupeError):
    """A run that cannot be calibrated (unknown, or no labelled trajectories)."""


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def calibrated_confidence(
    confidence: float | None, task: str | None, calibration: dict | None
) -> float | None:
    """P(YES) as a run's fitted calibration maps it for this task (unchanged without one).

    A calibration entry is `{"tasks": {task: {...TaskModel fields}}}`, fitted on the logit of
    the model's P(YES): `platt` is temperature scaling with a bias, `isotonic` a monotone map.

    >>> cal = {"tasks": {"cv": {"kind": "platt", "a": 0.5, "b": 0.0}}}
    >>> round(calibrated_confidence(0.99, "cv", cal), 3), calibrated_confidence(0.99, "x", cal)
    (0.909, 0.99)
    >>> calibrated_confidence(None, "cv", cal) is None
    True
    """
    if confidence is None or not calibration or not math.isfinite(confidence):
        return confidence
    spec = (calibration.get("tasks") or {}).get(task)
    if not spec or spec.get("kind", "rules") == "rules":
        return confidence
    return TaskModel(**spec).p_yes(_logit(confidence), {}, float(confidence))


# The queue's curve: the calibrated P(YES) every 0.1 in logit P(YES) over the range a
# P(YES) clamped to [1e-6, 1 - 1e-6] spans (plus an isotonic map's own knots, where the
# map bends), so the store ranks without the model's code.
QUEUE_GRID = [round(-14.0 + 0.1 * i, 1) for i in range(281)]


def queue_maps(tasks: dict[str, dict]) -> dict[str, dict[str, list[float]]]:
    """task -> {"x": logits, "p": calibrated P(YES)} for each task with a fitted map."""
    out = {}
    for task, spec in tasks.items():
        if spec.get("kind", "rules") == "rules":
            continue
        xs = sorted(set(QUEUE_GRID) | {float(x) for x in spec.get("knots_x") or []})
        tm = TaskModel(**spec)
        out[task] = {"x": xs, "p": [tm.p_yes(x, {}, 1 / (1 + math.exp(-x))) for x in xs]}
    return out


def run_examples(store: Any, run_id: int) -> tuple[Any, list[Example]]:
    """The run and one example per expert-labelled candidate that the run vetted with a
    P(YES): x = logit P(YES), the raw P(YES) standing where the inspector's is."""
    from db.store import run_fingerprint

    run = next((r for r in store.runs() if r.id == run_id), None)
    if run is None:
        known = ", ".join(f"#{r.id} {r.policy}/{r.model}" for r in store.runs()) or "none"
        raise CalibrationError(f"no run #{run_id} in the store (runs: {known})")
    out = []
    for c, label in expert_labels(store):
        for _, t in store.trajectories(c.id):
            fp = run_fingerprint(t.policy, t.model, t.renderer, t.params)
            if fp != run.fingerprint or t.confidence is None or t.state == "error":
                continue
            p = float(t.confidence)
            out.append(Example(c.task, label == "YES", c.object_id or c.key, _logit(p), p, {}))
    return run, out


def fit_run(
    examples: list[Example], folds: int = 5, seed: int = 0
) -> tuple[dict[str, dict], dict[str, dict]]:
    """task -> the chosen calibration (TaskModel fields), and task -> cross-validation."""
    by: dict[str, list[Example]] = {}
    for e in examples:
        by.setdefault(e.task, []).append(e)
    tasks, cv = {}, {}
    for task in sorted(by):
        # no combiner: the model's measurements are not features here, only its P(YES)
        tm, report = fit_task(by[task], min_labels=10**9, folds=folds, seed=seed)
        if "calibration only" in str(report.get("why")):
            del report["why"]  # the inspector's note; a combiner is never tried here
        tasks[task], cv[task] = vars(tm), report
    return tasks, cv


def calibrate_run(store: Any, run_id: int, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Fit the run's calibration and store it under its fingerprint; returns the entry."""
    run, examples = run_examples(store, run_id)
    if not examples:
        raise CalibrationError(
            f"run #{run_id} ({run.policy}/{run.model}) has no trajectory with a P(YES) on an "
            "expert-labelled candidate"
        )
    tasks, cv = fit_run(examples, folds, seed)
    entry = {
        "run": run.id,
        "policy": run.policy,
        "model": run.model,
        "n": len(examples),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tasks": tasks,
        "queue_maps": queue_maps(tasks),
        "cv": cv,
    }
    cals = dict(store.setting(MODEL_CALIBRATION) or {})
    cals[run.fingerprint] = entry
    store.set_setting(MODEL_CALIBRATION, cals, actor="calibrate")
    return entry


def cv_table(entry: dict[str, Any]) -> str:
    lines = ["task      n  pos  chosen    raw logloss/F1   chosen logloss/F1   note"]
    for t, r in entry["cv"].items():
        c = "raw" if r["chosen"] == "rules" else r["chosen"]
        got = r.get(r["chosen"], r["rules"])
        lines.append(
            f"{t:8s} {r['n']:3d} {r['positives']:4d}  {c:8s}  "
            f"{r['rules']['log_loss']:.3f} / {r['rules']['f1']:.2f}    "
            f"{got['log_loss']:.3f} / {got['f1']:.2f}        {r.get('why', '')}"
        )
    return "\n".join(lines)
