"""Login for team deployments: a form, an expiring session cookie, and the Gradio hook.

Passwords are checked against the store's slow-KDF hashes; a successful login creates a
session in the store (only the token's hash is kept there) and sets it as an HttpOnly
cookie. Gradio asks `user_for_request` on every page load and API call; anything without a
live session is refused (401), and the page itself redirects to the login form.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

COOKIE = "loupe_session"

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


def install(app: FastAPI, store: Any, *, secure_cookie: bool = False) -> None:
    """Add /login and /logout to `app`, and send anonymous page loads to /login."""

    @app.get("/login", response_class=HTMLResponse)
    def login_form() -> str:
        return LOGIN_PAGE.format(error="")

    @app.post("/login")
    def login(username: str = Form(""), password: str = Form("")) -> Response:
        token = store.login(username, password)
        if not token:
            page = LOGIN_PAGE.format(error='<p class="err">Wrong name or password.</p>')
            return HTMLResponse(page, status_code=401)
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(
            COOKIE, token, httponly=True, samesite="lax", secure=secure_cookie, path="/"
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
    async def to_login(request: Request, call_next):
        if (
            request.method == "GET"
            and request.url.path in ("/", "")
            and not user_for_request(store, request)
        ):
            return RedirectResponse("/login", status_code=303)
        return await call_next(request)
