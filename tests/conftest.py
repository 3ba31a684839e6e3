"""Shared fixtures. Real spectra are read from ../shared/spectra when that folder exists."""

from __future__ import annotations

import csv
import os
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Each test process its own Gradio upload folder (inherited by the servers it starts): a
# test that checks what an anonymous call left there must not see a parallel test's files.
os.environ["GRADIO_TEMP_DIR"] = tempfile.mkdtemp(prefix="loupe-test-gradio-")
SHARED_SPECTRA = Path(os.environ.get("LOUPE_SPECTRA") or REPO.parent / "shared" / "spectra")


@pytest.fixture(scope="session")
def shared_spectra() -> Path:
    """The folder of real spectra; tests using it skip cleanly where it is absent."""
    if not (SHARED_SPECTRA / "manifest.csv").is_file():
        pytest.skip(f"real spectra not available ({SHARED_SPECTRA} is absent)")
    return SHARED_SPECTRA


@pytest.fixture(scope="session")
def manifest_rows(shared_spectra: Path) -> list[dict[str, str]]:
    with open(shared_spectra / "manifest.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def mem_store():
    """A fresh in-memory store (migrated), closed after the test."""
    from db.store import Store

    store = Store("sqlite://")
    yield store
    store.close()


@pytest.fixture
def ctx(tmp_path_factory, tmp_path):
    """The app's context on a fresh copy of the seeded demo store, closed after the test."""
    from tests.app_support import context

    c = context(tmp_path_factory, tmp_path)
    yield c
    c.store.close()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint (`training.tiny_model`), built once per session."""
    pytest.importorskip("torch")
    from training.tiny_model import build

    return build(tmp_path_factory.mktemp("tiny-qwen2.5-vl"))


@pytest.fixture(scope="session")
def training_sample(tmp_path_factory) -> tuple[Path, Path]:
    """A small SFT export folder and RL export (JSONL) from scripted runs on simulated spectra."""
    pytest.importorskip("datasets")
    from training.data import write_sample

    return write_sample(tmp_path_factory.mktemp("training-sample"), n=6, seed=0, renderer="fast")


SLOW_TIMEOUT_S = 900


def pytest_collection_modifyitems(config, items):
    """Slow tests (training steps, soak, crash runs) get a longer timeout than the default,
    and the files with the most slow tests run first."""
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    # `make test` hands whole files to the workers in this order (--no-loadscope-reorder):
    # long files first and short ones last keep both workers busy to the end, where
    # xdist's own order (most tests first) left a long file running alone at the end.
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])  # stable: a file's own order is kept


@pytest.fixture(scope="module")
def forks():
    """A fork server with Loupe imported, for the kill tests (`tests.crash_support`)."""
    from tests.crash_support import ForkServer

    server = ForkServer()
    yield server
    server.close()


# Debian's Chromium, started as the browser tests (tests/test_browser*.py) drive it.
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium; .ci/run does)")
    sync = pytest.importorskip("playwright.sync_api")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def tab(browser):
    """One page for the file's tests, each serving its own app at the file's one address
    (`tests.app_support.Tab`): the page's scripts stay compiled from test to test."""
    from tests.app_support import Tab

    t = Tab(browser)
    yield t
    t.close()


# -- PostgreSQL: a database of its own per test on the server LOUPE_TEST_PG_URL names
# (`.ci/run` starts a throwaway cluster), skipped where none is given.
PG_URL = os.environ.get("LOUPE_TEST_PG_URL")


@pytest.fixture
def pg_url():
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    if not PG_URL:
        pytest.skip("LOUPE_TEST_PG_URL is not set (no PostgreSQL server; .ci/run starts one)")
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"loupe_store_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
    except DBAPIError as err:
        admin.dispose()
        pytest.skip(f"cannot create a test database on {PG_URL}: {err.orig}")
    yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def each_store(request):
    """A fresh store on SQLite and, where a server is given, on PostgreSQL: for code that
    runs SQL of its own (the audit's draw and lease, the catalogue's reads)."""
    from db.store import Store

    url = "sqlite://" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    s = Store(url)
    yield s
    s.close()
