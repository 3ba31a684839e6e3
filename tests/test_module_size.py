"""No module holds more than 700 lines: past that a file holds more than one thing and
should be split by what it holds. Alembic migrations are exempt (generated, append-only)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "db", "annotate", "app", "training", "bench", "tests")
MAX_LINES = 700


def modules() -> list[Path]:
    found = [REPO / "launch.py", REPO / "conftest.py"]
    for pkg in PACKAGES:
        found += sorted((REPO / pkg).rglob("*.py"))
    return [p for p in found if "migrations" not in p.relative_to(REPO).parts]


def test_the_scan_sees_the_packages():
    names = {p.relative_to(REPO).as_posix() for p in modules()}
    assert {"launch.py", "agent/protocol.py", "db/store/core.py", "tests/test_store.py"} <= names
    assert not any(n.startswith("db/migrations/") for n in names)


def test_no_module_over_700_lines():
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by what they hold): {long}"
