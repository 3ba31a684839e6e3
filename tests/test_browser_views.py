"""The expert's desk in Debian's Chromium: templates and redshift by keyboard, the normalised
view, marker choice, and pages that open filled with their real headers.

Needs /usr/bin/chromium (installed by .ci/run); skipped with the reason where it is absent.
"""

from __future__ import annotations

import json

import pytest

from app.pages import desk
from tests.app_support import ANSWER_MS, context
from tests.test_browser import _current_key, _open

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GLOBAL = "document.querySelector('#vet-global .js-plotly-plot')"


def _global(page) -> dict:
    """What the whole-spectrum panel draws: trace names, y title, marker label texts."""
    return page.evaluate(
        f"""() => {{ const gd = {GLOBAL}; if (!gd || !gd.data) return null;
        return {{names: gd.data.map(t => t.name),
                 ytitle: (gd.layout.yaxis.title || {{}}).text,
                 labels: (gd.layout.annotations || []).filter(a => a.textangle === -90)
                           .map(a => a.text)}}; }}"""
    )


def _wait_global(page, predicate: str, timeout: int = 30_000) -> None:
    page.wait_for_function(f"() => {{ const gd = {GLOBAL}; return gd && gd.data && ({predicate}); }}",
                           timeout=timeout)  # fmt: skip


def test_templates_redshift_and_views_by_keyboard(tab, tmp_path_factory, tmp_path):
    ctx = context(tmp_path_factory, tmp_path)
    try:
        with tab.serve(ctx) as (srv, page):
            _open(page, srv.url)
            page.wait_for_selector("#vet-global .js-plotly-plot", timeout=30_000)
            key = _current_key(page)
            g = _global(page)
            assert g["ytitle"] == "flux (arbitrary units)"
            assert not any(n.startswith("template") for n in g["names"])

            # t: the next template is drawn on the whole spectrum at the shown redshift; the
            # task's own classes come first (app.pages.desk.TASK_TEMPLATES), so cycle to the QSO
            drawn = None
            for _ in range(20):
                page.keyboard.press("t")
                _wait_global(page, "gd.data.some(t => (t.name || '').startsWith('template: ')) && "
                             f"!gd.data.some(t => t.name === {json.dumps(drawn)})")  # fmt: skip
                drawn = next(n for n in _global(page)["names"] if n.startswith("template: "))
                if drawn.startswith("template: QSO"):
                    break
            assert drawn.startswith("template: QSO"), drawn

            # z focuses the redshift box: type 1.27, Enter, and the QSO is drawn at z = 1.27
            page.keyboard.press("z")
            assert page.evaluate("() => document.activeElement.closest('#desk-z') !== null")
            page.keyboard.type("1.27")
            page.keyboard.press("Enter")
            _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.2700')")
            page.wait_for_function(
                "() => (document.querySelector('#desk-z-info')?.innerText ?? '').includes('yours: 1.2700')",
                timeout=30_000,
            )
            # ] nudges by 0.001, } by 0.05 (from the value the slider shows)
            page.wait_for_function(
                "() => document.querySelector('#desk-z input[type=number]').value === '1.27'",
                timeout=30_000,
            )
            page.keyboard.press("]")
            _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.2710')")
            page.keyboard.press("}")
            _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.3210')")
            # a typed value out of range is refused, said, and nothing redrawn
            page.keyboard.press("z")
            page.keyboard.type("9")
            page.keyboard.press("Enter")
            page.wait_for_function(
                "() => (document.querySelector('#vet-message')?.innerText ?? '').includes('not changed')",
                timeout=30_000,
            )
            assert "template: QSO at z = 1.3210" in _global(page)["names"]
            # = adopts the agent's (here the file's) redshift, shown at the control's resolution
            info = ctx.store.find_candidate(key)
            traj = ctx.store.trajectory(info.trajectory_id) if info.trajectory_id else None
            est = desk.shown_z(desk.estimate(ctx.store.load_spectrum(info.id), traj)[0])
            page.keyboard.press("=")
            _wait_global(page, f"gd.data.some(t => t.name === 'template: QSO at z = {est:.4f}')")
            page.wait_for_function(
                f"() => (document.querySelector('#desk-z-info')?.innerText ?? '').includes('yours: {est:.4f}')",
                timeout=30_000,
            )
            assert _current_key(page) == key  # none of this moved the queue or decided anything
            assert ctx.store.reviews() == []

            # n: continuum-normalised, said on the axis; n again: back to flux
            page.keyboard.press("n")
            _wait_global(page, "gd.layout.yaxis.title.text === 'flux / continuum'")
            page.keyboard.press("n")
            _wait_global(page, "gd.layout.yaxis.title.text === 'flux (arbitrary units)'")

            # m: every catalogue marker, not only the task's; labels stay apart either way
            before = len(_global(page)["labels"])
            page.keyboard.press("m")
            _wait_global(page, f"gd.layout.annotations.filter(a => a.textangle === -90).length "
                               f"!== {before}")  # fmt: skip
    finally:
        ctx.store.close()


def test_pages_open_filled_with_real_headers(tab, tmp_path_factory, tmp_path):
    ctx = context(tmp_path_factory, tmp_path)
    try:
        with tab.serve(ctx) as (srv, page):
            _open(page, srv.url)
            page.click("button[role='tab']:has-text('Dashboard')")
            # filled without pressing Refresh: the progress plot is drawn, the summary written
            # (30 s, as the Experts tab below: 20 s ran out once in a full run at -n 4)
            page.wait_for_selector("#dash-progress .js-plotly-plot", timeout=30_000)
            page.wait_for_function(
                "() => (document.querySelector('#dash-summary')?.innerText ?? '').includes('candidates')",
                timeout=30_000,
            )
            heads = page.locator("#dash-table thead th").all_inner_texts()
            assert any("precision" in h for h in heads) and not any(h.strip() == "1" for h in heads)
            assert any(
                "Fleiss" in h for h in page.locator("#dash-kappa thead th").all_inner_texts()
            )
            page.click("button[role='tab']:has-text('Experts')")
            page.wait_for_selector("#experts-list thead th", timeout=30_000)
            assert any(
                "role" in h for h in page.locator("#experts-list thead th").all_inner_texts()
            )
            page.wait_for_function(
                "() => (document.querySelector('#experts-list')?.innerText ?? '').includes('local')",
                timeout=30_000,
            )
            page.click("button[role='tab']:has-text('Export')")
            heads = page.locator("#export-history thead th").all_inner_texts()
            assert any("kind" in h for h in heads)
    finally:
        ctx.store.close()


def _submit_authored(ctx, author: str) -> int:
    """A two-zoom trajectory by `author`, submitted for audit (through the authoring module,
    as the Author page submits)."""
    from annotate import authoring as au

    c = ctx.store.list_candidates(limit=1)[0]
    spec = ctx.store.load_spectrum(c.id)
    lo, hi = float(spec.rest_wavelength().min()), float(spec.rest_wavelength().max())
    d = au.start_draft(c)
    au.add_step(d, spec, lo + 100, lo + 400, "First window: the blue end.")
    au.add_step(d, spec, hi - 400, hi - 100, "Second window: the red end.")
    au.set_answer(d, "NO", "Nothing of the class in either window.")
    au.submit(ctx.store, d, author)
    return d.authored_id


def test_audit_shows_what_the_model_will_see_and_approves(tab, tmp_path_factory, tmp_path):
    from annotate.team.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path, login=True)
    create_expert(ctx.store, "ann", "expert", "pw-ann-1234")
    create_expert(ctx.store, "ada", "admin", "pw-ada-1234")
    aid = _submit_authored(ctx, "ann")
    try:
        with tab.serve(ctx) as (srv, page):
            page.goto(srv.url, wait_until="load")
            page.fill("input[name=username]", "ada")
            page.fill("input[name=password]", "pw-ada-1234")
            page.click("button[type=submit]")
            page.wait_for_selector("#vet-header .loupe-head", timeout=30_000)
            page.click("button[role='tab']:has-text('Author')")
            # the list is filled when the tab opens, no Refresh needed
            page.wait_for_function(
                "() => (document.querySelector('#audit-note') || {}).innerText"
                "?.includes('1 trajectory')",
                timeout=30_000,
            )
            page.click("#audit-pick input")
            page.click(f"li[role=option]:has-text('#{aid} ')")
            # the whole spectrum and both zooms, decoded and drawn, each zoom beside its thought
            page.wait_for_function(
                "() => [...document.querySelectorAll('#audit-view img.loupe-audit-image')]"
                ".filter(i => i.complete && i.naturalWidth > 100).length === 3",
                timeout=ANSWER_MS,
            )
            for i, text in enumerate(["the blue end", "the red end"]):
                block = page.locator(f"#audit-step-{i}")
                assert text in block.inner_text()
                assert block.locator("img.loupe-audit-image").count() == 1
                # beside, not below: the image starts right of the thought, on the same row
                box_t = block.locator("div").first.bounding_box()
                box_i = block.locator("img").bounding_box()
                assert (
                    box_i["x"] >= box_t["x"] + box_t["width"] - 1 and box_i["y"] < box_t["y"] + 40
                )
            assert page.locator("#audit-overview img.loupe-audit-image").count() == 1
            page.click("#btn-audit-approve")
            page.wait_for_function(
                f"() => document.body.innerText.includes('#{aid} approved')", timeout=30_000
            )
            assert ctx.store.authored(aid).status == "approved"
            page.wait_for_function(
                "() => (document.querySelector('#audit-note')?.innerText ?? '').includes('Nothing to audit')",
                timeout=30_000,
            )
    finally:
        ctx.store.close()


def test_single_user_audit_list_says_why_it_is_empty(tab, tmp_path_factory, tmp_path):
    ctx = context(tmp_path_factory, tmp_path)
    _submit_authored(ctx, ctx.local_expert)
    try:
        with tab.serve(ctx) as (srv, page):
            _open(page, srv.url)
            page.click("button[role='tab']:has-text('Author')")
            page.wait_for_function(
                "() => (document.querySelector('#audit-note') || {}).innerText"
                "?.includes('single-user mode')",
                timeout=30_000,
            )
            note = page.inner_text("#audit-note")
            assert "cannot approve their own" in note and "1 of yours" in note and "--login" in note
            page.click("#audit-pick input")
            page.wait_for_timeout(300)
            assert page.locator("li[role=option]").count() == 0
    finally:
        ctx.store.close()


def test_the_vet_plots_are_drawn_with_the_basic_bundle_only(tab, tmp_path_factory, tmp_path):
    """A first visit draws both vet plots with plotly.js's basic bundle (app/static) and never
    fetches Gradio's full Plotly chunk, whose evaluation cost over a second of a first visit;
    both plots show the header's candidate, and `j` draws the next one."""
    ctx = context(tmp_path_factory, tmp_path)
    try:
        with tab.serve(ctx) as (srv, page):
            fetched: list[str] = []
            page.on("request", lambda r: fetched.append(r.url))
            _open(page, srv.url)
            drawn = """k => ['#vet-global', '#vet-zooms'].every(s => {
                const gd = document.querySelector(s + ' .js-plotly-plot');
                return gd && gd.layout && gd.layout.meta && gd.layout.meta.candidate === k; })"""
            key = _current_key(page)
            page.wait_for_function(drawn, arg=key, timeout=30_000)
            assert any("/loupe-static/plotly-basic-" in u for u in fetched)
            assert not [u for u in fetched if "PlotlyPlot-" in u]
            assert page.evaluate("() => window.loupePlotly === window.Plotly")
            page.keyboard.press("j")
            page.wait_for_function(f"() => (document.querySelector('#vet-header .loupe-head .id')"
                                   f"?.innerText ?? '').trim() !== {json.dumps(key)}",
                                   timeout=30_000)  # fmt: skip
            nxt = _current_key(page)
            page.wait_for_function(drawn, arg=nxt, timeout=30_000)
            assert not [u for u in fetched if "PlotlyPlot-" in u]
    finally:
        ctx.store.close()


def test_decisions_leave_nothing_in_the_browsers_storage(tab, tmp_path_factory, tmp_path):
    """Gradio's run history (every call's inputs and outputs in localStorage) is off: the
    spectra and verdicts an expert saw stay on the server, and a decision does not re-read
    and re-write that history on the page's main thread."""
    ctx = context(tmp_path_factory, tmp_path)
    try:
        with tab.serve(ctx) as (srv, page):
            _open(page, srv.url)
            page.wait_for_selector("#vet-global .js-plotly-plot", timeout=30_000)
            for _ in range(3):
                key = _current_key(page)
                page.keyboard.press("j")
                page.wait_for_function(f"() => (document.querySelector('#vet-header .loupe-head "
                                       f".id')?.innerText ?? '').trim() !== {json.dumps(key)}",
                                       timeout=30_000)  # fmt: skip
            page.wait_for_timeout(500)
            stored = page.evaluate("() => Object.keys(localStorage).map(k => [k, "
                                   "localStorage.getItem(k).length])")  # fmt: skip
            assert sum(n for _, n in stored) < 2_000, stored
    finally:
        ctx.store.close()


def test_a_trajectory_without_zooms_hides_the_step_panels(tab, tmp_path_factory, tmp_path):
    """A model that answered without zooming has no step panels: their box is hidden, not
    left showing the previous candidate's, and the next candidate with zooms shows its own
    again."""
    ctx = context(tmp_path_factory, tmp_path)
    first, other = ctx.store.list_candidates(limit=2)
    t = ctx.store.trajectory(first.trajectory_id)
    t.steps, t.verdict, t.confidence, t.policy = [], "NO", 0.3, "hasty"
    t.explanation = "Answered at once, without a zoom."
    ctx.store.record_trajectory(t, ctx.store.start_run("hasty", None, t.renderer, {}))
    zooms = "() => document.getElementById('vet-zooms')"
    drawn = """k => { const gd = document.querySelector('#vet-global .js-plotly-plot');
                      return !!gd && gd.layout.meta.candidate === k; }"""
    try:
        with tab.serve(ctx) as (srv, page):
            _open(page, srv.url)
            for key, steps in ((first.key, False), (other.key, True), (first.key, False)):
                # a jump to the candidate shown changes nothing on the page to wait for, and
                # Gradio drops a second submit of the box while the first is running
                if _current_key(page) != key:
                    page.fill("#jump-id textarea, #jump-id input", key)
                    page.keyboard.press("Enter")
                page.wait_for_function(drawn, arg=key, timeout=30_000)
                shown = f"() => getComputedStyle(({zooms})()).display !== 'none'"
                if steps:
                    page.wait_for_function(
                        "k => { const gd = document.querySelector('#vet-zooms .js-plotly-plot');"
                        " return !!gd && gd.layout.meta.candidate === k; }", arg=key,
                        timeout=30_000,
                    )  # fmt: skip
                    assert page.evaluate(shown)
                else:
                    page.wait_for_function(f"() => !({shown})()", timeout=30_000)
                    assert "without a zoom" in page.inner_text("#vet-answer")
    finally:
        ctx.store.close()
