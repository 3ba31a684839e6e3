"""End to end in Debian's Chromium: keyboard vetting, correcting, authoring, inert model text.

Needs /usr/bin/chromium (installed by .ci/run); skipped with the reason where it is absent.
Writes artifacts/vet_page.png, a screenshot of the vet page.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import httpx
import pytest

from app.main import serve
from tests.app_support import context

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium; .ci/run does)")
    sync = pytest.importorskip("playwright.sync_api")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_selector("#vet-header .loupe-head", timeout=30_000)


def _current_key(page) -> str:
    return page.inner_text("#vet-header .loupe-head .id").strip()


def _wait_key_change(page, old: str, timeout: float = 15.0) -> str:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            k = _current_key(page)
        except Exception:
            k = old
        if k and k != old:
            return k
        page.wait_for_timeout(50)
    raise AssertionError(f"the page stayed on {old}")


def test_vet_correct_and_author_in_the_browser(browser, tmp_path_factory, tmp_path):
    ctx = context(tmp_path_factory, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url)
        page.wait_for_selector("#vet-global .js-plotly-plot", timeout=30_000)
        page.wait_for_timeout(500)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "vet_page.png"), full_page=True)

        # accept with the keyboard
        first = _current_key(page)
        page.keyboard.press("?")
        assert page.is_visible("#loupe-cheatsheet")
        page.keyboard.press("Escape")
        page.keyboard.press("a")
        second = _wait_key_change(page, first)
        info = ctx.store.find_candidate(first)
        (r,) = ctx.store.reviews(candidate_id=info.id)
        assert r.action == "accept" and r.seconds is not None

        # keys are off while typing in a text box
        page.click("#vet-comment textarea, #vet-comment input")
        page.keyboard.type("a real note")
        page.wait_for_timeout(300)
        assert _current_key(page) == second
        page.keyboard.press("Escape")

        # correct: c opens the panel, choose the label, edit the explanation, save
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=10_000)
        page.click("#correct-label label:has-text('YES')")
        box = page.locator("#correct-explanation textarea")
        box.fill("C2 Swan bands are clear at 5165 Å")
        page.click("#btn-save-correct")
        _wait_key_change(page, second)
        info2 = ctx.store.find_candidate(second)
        (r2,) = ctx.store.reviews(candidate_id=info2.id)
        assert (r2.action, r2.label) == ("correct", "YES")
        assert r2.explanation == "C2 Swan bands are clear at 5165 Å"

        # author a two-step trajectory and submit it
        page.click("button[role='tab']:has-text('Author')")
        target = ctx.store.list_candidates(limit=5, order="id")[0]
        page.fill("#author-cid textarea, #author-cid input", target.key)
        page.click("#btn-author-load")
        page.wait_for_selector("#author-global .js-plotly-plot", timeout=20_000)
        for lo, hi, thought in [(6450, 6680, "H-alpha window"), (4800, 4950, "H-beta window")]:
            page.fill("#author-lo input", str(lo))
            page.fill("#author-hi input", str(hi))
            page.fill("#author-thought textarea", thought)
            page.click("#btn-author-zoom")
            page.wait_for_selector("#author-image img", timeout=20_000)
            page.click("#btn-author-add")
            page.wait_for_function(
                "t => document.querySelector('#author-steps') && "
                "document.querySelector('#author-steps').innerText.includes(t)",
                arg=thought, timeout=20_000,
            )  # fmt: skip
        page.click("#author-verdict label:has-text('NO')")
        page.fill("#author-explanation textarea", "Balmer absorption only")
        page.click("#btn-author-submit")
        page.wait_for_function(
            "() => document.querySelector('#author-message').innerText.includes('Submitted')",
            timeout=20_000,
        )
        (a,) = ctx.store.list_authored(status="submitted")
        assert a.candidate_id == target.id and len(a.steps) == 3 and a.verdict == "NO"
        assert [s["thought"] for s in a.steps[:2]] == ["H-alpha window", "H-beta window"]
    finally:
        srv.close()
        ctx.store.close()


def test_model_script_is_inert_with_login(browser, tmp_path_factory, tmp_path):
    from agent.trajectory import Step
    from annotate.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path, login=True)
    create_expert(ctx.store, "ada", "admin", "pw-ada-123")
    c = ctx.store.list_candidates(limit=1)[0]
    t = ctx.store.trajectory(c.trajectory_id)
    hostile = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'> **bold**"
    t.steps[0] = Step(thought=hostile, tool_call=t.steps[0].tool_call, window=t.steps[0].window)
    # the next turn's thought is shown beside panel 1 as the agent's reading of it
    t.steps[1] = dataclasses.replace(t.steps[1], thought=hostile)
    run_id = ctx.store.start_run("hostile", None, t.renderer, {})
    t.policy = "hostile"
    ctx.store.record_trajectory(t, run_id)
    srv = serve(ctx)
    try:
        page = browser.new_page()
        page.goto(srv.url, wait_until="load")
        assert "/login" in page.url
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "pw-ada-123")
        page.click("button[type=submit]")
        page.wait_for_selector("#vet-header .loupe-head", timeout=30_000)
        page.fill("#jump-id textarea, #jump-id input", c.key)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#vet-thought-0').innerText.includes('<script>')",
            timeout=20_000,
        )
        page.wait_for_timeout(500)
        assert page.evaluate("() => window.__pwned === undefined")
        assert page.locator("#vet-thought-0 script, #vet-thought-0 img").count() == 0
        assert page.locator("#vet-thought-0 .loupe-reading strong").inner_text() == "bold"
        assert httpx.get(srv.url + "/gradio_api/info").status_code == 401
    finally:
        srv.close()
        ctx.store.close()


def test_log_out_from_the_page(browser, tmp_path_factory, tmp_path):
    from annotate.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path, login=True)
    create_expert(ctx.store, "ada", "admin", "pw-ada-123")
    srv = serve(ctx)
    try:
        page = browser.new_page()
        page.goto(srv.url, wait_until="load")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "pw-ada-123")
        page.click("button[type=submit]")
        page.wait_for_selector("#whoami a[href='/logout']", timeout=30_000)
        (cookie,) = [c for c in page.context.cookies() if c["name"] == "loupe_session"]
        assert ctx.store.session_expert(cookie["value"]) == "ada"
        with page.expect_popup() as opened:  # Gradio opens Markdown links in a new tab
            page.click("#whoami a[href='/logout']")
        tab = opened.value
        tab.wait_for_selector("button#logout", timeout=10_000)
        assert ctx.store.session_expert(cookie["value"]) == "ada"  # the GET ends nothing
        tab.click("button#logout")
        tab.wait_for_url("**/login", timeout=10_000)
        assert ctx.store.session_expert(cookie["value"]) is None
        assert not [c for c in page.context.cookies() if c["name"] == "loupe_session"]
    finally:
        srv.close()
        ctx.store.close()
