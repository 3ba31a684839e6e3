"""A tab that closes while the app answers leaves no error in the server's log.

Each trial asks for the next candidate as the page does (`/gradio_api/queue/join`), opens
the event stream that carries the answer (`/gradio_api/queue/data`) on a raw socket and
drops it with a TCP reset at a random moment, as a closing tab does. With Starlette's
`app.middleware("http")` layers in front of Gradio (before `app.auth.Guard`), about one
trial in twenty logged "async generator ignored GeneratorExit": the layer abandoned
Gradio's stream part way. Served with login on, so all four of the app's checks are in
front of the stream.
"""

from __future__ import annotations

import gc
import logging
import random
import socket
import struct
import time

import httpx
import pytest

from app.main import serve
from tests.app_support import context

TRIALS = 100


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from annotate.team.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path_factory.mktemp("tab-close"), login=True)
    create_expert(ctx.store, "ada", "expert", "pw-ada-123456")
    srv = serve(ctx)
    yield srv
    srv.close()
    ctx.store.close()


def test_closing_tabs_mid_answer_logs_nothing(served, caplog):
    url = served.url
    host, port = url.split("//")[1].split(":")
    with httpx.Client(base_url=url, headers={"Origin": url}, timeout=60) as http:
        r = http.post("/login", data={"username": "ada", "password": "pw-ada-123456"})
        assert r.status_code in (200, 303), r.text
        cookie = http.cookies.get("loupe_session")
        assert cookie
        cfg = http.get("/config").json()
        comps = {c["id"]: c for c in cfg["components"]}
        fn = next(i for i, d in enumerate(cfg["dependencies"]) if d.get("api_name") == "next")
        values = [comps[i]["props"].get("value") for i in cfg["dependencies"][fn]["inputs"]]
        rng = random.Random(0)
        caplog.set_level(logging.WARNING)
        for trial in range(TRIALS):
            session = f"tab-close-{trial}"
            event = {"data": values, "fn_index": fn, "session_hash": session,
                     "event_data": None, "trigger_id": None}  # fmt: skip
            assert http.post("/gradio_api/queue/join", json=event).status_code == 200
            s = socket.create_connection((host, int(port)))
            s.sendall(
                f"GET /gradio_api/queue/data?session_hash={session} HTTP/1.1\r\n"
                f"Host: {host}:{port}\r\nAccept: text/event-stream\r\n"
                f"Cookie: loupe_session={cookie}\r\n\r\n".encode()
            )
            time.sleep(rng.random() * 0.12)  # the tab closes at any point of the answer
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        # the app still answers, and the streams it dropped have been finalised
        assert http.get("/config").status_code == 200
    time.sleep(1.0)
    gc.collect()
    time.sleep(0.5)
    bad = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    bad += [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
    assert not [m for m in bad if "GeneratorExit" in m], bad[:3]
    assert not bad, bad[:3]
