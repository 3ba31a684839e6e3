"""The running app through `gradio_client`: named endpoints, state per client, login."""

from __future__ import annotations

import json

import httpx
import pytest
from gradio_client import Client

from app.main import serve
from tests.app_support import SLOW_OK, as_cookie, context


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    ctx = context(tmp_path_factory, tmp)
    srv = serve(ctx)
    yield ctx, srv
    srv.close()
    ctx.store.close()


@pytest.fixture(scope="module")
def team_app(tmp_path_factory):
    from annotate.team.experts import create_expert

    tmp = tmp_path_factory.mktemp("api-login")
    ctx = context(tmp_path_factory, tmp, login=True)
    create_expert(ctx.store, "ada", "admin", "pw-ada-123")
    create_expert(ctx.store, "bob", "expert", "pw-bob-123")
    srv = serve(ctx)
    yield ctx, srv
    srv.close()
    ctx.store.close()


def test_vet_through_the_api(app):
    ctx, srv = app
    c = Client(srv.url, verbose=False, httpx_kwargs=SLOW_OK)
    out = c.predict(api_name="/next")
    # the vet plots' figures come as Plotly JSON (the page draws them, keys.js)
    figs = [json.loads(o) for o in out if isinstance(o, str) and o.startswith('{"data"')]
    assert figs and figs[0]["layout"]["meta"]["candidate"]
    assert {t["type"] for f in figs for t in f["data"]} <= {"scatter", "scattergl"}
    before = len(ctx.store.reviews())
    out = c.predict(api_name="/accept")
    assert any(isinstance(o, str) and o.startswith("Saved **accept**") for o in out)
    out = c.predict("NO", "1", "no Balmer emission", api_name="/correct")
    assert any(isinstance(o, str) and o.startswith("Saved **correct**") for o in out)
    reviews = ctx.store.reviews()
    assert len(reviews) == before + 2
    assert {r.action for r in reviews[-2:]} == {"accept", "correct"}
    assert reviews[-1].wrong_step == 0 and reviews[-1].seconds is not None


def _login(url: str, name: str, password: str) -> Client:
    r = httpx.post(url + "/login", data={"username": name, "password": password})
    token = r.cookies.get("loupe_session") or r.history[0].cookies.get("loupe_session")
    assert token, r.text
    return Client(url, verbose=False, headers=as_cookie(token), httpx_kwargs=SLOW_OK)


def _head(out) -> str:
    return next(o for o in out if isinstance(o, str) and "loupe-head" in o)


def test_two_experts_get_different_items(team_app):
    ctx, srv = team_app
    a = _login(srv.url, "ada", "pw-ada-123")
    b = _login(srv.url, "bob", "pw-bob-123")
    assert _head(a.predict(api_name="/next")) != _head(b.predict(api_name="/next"))
    a.predict(api_name="/skip")
    b.predict(api_name="/skip")


def test_dashboard_and_export_endpoints(app):
    ctx, srv = app
    c = Client(srv.url, verbose=False, httpx_kwargs=SLOW_OK)
    c.predict(api_name="/next")
    c.predict(api_name="/reject")
    dash = c.predict("all", 0.95, api_name="/dashboard")
    assert "candidates" in dash[0]
    assert all(d.get("type") == "plotly" for d in dash[1:7])
    msg, manifest, files, hist = c.predict("rl", api_name="/export")
    assert msg.startswith("**rl** export"), msg
    assert manifest and files


def test_login_required_and_writes_attributed(team_app):
    ctx, srv = team_app
    # anonymous: the page redirects to the form, the API refuses
    r = httpx.get(srv.url + "/", follow_redirects=False)
    assert r.status_code in (302, 303, 307) and r.headers["location"].endswith("/login")
    assert httpx.get(srv.url + "/gradio_api/info").status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - any refusal will do; nothing may be written
        Client(srv.url, verbose=False, httpx_kwargs=SLOW_OK).predict(api_name="/accept")
    assert ctx.store.reviews(actions=["accept"]) == []
    bad = httpx.post(srv.url + "/login", data={"username": "bob", "password": "nope"})
    assert bad.status_code == 401
    ok = httpx.post(srv.url + "/login", data={"username": "bob", "password": "pw-bob-123"})
    token = ok.cookies.get("loupe_session") or ok.history[0].cookies.get("loupe_session")
    assert token
    c = Client(srv.url, verbose=False, headers=as_cookie(token), httpx_kwargs=SLOW_OK)
    c.predict(api_name="/next")
    c.predict(api_name="/accept")
    r = ctx.store.reviews(actions=["accept"])[-1]
    assert ctx.store.expert(r.expert_id).name == "bob"
    msg, *_ = c.predict("sft", api_name="/export")
    assert msg.startswith("Refused") and "not an admin" in msg
    httpx.post(srv.url + "/logout", cookies={"loupe_session": token})
    assert ctx.store.session_expert(token) is None
