"""Access with login on, against the app and a fresh database.

Requests go to the ASGI app in-process (Starlette's TestClient: the app's lifespan runs, so
Gradio's queue does, but no port is bound); only the test that drives the UI's event chain
with `gradio_client`, which needs a URL, serves the app on a free local port.

- Every Gradio endpoint the app exposes (named or not, taken from the app's own config)
  refuses anonymous calls on every route that runs it, and nothing is written (a snapshot
  of every table, and of the upload folder, before and after).
- An expert writes only as themselves: cannot alter another's review, export, or manage
  experts.
- Passwords are argon2id with non-trivial cost; sessions expire after the configured time.
- Uploads and catalogue paths cannot leave the data roots (`..`, absolute paths, symlinks),
  through the app and through `launch.py ingest --root`.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from sqlalchemy import inspect, text
from starlette.testclient import TestClient

from app import context as app_context
from app.main import build_app, serve
from app.pages import upload as upload_page
from tests.app_support import SLOW_OK, as_cookie, context
from tests.store_factory import write_text_spectrum

PASSWORDS = {"ada": "pw-ada-123456", "bob": "pw-bob-123456", "cy": "pw-cy-123456"}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    from annotate.team.experts import create_expert

    tmp = tmp_path_factory.mktemp("access")
    ctx = context(tmp_path_factory, tmp, login=True)
    create_expert(ctx.store, "ada", "admin", PASSWORDS["ada"])
    create_expert(ctx.store, "bob", "expert", PASSWORDS["bob"])
    create_expert(ctx.store, "cy", "expert", PASSWORDS["cy"])
    yield ctx
    ctx.store.close()


@pytest.fixture(scope="module")
def web(team):
    """The app in-process; a request carries a session only through `as_(token)`."""
    app, _ = build_app(team)
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="module")
def served(team):
    """The app on a free local port, for `gradio_client` (which takes only a URL)."""
    srv = serve(team)
    yield srv
    srv.close()


def token_for(http: httpx.Client, name: str, password: str | None = None) -> str:
    """Log in on `http` (in-process or over the network); its cookie jar stays empty."""
    data = {"username": name, "password": password or PASSWORDS[name]}
    r = http.post("/login", data=data, follow_redirects=False)
    token = r.cookies.get("loupe_session")
    http.cookies.clear()
    assert token, (r.status_code, r.text[:200])
    return token


def as_(token: str) -> dict[str, str]:
    """Request headers that present `token` as the session cookie."""
    return {"Cookie": f"loupe_session={token}"}


def client(url: str, token: str) -> Client:
    return Client(url, verbose=False, headers=as_cookie(token), httpx_kwargs=SLOW_OK)


def snapshot(store) -> dict[str, tuple[int, str]]:
    """(row count, hash of every row) for every table: any write shows."""
    out = {}
    with store.engine.connect() as c:
        for table in sorted(inspect(c).get_table_names()):
            rows = c.execute(text(f"SELECT * FROM {table} ORDER BY 1")).all()
            digest = hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()
            out[table] = (len(rows), digest)
    return out


def files_under(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")} if root.exists() else set()


def test_every_endpoint_refuses_anonymous_calls_and_writes_nothing(team, web):
    ctx = team
    admin = token_for(web, "ada")
    config = web.get("/config", headers=as_(admin)).json()
    deps = config["dependencies"]
    named = sorted({d["api_name"] for d in deps if d.get("api_name")})
    # the API's description (what `gradio_client` reads) agrees with the config, and covers
    # every write
    api = web.get("/gradio_api/info", headers=as_(admin)).json()
    assert api["named_endpoints"] and {n.lstrip("/") for n in api["named_endpoints"]} <= set(named)
    writes = {"accept", "reject", "correct", "skip", "flag", "comment", "next", "jump",
              "author_save", "author_submit", "audit_approve", "audit_send_back", "export",
              "add_expert", "ingest"}  # fmt: skip
    assert writes <= set(named), writes - set(named)

    import gradio.utils

    gradio_tmp = Path(gradio.utils.get_upload_folder())
    uploads_before = files_under(gradio_tmp) | files_under(ctx.data_roots[0])
    before = snapshot(ctx.store)

    assert not web.cookies  # anonymous: no session cookie in the jar
    codes: dict[str, set[int]] = {}
    for headers in ({}, as_("x" * 43)):  # no session, a forged one
        for d in deps:
            payload = {"data": [None] * len(d.get("inputs", [])), "fn_index": d["id"],
                       "session_hash": "anonymous1", "event_data": None,
                       "trigger_id": None}  # fmt: skip
            r = web.post("/gradio_api/queue/join", json=payload, headers=headers)
            codes.setdefault(f"queue/join #{d['id']}", set()).add(r.status_code)
            name = d.get("api_name")
            if name:
                for route in (f"/gradio_api/call/{name}", f"/gradio_api/run/{name}",
                              f"/gradio_api/api/{name}"):  # fmt: skip
                    r = web.post(route, json={"data": payload["data"]}, headers=headers)
                    codes.setdefault(route, set()).add(r.status_code)
        r = web.post("/gradio_api/upload", headers=headers,
                     files={"files": ("x.csv", b"wavelength,flux\n1,2\n")})  # fmt: skip
        codes.setdefault("upload", set()).add(r.status_code)
        for path in (
            "/gradio_api/info",
            "/config",
            "/gradio_api/queue/data?session_hash=anonymous1",
        ):
            codes.setdefault(path, set()).add(web.get(path, headers=headers).status_code)
    refused = {k: v for k, v in codes.items() if v != {401}}
    assert not refused, refused
    assert len([k for k in codes if k.startswith("queue/join")]) == len(deps)

    # every other route of the app (Gradio's internals too), anonymously: refused
    others = {}
    for method, path in _routes(web.app):
        if path.rstrip("/") in ("/login", "/logout") or (method == "GET" and path == "/"):
            continue
        url = path.replace("{", "").replace("}", "").replace(":path", "")
        r = web.request(method, url, json={} if method == "POST" else None)
        if r.status_code != 401:
            others[f"{method} {path}"] = r.status_code
    assert not others, others
    assert web.get("/", follow_redirects=False).headers["location"].endswith("/login")
    assert snapshot(ctx.store) == before
    assert files_under(gradio_tmp) | files_under(ctx.data_roots[0]) == uploads_before

    # the control: the same call with a session is accepted
    dash = next(d for d in deps if d.get("api_name") == "dashboard")
    r = web.post("/gradio_api/queue/join", headers=as_(admin),
                 json={"data": ["all", 0.95], "fn_index": dash["id"], "session_hash": "ada1",
                       "event_data": None, "trigger_id": None})  # fmt: skip
    assert r.status_code == 200, r.text


def _routes(app) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route the served app answers, mounted Gradio included."""
    out = []

    def walk(routes, prefix=""):
        for r in routes:
            if hasattr(r, "original_router"):  # a router Gradio includes lazily
                walk(r.original_router.routes, prefix + r.include_context.prefix)
            elif hasattr(r, "methods") and r.methods:
                out.extend((m, prefix + r.path) for m in sorted(r.methods) if m != "HEAD")
            elif hasattr(getattr(r, "app", None), "routes"):  # a mounted app
                walk(r.app.routes, prefix + r.path)

    walk(app.routes)
    assert ("POST", "/gradio_api/queue/join") in out and ("POST", "/gradio_api/upload") in out
    return sorted(set(out))


def _review_row(store, cid: int, expert: str):
    me = store.expert(expert)
    (r,) = [r for r in store.reviews(candidate_id=cid) if r.expert_id == me.id]
    return (r.id, r.action, r.label, r.comment, r.revision, r.updated)


def test_an_expert_writes_only_as_themselves(team, served):
    from db.store import StorePermissionError

    ctx, srv = team, served
    http = httpx.Client(base_url=srv.url, timeout=30)
    ada = client(srv.url, token_for(http, "ada"))
    bob = client(srv.url, token_for(http, "bob"))
    ada.predict(api_name="/next")
    ada.predict(api_name="/accept")
    (mine,) = ctx.store.reviews(expert="ada", actions=["accept"])
    info = ctx.store.candidate(mine.candidate_id)
    adas = _review_row(ctx.store, info.id, "ada")
    # bob opens ada's item and decides on it: that is bob's review, ada's stays as it was
    # (two labels per item asked: under overlap 1 a second label is refused)
    from annotate.team import settings as team_settings

    team_settings.change(ctx.store, "overlap", "2", "ada")
    bob.predict(info.key, api_name="/jump")
    bob.predict("comment from bob", api_name="/comment")
    bob.predict("NO", "none", "bob thinks not", api_name="/correct")
    assert _review_row(ctx.store, info.id, "ada") == adas
    bobs = _review_row(ctx.store, info.id, "bob")
    assert bobs[1:4] == ("correct", "NO", "comment from bob")
    # the store refuses a revision of another's review outright
    with pytest.raises(StorePermissionError):
        ctx.store.record_review("bob", info.id, "reject", review_id=mine.id)
    assert _review_row(ctx.store, info.id, "ada") == adas
    team_settings.change(ctx.store, "overlap", "1", "ada")

    # no exports, no account management for an expert
    experts_before = [(e.name, e.role, e.password_hash, e.active) for e in ctx.store.experts()]
    batches = len(ctx.store.export_batches())
    for kind in ("sft", "rl", "pairs"):
        msg, *_ = bob.predict(kind, api_name="/export")
        assert msg.startswith("Refused") and "not an admin" in msg
    assert len(ctx.store.export_batches()) == batches
    assert not any(ctx.export_dir.glob("*")) if ctx.export_dir.exists() else True
    for name, role, pw in (("mallory", "admin", "pw-mallory-1"), ("ada", "expert", "stolen-pw"),
                           ("bob", "admin", "")):  # fmt: skip
        msg = bob.predict(name, role, pw, api_name="/add_expert")[0]
        assert msg.startswith("Refused"), msg
    after = [(e.name, e.role, e.password_hash, e.active) for e in ctx.store.experts()]
    assert after == experts_before
    # nor the team's settings
    msg = bob.predict("audit_rate", "1", api_name="/team_setting")[0]
    assert msg.startswith("Refused") and "not an admin" in msg
    assert ctx.store.setting("audit_rate") is None
    assert token_for(http, "ada")  # ada's password still works
    ada.close()
    bob.close()
    http.close()


def test_passwords_are_argon2id_with_real_cost(team):
    from argon2 import extract_parameters
    from argon2.low_level import Type

    ctx = team
    h = ctx.store.expert("bob").password_hash
    assert PASSWORDS["bob"] not in h
    p = extract_parameters(h)  # the hash carries its parameters
    assert p.type is Type.ID
    assert p.memory_cost >= 19 * 1024  # KiB; OWASP's floor for argon2id is 19 MiB
    assert p.time_cost >= 2 and p.parallelism >= 1 and p.salt_len >= 16
    # one guess costs real time (tens of ms; a fast hash would take microseconds)
    t0 = time.perf_counter()
    assert not ctx.store.verify_password("bob", "wrong guess")
    assert time.perf_counter() - t0 > 0.01
    # the same password twice: different salts, different hashes
    from db.store import hash_password

    assert hash_password("same") != hash_password("same")


def test_sessions_expire_after_the_configured_time(tmp_path_factory):
    from annotate.team.experts import create_expert

    tmp = tmp_path_factory.mktemp("access-ttl")
    ctx = context(tmp_path_factory, tmp, login=True)
    create_expert(ctx.store, "bob", "expert", PASSWORDS["bob"])
    # long enough for the live-session calls below on a loaded machine (2 s was not)
    ttl = 6
    app, _ = build_app(ctx, session_seconds=ttl)
    try:
        with TestClient(app) as web:
            r = web.post("/login", data={"username": "bob", "password": PASSWORDS["bob"]},
                         follow_redirects=False)  # fmt: skip
            web.cookies.clear()
            cookie = r.headers["set-cookie"]
            assert f"max-age={ttl}" in cookie.lower() and "httponly" in cookie.lower()
            token = token_for(web, "bob")
            logged_in = time.time()  # the session began before this
            deps = web.get("/config", headers=as_(token)).json()["dependencies"]
            accept = next(d["id"] for d in deps if d.get("api_name") == "accept")
            join = {"data": [None] * 11, "fn_index": accept, "session_hash": "bob1",
                    "event_data": None, "trigger_id": None}  # fmt: skip
            assert web.get("/gradio_api/info", headers=as_(token)).status_code == 200
            time.sleep(max(0.0, logged_in + ttl + 0.3 - time.time()))
            assert ctx.store.session_expert(token) is None
            before = snapshot(ctx.store)
            assert web.get("/gradio_api/info", headers=as_(token)).status_code == 401
            r = web.post("/gradio_api/queue/join", headers=as_(token), json=join)
            assert r.status_code == 401
            assert snapshot(ctx.store) == before
            page = web.get("/", headers=as_(token), follow_redirects=False)
            assert page.status_code in (302, 303, 307)
            assert page.headers["location"].endswith("/login")
    finally:
        ctx.store.close()
    with pytest.raises(ValueError):
        from fastapi import FastAPI

        from app.auth import install

        install(FastAPI(), ctx.store, session_seconds=0)


# -- data roots ---------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside every data root, holding a readable spectrum."""
    out = tmp_path / "outside"
    out.mkdir()
    write_text_spectrum(out / "secret.csv", seed=99)
    return out


def test_app_paths_and_uploads_stay_inside_the_data_roots(team, web, outside, tmp_path):
    ctx = team
    bob = app_context.Viewer("bob")
    root = ctx.data_roots[-1]
    root.mkdir(parents=True, exist_ok=True)
    (root / "link.csv").symlink_to(outside / "secret.csv")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    rel = "../" * 12 + str(outside / "secret.csv").lstrip("/")
    before = snapshot(ctx.store)
    for path in (str(outside / "secret.csv"), str(root / ".." / "outside" / "secret.csv"), rel,
                 str(root / "link.csv"), str(root / "linkdir"),
                 str(root / "linkdir" / "secret.csv")):  # fmt: skip
        msg = upload_page.ingest_upload(ctx, bob, [], "cv", path)
        assert "outside the data roots" in msg or "outside the allowed" in msg, (path, msg)
    # a catalogue inside the root (or uploaded) with a line that points outside it
    lines = {"abs1": str(outside / "secret.csv"), "up1": "../" * 12 + str(outside / "secret.csv"),
             "sym1": str(root / "link.csv")}  # fmt: skip
    for key, target in lines.items():
        cat = tmp_path / f"cat-{key}.csv"
        cat.write_text(f"path,task,id\n{target},cv,{key}\n")
        (root / cat.name).write_text(cat.read_text())
        for msg in (upload_page.ingest_upload(ctx, bob, [str(cat)], "cv"),
                    upload_page.ingest_upload(ctx, bob, [], "cv", str(root / cat.name))):  # fmt: skip
            assert "outside" in msg, (key, msg)
    # an upload's name cannot place it elsewhere
    sneaky = tmp_path / "x"
    sneaky.mkdir()
    evil = write_text_spectrum(sneaky / "..evil.csv", seed=3)
    upload_page.ingest_upload(ctx, bob, [str(evil)], "cv")
    assert not (root.parent / "evil.csv").exists()
    assert all(
        p.resolve().is_relative_to(ctx.data_roots[0])
        for p in (ctx.data_roots[0] / "uploads").iterdir()
    )
    after = snapshot(ctx.store)
    assert after["candidate"][0] == before["candidate"][0] + 1  # only the honest upload
    for key in ("abs1", "up1", "sym1", "secret"):
        assert ctx.store.find_candidate(key) is None

    # through the API: a file the server has but the client never uploaded is refused
    token = token_for(web, "bob")
    fake = {"path": str(outside / "secret.csv"), "meta": {"_type": "gradio.FileData"},
            "orig_name": "secret.csv"}  # fmt: skip
    r = web.post("/gradio_api/call/ingest", headers=as_(token),
                 json={"data": [[fake], "cv", ""]})  # fmt: skip
    assert r.status_code == 200
    stream = web.get(f"/gradio_api/call/ingest/{r.json()['event_id']}", headers=as_(token)).text
    assert "event: error" in stream, stream[:500]
    # nor does the file route serve anything outside the export folder
    for p in (outside / "secret.csv", ctx.store.url.database):
        got = web.get(f"/gradio_api/file={p}", headers=as_(token))
        assert got.status_code in (403, 404), (p, got.status_code)
    assert snapshot(ctx.store)["candidate"] == after["candidate"]


def test_cli_ingest_with_roots_refuses_escapes(tmp_path, outside, capsys):
    import launch
    from db.store import Store

    root = tmp_path / "root"
    (root / "ok").mkdir(parents=True)
    write_text_spectrum(root / "ok" / "fine.csv", seed=1)
    (root / "link.csv").symlink_to(outside / "secret.csv")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "cat.csv").write_text("path,task,id\n../outside/secret.csv,cv,dotdot\n"
                                  f"{outside / 'secret.csv'},cv,abs\nlink.csv,cv,sym\n"
                                  "ok/fine.csv,cv,good\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    sources = [str(root / "ok"), str(root / ".." / "outside" / "secret.csv"),
               str(outside / "secret.csv"), str(root / "link.csv"), str(root / "linkdir"),
               str(root / "cat.csv")]  # fmt: skip
    rc = launch.main(["ingest", *sources, "--task", "cv", "--db", url, "--root", str(root)])
    err = capsys.readouterr().err
    assert rc == 1
    store = Store(url)
    keys = sorted(c.key for c in store.list_candidates(limit=100, order="id"))
    paths = {c.spectrum_ref["path"] for c in store.list_candidates(limit=100)}
    store.close()
    assert keys == ["fine"]  # the catalogue's good line names the same spectrum
    assert all(Path(p).resolve().is_relative_to(root.resolve()) for p in paths)
    # the seven escapes, each named: ../, absolute, file symlink, folder symlink, and the
    # catalogue's ../, absolute and symlinked lines
    assert err.count("outside the allowed data folders") == 7, err


def test_repeated_wrong_passwords_are_throttled():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from app.auth import LoginThrottle, install

    class Store:  # the two calls the login route makes
        def __init__(self):
            self.checked = 0

        def login(self, name, password, ttl_seconds):
            self.checked += 1
            return "tok" if (name, password) == ("bob", "right-pass") else None

        def session_expert(self, token):
            return None

        def login_unlock_marker(self, name):
            return None

    now = [1000.0]
    store, app = Store(), FastAPI()
    install(app, store, throttle=LoginThrottle(3, 60.0, clock=lambda: now[0]))
    web = TestClient(app)

    def attempt(name, password):
        return web.post(
            "/login", data={"username": name, "password": password}, follow_redirects=False
        )

    assert [attempt("bob", "guess").status_code for _ in range(3)] == [401] * 3
    checked = store.checked
    r = attempt("bob", "right-pass")  # even the right password waits out the window
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    assert store.checked == checked, "a throttled attempt must not reach the slow KDF"
    now[0] += 61
    assert attempt("bob", "right-pass").status_code == 303


def test_export_files_are_served_only_to_admins(team, web):
    import re

    from app.context import Viewer
    from app.pages import export as export_page
    from app.pages.export import run_export

    ctx = team
    view = run_export(ctx, Viewer("ada", "admin"), "rl")
    files = [Path(f) for f in view.files]
    assert files, view.message
    folder = files[0].parent
    while folder.parent != ctx.export_dir:
        folder = folder.parent
    # the folder's name cannot be guessed from the kind and the time of the export
    kind, day, clock, tail = folder.name.split("-")
    assert (kind, len(day), len(clock)) == ("rl", 8, 6) and len(tail) >= 16, folder.name
    ada, bob = token_for(web, "ada"), token_for(web, "bob")
    before = snapshot(ctx.store)
    for f in files:
        rel = f.relative_to(Path.cwd()) if f.is_relative_to(Path.cwd()) else f
        for url in (f"/gradio_api/file={f}", f"/gradio_api/file/{f}", f"/gradio_api/file={rel}",
                    f"/gradio_api/file={ctx.export_dir}/x/../{f.relative_to(ctx.export_dir)}",
                    f"/gradio_api/file={str(f).replace('/', '//')}"):  # fmt: skip
            for method in ("GET", "HEAD"):
                assert web.request(method, url, headers=as_(bob)).status_code == 403, url
                assert web.request(method, url, headers=as_(ada)).status_code == 403, url
                assert web.request(method, url).status_code == 401, url
    # export files leave by the token the store recorded, to admins only
    links = export_page.download_links(ctx, Viewer("ada", "admin"), [str(f) for f in files])
    urls = re.findall(r'href="(/download/[^"]+)"', links)
    assert len(urls) == len(files) and str(ctx.export_dir) not in links
    for url, f in zip(urls, files, strict=True):
        assert web.get(url, headers=as_(ada)).content == f.read_bytes()
        assert web.head(url, headers=as_(ada)).status_code == 200
        assert web.get(url, headers=as_(bob)).status_code == 403
        assert web.get(url).status_code == 401
    # a file offered to an expert (their own VI CSV) is theirs and the admins', nobody else's
    (own,) = re.findall(r'href="(/download/[^"]+)"',
                        export_page.download_links(ctx, Viewer("bob", "expert"), [str(files[0])]))  # fmt: skip
    cy = token_for(web, "cy")
    assert [web.get(own, headers=as_(t)).status_code for t in (bob, ada, cy)] == [200, 200, 403]
    # an admin demoted meanwhile is refused on the next request (checked per request)
    ctx.store.update_expert("ada", role="expert")
    try:
        assert web.get(urls[0], headers=as_(ada)).status_code == 403
    finally:
        ctx.store.update_expert("ada", role="admin")
    assert snapshot(ctx.store)["review"] == before["review"]


def test_cross_site_requests_are_refused(team, web):
    ctx = team
    bob = token_for(web, "bob")
    deps = web.get("/config", headers=as_(bob)).json()["dependencies"]
    accept = next(d for d in deps if d.get("api_name") == "accept")
    join = {"data": [None] * len(accept.get("inputs", [])), "fn_index": accept["id"],
            "session_hash": "bobx", "event_data": None, "trigger_id": None}  # fmt: skip
    before = snapshot(ctx.store)
    evil = {"Origin": "https://evil.example"}
    r = web.post("/login", data={"username": "bob", "password": PASSWORDS["bob"]},
                 headers=evil, follow_redirects=False)  # fmt: skip
    assert r.status_code == 403 and "loupe_session" not in r.headers.get("set-cookie", "")
    for path in ("/gradio_api/queue/join", "/gradio_api/call/accept", "/gradio_api/upload"):
        r = web.post(path, json=join, headers={**as_(bob), **evil})
        assert r.status_code == 403, (path, r.status_code)
        r = web.post(path, json=join, headers={**as_(bob), "Referer": "https://evil.example/"})
        assert r.status_code == 403, (path, r.status_code)
    assert snapshot(ctx.store) == before
    # the app's own pages post with their own origin
    r = web.post("/gradio_api/queue/join", json=join,
                 headers={**as_(bob), "Origin": "http://testserver"})  # fmt: skip
    assert r.status_code == 200, r.text


def test_an_overlong_explanation_is_refused_by_the_server(team, served):
    from annotate import review

    ctx, srv = team, served
    http = httpx.Client(base_url=srv.url, timeout=30)
    cy = client(srv.url, token_for(http, "cy"))
    info = ctx.store.list_candidates(limit=1, order="id")[0]
    cy.predict(info.key, api_name="/jump")
    before = snapshot(ctx.store)
    out = cy.predict("NO", "none", "x" * 100_000, api_name="/correct")
    assert "2000" in str(out), str(out)[:300]
    assert snapshot(ctx.store)["review"] == before["review"]
    cy.predict("NO", "none", "y" * 2000, api_name="/correct")  # at the limit: kept whole
    (mine,) = [r for r in ctx.store.reviews(candidate_id=info.id) if r.expert_id ==
               ctx.store.expert("cy").id]  # fmt: skip
    assert mine.explanation == "y" * 2000
    for call in (lambda: review.decide(ctx.store, "cy", info.id, "correct", label="NO",
                                       explanation="z" * 2001),
                 lambda: review.comment(ctx.store, "cy", mine, "z" * 2001),
                 lambda: review.revise(ctx.store, "cy", mine.id, "correct", label="NO",
                                       explanation="z" * 2001)):  # fmt: skip
        with pytest.raises(review.ReviewError, match="limit is 2000"):
            call()
    cy.close()
    http.close()


def test_only_admins_see_export_history_and_downloads(team, served):
    ctx, srv = team, served
    http = httpx.Client(base_url=srv.url, timeout=30)
    ada = client(srv.url, token_for(http, "ada"))
    msg, _, files, history = ada.predict("pairs", api_name="/export")
    assert files and history["data"], msg
    folders = [row[4] for row in history["data"]]
    assert folders and all(Path(f).parent == ctx.export_dir for f in folders), folders
    bob = client(srv.url, token_for(http, "bob"))
    out = bob.predict("pairs", api_name="/export")
    msg, manifest, files, history = out
    assert msg.startswith("Refused") and "not an admin" in msg
    assert (manifest, files or [], history["data"]) == (None, [], []), out
    for folder in folders:  # not in any form: the folder's random tail is the secret
        assert Path(folder).name.rsplit("-", 1)[-1] not in str(out)
    ada.close()
    bob.close()
    http.close()


def test_the_vet_tabs_plotly_bundle_is_served_behind_the_login(web):
    """The vet tab's plotly.js bundle (app/static) is served to a session, like the page,
    and to nobody else."""
    from app.ui.assets import PLOTLY_BASIC

    path = f"/loupe-static/{PLOTLY_BASIC}"
    assert web.get(path).status_code == 401
    r = web.get(path, headers=as_(token_for(web, "bob")))
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]
    assert r.text.startswith("/**\n* plotly.js (basic - minified) v3.7.0")
    # gzipped where accepted (httpx decodes it), and kept by the browser: the name has the version
    assert r.headers["content-encoding"] == "gzip" and "immutable" in r.headers["cache-control"]
    plain = web.get(path, headers={**as_(token_for(web, "bob")), "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text == r.text
    assert (
        web.get("/loupe-static/../main.py", headers=as_(token_for(web, "bob"))).status_code == 404
    )
