"""The Dashboard's honest figures, through its page handlers on a real store: the random
audit's weighted estimates with their intervals and counts, the unbiased reliability diagram
beside the biased one (which says it is), the learning curve over inspector versions, what a
fitted version would flip, and kappa "n/a" where it is undefined."""

from __future__ import annotations

import html

import plotly.graph_objects as go
import pytest

from annotate.audit.sample import draw_for_store
from annotate.review import decide
from app import context as app_context
from app.dashboard_figures import heading
from app.main import make_context
from app.pages import dashboard as dashboard_page
from tests.store_factory import refs, seeded, traj


@pytest.fixture
def ctx(tmp_path):
    c = make_context("sqlite://", data_roots=[str(tmp_path / "data")],
                     export_dir=str(tmp_path / "exports"))  # fmt: skip
    yield c
    c.store.close()


def local(ctx):
    return app_context.expert_for(ctx, None)


def vetted(store, ps: list[float], task: str = "wd") -> None:
    """Candidates with the agent's P(YES) `ps`, their trajectories stored in one go."""
    store.add_candidates(refs(len(ps), task, "w"))
    store.record_trajectories([traj(f"w{i}", p, task) for i, p in enumerate(ps)])


def wd_campaign(store) -> dict[int, float]:
    """20 confident YES, 40 confident NO and 5 unsure wd verdicts, the confident ones
    auto-accepted, a 25% audit drawn (15 items: 8 from the YES list, 7 from the NO list):
    returns the drawn ids and inclusion probabilities."""
    vetted(store, [0.995] * 20 + [0.003] * 40 + [0.6] * 5)
    assert store.auto_accept(0.9) == 60
    store.set_setting("audit_rate", 0.25)
    return {d.id: d.inclusion for d in draw_for_store(store, seed=0)}


def test_nothing_audited_is_said_plainly(ctx):
    ex = local(ctx)
    vetted(ctx.store, [0.995] * 20 + [0.003] * 20)
    ctx.store.auto_accept(0.9)
    av = dashboard_page.audit_estimates(ctx, ex, "all", reps=50)
    assert "Nothing audited yet" in av.note and "no audit sample has been drawn" in av.note
    (row,) = av.estimates["data"]
    assert row[4] == "0 / 0" and row[5] == "not estimated (no audit sample drawn)"
    assert row[6] == "not estimated (no audit sample drawn)"  # not 1.000 [1.000, 1.000]
    assert av.bands["data"] == []
    # no estimate, so no point: the figure says why instead
    assert av.precision["data"] == [] and "no audit sample drawn" in str(av.precision["layout"])
    # one reason for several tasks is said once, in lines short enough for a half panel
    text = av.precision["layout"]["annotations"][0]["text"]
    assert all(len(line) <= 60 for line in text.split("<br>"))
    assert av.reliability["data"] == []
    ctx.store.set_setting("audit_rate", 0.1)
    drawn = draw_for_store(ctx.store, seed=0)
    av = dashboard_page.audit_estimates(ctx, ex, "all", reps=50)
    assert f"{len(drawn)} item(s) drawn" in av.note and "none reviewed so far" in av.note
    assert av.estimates["data"][0][4] == f"0 / {len(drawn)}"


def test_estimates_are_weighted_with_intervals_and_counts(ctx):
    ex = local(ctx)
    store = ctx.store
    drawn = wd_campaign(store)
    rows = {r.id: r for r in store.audit_population("wd")}
    yes = sorted(i for i in drawn if rows[i].confidence > 0.5)
    no = sorted(i for i in drawn if rows[i].confidence < 0.5)
    assert (len(yes), len(no)) == (8, 7)
    assert {drawn[i] for i in yes} == {0.4} and {drawn[i] for i in no} == {7 / 40}
    store.ensure_expert("ada")
    decide(store, "ada", yes[0], "reject")  # a confident mistake among the YES
    for cid in yes[1:] + no:
        decide(store, "ada", cid, "accept")
    av = dashboard_page.audit_estimates(ctx, ex, "wd", reps=200)
    assert "**15** audited item(s) of **15** drawn" in av.note
    (row,) = av.estimates["data"]
    # YES list: 7 decided YES by the expert + 12 auto-accepted YES nobody reviewed, of which
    # the audit (7 right of 8) says 10.5 are right: precision 17.5 / 19
    want = 17.5 / 19
    assert row[:5] == ["wd", 19, 7, 12, "15 / 15"]
    prec = row[5]
    assert prec.startswith(f"{want:.3f} [") and prec.endswith("(n=8) exact")
    lo, hi = (float(v) for v in prec.split("[")[1].split("]")[0].split(","))
    assert lo < want < hi
    # no audited NO was wrong; each figure says which estimator it comes from
    assert row[6].startswith("1.000") and row[6].endswith("(n=15) model-assisted")
    assert row[7].endswith("(n=15) model-assisted")  # ECE with its interval and count
    bands = {b: (n, s) for _, b, n, s in av.bands["data"]}
    assert bands["1:YES 0.99-1.00"][0] == 8 and bands["1:YES 0.99-1.00"][1].startswith("0.125 [")
    assert bands["1:NO 0.99-1.00"][0] == 7 and bands["1:NO 0.99-1.00"][1].startswith("0.000 [")
    # the figure: precision and completeness side by side, the same values with asymmetric
    # error bars to the intervals' ends, each named with its estimator
    go.Figure(av.precision)
    pt, comp = av.precision["data"]
    assert pt["name"] == "precision (exact)" and comp["name"] == "completeness (model-assisted)"
    assert pt["y"] == [pytest.approx(want)]
    assert pt["error_y"]["arrayminus"] == [pytest.approx(want - lo, abs=1e-3)]
    assert pt["error_y"]["array"] == [pytest.approx(hi - want, abs=1e-3)]
    assert pt["text"] == ["wd precision, n=8 audited, exact"]
    c_lo = float(row[6].split("[")[1].split(",")[0])
    assert comp["y"] == [pytest.approx(1.0)] and comp["error_y"]["arrayminus"] == [
        pytest.approx(1.0 - c_lo, abs=1e-3)
    ]
    # the unbiased reliability: the audited YES verdicts at P 0.995 are right 7 times in 8
    go.Figure(av.reliability)
    audit = av.reliability["data"][1]
    assert audit["x"] == [pytest.approx(0.003), pytest.approx(0.995)]
    assert audit["y"] == [0.0, pytest.approx(0.875)]
    assert audit["text"] == ["n=7 audited", "n=8 audited"]
    assert "unbiased" in heading(av.reliability)


def test_an_expert_cannot_learn_which_items_are_audited(ctx):
    """An expert who jumps to an item, decides it and takes it back must not read, in any
    audit count, whether that item is in the sample: the audit's figures are for admins."""
    store = ctx.store
    drawn = wd_campaign(store)
    store.ensure_expert("eve")
    eve = app_context.Viewer("eve", "expert")
    before = dashboard_page.audit_estimates(ctx, eve, "all")
    cid = sorted(drawn)[0]
    decide(store, "eve", cid, "accept")
    after = dashboard_page.audit_estimates(ctx, eve, "all")
    for av in (before, after):
        assert av.estimates["data"] == [] and av.bands["data"] == []
        assert "admins" in av.note and str(len(drawn)) not in av.note
        assert av.precision["data"] == [] and av.reliability["data"] == []
    assert before == after
    # an admin sees the counts move
    admin = app_context.Viewer("root", "admin")
    assert dashboard_page.audit_estimates(ctx, admin, "all").estimates["data"][0][4] == (
        f"1 / {len(drawn)}"
    )


def test_reliability_on_reviewed_items_says_it_is_biased_above_the_plot(ctx):
    ex = local(ctx)
    store = ctx.store
    ids = seeded(store, [0.2, 0.4, 0.6, 0.8], task="cv")
    store.ensure_expert("ada")
    for cid in ids:
        decide(store, "ada", cid, "accept")
    dv = dashboard_page.dashboard(ctx, ex, "all", 0.9)
    go.Figure(dv.reliability)
    lay = dv.reliability["layout"]
    text = heading(dv.reliability)
    assert "BIASED" in text and "unsure" in text and "n=4" in text
    # anchored at the plot area's top and growing upwards into a margin with room for
    # every line: it cannot overlap the plot (tests/test_browser_dashboard.py measures it)
    (head,) = [a for a in lay["annotations"] if a.get("name") == "title"]
    lines = text.count("<br>") + 1
    assert (head["yref"], head["y"], head["yanchor"]) == ("paper", 1, "bottom")
    assert lay["margin"]["t"] >= lines * head["font"]["size"] * 1.2


def test_kappa_of_one_item_rated_by_two_is_na(ctx):
    ex = local(ctx)
    store = ctx.store
    (cid,) = seeded(store, [0.7], task="cv")
    for name, action in (("ann", "accept"), ("bob", "reject")):
        store.ensure_expert(name)
        decide(store, name, cid, action)
    dv = dashboard_page.dashboard(ctx, ex, "all", 0.9)
    assert dv.kappa["data"] == [["cv", 1, 2, "n/a", "n/a"]]


@pytest.fixture
def demo(tmp_path_factory, tmp_path):
    from tests.app_support import context

    c = context(tmp_path_factory, tmp_path)
    yield c
    c.store.close()


def test_learning_curve_and_what_a_fitted_version_would_flip(demo):
    from agent.policies.rules.learned import InspectorModel, TaskModel
    from annotate.vetting.into_store import INSPECTOR_SETTING as SETTING
    from db.store import Filters

    ctx = demo
    ex = local(ctx)
    empty = dashboard_page.learning_curve(ctx, ex)
    assert empty["data"] == [] and "No inspector version" in str(empty["layout"])
    assert dashboard_page.proposal_note(ctx, ex) == ""
    # two fitted versions, as calibrate saves them (the store setting, with its CV per task)
    cv = {"n": 0, "positives": 5, "positive_objects": 3, "status": "blended",
          "rules": {"f1": 0.6, "log_loss": 0.7}}  # fmt: skip
    for version, n, f1, w in ((1, 60, 0.7, 0.3), (2, 120, 0.8, 0.6)):
        gain = {"mean": f1 - 0.6, "low": f1 - 0.7, "high": f1 - 0.5}
        info = {"cv": {"cv": {**cv, "n": n, "blend": {"f1": f1, "log_loss": 0.5}, "gain": gain}}}
        # version 2 pushes every cv verdict to NO: it flips each pending cv YES
        tm = TaskModel("platt", a=1.0, b=-400.0 * (version - 1), weight=w)
        ctx.store.set_setting(SETTING, InspectorModel(version, {"cv": tm}, info=info).to_json(),
                              actor="calibrate")  # fmt: skip
    fig = dashboard_page.learning_curve(ctx, ex, "all")
    go.Figure(fig)
    change, weight = fig["data"]
    assert (change["name"], change["x"]) == ("cv", [60, 120])
    assert change["y"] == pytest.approx([0.1, 0.2])
    assert change["error_y"]["array"] == pytest.approx([0.1, 0.1])  # the 95% interval
    assert (weight["yaxis"], weight["y"]) == ("y2", [0.3, 0.6])
    assert change["text"][0] == "inspector-v1: platt, 5 YES labels from 3 objects"
    assert dashboard_page.learning_curve(ctx, ex, "wd")["data"] == []

    pending = [c for c in ctx.store.list_candidates(Filters(task="cv"), limit=1000)
               if c.label is None and c.confidence is not None]  # fmt: skip
    yes = sum(c.confidence > 0.5 for c in pending)
    assert yes > 0
    note = dashboard_page.proposal_note(ctx, ex)
    assert note.startswith(f"**inspector-v2** would flip **{yes}** of the ")
    assert f"(cv {yes})" in note and "without rerunning the agent" in note
    assert "cv: the rules' evidence weighs" in html.unescape(note)
    assert dashboard_page.proposal_note(ctx, None) == ""


def test_the_tab_wires_the_audit_and_the_proposal(ctx):
    """The page's events: opening the tab and Refresh fill the audit's outputs and the learning curve, and each
    calibration message brings the proposal of the version it fitted."""
    import gradio as gr

    from app.ui import dashboard as dashboard_ui

    with gr.Blocks() as demo:
        dashboard_ui.tab(ctx)(demo)
    cfg = demo.get_config_file()
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in cfg["components"]}
    wired = [(elem.get(t, "page"), ev, {elem[o] for o in d["outputs"]})
             for d in cfg["dependencies"] for t, ev in d["targets"]]  # fmt: skip
    audit = {"dash-audit-note", "dash-audit-table", "dash-audit-bands", "dash-audit-precision",
             "dash-audit-reliability", "dash-learning-curve"}  # fmt: skip
    # filled when the tab is opened, not at page load (the vet page's first panel comes first)
    assert any(ev == "select" and outs == audit for _, ev, outs in wired)
    assert not any(ev == "load" for _, ev, _ in wired)
    assert any(ev == "click" and outs == audit for _, ev, outs in wired)  # Refresh
    assert ("dash-calibrate-message", "change", {"dash-proposal"}) in wired
