"""The expert's desk in Debian's Chromium: templates and redshift by keyboard, the normalised
view, marker choice, and pages that open filled with their real headers.

Needs /usr/bin/chromium (installed by .ci/run); skipped with the reason where it is absent.
"""

from __future__ import annotations

import pytest

from app.main import serve
from tests.app_support import context
from tests.test_browser import _current_key, _open, browser  # noqa: F401  (the fixture)

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


def _wait_global(page, predicate: str, timeout: int = 15_000) -> None:
    page.wait_for_function(f"() => {{ const gd = {GLOBAL}; return gd && gd.data && ({predicate}); }}",
                           timeout=timeout)  # fmt: skip


def test_templates_redshift_and_views_by_keyboard(browser, tmp_path_factory, tmp_path):  # noqa: F811
    ctx = context(tmp_path_factory, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url)
        page.wait_for_selector("#vet-global .js-plotly-plot", timeout=30_000)
        key = _current_key(page)
        g = _global(page)
        assert g["ytitle"] == "flux (arbitrary units)"
        assert not any(n.startswith("template") for n in g["names"])

        # t: the next template is drawn on the whole spectrum at the shown redshift
        page.keyboard.press("t")
        _wait_global(page, "gd.data.some(t => (t.name || '').startsWith('template: QSO'))")

        # z focuses the redshift box: type 1.27, Enter, and the QSO is drawn at z = 1.27
        page.keyboard.press("z")
        assert page.evaluate("() => document.activeElement.closest('#desk-z') !== null")
        page.keyboard.type("1.27")
        page.keyboard.press("Enter")
        _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.2700')")
        page.wait_for_function(
            "() => document.querySelector('#desk-z-info').innerText.includes('yours: 1.2700')",
            timeout=10_000,
        )
        # ] nudges by 0.001, } by 0.05 (from the value the slider shows)
        page.wait_for_function(
            "() => document.querySelector('#desk-z input[type=number]').value === '1.27'",
            timeout=10_000,
        )
        page.keyboard.press("]")
        _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.2710')")
        page.keyboard.press("}")
        _wait_global(page, "gd.data.some(t => t.name === 'template: QSO at z = 1.3210')")
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
        srv.close()
        ctx.store.close()


def test_pages_open_filled_with_real_headers(browser, tmp_path_factory, tmp_path):  # noqa: F811
    ctx = context(tmp_path_factory, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url)
        page.click("button[role='tab']:has-text('Dashboard')")
        # filled without pressing Refresh: the progress plot is drawn, the summary written
        page.wait_for_selector("#dash-progress .js-plotly-plot", timeout=20_000)
        page.wait_for_function(
            "() => document.querySelector('#dash-summary').innerText.includes('candidates')",
            timeout=20_000,
        )
        heads = page.locator("#dash-table thead th").all_inner_texts()
        assert any("precision" in h for h in heads) and not any(h.strip() == "1" for h in heads)
        assert any("Fleiss" in h for h in page.locator("#dash-kappa thead th").all_inner_texts())
        page.click("button[role='tab']:has-text('Experts')")
        page.wait_for_selector("#experts-list thead th", timeout=10_000)
        assert any("role" in h for h in page.locator("#experts-list thead th").all_inner_texts())
        page.wait_for_function(
            "() => document.querySelector('#experts-list').innerText.includes('local')",
            timeout=10_000,
        )
        page.click("button[role='tab']:has-text('Export')")
        heads = page.locator("#export-history thead th").all_inner_texts()
        assert any("kind" in h for h in heads)
    finally:
        srv.close()
        ctx.store.close()
