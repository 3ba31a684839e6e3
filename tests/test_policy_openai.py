"""`openai` against a small chat-completions server on 127.0.0.1 started by the test:
images arrive as PNG data URLs, logprobs give P(YES), 5xx is retried, timeouts and 4xx end
as recorded errors, agreement over k samples, split reasoning/tool_calls are rebuilt."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from agent.loop import run_batch, run_episode
from agent.policies import get_policy
from agent.spectrum import Spectrum, SpectrumMeta

CALL = {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6500, 6620]}}
ZOOM = f"<think>Check H-alpha.</think>\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
ANSWER = "<think>Emission.</think><answer>\\boxed{YES} H-alpha in emission</answer>"


def _logprobs(text: str, yes_lp: float, no_lp: float) -> dict:
    """Chat-completions logprobs for `text`, tokenised as chars except the verdict."""
    i = text.index("YES")
    toks = list(text[:i]) + ["YES"] + list(text[i + 3 :])
    content = []
    for t in toks:
        if t == "YES":
            top = [
                {"token": "YES", "logprob": yes_lp},
                {"token": "NO", "logprob": no_lp},
                {"token": "maybe", "logprob": -3.0},
            ]
            content.append({"token": t, "logprob": yes_lp, "top_logprobs": top})
        else:
            content.append({"token": t, "logprob": -0.01, "top_logprobs": []})
    return {"content": content}


class Server:
    """Answers each request with the next scripted (status, body, delay)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.script: list = []
        self.default = None
        self.lock = threading.Lock()
        self.inflight = self.max_inflight = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    step = outer.script.pop(0) if outer.script else outer.default
                status, payload, delay = step(body) if callable(step) else step
                with outer.lock:
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                time.sleep(delay)
                with outer.lock:
                    outer.inflight -= 1
                data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def ok(text: str, logprobs: dict | None = None, **message) -> tuple[int, dict, float]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text, **message},
        "finish_reason": "stop",
        "logprobs": logprobs,
    }
    return 200, {"id": "x", "object": "chat.completion", "choices": [choice]}, 0.0


@pytest.fixture
def server():
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _spec(i: int = 0) -> Spectrum:
    rng = np.random.default_rng(i)
    wave = np.linspace(3700.0, 9100.0, 3900)
    return Spectrum(wave, 1 + rng.normal(0, 0.05, wave.size), meta=SpectrumMeta(id=f"o{i}"))


def _policy(server, **kw):
    kw = {
        "model": "spec-o3-7b",
        "base_url": server.url,
        "renderer": "fast",
        "backoff": 0.01,
        "timeout": 5.0,
        **kw,
    }
    return get_policy("openai", **kw)


def test_images_logprobs_and_key(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("LOUPE_API_KEY", "sekret")
    server.script = [ok(ZOOM), ok(ANSWER, _logprobs(ANSWER, yes_lp=-0.2, no_lp=-1.9))]
    t = run_episode(_spec(), "cv", _policy(server))
    assert t.state == "done" and t.verdict == "YES" and t.format_ok
    expected = np.exp(-0.2) / (np.exp(-0.2) + np.exp(-1.9))
    assert t.confidence == pytest.approx(expected)
    first, second = server.requests
    assert first["model"] == "spec-o3-7b" and first["logprobs"] is True
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "# Tools" in first["messages"][0]["content"]
    # the global view and then the zoom arrive as PNG data URLs
    urls = [
        c["image_url"]["url"]
        for m in second["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c["type"] == "image_url"
    ]
    assert len(urls) == 2
    for u in urls:
        assert u.startswith("data:image/png;base64,")
        img = Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1])))
        assert img.format == "PNG" and img.size[0] > 100
    assert second["messages"][2] == {"role": "assistant", "content": ZOOM}
    assert server.headers[0]["Authorization"] == "Bearer sekret"


def test_500_then_success_is_retried(server):
    server.script = [(500, {"error": "busy"}, 0.0), (429, {"error": "slow down"}, 0.0), ok(ANSWER)]
    t = run_episode(_spec(), "cv", _policy(server))
    assert t.state == "done" and t.verdict == "YES" and len(server.requests) == 3
    assert t.confidence is None  # no logprobs returned, k = 1: unknown


def test_timeouts_end_as_recorded_errors(server):
    server.default = ok(ANSWER)
    server.script = [(200, {}, 1.0)] * 2
    t = run_episode(_spec(), "cv", _policy(server, timeout=0.3, retries=1))
    assert t.state == "error" and "failed after 2 attempts" in t.error and "Timeout" in t.error


def test_client_error_is_not_retried(server):
    server.script = [(401, {"error": "bad key"}, 0.0)]
    server.default = ok(ANSWER)
    t = run_episode(_spec(), "cv", _policy(server))
    assert t.state == "error" and "HTTP 401" in t.error and len(server.requests) == 1


def test_server_without_logprobs_and_agreement_over_k(server):
    def reply(body):
        assert "logprobs" not in body or body["logprobs"] is True
        if body.get("logprobs"):
            return 400, {"error": {"message": "logprobs are not supported"}}, 0.0
        return ok(ANSWER if len(server.requests) % 3 else ANSWER.replace("YES", "NO"))

    server.default = reply
    t = run_episode(_spec(), "cv", _policy(server, samples=3, temperature=0.0))
    assert t.verdict in ("YES", "NO")
    assert t.confidence in (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert len(server.requests) == 4  # refused logprobs once, then 1 + 2 samples


def test_split_reasoning_and_tool_calls_are_rebuilt(server):
    tool_calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": CALL["name"], "arguments": json.dumps(CALL["arguments"])},
        }
    ]
    server.script = [ok("", reasoning_content="Check H-alpha.", tool_calls=tool_calls), ok(ANSWER)]
    t = run_episode(_spec(), "cv", _policy(server))
    assert t.steps[0].tool_call == CALL and t.steps[0].thought == "Check H-alpha."
    assert t.steps[0].window == (6500.0, 6620.0) and t.format_ok


def test_concurrency_runs_requests_in_parallel(server):
    server.default = lambda body: (*ok(ANSWER)[:2], 0.5)
    out = run_batch([(_spec(i), "cv") for i in range(8)], _policy(server, concurrency=4))
    assert all(t.verdict == "YES" for t in out)
    assert server.max_inflight == 4  # requests overlapped, and never more than allowed


def test_policy_is_shared_safely_across_threads(server):
    from concurrent.futures import ThreadPoolExecutor

    server.default = lambda body: (*ok(ANSWER)[:2], 0.2)
    pol = _policy(server, concurrency=3)
    with ThreadPoolExecutor(6) as ex:
        out = list(ex.map(lambda i: run_episode(_spec(i), "cv", pol), range(6)))
    assert [t.verdict for t in out] == ["YES"] * 6
    assert server.max_inflight == 3
    pol.close()


def test_unreachable_server_is_a_recorded_error():
    pol = get_policy(
        "openai",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        retries=1,
        backoff=0.01,
        timeout=1.0,
        renderer="fast",
    )
    t = run_episode(_spec(), "wd", pol)
    assert t.state == "error" and "ConnectError" in t.error


def test_runner_drives_openai_with_a_sliding_window(server, tmp_path):
    from agent.formats.lamost import write_lamost_fits
    from commands.vet import main
    from launch import build_parser

    for i in range(6):
        s = _spec(i)
        wave = 10 ** np.arange(np.log10(3700.0), np.log10(9100.0), 1e-4)
        s = Spectrum(wave, np.interp(wave, s.wavelength, s.flux), meta=SpectrumMeta(id=f"f{i}"))
        write_lamost_fits(s, tmp_path / f"f{i}.fits")
    server.default = lambda body: (*ok(ANSWER if len(body["messages"]) > 2 else ZOOM)[:2], 0.1)
    out = tmp_path / "r.jsonl"
    args = build_parser("vet").parse_args(
        [
            "--input",
            str(tmp_path),
            "--task",
            "cv",
            "--policy",
            "openai",
            "--model",
            "m",
            "--base-url",
            server.url,
            "--renderer",
            "fast",
            "--concurrency",
            "3",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert main(args) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == [f"f{i}" for i in range(6)]
    assert all(r["verdict"] == "YES" and len(r["steps"]) == 2 for r in rows)
    assert server.max_inflight == 3
