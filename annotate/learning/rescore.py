"""Re-scoring pending verdicts with another inspector version, without rerunning the agent.

The rules inspector stores with every verdict what a fitted model reads: in its final step's
measurements, `calibration_input` (`Reading.x`), `capped` (1 where a decisive reading held
P(YES) at the veto cap), `p_rules` (the plain rules' P(YES)) and the measurements a combiner
leans on. `rescore` evaluates a model on those stored values for many candidates at once
(numpy, one pass per task), giving the same P(YES) as `TaskModel.p_yes` one at a time. A
verdict stored without them (an older run, or another policy's) is left as it is and counted.
The trajectory itself (its thoughts and the P(YES) they state) is not rewritten: a live
verdict's learned YES is held at 0.50 where a reading its thought quotes speaks against
the target (`InspectorModel.apply`), which the stored numbers cannot see, so a re-scored
candidate's P(YES) may differ there until it is vetted again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.policies.rules.learned import InspectorModel, TaskModel, readable, readable_keys

INPUTS = ("calibration_input", "capped", "p_rules")


def task_p_yes(
    tm: TaskModel, x: np.ndarray, capped: np.ndarray, p_rules: np.ndarray, feats: np.ndarray
) -> np.ndarray:
    """`TaskModel.p_yes` for arrays: x, capped and p_rules of n verdicts and their
    (n, len(tm.features)) measurements (NaN where not measured).

    >>> tm = TaskModel("platt", a=2.0, b=-1.0)
    >>> x = np.array([0.0, 1.0, 3.0])
    >>> p = task_p_yes(tm, x, np.array([False, False, True]), np.full(3, 0.5), np.empty((3, 0)))
    >>> [round(float(v), 4) for v in p], [round(tm.p_yes(v, {}, 0.5, c), 4) for v, c in
    ...     zip(x, [False, False, True])]
    ([0.2689, 0.7311, 0.3], [0.2689, 0.7311, 0.3])
    >>> half = TaskModel("platt", a=2.0, b=-1.0, weight=0.5)  # blended with the rules' 0.5
    >>> round(float(task_p_yes(half, x[:1], np.array([False]), np.full(1, 0.5), x[:0])[0]), 4)
    0.3775
    """
    from annotate.learning.models import predict_arrays

    return predict_arrays(tm, x, p_rules, capped, feats)


@dataclass
class Rescored:
    """New P(YES) for the candidates whose stored inputs allow it; `kept` counts those left
    as they were (no stored inputs)."""

    ids: np.ndarray
    tasks: list[str]
    old: np.ndarray
    new: np.ndarray
    kept: int = 0
    by_task: dict[str, int] = field(default_factory=dict)

    @property
    def flips(self) -> int:
        """Verdicts the new version would turn (YES above 0.5, as the agent answers)."""
        return int(np.sum((self.old > 0.5) != (self.new > 0.5)))


def rescore(
    model: InspectorModel, rows: Iterable[tuple[int, str, float | None, dict[str, Any]]]
) -> Rescored:
    """New P(YES) under `model` for (candidate id, task, current P(YES), stored final-step
    measurements) rows, e.g. `Store.stored_scores()`.

    >>> from agent.policies.rules.learned import InspectorModel, TaskModel
    >>> model = InspectorModel(2, {"cv": TaskModel("platt", a=1.0, b=0.0)})
    >>> stored = {"calibration_input": 2.0, "capped": 0.0, "p_rules": 0.9}
    >>> r = rescore(model, [(7, "cv", 0.9, stored), (8, "cv", 0.4, {}), (9, "wd", 0.2, stored)])
    >>> r.ids.tolist(), [round(float(v), 3) for v in r.new], r.kept, r.flips
    ([7, 9], [0.881, 0.9], 1, 1)
    """
    groups: dict[str, tuple[list[int], list[float], list[dict[str, Any]]]] = {}
    kept = 0
    for cid, task, p, meas in rows:
        if p is None or any(k not in meas for k in INPUTS):
            kept += 1
            continue
        g = groups.setdefault(task, ([], [], []))
        g[0].append(cid)
        g[1].append(p)
        g[2].append(meas)
    ids, tasks, old, new = [], [], [], []
    for task, (cids, ps, ms) in groups.items():
        tm = model.tasks.get(task, TaskModel("rules"))
        x = np.fromiter((m["calibration_input"] for m in ms), float, len(ms))
        capped = np.fromiter((m["capped"] for m in ms), float, len(ms)) > 0
        p_rules = np.fromiter((m["p_rules"] for m in ms), float, len(ms))
        nan = float("nan")
        # A combiner reads a Balmer width only where the rules count it as measured.
        feats = np.array(
            [[r.get(k, nan) for k in tm.features] for r in map(readable, ms)]
            if tm.kind == "combiner"
            else [],
            dtype=float,
        ).reshape(len(ms), len(tm.features) if tm.kind == "combiner" else 0)
        ids.append(np.asarray(cids, np.int64))
        tasks += [task] * len(cids)
        old.append(np.asarray(ps, float))
        new.append(task_p_yes(tm, x, capped, p_rules, feats))
    cat = np.concatenate
    return Rescored(
        cat(ids) if ids else np.empty(0, np.int64),
        tasks,
        cat(old) if old else np.empty(0),
        cat(new) if new else np.empty(0),
        kept,
        {t: len(g[0]) for t, g in groups.items()},
    )


def rescore_store(store: Any, model: InspectorModel, task: str | None = None) -> Rescored:
    """New P(YES) under `model` for every pending candidate of the store (or one task)."""
    keys = [*INPUTS]
    for tm in model.tasks.values():
        if tm.kind == "combiner":
            keys += [k for k in [*tm.features, *readable_keys(tm.features)] if k not in keys]
    return rescore(model, store.stored_scores(task, keys))
