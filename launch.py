#!/usr/bin/env python
"""Loupe's one entry point.

    python launch.py                 # = serve: the vetting app on http://127.0.0.1:7860
    python launch.py COMMAND --help  # every flag of one command
    python launch.py --log-level INFO vet ...   # (before or after the command)

Installed, the same entry point is the `loupe` command (`loupe vet ...`); messages name
whichever was run.

Each command's flags and messages live in one module (`commands.vet`, `commands.ingest`;
the others still in the module that owns the command); that module defines
`add_arguments(parser)` and `main(args) -> int`. Modules are imported only when their
command runs, so `vet --policy rules` never imports torch or gradio.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import sys
from pathlib import Path

from agent.errors import LoupeError
from commands import UsageError

log = logging.getLogger("launch")

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("commands.serve", "Serve the vetting web app (the default command)."),
    "demo": (
        "commands.demo",
        "Generate the simulated demo spectra (and optionally their labels).",
    ),
    "vet": (
        "commands.vet",
        "Run an agent policy over candidates; write JSONL or record into --db.",
    ),
    "ingest": (
        "commands.ingest",
        "Load candidates (files, globs, folders, catalogue CSV, parquet) into the store.",
    ),
    "import-labels": (
        "commands.import_labels",
        "Record earlier verdicts from a CSV as an expert's reviews.",
    ),
    # {choices}: filled from the parser's own list of kinds, so the summary cannot go stale
    "export": ("commands.export", "Export reviewed decisions as {choices}."),
    "add-expert": (
        "commands.add_expert",
        "Create or update an expert account (name, role, password).",
    ),
    "evaluate": (
        "commands.evaluate",
        "Score one or more policies on a labelled set, side by side.",
    ),
    "calibrate": (
        "commands.calibrate",
        "Refit the rule-based inspector's calibration from expert labels in the store.",
    ),
    "audit": (
        "commands.audit",
        "Draw the random audit sample; print each task's weighted precision and intervals.",
    ),
    "settings": (
        "commands.settings",
        "Show or change the team's campaign settings (overlap, gold and audit shares, ...).",
    ),
    "degrade": (
        "commands.degrade",
        "Turn library spectra into survey-like LAMOST files plus a catalogue.",
    ),
}


def program() -> str:
    """The name this entry point was run as: `loupe` (the console script) or `launch.py`."""
    return "loupe" if Path(sys.argv[0]).stem == "loupe" else "launch.py"


def describe(doc: str) -> str:
    """A command's --help description: its module docstring's first line, without the
    usage that a docstring of `commands/` opens with.

    >>> describe("`launch.py demo`: write the simulated demo spectra.\\n\\nMore.")
    'Write the simulated demo spectra.'
    """
    line = doc.strip().splitlines()[0]
    if line.startswith("`") and "`: " in line:
        line = line.split("`: ", 1)[1]
    return line[:1].upper() + line[1:]


class Parser(argparse.ArgumentParser):
    """argparse, except that a usage error is raised as `UsageError` rather than printed
    with the usage block and exited on, so that `main` says it on one line like every other
    problem a command cannot run with."""

    def error(self, message: str):
        raise UsageError(f"{message} (`{self.prog} --help` lists every flag)")


class Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's help says its default, unless the help already says what the default is
    or there is none to say (None, False: "(default: None)" tells a reader nothing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def build_parser(command: str) -> argparse.ArgumentParser:
    module_name, help_text = COMMANDS[command]
    module = importlib.import_module(module_name)
    parser = Parser(
        prog=f"{program()} {command}",
        description=describe(module.__doc__ or help_text),
        formatter_class=Defaults,
    )
    module.add_arguments(parser)
    parser.set_defaults(_main=module.main)
    return parser


def positional_choices(command: str) -> tuple[str, ...]:
    """The choices of `command`'s first positional argument that has any (export's kinds)."""
    for action in build_parser(command)._actions:
        if not action.option_strings and action.choices:
            return tuple(action.choices)
    return ()


def summary(command: str) -> str:
    """`command`'s line in the top-level help; `{choices}` lists its positional's choices."""
    text = COMMANDS[command][1]
    if "{choices}" in text:
        *head, last = positional_choices(command)
        text = text.replace("{choices}", f"{', '.join(head)} or {last}" if head else last)
    return text


def nearest_command(name: str) -> str | None:
    """The command `name` was most likely meant to be (a typo, a missing hyphen), if any.

    >>> nearest_command("exprot"), nearest_command("import_labels"), nearest_command("zzz")
    ('export', 'import-labels', None)
    """
    close = difflib.get_close_matches(name.replace("_", "-").lower(), COMMANDS, n=1, cutoff=0.6)
    return close[0] if close else None


def top_help() -> str:
    prog = program()
    width = max(len(c) for c in COMMANDS)
    lines = [
        f"usage: {prog} [--log-level LEVEL] [COMMAND] [ARGS...]",
        "",
        "Loupe: vet rare-object candidates in survey spectra with a zooming agent and its experts.",
        "With no command, `serve` runs on the demo database.",
        "",
        "commands:",
    ]
    lines += [f"  {c.ljust(width)}  {summary(c)}" for c in COMMANDS]
    lines += [
        "",
        f"`{prog} COMMAND --help` documents every flag of a command.",
        f"--log-level ({', '.join(LOG_LEVELS)}; default WARNING), before or after the command,",
        "sets what is logged to stderr.",
        "",
        "exit status: 0 done; 1 some items failed (each reported) and the rest were done;",
        "2 the command could not run (a usage error or a problem named on one line).",
    ]
    return "\n".join(lines)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def pop_log_level(argv: list[str]) -> str:
    """Take `--log-level LEVEL` (or `--log-level=LEVEL`) out of `argv`, wherever it is
    before a `--`; returns the level, default WARNING."""
    level, out, i = "WARNING", [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        if arg == "--log-level":
            if i + 1 >= len(argv):
                raise LoupeError("--log-level needs a level: " + ", ".join(LOG_LEVELS))
            level, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--log-level="):
            level, i = arg.split("=", 1)[1], i + 1
            continue
        out.append(arg)
        i += 1
    if level.upper() not in LOG_LEVELS:
        raise LoupeError(f"--log-level {level!r}: choose one of {', '.join(LOG_LEVELS)}")
    argv[:] = out
    return level.upper()


def configure_logging(level: str) -> None:
    """Log records of `level` and above to stderr, one line each (once per process)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        configure_logging(pop_log_level(argv))
    except LoupeError as err:
        print(f"{program()}: {err}", file=sys.stderr)
        return 2
    if argv and argv[0] in ("-h", "--help", "help"):
        print(top_help())
        return 0
    command = "serve"
    if argv and not argv[0].startswith("-"):
        command = argv.pop(0)
        if command not in COMMANDS:
            near = nearest_command(command)
            hint = f"did you mean {near!r}? " if near else ""
            print(
                f"{program()}: unknown command {command!r} ({hint}"
                f"`{program()} --help` lists the commands)",
                file=sys.stderr,
            )
            return 2
    args = None
    try:
        args = build_parser(command).parse_args(argv)
        rc = int(args._main(args) or 0)
        sys.stdout.flush()  # here, so that a reader gone away is caught below
        return rc
    except LoupeError as err:
        # A problem the user can fix: one line, no traceback. Anything else is a bug and
        # keeps its traceback.
        log.debug("%s failed", command, exc_info=True)
        from db.store.errors import DatabaseError

        hint = ""
        if isinstance(err, DatabaseError) and getattr(args, "db", None) is not None:
            hint = " (the database given with --db)"  # the store names it, not the flag
        print(f"{program()} {command}: {' '.join(str(err).split())}{hint}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not an error of the command. Point
        # stdout at devnull so that the interpreter's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a pipe reader's early exit
    except OSError as err:
        # A file or folder the system refused (a path that is not there, not writable, a
        # full disk): the user's to fix, so one line naming it, as for a LoupeError. One
        # that names no file is not known to be the user's and keeps its traceback.
        if err.filename is None:
            raise
        log.debug("%s failed", command, exc_info=True)
        paths = " -> ".join(repr(str(f)) for f in (err.filename, err.filename2) if f)
        why = err.strerror or str(err)
        print(f"{program()} {command}: {paths}: {why} (check the path and its permissions)",
              file=sys.stderr)  # fmt: skip
        return 2


if __name__ == "__main__":
    sys.exit(main())
