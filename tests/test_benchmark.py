"""The survey benchmark: real library spectra in LAMOST, SDSS and DESI layouts, split by object."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from agent.formats import load_one
from training import benchmark
from training.benchmark.sources import _observe_source

SPECTRA = benchmark.DEFAULT_SPECTRA
pytestmark = pytest.mark.skipif(
    not (SPECTRA / "manifest.csv").exists(), reason="../shared/spectra is not available"
)


def test_hard_negatives_named_by_the_paper_are_planned():
    sources = benchmark.load_sources(SPECTRA)
    tasks = benchmark.plan(sources)
    neg: dict[str, set[str]] = defaultdict(set)
    for s in sources:
        for t, lbl in tasks.get(s.key, []):
            if lbl == "NO":
                neg[t].add(s.label)
    assert {"fgk_giant", "m_dwarf", "s_type"} <= neg["m_giant"]
    assert {"ob_star", "hot_subdwarf", "a_star", "qso"} <= neg["wd"]
    assert "m_giant" in neg["s_type"] and "m_giant" in neg["carbon"]
    assert {"emission_star", "m_dwarf", "qso"} <= neg["cv"]
    assert {"qso", "galaxy"} <= neg["carbon"]
    # The stars a survey is made of are negatives for every task, every one of them.
    ordinary = [s for s in sources if s.label in ("a_star", "fgk_dwarf", "fgk_giant")]
    assert len({s.obj for s in ordinary if s.label == "fgk_dwarf"}) > 100
    for s in ordinary:
        assert {t for t, lbl in tasks[s.key] if lbl == "NO"} == set(benchmark.TASK_NAMES)
        pairs = benchmark.observations(s, benchmark.SNRS, benchmark.LAYOUTS)
        assert [snr for _, snr in pairs] == list(benchmark.SNRS)  # once per SNR, one layout


def test_ordinary_stars_are_named_by_type_and_counted_in_the_survey_report():
    from training.benchmark.report import Row, survey_stats
    from training.evaluate import Scored

    assert benchmark.ordinary_class("fgk_giant", "HD216174 K1 III") == "K giant"
    assert benchmark.ordinary_class("fgk_dwarf", "sdF5") == "F dwarf"
    assert benchmark.ordinary_class("ob_star", "B2V") == ""
    rows = [Row(Scored("wd", True, i < 8, None), "sdss", "8", f"p{i}", "wd") for i in range(10)]
    rows += [
        Row(Scored("wd", False, i < 2, None), "sdss", "8", f"n{i}", "fgk_dwarf", "K dwarf")
        for i in range(100)
    ]
    s = survey_stats(rows)["wd"]
    assert s["fgk_fpr"] == 0.02 and s["n_fgk"] == 100
    # 1 in 100: 0.8 / (0.8 + 99 x 0.02)
    assert s["precision"][100] == pytest.approx(0.8 / (0.8 + 0.99 * 2.0), rel=1e-6)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    paths = benchmark.build(out, SPECTRA, snrs=(8.0,), max_objects=1)
    return out, {sp: list(csv.DictReader(open(p))) for sp, p in paths.items()}


def test_small_build_has_every_layout_and_splits_by_object(small):
    out, rows = small
    objs = {sp: {r["object"] for r in rs} for sp, rs in rows.items()}
    assert not objs["tune"] & objs["test"]
    for rs in rows.values():
        assert {r["layout"] for r in rs} == {"lamost", "sdss", "desi"}
        assert {r["label"] for r in rs} == {"YES", "NO"}
    for r in rows["test"][:: max(1, len(rows["test"]) // 12)]:
        s = load_one(out / "test" / r["path"])
        assert s.meta.survey == {"lamost": "simulated", "sdss": "SDSS", "desi": "DESI"}[r["layout"]]
        # Neutral names: neither the file nor the id gives the class away.
        assert r["class"] not in r["path"] and r["class"] not in r["id"].split(":")[0]


def test_extragalactic_templates_are_observed_redshifted(tmp_path):
    sources = benchmark.load_sources(SPECTRA)
    qso = next(s for s in sources if s.label == "qso" and s.template)
    job = (qso, SPECTRA, tmp_path, "test", [("wd", "NO")], [("sdss", 20.0)], 2, 0)
    rows, problems = _observe_source(job)
    assert not problems and len(rows) == 2
    for r in rows:
        z = float(r["z"])
        assert 0.3 <= z <= 2.6
        assert load_one(tmp_path / "test" / r["path"]).redshift == pytest.approx(z, abs=0.01)


def test_calibrated_section_fits_on_tune_and_vets_test_with_the_model(small):
    """tune labels -> fitted inspector model file -> the runner vets test with it -> goals."""
    import json

    from agent.policies.rules.learned import load
    from training.benchmark.report import calibrated_section

    out, rows = small
    md, stats = calibrated_section(out, n_boot=20)
    model = load(out / "inspector-model.json")
    assert set(model.tasks) == {r["task"] for r in rows["tune"]}
    text = "\n".join(md)
    assert "| macro-F1, five tasks | >= 0.90 |" in text and "contradict their verdict" in text
    results = list((out / "eval-test-calibrated").glob("*.jsonl"))
    trajs = [json.loads(line) for p in results for line in p.open()]
    assert len(trajs) == len(rows["test"])
    assert {t["model"] for t in trajs} == {str(out / "inspector-model.json")}
    assert 0.0 <= stats["layout"]["all"]["macro_f1"] <= 1.0


def test_tune_examples_and_scores_are_the_same_over_two_processes(small):
    from training.benchmark.tuning import labelled_examples, score_catalog

    out, rows = small
    cat = out / "tune" / "catalog.csv"
    one, two = labelled_examples(cat, workers=1), labelled_examples(cat, workers=2)
    assert [(e.task, e.group, e.label, e.x, e.p_rules) for e in one] == [
        (e.task, e.group, e.label, e.x, e.p_rules) for e in two
    ]
    assert [(e.task, e.group) for e in one] == [
        (r["task"], r["object"]) for r in rows["tune"]
    ]  # the catalogue's row order
    assert score_catalog(cat, workers=2) == score_catalog(cat, workers=1)
