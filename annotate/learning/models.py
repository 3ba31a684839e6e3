"""The models `calibrate` may fit for one task, each shrinking towards the plain rules.

With few labels a fit must not wander far from what the rules already say, so every model
here is a maximum a posteriori fit with a Gaussian prior centred on the rules' own
calibration (`CALIBRATION` of the task's module, which the rules' P(YES) is):

- `platt`: p = sigmoid(a x + b) on the rules' calibration input x, a ~ N(a0, (0.5 a0)^2),
  b ~ N(b0, 1). With no labels it is the rules; each label pulls it a little.
- `combiner`: the same prior on (a, b), plus a weight per measurement the task's zooms
  quote (standardised, log-odds per standard deviation), w ~ N(0, 0.5^2). A weight is held
  to the sign the rules give its measurement (monotone: a feature that raises the rules'
  evidence may only raise P(YES)), found from the rank correlation between the measurement
  and the rules' calibration input over the examples (no label is read for it), so the
  constraint follows the rules as they change and a new measurement needs no table here.
  This is how labels move a threshold the rules set by hand: a measurement the rules
  under-weigh gains weight in its own direction, never against it.
- `isotonic`: a monotone re-mapping of x, tried only where each class has at least
  `ISOTONIC_MIN` labels (with fewer it fits single stars).

A verdict the rules capped (a decisive reading against the target) keeps its cap in every
model, so those examples carry no information for the fit and are left out of it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agent.policies.rules.calibration import VETO_CAP
from agent.policies.rules.learned import TaskModel, readable

PRIOR_SLOPE = 0.5  # prior sd of the slope, as a share of the rules' slope
PRIOR_INTERCEPT = 1.0  # prior sd of the intercept (log-odds)
PRIOR_WEIGHT = 0.5  # prior sd of a measurement's weight (log-odds per standard deviation)
SIGN_RHO = 0.1  # |rank correlation| with the rules' input above which a sign is enforced
ISOTONIC_MIN = 200  # labels of each class before an isotonic map is tried
EXTRA_FEATURES = ("snr",)  # read by every task's combiner besides its zooms' measurements


def rules_constants(task: str) -> tuple[float, float]:
    """The rules' own (slope, intercept) of the task: the prior's centre."""
    from agent.policies.rules import task_module

    a, b = task_module(task).CALIBRATION
    return float(a), float(b)


def task_features(task: str) -> list[str]:
    """The measurements the task's own zooms quote, and the spectrum's SNR."""
    from agent.policies.rules import task_module

    keys: list[str] = []
    for z in task_module(task).ZOOMS:
        keys += [k for k in z.keys if k not in keys]
    return keys + [k for k in EXTRA_FEATURES if k not in keys]


def feature_matrix(ex: list[Any], feats: list[str]) -> np.ndarray:
    """(n, len(feats)) measurements as a model reads them (NaN where not measured)."""
    seen = [readable(e.m) for e in ex]
    raw = np.array([[m.get(k, math.nan) for k in feats] for m in seen], dtype=float)
    raw[~np.isfinite(raw)] = np.nan
    return raw.reshape(len(ex), len(feats))


def directions(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """+1 / -1 where the rules' input rises / falls with a measurement (Spearman's rho
    beyond SIGN_RHO over the examples measuring it), else 0 (no sign enforced)."""
    from scipy.stats import spearmanr

    out = np.zeros(raw.shape[1])
    for j in range(raw.shape[1]):
        ok = np.isfinite(raw[:, j])
        if ok.sum() < 10 or np.ptp(raw[ok, j]) == 0 or np.ptp(x[ok]) == 0:
            continue
        rho = spearmanr(raw[ok, j], x[ok]).statistic
        if np.isfinite(rho) and abs(rho) >= SIGN_RHO:
            out[j] = math.copysign(1.0, rho)
    return out


def object_weights(ex: list[Any]) -> np.ndarray:
    """Likelihood weights: one object's spectra (layouts, SNRs, repeat visits) are one
    piece of evidence about it, so within a class every object weighs the same, and the
    weights sum to the number of objects, so the prior competes with how many objects the
    experts labelled rather than how often each was observed; each class keeps its share
    of the labels, so the fitted base rate is the labels' own.

    >>> [round(float(v), 3) for v in object_weights([_E("a", True), _E("a", True),
    ...     _E("b", False), _E("c", False)])]
    [0.75, 0.75, 0.75, 0.75]
    """
    per: dict[str, int] = {}
    for e in ex:
        per[e.group] = per.get(e.group, 0) + 1
    n = len(ex)
    n_obj = len(per)
    out = np.empty(n)
    for cls in (True, False):
        idx = [i for i, e in enumerate(ex) if bool(e.label) is cls]
        if not idx:
            continue
        objs = {ex[i].group for i in idx}
        total = n_obj * len(idx) / n  # the class's share of the weight
        for i in idx:
            out[i] = total / (len(objs) * per[ex[i].group])
    return out


class _E:
    """A minimal example (for the doctest)."""

    def __init__(self, group: str, label: bool) -> None:
        self.group, self.label = group, label


def map_logistic(
    design: np.ndarray,
    y: np.ndarray,
    centre: np.ndarray,
    sd: np.ndarray,
    bounds: list,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Maximum a posteriori logistic regression: Gaussian prior N(centre, sd^2) per
    coefficient, box bounds (the monotone signs), each label's likelihood weighted by
    `weight`, by L-BFGS-B."""
    w = np.ones(len(y)) if weight is None else np.asarray(weight, float)
    from scipy.optimize import minimize

    inv = 1.0 / sd**2

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = design @ theta
        # log(1 + e^z) - y z, written to stay finite for any z
        nll = float(np.sum(w * (np.logaddexp(0.0, z) - y * z)))
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        d = theta - centre
        return nll + 0.5 * float(np.sum(inv * d * d)), design.T @ (w * (p - y)) + inv * d

    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    got = minimize(loss, np.clip(centre, lo, hi), jac=True, method="L-BFGS-B", bounds=bounds)
    return np.asarray(got.x, float)


def fit_model(
    kind: str, ex: list[Any], feats: list[str] | None = None, raw: np.ndarray | None = None
) -> TaskModel:
    """One task's model of `kind` fitted on `ex` (examples of one task); `raw`, where
    given, is `feature_matrix(ex, feats)` read once by the caller."""
    task = ex[0].task
    a0, b0 = rules_constants(task)
    keep = [i for i, e in enumerate(ex) if not e.capped] or list(range(len(ex)))
    use = [ex[i] for i in keep]  # capped verdicts stay capped anyway
    x = np.array([e.x for e in use], float)
    y = np.array([float(e.label) for e in use])
    n_lab = len(ex)
    weight = object_weights(use)
    if kind == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(x, y)
        return TaskModel("isotonic", knots_x=[float(v) for v in iso.X_thresholds_],
                         knots_y=[float(v) for v in iso.y_thresholds_], labels=n_lab)  # fmt: skip
    slope_sd = max(abs(a0) * PRIOR_SLOPE, 0.1)
    if kind == "platt":
        design = np.column_stack([x, np.ones_like(x)])
        theta = map_logistic(design, y, np.array([a0, b0]), np.array([slope_sd, PRIOR_INTERCEPT]),
                             [(0.0, None), (None, None)], weight)  # fmt: skip
        return TaskModel("platt", a=float(theta[0]), b=float(theta[1]), labels=n_lab)
    if kind != "combiner":
        raise ValueError(f"unknown model kind {kind!r}")
    feats = list(feats if feats is not None else task_features(task))
    raw = feature_matrix(use, feats) if raw is None else np.asarray(raw, float)[keep]
    measured = np.isfinite(raw).sum(axis=0) >= 2
    mean = np.zeros(len(feats))
    sd = np.ones(len(feats))
    if measured.any():
        mean[measured] = np.nanmean(raw[:, measured], axis=0)
        sd[measured] = np.nanstd(raw[:, measured], axis=0)
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    z = np.nan_to_num((raw - mean) / sd, nan=0.0)
    sign = directions(x, raw)
    bounds = [(0.0, None), (None, None)]
    for j in range(len(feats)):
        if not measured[j]:
            bounds.append((0.0, 0.0))  # a measurement never made gets no weight
        elif sign[j] > 0:
            bounds.append((0.0, None))
        elif sign[j] < 0:
            bounds.append((None, 0.0))
        else:
            bounds.append((None, None))
    design = np.column_stack([x, np.ones_like(x), z])
    centre = np.concatenate([[a0, b0], np.zeros(len(feats))])
    scale = np.concatenate([[slope_sd, PRIOR_INTERCEPT], np.full(len(feats), PRIOR_WEIGHT)])
    theta = map_logistic(design, y, centre, scale, bounds, weight)
    return TaskModel("combiner", a=float(theta[0]), b=float(theta[1]), features=feats,
                     mean=[float(v) for v in mean], scale=[float(v) for v in sd],
                     weights=[float(v) for v in theta[2:]], labels=n_lab)  # fmt: skip


def kinds_for(n_pos: int, n_neg: int, n: int, min_labels: int) -> list[str]:
    """The kinds the labels can carry: Platt always, the combiner from `min_labels`
    labels, isotonic only from ISOTONIC_MIN of each class."""
    kinds = ["platt"]
    if n >= min_labels:
        kinds.append("combiner")
    if min(n_pos, n_neg) >= ISOTONIC_MIN:
        kinds.append("isotonic")
    return kinds


def predict(tm: TaskModel, ex: list[Any], raw: np.ndarray | None = None) -> np.ndarray:
    """P(YES) of `tm` for each example (the cap kept), as `TaskModel.p_yes` gives it, in
    arrays; `raw`, where given, is `feature_matrix(ex, tm.features)`."""
    x = np.array([e.x for e in ex], float)
    p_rules = np.array([e.p_rules for e in ex], float)
    capped = np.array([bool(e.capped) for e in ex])
    if tm.kind == "combiner" and raw is None:
        raw = feature_matrix(ex, tm.features)
    return predict_arrays(tm, x, p_rules, capped, raw)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))  # clamped as `sigmoid` is


def predict_arrays(
    tm: TaskModel, x: np.ndarray, p_rules: np.ndarray, capped: np.ndarray, raw: Any = None
) -> np.ndarray:
    """`predict` from the examples' arrays: the rules' input, P(YES) and cap, and for a
    combiner its features' matrix (NaN where not measured)."""
    if tm.kind == "rules":
        return np.asarray(p_rules, float).copy()
    if tm.kind == "platt":
        p = _sigmoid(tm.a * x + tm.b)
    elif tm.kind == "isotonic":
        p = np.clip(np.interp(x, tm.knots_x, tm.knots_y), 1e-4, 1 - 1e-4)
    elif tm.kind == "combiner":
        raw = np.asarray(raw, float).reshape(len(x), len(tm.features))
        mean, scale = np.asarray(tm.mean, float), np.asarray(tm.scale, float)
        ok = np.isfinite(raw) & (scale > 0)  # what was not measured moves nothing
        z = np.where(ok, (raw - mean) / np.where(scale > 0, scale, 1.0), 0.0)
        p = _sigmoid(tm.a * x + tm.b + z @ np.asarray(tm.weights, float))
    else:
        raise ValueError(f"unknown model kind {tm.kind!r}")
    p = np.where(capped, np.minimum(p, VETO_CAP), p)
    if tm.weight < 1.0:
        p = blend_arrays(p_rules, p, tm.weight)
    return np.where(capped, np.minimum(p, VETO_CAP), p)


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)), p clamped to [1e-6, 1 - 1e-6] (as `learned.logit`)."""
    p = np.clip(np.asarray(p, float), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def blend_arrays(p_rules: np.ndarray, p_learned: np.ndarray, weight: float) -> np.ndarray:
    """`learned.blend` over arrays: the two pooled in the log-odds at `weight`."""
    if weight <= 0.0:
        return np.asarray(p_rules, float).copy()
    return _sigmoid((1.0 - weight) * logit(p_rules) + weight * logit(p_learned))
