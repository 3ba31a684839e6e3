"""Login for team deployments: a form, an expiring session cookie, and the Gradio hook.

Passwords are checked against the store's slow-KDF hashes; a successful login creates a
session in the store (only the token's hash is kept there) that expires after
`session_seconds` (`serve --session-hours`, default 12 h) and sets it as an HttpOnly
cookie. Every request but the login form's needs a live session: the page redirects to
the form, anything else is refused (401); Gradio also asks `user_for_request` to name the
expert of each API call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from annotate import experts
from annotate.settings import DEFAULTS

COOKIE = "loupe_session"
PUBLIC_PATHS = ("/login", "/logout")  # all that answers without a session

LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Loupe: log in</title>
<style>body{{font-family:system-ui,sans-serif;display:flex;justify-content:center;
margin-top:12vh}} form{{border:1px solid #ccc;border-radius:8px;padding:24px 32px;
min-width:280px}} input{{display:block;width:100%;margin:6px 0 14px;padding:6px;
box-sizing:border-box}} .err{{color:#c1121f}}</style></head><body>
<form method="post" action="/login"><h2>Loupe</h2>{error}
<label>name<input name="username" autocomplete="username" autofocus></label>
<label>password<input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Log in</button></form></body></html>"""


class LoginThrottle:
    """Refuse logins for a name (or from an address) after `max_failures` wrong passwords
    within `window_seconds`, until the oldest of them ages out: the slow KDF makes each
    guess cost the server, so a guesser must not get unlimited ones. Per process; with
    several app processes each counts its own (a proxy's rate limit covers the sum)."""

    def __init__(
        self,
        max_failures: int = 5,
        window_seconds: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.max_failures = max_failures
        self.window = window_seconds
        self.clock = clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(key, []) if now - t < self.window]
        if times:
            self._failures[key] = times
        else:
            self._failures.pop(key, None)
        return times

    def retry_after(self, *keys: str) -> float:
        """Seconds until a login for these keys may be tried again (0: now)."""
        now = self.clock()
        with self._lock:
            waits = [
                self.window - (now - times[-self.max_failures])
                for times in (self._recent(k, now) for k in keys)
                if len(times) >= self.max_failures
            ]
        return max(waits, default=0.0)

    def failed(self, *keys: str) -> None:
        now = self.clock()
        with self._lock:
            for k in keys:
                self._failures[k] = [*self._recent(k, now), now]


def user_for_request(store: Any, request: Request) -> str | None:
    """The logged-in expert's name for this request, or None (no cookie, expired, inactive)."""
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    return store.session_expert(token)


def install(
    app: FastAPI,
    store: Any,
    *,
    secure_cookie: bool = False,
    session_seconds: float = DEFAULTS.session_seconds,
    throttle: LoginThrottle | None = None,
) -> None:
    """Add /login and /logout to `app`, and send anonymous page loads to /login. Sessions
    last `session_seconds` from login; `secure_cookie` for deployments behind HTTPS."""
    if not session_seconds > 0:
        raise ValueError(f"session lifetime must be positive (got {session_seconds})")
    throttle = throttle or LoginThrottle()

    @app.get("/login", response_class=HTMLResponse)
    def login_form() -> str:
        return LOGIN_PAGE.format(error="")

    @app.post("/login")
    def login(request: Request, username: str = Form(""), password: str = Form("")) -> Response:
        keys = (f"name:{username.strip().lower()}", f"addr:{_client(request)}")
        wait = throttle.retry_after(*keys)
        if wait > 0:
            msg = f"Too many failed logins; try again in {int(wait) + 1} s."
            page = LOGIN_PAGE.format(error=f'<p class="err">{msg}</p>')
            return HTMLResponse(page, status_code=429, headers={"Retry-After": str(int(wait) + 1)})
        token = experts.login(store, username, password, ttl_seconds=session_seconds)
        if not token:
            throttle.failed(*keys)
            page = LOGIN_PAGE.format(error='<p class="err">Wrong name or password.</p>')
            return HTMLResponse(page, status_code=401)
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(
            COOKIE,
            token,
            max_age=max(1, int(session_seconds)),
            httponly=True,
            samesite="lax",
            secure=secure_cookie,
            path="/",
        )
        return resp

    @app.get("/logout")
    def logout(request: Request) -> Response:
        token = request.cookies.get(COOKIE)
        if token:
            experts.logout(store, token)
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    @app.middleware("http")
    async def gate(request: Request, call_next):
        # Deny by default: Gradio checks the session on its API routes, but not on all of
        # its internals (/gradio_api/cancel, /reset, /stream/...), nor on static files.
        # Only the login form is served without a live session.
        if request.url.path.rstrip("/") in PUBLIC_PATHS:
            return await call_next(request)
        if await run_in_threadpool(user_for_request, store, request):
            return await call_next(request)
        if request.method in ("GET", "HEAD") and request.url.path in ("/", ""):
            return RedirectResponse("/login", status_code=303)
        return JSONResponse({"detail": "Not authenticated: log in at /login"}, status_code=401)


def _client(request: Request) -> str:
    # Behind the documented reverse proxy every request comes from the proxy, so the name
    # key is what limits a guesser there; the address key covers direct exposure.
    return request.client.host if request.client else "?"
