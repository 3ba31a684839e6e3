"""Shared set-up for the app tests: a small demo store, seeded once and copied per test."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

_TEMPLATE: dict[str, Path] = {}

# httpx settings for gradio_client in tests: its default 5 s read timeout is too short for a
# 2-core machine running the suite's workers at once.
SLOW_OK = {"timeout": 120}
# The browser tests' wait for one server answer (a panel drawn, a form shown). A full run at
# two workers per core on two cores, with Ray and training tests beside it, once took over
# 20 s to load a candidate into the Author tab; how fast it should be is for
# bench/app_latency.py, not for a test's timeout.
ANSWER_MS = 45_000


def as_cookie(token: str) -> dict[str, str]:
    """Request headers presenting `token` as the session cookie."""
    return {"Cookie": f"loupe_session={token}"}


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


class Tab:
    """The one Chromium page a browser test file drives, on one port kept for the file.

    A first visit compiles Gradio's and Plotly's scripts (about 7 s of a 2-core machine);
    the same page opening the same address again finds them compiled (about 2.5 s). So each
    test serves its own app, on its own fresh store, on this port (`serve`), and opens it in
    this page. Between tests the page goes to about:blank before the server stops: nothing a
    test's page still had on its way can reach the next test's server.
    """

    def __init__(self, browser) -> None:
        from app.main import listen_socket

        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        # leaving a page with unsaved text asks first (app/keys.js); between tests it may go
        self.page.on("dialog", lambda d: d.accept() if d.type == "beforeunload" else d.dismiss())
        self._sock = listen_socket("127.0.0.1", 0)  # held for the file: no one else takes it

    @contextmanager
    def serve(self, ctx, **kwargs):
        """The app on `ctx` at this tab's address, a clean page (no cookies), then both
        stopped: yields (server, page)."""
        from app.main import serve

        self.context.clear_cookies()
        srv = serve(ctx, sock=self._sock.dup(), **kwargs)  # the server closes its own copy
        try:
            yield srv, self.page
        finally:
            try:
                self.page.goto("about:blank", timeout=20_000)
            finally:
                srv.close()

    def close(self) -> None:
        self.context.close()
        self._sock.close()
