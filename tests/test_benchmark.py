"""The survey benchmark: real library spectra in LAMOST, SDSS and DESI layouts, split by object."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

from agent.formats import load_one
from training import benchmark
from training.benchmark.sources import _observe_source

SPECTRA = Path(__file__).resolve().parents[2] / "shared" / "spectra"
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
    # K giants, not F/G supergiants, stand in as the M giants' warm contaminant.
    for s in sources:
        if s.label == "fgk_giant" and ("m_giant", "NO") in tasks.get(s.key, []):
            assert "K" in s.spectral_type.upper()


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
    job = (qso, SPECTRA, tmp_path, "test", [("wd", "NO")], ("sdss",), (20.0,), 2, 0)
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
