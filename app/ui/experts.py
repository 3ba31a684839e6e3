"""The experts tab: the team's accounts, and adding candidates (uploads or a path under
a data root)."""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from agent.tasks import TASKS
from app import context
from app.pages import experts as experts_page
from app.pages import upload as upload_page


def tab(ctx: context.Context) -> Callable[[gr.Blocks], None]:
    """The tab's components; returns the function that wires their events, which
    `app.ui.build` calls once every tab is laid out (so the events keep their order)."""
    with gr.Tab("Experts", id="experts") as x_tab:
        x_note = gr.Markdown(elem_id="experts-note")
        x_list = gr.Dataframe(
            value={"headers": experts_page.HEADERS, "data": []},
            label="experts",
            interactive=False,
            elem_id="experts-list",
            visible=False,  # shown to admins once the viewer is known (tab opened)
        )
        with gr.Row(elem_id="experts-add", visible=False) as x_controls:
            x_name = gr.Textbox(label="name")
            x_role = gr.Radio(["expert", "admin"], value="expert", label="role")
            x_pw = gr.Textbox(label="password", type="password")
            x_add = gr.Button("Add or update expert")
        x_msg = gr.Markdown()
        with gr.Group(visible=False, elem_id="team-settings") as t_box:
            t_table = gr.Dataframe(label="team settings", interactive=False,
                                   elem_id="team-settings-table")  # fmt: skip
            with gr.Row():
                t_name = gr.Dropdown(experts_page.SETTING_NAMES, value="audit_rate",
                                     label="setting", elem_id="team-setting-name")  # fmt: skip
                t_value = gr.Textbox(label="new value", elem_id="team-setting-value")
                t_set = gr.Button("Set", elem_id="btn-team-setting")
            t_msg = gr.Markdown(elem_id="team-setting-message")
        gr.Markdown("### Add candidates")
        with gr.Row():
            u_files = gr.File(label="spectrum files", file_count="multiple",
                              file_types=[".fits", ".fit", ".gz", ".csv", ".txt",
                                          ".ecsv", ".parquet"])  # fmt: skip
            with gr.Column():
                u_task = gr.Dropdown(list(TASKS), value=next(iter(TASKS)), label="task")
                u_path = gr.Textbox(label="or a path under a data root (file, folder, glob)")
                u_go = gr.Button("Ingest and run the agent", variant="primary")
        u_msg = gr.Markdown()

    def wire(demo: gr.Blocks) -> None:
        # -- experts and uploads
        def on_add_expert(name, role, pw, request: gr.Request):
            ex = context.expert_for(ctx, request)
            msg = experts_page.add_expert(ctx, ex, name, role, pw)
            return msg, experts_page.expert_table(ctx, ex), ""

        x_add.click(on_add_expert, [x_name, x_role, x_pw], [x_msg, x_list, x_pw],
                    api_name="add_expert")  # fmt: skip

        def on_ingest(files, task, path, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return upload_page.ingest_upload(ctx, ex, files or [], task, path)

        u_go.click(on_ingest, [u_files, u_task, u_path], u_msg, api_name="ingest")

        def on_setting(name, value, request: gr.Request):
            return experts_page.change_setting(ctx, context.expert_for(ctx, request), name, value)

        t_set.click(on_setting, [t_name, t_value], [t_msg, t_table], api_name="team_setting")

        def on_experts_tab(request: gr.Request):
            # the accounts, their controls and the team's settings are for admins: others
            # see the note only
            ex = context.expert_for(ctx, request)
            admin = ex is not None and ex.admin
            return (experts_page.experts_note(ex),
                    gr.update(value=experts_page.expert_table(ctx, ex), visible=admin),
                    gr.update(visible=admin), gr.update(visible=admin),
                    experts_page.settings_table(ctx, ex))  # fmt: skip

        x_outs = [x_note, x_list, x_controls, t_box, t_table]
        # each time it is opened (not at page load: the vet page comes first), as it is now
        x_tab.select(on_experts_tab, None, x_outs, api_name=False, show_progress="hidden")

    return wire
