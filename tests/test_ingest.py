"""`launch.py ingest`: files, folders, globs, catalogue CSVs and SpecVI parquet into the
store; bad files reported, the rest ingested; re-runs add nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import launch
from db.ingest import collect, ingest
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
    assert "vetted 0 candidates" in capsys.readouterr().out
    argv[argv.index("--max-turns") + 1] = "4"  # another set-up is another run
    assert launch.main(argv) == 0
    assert "vetted 1 candidates" in capsys.readouterr().out


def test_launch_says_a_loupe_error_in_one_line_and_exits_2(monkeypatch, capsys):
    import db.ingest
    from db.store import StoreError

    def refuse(args):
        raise StoreError("x.csv: line 3\nhas no task")

    monkeypatch.setattr(db.ingest, "main", refuse)
    assert launch.main(["ingest", "x.csv"]) == 2
    assert capsys.readouterr().err == "launch.py ingest: x.csv: line 3 has no task\n"
    monkeypatch.setattr(db.ingest, "main", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # a bug is not dressed up as a message
        launch.main(["ingest", "x.csv"])


def test_log_level_before_or_after_the_command(monkeypatch, capsys):
    import logging

    import db.ingest

    root = logging.getLogger()
    seen: list[int] = []
    monkeypatch.setattr(db.ingest, "main", lambda args: seen.append(root.level) or 0)
    monkeypatch.setattr(root, "level", root.level)  # restored after the test
    assert launch.main(["--log-level", "DEBUG", "ingest", "x.csv"]) == 0
    assert launch.main(["ingest", "x.csv", "--log-level=error"]) == 0
    assert seen == [logging.DEBUG, logging.ERROR]
    assert launch.main(["--log-level", "loud", "ingest", "x.csv"]) == 2
    assert "choose one of DEBUG" in capsys.readouterr().err
