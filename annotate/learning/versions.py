"""The fitted inspector versions: the learning curve over them, and what a proposed version
would do, in words (how many pending verdicts it flips, what it weighs most).

Every version `calibrate` saved is in the audit log (the store setting `inspector_model` is
set once per version, with its cross-validation per task), so the curve needs no table of
its own: per version and task, the labels it was fitted on and the cross-validated F1 and
log loss (folds grouped by object) of the rules and of the model chosen.
"""

from __future__ import annotations

from typing import Any

from agent.policies.rules.learned import InspectorModel, ModelError
from annotate.vetting.into_store import INSPECTOR_SETTING as SETTING

CURVE_HEADERS = ["version", "task", "labels", "chosen", "CV F1", "CV log loss",
                 "rules CV F1", "rules CV log loss"]  # fmt: skip


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
    """Rows of `CURVE_HEADERS`, one per version and task, from each version's own
    cross-validation (`info["cv"]`, written by `calibrate`).

    >>> m = InspectorModel(2, {}, info={"cv": {"wd": {"n": 120, "positives": 30,
    ...     "chosen": "platt", "rules": {"f1": 0.8, "log_loss": 0.4},
    ...     "platt": {"f1": 0.85, "log_loss": 0.3}}}})
    >>> learning_curve([m])
    [['inspector-v2', 'wd', 120, 'platt', 0.85, 0.3, 0.8, 0.4]]
    """
    rows = []
    for model in models:
        for task, r in sorted((model.info.get("cv") or {}).items()):
            got = r.get(r.get("chosen", "rules")) or r["rules"]
            rows.append([model.tag, task, r["n"], r.get("chosen", "rules"),
                         round(got["f1"], 3), round(got["log_loss"], 3),
                         round(r["rules"]["f1"], 3), round(r["rules"]["log_loss"], 3)])  # fmt: skip
    return rows


def in_words(model: InspectorModel, top: int = 2) -> list[str]:
    """One sentence per task the model changes: the rules' input against the rules' own
    slope, and a combiner's weightiest measurements (log-odds per standard deviation).

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
            out.append(f"{task}: P(YES) is re-mapped monotonically from the rules' evidence "
                       f"({len(tm.knots_x)} steps)")  # fmt: skip
            continue
        slope = task_module(task).CALIBRATION[0]
        said = f"{task}: the rules' evidence weighs {tm.a / slope:.1f}x the rules' default"
        if tm.kind == "combiner":
            pairs = sorted(zip(tm.features, tm.weights), key=lambda fw: -abs(fw[1]))[:top]
            said += "; " + ", ".join(f"{_name(f, feature_label)} {w:+.2f}" for f, w in pairs)
            said += " in the log-odds per standard deviation"
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
