"""Login for team deployments: a form, an expiring session cookie, and the Gradio hook.

Passwords are checked against the store's slow-KDF hashes; a successful login creates a
session in the store (only the token's hash is kept there) that expires after
`session_seconds` (`serve --session-hours`, default 12 h) and sets it as an HttpOnly
cookie. Every request but the login form's needs a live session: the page redirects to
the form, anything else is refused (401); Gradio also asks `user_for_request` to name the
expert of each API call.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

COOKIE = "loupe_session"
SESSION_SECONDS = 12 * 3600.0  # a working day; the store refuses the token after this
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
    session_seconds: float = SESSION_SECONDS,
) -> None:
    """Add /login and /logout to `app`, and send anonymous page loads to /login. Sessions
    last `session_seconds` from login; `secure_cookie` for deployments behind HTTPS."""
    if not session_seconds > 0:
        raise ValueError(f"session lifetime must be positive (got {session_seconds})")

    @app.get("/login", response_class=HTMLResponse)
    def login_form() -> str:
        return LOGIN_PAGE.format(error="")

    @app.post("/login")
    def login(username: str = Form(""), password: str = Form("")) -> Response:
        token = store.login(username, password, ttl_seconds=session_seconds)
        if not token:
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
            store.logout(token)
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
