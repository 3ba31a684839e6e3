"""The Export page's catalogue button, in Chromium: the files come back as download links
and the message quotes each task's precision."""

from __future__ import annotations

import pytest

from app.main import serve
from tests.app_support import context

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_catalogue_button_offers_csv_and_fits(browser, tmp_path_factory, tmp_path):  # noqa: F811
    ctx = context(tmp_path_factory, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(srv.url, wait_until="load")
        # the app's first page can take a while to draw on a loaded machine; the tab bar
        # is all this test needs
        page.click("button[role='tab']:has-text('Export')", timeout=120_000)
        page.click("#btn-export-catalogue")
        page.wait_for_function(
            "() => (document.querySelector('#export-catalogue-message')?.innerText ?? '')"
            ".includes('Catalogue')",
            timeout=120_000,
        )
        text = page.locator("#export-catalogue-message").inner_text()
        assert all(f"{t}: precision" in text for t in ctx.store.tasks())
        files = page.locator("#export-catalogue-files").inner_text()
        assert all(f"{t}.fits" in files and f"{t}.csv" in files for t in ctx.store.tasks())
        assert "manifest.json" in files
        # each a link to the one download route, by token: no path reaches the page
        hrefs = page.locator("#export-catalogue-files a").evaluate_all("a => a.map(x => x.href)")
        assert hrefs and all("/download/" in h for h in hrefs), hrefs
        assert str(ctx.export_dir) not in page.content()
    finally:
        srv.close()
        ctx.store.close()
