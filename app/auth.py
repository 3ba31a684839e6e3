"""Login for team deployments: a form, an expiring session cookie, and the Gradio hook.

Passwords are checked against the store's slow-KDF hashes; a successful login creates a
session in the store (only the token's hash is kept there) that expires after
`session_seconds` (`serve --session-hours`, default 12 h) and sets it as an HttpOnly,
SameSite=Lax cookie (Secure when the request came over HTTPS or `--secure-cookie`). Every
request but the login form's needs a live session: the page redirects to the form,
anything else is refused (401); Gradio also asks `user_for_request` to name the expert of
each API call. A state-changing request whose Origin (or Referer) names another site is
refused (403), login and logout included, so another site cannot post into a session, log
a browser into one of its choosing, or end one. Logging out is a POST: `GET /logout` only
shows the button that sends it. Export files download by token only (`app.downloads`).
With or without login, a request whose
Host is not one the app is served as is refused (`install_host_check`: DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from annotate.reads import Reads
from annotate.team import experts
from db.settings import DEFAULTS

COOKIE = "loupe_session"
PUBLIC_PATHS = ("/login", "/logout")  # all that answers without a session
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
KDF_SLOTS = 2  # password checks at once: argon2 takes 64 MiB and ~4 cores' worth each
KDF_WAIT_SECONDS = 20.0  # a login waits this long for a slot before it is told to retry

LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Loupe: log in</title>
<style>body{{font-family:system-ui,sans-serif;display:flex;justify-content:center;
margin-top:12vh}} form{{border:1px solid #ccc;border-radius:8px;padding:24px 32px;
min-width:280px}} input{{display:block;width:100%;margin:6px 0 14px;padding:6px;
box-sizing:border-box}} .err{{color:#c1121f}}</style></head><body>
<form method="post" action="/login"><h2>Loupe</h2>{error}
<label>name<input name="username" autocomplete="username" autofocus></label>
<label>password<input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Log in</button></form></body></html>"""

LOGOUT_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Loupe: log out</title>
<style>body{font-family:system-ui,sans-serif;display:flex;justify-content:center;
margin-top:12vh} form{border:1px solid #ccc;border-radius:8px;padding:24px 32px}</style>
</head><body><form method="post" action="/logout"><h2>Loupe</h2><p>End this session?</p>
<button type="submit" id="logout">Log out</button> <a href="/">back</a></form></body></html>"""


Check = Callable[[Request], Awaitable[Response | None]]


class Guard:
    """A check in front of the app, as plain ASGI: the check may answer in the app's place;
    otherwise the request and every message of the app's answer pass through untouched.
    Starlette's `app.middleware("http")` relays each answer through a task and a stream of
    its own; when a tab closed mid-answer it dropped Gradio's event stream (`sse_stream`,
    which answers its own close by yielding) part way, and the server logged "async
    generator ignored GeneratorExit"."""

    def __init__(self, app: ASGIApp, check: Check) -> None:
        self.app, self.check = app, check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            answer = await self.check(Request(scope))
            if answer is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def guard(app: FastAPI, check: Check) -> None:
    """Put `check` in front of everything added before it (the last added runs first)."""
    app.add_middleware(Guard, check=check)


class LoginThrottle:
    """Refuse logins after too many wrong passwords within `window_seconds`, until the
    oldest of them ages out: the slow KDF makes each guess cost the server, so a guesser
    must not get unlimited ones.

    Counted per (name, client): `max_failures` for one account from one client; and per
    client: `max_per_client` over all names. Never per name alone, which would let anyone
    lock any account (the admin's too) by failing for it. An attempt is reserved before the
    password is checked (`reserve`) and released only if it succeeds (`succeeded`), so
    simultaneous guesses cannot all slip past the check. Per process; with several app
    processes each counts its own (a proxy's rate limit covers the sum).
    """

    def __init__(
        self,
        max_failures: int = 5,
        window_seconds: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_per_client: int | None = None,
    ):
        self.max_failures = max_failures
        self.max_per_client = max_per_client or 4 * max_failures
        self.window = window_seconds
        self.clock = clock
        self._failures: dict[tuple[str, ...], list[float]] = {}
        self._unlocks: dict[str, Any] = {}  # name -> the store's unlock marker last seen
        self._lock = threading.Lock()

    def _keys(self, name: str, client: str) -> list[tuple[tuple[str, ...], int]]:
        return [
            (("name", name, client), self.max_failures),
            (("client", client), self.max_per_client),
        ]

    def _recent(self, key: tuple[str, ...], now: float) -> list[float]:
        times = [t for t in self._failures.get(key, []) if now - t < self.window]
        if times:
            self._failures[key] = times
        else:
            self._failures.pop(key, None)
        return times

    def reserve(self, name: str, client: str) -> tuple[float, float]:
        """Count an attempt for `name` from `client` now, before its password is checked.
        Returns (wait, stamp): wait > 0 means refused (nothing counted; retry after that many
        seconds); else pass `stamp` to `succeeded` if the password turns out right."""
        name = normalise(name)
        now = self.clock()
        with self._lock:
            keys = self._keys(name, client)
            waits = [
                self.window - (now - times[-limit])
                for times, limit in ((self._recent(k, now), limit) for k, limit in keys)
                if len(times) >= limit
            ]
            if waits:
                return max(waits), now
            for k, _ in keys:
                self._failures.setdefault(k, []).append(now)
            return 0.0, now

    def succeeded(self, name: str, client: str, stamp: float) -> None:
        """Release the attempt reserved at `stamp`: a right password is not a failure."""
        with self._lock:
            for k, _ in self._keys(normalise(name), client):
                times = self._failures.get(k, [])
                if stamp in times:
                    times.remove(stamp)

    def unlock(self, name: str, marker: Any = None) -> None:
        """Forget the failures for `name` from every client (an admin's `add-expert --unlock`;
        `marker` is the store's unlock marker, so each unlock applies once)."""
        name = normalise(name)
        with self._lock:
            self._unlocks[name] = marker
            for k in [k for k in self._failures if k[0] == "name" and k[1] == name]:
                del self._failures[k]

    def apply_unlock(self, name: str, marker: Any) -> None:
        """Unlock `name` if the store's unlock marker changed since last seen."""
        if marker is not None and self._unlocks.get(normalise(name)) != marker:
            self.unlock(name, marker)


def normalise(name: str) -> str:
    return (name or "").strip().lower()


def user_for_request(store: Any, request: Request) -> str | None:
    """The logged-in expert's name for this request, or None (no cookie, expired, inactive)."""
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    return Reads(store).session_expert(token)


def parse_proxies(
    proxies: Iterable[str] | None,
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Trusted proxy addresses or networks (`serve --trusted-proxy`), checked up front. An
    IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is taken as its IPv4 form."""
    out = []
    for p in proxies or ():
        try:
            net = ipaddress.ip_network(p.strip(), strict=False)
        except ValueError:
            raise ValueError(f"--trusted-proxy {p!r} is not an IP address or network") from None
        mapped = getattr(net.network_address, "ipv4_mapped", None)
        if mapped is not None and net.prefixlen >= 96:
            net = ipaddress.ip_network(f"{mapped}/{net.prefixlen - 96}", strict=False)
        out.append(net)
    return out


def ip_of(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address in `host`, or None if it is none; an IPv4-mapped IPv6 address (a dual-
    stack socket reports an IPv4 peer as `::ffff:127.0.0.1`) is its IPv4 address, so it is
    the same client and the same proxy whichever socket it came in on."""
    try:
        addr = ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return None
    mapped = getattr(addr, "ipv4_mapped", None)
    return mapped if mapped is not None else addr


def _trusted(host: str, proxies) -> bool:
    addr = ip_of(host)
    return addr is not None and any(addr in net for net in proxies)


def canonical(host: str) -> str:
    """`host` as the one text the throttle counts it under (`::ffff:1.2.3.4` is `1.2.3.4`)."""
    addr = ip_of(host)
    return str(addr) if addr is not None else host


def client_address(request: Request, proxies=()) -> str:
    """The address the request came from. X-Forwarded-For is believed only when the
    connection comes from a trusted proxy, and then only as far as the first address that
    is not itself a trusted proxy (entries further left are whatever the client wrote)."""
    host = request.client.host if request.client else "?"
    if not proxies or not _trusted(host, proxies):
        return canonical(host)
    hops = [h.strip() for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _trusted(hop, proxies):
            return canonical(hop)
        host = hop
    return canonical(host)


def _is_https(request: Request, proxies) -> bool:
    if request.url.scheme == "https":
        return True
    host = request.client.host if request.client else ""
    proto = request.headers.get("x-forwarded-proto", "")
    return bool(proxies) and _trusted(host, proxies) and proto.split(",")[0].strip() == "https"


def foreign_origin(request: Request, proxies=()) -> str | None:
    """The Origin (else Referer) of a request when it names another site than the one it
    was sent to, else None. Browsers send Origin on every cross-site POST; clients that
    send neither header (scripts, `gradio_client`) are not browsers riding a session."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return None
    hosts = {request.headers.get("host", "")}
    client = request.client.host if request.client else ""
    if proxies and _trusted(client, proxies):
        hosts.update(h.strip() for h in request.headers.get("x-forwarded-host", "").split(","))
    parts = urlsplit(source)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return source  # "null" (sandboxed frames, file://) counts as foreign
    return None if parts.netloc.lower() in {h.lower() for h in hosts if h} else source


def install_origin_check(app: FastAPI, trusted_proxies=()) -> None:
    """Refuse state-changing requests (anything but GET/HEAD/OPTIONS) from another site."""
    proxies = parse_proxies(trusted_proxies) if trusted_proxies else []

    async def same_origin(request: Request) -> Response | None:
        if request.method not in SAFE_METHODS and foreign_origin(request, proxies):
            return JSONResponse(
                {"detail": "Refused: the request came from another site (Origin/Referer)"},
                status_code=403,
            )
        return None

    guard(app, same_origin)


WILDCARD_ADDRESSES = ("0.0.0.0", "::")  # bound to every interface


def host_name(host_header: str) -> str:
    """The name in a Host header, without its port (`[::1]:7860` -> `::1`)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(host_header: str, allowed: Iterable[str]) -> bool:
    """Whether a request's Host names this app. Allowed names only, but when bound to
    every interface (a wildcard address among `allowed`) any IP address too: DNS
    rebinding needs a host name, so an address in Host is never another site's."""
    name, allowed = host_name(host_header), set(allowed)
    if name in allowed:
        return True
    if allowed & set(WILDCARD_ADDRESSES):
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False
    return False


def install_host_check(app: FastAPI, allowed: Iterable[str]) -> None:
    """Refuse every request whose Host is not one of `allowed` (`app.main.allowed_hosts`):
    a page on another site whose name is re-pointed at this address (DNS rebinding) would
    otherwise be same-origin with the app, pass the origin check and read the answers."""
    names = {host_name(h) for h in allowed}

    async def known_host(request: Request) -> Response | None:
        if not host_allowed(request.headers.get("host", ""), names):
            return JSONResponse(
                {"detail": "Refused: unknown Host (serve --allowed-host names the app's hosts)"},
                status_code=400,
            )
        return None

    guard(app, known_host)


def install(
    app: FastAPI,
    store: Any,
    *,
    secure_cookie: bool = False,
    session_seconds: float = DEFAULTS.session_seconds,
    throttle: LoginThrottle | None = None,
    trusted_proxies: Iterable[str] = (),
    kdf_slots: int = KDF_SLOTS,
    kdf_wait_seconds: float = KDF_WAIT_SECONDS,
) -> None:
    """Add /login and /logout to `app`, and send anonymous page loads to /login. Sessions
    last `session_seconds` from login; `secure_cookie` for deployments behind HTTPS;
    `trusted_proxies`: the reverse proxies whose X-Forwarded-For is believed."""
    if not session_seconds > 0:
        raise ValueError(f"session lifetime must be positive (got {session_seconds})")
    throttle = throttle or LoginThrottle()
    proxies = parse_proxies(trusted_proxies)
    kdf = threading.BoundedSemaphore(kdf_slots)

    def refuse(msg: str, status: int, headers: dict[str, str] | None = None) -> HTMLResponse:
        page = LOGIN_PAGE.format(error=f'<p class="err">{msg}</p>')
        return HTMLResponse(page, status_code=status, headers=headers)

    @app.get("/login", response_class=HTMLResponse)
    def login_form() -> str:
        return LOGIN_PAGE.format(error="")

    @app.post("/login")
    def login(request: Request, username: str = Form(""), password: str = Form("")) -> Response:
        client = client_address(request, proxies)
        if username.strip():
            throttle.apply_unlock(username, experts.login_unlock_marker(store, username))
        wait, stamp = throttle.reserve(username, client)
        if wait > 0:
            retry = str(int(wait) + 1)
            msg = f"Too many failed logins; try again in {retry} s."
            return refuse(msg, 429, {"Retry-After": retry})
        if not kdf.acquire(timeout=kdf_wait_seconds):
            throttle.succeeded(username, client, stamp)  # never checked: not a failure
            return refuse("The server is busy; try again shortly.", 503, {"Retry-After": "5"})
        try:
            token = experts.login(store, username, password, ttl_seconds=session_seconds)
        finally:
            kdf.release()
        if not token:
            return refuse("Wrong name or password.", 401)
        throttle.succeeded(username, client, stamp)
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(
            COOKIE,
            token,
            max_age=max(1, int(session_seconds)),
            httponly=True,
            samesite="lax",
            secure=secure_cookie or _is_https(request, proxies),
            path="/",
        )
        return resp

    @app.get("/logout", response_class=HTMLResponse)
    def logout_form(request: Request) -> Response:
        # A GET changes nothing: a link or an image on another site could make the browser
        # send one with the session cookie (SameSite=Lax lets top-level GETs through).
        if not request.cookies.get(COOKIE):
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(LOGOUT_PAGE)

    @app.post("/logout")
    def logout(request: Request) -> Response:
        # Cross-site posts are refused by the origin check, and carry no Lax cookie anyway.
        token = request.cookies.get(COOKIE)
        if token:
            experts.logout(store, token)
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    async def gate(request: Request) -> Response | None:
        # Deny by default: Gradio checks the session on its API routes, but not on all of
        # its internals (/gradio_api/cancel, /reset, /stream/...), nor on static files.
        # Only the login form is served without a live session.
        if request.url.path.rstrip("/") in PUBLIC_PATHS:
            return None
        if await run_in_threadpool(user_for_request, store, request):
            return None
        if request.method in ("GET", "HEAD") and request.url.path in ("/", ""):
            return RedirectResponse("/login", status_code=303)
        return JSONResponse({"detail": "Not authenticated: log in at /login"}, status_code=401)

    guard(app, gate)

    # Added last, so it runs first: a cross-site post is refused before anything else.
    install_origin_check(app, trusted_proxies)
