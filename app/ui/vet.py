"""The vet tab: filters, the desk (redshift, templates, normalised view, markers), the
whole spectrum, the step panels beside their thoughts, and the decision buttons.

Switching candidates is one round trip that redraws two plots: the whole spectrum, and the
step panels as one figure of stacked subplots, with the thoughts beside it in blocks of the
panels' height. Vet events run without progress overlays and send only what changed.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gradio as gr

from agent.tasks import TASKS
from app import context, views
from app.pages import desk, vet_texts
from app.pages import vet as vet_page
from app.plots import drawn_token, stamped, to_json
from app.ui import vet_prefs
from db.models import MAX_SPECTYPE, MAX_TEXT
from db.models import SPLITS as MODEL_SPLITS

CONF_BANDS = ["all", "0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0"]
STATUSES = ["any", "unreviewed", "reviewed", "conflict", "flagged"]
SPLITS = ["all", *MODEL_SPLITS]
# Vet events: no progress overlay on a dozen outputs (it costs the browser a re-layout per
# switch, and a switch is over before an overlay would help).
FAST: dict[str, Any] = {"show_progress": "hidden"}
# The box a vet plot is drawn in (keys.js `loupeFigure`)
PLOT_DIV = '<div class="loupe-plot"></div>'

# -- vet speed: what comes after a move or a decision is built as soon as its handler has
# answered, while the answer travels and the page draws it; the call that hands it to the
# page (on_ahead) then finds it built. One per session, newest kept.
_early_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vet-ahead")
_early: OrderedDict[str, tuple[tuple, Future]] = OrderedDict()
_early_lock = threading.Lock()
EARLY_SESSIONS = 64


def data_box(elem_id: str) -> gr.Textbox:
    """A hidden box that carries data to keys.js (a figure's JSON, what j and k bring): one
    line, no autoscroll, because a multi-line box measures its text's height, a forced
    layout of the whole page, each time a value arrives."""
    return gr.Textbox(visible="hidden", elem_id=elem_id, lines=1, max_lines=1, autoscroll=False)


def _ahead_key(ex: Any, st: dict, f: views.QueueFilters, d: views.Display) -> tuple:
    # everything prefetch reads: who, where in the session, filters and display
    return (getattr(ex, "name", None), st.get("current"), st.get("pos"),
            tuple(st.get("history") or ()), repr(f), repr(d))  # fmt: skip


def _start_ahead(ctx: context.Context, request: Any, ex: Any, st: dict,
                 f: views.QueueFilters, shown: views.Display) -> None:  # fmt: skip
    """Starts building what j and k would bring after this answer (`shown`: the display
    options as the page sends them; the desk's are in the state)."""
    session = getattr(request, "session_hash", None)
    if not session or ex is None or st.get("current") is None:
        return
    d = desk.display_with(st, shown)
    fut = _early_pool.submit(vet_page.prefetch, ctx, ex, st, f, d)
    with _early_lock:
        _early[session] = (_ahead_key(ex, st, f, d), fut)
        _early.move_to_end(session)
        while len(_early) > EARLY_SESSIONS:
            _early.popitem(last=False)


def _take_ahead(session: str | None, key: tuple) -> Future | None:
    with _early_lock:
        hit = _early.pop(session, None) if session else None
    return hit[1] if hit is not None and hit[0] == key else None


def tab(ctx: context.Context, state: gr.State, who: gr.Markdown) -> Callable[[gr.Blocks], None]:
    """The tab's components; returns the function that wires their events, which
    `app.ui.build` calls once every tab is laid out (so the events keep their order)."""
    tasks = ["all", *TASKS]
    with gr.Tab("Vet", id="vet"):
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
            with gr.Row(elem_id="reject-reason-row"):
                reason = gr.Textbox(
                    label="reject: what should the model have concluded? (Enter saves the "
                    "reject; Esc leaves the box, the text kept on this candidate)", lines=1,
                    max_lines=1, max_length=MAX_TEXT,
                    elem_id="reject-reason",
                )  # fmt: skip
        # -- vet speed: what j/k would show, handed to keys.js (vet_page.prefetch)
        ahead_box = data_box("vet-ahead")
        drawn_box = data_box("vet-drawn")
        # the id on the screen when a decision's key was pressed (vet_page.vet_act `shown`)
        shown_box = data_box("vet-shown")
        # -- drafts: the texts keys.js kept for the candidate a key was pressed on (JSON,
        # vet_page.page_text), and the text boxes' saved values it fills them from
        page_box = data_box("vet-page-texts")
        form_box = data_box("vet-form")

    def wire(demo: gr.Blocks) -> None:
        filters = [f_task, f_band, f_status, f_survey, f_split]
        display = [o_markers, o_error, o_smooth, o_frame, o_images]
        view_outs = [state, header, g_plot, z_plot, thoughts, answer, c_label, c_step, c_expl,
                     c_note, reason, v_grade, jump_task, message, f_survey]  # fmt: skip
        view_outs += [z_slider, z_info]  # the desk's redshift control follows the candidate
        view_outs += [v_issues, v_spectype]
        view_outs += [o_tmpl, form_box]  # the candidate's own template; its texts (keys.js)

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
                if drawn == drawn_token(view, gjson or ""):
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
            # serialised only where it will be sent (`once` skips an unchanged one)
            gplot = (
                ""
                if gjson is None or sent.get("global") == gjson
                else to_json(stamped(view.global_fig, gjson, n=n))
            )
            # -- end vet speed
            zjson = None if view.zoom_fig is None else to_json(view.zoom_fig)
            surveys = ["all", *view.surveys]
            out: list[Any] = [
                None,  # the state, filled in last
                once("header", view.header_html, head),
                once("global", gjson, gplot),
                once("zooms", zjson, zjson or ""),
                once("thoughts", view.thoughts_html, view.thoughts_html),
                once("answer", view.answer_html, view.answer_html),
                gr.update(value=view.correct_label),
                gr.update(choices=view.step_choices, value="none"),
                # the text boxes are keys.js's to fill: the candidate's draft first, else the
                # saved values of `form_box` (never a half-typed text replaced mid-typing)
                gr.update(),
                gr.update(),
                gr.update(),
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
                # sent again for each candidate: a box left half-typed is emptied
                once("issues", (view.header_html, view.issues), list(view.issues or "")),
                once("spectype", (view.header_html, view.spectype), view.spectype or ""),
                once("template", (view.candidate_id, view.template), view.template),
                # sent with every answer (numbered, so the page always hears it)
                json.dumps({**view.form, "n": n}),
            ]  # fmt: skip
            st["_sent"] = sent
            out[0] = st
            return out

        # -- remembered desk: the page opens with the expert's own filters and display
        # options (app/ui/vet_prefs.py), its first candidate built with them
        kept_comps = dict(zip(vet_prefs.FIELDS, [*filters, *display, o_norm, o_allmk, o_arms,
                                                 o_sky]))  # fmt: skip
        kept_outs = [c for k, c in kept_comps.items() if k != "survey"] + [o_summary]
        kept_choices = {"task": tasks, "band": CONF_BANDS, "status": STATUSES, "split": SPLITS}

        def on_load(st, tk, band, status, survey, split, mk, err, sm, fr, im, request: gr.Request):
            ex = context.expert_for(ctx, request)
            page = [tk, band, status, survey, split, mk, err, sm, fr, im]
            st, kept, desk_kept = vet_prefs.opening(ctx, ex, st, page, kept_choices)
            tk, band, status, survey, split, mk, err, sm, fr, im = kept
            # -- end remembered desk
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            st, view = vet_page.vet_next(ctx, ex, st, f, d)
            out = [context.whoami(ctx, ex), *show(st, view)]
            # -- remembered desk: the survey's value goes with its choices
            out[1 + view_outs.index(f_survey)] = gr.update(choices=["all", *view.surveys],
                                                           value=survey)  # fmt: skip
            return [*out, *vet_prefs.updates(desk_kept, dict(zip(vet_prefs.FIELDS, page)))]

        opened = demo.load(on_load, [state, *filters, *display], [who, *view_outs, *kept_outs],
                           api_name="open")  # fmt: skip
        vet_prefs.wire(ctx, kept_comps, o_summary)
        # -- end remembered desk

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
                out = show(st, view, drawn)
                _start_ahead(ctx, request, ex, st, f, views.Display(mk, err, sm, fr, im))
                return out

            return fn

        def moving(kind: str):
            # -- vet speed: j/k carry the token of what keys.js drew ahead (vet-drawn), and
            # the texts typed on the candidate left: an edit of a decided one's comment
            # amends it (vet_page.leave)
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im, drawn: str | None = None,
                   page: str | None = None, request: gr.Request = None):  # fmt: skip
                note, saved = vet_texts.leave(ctx, context.expert_for(ctx, request), st, page)
                out = nav(kind)(st, tk, band, status, survey, split, mk, err, sm, fr, im,
                                request, drawn)  # fmt: skip
                if note:
                    return vet_texts.with_left(out, note, saved, view_outs.index(message),
                                               view_outs.index(form_box))  # fmt: skip
                return out

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
            early = _take_ahead(getattr(request, "session_hash", None), _ahead_key(ex, st, f, d))
            ahead = early.result() if early is not None else vet_page.prefetch(ctx, ex, st, f, d)
            return "" if ahead is None else json.dumps(ahead, separators=(",", ":"))

        # -- vet speed: a figure's JSON, once changed, is drawn by keys.js in the page
        for box, fig in (("vet-global", g_plot), ("vet-zooms", z_plot)):
            fig.change(None, fig, None, api_name=False,
                       js=f"(v) => {{ (window.loupeFigures = window.loupeFigures || {{}})"
                          f"['{box}'] = v; window.loupeFigure && window.loupeFigure('{box}'); }}")  # fmt: skip

        # -- drafts: the boxes' saved values and what the store now holds, for keys.js
        form_box.change(None, form_box, None, api_name=False,
                        js="(v) => { if (window.loupeForm) window.loupeForm(v); "
                           "else window.loupeFormWaiting = v; }")  # fmt: skip

        def then_ahead(dep: Any) -> None:
            dep.then(on_ahead, [state, *filters, *display], ahead_box, api_name=False,
                     **FAST).then(None, ahead_box, None, api_name=False,
                                  js="(v) => { window.loupeAhead && window.loupeAhead(v); }")  # fmt: skip

        move_ins = [state, *filters, *display, drawn_box, page_box]
        n_move = len(move_ins)
        took = (f"(...a) => {{ a = a.slice(0, {n_move}); a[{n_move - 2}] = window.loupeDrawn ? "
                f"window.loupeDrawn() : ''; a[{n_move - 1}] = window.loupeLeft ? "
                "window.loupeLeft() : ''; return a; }")  # fmt: skip
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

        # -- vet desk: decisions carry what keys.js holds for them (the active seconds on the
        # item, ...): `from_page` fills a call's last inputs with it just before the call, in
        # order, so a later value may read an earlier one
        active_js = "window.loupeActive ? window.loupeActive() : -1"

        def from_page(n_inputs: int, *values: str) -> str:
            first = n_inputs - len(values)
            sets = "".join(f"a[{first + k}] = {v}; " for k, v in enumerate(values))
            return f"(...a) => {{ a = a.slice(0, {n_inputs}); {sets}return a; }}"

        # -- vet speed: a decision carries the token of the next candidate keys.js drew at
        # the key press (vet-drawn), as j does, and the id it was pressed on (vet-shown)
        act_ins = [state, *filters, *display, active, drawn_box, shown_box, page_box]

        def act(action: str):
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                   drawn: str | None = None, shown: str | None = None, page: str | None = None,
                   request: gr.Request = None, reason_text: str | None = None):  # fmt: skip
                ex = context.expert_for(ctx, request)
                f, d = (
                    views.QueueFilters(tk, band, status, survey, split),
                    desk.display_with(st, views.Display(mk, err, sm, fr, im)),
                )
                st, view = vet_page.vet_act(ctx, ex, st, action, f, d, active_seconds=secs,
                                            explanation=reason_text, shown=shown,
                                            page=page)  # fmt: skip
                out = show(st, view, drawn)
                _start_ahead(ctx, request, ex, st, f, views.Display(mk, err, sm, fr, im))
                return out

            return fn

        def deciding(n_inputs: int) -> str:
            # the active seconds, the drawn token, the id pressed on and the texts kept for it
            return from_page(
                n_inputs,
                active_js,
                "window.loupeDeciding ? window.loupeDeciding() : ''",
                "window.loupeShown ? window.loupeShown() : ''",
                f"window.loupeTextsFor ? window.loupeTextsFor(a[{n_inputs - 2}]) : ''",
            )

        for btn, name in [(b_accept, "accept"), (b_reject, "reject"), (b_skip, "skip"),
                          (b_flag, "flag")]:  # fmt: skip
            then_ahead(btn.click(act(name), act_ins, view_outs, api_name=name,
                                 js=deciding(len(act_ins)), **FAST))  # fmt: skip

        def on_reason(text, st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                      drawn: str | None = None, shown: str | None = None,
                      page: str | None = None, request: gr.Request = None):  # fmt: skip
            # the page's kept reason for the candidate pressed on (the box may already show
            # the next one's); the box's own text for API callers
            kept = vet_texts.page_text(page, shown, (st or {}).get("task"))
            text = kept["reason"] if "reason" in kept else text
            return act("reject")(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                                 drawn, shown, page, request, reason_text=text)  # fmt: skip

        reason_ins = [reason, state, *filters, *display, active, drawn_box, shown_box, page_box]
        sent = deciding(len(reason_ins))
        then_ahead(reason.submit(on_reason, reason_ins, view_outs, api_name="reject_reason",
                                 js=sent, **FAST))  # fmt: skip

        b_correct.click(None, None, None, js="() => window.loupeOpenCorrect && "
                        "window.loupeOpenCorrect()", api_name=False)  # fmt: skip

        def on_correct(st, label, step, expl, note, tk, band, status, survey, split, mk, err, sm,
                       fr, im, secs, page: str | None = None,
                       request: gr.Request = None):  # fmt: skip
            ex = context.expert_for(ctx, request)
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            st, view = vet_page.vet_act(
                ctx, ex, st, "correct", f, d, label=label, explanation=expl, wrong_step=step,
                comment=note, active_seconds=secs, page=page,
            )  # fmt: skip
            return show(st, view)

        # the texts kept for the candidate go with it too (its comment, when no note is given)
        correct_ins = [state, c_label, c_step, c_expl, c_note, *filters, *display, active,
                       page_box]  # fmt: skip
        sent = from_page(len(correct_ins), active_js,
                         "window.loupeTextsFor ? window.loupeTextsFor('') : ''")  # fmt: skip
        then_ahead(c_save.click(on_correct, correct_ins, view_outs, api_name="correct", js=sent,
                                **FAST))  # fmt: skip

        def on_grade(st, g, request: gr.Request):
            ex = context.expert_for(ctx, request)
            return vet_page.vet_grade(ctx, ex, st, g)

        v_grade.input(on_grade, [state, v_grade], [state, message], api_name="grade",
                      **FAST).then(None, None, None, js="() => window.loupeDone && "
                                   "window.loupeDone()", api_name=False)  # fmt: skip

        def marking(name: str):
            def fn(st, value, request: gr.Request):
                ex = context.expert_for(ctx, request)
                return desk.set_mark(ctx, ex, st, name, value)

            return fn

        # always_last: a flag toggled while the last one is saved is sent after it (the
        # value is the whole set), never dropped as Gradio's default "once" would
        v_issues.input(marking("issues"), [state, v_issues], [state, message],
                       api_name="issues", trigger_mode="always_last", **FAST).then(
            None, None, None, js="() => window.loupeDone && window.loupeDone()",
            api_name=False)  # fmt: skip
        for ev in (v_spectype.submit, v_spectype.blur):
            ev(marking("spectype"), [state, v_spectype], [state, message],
               api_name="spectype" if ev == v_spectype.submit else False, **FAST)  # fmt: skip

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
            return st, msg

        # the box keeps showing the comment: it is the candidate's, saved or in its draft
        # keys.js holds later keys until the comment is saved (its answer ends with loupeDone)
        for ev in (comment_btn.click, comment.submit):
            ev(on_comment, [state, comment], [state, message],
               api_name="comment" if ev == comment_btn.click else False, **FAST).then(
                None, None, None, js="() => window.loupeDone && window.loupeDone()",
                api_name=False)  # fmt: skip

        # -- desk: each control refreshes the shown candidate with the new choice
        desk_ins = [state, o_tmpl, z_slider, o_norm, o_allmk, o_arms, o_sky, *filters, *display]

        def desk_op(op: str, step: float = 0.0):
            def fn(st, tmpl, z, norm, allmk, arms, sky, tk, band, status, survey, split, mk, err,
                   sm, fr, im, request: gr.Request):  # fmt: skip
                ex = context.expert_for(ctx, request)
                before = desk.desk_of(st).get("template") or "none"
                st = desk.set_option(st, normalised=bool(norm), all_markers=bool(allmk),
                                     arms=bool(arms), sky=bool(sky),
                                     template=tmpl or "none")  # fmt: skip
                refused = note = ""
                if op == "z":
                    st = desk.set_z(st, z)
                elif op == "typed":
                    st, refused = desk.enter_z(st, z)
                elif op == "nudge":
                    st = desk.set_z(st, float(z or 0.0) + step)
                elif op == "adopt":
                    st = desk.set_z(st, desk.adopt_z(ctx, st), source="agent")
                elif op == "template":
                    st = desk.set_option(st, template=desk.next_template(
                        ctx, tmpl, task=desk.task_of(ctx, st)))  # fmt: skip
                if op in ("z", "typed", "nudge", "adopt") and not refused:
                    # the candidate's redshift: in its draft, or amending the decision
                    st, note = desk.keep_z(ctx, ex, st)
                picked = desk.desk_of(st)["template"]
                if op == "template" or picked != before:
                    # the template chosen is drawn over this candidate only, and is the
                    # expert's spectral type for it
                    st, _ = desk.keep(ctx, ex, st, "Template", picked, template=picked)
                    st, note = desk.set_mark(ctx, ex, st, "spectype",
                                             "" if picked == "none" else picked)  # fmt: skip
                d = desk.display_with(st, views.Display(mk, err, sm, fr, im))
                st, view = vet_page.vet_refresh(ctx, ex, st, d)
                if note:
                    view = desk.with_message(view, note)
                if refused:
                    view = desk.with_message(view, refused)
                    # the box holds the refused text: send the z in force back into it
                    st["_sent"] = {k: v for k, v in (st.get("_sent") or {}).items()
                                   if k != "z"}  # fmt: skip
                return show(st, view)

            return fn

        for comp in (o_norm, o_allmk, o_arms, o_sky, o_tmpl):
            comp.input(desk_op("option"), desk_ins, view_outs, api_name=False,
                       trigger_mode="always_last", **FAST)  # fmt: skip
        z_slider.input(desk_op("z"), desk_ins, view_outs, api_name="desk_z",
                       trigger_mode="always_last", **FAST)  # fmt: skip
        z_slider.release(desk_op("z"), desk_ins, view_outs, api_name=False,
                         trigger_mode="always_last", **FAST)  # fmt: skip
        # Enter in the box: keys.js puts the typed text in window.loupeTypedZ and presses the
        # hidden button, whose call carries it in place of z_typed (API callers pass the text).
        typed_ins = [state, o_tmpl, z_typed, o_norm, o_allmk, o_arms, o_sky, *filters, *display]
        z_typed_go.click(desk_op("typed"), typed_ins, view_outs, api_name="desk_z_typed",
                         js=f"(...a) => {{ a = a.slice(0, {len(typed_ins)}); a[2] = "
                            "String(window.loupeTypedZ ?? a[2] ?? ''); return a; }",
                         trigger_mode="always_last", **FAST).then(
            None, None, None, api_name=False,
            js="() => { setTimeout(() => window.loupeZBack && window.loupeZBack(), 50); }",
        )  # fmt: skip
        for btn, step in z_steps:
            btn.click(desk_op("nudge", step), desk_ins, view_outs, api_name=False, **FAST)
        z_adopt.click(desk_op("adopt"), desk_ins, view_outs, api_name="desk_adopt", **FAST)
        t_next.click(desk_op("template"), desk_ins, view_outs, api_name=False, **FAST)
        # -- end desk

    return wire
