"""Serve the vetting web app (vet, author, dashboard, export, experts).

    python launch.py                              # demo database, http://127.0.0.1:7860
    python launch.py serve --db postgresql+psycopg://... --host 0.0.0.0 --login

With no candidates in the database, the demo set is generated, ingested and vetted by
the `--policy` agent first, so the first page already shows real trajectories.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from db.settings import DEFAULTS, ServeSettings
from db.store import DEFAULT_DB


def trusted_proxy(value: str) -> str:
    """`--trusted-proxy`'s type: an IP address or network, refused when the arguments are
    read (not later, as a traceback, when the app is built)."""
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8, ::1)"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, help="SQLAlchemy database URL.")
    parser.add_argument("--port", type=int, default=7860, help="Port to listen on.")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="Address to listen on; 0.0.0.0 exposes the app to the network (use --login).",
    )
    parser.add_argument(
        "--login",
        action="store_true",
        help="Require experts to log in (accounts from `launch.py add-expert`).",
    )
    parser.add_argument(
        "--data-root",
        action="append",
        default=None,
        help="Folder uploads are stored in and server paths may be read from (repeatable); "
        "default: data/.",
    )
    parser.add_argument(
        "--policy",
        default="rules",
        help="Agent policy that vets the demo set when the database is empty, and new uploads.",
    )
    parser.add_argument(
        "--export-dir", default="exports", help="Folder exports are written to (download links)."
    )
    parser.add_argument(
        "--max-upload-mb",
        type=float,
        default=DEFAULTS.max_upload_mb,
        help="Largest spectrum file accepted.",
    )
    parser.add_argument(
        "--templates",
        default=None,
        metavar="DIR",
        help="Folder of template spectra (any format Loupe reads, rest frame) offered beside "
        "the built-in ones for the overlay on the vet page.",
    )
    parser.add_argument(
        "--no-seed", action="store_true", help="Do not seed an empty database with the demo set."
    )
    parser.add_argument(
        "--session-hours",
        type=float,
        default=DEFAULTS.session_hours,
        help="With --login: a session expires this long after logging in.",
    )
    parser.add_argument(
        "--secure-cookie",
        action="store_true",
        help="With --login: send the session cookie over HTTPS only (behind a TLS proxy).",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        type=trusted_proxy,
        default=[],
        metavar="IP",
        help="Address or network of the reverse proxy in front of the app (repeatable): only "
        "its X-Forwarded-For/-Proto/-Host are believed (login throttle, cookie, origin check).",
    )


def make_context(
    db: str,
    *,
    login: bool = False,
    data_roots: list[str] | None = None,
    policy: str = "rules",
    export_dir: str = "exports",
    settings: ServeSettings = DEFAULTS,
    templates: str | None = None,
):
    from app.context import Context
    from db.store import Store

    if db.startswith("sqlite:///") and not db.startswith("sqlite:///:memory:"):
        Path(db.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    roots = [Path(r).resolve() for r in (data_roots or ["data"])]
    for r in roots:
        r.mkdir(parents=True, exist_ok=True)
    store = Store(db)
    ctx = Context(
        store=store,
        login=login,
        data_roots=roots,
        policy=policy,
        export_dir=Path(export_dir).resolve(),
        settings=settings,
    )
    if templates:
        from agent.formats.template_files import read_templates

        ctx.templates = read_templates(templates)  # a bad folder stops the start, naming it
    if not login and ctx.read.expert(ctx.local_expert) is None:
        from annotate.experts import create_expert

        create_expert(store, ctx.local_expert, "admin", None, actor="serve")
    return ctx


def seed_demo(ctx, out_dir: Path, policy: str = "rules", n_per_class: int | None = None) -> int:
    """Generate, ingest and vet the demo set; returns the number of candidates vetted."""
    from app.pages.upload import ingest_and_vet
    from training.sim.demo import generate_demo

    kwargs: dict[str, Any] = {}
    if n_per_class is not None:
        kwargs["n_per_class"] = n_per_class
    rows = generate_demo(out_dir, **kwargs)
    return ingest_and_vet(ctx, rows, policy=policy, actor="demo")


@dataclass
class Server:
    url: str
    thread: threading.Thread
    server: Any

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build_app(
    ctx,
    *,
    session_seconds: float | None = None,
    secure_cookie: bool = False,
    trusted_proxies: list[str] | None = None,
):
    """The FastAPI app: Gradio at / and, with login on, /login and /logout (sessions last
    `session_seconds`, default the context's `settings.session_seconds`), export files for
    admins only. Requests from another site that would change something are refused."""
    import gradio as gr
    from fastapi import FastAPI

    from app import auth
    from app.ui import CSS, KEYS_JS, build

    demo = build(ctx)
    demo.queue(default_concurrency_limit=8)
    api = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # no schema to strangers
    kwargs: dict[str, Any] = dict(
        css=CSS,
        js=f"() => {{ {KEYS_JS} }}",
        max_file_size=ctx.settings.max_upload_bytes,
        allowed_paths=[str(ctx.export_dir)],
        footer_links=[],
    )
    if ctx.login:
        auth.install(
            api,
            ctx.store,
            secure_cookie=secure_cookie,
            session_seconds=session_seconds or ctx.settings.session_seconds,
            trusted_proxies=trusted_proxies or (),
        )
        # The export folder is in Gradio's allowed paths (so an export's files can be
        # offered for download), which its file route serves to every session.
        auth.install_admin_folder(api, ctx.store, ctx.export_dir)
        kwargs["auth_dependency"] = lambda request: auth.user_for_request(ctx.store, request)
    else:
        auth.install_origin_check(api, trusted_proxies or ())
    app = gr.mount_gradio_app(api, demo, path="/", **kwargs)
    # Gradio checks that a file named in a request was uploaded by that client only once
    # the Blocks count as launched, which mounting alone does not set: without this, any
    # logged-in caller could have the server read any file it can reach.
    demo.has_launched = True
    return app, demo


def serve(
    ctx,
    host: str = "127.0.0.1",
    port: int | None = None,
    *,
    session_seconds: float | None = None,
    secure_cookie: bool = False,
    trusted_proxies: list[str] | None = None,
) -> Server:
    """Start the app in a background thread; returns once it answers."""
    import uvicorn

    app, _ = build_app(
        ctx,
        session_seconds=session_seconds,
        secure_cookie=secure_cookie,
        trusted_proxies=trusted_proxies,
    )
    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name="loupe-app")
    thread.start()
    deadline = time.time() + 60
    while not server.started:
        if not thread.is_alive() or time.time() > deadline:
            raise RuntimeError(f"the app did not start on {host}:{port}")
        time.sleep(0.05)
    return Server(f"http://{host}:{port}", thread, server)


def main(args: argparse.Namespace) -> int:
    settings = ServeSettings(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        session_seconds=args.session_hours * 3600,
    )
    ctx = make_context(
        args.db,
        login=args.login,
        data_roots=args.data_root,
        policy=args.policy,
        export_dir=args.export_dir,
        settings=settings,
        templates=args.templates,
    )
    if not args.no_seed and ctx.read.count_candidates() == 0:
        print("empty database: generating, ingesting and vetting the demo set ...")
        t0 = time.time()
        n = seed_demo(ctx, ctx.data_roots[0] / "demo", policy=args.policy)
        print(f"seeded {n} candidates in {time.time() - t0:.1f} s")
    if args.login and not ctx.read.experts():
        print("login is on but there are no experts: `launch.py add-expert NAME --role admin`")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.login:
        print("warning: serving beyond localhost without --login; anyone who can reach it writes")
    srv = serve(
        ctx,
        args.host,
        args.port,
        secure_cookie=args.secure_cookie,
        trusted_proxies=args.trusted_proxy,
    )
    print(f"Loupe is running on {srv.url}  (Ctrl+C to stop)")
    try:
        while srv.thread.is_alive():
            srv.thread.join(0.5)
    except KeyboardInterrupt:
        srv.close()
    return 0
