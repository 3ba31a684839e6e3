"""The README's examples run as written, in the order written, on a fresh checkout after
`make run`: each command of its "What you can do with it" block is run with the repository's
`launch.py` in a folder that `make run`'s seeding has filled (the demo set, its labels, the
default database), and must exit 0. Each example is its own test with its own budget
(`BUDGET_S`), in the README's order, all in the one folder (a module fixture): later
examples read what earlier ones wrote.

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


# Each example's budget, several times its time on an idle 2-core machine: its CPU seconds
# are 1-4.5 for most, 32 for the SFT export (360 zoom images drawn with the published tool's
# renderer, the README's default) and 11 for the RL one. On a machine busy with other work
# (load 9-12) they took 2-26 s, 131 s and 50 s. Keyed by the example's first words.
BUDGET_S = {("export", "sft"): 420, ("export", "rl"): 180}
DEFAULT_BUDGET_S = 90
SEED_BUDGET_S = 150  # `make run`'s seeding: generate, ingest and vet the demo set (6 s CPU)


def budget(argv: list[str]) -> int:
    return BUDGET_S.get(tuple(argv[:2]), DEFAULT_BUDGET_S)


def _run(cmd: list[str], cwd: Path, timeout: float, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOUPE_DB"}  # the default database
    return subprocess.run(
        cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )


def test_the_readme_shows_its_examples():
    examples = readme_examples()
    assert len(examples) >= 15
    assert ["demo", "--out", "data/demo", "--labels", "data/demo/labels.csv"] in examples


class MadeRun:
    """The folder `make run` seeded, which the examples share in order (a later one reads
    what an earlier one wrote), and the examples that failed so far."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.failed: list[str] = []


@pytest.fixture(scope="module")
def made_run(tmp_path_factory) -> MadeRun:
    # `make run` is `launch.py serve` on its default database: this is its seeding, the same
    # function with the same defaults, without the server.
    folder = tmp_path_factory.mktemp("made-run")
    seed = _run(
        [sys.executable, "-c",
         f"import sys; sys.path.insert(0, {str(REPO)!r}); import launch; "
         "from commands import serve; "
         "serve.prepare(launch.build_parser('serve').parse_args([])).store.close()"],
        folder, timeout=SEED_BUDGET_S - 10,
    )  # fmt: skip
    assert seed.returncode == 0, seed.stderr
    return MadeRun(folder)


@pytest.mark.timeout(SEED_BUDGET_S)
def test_make_run_seeds_what_the_examples_read(made_run):
    assert (made_run.folder / "data" / "loupe.db").is_file()
    # the catalogue the examples read is there before any of them runs
    assert (made_run.folder / "data" / "demo" / "labels.csv").is_file()


def _example(argv: list[str]):
    words = " ".join(argv)
    return pytest.param(
        argv,
        marks=pytest.mark.timeout(budget(argv)),
        id=words if len(words) < 60 else words[:57] + "...",
    )


@pytest.mark.parametrize("argv", [_example(a) for a in readme_examples()])
def test_readme_example_runs_after_make_run(argv, made_run):
    """Each example in the order written, in the folder `make run` seeded, after the ones
    before it; the lines this test cannot run are skipped with the reason."""
    why = not_run(argv)
    if why:
        pytest.skip(why)
    stdin = PASSWORD + "\n" if "--password-stdin" in argv else ""
    done = _run(
        [sys.executable, str(REPO / "launch.py"), *argv], made_run.folder,
        timeout=budget(argv) - 10, stdin=stdin,
    )  # fmt: skip
    if done.returncode != 0:
        earlier = made_run.failed[:]
        made_run.failed.append(" ".join(argv))
        pytest.fail(
            f"`python launch.py {' '.join(argv)}` exited {done.returncode}"
            + (f" (after earlier examples failed: {earlier})" if earlier else "")
            + f":\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )


def test_the_examples_left_their_outputs(made_run):
    assert (made_run.folder / "exports" / "vi.csv").is_file()
    assert (made_run.folder / "exports" / "sft" / "manifest.json").is_file()
    # only the lines this test cannot run are left out
    skipped = [a for a in readme_examples() if not_run(a)]
    assert skipped and all(a[0] == "serve" for a in skipped), skipped


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
