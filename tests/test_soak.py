"""Eight experts vetting at once through the running app (gradio_client), for a bounded time,
on SQLite and, where LOUPE_TEST_PG_URL names a server, on PostgreSQL.

Every submitted review must be stored exactly once and no item may be served to two
experts (overlap 1; only label-setting actions are used, so a reviewed item is done).
Duration: LOUPE_SOAK_SECONDS (default 10 in the suite; 120 for the full soak). Prints p50/p95.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import Counter

import httpx
import pytest
from gradio_client import Client

from app.main import serve
from tests.app_support import SLOW_OK, as_cookie, context
from tests.concurrency import run_threads

pytestmark = pytest.mark.slow

N_EXPERTS = 8
SECONDS = float(os.environ.get("LOUPE_SOAK_SECONDS", "10"))
# Enough candidates that the experts are still busy at the deadline (up to 12 reviews/s
# were measured here with 8 experts), so the soak lasts the time it is given.
N_PER_CLASS = max(6, int(SECONDS * 0.9))
KEY = re.compile(r'<span class="id">([^<]+)</span>.*?task <b>([^<]+)</b>')


def _key(out) -> str | None:
    """ "id/task" of the candidate shown (one spectrum is a candidate for several tasks)."""
    for o in out:
        if isinstance(o, str):
            m = KEY.search(o)
            if m:
                return f"{m.group(1)}/{m.group(2)}"
    return None


def _pg_context(url: str, tmp_path):
    """The same demo set as the SQLite runs, generated, ingested and vetted into PostgreSQL."""
    from app.main import make_context
    from commands.serve import seed_demo

    ctx = make_context(url, login=True, data_roots=[str(tmp_path / "data")],
                       export_dir=str(tmp_path / "exports"))  # fmt: skip
    seed_demo(ctx, tmp_path / "data" / "demo", n_per_class=N_PER_CLASS)
    return ctx


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def team_ctx(request, tmp_path_factory, tmp_path):
    if request.param == "sqlite":
        ctx = context(tmp_path_factory, tmp_path, login=True, n_per_class=N_PER_CLASS)
    else:
        ctx = _pg_context(request.getfixturevalue("pg_url"), tmp_path)
    yield ctx
    ctx.store.close()


def test_eight_experts_soak(team_ctx):
    from annotate.team.experts import create_expert

    seconds = SECONDS
    ctx = team_ctx
    backend = ctx.store.url.get_backend_name()
    names = [f"expert{i}" for i in range(N_EXPERTS)]
    for n in names:
        create_expert(ctx.store, n, "expert", f"pw-{n}-secret")
    srv = serve(ctx)
    shown: dict[str, list[str]] = {n: [] for n in names}
    submitted: dict[str, list[tuple[str, str]]] = {n: [] for n in names}
    latencies: list[float] = []
    lock = threading.Lock()

    def expert(name: str, seed: int) -> None:
        rng = random.Random(seed)
        r = httpx.post(srv.url + "/login", timeout=120,
                       data={"username": name, "password": f"pw-{name}-secret"})  # fmt: skip
        token = r.cookies.get("loupe_session")
        assert token, f"{name}: login failed ({r.status_code})"
        c = Client(srv.url, verbose=False, headers=as_cookie(token), httpx_kwargs=SLOW_OK)
        try:
            # each expert's time runs from their first item: logging 8 clients in takes
            # longer than the soak itself on a loaded machine
            until = time.time() + seconds
            t0 = time.perf_counter()
            key = _key(c.predict(api_name="/next"))
            with lock:
                latencies.append(time.perf_counter() - t0)
            while key is not None and time.time() < until:
                shown[name].append(key)
                time.sleep(rng.uniform(0.0, 0.2))  # a very fast expert
                t0 = time.perf_counter()
                if rng.random() < 0.2:
                    action = "correct"
                    out = c.predict(rng.choice(["YES", "NO"]), "none", "soak", api_name="/correct")
                else:
                    action = rng.choice(["accept", "reject"])
                    out = c.predict(api_name=f"/{action}")
                with lock:
                    latencies.append(time.perf_counter() - t0)
                saved = f"Saved **{action}**"
                confirmed = any(isinstance(o, str) and o.startswith(saved) for o in out)
                assert confirmed, f"{name}: {action} on {key} not confirmed"
                submitted[name].append((key, action))
                key = _key(out)
        finally:
            c.close()

    started = time.time()
    try:
        run_threads(expert, [(n, i) for i, n in enumerate(names)], timeout=seconds + 120)
    finally:
        srv.close()
    elapsed = time.time() - started
    total = sum(len(v) for v in submitted.values())
    assert total > 0
    # stored exactly once: one review per submitted (expert, candidate), nothing extra
    stored = Counter()
    for r in ctx.store.reviews():
        c = ctx.store.candidate(r.candidate_id)
        stored[(ctx.store.expert(r.expert_id).name, f"{c.key}/{c.task}")] += 1
    expected = Counter((n, k) for n, subs in submitted.items() for k, _ in subs)
    assert stored == expected
    # no item served to two experts
    owners: dict[str, set[str]] = {}
    for n, keys in shown.items():
        for k in keys:
            owners.setdefault(k, set()).add(n)
    shared = {k: v for k, v in owners.items() if len(v) > 1}
    assert not shared, shared
    lat = sorted(latencies)
    p50 = lat[len(lat) // 2] * 1000
    p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))] * 1000
    print(f"\nsoak ({backend}): {N_EXPERTS} experts, {elapsed:.0f} s of {seconds:.0f}, {total} reviews, "
          f"round trip p50 {p50:.0f} ms, p95 {p95:.0f} ms")  # fmt: skip
