"""Another site cannot change anything through a logged-in expert's browser: every
state-changing route of the app (every Gradio endpoint by every route that runs it, the
upload route, logout, and anything else that is not GET) refuses a request that carries the
expert's session cookie but comes from another site (Origin, else Referer, naming another
host; "null", as sandboxed frames and file:// pages send it), and nothing is written.
The same request from the app's own page is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from app.main import build_app
from tests.app_support import context
from tests.test_access import _routes, files_under, snapshot

FOREIGN = (
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
    {"Referer": "https://evil.example/page"},
    {"Origin": "http://testserver.evil.example"},
)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    from annotate.team.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path_factory.mktemp("csrf"), login=True)
    create_expert(ctx.store, "bob", "expert", "pw-bob-123456")
    create_expert(ctx.store, "ada", "admin", "pw-ada-123456")
    yield ctx
    ctx.store.close()


def test_no_state_changing_route_takes_a_request_from_another_site(team):
    import gradio.utils

    app, _ = build_app(team)
    with TestClient(app) as web:
        tokens = {}
        for name in ("bob", "ada"):
            r = web.post("/login", data={"username": name, "password": f"pw-{name}-123456"},
                         follow_redirects=False)  # fmt: skip
            tokens[name] = r.cookies["loupe_session"]
            web.cookies.clear()
        deps = web.get("/config", headers={"Cookie": f"loupe_session={tokens['ada']}"}).json()[
            "dependencies"
        ]
        uploads = Path(gradio.utils.get_upload_folder())
        files_before = files_under(uploads) | files_under(team.data_roots[0])
        before = snapshot(team.store)
        codes: dict[str, set[int]] = {}
        for name, token in tokens.items():
            for foreign in FOREIGN:
                headers = {"Cookie": f"loupe_session={token}", **foreign}
                for d in deps:
                    payload = {"data": [None] * len(d.get("inputs", [])), "fn_index": d["id"],
                               "session_hash": f"{name}1", "event_data": None,
                               "trigger_id": None}  # fmt: skip
                    r = web.post("/gradio_api/queue/join", json=payload, headers=headers)
                    codes.setdefault(f"queue/join #{d['id']}", set()).add(r.status_code)
                    if d.get("api_name"):
                        for route in ("call", "run", "api"):
                            path = f"/gradio_api/{route}/{d['api_name']}"
                            r = web.post(path, json={"data": payload["data"]}, headers=headers)
                            codes.setdefault(path, set()).add(r.status_code)
                for method, path in _routes(web.app):
                    if method in ("GET", "HEAD", "OPTIONS"):
                        continue
                    url = path.replace("{", "").replace("}", "").replace(":path", "")
                    if url == "/gradio_api/upload":
                        r = web.post(url, headers=headers,
                                     files={"files": ("x.csv", b"wavelength,flux\n1,2\n")})  # fmt: skip
                    else:
                        r = web.request(method, url, json={}, headers=headers,
                                        follow_redirects=False)  # fmt: skip
                    codes.setdefault(f"{method} {path}", set()).add(r.status_code)
        passed = {k: v for k, v in codes.items() if v != {403}}
        assert not passed, passed
        assert snapshot(team.store) == before
        assert files_under(uploads) | files_under(team.data_roots[0]) == files_before
        # the control: the app's own page (same Origin) is served
        dash = next(d for d in deps if d.get("api_name") == "dashboard")
        r = web.post("/gradio_api/queue/join",
                     headers={"Cookie": f"loupe_session={tokens['bob']}",
                              "Origin": "http://testserver"},
                     json={"data": ["all", 0.95], "fn_index": dash["id"], "session_hash": "b2",
                           "event_data": None, "trigger_id": None})  # fmt: skip
        assert r.status_code == 200, r.text
