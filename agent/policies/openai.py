"""`openai`: any OpenAI-compatible chat-completions endpoint with image inputs.

vLLM `serve`, SGLang, hosted models. Images go as base64 PNG data URLs. Requests for a
batch run concurrently (asyncio + httpx, at most `concurrency` in flight), with timeouts
and exponential backoff on 429, 5xx and network errors. A request that still fails ends
its episode as a recorded error, never an exception.

Confidence: P(YES) from the token log-probabilities at the boxed verdict when the server
returns them (`logprobs` + `top_logprobs`); otherwise, with `samples` = k > 1, the share
of YES among k answers sampled for the final turn (agreement); otherwise None.
The key comes from `api_key`, else OPENAI_API_KEY, else LOUPE_API_KEY (none for a local
server).
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import random
import threading
import weakref
from typing import Any

from agent.confidence import verdict_char_index, yes_share
from agent.policies.base import Episode, Reply
from agent.protocol import parse_turn, think_block, tool_call_block

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class PngCache:
    """Data URLs of images still alive, by identity: every turn resends the whole
    conversation, and PNG-encoding the same plots again each turn would dominate."""

    def __init__(self) -> None:
        self._urls: dict[int, tuple[weakref.ref, str]] = {}

    def get(self, image: Any) -> str | None:
        hit = self._urls.get(id(image))
        return hit[1] if hit is not None and hit[0]() is image else None

    def __setitem__(self, image: Any, url: str) -> None:
        if len(self._urls) > 4096:  # drop entries whose images are gone
            self._urls = {k: v for k, v in self._urls.items() if v[0]() is not None}
        self._urls[id(image)] = (weakref.ref(image), url)


def png_data_url(image: Any, cache: PngCache | None = None) -> str:
    """A PIL image (or PNG bytes, or a data URL / URL string) as an image URL."""
    if isinstance(image, str):
        return image
    if isinstance(image, (bytes, bytearray)):
        return "data:image/png;base64," + base64.b64encode(bytes(image)).decode("ascii")
    if cache is not None:
        hit = cache.get(image)
        if hit is not None:
            return hit
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    if cache is not None:
        try:
            cache[image] = url
        except TypeError:
            pass
    return url


def to_openai_messages(
    messages: list[dict[str, Any]], cache: PngCache | None = None
) -> list[dict[str, Any]]:
    """Spec-o3 messages (text/image items) -> chat-completions messages (text/image_url)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        items = []
        for c in content or []:
            if c.get("type") == "image":
                items.append(
                    {"type": "image_url", "image_url": {"url": png_data_url(c["image"], cache)}}
                )
            elif c.get("type") == "text":
                items.append({"type": "text", "text": c["text"]})
        if m["role"] in ("system", "assistant"):  # text-only roles: plain strings are safest
            out.append({"role": m["role"], "content": "".join(i.get("text", "") for i in items)})
        else:
            out.append({"role": m["role"], "content": items})
    return out


def message_text(message: dict[str, Any]) -> str:
    """The assistant text, rebuilt in Spec-o3 form when a server split it apart.

    Servers with a reasoning parser move `<think>` into `reasoning_content`; servers with a
    tool parser move `<tool_call>` into `tool_calls`. Both are put back so the turn parses
    as the model wrote it.
    """
    text = message.get("content") or ""
    if isinstance(text, list):
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning and "<think>" not in text:
        text = think_block(reasoning) + text
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        text += tool_call_block(fn.get("name"), fn.get("arguments"))
    return text


def p_yes_from_logprobs(text: str, logprobs: Any) -> float | None:
    """P(YES) from chat-completions `logprobs.content` at the token starting the verdict."""
    at = verdict_char_index(text)
    if at is None or not isinstance(logprobs, dict):
        return None
    tokens = logprobs.get("content") or []
    pos = 0
    for entry in tokens:
        tok = entry.get("token") or ""
        if pos <= at < pos + len(tok):
            prefix = text[pos:at]
            cands = {t["token"]: t.get("logprob") for t in entry.get("top_logprobs") or []}
            cands.setdefault(tok, entry.get("logprob"))
            return yes_share(prefix, cands)
        pos += len(tok)
    return None


class OpenAIPolicy:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        renderer: str = "speco3",
        concurrency: int = 16,
        samples: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 1.0,
        logprobs: bool = True,
        **_: Any,
    ):
        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.api_key = (
            api_key or os.environ.get("OPENAI_API_KEY") or os.environ.get("LOUPE_API_KEY")
        )
        self.renderer = renderer
        self.concurrency = max(1, int(concurrency))
        self.samples = max(1, int(samples))
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self.logprobs = bool(logprobs)
        self._png_cache = PngCache()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None

    # -- the protocol ---------------------------------------------------------------
    def act(self, episodes: list[Episode]) -> list[Reply]:
        """One turn per episode. Thread-safe: every caller shares one event loop, one
        connection pool and one limit of `concurrency` requests in flight, so a runner can
        drive many episodes from threads without lock-step batches."""
        if not episodes:
            return []
        loop = self._ensure_loop()
        futures = [asyncio.run_coroutine_threadsafe(self._one(ep), loop) for ep in episodes]
        return [f.result() for f in futures]

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._client is not None:
            asyncio.run_coroutine_threadsafe(self._client.aclose(), loop).result()
            self._client = None
        loop.call_soon_threadsafe(loop.stop)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True, name="openai-policy").start()
                self._loop = loop
            return self._loop

    async def _one(self, ep: Episode) -> Reply:
        import httpx

        if self._client is None:  # created inside the loop that will use it
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            limits = httpx.Limits(max_connections=self.concurrency)
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=headers, limits=limits)
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            try:
                return await self._turn(self._client, ep)
            except Exception as exc:  # never let one episode sink the batch
                return Reply(text="", error=f"openai: {type(exc).__name__}: {exc}")

    async def _turn(self, client: Any, ep: Episode) -> Reply:
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_openai_messages(ep.messages, self._png_cache),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.logprobs:
            body.update(logprobs=True, top_logprobs=5)
        data, err = await self._post(client, body)
        if err:
            return Reply(text="", error=err)
        choice = (data.get("choices") or [{}])[0]
        text = message_text(choice.get("message") or {})
        p_yes = p_yes_from_logprobs(
            choice.get("message", {}).get("content") or "", choice.get("logprobs")
        )
        if p_yes is None and self.samples > 1 and parse_turn(text).answer is not None:
            p_yes = await self._agreement(client, body, text)
        return Reply(text=text, p_yes=p_yes)

    async def _agreement(self, client: Any, body: dict[str, Any], first: str) -> float | None:
        """Share of YES among k sampled answers to the same final turn (k-1 more samples)."""
        body = {**body, "temperature": max(self.temperature, 0.7)}
        body.pop("logprobs", None)
        body.pop("top_logprobs", None)
        answers = [parse_turn(first).answer]
        results = await asyncio.gather(*(self._post(client, body) for _ in range(self.samples - 1)))
        for data, err in results:
            if err:
                continue
            msg = ((data.get("choices") or [{}])[0]).get("message") or {}
            answers.append(parse_turn(message_text(msg)).answer)
        votes = [a for a in answers if a in ("YES", "NO")]
        return sum(a == "YES" for a in votes) / len(votes) if votes else None

    async def _post(self, client: Any, body: dict[str, Any]) -> tuple[dict, str | None]:
        """POST /chat/completions with retries; (json, None) or ({}, error text)."""
        import httpx

        url = self.base_url + "/chat/completions"
        last = ""
        for attempt in range(self.retries + 1):
            try:
                resp = await client.post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc or 'timed out'}"
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json(), None
                    except ValueError:
                        last = "response is not JSON"
                elif (
                    resp.status_code == 400
                    and body.get("logprobs")
                    and "logprob" in resp.text.lower()
                ):
                    # a server that does not do logprobs: ask without, from now on
                    self.logprobs = False
                    body = {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}
                    continue
                elif resp.status_code in RETRY_STATUS:
                    last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                    retry_after = _retry_after(resp.headers.get("retry-after"))
                    if attempt < self.retries:
                        await asyncio.sleep(retry_after or self._delay(attempt))
                    continue
                else:
                    return {}, f"openai: HTTP {resp.status_code}: {resp.text[:300]}"
            if attempt < self.retries:
                await asyncio.sleep(self._delay(attempt))
        return {}, f"openai: failed after {self.retries + 1} attempts ({last})"

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2**attempt) * (0.5 + random.random() / 2)


def _retry_after(value: str | None) -> float | None:
    try:
        return min(60.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None
