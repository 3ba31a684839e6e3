"""Whether the labels support a new model for a task: enough of each class, then the
candidate against what serves now, on the same out-of-fold predictions.

A task is considered only with at least `MIN_POSITIVES` positive and `MIN_NEGATIVES`
negative labels, from at least `MIN_OBJECTS` distinct objects of each class (so folds
grouped by object can hold each class out); otherwise it waits, and says what it waits for.
The numbers come from a learning curve on the benchmark's tune split alone
(`bench/learning_curve.py --thresholds`: campaigns of 50-1,000 labels drawn from half of
tune's objects, scored on the other half, 3 seeds, adopting on the point comparison so that
the minimum is the only guard): with 3, 5, 10 or 20 of each class some task lost 0.023 F1
on the held-out objects; from 40 none lost any.

Then every model kind the labels can carry (`inspector_models.kinds_for`) and the kind that
serves now are fitted afresh on the training part of each fold (folds grouped by object,
stratified, `REPEATS` times with different shuffles), so each is scored only on labels it
was not fitted on: the plain rules, the current kind and the candidate meet on the same
out-of-fold predictions. The candidate (the kind with the lowest out-of-fold Brier score) is
adopted only where

- a paired bootstrap over objects of the improvement in Brier score (out of fold, averaged
  over the repeats) against what serves now gives a 95% interval above zero, and
- its F1 at the operating point (P(YES) > 0.5), averaged over the repeats, is no lower than
  that of what serves now, nor than the plain rules'.

A current model that the plain rules now beat out of fold gives way to them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agent.policies.rules.learned import TaskModel
from annotate.learning.models import fit_model, kinds_for, predict, task_features

MIN_POSITIVES = 40  # bench/learning_curve.py --thresholds: the smallest without harm
MIN_NEGATIVES = 40
MIN_OBJECTS = 5  # distinct objects of each class: grouped folds need them
REPEATS = 3
N_BOOT = 1000
LEVEL = 0.95


def log_loss(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example log loss (P(YES) clipped to [1e-4, 1 - 1e-4])."""
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def brier(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example Brier score: the loss the comparison weighs (a proper score that one
    confidently wrong star cannot dominate, as it can the log loss)."""
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
    """Why the task is not refitted yet ('' when it may be).

    >>> waits({"positives": 3, "negatives": 400, "positive_objects": 3, "negative_objects": 90})
    '3 positive labels (needs 40)'
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


def out_of_fold(kind: str, ex: list[Any], sets: list[list[np.ndarray]], feats: list[str]):
    """(repeats, n) out-of-fold P(YES) of `kind` refitted on each fold's training part
    ('rules': the plain rules, nothing fitted)."""
    n = len(ex)
    p_rules = np.array([e.p_rules for e in ex])
    if kind == "rules":
        return np.tile(p_rules, (len(sets), 1))
    y = np.array([e.label for e in ex])
    out = np.empty((len(sets), n))
    for r, tests in enumerate(sets):
        for te in tests:
            tr = np.setdiff1d(np.arange(n), te)
            if len(set(y[tr])) < 2:
                out[r, te] = p_rules[te]
                continue
            tm = fit_model(kind, [ex[i] for i in tr], feats)
            out[r, te] = predict(tm, [ex[i] for i in te])
    return out


def paired_gain(
    loss_ref: np.ndarray, loss_new: np.ndarray, groups: np.ndarray, seed: int = 0
) -> dict[str, float]:
    """Mean loss improvement (reference minus new) per label and its percentile
    interval from a paired bootstrap that resamples objects (an object's labels together).

    >>> g = paired_gain(np.array([1.0, 1, 1, 1]), np.array([0.5, 0.5, 0.6, 0.4]),
    ...                 np.array(["a", "a", "b", "c"]))
    >>> round(g["mean"], 2), g["low"] > 0
    (0.5, True)
    """
    from scipy.stats import bootstrap

    _, inv = np.unique(groups, return_inverse=True)
    d = np.bincount(inv, weights=loss_ref - loss_new)
    n = np.bincount(inv).astype(float)
    mean = float(d.sum() / n.sum())
    if len(d) < 2:
        return {"mean": mean, "low": -np.inf, "high": np.inf}

    def ratio(dd: np.ndarray, nn: np.ndarray, axis: int = -1) -> np.ndarray:
        return dd.sum(axis=axis) / nn.sum(axis=axis)

    res = bootstrap((d, n), ratio, paired=True, vectorized=True, n_resamples=N_BOOT,
                    confidence_level=LEVEL, method="percentile",
                    random_state=np.random.default_rng(seed))  # fmt: skip
    ci = res.confidence_interval
    return {"mean": mean, "low": float(ci.low), "high": float(ci.high)}


def _score(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Log loss (mean over repeats and labels) and F1 (mean over repeats)."""
    return {"log_loss": float(np.mean([log_loss(r, y).mean() for r in p])),
            "brier": float(np.mean([brier(r, y).mean() for r in p])),
            "f1": float(np.mean([f1(r, y) for r in p]))}  # fmt: skip


def select_task(
    ex: list[Any],
    current: TaskModel | None = None,
    *,
    min_labels: int = 50,
    folds: int = 5,
    repeats: int = REPEATS,
    seed: int = 0,
    thresholds: tuple[int, int] = (MIN_POSITIVES, MIN_NEGATIVES),
    gate: bool = True,
) -> tuple[TaskModel, dict[str, Any]]:
    """The model the task serves after these labels, and the record of why.

    The record holds the counts, `status` (`waited`, `kept`, `adopted`, `fell back`),
    `why`, the out-of-fold scores of the rules, of the current kind and of each kind
    tried, and `gain` (the candidate's improvement interval). `gate=False` adopts on the
    point comparison alone (mean loss lower, F1 no lower): how the class minimums are set,
    never how a version is adopted."""
    current = current or TaskModel("rules")
    c = counts(ex)
    y = np.array([float(e.label) for e in ex])
    rep: dict[str, Any] = {"n": len(ex), **c, "current": current.kind, "chosen": "kept"}
    p_rules = np.array([e.p_rules for e in ex])
    rep["rules"] = _score(p_rules[None, :], y)
    why = waits(c, *thresholds)
    if why:
        rep.update(status="waited", why=why)
        return current, rep
    feats = task_features(ex[0].task)
    sets = fold_sets(ex, folds, repeats, seed)
    kinds = kinds_for(c["positives"], c["negatives"], len(ex), min_labels)
    oof = {
        k: out_of_fold(k, ex, sets, feats) for k in dict.fromkeys(["rules", current.kind, *kinds])
    }
    for k, p in oof.items():
        rep[k] = _score(p, y)
    groups = np.array([e.group for e in ex])
    loss = {k: np.mean([brier(r, y) for r in p], axis=0) for k, p in oof.items()}
    ref = current.kind
    if ref != "rules":
        # what serves now, with its own parameters, on every label (in sample, which
        # favours it), and its kind refitted out of fold: worse than the rules either way,
        # it gives way to them
        rep["served"] = _score(predict(current, ex)[None, :], y)
        worse = [r for r in (rep["served"], rep[ref])
                 if r["brier"] >= rep["rules"]["brier"] or r["f1"] < rep["rules"]["f1"]]  # fmt: skip
        if worse:
            current, ref = TaskModel("rules"), "rules"
            rep.update(status="fell back", why=f"the current {rep['current']} did no better "
                       "than the plain rules")  # fmt: skip
    best = min(kinds, key=lambda k: rep[k]["brier"])
    # a refit of the kind already serving is judged against the rules it must still beat
    base = "rules" if best == ref else ref
    gain = paired_gain(loss[base], loss[best], groups, seed)
    rep["candidate"], rep["gain"], rep["against"] = best, gain, base
    f1_ok = rep[best]["f1"] >= max(rep[base]["f1"], rep["rules"]["f1"])
    if (gain["low"] > 0 if gate else gain["mean"] > 0) and f1_ok:
        tm = fit_model(best, ex, feats)
        rep.update(status="adopted", chosen=best,
                   why=f"{best}: Brier score {gain['mean']:+.4f} per label against {base} "
                   f"[{gain['low']:+.4f}, {gain['high']:+.4f}], F1 {rep[base]['f1']:.2f} -> "
                   f"{rep[best]['f1']:.2f}")  # fmt: skip
        return tm, rep
    if rep.get("status") != "fell back":
        rep["status"] = "kept"
        rep["why"] = (f"{best} not shown better than {base}: Brier score gain "
                      f"{gain['mean']:+.4f} [{gain['low']:+.4f}, {gain['high']:+.4f}]"
                      + ("" if f1_ok else f", F1 {rep[best]['f1']:.2f} below "
                         f"{max(rep[base]['f1'], rep['rules']['f1']):.2f}"))  # fmt: skip
    else:
        rep["chosen"] = "rules"
    return current, rep
