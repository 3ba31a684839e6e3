"""The fitted inspector versions: the learning curve over them, and what a proposed version
would do, in words (how many pending verdicts it flips, what it weighs most).

Every version `calibrate` saved is in the audit log (the store setting `inspector_model` is
set once per version, with its cross-validation per task), so the curve needs no table of
its own: per version and task, the labels, YES labels and YES objects it was fitted on,
the weight of its blend, and its F1 change against the rules on held-out objects.
"""

from __future__ import annotations

import math
from typing import Any

from agent.policies.rules.learned import InspectorModel, ModelError, TaskModel
from annotate.vetting.into_store import INSPECTOR_SETTING as SETTING

CURVE_HEADERS = ["version", "task", "labels", "YES labels", "YES objects", "serves", "weight",
                 "F1 change", "F1 change low", "F1 change high", "rules F1", "F1 after"]  # fmt: skip


def versions(store: Any) -> list[InspectorModel]:
    """Every inspector version saved to the store, oldest first (the latest save of each)."""
    found: dict[int, InspectorModel] = {}
    since = None
    while True:
        events = store.audit_events(entity="setting", since_id=since, limit=1000)
        if not events:
            break
        for ev in events:
            p = ev.payload or {}
            if ev.action == "set" and p.get("key") == SETTING and p.get("value"):
                try:
                    model = InspectorModel.from_json(p["value"], f"audit event #{ev.id}")
                except ModelError:
                    continue  # not a model (e.g. cleared): nothing to draw
                found[model.version] = model
        since = events[-1].id
    return [found[v] for v in sorted(found)]


def learning_curve(models: list[InspectorModel]) -> list[list[Any]]:
    """Rows of `CURVE_HEADERS`, one per version and task, from each version's own record
    (`info["cv"]`, written by `calibrate`): the labels it rests on, what the task serves and
    at which weight, and the F1 change against the plain rules on objects held out of the
    blend's choice (nested cross-validation) with its 95% interval (None where not
    estimated: a task that waited, or a version recorded before the blend).

    >>> m = InspectorModel(2, {"wd": TaskModel("combiner", weight=0.4)}, info={"cv": {"wd": {
    ...     "n": 120, "positives": 30, "positive_objects": 6, "status": "blended",
    ...     "rules": {"f1": 0.8, "log_loss": 0.4}, "blend": {"f1": 0.85, "log_loss": 0.3},
    ...     "gain": {"mean": 0.05, "low": -0.01, "high": 0.12}}}})
    >>> learning_curve([m])
    [['inspector-v2', 'wd', 120, 30, 6, 'combiner', 0.4, 0.05, -0.01, 0.12, 0.8, 0.85]]
    """
    rows = []
    for model in models:
        for task, r in sorted((model.info.get("cv") or {}).items()):
            tm = model.tasks.get(task, TaskModel("rules"))
            if r.get("status") == "blended":
                after = r.get("blend") or r["rules"]
            else:  # a version recorded before the blend names its chosen kind's scores
                after = r.get(r.get("chosen", "rules")) or r["rules"]
                after = after if isinstance(after, dict) else r["rules"]
            g = r.get("gain") if isinstance(r.get("gain"), dict) else {}
            change = g.get("mean", after["f1"] - r["rules"]["f1"])
            rows.append([model.tag, task, r["n"], r.get("positives"), r.get("positive_objects"),
                         tm.kind, round(tm.weight, 3) if tm.kind != "rules" else 0.0,
                         round(change, 3), _r(g.get("low")), _r(g.get("high")),
                         round(r["rules"]["f1"], 3), round(after["f1"], 3)])  # fmt: skip
    return rows


def _r(v: Any) -> float | None:
    """A bound rounded for display; None where not estimated."""
    return None if v is None or not math.isfinite(v) else round(float(v), 3)


def in_words(model: InspectorModel, top: int = 2) -> list[str]:
    """One sentence per task the model changes: the rules' input against the rules' own
    slope, a combiner's weightiest measurements (log-odds per standard deviation), and the
    weight the learned model is blended in at.

    >>> from agent.policies.rules import task_module
    >>> from agent.policies.rules.learned import TaskModel
    >>> twice = 2 * task_module("wd").CALIBRATION[0]
    >>> m = InspectorModel(3, {"wd": TaskModel("combiner", a=twice, b=0.1,
    ...     features=["hg_w_fwhm", "cak_ew"], mean=[0, 0], scale=[1, 1], weights=[0.9, -0.2]),
    ...     "cv": TaskModel("rules")})
    >>> in_words(m)
    ["wd: the rules' evidence weighs 2.0x the rules' default; H-gamma profile fwhm +0.90, Ca II K ew -0.20 in the log-odds per standard deviation"]
    """
    from agent.policies.rules import task_module
    from agent.policies.rules.policy import feature_label

    out = []
    for task, tm in sorted(model.tasks.items()):
        if tm.kind == "rules":
            continue
        if tm.kind == "isotonic":
            said = (f"{task}: P(YES) is re-mapped monotonically from the rules' evidence "
                    f"({len(tm.knots_x)} steps)")  # fmt: skip
            out.append(said + (f"; blended in at weight {tm.weight:.2f}" if tm.weight < 1 else ""))
            continue
        slope = task_module(task).CALIBRATION[0]
        said = f"{task}: the rules' evidence weighs {tm.a / slope:.1f}x the rules' default"
        if tm.kind == "combiner":
            pairs = sorted(zip(tm.features, tm.weights), key=lambda fw: -abs(fw[1]))[:top]
            said += "; " + ", ".join(f"{_name(f, feature_label)} {w:+.2f}" for f, w in pairs)
            said += " in the log-odds per standard deviation"
        if tm.weight < 1.0:
            said += f"; blended in at weight {tm.weight:.2f} against the rules' {1 - tm.weight:.2f}"
        out.append(said)
    return out


def _name(feature: str, label) -> str:
    """'hg_w_fwhm' -> 'H-gamma profile fwhm': the feature's reader name and the quantity."""
    for cut in range(len(feature), 0, -1):
        head = feature[:cut]
        if label(head) != head:
            rest = feature[cut:].strip("_").replace("_", " ")
            return f"{label(head)} {rest}".strip()
    return feature.replace("_", " ")


def proposal(store: Any, model: InspectorModel) -> dict[str, Any]:
    """What adopting `model` would do: pending verdicts it flips per task (from the stored
    values, without rerunning the agent) and its changes in words."""
    from annotate.learning.rescore import rescore_store

    r = rescore_store(store, model)
    flips: dict[str, int] = {}
    for task, old, new in zip(r.tasks, r.old, r.new):
        if (old > 0.5) != (new > 0.5):
            flips[task] = flips.get(task, 0) + 1
    return {"version": model.tag, "rescored": len(r.ids), "kept": r.kept,
            "flips": r.flips, "flips_by_task": flips, "in_words": in_words(model)}  # fmt: skip
