"""Learning from the benchmark's tune split: refitting the inspector's per-task logistic
calibration (`python -m training.benchmark --fit-calibration` prints the constants for
`agent.policies.rules.calibration`) and fitting the inspector model that `launch.py
calibrate` fits from experts' decisions (`labelled_examples`, `fit_inspector_model`)."""

from __future__ import annotations

import csv
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

DEFAULT_WORKERS = min(2, os.cpu_count() or 1)


def _per_file(catalog: Path, fn, workers: int) -> list:
    """fn(path, rows) for each spectrum file of a catalogue (a file stands behind one row
    per task, so it is read and measured once), over `workers` processes; the results come
    back in the catalogue's row order."""
    with open(catalog, newline="") as fh:
        rows = list(csv.DictReader(fh))
    groups: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r["path"], []).append((i, r))
    jobs = [(str(catalog.parent / p), g) for p, g in groups.items()]
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(workers) as ex:
            done = list(ex.map(fn, *zip(*jobs), chunksize=16))
    else:
        done = [fn(*j) for j in jobs]
    out: list = [None] * len(rows)
    for (_, g), results in zip(jobs, done):
        for (i, _), res in zip(g, results):
            out[i] = res
    return out


def _examples_of(path: str, rows: list[tuple[int, dict[str, str]]]) -> list:
    from agent.formats import load_one
    from annotate.learning.fit import examples_from_spectra

    spec = load_one(path)
    return examples_from_spectra(
        [(spec, r["task"], r["label"] == "YES", r["object"]) for _, r in rows]
    )


def _scores_of(path: str, rows: list[tuple[int, dict[str, str]]]) -> list[dict]:
    from agent.formats import load_one
    from agent.policies.rules import inspect, measure_all

    spec = load_one(path)
    m = measure_all(spec)
    out = []
    for _, r in rows:
        v = inspect(spec, r["task"], m)
        ev = v.evidence
        out.append({**r, "score": ev.score, "coverage": ev.coverage, "x": v.x, "p_yes": v.p_yes})
    return out


def labelled_examples(catalog: Path, workers: int = DEFAULT_WORKERS) -> list:
    """The catalogue's labelled rows as `annotate.learning.fit` examples (grouped by object)."""
    return _per_file(catalog, _examples_of, workers)


def fit_inspector_model(catalog: Path, out: Path, min_labels: int = 50):
    """Fit the inspector model on a catalogue's labels as `calibrate` fits it on experts'
    decisions, and write it where `vet --policy rules --model` reads it."""
    import json

    from annotate.learning.fit import fit

    model = fit(labelled_examples(catalog), version=1, min_labels=min_labels)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(model.to_json(), indent=1))
    return model


def score_catalog(catalog: Path, workers: int = DEFAULT_WORKERS) -> list[dict]:
    """The inspector's raw evidence for every row of a catalogue (no conversation)."""
    return _per_file(catalog, _scores_of, workers)


def fit_slope(x: np.ndarray, y: np.ndarray, iters: int = 100) -> float:
    """Logistic regression y ~ sigmoid(a x) with the intercept held at 0 (Newton's method).

    >>> fit_slope(np.array([-2., -1., 1., 2., 0.5]), np.array([0, 0, 1, 1, 0])) > 0
    True
    """
    a = 1.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-a * x))
        g = float(np.sum((p - y) * x))
        h = float(np.sum(p * (1 - p) * x * x)) + 1e-6
        a = max(0.05, a - g / h)
        if abs(g / h) < 1e-8:
            break
    return float(a)


def fit_calibration(catalog: Path, min_objects: int = 5) -> dict[str, tuple[float, float]]:
    """Per-task (a, b) for p = sigmoid(a x + b), x the calibration's input as the inspector
    computes it (`Reading.x`: the score after any cap, shrunk by noise and missing coverage).

    The decision threshold stays at the physics (score 0, b = 0): with one to three
    positive objects per task in the tune split an intercept would be fitted to single
    stars. The slope (how sharp confidence grows with evidence) is fitted per task where
    the task has at least `min_objects` positive objects, otherwise pooled over tasks.
    """
    scored = score_catalog(catalog)
    xs = {t: [] for t in {r["task"] for r in scored}}
    for r in scored:
        xs[r["task"]].append((r["x"], r["label"] == "YES", r["object"]))
    pooled = fit_slope(
        np.array([x for v in xs.values() for x, _, _ in v]),
        np.array([float(y) for v in xs.values() for _, y, _ in v]),
    )
    out = {}
    for t, v in sorted(xs.items()):
        n_obj = len({o for _, y, o in v if y})
        if n_obj >= min_objects:
            out[t] = (
                fit_slope(np.array([x for x, _, _ in v]), np.array([float(y) for _, y, _ in v])),
                0.0,
            )
        else:
            out[t] = (pooled, 0.0)
    return out
