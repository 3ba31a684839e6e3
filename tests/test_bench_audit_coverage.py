"""`bench/audit_coverage.py` end to end on a small catalogue of text spectra: it vets them
once, runs the app's draw, queue, close and estimates per seed and share, and prints
coverage per task, figure and share, ending with `audit_coverage_min:`."""

from __future__ import annotations

import csv
import re

from tests.store_factory import write_text_spectrum


def test_coverage_bench_runs_on_a_small_catalogue(tmp_path, capsys):
    from bench import audit_coverage

    rows = []
    for i in range(24):
        write_text_spectrum(tmp_path / f"s{i}.csv", seed=i)
        rows.append([f"s{i}.csv", "", "wd", f"s{i}", "YES" if i % 6 == 0 else "NO"])
    cat = tmp_path / "catalog.csv"
    with open(cat, "w", newline="") as fh:
        csv.writer(fh).writerows([["path", "row", "task", "id", "label"], *rows])
    argv = ["--catalog", str(cat), "--seeds", "2", "--shares", "0.2,0.5",
            "--work", str(tmp_path / "work"), "--workers", "1"]  # fmt: skip
    assert audit_coverage.main(argv) == 0
    out = capsys.readouterr().out
    assert "catalogue: 24 candidates (wd 24 (4 YES))" in out
    assert "miscalibrated agent: odds of P(YES) on the NO list x 0.1" in out
    table = [[c.replace("band error", "band-error").split() for c in ln.split("|")]
             for ln in out.splitlines() if ln.startswith(("calibrated ", "miscalibrated "))]  # fmt: skip
    heads = [ln for ln in out.splitlines() if ln.startswith("agent ")]
    assert heads and "exact cover" in heads[-1] and "model-assisted cover" in heads[-1]
    cells = {(r[0][0], r[0][2], r[0][3]) for r in table}
    # both agents, every figure, both shares
    assert {a for a, _, _ in cells} == {"calibrated", "miscalibrated"}
    assert {f for _, f, _ in cells} == {"precision", "completeness", "ECE", "band-error"}
    assert {s for _, _, s in cells} == {"0.2", "0.5"}
    assert all(r[0][1] == "wd" for r in table)
    # each row: the two estimators side by side, the quoted one starred (band error: exact)
    for r in table:
        assert len(r) == 3 and sum(c[:1] == ["*"] for c in r[1:]) == 1, r
    assert "goals (the quoted estimators; worst case):" in out
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"audit_coverage_min: [01]\.\d{3}", last)
    assert len(list((tmp_path / "work").glob("vetted-*.db"))) == 1  # vetted once, reused
    assert (
        audit_coverage.main([*argv[:-4], "--shares", "0.2", "--work", str(tmp_path / "work")]) == 0
    )
    assert "audit_coverage_min:" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("path,task,id,label\ns0.csv,wd,s0,maybe\n")
    try:
        audit_coverage.main(["--catalog", str(bad)])
    except SystemExit as e:
        assert "line 2: label 'maybe' is not YES/NO" in str(e)
    else:
        raise AssertionError("a label that is not YES/NO must be refused")


def test_the_replay_engine_gives_the_store_campaign_figures(tmp_path):
    """`--engine replay` (the draw, answers, close and estimates without the store) gives
    the same records and figures as the campaign in a copy of the app's store, run by run:
    what lets the 200-seed run use it."""
    from bench import audit_coverage as ac

    rows = []
    for i in range(30):
        write_text_spectrum(tmp_path / f"s{i}.csv", seed=i)
        rows.append([f"s{i}.csv", "", "wd", f"s{i}", "YES" if i % 5 == 0 else "NO"])
    cat = tmp_path / "catalog.csv"
    with open(cat, "w", newline="") as fh:
        csv.writer(fh).writerows([["path", "row", "task", "id", "label"], *rows])
    read = ac.read_catalog(cat)
    truth = {(r["id"], r["task"]): r["label"] for r in read}
    vetted = tmp_path / "vetted.db"
    ac.vetted_store(read, vetted, 1)
    from db.store import Store

    store = Store(f"sqlite:///{vetted}", create=False)
    ac.key_of.update({r.id: store.candidate(r.id).key for r in store.audit_population()})
    store.close()
    for odds in (1.0, 0.1):
        base = tmp_path / f"agent-{odds}.db"
        ac.agent_store(vetted, base, truth, odds)
        rows_ = ac.base_rows(base, truth)
        for share, seed in ((0.3, 0), (0.5, 1)):
            recs, est = ac.store_run(base, tmp_path, share, seed, truth)
            again, est2 = ac.replay(rows_, share, seed)
            assert sorted(recs, key=lambda r: r.id) == sorted(again, key=lambda r: r.id)
            assert any(r.inclusion for r in recs)
            assert est == est2
            assert ac.judged(recs, est) == ac.judged(again, est2)
