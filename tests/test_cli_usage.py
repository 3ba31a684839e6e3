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


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["export", "sft", "--out", "o", "--test-fraction", "2"], "--test-fraction"),
        (["export", "rl", "--out", "o", "--workers", "0"], "--workers"),
        (["vet", "--catalog", "c.csv", "--workers", "0"], "--workers"),
        (["vet", "--catalog", "c.csv", "--limit", "0"], "--limit"),
        (["vet", "--catalog", "c.csv", "--max-turns", "0"], "--max-turns"),
        (["calibrate", "--folds", "1"], "--folds"),
        (["audit", "--task", "quasar"], "--task"),
        (["evaluate", "--catalog", "c.csv", "--workers", "-1"], "--workers"),
        (["ingest", "c.csv", "--batch-size", "0"], "--batch-size"),
        (["degrade", "--catalog", "c.csv", "--out", "o", "--snr", "0"], "--snr"),
        (["serve", "--session-hours", "0"], "--session-hours"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_flag_value_out_of_range_is_refused_before_anything_runs(
    capsys, tmp_path, monkeypatch, argv, flag
):
    """These were taken and acted on: --test-fraction 2 put every object in test and
    `audit --task quasar` printed an empty table."""
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, argv, f"argument {flag}")
    assert list(tmp_path.iterdir()) == []


def test_the_commands_that_read_the_store_default_to_its_default_path(
    capsys, tmp_path, monkeypatch
):
    """calibrate, audit and settings took no --db as 'None' ("'None': no database there"),
    where every other command reads the default store."""
    monkeypatch.chdir(tmp_path)
    Store(tmp_path / "data" / "loupe.db").close()
    monkeypatch.setattr("db.store.DEFAULT_DB", "data/loupe.db")
    for command in ("calibrate", "audit", "settings"):
        assert launch.build_parser(command).parse_args([]).db == "data/loupe.db"
    assert launch.main(["settings"]) == 0
    assert "audit_rate" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--out", "{bad}"],
        ["demo", "--out", "{tmp}/d", "--labels", "{bad}/labels.csv"],
        ["vet", "--catalog", "{tmp}/d/labels.csv", "--out", "{bad}/v.jsonl", "--no-progress"],
        ["degrade", "--catalog", "{tmp}/d/labels.csv", "--out", "{bad}", "--snr", "20"],
        ["export", "vi", "--db", "{db}", "--out", "{bad}/vi.csv"],
    ],
    ids=lambda v: " ".join(v[:2]),
)
def test_a_path_the_system_refuses_is_one_line_naming_it(capsys, tmp_path, db, argv):
    """An --out under a file (or any path the system refuses) ended in a traceback and exit 1."""
    taken = tmp_path / "taken.txt"
    taken.write_text("mine")
    if "{tmp}/d/labels.csv" in argv:
        assert launch.main(["demo", "--out", str(tmp_path / "d"), "--n-per-class", "1",
                            "--labels", str(tmp_path / "d" / "labels.csv")]) == 0  # fmt: skip
        capsys.readouterr()
    real = [a.format(bad=taken / "sub", tmp=tmp_path, db=db) for a in argv]
    line = _one_line(capsys, real, str(taken / "sub"), "Not a directory")
    assert line.startswith(f"launch.py {argv[0]}: ")
    assert taken.read_text() == "mine"


def test_import_labels_with_rows_naming_no_expert_is_one_line(capsys, tmp_path, db):
    """No --expert and no `expert` column: one line, exit 2, nothing recorded (it refused
    every row on a line of its own and exited 1). Rows that name none beside rows that do
    are refused the same way, before the others are recorded."""
    _store_with_candidates(db)
    f = tmp_path / "labels.csv"
    f.write_text("id,label\nc0,NO\nc1,YES\nc2,NO\n")
    _one_line(capsys, ["import-labels", str(f), "--db", db], "its rows name no expert",
              "--expert NAME", "nothing recorded")  # fmt: skip
    g = tmp_path / "vi.csv"
    g.write_text("id,label,expert\nc0,NO,ada\nc1,YES,\nc2,NO,ada\n")
    _one_line(capsys, ["import-labels", str(g), "--db", db], "1 of its 3 rows name no expert")
    with Store(db) as store:
        assert store.reviews() == []
    assert launch.main(["import-labels", str(g), "--db", db, "--expert", "ada"]) == 0


def test_an_empty_export_of_everything_does_not_ask_for_everything(capsys, tmp_path, db):
    """`export pairs --full` on a store of accepts said 'nothing reviewed' and to run it
    again with --full; pairs come from rejects and corrections only."""
    assert launch.main(["export", "pairs", "--full", "--db", db, "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "empty: no reject or correction to pair yet" in out and "accepts make none" in out
    assert "--full" not in out


@pytest.mark.parametrize("command", sorted(launch.COMMANDS))
def test_each_flag_says_its_default_once_and_only_when_there_is_one(command):
    text = " ".join(launch.build_parser(command).format_help().split())
    assert "(default: None)" not in text and "(default: False)" not in text
    for m in re.finditer(r"\(default: ([^()]*(?:\([^()]*\))?[^()]*)\)", text):
        # no help says a default of its own and then argparse's beside it
        assert not text[m.end() :].lstrip().startswith("(default:"), text[m.start() : m.end() + 40]


def test_output_piped_into_a_reader_that_stops_early_is_no_traceback(tmp_path):
    """`launch.py audit | head -1`: the reader closes the pipe; the command ends quietly with
    the shell's SIGPIPE status, not a BrokenPipeError traceback."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.store_factory import seeded

    db = tmp_path / "loupe.db"
    store = Store(str(db))
    seeded(store, [0.995] * 30 + [0.002] * 30, task="wd")
    store.close()
    root = Path(launch.__file__).parent
    cmd = [sys.executable, str(root / "launch.py"), "audit", "--db", str(db), "--draw"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root)
    p.stdout.close()  # the reader is gone before the command writes anything
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
