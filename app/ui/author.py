"""The author tab: write a trajectory step by step over the whole spectrum, and audit
the trajectories others submitted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from app import context, views
from app.pages import author as author_page
from app.ui.plotdata import plot


def tab(ctx: context.Context, state: gr.State) -> Callable[[gr.Blocks], None]:
    """The tab's components; returns the function that wires their events, which
    `app.ui.build` calls once every tab is laid out (so the events keep their order)."""
    with gr.Tab("Author", id="author") as author_tab:
        astate = gr.State(None)  # an annotate.authoring.Draft once loaded
        with gr.Row(equal_height=True):
            a_cid = gr.Textbox(label="candidate id", scale=2, elem_id="author-cid")
            a_start = gr.Radio(["blank", "agent draft"], value="blank", label="start from",
                               scale=2)  # fmt: skip
            a_load = gr.Button("Load", scale=1, elem_id="btn-author-load")
            a_current = gr.Button("Use the candidate on the vet page", scale=1)
        # -- vet desk: an id that is a candidate of several tasks asks which
        a_task = gr.Radio([], label="this id is a candidate of several tasks: open",
                          visible=False, elem_id="author-task")  # fmt: skip
        a_head = gr.HTML()
        gr.Markdown("Drag across the plot to choose a window, or type its range.")
        a_global = gr.Plot(elem_id="author-global", show_label=False)
        with gr.Row(equal_height=True):
            a_lo = gr.Number(label="from (Å, rest)", elem_id="author-lo")
            a_hi = gr.Number(label="to (Å, rest)", elem_id="author-hi")
            a_lab = gr.Textbox(label="label (optional)", elem_id="author-label")
            a_zoom = gr.Button("Zoom", elem_id="btn-author-zoom")
        with gr.Row():
            a_img = gr.Image(label="what the model will see", type="pil", height=320,
                             elem_id="author-image")  # fmt: skip
            a_win = gr.Plot(show_label=False, elem_id="author-window")
        a_thought = gr.Textbox(label="thought for this step", lines=3, elem_id="author-thought")
        with gr.Row():
            a_add = gr.Button("Add step", variant="primary", elem_id="btn-author-add")
            a_stepno = gr.Number(label="step #", precision=0, value=1, minimum=1)
            a_edit = gr.Button("Load step into form")
            a_update = gr.Button("Replace step")
            a_up = gr.Button("Move up")
            a_down = gr.Button("Move down")
            a_del = gr.Button("Delete step")
        a_steps = gr.Dataframe(headers=["#", "window (Å)", "label", "thought"],
                               interactive=False, wrap=True, elem_id="author-steps")  # fmt: skip
        with gr.Row():
            a_verdict = gr.Radio(["YES", "NO"], label="verdict", elem_id="author-verdict")
            a_expl = gr.Textbox(label="explanation", lines=2, scale=3,
                                elem_id="author-explanation")  # fmt: skip
        with gr.Row():
            a_save = gr.Button("Save draft", elem_id="btn-author-save")
            a_submit = gr.Button("Submit for audit", variant="primary",
                                 elem_id="btn-author-submit")  # fmt: skip
        a_msg = gr.Markdown(elem_id="author-message")
        gr.Markdown("### Your drafts and sent-back trajectories")
        a_mine = gr.Markdown(elem_id="author-mine")
        gr.Markdown("### Audit: trajectories written by others")
        with gr.Row(equal_height=True):
            au_pick = gr.Dropdown([], label="submitted trajectory", scale=3,
                                  elem_id="audit-pick")  # fmt: skip
            au_refresh = gr.Button("Refresh", scale=1)
        au_note = gr.Markdown(elem_id="audit-note")  # -- author: audit view
        au_view = gr.HTML(elem_id="audit-view")
        au_comment = gr.Textbox(label="audit comment", lines=2)
        with gr.Row():
            au_ok = gr.Button("Approve", variant="primary", elem_id="btn-audit-approve")
            au_back = gr.Button("Send back", variant="stop", elem_id="btn-audit-back")
        au_msg = gr.Markdown()

    def wire(demo: gr.Blocks) -> None:
        # -- author
        a_outs = [astate, a_head, a_global, a_steps, a_verdict, a_expl, a_msg]

        def a_show(d: dict, view: views.DraftView) -> list[Any]:
            return [d, view.header_html, plot(view.global_fig), view.rows, view.verdict,
                    view.explanation, view.message]  # fmt: skip

        def on_a_load(d, cid, start, request: gr.Request, task=None):
            ex = context.expert_for(ctx, request)
            d, view = author_page.author_load(ctx, ex, d, cid, start, task=task)
            pick = gr.update(choices=view.tasks, value=None, visible=bool(view.tasks))
            return [*a_show(d, view), pick]

        a_load.click(on_a_load, [astate, a_cid, a_start], [*a_outs, a_task],
                     api_name="author_load")  # fmt: skip

        def on_a_task(d, cid, start, pick, request: gr.Request):  # -- vet desk
            return on_a_load(d, cid, start, request, task=pick)

        a_task.input(on_a_task, [astate, a_cid, a_start, a_task], [*a_outs, a_task],
                     api_name="author_load_task")  # fmt: skip
        a_current.click(lambda st: views.current_id(st), state, a_cid, api_name=False)

        def on_zoom(d, lo, hi, label):
            img, fig, msg = author_page.author_zoom(ctx, d, lo, hi, label)
            return img, plot(fig), msg

        a_zoom.click(on_zoom, [astate, a_lo, a_hi, a_lab], [a_img, a_win, a_msg],
                     api_name="author_zoom")  # fmt: skip

        def step_op(op: str):
            def fn(d, lo, hi, label, thought, n, verdict, expl, request: gr.Request):
                ex = context.expert_for(ctx, request)
                d, view, form = author_page.author_step(
                    ctx, ex, d, op, lo=lo, hi=hi, label=label, thought=thought, index=n,
                    verdict=verdict, explanation=expl,
                )  # fmt: skip
                return [*a_show(d, view), *form]

            return fn

        step_ins = [astate, a_lo, a_hi, a_lab, a_thought, a_stepno, a_verdict, a_expl]
        form_outs = [a_lo, a_hi, a_lab, a_thought]
        for btn, op in [(a_add, "add"), (a_update, "replace"), (a_up, "up"), (a_down, "down"),
                        (a_del, "delete"), (a_edit, "edit")]:  # fmt: skip
            btn.click(step_op(op), step_ins, a_outs + form_outs, api_name=f"author_{op}")

        def finish(op: str):
            def fn(d, verdict, expl, request: gr.Request):
                ex = context.expert_for(ctx, request)
                d, view = author_page.author_finish(ctx, ex, d, op, verdict, expl)
                return a_show(d, view)

            return fn

        def on_mine(request: gr.Request):
            return author_page.my_drafts(ctx, context.expert_for(ctx, request))

        # the author's list follows what was just saved or submitted
        a_save.click(finish("save"), [astate, a_verdict, a_expl], a_outs,
                     api_name="author_save").then(on_mine, None, a_mine, api_name=False,
                                                  show_progress="hidden")  # fmt: skip
        a_submit.click(finish("submit"), [astate, a_verdict, a_expl], a_outs,
                       api_name="author_submit").then(on_mine, None, a_mine, api_name=False,
                                                      show_progress="hidden")  # fmt: skip

        # -- author: audit view. The list fills when the tab opens, with a note that says
        # why it is empty (single-user mode has one expert, who cannot approve their own).
        def audit_list(ex: context.Viewer | None) -> list[Any]:
            choices = author_page.audit_choices(ctx, ex)
            note = author_page.audit_note(ctx, ex, choices)
            return [gr.Dropdown(choices=choices, value=None), note]

        def on_audit_list(request: gr.Request):
            return audit_list(context.expert_for(ctx, request))

        au_refresh.click(on_audit_list, None, [au_pick, au_note], api_name="audit_list")
        author_tab.select(on_audit_list, None, [au_pick, au_note], api_name=False)
        author_tab.select(on_mine, None, a_mine, api_name=False, show_progress="hidden")
        # -- end author: audit view

        def on_audit_view(pick, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return author_page.audit_view(ctx, ex, pick)

        au_pick.change(on_audit_view, au_pick, au_view, api_name="audit_view")

        def audit(op: str):
            def fn(pick, text, request: gr.Request):
                ex = context.expert_for(ctx, request)
                msg = author_page.audit_decide(ctx, ex, pick, op, text)
                return [msg, *audit_list(ex)]

            return fn

        au_ok.click(audit("approve"), [au_pick, au_comment], [au_msg, au_pick, au_note],
                    api_name="audit_approve")  # fmt: skip
        au_back.click(audit("send_back"), [au_pick, au_comment], [au_msg, au_pick, au_note],
                      api_name="audit_send_back")  # fmt: skip

    return wire
