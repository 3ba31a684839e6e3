"""The command line's usage errors: whatever the command and whoever finds the problem
(argparse, the command's own checks, the importer), the answer is one line on stderr naming
it, nothing on stdout, and exit status 2; an unknown command names the nearest one; the
top-level help lists every kind `export` takes."""

from __future__ import annotations

import re

import pytest

import launch
from agent.refs import CandidateRef
from db.store import Store


def _one_line(capsys, argv: list[str], *words: str) -> str:
    rc = launch.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (argv, rc, err)
    assert out == "", (argv, out)
    lines = err.strip().splitlines()
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err and not err.startswith("usage:"), (argv, err)
    for w in words:
        assert w in err, (argv, w, err)
    return lines[0]


@pytest.fixture
def db(tmp_path) -> str:
    path = tmp_path / "loupe.db"
    Store(path).close()
    return str(path)


@pytest.mark.parametrize(
    "argv,words",
    [
        # argparse's own errors: the usage block used to come first
        (["export", "bogus", "--out", "o"], ["launch.py export:", "invalid choice", "'bogus'"]),
        (["export", "sft"], ["launch.py export:", "--out"]),
        (["vet", "--workers", "many"], ["launch.py vet:", "--workers", "'many'"]),
        (["serve", "--trusted-proxy", "nowhere"], ["launch.py serve:", "'nowhere'"]),
        (["add-expert"], ["launch.py add-expert:", "name"]),
        (["calibrate", "--folds", "x"], ["launch.py calibrate:", "--folds"]),
        (["audit", "--no-such-flag"], ["launch.py audit:", "--no-such-flag"]),
        (["import-labels"], ["launch.py import-labels:", "FILE.csv"]),
        (["--bogus"], ["launch.py serve:", "--bogus"]),  # no command: serve's flags
        # the commands' own checks (demo's went to stdout)
        (["demo", "--n-per-class", "0"], ["launch.py demo:", "--n-per-class"]),
        (["demo", "--snr", "-1"], ["launch.py demo:", "--snr"]),
        (["evaluate"], ["launch.py evaluate:", "--catalog"]),
        (["degrade", "--input", "x.fits", "--out", "o"], ["launch.py degrade:", "--task"]),
        (["ingest", "x.csv", "--task", "quasar"], ["launch.py ingest:", "'quasar'"]),
    ],
    ids=lambda v: " ".join(v) if v and not v[0].startswith("launch.py") else "",
)
def test_a_usage_error_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)  # nothing a command could write lands in the checkout
    _one_line(capsys, argv, *words)
    assert not (tmp_path / "data").exists()  # refused before any store was made


def test_the_usage_error_names_the_help(capsys):
    line = _one_line(capsys, ["export", "sft"])
    assert line.endswith("(`launch.py export --help` lists every flag)")


def test_settings_not_key_value(capsys, db):
    _one_line(capsys, ["settings", "--db", db, "audit_rate"], "'audit_rate' is not KEY=VALUE")


@pytest.mark.parametrize(
    "typed,meant",
    [("exprot", "export"), ("import_labels", "import-labels"), ("calibrat", "calibrate"),
     ("Ingest", "ingest"), ("addexpert", "add-expert")],
)  # fmt: skip
def test_an_unknown_command_names_the_nearest(capsys, typed, meant):
    line = _one_line(capsys, [typed, "--out", "x"], f"unknown command {typed!r}")
    assert f"did you mean {meant!r}?" in line and "--help" in line


def test_an_unknown_command_like_none_says_where_the_list_is(capsys):
    line = _one_line(capsys, ["photometry"], "unknown command 'photometry'")
    assert "did you mean" not in line and "`launch.py --help` lists the commands" in line


def test_top_help_lists_every_export_kind(capsys):
    kinds = next(a.choices for a in launch.build_parser("export")._actions if a.dest == "kind")
    assert {"sft", "rl", "pairs", "vi", "catalogue"} <= set(kinds)
    assert launch.main(["--help"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("export"))
    for kind in kinds:
        assert kind in re.findall(r"\w+", line), (kind, line)
    # the summary is filled from the parser, so a new kind shows without editing it
    assert "{choices}" in launch.COMMANDS["export"][1]
    assert launch.summary("export").endswith("vi or catalogue.")


def _store_with_candidates(db: str, n: int = 3) -> None:
    with Store(db) as store:
        store.add_candidates(
            [CandidateRef(id=f"c{i}", task="cv", path=f"/data/c{i}.fits") for i in range(n)]
        )
        store.create_expert("ada")


def test_import_labels_naming_an_unknown_expert_is_one_line_and_records_nothing(
    capsys, tmp_path, db
):
    """A VI file whose `expert` column names someone the store lacks: one line naming the
    expert and how many rows name them, exit 2, nothing recorded (it said the same refusal
    once per row and exited 1)."""
    _store_with_candidates(db, 22)
    f = tmp_path / "vi.csv"
    f.write_text("id,label,expert\n" + "".join(f"c{i},NO,bob\n" for i in range(22)))
    _one_line(capsys, ["import-labels", str(f), "--db", db], "no expert 'bob' (22 rows)",
              "--create-expert", "nothing recorded")  # fmt: skip
    with Store(db) as store:
        assert store.reviews() == []


def test_import_labels_with_a_known_and_an_unknown_expert_records_nothing(capsys, tmp_path, db):
    """Rows for a known expert are not half-imported beside the refused ones: the whole file
    waits for the missing account (or --create-expert)."""
    _store_with_candidates(db)
    f = tmp_path / "vi.csv"
    f.write_text("id,label,expert\nc0,NO,ada\nc1,NO,bob\nc2,YES,\n")
    line = _one_line(capsys, ["import-labels", str(f), "--expert", "carol", "--db", db])
    # --expert names the expert of rows that name none: carol is unknown too, and said first
    assert "no expert 'carol'" in line
    _one_line(capsys, ["import-labels", str(f), "--expert", "ada", "--db", db],
              "no expert 'bob' (1 row)")  # fmt: skip
    with Store(db) as store:
        assert store.reviews() == []
    argv = ["import-labels", str(f), "--expert", "ada", "--db", db, "--create-expert"]
    assert launch.main(argv) == 0
    with Store(db) as store:
        assert [len(store.reviews(expert=e)) for e in ("ada", "bob")] == [2, 1]
