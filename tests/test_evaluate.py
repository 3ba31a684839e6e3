"""Evaluation metrics against hand-computed values, and the command end to end."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from training.evaluate import (
    Scored,
    confusion,
    ece,
    f1_score,
    hitl_curve,
    macro_f1,
    metrics,
    prf,
    reliability,
)


def test_prf_and_f1_by_hand():
    y = [1, 1, 1, 0, 0, 0, 0, 1]
    p = [1, 0, 1, 1, 0, 0, 0, 1]
    c = confusion([bool(v) for v in y], [bool(v) for v in p])
    assert c == {"tp": 3, "fn": 1, "fp": 1, "tn": 3}
    r = prf(c)
    assert r["precision"] == pytest.approx(0.75) and r["recall"] == pytest.approx(0.75)
    assert r["f1"] == pytest.approx(0.75) and r["accuracy"] == pytest.approx(0.75)
    assert f1_score(y, p) == pytest.approx(0.75)
    assert prf({"tp": 0, "fn": 0, "fp": 0, "tn": 5})["f1"] == 0.0
    assert macro_f1({"a": 0.5, "b": 1.0, "c": 0.0}) == pytest.approx(0.5)


def test_ece_by_hand():
    # Two bins: p=0.2 (4 items, 1 YES: rate .25) and p=0.9 (4 items, 2 YES: rate .5)
    probs = [0.2] * 4 + [0.9] * 4
    labels = [True, False, False, False, True, True, False, False]
    assert ece(probs, labels) == pytest.approx(0.5 * 0.05 + 0.5 * 0.4)
    bins = reliability(probs, labels)
    assert [b["n"] for b in bins] == [4, 4]
    assert ece([], []) == 0.0


def test_hitl_curve_reaches_perfect_when_all_doubtful_go_to_experts():
    rng = np.random.default_rng(0)
    items = []
    for i in range(100):
        y = bool(i % 3 == 0)
        wrong = i % 10 == 0
        verdict = (not y) if wrong else y
        p = 0.55 if wrong else (0.95 if verdict else 0.05)
        items.append(Scored("t" if i % 2 else "u", y, verdict, p))
    rng.shuffle(items)
    curve = hitl_curve(items, ks=(0, 10, 50))
    assert curve[0]["macro_f1"] < 0.95
    assert curve[1]["macro_f1"] == pytest.approx(1.0)  # the 10 wrong ones are the least sure
    assert curve[2]["to_experts"] == 50


def test_metrics_counts_missing_verdicts_and_format_errors():
    items = [
        Scored("cv", True, True, 0.9, zooms=3, seconds=0.2),
        Scored("cv", True, None, None, format_ok=False, zooms=1, seconds=0.4),
        Scored("cv", False, False, 0.2, zooms=2, seconds=0.3),
    ]
    m = metrics(items)
    assert m["per_task"]["cv"]["fn"] == 1 and m["per_task"]["cv"]["tp"] == 1
    assert m["format_error_rate"] == pytest.approx(1 / 3)
    assert m["zooms_per_candidate"] == pytest.approx(2.0)
    assert m["seconds_per_spectrum"] == pytest.approx(0.3)


def test_evaluate_command_runs_rules_and_joins_results(tmp_path):
    import launch
    from agent.formats import write_lamost_fits
    from agent.spectrum import Spectrum
    from training.degrade import degrade

    w = np.arange(3600.0, 9300.0, 0.5)
    hot = (w / 5000.0) ** -2.5
    da = hot.copy()
    for c in (6564.6, 4862.7, 4341.7, 4102.9):
        da *= 1 - 0.55 * np.exp(-0.5 * ((w - c) / 30.0) ** 2)
    astar = hot.copy()
    for c in (6564.6, 4862.7, 4341.7, 4102.9):
        astar *= 1 - 0.6 * np.exp(-0.5 * ((w - c) / 6.0) ** 2)
    rows = []
    for i, (f, lab) in enumerate([(da, "YES"), (astar, "NO"), (da, "YES"), (astar, "NO")]):
        s = degrade(Spectrum(w, f), snr=30, rng=i)
        write_lamost_fits(s, tmp_path / f"s{i}.fits")
        rows.append({"path": f"s{i}.fits", "task": "wd", "id": f"s{i}", "label": lab, "snr": 30})
    cat = tmp_path / "cat.csv"
    with open(cat, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    out = tmp_path / "eval"
    rc = launch.main(
        [
            "evaluate",
            "--catalog",
            str(cat),
            "--policy",
            "rules",
            "--workers",
            "1",
            "--by",
            "snr",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    rep = json.loads((out / "metrics.json").read_text())
    m = rep["overall"]["rules"]
    assert m["per_task"]["wd"]["f1"] == pytest.approx(1.0) and m["ece"] is not None
    assert (out / "reliability.png").stat().st_size > 1000 and (out / "hitl.png").exists()
    assert "macro-F1" in (out / "report.md").read_text() and "30" in rep["groups"]
    # The same results scored again from the JSONL, side by side under another name.
    rc = launch.main(
        [
            "evaluate",
            "--catalog",
            str(cat),
            "--results",
            f"again={out / 'rules.jsonl'}",
            "--out",
            str(tmp_path / "eval2"),
        ]
    )
    assert rc == 0
    rep2 = json.loads((tmp_path / "eval2" / "metrics.json").read_text())
    assert rep2["overall"]["again"]["macro_f1"] == pytest.approx(m["macro_f1"])


def test_evaluate_refuses_unlabelled_sets(tmp_path):
    import launch

    cat = tmp_path / "c.csv"
    cat.write_text("path,task\nx.fits,wd\n")
    assert launch.main(["evaluate", "--catalog", str(cat), "--out", str(tmp_path / "o")]) == 2
