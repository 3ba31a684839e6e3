"""The rule-based inspector's model, fitted from the experts' labels (`launch.py calibrate`).

A model run's P(YES) is calibrated elsewhere (`annotate.learning.run_calibration`); this module fits
the inspector itself, from its own measurements.

    python launch.py calibrate --db data/loupe.db
    python launch.py vet --catalog labels.csv --policy rules --db data/loupe.db  # uses it

Labels come from the store: expert reviews and adjudications, imported labels (recorded as
reviews), gold items and catalogue labels; the agent's own auto-accepted verdicts are not
labels and are left out. For each labelled candidate the inspector's measurements are read
from its stored trajectory (its final step keeps what a model reads), or taken again from
its spectrum where the trajectory lacks them (another policy's, or an older run).

Per task (`fit`, through `annotate.learning.evidence.blend_task`): a task with too few
labels of either class waits and says what for; otherwise each model the labels can carry
(`annotate.learning.models`: a Platt map and a sign-constrained logistic combiner over the
task's measurements, both shrunk towards the rules by a prior; isotonic only with hundreds
of each class) is refitted on repeated folds grouped by object, and the task serves that
model blended with the plain rules at the weight the out-of-fold evidence supports (0 with
little evidence, growing with it), where nested cross-validation shows the blend no worse
than the rules on objects held out of its choice.

The fitted model is versioned: stored in the store's settings (`inspector_model`) and
written as JSON (`--out`). `vet --db` and the app's vetting use the store's current model
for the rules policy (`--model FILE` another, `--model none` the plain rules), and every
verdict records the version (the run's model and parameters, and `inspector_version` in the
final step's measurements). The command reports the cross-validated before/after per task.
`annotate.learning.schedule` runs the same fit on a schedule while experts work (and on the
Dashboard's button), adopting a version where a task's blend moved.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import LoupeError
from agent.policies.rules.learned import InspectorModel, TaskModel, readable


@dataclass
class Example:
    """One labelled decision as the learner sees it."""

    task: str
    label: bool
    group: str  # source object: folds never split one object
    x: float  # the rules' calibration input
    p_rules: float
    m: dict[str, float]
    capped: bool = False  # the rules held P(YES) at VETO_CAP; a fitted model keeps that


def examples_from_spectra(items: Sequence[tuple[Any, str, bool, str]]) -> list[Example]:
    """(spectrum, task, label, group) -> examples, measuring each spectrum once."""
    from agent.policies.rules import inspect, measure_all

    cache: dict[int, dict[str, float]] = {}
    out = []
    for spec, task, label, group in items:
        m = cache.get(id(spec))
        if m is None:
            m = cache[id(spec)] = measure_all(spec)
        v = inspect(spec, task, m)
        out.append(Example(v.task, label, group, v.x, v.p_yes, m, bool(v.capped)))
    return out


def expert_labels(store: Any) -> list[tuple[Any, str]]:
    """(candidate info, "YES"/"NO") for every candidate an expert decision labels: reviews,
    adjudications and imported labels first, else gold or catalogue labels; the agent's own
    auto-accepted verdicts are not labels."""
    infos = {c.id: c for c in store.labelled_candidates() if c.label_source != "auto"}
    for cid in store.reference_labelled_ids():
        infos.setdefault(cid, store.candidate(cid))
    out = []
    for c in infos.values():
        label = c.label if c.label_source not in (None, "auto") else c.gold_label or c.known_label
        if label in ("YES", "NO"):
            out.append((c, label))
    return out


def labelled_from_store(store: Any) -> tuple[list[Example], list[str]]:
    """Every usable labelled decision in the store, and the problems met (one per item).

    A candidate whose shown trajectory stored what a model reads (the rules inspector's
    final step: `annotate.learning.rescore.INPUTS` and the measurements) is learned from those
    values; the others' spectra are measured again."""
    from agent.formats import load_one
    from annotate.learning.rescore import INPUTS

    labels = expert_labels(store)
    stored = store.final_measurements([c.id for c, _ in labels])
    items, problems, ready = [], [], []
    loaded: dict[tuple, Any] = {}
    for c, label in labels:
        meas = stored.get(c.id) or {}
        if all(isinstance(meas.get(k), int | float) for k in INPUTS):
            ready.append(Example(c.task, label == "YES", c.object_id or c.key,
                                 float(meas["calibration_input"]), float(meas["p_rules"]),
                                 meas, float(meas["capped"]) > 0))  # fmt: skip
            continue
        ref = c.spectrum_ref
        key = (ref.get("path"), ref.get("hdu"), ref.get("row"))
        try:
            if key not in loaded:
                hdu = ref.get("hdu")
                hdu = int(hdu) if isinstance(hdu, str) and hdu.isdigit() else hdu
                loaded[key] = load_one(Path(ref["path"]), hdu=hdu, row=ref.get("row"))
            items.append((loaded[key], c.task, label == "YES", c.object_id or c.key))
        except Exception as exc:  # an unreadable file is reported, the rest still learn
            problems.append(f"{c.key} ({c.task}): {exc}")
    return ready + examples_from_spectra(items), problems


# -- fitting ---------------------------------------------------------------------------------


def task_features(task: str) -> list[str]:
    """The measurements the task's own zooms quote: what a combiner may lean on."""
    from agent.policies.rules import task_module

    keys: list[str] = []
    for z in task_module(task).ZOOMS:
        keys += [k for k in z.keys if k not in keys]
    return keys


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _f1(p: np.ndarray, y: np.ndarray) -> float:
    pred = p > 0.5
    tp = float(np.sum(pred & (y == 1)))
    den = 2 * tp + float(np.sum(pred & (y == 0))) + float(np.sum(~pred & (y == 1)))
    return 2 * tp / den if den else 0.0


def _fit(kind: str, ex: list[Example], feats: list[str]) -> TaskModel:
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    x = np.array([e.x for e in ex])
    y = np.array([int(e.label) for e in ex])
    if kind == "platt":
        lr = LogisticRegression(C=10.0).fit(x[:, None], y)
        return TaskModel("platt", a=float(lr.coef_[0, 0]), b=float(lr.intercept_[0]))
    if kind == "isotonic":
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(x, y)
        return TaskModel(
            "isotonic",
            knots_x=[float(v) for v in iso.X_thresholds_],
            knots_y=[float(v) for v in iso.y_thresholds_],
        )
    seen_m = [readable(e.m) for e in ex]  # what the model will read at inference
    raw = np.array([[m.get(k, math.nan) for k in feats] for m in seen_m], dtype=float)
    raw[~np.isfinite(raw)] = np.nan
    seen = np.isfinite(raw).any(axis=0)  # a measurement never made gets no weight
    mean = np.zeros(len(feats))
    sd = np.ones(len(feats))
    mean[seen] = np.nanmean(raw[:, seen], axis=0)
    sd[seen] = np.nanstd(raw[:, seen], axis=0)
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    z = np.nan_to_num((raw - mean) / sd, nan=0.0)
    lr = LogisticRegression(C=0.3, max_iter=500).fit(np.column_stack([x, z]), y)
    return TaskModel(
        "combiner",
        a=float(lr.coef_[0, 0]),
        b=float(lr.intercept_[0]),
        features=list(feats),
        mean=[float(v) for v in mean],
        scale=[float(v) for v in sd],
        weights=[float(v) for v in lr.coef_[0, 1:]],
    )


def _n_objects(ex: list[Example]) -> int:
    """Distinct objects in the rarer class."""
    pos = {e.group for e in ex if e.label}
    neg = {e.group for e in ex if not e.label}
    return min(len(pos), len(neg))


def _folds(ex: list[Example], k: int, seed: int) -> list[np.ndarray]:
    """Test-index arrays, grouped by object: one object's spectra never sit on both sides.

    Splitting one star's realisations across folds would let a learner memorise the star
    and look better than the rules on exactly the spectra it has seen.
    """
    from annotate.learning.evidence import fold_sets

    return fold_sets(ex, k, repeats=1, seed=seed)[0]


def fit_task(
    ex: list[Example], min_labels: int = 50, folds: int = 5, seed: int = 0
) -> tuple[TaskModel, dict[str, Any]]:
    """A model run's calibration (`annotate.learning.run_calibration`: the run's own P(YES) as
    input, no rules prior to shrink towards) and its cross-validated comparison with the raw
    P(YES). The inspector itself is fitted by `fit`."""
    y = np.array([int(e.label) for e in ex])
    n_pos, n = int(y.sum()), len(y)
    report: dict[str, Any] = {"n": n, "positives": n_pos, "chosen": "rules"}
    p_rules = np.array([e.p_rules for e in ex])
    report["rules"] = {"log_loss": _log_loss(p_rules, y), "f1": _f1(p_rules, y)}
    if n_pos < 3 or n - n_pos < 3:
        report["why"] = "fewer than 3 labels of one class"
        return TaskModel("rules"), report
    if _n_objects(ex) < 3:
        report["why"] = (
            f"{_n_objects(ex)} object(s) in the rarer class: cross-validation cannot hold "
            "objects out"
        )
        return TaskModel("rules"), report
    from annotate.learning.models import ISOTONIC_MIN

    # a monotone step map fitted to a handful of one class memorises those objects
    iso = ["isotonic"] if min(n_pos, n - n_pos) >= ISOTONIC_MIN else []
    kinds = ["platt", *iso] + (["combiner"] if n >= min_labels else [])
    if n < min_labels:
        report["why"] = f"{n} labels: calibration only (a combiner needs {min_labels})"
    feats = task_features(ex[0].task)
    test_sets = _folds(ex, folds, seed)
    for kind in kinds:
        oof = np.empty(n)
        for te in test_sets:
            tr = np.setdiff1d(np.arange(n), te)
            if len(set(y[tr])) < 2:
                oof[te] = p_rules[te]
                continue
            tm = _fit(kind, [ex[i] for i in tr], feats)
            oof[te] = [tm.p_yes(ex[i].x, ex[i].m, ex[i].p_rules, ex[i].capped) for i in te]
        report[kind] = {"log_loss": _log_loss(oof, y), "f1": _f1(oof, y)}
    best = min(kinds, key=lambda k: report[k]["log_loss"])
    r = report["rules"]
    # Switched on only where it beats the rules: clearly lower log-loss, F1 no lower.
    if report[best]["log_loss"] < 0.95 * r["log_loss"] and report[best]["f1"] >= r["f1"]:
        report["chosen"] = best
        return _fit(best, ex, feats), report
    return TaskModel("rules"), report


def fit(
    examples: list[Example],
    version: int,
    min_labels: int = 50,
    folds: int = 5,
    seed: int = 0,
    current: InspectorModel | None = None,
    **blend: Any,
) -> InspectorModel:
    """The next version: per task, the blend of a learned model with the rules that the
    labels support (`annotate.learning.evidence.blend_task`); a task with no labels here,
    or too few, keeps its model in `current` (else the plain rules)."""
    from annotate.learning.evidence import blend_task

    by: dict[str, list[Example]] = {}
    for e in examples:
        by.setdefault(e.task, []).append(e)
    tasks = dict(current.tasks) if current is not None else {}
    info = {}
    for t in sorted(by):
        tasks[t], info[t] = blend_task(by[t], tasks.get(t), min_labels=min_labels,
                                       folds=folds, seed=seed, **blend)  # fmt: skip
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return InspectorModel(version, tasks, created, {"cv": info})


CV_HEADERS = ["task", "n", "positives", "serves", "weight", "rules log-loss", "rules F1",
              "after log-loss", "after F1", "note"]  # fmt: skip


def after_scores(r: dict[str, Any]) -> dict[str, float]:
    """The out-of-fold scores of what the task serves after the fit: the blend's nested
    scores where it blends, else the rules'."""
    return r["blend"] if r.get("status") == "blended" else r["rules"]


def cv_rows(model: InspectorModel) -> list[list[Any]]:
    """Per task, the out-of-fold rules (before) and what serves after, with why."""
    rows = []
    for t, r in model.info["cv"].items():
        got = after_scores(r)
        tm = model.tasks.get(t)
        served = tm.kind if tm is not None else "rules"
        weight = tm.weight if tm is not None and tm.kind != "rules" else 0.0
        said = f"{r.get('status', '')}: {r.get('why', '')}".strip(": ")
        rows.append([t, r["n"], r["positives"], served, round(weight, 2),
                     round(r["rules"]["log_loss"], 3), round(r["rules"]["f1"], 3),
                     round(got["log_loss"], 3), round(got["f1"], 3), said])  # fmt: skip
    return rows


def cv_table(model: InspectorModel) -> str:
    lines = [
        "task      n  pos  serves    weight  rules logloss/F1   after logloss/F1   what and why",
    ]
    for t, n, pos, c, w, rl, rf, cl, cf, why in cv_rows(model):
        lines.append(
            f"{t:8s} {n:4d} {pos:4d}  {c:8s}  {w:5.2f}   {rl:.3f} / {rf:.2f}      "
            f"{cl:.3f} / {cf:.2f}        {why}"
        )
    return "\n".join(lines)


class NoLabels(LoupeError):
    """The store holds no labelled decision to learn from."""


def inspector_dir(export_dir: str | Path = "exports") -> Path:
    """Where a fitted inspector's JSON goes: `inspector/` in the export folder, for
    `launch.py calibrate` and the Dashboard's Calibrate alike."""
    return Path(export_dir) / "inspector"
