"""How far the labels let a learned model move the inspector: enough labels of each class,
then a blend of the learned model with the plain rules whose weight the evidence sets.

A task is considered only with at least `MIN_POSITIVES` positive and `MIN_NEGATIVES`
negative labels, from at least `MIN_OBJECTS` distinct objects of each class (so folds
grouped by object can hold each class out); otherwise it waits, and says what it waits for.
The numbers, and the prior below, come from learning curves on the benchmark's tune split
alone (`bench/learning_curve.py --tune`: campaigns from one half of tune's objects scored
on the other; without the prior a white-dwarf blend lost 0.017 F1 there, with it none lost
any).

Then the task serves the rules and a learned model pooled in the log-odds,
logit P = (1 - w) logit P_rules + w logit P_learned (`agent.policies.rules.learned.blend`),
stacked as follows (`blend_task`):

1. Every model kind the labels can carry (`models.kinds_for`) is refitted on the training
   part of stratified folds grouped by object, `REPEATS` times with different shuffles, so
   each label gets predictions from fits that never saw its object.
2. The weight w in [0, 1] is the maximum a posteriori fit of the blend to those
   out-of-fold predictions: the log loss, each object weighing the same within its class
   (`models.object_weights`), plus a Gaussian prior on w centred on 0 (the rules) with sd
   `PRIOR_WEIGHT`. With few objects the prior holds w near the rules; as the evidence grows
   the likelihood outweighs it and w moves towards what the labels support. The kind whose
   blend fits best is chosen.
3. The whole of 1-2 is run again inside each fold (nested cross-validation, grouped by
   object): its blend predicts each label from a kind, weight and fit chosen without that
   label's object. The blend is served only where these nested predictions do at least as
   well as the plain rules, in F1 at the operating point (P(YES) > 0.5) and in log loss;
   otherwise the task serves the rules (weight 0) and says so.

The record names the weight, its sd (from the curvature of the posterior), the labels,
positives and objects it rests on, and the nested F1 change against the rules with a 95%
interval from a paired bootstrap over objects: what the blend changed, out of sample.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from agent.policies.rules.learned import TaskModel
from annotate.learning.models import (
    blend_arrays,
    feature_matrix,
    fit_model,
    kinds_for,
    object_weights,
    predict,
    predict_arrays,
    task_features,
)

MIN_POSITIVES = 10  # bench/learning_curve.py --tune (on tune's halves; docs/accuracy.md)
MIN_NEGATIVES = 10
MIN_OBJECTS = 5  # distinct objects of each class: grouped folds need them
REPEATS = 3
NESTED_REPEATS = 1  # the nested check's repeats (each runs the whole choice per fold)
PRIOR_WEIGHT = 1.0  # prior sd of the blend's weight (bench/learning_curve.py --tune)
N_BOOT = 1000
LEVEL = 0.95
MOVED = 0.01  # a refit moving no labelled P(YES) by this much is no new version


def log_loss(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example log loss (P(YES) clipped to [1e-4, 1 - 1e-4])."""
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def brier(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example Brier score."""
    return (p - y) ** 2


def f1(p: np.ndarray, y: np.ndarray) -> float:
    """F1 of the verdicts P(YES) > 0.5 gives."""
    pred = p > 0.5
    tp = float(np.sum(pred & (y == 1)))
    den = 2 * tp + float(np.sum(pred & (y == 0))) + float(np.sum(~pred & (y == 1)))
    return 2 * tp / den if den else 0.0


def counts(ex: list[Any]) -> dict[str, int]:
    """Labels and distinct objects of each class."""
    return {
        "positives": sum(1 for e in ex if e.label),
        "negatives": sum(1 for e in ex if not e.label),
        "positive_objects": len({e.group for e in ex if e.label}),
        "negative_objects": len({e.group for e in ex if not e.label}),
    }


def waits(
    c: dict[str, int],
    min_pos: int = MIN_POSITIVES,
    min_neg: int = MIN_NEGATIVES,
    min_obj: int = MIN_OBJECTS,
) -> str:
    """Why the task is not fitted yet ('' when it may be).

    >>> waits({"positives": 3, "negatives": 400, "positive_objects": 3, "negative_objects": 90})
    '3 positive labels (needs 10)'
    """
    short = []
    if c["positives"] < min_pos:
        short.append(f"{c['positives']} positive labels (needs {min_pos})")
    if c["negatives"] < min_neg:
        short.append(f"{c['negatives']} negative labels (needs {min_neg})")
    if c["positive_objects"] < min_obj and c["positives"] >= min_pos:
        short.append(f"{c['positive_objects']} positive objects (needs {min_obj})")
    if c["negative_objects"] < min_obj and c["negatives"] >= min_neg:
        short.append(f"{c['negative_objects']} negative objects (needs {min_obj})")
    return ", ".join(short)


def fold_sets(ex: list[Any], folds: int, repeats: int, seed: int) -> list[list[np.ndarray]]:
    """Per repeat, the test-index arrays of stratified folds grouped by object."""
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.array([int(e.label) for e in ex])
    groups = np.array([e.group for e in ex])
    c = counts(ex)
    k = max(2, min(folds, c["positive_objects"], c["negative_objects"]))
    out = []
    for r in range(repeats):
        cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed + r)
        out.append([te for _, te in cv.split(np.arange(len(ex)), y, groups)])
    return out


@dataclass
class Rows:
    """One task's labelled examples as arrays, their measurements read once."""

    ex: list[Any]
    feats: list[str]
    y: np.ndarray
    x: np.ndarray
    p_rules: np.ndarray
    capped: np.ndarray
    raw: np.ndarray
    groups: np.ndarray

    @classmethod
    def of(cls, ex: list[Any], feats: list[str]) -> Rows:
        return cls(list(ex), feats, np.array([float(e.label) for e in ex]),
                   np.array([e.x for e in ex], float), np.array([e.p_rules for e in ex], float),
                   np.array([bool(e.capped) for e in ex]), feature_matrix(ex, feats),
                   np.array([e.group for e in ex]))  # fmt: skip

    def fit(self, kind: str, idx: np.ndarray) -> TaskModel:
        return fit_model(kind, [self.ex[i] for i in idx], self.feats, raw=self.raw[idx])

    def predict(self, tm: TaskModel, idx: np.ndarray) -> np.ndarray:
        return predict_arrays(tm, self.x[idx], self.p_rules[idx], self.capped[idx],
                              self.raw[idx] if tm.kind == "combiner" else None)  # fmt: skip


def out_of_fold(kind: str, rows: Rows, idx: np.ndarray, sets: list[list[np.ndarray]]) -> np.ndarray:
    """(repeats, len(idx)) out-of-fold P(YES) of `kind` over the rows `idx`, refitted on
    each fold's training part (`sets` index into `idx`; 'rules': nothing fitted)."""
    p_rules = rows.p_rules[idx]
    if kind == "rules":
        return np.tile(p_rules, (len(sets), 1))
    y = rows.y[idx]
    out = np.empty((len(sets), len(idx)))
    for r, tests in enumerate(sets):
        for te in tests:
            tr = np.setdiff1d(np.arange(len(idx)), te)
            if len(set(y[tr])) < 2:
                out[r, te] = p_rules[te]
                continue
            out[r, te] = rows.predict(rows.fit(kind, idx[tr]), idx[te])
    return out


def weigh(
    p_rules: np.ndarray,
    p_learned: np.ndarray,
    y: np.ndarray,
    obj_w: np.ndarray,
    prior: float = PRIOR_WEIGHT,
) -> tuple[float, float, float]:
    """(weight, its sd, the objective at it): the MAP weight of the blend on out-of-fold
    predictions `p_learned` (repeats, n), under a N(0, prior^2) prior truncated to [0, 1].

    >>> rng = np.random.default_rng(0)
    >>> y = (rng.random(400) < 0.5).astype(float)
    >>> good = np.where(y > 0, 0.9, 0.1)[None, :]  # the learned model knows the answer
    >>> w, sd, _ = weigh(np.full(400, 0.5), good, y, np.ones(400))
    >>> w > 0.95, weigh(np.full(400, 0.5), good, y, np.full(400, 0.001))[0] < 0.5
    (True, True)
    """
    from scipy.optimize import minimize_scalar

    def objective(w: float) -> float:
        lik = np.mean([np.sum(obj_w * log_loss(blend_arrays(p_rules, p, w), y)) for p in p_learned])
        return float(lik + 0.5 * (w / prior) ** 2)

    got = minimize_scalar(objective, bounds=(0.0, 1.0), method="bounded",
                          options={"xatol": 1e-4})  # fmt: skip
    w = float(got.x)
    if objective(0.0) <= got.fun:
        w = 0.0
    h = 1e-3
    lo, hi = max(0.0, w - h), min(1.0, w + h)
    mid = (lo + hi) / 2
    curv = (objective(hi) - 2 * objective(mid) + objective(lo)) / ((hi - lo) / 2) ** 2
    sd = float(1 / np.sqrt(curv)) if curv > 0 else float("nan")
    return w, sd, objective(w)


@dataclass
class Choice:
    """The kind and weight a blend takes on some rows, and the out-of-fold figures."""

    kind: str
    weight: float
    sd: float
    tried: dict[str, dict[str, float]]  # per kind: its weight and out-of-fold scores alone


def choose(
    rows: Rows, idx: np.ndarray, kinds: list[str], sets: list[list[np.ndarray]], prior: float
) -> Choice:
    """The kind whose blend with the rules, weighed on out-of-fold predictions over the
    rows `idx`, has the highest posterior (lowest penalised loss), and its weight."""
    y, p_rules = rows.y[idx], rows.p_rules[idx]
    obj_w = object_weights([rows.ex[i] for i in idx])
    best, tried = None, {}
    for k in kinds:
        oof = out_of_fold(k, rows, idx, sets)
        w, sd, obj = weigh(p_rules, oof, y, obj_w, prior)
        tried[k] = {**scores(oof, y), "weight": w}
        if best is None or obj < best[3]:
            best = (k, w, sd, obj)
    assert best is not None
    return Choice(best[0], best[1], best[2], tried)


def scores(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Log loss and Brier score (means over repeats and labels) and F1 (mean over
    repeats) of (repeats, n) predictions."""
    p = np.atleast_2d(p)
    return {"log_loss": float(np.mean([log_loss(r, y).mean() for r in p])),
            "brier": float(np.mean([brier(r, y).mean() for r in p])),
            "f1": float(np.mean([f1(r, y) for r in p]))}  # fmt: skip


def nested(
    rows: Rows, kinds: list[str], folds: int, repeats: int, seed: int, prior: float
) -> tuple[np.ndarray, list[float]]:
    """(repeats, n) P(YES) of the whole blending procedure, each label predicted by a kind,
    weight and fit chosen on the other objects only; and the weights chosen per fold."""
    n = len(rows.ex)
    out = np.empty((repeats, n))
    weights = []
    for r, tests in enumerate(fold_sets(rows.ex, folds, repeats, seed + 1000)):
        for te in tests:
            tr = np.setdiff1d(np.arange(n), te)
            inner = [rows.ex[i] for i in tr]
            c = counts(inner)
            if min(c["positive_objects"], c["negative_objects"]) < 2:
                out[r, te] = rows.p_rules[te]
                continue
            ch = choose(rows, tr, kinds, fold_sets(inner, folds, 1, seed + r), prior)
            weights.append(ch.weight)
            if ch.weight <= 0.0:
                out[r, te] = rows.p_rules[te]
                continue
            tm = replace(rows.fit(ch.kind, tr), weight=ch.weight)
            out[r, te] = rows.predict(tm, te)
    return out, weights


def f1_change(
    p_new: np.ndarray, p_old: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int = 0
) -> dict[str, float]:
    """F1 of `p_new` (repeats, n) minus F1 of `p_old` (n), mean over the repeats, with the
    percentile interval of a paired bootstrap that resamples objects.

    >>> y = np.array([1., 1, 0, 0, 1, 0])
    >>> g = f1_change(np.array([[.9, .8, .1, .2, .7, .3]]), np.array([.9, .2, .1, .2, .7, .6]),
    ...               y, np.array(list("aabbcc")))
    >>> round(g["mean"], 3), g["low"] <= g["mean"] <= g["high"]
    (0.333, True)
    """
    from scipy.stats import bootstrap

    _, inv = np.unique(groups, return_inverse=True)
    k = inv.max() + 1

    def per_object(p: np.ndarray) -> np.ndarray:
        pred, pos = p > 0.5, y > 0
        return np.stack([np.bincount(inv, weights=(pred & pos).astype(float), minlength=k),
                         np.bincount(inv, weights=(pred & ~pos).astype(float), minlength=k),
                         np.bincount(inv, weights=(~pred & pos).astype(float), minlength=k)])  # fmt: skip

    new = np.mean([per_object(r) for r in np.atleast_2d(p_new)], axis=0)  # (3, objects)
    old = per_object(p_old)

    def f1_of(c: np.ndarray, axis: int) -> np.ndarray:
        tp, fp, fn = (c[j].sum(axis=axis) for j in range(3))
        den = 2 * tp + fp + fn
        return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1), 0.0)

    mean = float(f1_of(new, -1) - f1_of(old, -1))
    if k < 2:
        return {"mean": mean, "low": -np.inf, "high": np.inf}

    def stat(*cols: np.ndarray, axis: int = -1) -> np.ndarray:
        return f1_of(np.stack(cols[:3]), axis) - f1_of(np.stack(cols[3:]), axis)

    res = bootstrap((*new, *old), stat, paired=True, vectorized=True, n_resamples=N_BOOT,
                    confidence_level=LEVEL, method="percentile",
                    random_state=np.random.default_rng(seed))  # fmt: skip
    ci = res.confidence_interval
    return {"mean": mean, "low": float(ci.low), "high": float(ci.high)}


def blend_task(
    ex: list[Any],
    current: TaskModel | None = None,
    *,
    min_labels: int = 50,
    folds: int = 5,
    repeats: int = REPEATS,
    seed: int = 0,
    thresholds: tuple[int, int] = (MIN_POSITIVES, MIN_NEGATIVES),
    prior: float = PRIOR_WEIGHT,
) -> tuple[TaskModel, dict[str, Any]]:
    """The model the task serves after these labels, and the record of why.

    The record holds the counts, `status` (`waited`, `rules`: weight 0, `blended`), `why`,
    `kind` and `weight` (with `weight_sd`), the out-of-fold scores of the rules and of each
    kind alone (`tried`), the nested scores of the blend (`blend`) and `gain`, the blend's
    nested F1 change against the rules with its 95% interval, and `moved`, the largest
    change of a labelled P(YES) against `current` (what serves now, the plain rules when
    None; `served`: its scores on these labels, in sample). A task that waits keeps
    `current`."""
    current = current or TaskModel("rules")
    c = counts(ex)
    y = np.array([float(e.label) for e in ex])
    p_rules = np.array([e.p_rules for e in ex])
    rep: dict[str, Any] = {"n": len(ex), **c, "current": current.kind, "chosen": current.kind,
                           "weight": current.weight if current.kind != "rules" else 0.0,
                           "rules": scores(p_rules, y)}  # fmt: skip
    p_cur = predict(current, ex)
    if current.kind != "rules":  # what serves now, with its own parameters, on every label
        rep["served"] = scores(p_cur, y)
    why = waits(c, *thresholds)
    if why:
        rep.update(status="waited", why=why, moved=0.0)
        return current, rep
    rows = Rows.of(ex, task_features(ex[0].task))
    kinds = kinds_for(c["positives"], c["negatives"], len(ex), min_labels)
    every = np.arange(len(ex))
    ch = choose(rows, every, kinds, fold_sets(ex, folds, repeats, seed), prior)
    p_nest, inner = nested(rows, kinds, folds, NESTED_REPEATS, seed, prior)
    gain = f1_change(p_nest, p_rules, y, rows.groups, seed)
    rep.update(kind=ch.kind, weight_sd=ch.sd, tried=ch.tried, blend=scores(p_nest, y),
               gain=gain, fold_weights=[round(w, 3) for w in inner])  # fmt: skip
    said = (f"{c['positives']} YES from {c['positive_objects']} objects, "
            f"{c['negatives']} NO from {c['negative_objects']}")  # fmt: skip
    worse = [f"{k} {rep['blend'][k]:.3f} against the rules' {rep['rules'][k]:.3f}"
             for k in ("f1", "log_loss")
             if (rep["blend"][k] < rep["rules"][k] if k == "f1"
                 else rep["blend"][k] > rep["rules"][k])]  # fmt: skip
    if ch.weight <= 0.0 or worse:
        rep.update(status="rules", chosen="rules", weight=0.0,
                   why=(f"the out-of-fold evidence gives the {ch.kind} no weight ({said})"
                        if ch.weight <= 0.0 else
                        f"the {ch.kind} blended at {ch.weight:.2f} did worse than the rules "
                        f"on objects held out of its choice ({', '.join(worse)}; {said})"))  # fmt: skip
        rep["moved"] = float(np.max(np.abs(p_rules - p_cur), initial=0.0))
        return TaskModel("rules"), rep
    tm = replace(rows.fit(ch.kind, every), weight=round(ch.weight, 4),
                 positives=c["positives"], objects=c["positive_objects"])  # fmt: skip
    rep["moved"] = float(np.max(np.abs(rows.predict(tm, every) - p_cur), initial=0.0))
    rep.update(status="blended", chosen=ch.kind, weight=tm.weight,
               why=(f"{ch.kind} at weight {ch.weight:.2f} (sd {ch.sd:.2f}) from {len(ex)} "
                    f"labels ({said}); F1 on held-out objects {rep['rules']['f1']:.3f} -> "
                    f"{rep['blend']['f1']:.3f} ({gain['mean']:+.3f} [{gain['low']:+.3f}, "
                    f"{gain['high']:+.3f}])"))  # fmt: skip
    return tm, rep
