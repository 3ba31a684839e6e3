"""Collection of the packages' doctests (`--doctest-modules` over agent, db, annotate, app
and training, set in pyproject.toml). Test fixtures live in tests/conftest.py."""

from __future__ import annotations

import importlib.util

# Alembic runs the migrations inside its own context; env.py cannot even be imported
# outside it, so they are tested by opening stores (tests/test_store.py), not collected.
collect_ignore = ["db/migrations"]

# The web app's UI module imports Gradio at the top (it builds the Blocks); with only the
# core dependencies installed (no `app` extra) it cannot be imported, so it is not collected.
if importlib.util.find_spec("gradio") is None:
    collect_ignore += ["app/ui"]
