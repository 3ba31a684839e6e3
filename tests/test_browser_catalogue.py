"""The Export page's catalogue button, in Chromium: the files come back as downloads and
the message quotes each task's precision."""

from __future__ import annotations

import pytest

from app.main import serve
from tests.app_support import context
from tests.test_browser import _open, browser  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_catalogue_button_offers_csv_and_fits(browser, tmp_path_factory, tmp_path):  # noqa: F811
    ctx = context(tmp_path_factory, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url)
        page.click("button[role='tab']:has-text('Export')")
        page.click("#btn-export-catalogue")
        page.wait_for_function(
            "() => document.querySelector('#export-catalogue-message').innerText"
            ".includes('Catalogue')",
            timeout=30_000,
        )
        text = page.locator("#export-catalogue-message").inner_text()
        assert all(f"{t}: precision" in text for t in ctx.store.tasks())
        files = page.locator("#export-catalogue-files").inner_text()
        assert ".fits" in files and ".csv" in files and "manifest.json" in files
    finally:
        srv.close()
        ctx.store.close()
