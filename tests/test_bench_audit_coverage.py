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
