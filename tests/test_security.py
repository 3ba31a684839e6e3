"""Attacks on login and accounts, each reproduced against the app's own routes.

- Simultaneous wrong passwords cannot get past the throttle, and password checks (64 MiB of
  argon2 each) run only a few at a time.
- Failing for someone else's name locks out only the guesser, not the account; a forged
  X-Forwarded-For counts only when it comes from a configured proxy; an admin can unlock.
- Another site cannot log a browser in or post into a session (Origin/Referer); the session
  cookie is HttpOnly, SameSite=Lax, and Secure when the request came over HTTPS.
"""

from __future__ import annotations

import threading
import time

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from app.auth import LoginThrottle, install
from tests.concurrency import run_threads


class FakeStore:
    """The calls the login route makes, with a slow password check that counts itself."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.checked = 0
        self.running = 0
        self.most_at_once = 0
        self.unlocks: dict[str, int] = {}
        self._lock = threading.Lock()

    def login(self, name, password, ttl_seconds):
        with self._lock:
            self.checked += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.delay)
        with self._lock:
            self.running -= 1
        return "tok" if (name, password) == ("ada", "right-pass") else None

    def session_expert(self, token):
        return "ada" if token == "tok" else None

    def login_unlock_marker(self, name):
        return self.unlocks.get(name.lower())


def login_app(store, **kwargs) -> FastAPI:
    app = FastAPI()
    install(app, store, **kwargs)
    return app


def post_login(web, name, password, **headers):
    return web.post(
        "/login",
        data={"username": name, "password": password},
        headers=headers,
        follow_redirects=False,
    )


def test_simultaneous_wrong_passwords_do_not_pass_the_throttle():
    store = FakeStore(delay=0.2)
    app = login_app(store, throttle=LoginThrottle(5, 900.0), kdf_slots=2)
    codes: list[int] = []

    def guess(i):
        with TestClient(app) as web:
            codes.append(post_login(web, "ada", f"guess-{i}").status_code)

    run_threads(guess, [(i,) for i in range(16)], barrier=True, timeout=60)
    assert store.checked == 5, "only the throttle's five attempts may reach the slow KDF"
    assert store.most_at_once <= 2, "password checks must be bounded"
    assert sorted(codes) == [401] * 5 + [429] * 11


def test_a_guesser_locks_out_only_themselves():
    store = FakeStore()
    app = login_app(store, throttle=LoginThrottle(5, 900.0))
    mallory = TestClient(app, client=("203.0.113.9", 4000))
    for i in range(8):  # varied X-Forwarded-For: not believed without a trusted proxy
        r = post_login(mallory, "ADA", "guess", **{"X-Forwarded-For": f"198.51.100.{i}"})
    assert r.status_code == 429
    ada = TestClient(app, client=("192.0.2.10", 5000))
    assert post_login(ada, "ada", "right-pass").status_code == 303
    # one client failing over many names is throttled too
    for i in range(30):
        r = post_login(mallory, f"user{i}", "guess")
    assert r.status_code == 429
    assert store.checked <= 5 + 20 + 1


def test_forwarded_for_is_believed_only_from_a_trusted_proxy():
    store = FakeStore()
    app = login_app(store, throttle=LoginThrottle(2, 900.0), trusted_proxies=["10.0.0.1"])
    proxy = TestClient(app, client=("10.0.0.1", 4000))
    xff = {"X-Forwarded-For": "6.6.6.6, 203.0.113.9"}  # the left entry is the client's word
    assert [post_login(proxy, "ada", "x", **xff).status_code for _ in range(3)] == [401, 401, 429]
    # another client behind the same proxy is not locked out
    other = {"X-Forwarded-For": "203.0.113.77"}
    assert post_login(proxy, "ada", "right-pass", **other).status_code == 303
    # an untrusted peer cannot pick its address
    direct = TestClient(app, client=("203.0.113.50", 4000))
    for i in range(3):
        r = post_login(direct, "ada", "x", **{"X-Forwarded-For": f"198.51.100.{i}"})
    assert r.status_code == 429
    with pytest.raises(ValueError, match="not an IP"):
        login_app(store, trusted_proxies=["proxy.example"])


def test_an_admin_unlock_lifts_the_throttle_for_that_name():
    store = FakeStore()
    app = login_app(store, throttle=LoginThrottle(3, 900.0))
    web = TestClient(app)
    for _ in range(3):
        post_login(web, "ada", "wrong")
    assert post_login(web, "ada", "right-pass").status_code == 429
    store.unlocks["ada"] = 1  # what `add-expert ada --unlock` writes
    assert post_login(web, "ada", "right-pass").status_code == 303
    for _ in range(3):
        post_login(web, "ada", "wrong")
    assert post_login(web, "ada", "right-pass").status_code == 429  # once per unlock


def test_login_refuses_cross_site_posts_and_sets_a_strict_cookie():
    store = FakeStore()
    app = login_app(store)
    web = TestClient(app)
    for headers in ({"Origin": "https://evil.example"}, {"Origin": "null"},
                    {"Referer": "https://evil.example/form"}):  # fmt: skip
        r = post_login(web, "ada", "right-pass", **headers)
        assert r.status_code == 403 and "set-cookie" not in r.headers, headers
    assert store.checked == 0
    r = post_login(web, "ada", "right-pass", Origin="http://testserver")
    assert r.status_code == 303
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie
    tls = TestClient(app, base_url="https://testserver")
    cookie = post_login(tls, "ada", "right-pass").headers["set-cookie"].lower()
    assert "; secure" in cookie
    # a state-changing request with a session, from another site: refused before it runs
    app.post("/write")(lambda: {"ok": True})
    hdrs = {"Cookie": "loupe_session=tok"}
    assert web.post("/write", headers={**hdrs, "Origin": "https://evil.example"}).status_code == 403
    assert web.post("/write", headers={**hdrs, "Origin": "http://testserver"}).status_code == 200


def test_add_expert_changes_only_what_it_is_given(tmp_path, monkeypatch, capsys):
    import io

    import launch
    from db.store import Store

    url = f"sqlite:///{tmp_path / 'e.db'}"
    Store(url).close()  # add-expert records into a store that exists; it never makes one

    def add(*argv, stdin=""):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        rc = launch.main(["add-expert", *argv, "--db", url])
        out = capsys.readouterr()
        return rc, out.out + out.err

    def ada():
        with Store(url) as store:
            e = store.expert("ada")
            return e.role, e.active

    assert add("ada", "--role", "admin", "--password-stdin", stdin="first passphrase\n")[0] == 0
    assert add("zoe", "--role", "admin")[0] == 0  # a second admin: ada may step down
    # resetting the password keeps the admin an admin
    rc, out = add("ada", "--password-stdin", stdin="second passphrase\n")
    assert rc == 0 and ada() == ("admin", True), out
    assert add("ada", "--deactivate")[0] == 0 and ada() == ("admin", False)
    assert add("ada", "--activate")[0] == 0 and ada() == ("admin", True)
    assert add("ada", "--role", "expert")[0] == 0 and ada() == ("expert", True)
    rc, out = add("ada")
    assert rc == 0 and "unchanged" in out and ada() == ("expert", True)
    # --deactivate or --unlock for a name that does not exist: refused, nothing created
    for flag in ("--deactivate", "--unlock"):
        rc, out = add("nobody", flag)
        assert rc != 0 and "no expert 'nobody'" in out and flag in out, out
    with Store(url) as store:
        assert store.expert("nobody") is None
        assert store.login("ada", "second passphrase")
    # --unlock bumps the marker the login route compares with what it last saw
    with Store(url) as store:
        assert store.login_unlock_marker("ada") is None
    assert add("ada", "--unlock")[0] == 0
    assert add("ada", "--unlock")[0] == 0
    with Store(url) as store:
        assert store.login_unlock_marker("ADA") == 2
        assert [e.action for e in store.audit_events(entity="expert")].count("unlock_login") == 2


def test_unlock_reaches_a_running_app(tmp_path):
    from annotate.team.experts import create_expert, unlock_login
    from db.store import Store

    store = Store(f"sqlite:///{tmp_path / 'u.db'}")
    create_expert(store, "ada", "admin", "right-pass-1")
    app = login_app(store, throttle=LoginThrottle(2, 900.0))
    web = TestClient(app)
    for _ in range(2):
        assert post_login(web, "ADA", "wrong").status_code == 401
    assert post_login(web, "ada", "right-pass-1").status_code == 429
    unlock_login(store, "ada")
    assert post_login(web, "ada", "right-pass-1").status_code == 303
    store.close()
