"""The README's examples run as written, in the order written, on a fresh checkout after
`make run`: each command of its "What you can do with it" block is run with the repository's
`launch.py` in an empty folder that `make run`'s seeding has filled (the demo set, its
labels, the default database), and must exit 0.

Two kinds of line are not run, and the test says which: `serve` (it starts a server that
does not return) and commands naming a PostgreSQL server (there is none here)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"  # what a reader types at add-expert's --password-stdin


def readme_examples() -> list[list[str]]:
    """argv (after `python launch.py`) of every command in the README's examples block, in
    order, without its trailing comment."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## What you can do with it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    block = re.sub(r"\\\n\s*", " ", block)  # a wrapped command is one command
    out = []
    for line in block.splitlines():
        if line.startswith("python launch.py"):
            out.append(shlex.split(line, comments=True)[2:])
    return out


def not_run(argv: list[str]) -> str | None:
    """Why the test does not run this example, or None."""
    if argv[0] == "serve":
        return "serve starts a server that does not return"
    if any(a.startswith(("postgresql", "postgres:")) for a in argv):
        return "needs a PostgreSQL server"
    return None


def _run(cmd: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOUPE_DB"}  # the default database
    return subprocess.run(
        cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300
    )


def test_the_readme_shows_its_examples():
    examples = readme_examples()
    assert len(examples) >= 15
    assert ["demo", "--out", "data/demo", "--labels", "data/demo/labels.csv"] in examples


def test_every_readme_example_runs_after_make_run(tmp_path):
    # `make run` is `launch.py serve` on its default database: this is its seeding, the same
    # function with the same defaults, without the server.
    seed = _run(
        [sys.executable, "-c",
         f"import sys; sys.path.insert(0, {str(REPO)!r}); import launch; "
         "from commands import serve; "
         "serve.prepare(launch.build_parser('serve').parse_args([])).store.close()"],
        tmp_path,
    )  # fmt: skip
    assert seed.returncode == 0, seed.stderr
    assert (tmp_path / "data" / "loupe.db").is_file()
    # the catalogue the examples read is there before any of them runs
    assert (tmp_path / "data" / "demo" / "labels.csv").is_file()

    skipped = []
    for argv in readme_examples():
        why = not_run(argv)
        if why:
            skipped.append(f"{' '.join(argv)}: {why}")
            continue
        stdin = PASSWORD + "\n" if "--password-stdin" in argv else ""
        done = _run([sys.executable, str(REPO / "launch.py"), *argv], tmp_path, stdin)
        assert done.returncode == 0, (
            f"`python launch.py {' '.join(argv)}` exited {done.returncode}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    # only the lines this test cannot run are left out, and it says which
    print("not run:", *skipped, sep="\n  ")
    assert all(a.startswith("serve ") for a in skipped), skipped
    assert (tmp_path / "exports" / "vi.csv").is_file()


@pytest.mark.parametrize(
    "argv,runs",
    [
        (["serve", "--db", "postgresql+psycopg://x@h/y", "--login"], False),
        (["serve"], False),
        (["vet", "--db", "data/loupe.db"], True),
    ],
)
def test_only_servers_are_left_out(argv, runs):
    assert (not_run(argv) is None) == runs
