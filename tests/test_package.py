"""The installable package: rules-only vetting and the data layers never import torch.

`loupe vet --policy rules` must run on a machine with only the core dependencies, so every
heavy import (torch, transformers, trl, gradio) stays inside the function that needs it.
These run in a fresh interpreter: the test process itself has imported torch long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "trl", "gradio", "vllm")


def run_python(code: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


# Imports every module of the core packages one at a time and names the first one that
# pulled in a heavy package, so a regression points at its cause. The three training
# scripts are the `train` extra: their configs extend TRL's (SFTConfig, GRPOConfig,
# DPOConfig), so they import trl by design; nothing else may import them.
TRAINING_SCRIPTS = ("training.sft", "training.grpo", "training.dpo")
IMPORT_ALL = """
import importlib, json, pkgutil, sys
heavy, scripts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
culprits = {}
for pkg in ("agent", "db", "annotate", "training"):
    names = [pkg] + [m.name for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + ".")]
    for name in names:
        if ".migrations" in name or name in scripts:
            continue  # alembic runs migrations with its own context; scripts: see above
        importlib.import_module(name)
        for h in heavy:
            if h in sys.modules and h not in culprits:
                culprits[h] = name
        for script in scripts:
            if script in sys.modules and script not in culprits:
                culprits[script] = name
print(json.dumps(culprits))
"""


def test_core_modules_import_no_torch_transformers_or_gradio():
    proc = run_python(IMPORT_ALL, json.dumps(HEAVY), json.dumps(TRAINING_SCRIPTS))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}


# The console script's code path: launch.main, as `loupe` calls it.
VET_RULES = """
import json, sys
import launch
demo, out, db = sys.argv[1:4]
assert launch.main(["demo", "--out", demo, "--n-per-class", "1", "--labels", demo + "/labels.csv"]) == 0
cat = demo + "/labels.csv"
assert launch.main(["vet", "--catalog", cat, "--policy", "rules", "--out", out, "--no-progress"]) == 0
assert launch.main(["ingest", cat, "--db", db]) == 0
assert launch.main(["vet", "--catalog", cat, "--policy", "rules", "--db", db, "--out", out + ".db.jsonl", "--no-progress"]) == 0
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in json.loads(sys.argv[4]))))
"""


def test_rules_vetting_runs_without_importing_torch_or_transformers(tmp_path):
    demo, out, db = tmp_path / "demo", tmp_path / "results.jsonl", tmp_path / "loupe.db"
    proc = run_python(VET_RULES, str(demo), str(out), str(db), json.dumps(HEAVY), cwd=tmp_path)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["policy"] == "rules" for r in rows)
    # the store run recorded the same candidates
    from db.store import Store

    store = Store(f"sqlite:///{db}")
    try:
        assert store.done_keys(policy="rules", model=None)
    finally:
        store.close()


def test_console_script_and_extras_are_declared():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["scripts"] == {"loupe": "launch:main"}
    assert "launch" in meta["tool"]["setuptools"]["py-modules"]
    core = {d.split(">")[0].split("[")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert core.isdisjoint(HEAVY), "core dependencies must stay free of torch and the web app"
    assert {"app", "train", "gpu", "test"} <= set(project["optional-dependencies"])


def test_every_run_collects_the_packages_doctests():
    # No test file runs doctest.testmod itself: pytest collects the examples of every
    # module of these packages, so a new example runs without anyone registering it.
    pytest_ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    opts = pytest_ini["ini_options"]
    assert "--doctest-modules" in opts["addopts"].split()
    assert {"agent", "db", "annotate", "app", "training"} <= set(opts["testpaths"])


# What pip writes for `[project.scripts] loupe = "launch:main"`.
CONSOLE_SCRIPT = """import sys
from launch import main
sys.exit(main())
"""


def test_the_entry_point_names_itself_as_it_was_run(tmp_path):
    script = tmp_path / "loupe"
    script.write_text(CONSOLE_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for argv, prog in (([str(script)], "loupe"), ([str(REPO / "launch.py")], "launch.py")):
        for args in (["--help"], ["ingest", "--help"]):
            proc = subprocess.run(
                [sys.executable, *argv, *args], env=env, capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.startswith(f"usage: {prog} "), proc.stdout[:200]
        proc = subprocess.run(
            [sys.executable, *argv, "no-such-command"], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 2 and proc.stderr.startswith(f"{prog}: unknown command")
