"""The documentation is tested: every `launch.py` command line shown in the README and
docs/ parses with the real argument parsers, and the files it links to exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import launch

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def command_lines() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        # Join shell continuation lines so a wrapped command is read whole.
        text = re.sub(r"\\\n\s*", " ", text)
        for line in text.splitlines():
            m = re.search(r"python (?:\S*/)?launch\.py(?P<rest>[^`#\n]*)", line)
            if m:
                out.append((doc.name, m.group("rest").strip()))
    return out


COMMANDS = command_lines()


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize("doc,rest", COMMANDS, ids=[f"{d}:{r[:40]}" for d, r in COMMANDS])
def test_documented_command_parses(doc, rest):
    # Shell around the command (redirections, pipes, `&`) is not launch.py's; a shell
    # variable stands for a value the reader supplies (a number fits every flag).
    rest = re.split(r"\s[<>|&;]", rest)[0]
    argv = [re.sub(r"\$\{?\w+\}?", "7860", a) for a in shlex.split(rest)]
    # Placeholders like COMMAND or ... in prose are not commands.
    if any(a in ("COMMAND", "...", "[ARGS...]") for a in argv):
        pytest.skip("a usage pattern, not a command")
    if argv and argv[0] in ("-h", "--help"):
        return
    command = "serve"
    if argv and not argv[0].startswith("-"):
        command = argv.pop(0)
    assert command in launch.COMMANDS, f"{doc}: unknown command {command!r}"
    parser = launch.build_parser(command)
    try:
        parser.parse_args(argv)
    except launch.UsageError as e:  # a bad flag
        pytest.fail(f"{doc}: `launch.py {rest}` does not parse ({e})")


def test_linked_docs_exist():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", doc.read_text()):
            assert (doc.parent / target).is_file(), f"{doc.name} links to missing {target}"


def test_makefile_and_ci_run_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), ".ci/run must call the README's test command"


def test_every_commands_help_describes_it_in_one_whole_sentence():
    """--help opens with the command's module docstring's first line: a whole sentence,
    never one cut at the line's end (`calibrate` read "... on the store's expert labels"
    and left out what --run calibrates)."""
    import importlib

    import launch

    for name, (module, help_text) in launch.COMMANDS.items():
        doc = importlib.import_module(module).__doc__ or help_text
        line = launch.describe(doc)
        assert line.endswith(".") and line[0].isupper(), (name, line)
    calibrate = launch.build_parser("calibrate").description
    assert "inspector" in calibrate and "model run" in calibrate


def test_the_vi_csv_columns_are_documented_as_written():
    """docs/vi_csv.md's table and README's list name exactly the columns `export vi` writes,
    in its order, and the Prospect and Marz fields Loupe fills."""
    import re

    from annotate.export import vi

    doc = (REPO / "docs" / "vi_csv.md").read_text(encoding="utf-8")
    assert re.findall(r"^\| `(\w+)` \|", doc, re.M) == list(vi.COLUMNS)
    for field in (*vi.PROSPECT_FROM, *vi.MARZ_FROM):
        assert f"`{field}`" in doc, field
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"The VI CSV's columns \(([^)]*)\)", readme).group(1)
    assert [c.strip() for c in listed.split(",")] == list(vi.COLUMNS)
