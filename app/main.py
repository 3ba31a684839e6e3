"""Serve the vetting web app (vet, author, dashboard, export, experts).

    python launch.py                              # demo database, http://127.0.0.1:7860
    python launch.py serve --db postgresql+psycopg://... --host 0.0.0.0 --login

On its default database (created if absent), or with `--seed-demo`, an empty store is
first seeded: the demo set is generated, ingested and vetted by the `--policy` agent, so the
first page already shows real trajectories. Any other `--db` must already exist (`ingest`
or `demo` create one): a mistyped path is refused, not made into a new, empty store.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from db.settings import DEFAULTS, ServeSettings
from db.store import DEFAULT_DB

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


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
        "--seed-demo",
        action="store_true",
        help="Create --db if absent and seed it with the demo set when empty (done anyway on "
        "the default database).",
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
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="Host name the app is reached by (repeatable; e.g. the proxy's public name): "
        "requests naming any other Host are refused. Always allowed: --host, localhost, "
        "127.0.0.1, ::1, and, when --host is 0.0.0.0 or ::, this machine's names and any "
        "IP address.",
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
    create: bool = True,
):
    from app.context import Context
    from db.store import Store

    roots = [Path(r).resolve() for r in (data_roots or ["data"])]
    for r in roots:
        r.mkdir(parents=True, exist_ok=True)
    store = Store(db, create=create)
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


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (0: any free port), for the server to listen on; a port
    out of range, a port in use or an address not on this machine is a `LoupeError` naming
    it, found before anything else starts."""
    if not 0 <= port <= 65535:
        raise LoupeError(f"--port {port} is not a port number (1 to 65535)")
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise LoupeError(f"--host {host!r} is not an address or host name ({exc})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            msg = f"port {port} on {host} is already in use; choose another with --port"
        elif exc.errno == errno.EADDRNOTAVAIL:
            msg = f"--host {host} is not an address of this machine"
        elif exc.errno == errno.EACCES:
            msg = f"no permission to listen on port {port} (ports below 1024 need privileges)"
        else:
            msg = f"cannot listen on {host}:{port} ({exc.strerror or exc})"
        raise LoupeError(msg) from None
    return sock


def allowed_hosts(host: str, extra: list[str] | None = None) -> list[str]:
    """The Host names the app answers to when bound to `host`: that address, the loopback
    names and `extra`; bound to every interface, also this machine's names and any IP
    address (DNS rebinding needs a name, so an address in Host is never a foreign site's)."""
    from app.auth import WILDCARD_ADDRESSES

    names = [host, *LOOPBACK_NAMES, *(extra or [])]
    if host in WILDCARD_ADDRESSES:
        names += [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(n.strip().lower() for n in names if n.strip()))


def build_app(
    ctx,
    *,
    session_seconds: float | None = None,
    secure_cookie: bool = False,
    trusted_proxies: list[str] | None = None,
    hosts: list[str] | None = None,
):
    """The FastAPI app: Gradio at / and, with login on, /login and /logout (sessions last
    `session_seconds`, default the context's `settings.session_seconds`), export files for
    admins only. Requests from another site that would change something are refused, and
    with `hosts` (`allowed_hosts`; `serve` always gives them) so is every request whose
    Host is not one of them."""
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
    if hosts is not None:
        auth.install_host_check(api, hosts)  # added last, so checked before anything else
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
    extra_hosts: list[str] | None = None,
    sock: socket.socket | None = None,
) -> Server:
    """Start the app in a background thread on `sock` (else a new socket on host:port, a
    free port when None); returns once it answers. Requests naming a Host other than
    `allowed_hosts(host, extra_hosts)` are refused."""
    import uvicorn

    sock = sock or listen_socket(host, port or 0)
    port = sock.getsockname()[1]
    app, _ = build_app(
        ctx,
        session_seconds=session_seconds,
        secure_cookie=secure_cookie,
        trusted_proxies=trusted_proxies,
        hosts=allowed_hosts(host, extra_hosts),
    )
    # proxy_headers off: uvicorn would otherwise rewrite the client address and scheme from
    # X-Forwarded-For/-Proto sent from 127.0.0.1, so anyone on this host could choose the
    # address the login throttle counts, or mark the cookie Secure. The app believes those
    # headers itself, from --trusted-proxy only (app.auth.client_address).
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="loupe-app"
    )
    thread.start()
    deadline = time.time() + 60
    while not server.started:
        if not thread.is_alive() or time.time() > deadline:
            sock.close()
            raise LoupeError(f"the app did not start on {host}:{port} (see the log above)")
        time.sleep(0.05)
    return Server(f"http://{host}:{port}", thread, server)


def main(args: argparse.Namespace) -> int:
    sock = listen_socket(args.host, args.port)  # a bad port or address stops here, on one line
    settings = ServeSettings(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        session_seconds=args.session_hours * 3600,
    )
    seeding = args.seed_demo or args.db == DEFAULT_DB
    ctx = make_context(
        args.db,
        create=seeding,
        login=args.login,
        data_roots=args.data_root,
        policy=args.policy,
        export_dir=args.export_dir,
        settings=settings,
        templates=args.templates,
    )
    if seeding and not args.no_seed and ctx.read.count_candidates() == 0:
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
        extra_hosts=args.allowed_host,
        sock=sock,
    )
    print(f"Loupe is running on {srv.url}  (Ctrl+C to stop)")
    try:
        while srv.thread.is_alive():
            srv.thread.join(0.5)
    except KeyboardInterrupt:
        srv.close()
    return 0
