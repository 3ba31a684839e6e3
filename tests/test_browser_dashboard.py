"""The Dashboard in Chromium: the random audit's estimates with their intervals and counts,
the reliability diagram on reviewed items saying it is biased with its title above the
plot, and the learning curve over inspector versions."""

from __future__ import annotations

import pytest

from app.main import serve
from tests.app_support import context

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HEAD = ".annotation[data-index='0']"  # a figure's heading (app.dashboard_figures.title_layout)
# the SVG boxes of a plot's title and of its plot area (Plotly's drag layer covers it)
BOXES = """(sel) => {
    const el = document.querySelector(sel);
    const box = (q) => { const r = el.querySelector(q).getBoundingClientRect();
                         return [r.left, r.top, r.right, r.bottom]; };
    return {title: box(".annotation[data-index='0']"), plot: box('.nsewdrag'), svg: box('svg.main-svg')};
}"""


def _campaign(ctx) -> None:
    """Audit drawn and reviewed, a few decisions on uncertain items, two fitted versions."""
    from agent.policies.rules.learned import InspectorModel, TaskModel
    from annotate.audit.sample import draw_for_store
    from annotate.review import decide
    from annotate.vetting.into_store import INSPECTOR_SETTING as SETTING

    store = ctx.store
    store.auto_accept(0.9)
    assert draw_for_store(store, 0.5, seed=0)
    for r in store.audit_population():
        if r.audit_inclusion is not None:
            decide(store, ctx.local_expert, r.id, "accept")
    for r in [r for r in store.audit_population() if r.label is None][:4]:
        decide(store, ctx.local_expert, r.id, "reject")
    for version, n, f1 in ((1, 10, 0.7), (2, 20, 0.8)):
        cv = {"n": n, "positives": 4, "chosen": "platt", "rules": {"f1": 0.6, "log_loss": 0.6},
              "platt": {"f1": f1, "log_loss": 1 - f1}}  # fmt: skip
        model = InspectorModel(version, {"cv": TaskModel("platt", a=1.0, b=0.0)},
                               info={"cv": {"cv": cv}})  # fmt: skip
        store.set_setting(SETTING, model.to_json(), actor="calibrate")


def test_dashboard_shows_estimates_biased_caption_and_learning_curve(
    browser, tmp_path_factory, tmp_path
):  # noqa: F811
    ctx = context(tmp_path_factory, tmp_path)
    _campaign(ctx)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(srv.url, wait_until="load")
        page.click("button[role='tab']:has-text('Dashboard')", timeout=120_000)
        page.wait_for_function(
            "() => /\\(n=\\d+\\)/.test((document.querySelector('#dash-audit-table')?.innerText ?? ''))",
            timeout=60_000,
        )
        table = page.locator("#dash-audit-table").inner_text()
        assert "precision [95%]" in table and "audited / drawn" in table
        assert "[" in table and "]" in table  # each figure with its interval
        assert "audited item(s) of" in page.locator("#dash-audit-note").inner_text()
        # the biased diagram says so, and its three-line title stays above the plot area
        page.wait_for_selector(f"#dash-reliability {HEAD}", timeout=30_000)
        title = page.locator(f"#dash-reliability {HEAD}").text_content()
        assert "BIASED" in title and "unsure" in title
        b = page.evaluate(BOXES, "#dash-reliability")
        assert b["title"][3] <= b["plot"][1] + 1, b  # title bottom above the plot's top
        assert b["svg"][0] <= b["title"][0] and b["title"][2] <= b["svg"][2], b  # not cut off
        # the unbiased one beside it, and the learning curve: one line per task
        page.wait_for_selector(f"#dash-audit-reliability {HEAD}", timeout=30_000)
        assert "unbiased" in page.locator(f"#dash-audit-reliability {HEAD}").text_content()
        page.wait_for_selector(f"#dash-learning-curve {HEAD}", timeout=30_000)
        assert "Learning curve" in page.locator(f"#dash-learning-curve {HEAD}").text_content()
        assert page.locator("#dash-learning-curve .legendtext").all_text_contents() == ["cv"]
        # the admin's click fits the next version in the background; Refresh shows its outcome
        from annotate.learning import schedule

        page.click("#btn-calibrate", timeout=30_000)
        page.wait_for_function(
            "() => /in the background/.test(document.querySelector("
            "'#dash-calibrate-message').innerText)", timeout=60_000)  # fmt: skip
        schedule.learner(ctx.store).join(240)
        outcome = schedule.status(ctx.store)
        assert outcome and outcome.get("said"), outcome
        page.click("button:has-text('Refresh')")
        page.wait_for_function(
            "() => /Last fit \\(/.test(document.querySelector("
            "'#dash-calibrate-message').innerText)", timeout=60_000)  # fmt: skip
        shown = page.locator("#dash-calibrate-message").inner_text()
        assert outcome["said"].split(";")[0] in shown, (shown, outcome)
    finally:
        srv.close()
        ctx.store.close()
