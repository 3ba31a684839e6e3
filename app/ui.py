"""The Gradio page: vet, author, dashboard, export and experts tabs.

Layout and wiring only; every callback is a one-line call into a page module (`app.pages`),
which does the work on plain values. Switching candidates is one round trip that redraws two plots:
the whole spectrum, and the step panels as one figure of stacked subplots, with the
thoughts beside it in blocks of the panels' height. Vet events run without progress
overlays and send only what changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

from agent.tasks import TASKS
from app import context, views
from app.pages import author as author_page
from app.pages import dashboard as dashboard_page
from app.pages import desk
from app.pages import experts as experts_page
from app.pages import export as export_page
from app.pages import upload as upload_page
from app.pages import vet as vet_page
from app.plots import to_json

KEYS_JS = (Path(__file__).parent / "keys.js").read_text()

CSS = """
#loupe-cheatsheet {display:none; position:fixed; top:12%; left:50%; transform:translateX(-50%);
  z-index:1000; background:#fff; border:1px solid #999; border-radius:8px; padding:16px 24px;
  box-shadow:0 8px 30px rgba(0,0,0,.25); font-size:15px; min-width:320px}
#loupe-cheatsheet kbd {display:inline-block; min-width:1.6em; text-align:center; padding:1px 5px;
  border:1px solid #aaa; border-radius:4px; background:#f6f6f6; font-family:monospace}
.loupe-head {display:flex; flex-wrap:wrap; gap:18px; align-items:center; font-size:14px}
.loupe-head .id {font-size:18px; font-weight:700}
.loupe-conf {display:inline-block; width:220px; height:16px; border-radius:8px; position:relative;
  background:linear-gradient(90deg,#c1121f 0%,#f4a261 50%,#2a9d8f 100%)}
.loupe-conf .tick {position:absolute; top:-4px; width:4px; height:24px; background:#111;
  border-radius:2px}
.loupe-verdict {font-weight:700; padding:2px 8px; border-radius:4px; color:#fff}
.loupe-verdict.YES {background:#2a9d8f} .loupe-verdict.NO {background:#c1121f}
.loupe-verdict.none {background:#777}
.loupe-thought {font-size:14px; line-height:1.45; max-height:260px; overflow:auto}
.loupe-note {font-size:14px; line-height:1.45; overflow:auto; box-sizing:border-box;
  padding:4px 10px 0 4px; border-top:1px solid #e4e7ee}
.loupe-note:first-child {border-top:none}
.loupe-note p {margin:4px 0}
.loupe-note details {color:#555; font-size:13px}
.loupe-note summary {cursor:pointer}
.loupe-model-image {display:block; max-width:100%; max-height:300px; margin-top:6px;
  border:1px solid #ddd}
.loupe-answer {border-left:4px solid #1f3b73; padding:6px 12px; background:#f5f7fb}
#vet-actions button {min-width:90px}
/* -- author: the audit view (app.pages.author.audit_view) -- */
.loupe-audit-step {display:grid; grid-template-columns:minmax(0,2fr) minmax(0,3fr); gap:14px;
  align-items:start; padding:8px 0; border-top:1px solid #e4e7ee; font-size:14px}
.loupe-audit-image {display:block; max-width:100%; border:1px solid #ddd}
/* -- end author: audit view -- */
/* -- vet page: desk (grade, undo, reason, correct panel, stale panels) -- */
#correct-panel, #reject-reason-row {display:none}
#correct-warning {color:#9a3412}
#correct-warning:empty {display:none}
.loupe-stale {opacity:.25; transition:opacity 60ms}
.loupe-grade b {padding:1px 6px; border-radius:4px; background:#1f3b73; color:#fff}
"""

CHEATSHEET = """
<div id="loupe-cheatsheet" role="dialog" aria-label="Keyboard shortcuts">
<h3 style="margin-top:0">Keyboard</h3>
<table>
<tr><td><kbd>a</kbd></td><td>accept the agent's verdict</td></tr>
<tr><td><kbd>r</kbd></td><td>reject it (the label flips): type what the model should have
concluded, <kbd>Enter</kbd> saves, <kbd>Esc</kbd> saves without a reason</td></tr>
<tr><td><kbd>c</kbd></td><td>correct: choose the label, write the reasoning, mark the wrong step;
<kbd>Ctrl</kbd>+<kbd>Enter</kbd> saves, <kbd>Esc</kbd> cancels</td></tr>
<tr><td><kbd>1</kbd>-<kbd>4</kbd></td><td>grade: 4 certain, 3 probable, 2 possible, 1 a guess</td></tr>
<tr><td><kbd>u</kbd></td><td>undo your last decision (kept in its history) and show it again</td></tr>
<tr><td><kbd>s</kbd></td><td>skip (recorded)</td></tr>
<tr><td><kbd>f</kbd></td><td>flag for discussion</td></tr>
<tr><td><kbd>j</kbd> / <kbd>k</kbd></td><td>next / previous candidate (records nothing)</td></tr>
<tr><td><kbd>?</kbd></td><td>show or hide this sheet</td></tr>
<tr><td><kbd>Esc</kbd></td><td>close it, leave a text box</td></tr>
</table>
<p style="color:#555;margin-bottom:0">Every decision is saved at once. Keys are off while you
type. Seconds on an item count active time only: the clock pauses while the tab is hidden or
after 60 s without a key, click or mouse move.</p>
</div>
"""

CONF_BANDS = ["all", "0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0"]
STATUSES = ["any", "unreviewed", "reviewed", "conflict", "flagged"]
SPLITS = ["all", "train", "test", "holdout"]
# Vet events: no progress overlay on a dozen outputs (it costs the browser a re-layout per
# switch, and a switch is over before an overlay would help).
FAST: dict[str, Any] = {"show_progress": "hidden"}


def plotly_preload() -> str:
    """-- vet speed: a link that fetches Gradio's Plotly bundle (1.3 MB) while the page is
    still being built; Gradio imports it only once the first plot has a value, which put
    its download after the vet page's first answer."""
    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    return "".join(
        f'<link rel="modulepreload" href="assets/{p.name}">'
        for p in sorted(assets.glob("PlotlyPlot-*.js"))
    )


def plot(fig: dict[str, Any] | None) -> PlotData | None:
    # Our figures are plain dicts: hand Gradio the JSON directly, skipping graph objects.
    return None if fig is None else plotly(to_json(fig))


def plotly(fig_json: str) -> PlotData:
    return PlotData(type="plotly", plot=fig_json)


def build(ctx: context.Context) -> gr.Blocks:
    tasks = ["all", *TASKS]
    with gr.Blocks(title="Loupe") as demo:
        gr.HTML(CHEATSHEET + plotly_preload())
        state = gr.State(views.new_state())
        who = gr.Markdown(elem_id="whoami")
        with gr.Tabs():
            # ---------------------------------------------------------------- vet
            with gr.Tab("Vet", id="vet"):
                with gr.Row(equal_height=True, elem_id="vet-filters"):
                    f_task = gr.Dropdown(tasks, value="all", label="task", scale=1)
                    f_band = gr.Dropdown(
                        CONF_BANDS, value="all", label="confidence P(YES)", scale=1
                    )
                    f_status = gr.Dropdown(STATUSES, value="any", label="status", scale=1)
                    f_survey = gr.Dropdown(["all"], value="all", label="survey", scale=1,
                                           allow_custom_value=True)  # fmt: skip
                    f_split = gr.Dropdown(SPLITS, value="all", label="split", scale=1)
                    jump_id = gr.Textbox(label="jump to id", placeholder="candidate id", scale=2,
                                         elem_id="jump-id")  # fmt: skip
                    jump_btn = gr.Button("Go", scale=0, min_width=60)
                # -- vet desk: an id that is a candidate of several tasks asks which
                jump_task = gr.Radio([], label="this id is a candidate of several tasks: open",
                                     visible=False, elem_id="jump-task")  # fmt: skip
                header = gr.HTML(elem_id="vet-header")
                with gr.Row(elem_id="vet-options"):
                    o_markers = gr.Checkbox(value=True, label="line & band markers")
                    o_error = gr.Checkbox(value=True, label="ivar error band")
                    o_smooth = gr.Slider(0, 25, value=0, step=1, label="smoothing (px)")
                    o_frame = gr.Radio(["rest", "observed"], value="rest", label="frame")
                    o_images = gr.Checkbox(value=False, label="show the images the model saw")
                # -- desk: redshift, templates, normalised view, all markers (app.pages.desk)
                with gr.Row(equal_height=True, elem_id="desk"):
                    o_norm = gr.Checkbox(value=False, label="continuum-normalised (n)",
                                         elem_id="desk-normalise", scale=1)  # fmt: skip
                    o_allmk = gr.Checkbox(value=False, label="all markers, not only the task's (m)",
                                          elem_id="desk-all-markers", scale=1)  # fmt: skip
                    o_tmpl = gr.Dropdown(desk.template_names(ctx), value="none", scale=1,
                                         label="template (t cycles)", elem_id="desk-template")  # fmt: skip
                    z_slider = gr.Slider(desk.Z_MIN, desk.Z_MAX, value=0.0, step=0.0001, scale=3,
                                         label="redshift z  (z: type · [ ] ±0.001 · { } ±0.05)",
                                         elem_id="desk-z")  # fmt: skip
                    # A typed z reaches the server by its own event: keys.js hands the box's
                    # value to this button's call (Enter in the box), no slider drag faked.
                    z_typed = gr.Textbox(visible="hidden", elem_id="desk-z-typed")
                    z_typed_go = gr.Button(visible="hidden", elem_id="btn-z-typed")
                with gr.Row(equal_height=True):
                    z_info = gr.HTML(elem_id="desk-z-info-box")
                    z_adopt = gr.Button("Adopt agent z (=)", size="sm", elem_id="btn-z-adopt")
                    z_steps = [
                        (gr.Button(text, size="sm", elem_id=eid, min_width=60), step)
                        for text, eid, step in (
                            ("−0.05 {", "btn-z-down-large", -desk.LARGE_STEP),
                            ("−0.001 [", "btn-z-down", -desk.SMALL_STEP),
                            ("+0.001 ]", "btn-z-up", desk.SMALL_STEP),
                            ("+0.05 }", "btn-z-up-large", desk.LARGE_STEP),
                        )
                    ]  # fmt: skip
                    t_next = gr.Button("Next template (t)", size="sm", elem_id="btn-template-next")
                # -- end desk
                g_plot = gr.Plot(elem_id="vet-global", show_label=False)
                with gr.Row(equal_height=False, elem_id="vet-steps"):
                    z_plot = gr.Plot(show_label=False, scale=3, elem_id="vet-zooms",
                                     container=False)  # fmt: skip
                    thoughts = gr.HTML(elem_id="vet-thoughts", padding=False, min_height=0)
                answer = gr.HTML(elem_id="vet-answer")
                with gr.Row(elem_id="vet-actions"):
                    b_accept = gr.Button("Accept (a)", variant="primary", elem_id="btn-accept")
                    b_reject = gr.Button("Reject (r)", variant="stop", elem_id="btn-reject")
                    b_correct = gr.Button("Correct (c)", elem_id="btn-correct")
                    b_skip = gr.Button("Skip (s)", elem_id="btn-skip")
                    b_flag = gr.Button("Flag (f)", elem_id="btn-flag")
                    b_prev = gr.Button("◀ Prev (k)", elem_id="btn-prev")
                    b_next = gr.Button("Next (j) ▶", elem_id="btn-next")
                    b_undo = gr.Button("Undo (u)", elem_id="btn-undo")
                # -- vet desk: grade, a reject's reason, the correct panel, active time
                with gr.Row(equal_height=True):
                    v_grade = gr.Radio(["1", "2", "3", "4"], label="grade (1-4): 4 certain, "
                                       "3 probable, 2 possible, 1 a guess", elem_id="vet-grade",
                                       scale=2)  # fmt: skip
                    # the page's active seconds on the item; -1 (API calls): the wall clock
                    active = gr.Number(-1, visible="hidden", elem_id="vet-active")
                with gr.Row(elem_id="reject-reason-row"):
                    reason = gr.Textbox(
                        label="reject: what should the model have concluded? (Enter saves, "
                        "Esc saves without a reason)", lines=1, max_lines=1, max_length=2000,
                        elem_id="reject-reason",
                    )  # fmt: skip
                # a Column, not a Group: Gradio gives a Group's id to two nested elements
                with gr.Column(elem_id="correct-panel"):
                    with gr.Row():
                        c_label = gr.Radio(
                            ["YES", "NO"], label="correct label", elem_id="correct-label"
                        )
                        c_step = gr.Dropdown(["none"], value="none", label="wrong step",
                                             elem_id="correct-step")  # fmt: skip
                    c_expl = gr.Textbox(
                        label="reasoning the model should learn: about the spectrum, in the first "
                        "person, as the model would write it (trained on)",
                        placeholder="e.g. I see strong C2 Swan bands at 4737 and 5165 Å, so ...",
                        lines=3, max_length=2000, elem_id="correct-explanation",
                    )  # fmt: skip
                    c_note = gr.Textbox("", label="note to other experts (not trained on)", lines=1,
                                        max_length=2000, elem_id="correct-note")  # fmt: skip
                    c_save = gr.Button(
                        "Save correction (Ctrl+Enter)",
                        variant="primary",
                        elem_id="btn-save-correct",
                    )
                with gr.Row():
                    comment = gr.Textbox(label="comment", lines=1, scale=4, elem_id="vet-comment")
                    comment_btn = gr.Button("Add comment", scale=1, elem_id="btn-comment")
                message = gr.Markdown(elem_id="vet-message")
                # -- vet speed: what j/k would show, handed to keys.js (vet_page.prefetch)
                ahead_box = gr.Textbox(visible="hidden", elem_id="vet-ahead")
                drawn_box = gr.Textbox(visible="hidden", elem_id="vet-drawn")

            # ---------------------------------------------------------------- author
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
                a_thought = gr.Textbox(
                    label="thought for this step", lines=3, elem_id="author-thought"
                )
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

            # ---------------------------------------------------------------- dashboard
            with gr.Tab("Dashboard", id="dashboard"):
                with gr.Row():
                    d_task = gr.Dropdown(tasks, value="all", label="task")
                    d_prec = gr.Slider(0.5, 1.0, value=0.95, step=0.01, label="target precision")
                    d_go = gr.Button("Refresh", variant="primary")
                d_summary = gr.Markdown(elem_id="dash-summary")
                with gr.Row():
                    d_progress = gr.Plot(show_label=False, elem_id="dash-progress")
                    d_rates = gr.Plot(show_label=False, elem_id="dash-rates")
                with gr.Row():
                    d_conf = gr.Plot(show_label=False, elem_id="dash-confusion")
                    d_rel = gr.Plot(show_label=False, elem_id="dash-reliability")
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
                # -- the inspector: agreement on gold by version; calibrate (admins)
                d_versions = gr.Dataframe(
                    value={"headers": dashboard_page.VERSION_HEADERS, "data": []},
                    label="gold items: agreement by inspector version", interactive=False,
                    elem_id="dash-versions",
                )  # fmt: skip
                d_cal_go = gr.Button("Calibrate the inspector from the experts' labels",
                                     visible=False, elem_id="btn-calibrate")  # fmt: skip
                d_cal_msg = gr.Markdown(elem_id="dash-calibrate-message")
                d_cal_table = gr.Dataframe(
                    label="cross-validated before/after per task", interactive=False,
                    visible=False, elem_id="dash-calibrate-table",
                )  # fmt: skip
                # -- end inspector

            # ---------------------------------------------------------------- export
            with gr.Tab("Export", id="export"):
                gr.Markdown("Exports include only what is new since the last batch of that kind.")
                with gr.Row():
                    e_kind = gr.Radio(["sft", "rl", "pairs"], value="sft", label="export")
                    e_go = gr.Button("Run export", variant="primary", elem_id="btn-export")
                e_counts = gr.Markdown()
                e_manifest = gr.JSON(label="manifest")
                e_files = gr.File(label="download", file_count="multiple", interactive=False)
                # -- VI CSV download (annotate.export.vi)
                with gr.Row():
                    e_vi_layout = gr.Radio(["loupe", "prospect", "marz"], value="loupe",
                                           label="VI CSV columns")  # fmt: skip
                    e_vi_go = gr.Button("Download decisions as VI CSV", elem_id="btn-export-vi")
                e_vi_msg = gr.Markdown(elem_id="export-vi-message")
                e_vi_files = gr.File(label="VI CSV", file_count="multiple", interactive=False,
                                     elem_id="export-vi-files")  # fmt: skip
                # -- end VI CSV
                e_hist = gr.Dataframe(
                    value={"headers": export_page.HISTORY_HEADERS, "data": []},
                    label="earlier batches",
                    interactive=False,
                    elem_id="export-history",
                )

            # ---------------------------------------------------------------- experts
            with gr.Tab("Experts", id="experts"):
                x_note = gr.Markdown(elem_id="experts-note")
                x_list = gr.Dataframe(
                    value={"headers": experts_page.HEADERS, "data": []},
                    label="experts",
                    interactive=False,
                    elem_id="experts-list",
                )
                with gr.Row():
                    x_name = gr.Textbox(label="name")
                    x_role = gr.Radio(["expert", "admin"], value="expert", label="role")
                    x_pw = gr.Textbox(label="password", type="password")
                    x_add = gr.Button("Add or update expert")
                x_msg = gr.Markdown()
                gr.Markdown("### Add candidates")
                with gr.Row():
                    u_files = gr.File(label="spectrum files", file_count="multiple",
                                      file_types=[".fits", ".fit", ".gz", ".csv", ".txt",
                                                  ".ecsv", ".parquet"])  # fmt: skip
                    with gr.Column():
                        u_task = gr.Dropdown(list(TASKS), value=next(iter(TASKS)), label="task")
                        u_path = gr.Textbox(
                            label="or a path under a data root (file, folder, glob)"
                        )
                        u_go = gr.Button("Ingest and run the agent", variant="primary")
                u_msg = gr.Markdown()

        # ------------------------------------------------------------------ wiring
        filters = [f_task, f_band, f_status, f_survey, f_split]
        display = [o_markers, o_error, o_smooth, o_frame, o_images]
        view_outs = [state, header, g_plot, z_plot, thoughts, answer, c_label, c_step, c_expl,
                     c_note, reason, v_grade, jump_task, message, f_survey]  # fmt: skip
        view_outs += [z_slider, z_info]  # the desk's redshift control follows the candidate

        def show(st: dict, view: views.VetView, drawn: str | None = None) -> list[Any]:
            # Outputs the expert cannot edit are sent only when they differ from what this
            # session was last sent: an unchanged plot is neither re-sent nor redrawn.
            # -- vet speed: at j/k, keys.js may already have drawn the header and whole
            # spectrum it was handed (`vet_page.prefetch`); `drawn` names them. If they are
            # this answer's, they are not sent again; if not, they are sent whatever was sent
            # before, stamped with a counter so that the page redraws them (Gradio does not
            # redraw a value equal to its last one).
            st = dict(st)
            sent = dict(st.get("_sent") or {})
            n = int(st.get("_n") or 0) + 1
            st["_n"] = n
            gjson = None if view.global_fig is None else to_json(view.global_fig)
            if drawn:
                if drawn == vet_page.drawn_token(view):
                    sent["header"], sent["global"] = view.header_html, gjson
                else:
                    sent.pop("header", None)
                    sent.pop("global", None)

            def once(name: str, key: Any, value: Any) -> Any:
                if sent.get(name) == key:
                    return gr.skip()
                sent[name] = key
                return value

            head = view.header_html.replace(
                'class="loupe-head"', f'class="loupe-head" data-n="{n}"', 1
            )
            if gjson is not None:
                gplot = plotly(to_json(vet_page.stamped(view.global_fig, n=n)))
            # -- end vet speed
            zjson = None if view.zoom_fig is None else to_json(view.zoom_fig)
            surveys = ["all", *view.surveys]
            out: list[Any] = [
                None,  # the state, filled in last
                once("header", view.header_html, head),
                once("global", gjson, None if gjson is None else gplot),
                once(
                    "zooms",
                    zjson,
                    gr.update(
                        value=None if zjson is None else plotly(zjson), visible=zjson is not None
                    ),
                ),  # fmt: skip
                once("thoughts", view.thoughts_html, view.thoughts_html),
                once("answer", view.answer_html, view.answer_html),
                gr.update(value=view.correct_label),
                gr.update(choices=view.step_choices, value="none"),
                gr.update(value=view.explanation),
                gr.update(value=""),  # the correct panel's note
                gr.update(value=""),  # a reject's reason
                gr.update(value=None if view.grade is None else str(view.grade)),
                once(
                    "jump_tasks",
                    tuple(view.jump_tasks),
                    gr.update(choices=view.jump_tasks, value=None, visible=bool(view.jump_tasks)),
                ),  # fmt: skip
                once("message", view.message, view.message),
                once("surveys", tuple(surveys), gr.update(choices=surveys)),
                # -- desk
                once("z", (view.redshift or {}).get("z"),
                     gr.update(value=desk.shown_z((view.redshift or {}).get("z") or 0.0))),
                once("z_info", view.redshift, desk.info_html(view.redshift)),
            ]  # fmt: skip
            st["_sent"] = sent
            out[0] = st
            return out

        def on_load(st, tk, band, status, survey, split, mk, err, sm, fr, im, request: gr.Request):
            ex = context.expert_for(ctx, request)
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            st, view = vet_page.vet_next(ctx, ex, st, f, d)
            return [context.whoami(ctx, ex), *show(st, view)]

        opened = demo.load(on_load, [state, *filters, *display], [who, *view_outs], api_name="open")

        def nav(kind: str):
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im,
                   request: gr.Request, drawn: str | None = None):  # fmt: skip
                ex = context.expert_for(ctx, request)
                f, d = (
                    views.QueueFilters(tk, band, status, survey, split),
                    desk.display_with(st, views.Display(mk, err, sm, fr, im)),
                )
                if kind == "next":
                    st, view = vet_page.vet_next(ctx, ex, st, f, d)
                elif kind == "prev":
                    st, view = vet_page.vet_prev(ctx, ex, st, f, d)
                else:
                    st, view = vet_page.vet_refresh(ctx, ex, st, d)
                return show(st, view, drawn)

            return fn

        def moving(kind: str):
            # -- vet speed: j/k carry the token of what keys.js drew ahead (vet-drawn)
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im, drawn: str | None = None,
                   request: gr.Request = None):  # fmt: skip
                return nav(kind)(st, tk, band, status, survey, split, mk, err, sm, fr, im,
                                 request, drawn)  # fmt: skip

            return fn

        # -- vet speed: after each move, build what j and k would show next (leasing the
        # next item) and hand it to keys.js, which draws it at the key press
        def on_ahead(st, tk, band, status, survey, split, mk, err, sm, fr, im,
                     request: gr.Request):  # fmt: skip
            ex = context.expert_for(ctx, request)
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            ahead = vet_page.prefetch(ctx, ex, st, f, d)
            return "" if ahead is None else json.dumps(ahead, separators=(",", ":"))

        def then_ahead(dep: Any) -> None:
            dep.then(on_ahead, [state, *filters, *display], ahead_box, api_name=False,
                     **FAST).then(None, ahead_box, None, api_name=False,
                                  js="(v) => { window.loupeAhead && window.loupeAhead(v); }")  # fmt: skip

        move_ins = [state, *filters, *display, drawn_box]
        n_move = len(move_ins)
        took = (f"(...a) => {{ a = a.slice(0, {n_move}); a[{n_move - 1}] = window.loupeDrawn ? "
                "window.loupeDrawn() : ''; return a; }")  # fmt: skip
        for dep in (
            b_next.click(moving("next"), move_ins, view_outs, api_name="next", js=took, **FAST),
            b_prev.click(moving("prev"), move_ins, view_outs, api_name="prev", js=took, **FAST),
            opened,
        ):  # fmt: skip
            then_ahead(dep)
        # -- end vet speed
        for comp in display:
            then_ahead(comp.change(nav("refresh"), [state, *filters, *display], view_outs,
                                   api_name=False, trigger_mode="always_last", **FAST))  # fmt: skip
        for comp in filters[:3] + filters[4:]:
            then_ahead(comp.input(nav("next"), [state, *filters, *display], view_outs,
                                  api_name=False, **FAST))  # fmt: skip
        then_ahead(f_survey.input(nav("next"), [state, *filters, *display], view_outs,
                                  api_name=False, **FAST))  # fmt: skip

        def on_jump(st, cid, tk, band, status, survey, split, mk, err, sm, fr, im,
                    request: gr.Request, task=None):  # fmt: skip
            ex = context.expert_for(ctx, request)
            task = task or (tk if tk != "all" else None)
            d = desk.display_with(st, views.Display(mk, err, sm, fr, im))
            st, view = vet_page.vet_jump(ctx, ex, st, cid, d, task=task)
            return show(st, view)

        def on_jump_task(st, cid, pick, tk, band, status, survey, split, mk, err, sm, fr, im,
                         request: gr.Request):  # fmt: skip
            return on_jump(st, cid, tk, band, status, survey, split, mk, err, sm, fr, im,
                           request, task=pick)  # fmt: skip

        jump_ins = [state, jump_id, *filters, *display]
        then_ahead(jump_task.input(on_jump_task, [state, jump_id, jump_task, *filters, *display],
                                   view_outs, api_name="jump_task", **FAST))  # fmt: skip
        then_ahead(jump_btn.click(on_jump, jump_ins, view_outs, api_name="jump", **FAST))
        then_ahead(jump_id.submit(on_jump, jump_ins, view_outs, api_name=False, **FAST))

        # -- vet desk: decisions carry the page's active seconds on the item (keys.js counts
        # them; `with_active` puts the count in the first input just before the call)
        def with_active(n_inputs: int) -> str:
            return (f"(...a) => {{ a = a.slice(0, {n_inputs}); a[{n_inputs - 1}] = "
                    "window.loupeActive ? window.loupeActive() : -1; return a; }")  # fmt: skip

        act_ins = [state, *filters, *display, active]

        def act(action: str):
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                   request: gr.Request, reason_text: str | None = None):  # fmt: skip
                ex = context.expert_for(ctx, request)
                f, d = (
                    views.QueueFilters(tk, band, status, survey, split),
                    desk.display_with(st, views.Display(mk, err, sm, fr, im)),
                )
                st, view = vet_page.vet_act(ctx, ex, st, action, f, d, active_seconds=secs,
                                            explanation=reason_text)  # fmt: skip
                return show(st, view)

            return fn

        for btn, name in [(b_accept, "accept"), (b_reject, "reject"), (b_skip, "skip"),
                          (b_flag, "flag")]:  # fmt: skip
            then_ahead(btn.click(act(name), act_ins, view_outs, api_name=name,
                                 js=with_active(len(act_ins)), **FAST))  # fmt: skip

        def on_reason(text, st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                      request: gr.Request):  # fmt: skip
            return act("reject")(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                                 request, reason_text=text)  # fmt: skip

        reason_ins = [reason, state, *filters, *display, active]
        then_ahead(reason.submit(on_reason, reason_ins, view_outs, api_name="reject_reason",
                                 js=with_active(len(reason_ins)), **FAST))  # fmt: skip

        b_correct.click(None, None, None, js="() => window.loupeOpenCorrect && "
                        "window.loupeOpenCorrect()", api_name=False)  # fmt: skip

        def on_correct(st, label, step, expl, note, tk, band, status, survey, split, mk, err, sm,
                       fr, im, secs, request: gr.Request):  # fmt: skip
            ex = context.expert_for(ctx, request)
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            st, view = vet_page.vet_act(
                ctx, ex, st, "correct", f, d, label=label, explanation=expl, wrong_step=step,
                comment=note, active_seconds=secs,
            )  # fmt: skip
            return show(st, view)

        correct_ins = [state, c_label, c_step, c_expl, c_note, *filters, *display, active]
        then_ahead(c_save.click(on_correct, correct_ins, view_outs, api_name="correct",
                                js=with_active(len(correct_ins)), **FAST))  # fmt: skip

        def on_grade(st, g, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return vet_page.vet_grade(ctx, ex, st, g)

        v_grade.input(on_grade, [state, v_grade], [state, message], api_name="grade", **FAST)

        def on_undo(st, mk, err, sm, fr, im, request: gr.Request):
            ex = context.expert_for(ctx, request)
            st, view = vet_page.vet_undo(
                ctx, ex, st, desk.display_with(st, views.Display(mk, err, sm, fr, im))
            )
            return show(st, view)

        then_ahead(b_undo.click(on_undo, [state, *display], view_outs, api_name="undo", **FAST))
        # -- end vet desk

        def on_comment(st, text, request: gr.Request):
            ex = context.expert_for(ctx, request)
            st, msg = vet_page.vet_comment(ctx, ex, st, text)
            return st, msg, ""

        comment_btn.click(on_comment, [state, comment], [state, message, comment],
                          api_name="comment")  # fmt: skip
        comment.submit(on_comment, [state, comment], [state, message, comment], api_name=False)

        # -- desk: each control refreshes the shown candidate with the new choice
        desk_ins = [state, o_tmpl, z_slider, o_norm, o_allmk, *filters, *display]

        def desk_op(op: str, step: float = 0.0):
            def fn(st, tmpl, z, norm, allmk, tk, band, status, survey, split, mk, err, sm, fr,
                   im, request: gr.Request):  # fmt: skip
                ex = context.expert_for(ctx, request)
                st = desk.set_option(st, normalised=bool(norm), all_markers=bool(allmk),
                                     template=tmpl or "none")  # fmt: skip
                refused = ""
                if op == "z":
                    st = desk.set_z(st, z)
                elif op == "typed":
                    st, refused = desk.enter_z(st, z)
                elif op == "nudge":
                    st = desk.set_z(st, float(z or 0.0) + step)
                elif op == "adopt":
                    st = desk.set_z(st, desk.adopt_z(ctx, st), source="agent")
                elif op == "template":
                    st = desk.set_option(st, template=desk.next_template(ctx, tmpl))
                d = desk.display_with(st, views.Display(mk, err, sm, fr, im))
                st, view = vet_page.vet_refresh(ctx, ex, st, d)
                if refused:
                    view = desk.with_message(view, refused)
                out = show(st, view)
                if op == "template":
                    out.append(desk.desk_of(st)["template"])
                return out

            return fn

        for comp in (o_norm, o_allmk, o_tmpl):
            comp.input(desk_op("option"), desk_ins, view_outs, api_name=False,
                       trigger_mode="always_last", **FAST)  # fmt: skip
        z_slider.input(desk_op("z"), desk_ins, view_outs, api_name="desk_z",
                       trigger_mode="always_last", **FAST)  # fmt: skip
        z_slider.release(desk_op("z"), desk_ins, view_outs, api_name=False,
                         trigger_mode="always_last", **FAST)  # fmt: skip
        # Enter in the box: keys.js puts the typed text in window.loupeTypedZ and presses the
        # hidden button, whose call carries it in place of z_typed (API callers pass the text).
        typed_ins = [state, o_tmpl, z_typed, o_norm, o_allmk, *filters, *display]
        z_typed_go.click(desk_op("typed"), typed_ins, view_outs, api_name="desk_z_typed",
                         js=f"(...a) => {{ a = a.slice(0, {len(typed_ins)}); a[2] = "
                            "String(window.loupeTypedZ ?? a[2] ?? ''); return a; }",
                         trigger_mode="always_last", **FAST)  # fmt: skip
        for btn, step in z_steps:
            btn.click(desk_op("nudge", step), desk_ins, view_outs, api_name=False, **FAST)
        z_adopt.click(desk_op("adopt"), desk_ins, view_outs, api_name="desk_adopt", **FAST)
        t_next.click(desk_op("template"), desk_ins, [*view_outs, o_tmpl], api_name=False,
                     **FAST)  # fmt: skip
        # -- end desk

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

        a_save.click(finish("save"), [astate, a_verdict, a_expl], a_outs, api_name="author_save")
        a_submit.click(finish("submit"), [astate, a_verdict, a_expl], a_outs,
                       api_name="author_submit")  # fmt: skip

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

        # -- dashboard
        def on_dash(task, precision, request: gr.Request):
            ex = context.expert_for(ctx, request)
            dv = dashboard_page.dashboard(ctx, ex, task, precision)
            return [dv.summary, plot(dv.progress), plot(dv.rates), plot(dv.confusion),
                    plot(dv.reliability), plot(dv.speed), plot(dv.gold), dv.per_task,
                    dv.kappa]  # fmt: skip

        d_outs = [d_summary, d_progress, d_rates, d_conf, d_rel, d_speed, d_gold, d_table, d_kappa]
        d_go.click(on_dash, [d_task, d_prec], d_outs, api_name="dashboard")
        # The dashboard opens filled, not as empty frames waiting for Refresh.
        demo.load(on_dash, [d_task, d_prec], d_outs, api_name=False, show_progress="hidden")

        # -- dashboard: the inspector's versions and calibration
        def on_versions(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return dashboard_page.inspector_versions(ctx, ex, task)

        d_go.click(on_versions, d_task, d_versions, api_name="dashboard_versions")

        def on_inspector_tab(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return (gr.Button(visible=dashboard_page.can_calibrate(ex)),
                    dashboard_page.inspector_versions(ctx, ex, task))  # fmt: skip

        demo.load(on_inspector_tab, d_task, [d_cal_go, d_versions], api_name=False,
                  show_progress="hidden")  # fmt: skip

        def on_calibrate(task, request: gr.Request):
            ex = context.expert_for(ctx, request)
            msg, table = dashboard_page.calibrate_now(ctx, ex)
            return (msg, gr.Dataframe(value=table, visible=bool(table["data"])),
                    dashboard_page.inspector_versions(ctx, ex, task))  # fmt: skip

        d_cal_go.click(on_calibrate, d_task, [d_cal_msg, d_cal_table, d_versions],
                       api_name="calibrate")  # fmt: skip
        # -- end dashboard inspector

        # -- export
        def on_export(kind, request: gr.Request):
            ex = context.expert_for(ctx, request)
            r = export_page.run_export(ctx, ex, kind)
            return r.message, r.manifest, r.files, r.history

        e_go.click(on_export, e_kind, [e_counts, e_manifest, e_files, e_hist], api_name="export")

        def on_vi(layout, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return export_page.vi_download(ctx, ex, layout)

        e_vi_go.click(on_vi, e_vi_layout, [e_vi_msg, e_vi_files], api_name="export_vi")

        def on_export_tab(request: gr.Request):
            ex = context.expert_for(ctx, request)
            if ex is None or not ex.admin:
                return {"headers": export_page.HISTORY_HEADERS, "data": []}
            return export_page.export_history(ctx, ex)

        demo.load(on_export_tab, None, e_hist, api_name=False, show_progress="hidden")

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

        def on_experts_tab(request: gr.Request):
            ex = context.expert_for(ctx, request)
            return experts_page.experts_note(ex), experts_page.expert_table(ctx, ex)

        demo.load(on_experts_tab, None, [x_note, x_list], api_name=False)
    return demo
