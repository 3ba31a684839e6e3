"""`launch.py ingest`: files, folders, globs, catalogue CSVs and SpecVI parquet into the
store; bad files reported, the rest ingested; re-runs add nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import launch
from annotate.intake.ingest import collect, ingest
from db.store import Store
from tests import fits_factory
from tests.store_factory import write_text_spectrum


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    for i in range(3):
        write_text_spectrum(d / f"t{i}.csv", seed=i)
    fits_factory.write_sdss_spec(d)
    (d / "broken.fits").write_bytes(b"SIMPLE  =                    T" + b"\0" * 200)
    (d / "readme.md").write_text("not a spectrum")
    return d


def test_folder_ingests_good_files_and_reports_bad_ones(mem_store, folder):
    rep, errors = ingest(mem_store, [str(folder)], task="cv")
    assert rep.added == 4
    assert [(Path(w).name, "corrupt" in why) for w, why in errors] == [("broken.fits", True)]
    sdss = mem_store.find_candidate("1234-56789-0042", "cv")
    assert sdss is not None, [c.key for c in mem_store.list_candidates()]
    assert sdss.survey == "SDSS"
    spec_row = mem_store.find_candidate("t0").spectrum_id
    with mem_store.engine.connect() as c:
        h = c.exec_driver_sql(
            "SELECT content_hash FROM spectrum WHERE id = ?", (spec_row,)
        ).scalar()
    assert h.startswith("sha256:") and len(h) == 71
    rep2, _ = ingest(mem_store, [str(folder)], task="cv")
    assert (rep2.added, rep2.existing) == (0, 4)
    assert mem_store.count_candidates() == 4


def test_glob_and_missing_inputs(mem_store, folder):
    rep, errors = ingest(
        mem_store,
        [str(folder / "t*.csv"), str(folder / "nope*.fits"), str(folder / "absent.fits")],
        task="wd",
        read=False,
    )
    assert rep.added == 3
    assert [why for _, why in errors][0] == "glob matches no files"
    assert len(errors) == 2 and "absent.fits" in errors[1][0]


def test_catalogue_with_a_bad_line_keeps_the_good_lines(mem_store, folder, tmp_path):
    cat = tmp_path / "cat.csv"
    cat.write_text(
        "path,task,id,label,score,split\n"
        "data/t0.csv,cv,obj-a,YES,0.9,train\n"
        "data/missing.csv,cv,obj-b,NO,0.2,train\n"
        "data/t1.csv,wd,obj-c,,0.4,holdout\n"
        "data/t2.csv,cv,obj-d,maybe,0.1,train\n"
    )
    rep, errors = ingest(mem_store, [str(cat)], source_catalog="LAMOST CV list")
    assert rep.added == 2
    assert [(w.rsplit(" ", 1)[-1], why.split(":")[0]) for w, why in errors] == [
        ("3", "spectrum file not found"),
        ("5", "label 'maybe' is not YES/NO (or 1/0, true/false)"),
    ]
    a = mem_store.find_candidate("obj-a", "cv")
    assert (a.known_label, a.score, a.split, a.source_catalog) == (
        "YES",
        0.9,
        "train",
        "LAMOST CV list",
    )
    assert mem_store.find_candidate("obj-c", "wd").split == "holdout"


def test_specvi_parquet(mem_store, tmp_path):
    path = fits_factory.write_specvi_parquet(tmp_path)
    rep, errors = ingest(mem_store, [str(path)])
    assert (rep.added, errors) == (3, [])
    tasks = sorted(c.task for c in mem_store.list_candidates())
    assert tasks == ["cv", "cv", "m_giant"]
    c = mem_store.list_candidates(order="id")[0]
    assert c.spectrum_ref["row"] == 0 and c.known_label == "YES"
    assert c.source_catalog == "SpecVI-Bench"
    assert mem_store.load_spectrum(c.id).wavelength.size == 400


def test_collect_reports_per_source(folder):
    refs, errors = collect([str(folder / "t0.csv"), str(folder / "broken.fits")], "cv")
    assert [r.id for r in refs] == ["t0"] and len(errors) == 1


def test_cli_exit_codes_and_idempotence(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'i.db'}"
    assert launch.main(["ingest", str(folder), "--task", "cv", "--db", url]) == 1
    out = capsys.readouterr()
    assert "4 added" in out.out and "broken.fits" in out.err
    assert launch.main(["ingest", str(folder / "t0.csv"), "--task", "cv", "--db", url]) == 0
    assert "0 added, 1 already present" in capsys.readouterr().out
    s = Store(url)
    assert s.count_candidates() == 4 and s.integrity_check() == "ok"
    s.close()


@pytest.mark.realdata
def test_real_lamost_files(mem_store, shared_spectra):
    files = sorted((shared_spectra / "lamost").glob("*.fits"))[:4]
    rep, errors = ingest(mem_store, [str(f) for f in files], task="m_giant")
    assert rep.added + len(errors) >= 4 and rep.added >= 1
    c = mem_store.list_candidates(order="id")[0]
    assert c.survey == "LAMOST"


def test_vet_cli_into_the_store_records_params_and_resumes(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'v.db'}"
    Store(url).close()  # vet records into a store that exists; it never creates one
    argv = ["vet", "--input", str(folder / "t0.csv"), "--task", "cv", "--policy", "rules",
            "--max-turns", "5", "--db", url, "--workers", "1", "--no-progress"]  # fmt: skip
    assert launch.main(argv) == 0
    assert "vetted 1 candidates" in capsys.readouterr().out
    store = Store(url)
    try:
        [run] = store.runs()
        assert (run.policy, run.params) == ("rules", {"max_turns": 5})
        assert len(store.done_keys(run_id=run.id)) == 1
    finally:
        store.close()
    assert launch.main(argv) == 0  # resumed: nothing left to vet
    out = capsys.readouterr().out
    assert "vetted 0 candidates" in out
    assert f"nothing to vet: all 1 candidates given are already recorded in {url}" in out
    argv[argv.index("--max-turns") + 1] = "4"  # another set-up is another run
    assert launch.main(argv) == 0
    assert "vetted 1 candidates" in capsys.readouterr().out


def test_vet_db_stores_the_survey_metadata_of_files_it_adds(folder, tmp_path, capsys, monkeypatch):
    """`vet --db` on files the store has not seen keeps what `ingest` would have kept
    (survey, position, SNR), and reads no file again on a resumed run."""
    import annotate.intake.ingest as ingest_mod

    url = f"sqlite:///{tmp_path / 'm.db'}"
    Store(url).close()
    sdss = next(folder.glob("spec-*.fits"))
    argv = ["vet", "--input", str(sdss), str(folder / "broken.fits"), "--task", "wd",
            "--policy", "rules", "--db", url, "--workers", "1", "--no-progress"]  # fmt: skip
    assert launch.main(argv) == 1
    captured = capsys.readouterr()
    assert "vetted 1 candidates" in captured.out
    assert "broken.fits" in captured.err
    store = Store(url)
    try:
        [c] = store.list_candidates()
        assert c.survey == "SDSS"
        assert c.task == "wd" and c.verdict in ("YES", "NO")
    finally:
        store.close()
    read: list = []
    real = ingest_mod.spectra_meta
    monkeypatch.setattr(ingest_mod, "spectra_meta", lambda refs: read.extend(refs) or real(refs))
    launch.main(argv[:3] + argv[4:])  # the SDSS file alone, resumed
    assert read == []
    assert "vetted 0 candidates" in capsys.readouterr().out


def test_launch_says_a_loupe_error_in_one_line_and_exits_2(monkeypatch, capsys):
    import commands.ingest
    from db.store import StoreError

    def refuse(args):
        raise StoreError("x.csv: line 3\nhas no task")

    monkeypatch.setattr(commands.ingest, "main", refuse)
    assert launch.main(["ingest", "x.csv"]) == 2
    assert capsys.readouterr().err == "launch.py ingest: x.csv: line 3 has no task\n"
    monkeypatch.setattr(commands.ingest, "main", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # a bug is not dressed up as a message
        launch.main(["ingest", "x.csv"])


def test_log_level_before_or_after_the_command(monkeypatch, capsys):
    import logging

    import commands.ingest

    root = logging.getLogger()
    seen: list[int] = []
    monkeypatch.setattr(commands.ingest, "main", lambda args: seen.append(root.level) or 0)
    monkeypatch.setattr(root, "level", root.level)  # restored after the test
    assert launch.main(["--log-level", "DEBUG", "ingest", "x.csv"]) == 0
    assert launch.main(["ingest", "x.csv", "--log-level=error"]) == 0
    assert seen == [logging.DEBUG, logging.ERROR]
    assert launch.main(["--log-level", "loud", "ingest", "x.csv"]) == 2
    assert "choose one of DEBUG" in capsys.readouterr().err


def test_unknown_tasks_refused_at_ingest(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 't.db'}"
    cat = tmp_path / "cat.csv"
    cat.write_text("path,task,id\ndata/t0.csv,white_dwarf,a\ndata/t1.csv,gm,b\n")
    assert launch.main(["ingest", str(cat), "--db", url]) == 1
    err = capsys.readouterr().err
    assert "cat.csv line 2: unknown task 'white_dwarf'; known tasks: cv, carbon" in err
    assert launch.main(["ingest", str(folder / "t2.csv"), "--task", "bogus", "--db", url]) == 2
    assert "--task: unknown task 'bogus'" in capsys.readouterr().err
    s = Store(url)
    assert [(c.key, c.task) for c in s.list_candidates()] == [("b", "m_giant")]  # alias mapped
    s.close()


def test_id_given_to_two_spectra_is_a_conflict(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    cat = tmp_path / "cat.csv"
    cat.write_text("path,task,id\ndata/t0.csv,cv,same-id\ndata/t1.csv,cv,same-id\n")
    assert launch.main(["ingest", str(cat), "--db", url]) == 1
    captured = capsys.readouterr()
    assert "cat.csv line 3: id 'same-id' (task cv) points at" in captured.err
    assert "t1.csv here but at" in captured.err and "t0.csv in" in captured.err
    assert "cat.csv line 2 (conflict)" in captured.err and "--keep-first" in captured.err
    assert "1 added, 0 already present, 1 refused" in captured.out
    assert launch.main(["ingest", str(cat), "--keep-first", "--db", url]) == 0
    assert "kept the first" in capsys.readouterr().err
    s = Store(url)
    (only,) = s.list_candidates()
    assert only.spectrum_ref["path"].endswith("t0.csv")
    s.close()


def test_bom_quoted_and_gzipped_catalogues_ingest(mem_store, folder, tmp_path):
    import gzip

    (tmp_path / "bom.csv").write_bytes("\ufeffpath,task,id\ndata/t0.csv,cv,a\n".encode())
    (tmp_path / "quoted.csv").write_text('"path","task","id"\n"data/t1.csv","cv","b"\n')
    (tmp_path / "cat.csv.gz").write_bytes(gzip.compress(b"path,task,id\ndata/t2.csv,cv,c\n"))
    sources = [str(tmp_path / n) for n in ("bom.csv", "quoted.csv", "cat.csv.gz")]
    rep, errors = ingest(mem_store, sources)
    assert (rep.added, errors) == (3, [])


def test_row_on_a_single_spectrum_file_refused(mem_store, folder, tmp_path):
    cat = tmp_path / "cat.csv"
    cat.write_text("path,task,id,row\ndata/t0.csv,cv,a,\ndata/t0.csv,cv,b,5\n")
    rep, errors = ingest(mem_store, [str(cat)])
    assert rep.added == 1
    assert len(errors) == 1 and "row 5" in errors[0][1] and "b (" in errors[0][0]


def test_vet_db_reports_bad_lines_and_vets_the_rest(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    Store(url).close()
    cat = tmp_path / "cat.csv"
    cat.write_text("path,task,id\ndata/t0.csv,cv,a\ndata/gone.csv,cv,b\ndata/t1.csv,nova,c\n")
    argv = ["vet", "--catalog", str(cat), "--policy", "rules", "--max-turns", "5",
            "--db", url, "--workers", "1", "--no-progress"]  # fmt: skip
    assert launch.main(argv) == 1
    captured = capsys.readouterr()
    assert "vetted 1 candidates" in captured.out
    assert "cat.csv line 3: spectrum file not found: data/gone.csv" in captured.err
    assert "cat.csv line 4: unknown task 'nova'" in captured.err
    assert launch.main([*argv, "--strict"]) == 2
    assert "(--strict: nothing vetted)" in capsys.readouterr().err


def test_an_id_already_stored_for_another_spectrum_is_a_conflict(folder, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    (tmp_path / "first.csv").write_text("path,task,id\ndata/t0.csv,cv,same-id\n")
    assert launch.main(["ingest", str(tmp_path / "first.csv"), "--db", url]) == 0
    capsys.readouterr()
    # a later catalogue gives the stored id to another file: not "already present"
    later = tmp_path / "later.csv"
    later.write_text("path,task,id\ndata/t2.csv,cv,other\ndata/t1.csv,cv,same-id\n")
    assert launch.main(["ingest", str(later), "--db", url]) == 1
    captured = capsys.readouterr()
    assert "later.csv line 3: id 'same-id' (task cv) points at" in captured.err
    assert "t1.csv here but at" in captured.err and "t0.csv in the store (conflict)" in captured.err
    assert "--keep-first" in captured.err
    assert "1 added, 0 already present, 1 refused" in captured.out
    assert launch.main(["ingest", str(later), "--keep-first", "--db", url]) == 0
    captured = capsys.readouterr()
    assert "kept the first" in captured.err and "later.csv line 3" in captured.err
    # the same file again is present, not a conflict; the same file rewritten is one
    assert launch.main(["ingest", str(tmp_path / "first.csv"), "--db", url]) == 0
    assert "0 added, 1 already present, 0 refused" in capsys.readouterr().out
    write_text_spectrum(folder / "t0.csv", seed=7)
    assert launch.main(["ingest", str(tmp_path / "first.csv"), "--db", url]) == 1
    err = capsys.readouterr().err
    assert "first.csv line 2: id 'same-id'" in err and "the file changed" in err
    with Store(url) as s:
        by_key = {c.key: c.spectrum_ref["path"] for c in s.list_candidates()}
    assert by_key["same-id"].endswith("t0.csv") and set(by_key) == {"same-id", "other"}


def test_store_reports_conflicts_within_one_call_and_against_stored_rows(mem_store, folder):
    from agent.refs import CandidateRef

    a, b = (CandidateRef("x", "cv", str(folder / f"t{i}.csv")) for i in range(2))
    rep = mem_store.add_candidates([a, b, a])
    assert (rep.added, rep.existing, len(rep.conflicts)) == (1, 1, 1)
    assert rep.conflicts[0][0] == 1 and "t1.csv here but at" in rep.conflicts[0][2]
    rep = mem_store.add_candidates([b], hashes={b.path: "sha256:" + "0" * 64})
    assert (rep.added, rep.existing) == (0, 0) and "in the store (conflict)" in rep.conflicts[0][2]
    assert "1 refused" in str(rep)
