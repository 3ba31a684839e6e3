"""Shared set-up for the app tests: a small demo store, seeded once and copied per test."""

from __future__ import annotations

import shutil
from pathlib import Path

_TEMPLATE: dict[str, Path] = {}


def seeded_copy(tmp_path_factory, dest: Path, n_per_class: int = 2) -> Path:
    """A fresh SQLite file holding the demo set vetted by the rules agent (copied, not re-run)."""
    key = f"n{n_per_class}"
    if key not in _TEMPLATE:
        from app.main import make_context
        from commands.serve import seed_demo

        root = tmp_path_factory.mktemp(f"app-template-{key}")
        ctx = make_context(f"sqlite:///{root / 'loupe.db'}", data_roots=[str(root / "data")],
                           export_dir=str(root / "exports"))  # fmt: skip
        seed_demo(ctx, root / "data" / "demo", n_per_class=n_per_class)
        ctx.store.close()
        _TEMPLATE[key] = root
    root = _TEMPLATE[key]
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "loupe.db", dest / "loupe.db")
    return root


def context(tmp_path_factory, tmp_path: Path, *, login: bool = False, n_per_class: int = 2):
    from app.main import make_context

    root = seeded_copy(tmp_path_factory, tmp_path, n_per_class)
    return make_context(
        f"sqlite:///{tmp_path / 'loupe.db'}", login=login,
        data_roots=[str(root / "data"), str(tmp_path / "data")],
        export_dir=str(tmp_path / "exports"),
    )  # fmt: skip
