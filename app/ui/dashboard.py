"""The dashboard tab: progress, agreement and calibration charts, per-task tables, the
random audit's estimates beside the biased figures over reviewed items, the inspector's
learning curve and versions with its calibrate button (admins)."""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from agent.tasks import TASKS
from app import context
from app.pages import dashboard as dashboard_page
from app.ui.plotdata import plot


def tab(ctx: context.Context) -> Callable[[gr.Blocks], None]:
    """The tab's components; returns the function that wires their events, which
    `app.ui.build` calls once every tab is laid out (so the events keep their order)."""
    tasks = ["all", *TASKS]
    with gr.Tab("Dashboard", id="dashboard") as d_tab:
        with gr.Row():
            d_task = gr.Dropdown(tasks, value="all", label="task")
            d_prec = gr.Slider(0.5, 1.0, value=0.95, step=0.01, label="target precision")
            d_go = gr.Button("Refresh", variant="primary")
        d_summary = gr.Markdown(elem_id="dash-summary")
        with gr.Row():
            d_progress = gr.Plot(show_label=False, elem_id="dash-progress")
            d_rates = gr.Plot(show_label=False, elem_id="dash-rates")
        # -- honest figures: the random audit's estimates, the biased diagram beside them
        gr.Markdown("### Honest figures: the random audit")
        d_audit_note = gr.Markdown(elem_id="dash-audit-note")
        d_audit_table = gr.Dataframe(
            value={"headers": dashboard_page.AUDIT_HEADERS, "data": []},
            label="per task: estimated from the random audit (95% intervals, n audited, "
            "estimator)",
            interactive=False, wrap=True, elem_id="dash-audit-table",
            # the counts are short, the estimates long: even widths broke "listed" in two
            column_widths=["8%", "8%", "8%", "9%", "9%", "22%", "22%", "14%"],
        )  # fmt: skip
        with gr.Row():
            d_audit_prec = gr.Plot(show_label=False, elem_id="dash-audit-precision")
            d_conf = gr.Plot(show_label=False, elem_id="dash-confusion")
        with gr.Row():
            d_audit_rel = gr.Plot(show_label=False, elem_id="dash-audit-reliability")
            d_rel = gr.Plot(show_label=False, elem_id="dash-reliability")
        d_audit_bands = gr.Dataframe(
            value={"headers": dashboard_page.BAND_HEADERS, "data": []},
            label="the agent's error rate per confidence band, from the audit",
            interactive=False, elem_id="dash-audit-bands",
        )  # fmt: skip
        # -- end honest figures
        with gr.Row():
            d_speed = gr.Plot(show_label=False, elem_id="dash-speed")
            d_gold = gr.Plot(show_label=False, elem_id="dash-gold")
        # Real headers from the first paint; the page load fills the rows.
        d_table = gr.Dataframe(
            value={"headers": dashboard_page.HEADERS["per_task"], "data": []},
            label="per task: agent vs experts", interactive=False, elem_id="dash-table",
        )  # fmt: skip
        d_kappa = gr.Dataframe(
            value={"headers": dashboard_page.HEADERS["kappa"], "data": []},
            label="agreement between experts", interactive=False, elem_id="dash-kappa",
        )  # fmt: skip
        d_curve = gr.Plot(show_label=False, elem_id="dash-learning-curve")
        # -- the inspector: agreement on gold by version; calibrate (admins)
        d_versions = gr.Dataframe(
            value={"headers": dashboard_page.VERSION_HEADERS, "data": []},
            label="gold items: agreement by inspector version (admins)", interactive=False,
            elem_id="dash-versions",
        )  # fmt: skip
        d_cal_go = gr.Button("Calibrate the inspector from the experts' labels",
                             visible=False, elem_id="btn-calibrate")  # fmt: skip
        d_cal_msg = gr.Markdown(elem_id="dash-calibrate-message")
        d_cal_table = gr.Dataframe(
            label="your campaign per task: labels, objects, the weight now and what it changed "
            "(F1 on objects held out of the fit)", interactive=False,
            visible=False, elem_id="dash-calibrate-table",
        )  # fmt: skip
        d_proposal = gr.Markdown(elem_id="dash-proposal")
        # -- end inspector

    def wire(demo: gr.Blocks) -> None:
        # -- dashboard
        def on_dash(task, precision, request: gr.Request):
            ex = context.expert_for(ctx, request)
            dv = dashboard_page.dashboard(ctx, ex, task, precision)
            return [dv.summary, plot(dv.progress), plot(dv.rates), plot(dv.confusion),
                    plot(dv.reliability), plot(dv.speed), plot(dv.gold), dv.per_task,
                    dv.kappa]  # fmt: skip

        d_outs = [d_summary, d_progress, d_rates, d_conf, d_rel, d_speed, d_gold, d_table, d_kappa]
        d_go.click(on_dash, [d_task, d_prec], d_outs, api_name="dashboard")
        # Filled whenever the tab is opened (not at page load: the vet page's first panel
        # would wait behind these queries), with the decisions made since.
        d_tab.select(on_dash, [d_task, d_prec], d_outs, api_name=False, show_progress="hidden")

        # -- dashboard: the audit's estimates and the learning curve
        def on_audit(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            av = dashboard_page.audit_estimates(ctx, ex, task)
            return [av.note, av.estimates, av.bands, plot(av.precision), plot(av.reliability),
                    plot(dashboard_page.learning_curve(ctx, ex, task))]  # fmt: skip

        a_outs = [d_audit_note, d_audit_table, d_audit_bands, d_audit_prec, d_audit_rel, d_curve]
        d_go.click(on_audit, d_task, a_outs, api_name="dashboard_audit")
        d_tab.select(on_audit, d_task, a_outs, api_name=False, show_progress="hidden")

        def on_proposal(request: gr.Request):
            # after each calibration: what the version just fitted would flip, in words
            return dashboard_page.proposal_note(ctx, context.expert_for(ctx, request))

        d_cal_msg.change(on_proposal, None, d_proposal, api_name=False)

        # -- dashboard: the inspector's versions and calibration
        def on_versions(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return dashboard_page.inspector_versions(ctx, ex, task)

        d_go.click(on_versions, d_task, d_versions, api_name="dashboard_versions")

        def on_inspector_tab(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return (gr.Button(visible=dashboard_page.can_calibrate(ex)),
                    dashboard_page.inspector_versions(ctx, ex, task))  # fmt: skip

        d_tab.select(on_inspector_tab, d_task, [d_cal_go, d_versions], api_name=False,
                     show_progress="hidden")  # fmt: skip

        def on_calibrate(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            msg, table = dashboard_page.calibrate_now(ctx, ex)
            return (msg, gr.Dataframe(value=table, visible=bool(table["data"])),
                    dashboard_page.inspector_versions(ctx, ex, task))  # fmt: skip

        d_cal_go.click(on_calibrate, d_task, [d_cal_msg, d_cal_table, d_versions],
                       api_name="calibrate")  # fmt: skip

        # -- dashboard: the learning schedule's last fit (adopted or not, before/after)
        def on_last_fit(request: gr.Request):
            msg, table = dashboard_page.last_fit(ctx, context.expert_for(ctx, request))
            return msg, gr.Dataframe(value=table, visible=bool(table["data"]))

        for when in (d_go.click, d_tab.select):
            when(on_last_fit, None, [d_cal_msg, d_cal_table], api_name=False,
                 show_progress="hidden")  # fmt: skip
        # -- end dashboard inspector

    return wire
