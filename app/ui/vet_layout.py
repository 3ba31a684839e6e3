"""The vet tab's layout: the toolbar and its options panel, the header, the whole spectrum
with the redshift and template row under it, the step panels beside their thoughts, the
correct panel, the comment and the dock at the foot of the window, and the hidden boxes
that carry data between the server and keys.js. `app/ui/vet.py` wires their events."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from agent.tasks import TASKS
from annotate.team import prefs
from app import context
from app.pages import desk
from db.models import MAX_SPECTYPE, MAX_TEXT
from db.models import SPLITS as MODEL_SPLITS

CONF_BANDS = ["all", "0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0"]
STATUSES = list(prefs.STATUSES)  # the queue filter's, as the expert's kept desk checks them
SPLITS = ["all", *MODEL_SPLITS]
# The box a vet plot is drawn in (keys.js `loupeFigure`)
PLOT_DIV = '<div class="loupe-plot"></div>'


def data_box(elem_id: str) -> gr.Textbox:
    """A hidden box that carries data to keys.js (a figure's JSON, what j and k bring): one
    line, no autoscroll, because a multi-line box measures its text's height, a forced
    layout of the whole page, each time a value arrives. Empty by default, so an API call
    may leave it out."""
    return gr.Textbox("", visible="hidden", elem_id=elem_id, lines=1, max_lines=1,
                      autoscroll=False)  # fmt: skip


def layout(ctx: context.Context) -> SimpleNamespace:
    """The tab's components (inside the open `gr.Tab`), by the names the wiring uses."""
    tasks = ["all", *TASKS]
    # -- the toolbar: one row above the candidate. The queue's filters and the display
    # options that are set once per session sit in a panel it opens (`o`, or its
    # button; app/static/toolbar.js), summarised beside the button; the view's toggles
    # (each with its key) and the jump box stay in the row. Every choice here is kept
    # per expert (app/ui/vet_prefs.py) and the page opens with it.
    with gr.Row(equal_height=True, elem_id="vet-toolbar"):
        gr.Button("Filters & display (o) ▾", size="sm", elem_id="btn-options",
                  min_width=170, scale=0)  # fmt: skip
        o_summary = gr.HTML(elem_id="vet-options-summary", padding=False, min_height=0)
        with gr.Row(elem_id="vet-options", equal_height=True):
            o_markers = gr.Checkbox(value=True, label="markers", elem_id="opt-markers",
                                    min_width=90)  # fmt: skip
            o_error = gr.Checkbox(value=True, label="±1σ", elem_id="opt-error",
                                  min_width=70)  # fmt: skip
            o_norm = gr.Checkbox(value=False, label="normalised (n)",
                                 elem_id="desk-normalise", min_width=120)  # fmt: skip
            o_allmk = gr.Checkbox(value=False, label="all markers (m)",
                                  elem_id="desk-all-markers", min_width=125)  # fmt: skip
            # the file's arms before merging (DESI B/R/Z) and its sky spectrum
            o_arms = gr.Checkbox(value=False, label="arms (b)", elem_id="desk-arms",
                                 min_width=80)  # fmt: skip
            o_sky = gr.Checkbox(value=False, label="sky (y)", elem_id="desk-sky",
                                min_width=70)  # fmt: skip
        jump_id = gr.Textbox(show_label=False, placeholder="jump to id", scale=0,
                             min_width=150, elem_id="jump-id", lines=1, max_lines=1)  # fmt: skip
        jump_btn = gr.Button("Go", size="sm", scale=0, min_width=44, elem_id="btn-jump")
    with gr.Column(elem_id="vet-options-panel"):
        with gr.Row(equal_height=True, elem_id="vet-filters"):
            f_task = gr.Dropdown(tasks, value="all", label="task", scale=1)
            f_band = gr.Dropdown(CONF_BANDS, value="all", label="confidence P(YES)", scale=1)
            f_status = gr.Dropdown(STATUSES, value="any", label="status", scale=1)
            f_survey = gr.Dropdown(["all"], value="all", label="survey", scale=1,
                                   allow_custom_value=True)  # fmt: skip
            f_split = gr.Dropdown(SPLITS, value="all", label="split", scale=1)
        with gr.Row(equal_height=True, elem_id="vet-display"):
            o_smooth = gr.Slider(0, 25, value=0, step=1, label="smoothing (px)", scale=2)
            o_frame = gr.Radio(["rest", "observed"], value="rest", label="frame", scale=1)
            o_images = gr.Checkbox(value=False, label="show the images the model saw",
                                   scale=1)  # fmt: skip
    # -- vet desk: an id that is a candidate of several tasks asks which
    jump_task = gr.Radio([], label="this id is a candidate of several tasks: open",
                         visible=False, elem_id="jump-task")  # fmt: skip
    header = gr.HTML(elem_id="vet-header")
    # -- vet speed: the two plots are drawn by keys.js with plotly.js's basic bundle
    # (app/ui/assets.py `plotly_head`), not by gr.Plot, which loads the full bundle once
    # a plot has a value. Each box holds Plotly's div; the figure's JSON arrives in a
    # hidden box whose change draws it ("" hides the plot).
    gr.HTML(PLOT_DIV, elem_id="vet-global", js_on_load=None, apply_default_css=False)
    # -- desk: the redshift and the template, under the spectrum they move
    # (app.pages.desk)
    with gr.Row(equal_height=True, elem_id="desk"):
        z_info = gr.HTML(elem_id="desk-z-info-box", min_height=0, padding=False)
        z_slider = gr.Slider(desk.Z_MIN, desk.Z_MAX, value=0.0, step=0.0001, scale=3,
                             label="redshift z (z types)", elem_id="desk-z",
                             min_width=280)  # fmt: skip
        z_steps = [
            (gr.Button(text, size="sm", elem_id=eid, min_width=58, scale=0), step)
            for text, eid, step in (
                ("−0.05 {", "btn-z-down-large", -desk.LARGE_STEP),
                ("−0.001 [", "btn-z-down", -desk.SMALL_STEP),
                ("+0.001 ]", "btn-z-up", desk.SMALL_STEP),
                ("+0.05 }", "btn-z-up-large", desk.LARGE_STEP),
            )
        ]  # fmt: skip
        z_adopt = gr.Button("agent z (=)", size="sm", elem_id="btn-z-adopt", min_width=90,
                            scale=0)  # fmt: skip
        o_tmpl = gr.Dropdown(desk.template_names(ctx), value="none", scale=1, min_width=150,
                             label="template (t)", elem_id="desk-template")  # fmt: skip
        t_next = gr.Button("next (t)", size="sm", elem_id="btn-template-next", min_width=70,
                           scale=0)  # fmt: skip
        # A typed z reaches the server by its own event: keys.js hands the box's
        # value to this button's call (Enter in the box), no slider drag faked.
        z_typed = gr.Textbox(visible="hidden", elem_id="desk-z-typed")
        z_typed_go = gr.Button(visible="hidden", elem_id="btn-z-typed")
    # -- end desk
    with gr.Row(equal_height=False, elem_id="vet-steps"):
        gr.HTML(PLOT_DIV, elem_id="vet-zooms", scale=3, js_on_load=None,
                apply_default_css=False)  # fmt: skip
        thoughts = gr.HTML(elem_id="vet-thoughts", padding=False, min_height=0)
    g_plot = data_box("vet-global-figure")
    z_plot = data_box("vet-zooms-figure")
    answer = gr.HTML(elem_id="vet-answer")
    # a Column, not a Group: Gradio gives a Group's id to two nested elements
    with gr.Column(elem_id="correct-panel"):
        with gr.Row():
            c_label = gr.Radio(["YES", "NO"], label="correct label", elem_id="correct-label")
            c_step = gr.Dropdown(["none"], value="none", label="wrong step",
                                 elem_id="correct-step")  # fmt: skip
        c_expl = gr.Textbox(
            label="reasoning the model should learn: about the spectrum, in the first "
            "person, as the model would write it (trained on)",
            placeholder="e.g. I see strong C2 Swan bands at 4737 and 5165 Å, so ...",
            lines=3, max_length=MAX_TEXT, elem_id="correct-explanation",
        )  # fmt: skip
        c_note = gr.Textbox("", label="note to other experts (not trained on)", lines=1,
                            max_length=MAX_TEXT, elem_id="correct-note")  # fmt: skip
        c_save = gr.Button(
            "Save correction (Ctrl+Enter)",
            variant="primary",
            elem_id="btn-save-correct",
        )
    with gr.Row():
        comment = gr.Textbox(label="comment to other experts (kept on this candidate as "
                             "you type; saved with your decision, or now with Enter)",
                             lines=1, scale=4, elem_id="vet-comment")  # fmt: skip
        comment_btn = gr.Button("Add comment", scale=1, elem_id="btn-comment")
    # -- vet desk: the dock, fixed at the foot of the window (a laptop's 768 px hold it
    # below the plots): the status line, the decision buttons, grade, flags, spectral
    # type and a reject's reason, always in view; keys.js says there why a key is refused
    with gr.Column(elem_id="vet-dock"):
        message = gr.Markdown(elem_id="vet-message")
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
        with gr.Row(equal_height=True, elem_id="vet-marks"):
            v_grade = gr.Radio(["1", "2", "3", "4"], label="grade: 4 certain · 3 probable · "
                               "2 possible · 1 a guess", elem_id="vet-grade",
                               scale=0)  # fmt: skip
            # Prospect's issue flags and the expert's spectral type (app.pages.desk.set_mark)
            v_issues = gr.CheckboxGroup(
                [("R bad redshift fit", "R"), ("C bad spectral type", "C"),
                 ("S bad spectrum", "S")],
                label="issues (⇧R ⇧C ⇧S)", elem_id="vet-issues", scale=0,
            )  # fmt: skip
            v_spectype = gr.Textbox(label="spectral type", placeholder="t, or type + Enter",
                                    lines=1, max_lines=1,
                                    max_length=MAX_SPECTYPE, scale=1, min_width=200,
                                    elem_id="vet-spectype")  # fmt: skip
            # the page's active seconds on the item; -1 (API calls): the wall clock
            active = gr.Number(-1, visible="hidden", elem_id="vet-active")
        with gr.Row(elem_id="reject-reason-row", equal_height=True):
            reason = gr.Textbox(
                label="reject: what should the model have concluded? (Enter saves the "
                "reject; Esc leaves the box, the text kept on this candidate)", lines=1,
                max_lines=1, max_length=MAX_TEXT, scale=4,
                elem_id="reject-reason",
            )  # fmt: skip
            r_save = gr.Button("Save reject (Enter)", variant="stop", scale=1,
                               elem_id="btn-save-reject")  # fmt: skip
    # -- vet speed: what j/k would show, handed to keys.js (vet_page.prefetch)
    ahead_box = data_box("vet-ahead")
    drawn_box = data_box("vet-drawn")
    # -- every write names its candidate (app.pages.vet_target): what keys.js read off the
    # page when the key was pressed or the control clicked (JSON: the candidate, task and
    # revision shown, the page's holder id, and for a decision its texts and form), and
    # the revision the store holds after a write (for the next write)
    target_box = data_box("vet-target")
    rev_box = data_box("vet-rev")
    # -- drafts: the text boxes' saved values keys.js fills them from
    form_box = data_box("vet-form")

    return SimpleNamespace(
        o_summary=o_summary,
        o_markers=o_markers,
        o_error=o_error,
        o_norm=o_norm,
        o_allmk=o_allmk,
        o_arms=o_arms,
        o_sky=o_sky,
        jump_id=jump_id,
        jump_btn=jump_btn,
        f_task=f_task,
        f_band=f_band,
        f_status=f_status,
        f_survey=f_survey,
        f_split=f_split,
        o_smooth=o_smooth,
        o_frame=o_frame,
        o_images=o_images,
        jump_task=jump_task,
        header=header,
        z_info=z_info,
        z_slider=z_slider,
        z_steps=z_steps,
        z_adopt=z_adopt,
        o_tmpl=o_tmpl,
        t_next=t_next,
        z_typed=z_typed,
        z_typed_go=z_typed_go,
        thoughts=thoughts,
        g_plot=g_plot,
        z_plot=z_plot,
        answer=answer,
        c_label=c_label,
        c_step=c_step,
        c_expl=c_expl,
        c_note=c_note,
        c_save=c_save,
        comment=comment,
        comment_btn=comment_btn,
        message=message,
        b_accept=b_accept,
        b_reject=b_reject,
        b_correct=b_correct,
        b_skip=b_skip,
        b_flag=b_flag,
        b_prev=b_prev,
        b_next=b_next,
        b_undo=b_undo,
        v_grade=v_grade,
        v_issues=v_issues,
        v_spectype=v_spectype,
        active=active,
        reason=reason,
        r_save=r_save,
        ahead_box=ahead_box,
        drawn_box=drawn_box,
        target_box=target_box,
        rev_box=rev_box,
        form_box=form_box,
    )
