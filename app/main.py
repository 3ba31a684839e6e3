"""The vetting web app (vet, author, dashboard, export, experts): its context, the Gradio
app with its login, Host and origin checks, and the server (`launch.py serve` is
`commands.serve`)."""

from __future__ import annotations

import errno
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from db.settings import DEFAULTS, ServeSettings

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


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
    from annotate.export import lifetime
    from annotate.learning import schedule
    from annotate.learning.fit import inspector_dir

    lifetime.sweep(ctx.export_dir)  # the staging folders of exports killed outright

    # every learn_every new labels the next inspector version is fitted in the background
    schedule.attach(store, inspector_dir(ctx.export_dir))
    if templates:
        from agent.formats.template_files import read_templates

        ctx.templates = read_templates(templates)  # a bad folder stops the start, naming it
    if not login and ctx.read.expert(ctx.local_expert) is None:
        from annotate.team.experts import create_expert

        create_expert(store, ctx.local_expert, "admin", None, actor="serve")
    return ctx


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

    from app import auth, downloads
    from app.ui import CSS, KEYS_JS, build
    from app.ui.assets import plotly_head, script_response

    demo = build(ctx)
    demo.queue(default_concurrency_limit=8)
    api = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # no schema to strangers
    kwargs: dict[str, Any] = dict(
        css=CSS,
        js=f"() => {{ {KEYS_JS} }}",
        head=plotly_head(),
        max_file_size=ctx.settings.max_upload_bytes,
        # Export files never go through Gradio's file route (app.downloads): not allowed,
        # blocked, and refused by a guard however a request spells their path.
        blocked_paths=[str(ctx.export_dir)],
        footer_links=[],
        # Gradio keeps every call's inputs and outputs in the browser's localStorage by
        # default: each decision re-read and re-wrote that history (figures included) on the
        # page's main thread, a third of a decision's cost there, and left the spectra and
        # verdicts an expert saw in the browser's storage.
        run_history=False,
    )
    # export files: by the token the store recorded, to admins (or their owner) only; the
    # file-route guard goes in first, so that the login gate runs before it
    downloads.install_downloads(api, ctx)
    downloads.install_file_route_guard(api, ctx.export_dir)
    if ctx.login:
        auth.install(
            api,
            ctx.store,
            secure_cookie=secure_cookie,
            session_seconds=session_seconds or ctx.settings.session_seconds,
            trusted_proxies=trusted_proxies or (),
        )
        kwargs["auth_dependency"] = lambda request: auth.user_for_request(ctx.store, request)
    else:
        auth.install_origin_check(api, trusted_proxies or ())

    # the vet tab's Plotly bundle (app/static/README.md); behind the login like the rest
    api.add_route(
        "/loupe-static/{name}",
        lambda request: script_response(
            request.path_params["name"], request.headers.get("accept-encoding", "")
        ),
        include_in_schema=False,
    )

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
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL is bracketed
    return Server(f"http://{shown}:{port}", thread, server)
