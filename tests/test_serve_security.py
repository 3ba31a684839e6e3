"""The served app against requests a browser would not send: raw request paths, forwarded
headers from this host, foreign Host names; and accounts and `serve` arguments.

- Export files stay admin-only however the path is spelled: `/dev/fd/../../` and
  `/bin/../` prefixes are undone by the file route's lexical normalisation, not by
  resolving symlinks, so the check must look at both.
- `X-Forwarded-For`/`-Proto` from 127.0.0.1 are ignored unless `--trusted-proxy` names it:
  the throttle counts the real peer, the cookie's Secure flag follows the real scheme.
- A request naming a Host the app is not served as is refused on every route (DNS
  rebinding), login or not.
- Deactivating an account ends its sessions for good (reactivation does not revive them).
- `serve` with a port in use, out of range, or an address not on this host: one line, exit 2.

These requests go over a socket to the app served on a free local port: the forwarded
headers are uvicorn's business, and a raw path is only sent as is by a raw client.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest

from app.main import serve
from tests.app_support import context

PASSWORDS = {"ada": "pw-ada-123456", "bob": "pw-bob-123456", "cy": "pw-cy-123456"}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    from annotate.team.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path_factory.mktemp("serve-sec"), login=True)
    for name, role in (("ada", "admin"), ("bob", "expert"), ("cy", "expert")):
        create_expert(ctx.store, name, role, PASSWORDS[name])
    yield ctx
    ctx.store.close()


@pytest.fixture(scope="module")
def served(team):
    srv = serve(team)
    yield srv
    srv.close()


def login(url: str, name: str, **headers: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as http:
        data = {"username": name, "password": PASSWORDS.get(name, "wrong-guess")}
        return http.post("/login", data=data, headers=headers, follow_redirects=False)


def token(url: str, name: str) -> str:
    r = login(url, name)
    assert r.cookies.get("loupe_session"), (r.status_code, r.text[:200])
    return r.cookies["loupe_session"]


def raw_get(url: str, path: str, headers: dict[str, str] | None = None) -> int:
    """The status of `GET path` sent byte for byte (no client normalises `..` away)."""
    parts = urlsplit(url)
    lines = [f"GET {path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def spellings(f: Path, export_dir: Path, pid: int) -> dict[str, str]:
    """Ways to spell export file `f` as a path the kernel opens (after Gradio takes `..`
    off the text), each a name for the test's message."""
    rel = f.relative_to(export_dir.parent)  # from the working directory the test sets
    out = {
        "plain": f"{f}",
        "/dev/fd/../..": f"/dev/fd/../..{f}",
        "/proc/self/root": f"/proc/self/root{f}",
        "/bin/../proc/self/root": f"/bin/../proc/self/root{f}",
        "/dev/fd/../../proc/self/root": f"/dev/fd/../../proc/self/root{f}",
        "/proc/self/cwd": f"/proc/self/cwd/{rel}",
        "/bin/../proc/self/cwd": f"/bin/../proc/self/cwd/{rel}",
        "relative": f"{rel}",
        "%2E%2E": f"/bin/%2E%2E/proc/self/root{f}",
        "%2e%2e%2f": f"/dev/fd/%2e%2e%2f%2e%2e/proc/self/root{f}",
        "double-encoded": f"/bin/%252E%252E/proc/self/root{f}",
        "//": "/" + str(f).replace("/", "//"),
        "/./": f"/proc/./self/./root/.{f}",
        # not in any report: the server's own pid, the thread's magic link, a mount point
        "/proc/PID/root": f"/proc/{pid}/root{f}",
        "/proc/thread-self/root": f"/proc/thread-self/root{f}",
        "/proc/PID/cwd": f"/proc/{pid}/cwd/{rel}",
        "/sys/../proc/self/root": f"/sys/../proc/self/root{f}",
    }
    return {k: quote(v, safe="/%=.") for k, v in out.items()}


def test_export_files_download_by_token_only_whatever_the_spelling(
    team, served, tmp_path, monkeypatch
):
    """A plain expert gets no export file through Gradio's file routes, whatever the path's
    spelling (magic links, `..`, encodings, a symlink or a hard link in a folder Gradio
    serves); nor does an admin: export files leave only by `/download/TOKEN`, to admins."""
    import gradio

    from annotate.export import downloads
    from app.context import Viewer
    from app.pages.export import run_export

    view = run_export(team, Viewer("ada", "admin"), "rl")
    files = [Path(f) for f in view.files if f.endswith((".jsonl", ".json", ".parquet"))]
    assert files, view.message
    monkeypatch.chdir(team.export_dir.parent)  # /proc/self/cwd is where the exports are
    served_dir = Path(gradio.utils.get_upload_folder()) / "planted"
    served_dir.mkdir(parents=True, exist_ok=True)
    ada, bob = token(served.url, "ada"), token(served.url, "bob")
    for f in files:
        link, hard = served_dir / f"link-{f.name}", served_dir / f"hard-{f.name}"
        link.unlink(missing_ok=True)
        hard.unlink(missing_ok=True)
        link.symlink_to(f)
        os.link(f, hard)
        paths = spellings(f, team.export_dir, os.getpid())
        paths |= {
            "symlink in Gradio's folder": str(link),
            "hard link in Gradio's folder": str(hard),
        }
        for name, path in paths.items():
            for route in ("/gradio_api/file=", "/file=", "/gradio_api/file/", "/file/"):
                url = route + (path if route.endswith("=") else path.lstrip("/"))
                for who in (bob, ada):
                    got = raw_get(served.url, url, {"Cookie": f"loupe_session={who}"})
                    assert got != 200 and got in (403, 404), (name, url, got)
                assert raw_get(served.url, url) == 401, (name, url)
        hard.unlink()
        link.unlink()
    # the one way out: the token the store recorded, to an admin on each request
    (offered,) = downloads.offer(team.store, [files[0]], actor="ada")
    with httpx.Client(base_url=served.url, timeout=30) as http:
        got = http.get(offered.url, cookies={"loupe_session": ada})
        assert got.status_code == 200 and got.content == files[0].read_bytes()
        assert "attachment" in got.headers["content-disposition"]
        assert http.get(offered.url, cookies={"loupe_session": bob}).status_code == 403
        assert http.get(offered.url).status_code == 401
        assert (
            http.get(downloads.ROUTE + "/" + "x" * 32, cookies={"loupe_session": ada}).status_code
            == 404
        )
        # a token is no path: a path in its place names no recorded file
        assert http.get(f"{downloads.ROUTE}/..%2F..%2Fetc%2Fpasswd",
                        cookies={"loupe_session": ada}).status_code == 404  # fmt: skip
        team.store.update_expert("ada", role="expert")  # demoted: refused on the next request
        try:
            assert http.get(offered.url, cookies={"loupe_session": ada}).status_code == 403
        finally:
            team.store.update_expert("ada", role="admin")


def test_forwarded_headers_from_this_host_are_not_believed(team, served):
    # Six wrong guesses for one name, each "forwarded for" another address: all come from
    # 127.0.0.1, which counts five per name, so the sixth is refused.
    codes = [
        login(served.url, "cy-guess", **{"X-Forwarded-For": f"203.0.113.{i}"}).status_code
        for i in range(6)
    ]
    assert codes == [401] * 5 + [429], codes
    # X-Forwarded-Proto: https does not make the cookie of a plain-HTTP login Secure
    r = login(served.url, "bob", **{"X-Forwarded-Proto": "https"})
    assert r.status_code == 303, r.text[:200]
    cookie = r.headers["set-cookie"].lower()
    assert "loupe_session=" in cookie and "secure" not in cookie, cookie


def test_forwarded_headers_from_a_trusted_proxy_are_believed(team):
    srv = serve(team, trusted_proxies=["127.0.0.1"])
    try:
        codes = [
            login(srv.url, "cy-guess2", **{"X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(6)
        ]
        assert codes == [401] * 6, codes  # six clients, one guess each
        r = login(srv.url, "bob", **{"X-Forwarded-Proto": "https"})
        assert "secure" in r.headers["set-cookie"].lower()
    finally:
        srv.close()


def test_a_trusted_proxy_is_trusted_on_a_dual_stack_socket(team):
    """Bound to `::`, an IPv4 proxy arrives as `::ffff:127.0.0.1`: it is still the trusted
    127.0.0.1, so each forwarded client counts on its own (none locks the others out)."""
    try:
        srv = serve(team, host="::", trusted_proxies=["127.0.0.1"])
    except Exception as exc:  # noqa: BLE001 - a host without IPv6 cannot run this
        pytest.skip(f"no dual-stack socket here ({exc})")
    url = f"http://127.0.0.1:{srv.url.rsplit(':', 1)[1]}"
    try:
        codes = [
            login(url, "cy-dual", **{"X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(7)
        ]
        assert codes == [401] * 7, codes  # seven clients, one guess each
        assert (
            "secure"
            in login(url, "bob", **{"X-Forwarded-Proto": "https"}).headers["set-cookie"].lower()
        )
    finally:
        srv.close()


def test_proxy_addresses_compare_as_addresses():
    from starlette.requests import Request

    from app.auth import client_address, parse_proxies

    def peer(host: str, forwarded: str | None = None) -> Request:
        headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
        return Request({"type": "http", "client": (host, 1), "headers": headers})

    for given in ("127.0.0.1", "::ffff:127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.0/104"):
        proxies = parse_proxies([given])
        for host in ("127.0.0.1", "::ffff:127.0.0.1", "::FFFF:7f00:1"):
            assert client_address(peer(host, "198.51.100.7"), proxies) == "198.51.100.7"
        assert client_address(peer("::1", "198.51.100.7"), proxies) == "::1", given
    # one client, one count: its mapped and plain forms are the same address
    proxies = parse_proxies(["10.0.0.0/8"])
    assert client_address(peer("10.1.2.3", "::ffff:198.51.100.7"), proxies) == "198.51.100.7"
    assert client_address(peer("::ffff:198.51.100.7")) == "198.51.100.7"
    assert client_address(peer("::ffff:10.0.0.9", "10.0.0.8, 198.51.100.9"), proxies) == (
        "198.51.100.9"
    )


def test_a_foreign_host_is_refused_on_every_route_without_login(tmp_path_factory):
    ctx = context(tmp_path_factory, tmp_path_factory.mktemp("rebind"))
    srv = serve(ctx, extra_hosts=["loupe.example.org"])
    try:
        http = httpx.Client(base_url=srv.url, timeout=30)
        config = http.get("/config").json()
        export = next(d for d in config["dependencies"] if d.get("api_name") == "export")
        call = {"data": ["rl"]}
        evil = {"Host": f"rebind.example:{urlsplit(srv.url).port}",
                "Origin": f"http://rebind.example:{urlsplit(srv.url).port}"}  # fmt: skip
        for method, path in (("GET", "/"), ("GET", "/config"), ("GET", "/gradio_api/info"),
                             ("POST", "/gradio_api/call/export"),
                             ("POST", "/gradio_api/queue/join")):  # fmt: skip
            body = call if path.endswith("export") else {"fn_index": export["id"], "data": ["rl"]}
            r = http.request(method, path, headers=evil, json=body if method == "POST" else None)
            assert r.status_code == 400 and "Host" in r.text, (path, r.status_code)
            assert "exports" not in r.text
        assert not (ctx.export_dir.exists() and any(ctx.export_dir.iterdir()))
        # the names it is served as answer
        for host in (urlsplit(srv.url).netloc, "localhost", "loupe.example.org"):
            assert http.get("/", headers={"Host": host}).status_code == 200, host
    finally:
        srv.close()


def test_allowed_hosts_follow_the_bound_address():
    from app.auth import host_allowed
    from app.main import allowed_hosts

    local = allowed_hosts("127.0.0.1")
    assert host_allowed("127.0.0.1:7860", local) and host_allowed("LOCALHOST", local)
    assert host_allowed("[::1]:7860", local)
    assert not host_allowed("10.0.0.5:7860", local) and not host_allowed("evil.example", local)
    assert not host_allowed("", local)
    every = allowed_hosts("0.0.0.0", ["loupe.example.org"])
    assert host_allowed("10.0.0.5:7860", every) and host_allowed("[fe80::1]:80", every)
    assert host_allowed(f"{socket.gethostname()}:7860", every)
    assert host_allowed("loupe.example.org", every)
    assert not host_allowed("evil.example:7860", every)
    assert not host_allowed("10.0.0.5.evil.example", every)


def test_deactivation_ends_sessions_for_good(tmp_path, monkeypatch, capsys):
    import io

    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    import launch
    from app.auth import install
    from db.store import Store

    url = f"sqlite:///{tmp_path / 'd.db'}"
    Store(url).close()

    def add(*argv: str, stdin: str = "") -> int:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        rc = launch.main(["add-expert", *argv, "--db", url])
        capsys.readouterr()
        return rc

    assert add("ada", "--role", "admin", "--password-stdin", stdin="a passphrase\n") == 0
    assert add("zoe", "--role", "admin") == 0  # a second admin: ada may be deactivated
    with Store(url) as store:
        app = FastAPI()
        app.get("/whoami")(lambda: {"ok": True})
        install(app, store)
        web = TestClient(app)
        r = web.post("/login", data={"username": "ada", "password": "a passphrase"},
                     follow_redirects=False)  # fmt: skip
        cookie = {"Cookie": f"loupe_session={r.cookies['loupe_session']}"}
        web.cookies.clear()
        assert web.get("/whoami", headers=cookie).status_code == 200
        assert add("ada", "--deactivate") == 0
        assert web.get("/whoami", headers=cookie).status_code == 401
        assert add("ada", "--activate") == 0
        assert web.get("/whoami", headers=cookie).status_code == 401
        assert store.expert("ada").active
        # a fresh login works again
        r = web.post("/login", data={"username": "ada", "password": "a passphrase"},
                     follow_redirects=False)  # fmt: skip
        assert r.status_code == 303


def _serve_cli(tmp_path, capsys, *argv: str) -> tuple[int, str]:
    import launch

    rc = launch.main(["serve", "--no-seed", "--db", f"sqlite:///{tmp_path / 's.db'}", *argv])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_serve_refuses_a_bad_port_or_address_on_one_line(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cases = {
            ("--port", str(port)): f"port {port} on 127.0.0.1 is already in use",
            ("--port", "99999"): "--port 99999 is not a port number",
            ("--port", "-1"): "--port -1 is not a port number",
            ("--host", "192.0.2.1"): "--host 192.0.2.1 is not an address of this machine",
            ("--host", "no-such-host.invalid"): "--host 'no-such-host.invalid' is not an",
        }
        for argv, message in cases.items():
            rc, out = _serve_cli(tmp_path, capsys, *argv)
            assert rc == 2, (argv, out)
            assert message in out and "Traceback" not in out, (argv, out)
            assert len(out.strip().splitlines()) == 1, (argv, out)
