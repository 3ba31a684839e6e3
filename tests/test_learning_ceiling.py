"""The learning ceiling (`bench/learning_ceiling.py`): what it measures holds together, and
its figures in docs/accuracy.md survive a regeneration of the learning curve."""

from __future__ import annotations

import math

import numpy as np

from annotate.learning.fit import Example
from bench import learning_ceiling, learning_curve


def _examples(task: str, pos_objects: int, neg_objects: int, per: int = 4, seed: int = 0):
    """Spectra of whole objects: the rules' input x falls as tio5 rises (so the rules give
    tio5 a negative direction), and an object is a positive where its tio5 is low."""
    rng = np.random.default_rng(seed)
    out = []
    for o in range(pos_objects + neg_objects):
        pos = o < pos_objects
        level = rng.uniform(0.2, 0.5) if pos else rng.uniform(0.5, 1.0)
        for _ in range(per):
            tio5 = level + rng.normal(0, 0.03)
            x = 2.0 - 3.0 * tio5 + rng.normal(0, 0.3)
            m = {"tio5": tio5, "snr": float(rng.uniform(8, 30)), "cah2": float(rng.normal())}
            p = 1 / (1 + math.exp(-(2 * x - 1)))
            out.append(Example(task, pos, f"{task}-{o}", x, p, m))
    return out


def test_the_monotone_boosting_keeps_the_direction_the_rules_give():
    ex = _examples("m_giant", 12, 30)
    probe = []
    for v in np.linspace(0.1, 1.1, 21):
        e = Example("m_giant", False, "probe", 0.5, 0.5, {"tio5": float(v), "snr": 15.0})
        probe.append(e)
    feats = ["tio5", "snr", "cah2"]
    p = learning_ceiling.fit_predict("hgb_monotone", ex, probe, feats, feats)
    # tio5 lowers the rules' evidence: more tio5 may never raise P(YES)
    assert np.all(np.diff(p) <= 1e-12), p
    assert p[0] > p[-1]


def test_a_task_with_one_positive_object_is_not_scored_and_says_why():
    r = learning_ceiling.task_cv(_examples("s_type", 1, 20), repeats=1, folds=5,
                                 importance=False)  # fmt: skip
    assert "platt" not in r and "hgb_monotone" not in r
    assert r["why"].startswith("1 positive object(s)")
    said = " ".join(learning_ceiling.limits({t: r for t in learning_ceiling.TASKS}, {}))
    assert "data is the limit" in said and "+0.000" in said


def test_the_ceiling_block_survives_regenerating_the_curve(tmp_path):
    doc = tmp_path / "accuracy.md"
    doc.write_text("# figures\n\n" + learning_curve.MARKER + "\n## old curve\n\n| 0 | 0.5 |\n")
    block = [learning_ceiling.BLOCK, "### What limits the gain", "", "m_giant +0.055",
             learning_ceiling.BLOCK_END]  # fmt: skip
    learning_ceiling.write_block(doc, block)
    res = {"tasks": ["wd"], "rules": {"wd": 0.9}, "rules_ece": 0.01, "n_boot": 10,
           "sizes": {0: {"f1": {"wd": [0.9]}, "delta": {"wd": [0.0]}, "weight": {"wd": [0.0]},
                         "macro": [0.9], "ece": [0.01], "positives": {"wd": [0]},
                         "objects": {"wd": [0]}, "labels": {"wd": [0]}, "n": [0],
                         "status": {"wd": ["waited"]}, "interval": {"wd": [0.0, 0.0]}}}}  # fmt: skip
    learning_curve.write_section(doc, {"random": res}, None, "python bench/learning_curve.py")
    text = doc.read_text()
    assert "## old curve" not in text and "learning curve (test split)" in text
    assert text.count(learning_ceiling.BLOCK) == 1 and "m_giant +0.055" in text
    # a new ceiling run replaces its block in place, once
    learning_ceiling.write_block(doc, [*block[:3], "m_giant +0.060", block[-1]])
    again = doc.read_text()
    assert again.count(learning_ceiling.BLOCK) == 1
    assert "m_giant +0.060" in again and "+0.055" not in again
    assert again.index(learning_curve.MARKER) < again.index(learning_ceiling.BLOCK)
