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
from operator import attrgetter
from typing import Any

import gradio as gr

from agent.tasks import TASKS
from app import context, views
from app.pages import desk, vet_target, vet_texts, vet_writes
from app.pages import vet as vet_page
from app.plots import drawn_token, stamped, to_json
from app.ui import vet_layout, vet_prefs
from app.ui.vet_layout import CONF_BANDS, SPLITS, STATUSES

# Vet events: no progress overlay on a dozen outputs (it costs the browser a re-layout per
# switch, and a switch is over before an overlay would help).
FAST: dict[str, Any] = {"show_progress": "hidden"}

# -- vet speed: what comes after a move or a decision is built as soon as its handler has
# answered, while the answer travels and the page draws it; the call that hands it to the
# page (on_ahead) then finds it built. One per session, newest kept.
_early_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vet-ahead")
_early: OrderedDict[str, tuple[tuple, Future]] = OrderedDict()
_early_lock = threading.Lock()
EARLY_SESSIONS = 64


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
        c = vet_layout.layout(ctx)
    o_summary, o_markers, o_error, o_norm, o_allmk, o_arms, o_sky = attrgetter(
        "o_summary", "o_markers", "o_error", "o_norm", "o_allmk", "o_arms", "o_sky")(c)  # fmt: skip
    jump_id, jump_btn, f_task, f_band, f_status, f_survey, f_split = attrgetter(
        "jump_id", "jump_btn", "f_task", "f_band", "f_status", "f_survey", "f_split")(c)  # fmt: skip
    o_smooth, o_frame, o_images, jump_task, header, z_info, z_slider = attrgetter(
        "o_smooth", "o_frame", "o_images", "jump_task", "header", "z_info", "z_slider")(c)  # fmt: skip
    z_steps, z_adopt, o_tmpl, t_next, z_typed, z_typed_go, thoughts = attrgetter(
        "z_steps", "z_adopt", "o_tmpl", "t_next", "z_typed", "z_typed_go", "thoughts")(c)  # fmt: skip
    g_plot, z_plot, answer, c_label, c_step, c_expl, c_note = attrgetter(
        "g_plot", "z_plot", "answer", "c_label", "c_step", "c_expl", "c_note")(c)  # fmt: skip
    c_save, comment, comment_btn, message, b_accept, b_reject, b_correct = attrgetter(
        "c_save", "comment", "comment_btn", "message", "b_accept", "b_reject", "b_correct")(c)  # fmt: skip
    b_skip, b_flag, b_prev, b_next, b_undo, v_grade, v_issues = attrgetter(
        "b_skip", "b_flag", "b_prev", "b_next", "b_undo", "v_grade", "v_issues")(c)  # fmt: skip
    v_spectype, active, reason, r_save, ahead_box, drawn_box, target_box = attrgetter(
        "v_spectype", "active", "reason", "r_save", "ahead_box", "drawn_box", "target_box")(c)  # fmt: skip
    rev_box, form_box = attrgetter(
        "rev_box", "form_box")(c)  # fmt: skip

    def wire(demo: gr.Blocks) -> None:
        # -- vet desk: calls carry what keys.js holds for them (the active seconds on the
        # item, what a write names, ...): `from_page` fills a call's last inputs with it just
        # before the call, in order, so a later value may read an earlier one
        active_js = "window.loupeActive ? window.loupeActive() : -1"
        # the page's holder id (a browser tab's, kept across its reloads)
        tab_js = "window.loupeTarget ? window.loupeTarget(false, true) : ''"
        # A write's answer ends with the revision it leaves, read from the box that holds it
        # before keys.js lets the next key go: the box's own change event may come after
        # this step, and a key sent meanwhile named the revision before (refused as stale).
        rev_done_js = ("(v) => { window.loupeRev && window.loupeRev(v); "
                       "window.loupeDone && window.loupeDone(); }")  # fmt: skip
        form_done_js = ("(v) => { try { const f = JSON.parse(v || '{}'); window.loupeRev && "
                        "window.loupeRev(JSON.stringify({cid: f.cid, rev: f.rev})); } "
                        "catch (e) {} window.loupeDone && window.loupeDone(); }")  # fmt: skip

        def from_page(n_inputs: int, *values: str) -> str:
            first = n_inputs - len(values)
            sets = "".join(f"a[{first + k}] = {v}; " for k, v in enumerate(values))
            return f"(...a) => {{ a = a.slice(0, {n_inputs}); {sets}return a; }}"

        def tabbed(st: dict | None, page: Any, request: Any) -> dict:
            # the session serves one page: the holder of its leases (vet_target.holder)
            st = dict(st or views.new_state())
            st["tab"] = vet_target.holder(st, page, request)
            return st

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
                gr.update(choices=view.step_choices,
                          value=view.wrong_step if view.wrong_step in view.step_choices
                          else "none"),  # fmt: skip
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

        def on_load(st, tk, band, status, survey, split, mk, err, sm, fr, im, tgt: str = "",
                    request: gr.Request = None):  # fmt: skip
            ex = context.expert_for(ctx, request)
            st = tabbed(st, tgt, request)
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

        load_ins = [state, *filters, *display, target_box]
        opened = demo.load(on_load, load_ins, [who, *view_outs, *kept_outs], api_name="open",
                           js=from_page(len(load_ins), tab_js))  # fmt: skip
        vet_prefs.wire(ctx, kept_comps, o_summary)
        # -- end remembered desk

        def nav(kind: str):
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im,
                   request: gr.Request, drawn: str | None = None, tgt: str = ""):  # fmt: skip
                ex = context.expert_for(ctx, request)
                st = tabbed(st, tgt, request)
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
                st = tabbed(st, page, request)
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

        # -- every write names its candidate: the revision the store now holds, for keys.js
        rev_box.change(None, rev_box, None, api_name=False,
                       js="(v) => { if (window.loupeRev) window.loupeRev(v); }")  # fmt: skip

        # -- drafts: the boxes' saved values and what the store now holds, for keys.js
        form_box.change(None, form_box, None, api_name=False,
                        js="(v) => { if (window.loupeForm) window.loupeForm(v); "
                           "else window.loupeFormWaiting = v; }")  # fmt: skip

        def then_ahead(dep: Any) -> None:
            dep.then(on_ahead, [state, *filters, *display], ahead_box, api_name=False,
                     **FAST).then(None, ahead_box, None, api_name=False,
                                  js="(v) => { window.loupeAhead && window.loupeAhead(v); }")  # fmt: skip

        move_ins = [state, *filters, *display, drawn_box, target_box]
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
        nav_ins = [state, *filters, *display]
        for comp in display:
            then_ahead(comp.change(nav("refresh"), nav_ins, view_outs,
                                   api_name=False, trigger_mode="always_last", **FAST))  # fmt: skip
        for comp in filters[:3] + filters[4:]:
            then_ahead(comp.input(nav("next"), nav_ins, view_outs,
                                  api_name=False, **FAST))  # fmt: skip
        then_ahead(f_survey.input(nav("next"), nav_ins, view_outs,
                                  api_name=False, **FAST))  # fmt: skip

        def on_jump(st, cid, tk, band, status, survey, split, mk, err, sm, fr, im,
                    request: gr.Request, task=None):  # fmt: skip
            ex = context.expert_for(ctx, request)
            st = tabbed(st, None, request)
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

        # -- vet speed: a decision carries the token of the next candidate keys.js drew at
        # the key press (vet-drawn), as j does, and the id it was pressed on (vet-shown)
        act_ins = [state, *filters, *display, active, drawn_box, target_box]

        def act(action: str):
            def fn(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                   drawn: str | None = None, page: str | None = None,
                   request: gr.Request = None, reason_text: str | None = None):  # fmt: skip
                ex = context.expert_for(ctx, request)
                st = tabbed(st, page, request)
                f, d = (
                    views.QueueFilters(tk, band, status, survey, split),
                    desk.display_with(st, views.Display(mk, err, sm, fr, im)),
                )
                st, view = vet_writes.vet_act(ctx, ex, st, action, f, d, active_seconds=secs,
                                              explanation=reason_text, page=page)  # fmt: skip
                out = show(st, view, drawn)
                _start_ahead(ctx, request, ex, st, f, views.Display(mk, err, sm, fr, im))
                return out

            return fn

        def deciding(n_inputs: int) -> str:
            # the active seconds, the drawn token and what the decision names: the candidate
            # pressed on, with the texts and form kept for it
            return from_page(
                n_inputs,
                active_js,
                "window.loupeDeciding ? window.loupeDeciding() : ''",
                "window.loupeTarget ? window.loupeTarget(true) : ''",
            )

        # Reject opens the reason box, as `r` does (app/keys.js): Enter there, or its button,
        # saves the reject; the API's /reject saves one without a reason
        for btn, name in [(b_accept, "accept"), (b_reject, "reject"), (b_skip, "skip"),
                          (b_flag, "flag")]:  # fmt: skip
            then_ahead(btn.click(act(name), act_ins, view_outs, api_name=name,
                                 js=deciding(len(act_ins)), **FAST))  # fmt: skip

        def on_reason(text, st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                      drawn: str | None = None, page: str | None = None,
                      request: gr.Request = None):  # fmt: skip
            # the page's kept reason for the candidate pressed on (the box may already show
            # the next one's); the box's own text for API callers
            t = vet_target.payload(page)
            kept = vet_texts.page_text(page, t.get("key"), t.get("task"))
            text = kept["reason"] if "reason" in kept else text
            return act("reject")(st, tk, band, status, survey, split, mk, err, sm, fr, im, secs,
                                 drawn, page, request, reason_text=text)  # fmt: skip

        reason_ins = [reason, state, *filters, *display, active, drawn_box, target_box]
        sent = deciding(len(reason_ins))
        for ev in (reason.submit, r_save.click):
            then_ahead(ev(on_reason, reason_ins, view_outs,
                          api_name="reject_reason" if ev == reason.submit else False, js=sent,
                          **FAST))  # fmt: skip

        b_correct.click(None, None, None, js="() => window.loupeOpenCorrect && "
                        "window.loupeOpenCorrect()", api_name=False)  # fmt: skip

        def on_correct(st, label, step, expl, note, tk, band, status, survey, split, mk, err, sm,
                       fr, im, secs, drawn: str | None = None, page: str | None = None,
                       request: gr.Request = None):  # fmt: skip
            ex = context.expert_for(ctx, request)
            st = tabbed(st, page, request)
            f, d = (
                views.QueueFilters(tk, band, status, survey, split),
                desk.display_with(st, views.Display(mk, err, sm, fr, im)),
            )
            if vet_target.payload(page).get("cid") not in (None, ""):
                # the page's: its texts and form as they were at Ctrl+Enter
                label = step = expl = note = None
            st, view = vet_writes.vet_act(
                ctx, ex, st, "correct", f, d, label=label, explanation=expl, wrong_step=step,
                note=note, active_seconds=secs, page=page,
            )  # fmt: skip
            out = show(st, view, drawn)
            _start_ahead(ctx, request, ex, st, f, views.Display(mk, err, sm, fr, im))
            return out

        correct_ins = [state, c_label, c_step, c_expl, c_note, *filters, *display, active,
                       drawn_box, target_box]  # fmt: skip
        sent = deciding(len(correct_ins))
        then_ahead(c_save.click(on_correct, correct_ins, view_outs, api_name="correct", js=sent,
                                **FAST))  # fmt: skip

        # -- every write names its candidate: the target read off the page at the press
        mark_js = "window.loupeTarget ? window.loupeTarget(false) : ''"
        # no state: a mark's answer may come after a later move's, and must not undo it
        mark_outs = [message, rev_box]

        def writing(fn: Callable[..., tuple[dict, str]]):
            def run(st, value, page: str = "", request: gr.Request = None):
                ex = context.expert_for(ctx, request)
                st = tabbed(st, page, request)
                _, msg = fn(ex, st, value, page)
                return msg, vet_target.answered(ctx, ex, st, page)

            return run

        def marked(comp: Any, fn: Callable[..., tuple[dict, str]], api_name: Any,
                   event: Any = None, **kw: Any) -> None:  # fmt: skip
            (event or comp.input)(
                writing(fn),
                [state, comp, target_box],
                mark_outs,
                api_name=api_name,
                js=from_page(3, mark_js),
                **FAST,
                **kw,
            ).then(None, rev_box, None, js=rev_done_js, api_name=False)

        # always_last here too: a second grade clicked while the first is saved is sent after
        # it, never dropped (the radio would show it and the store hold the first)
        marked(v_grade, lambda ex, st, g, page: vet_writes.vet_grade(ctx, ex, st, g, page),
               "grade", trigger_mode="always_last")  # fmt: skip
        # always_last: a flag toggled while the last one is saved is sent after it (the
        # value is the whole set), never dropped as Gradio's default "once" would
        marked(v_issues, lambda ex, st, v, page: desk.set_mark(ctx, ex, st, "issues", v, page),
               "issues", trigger_mode="always_last")  # fmt: skip
        for ev in (v_spectype.submit, v_spectype.blur):
            marked(v_spectype,
                   lambda ex, st, v, page: desk.set_mark(ctx, ex, st, "spectype", v, page),
                   "spectype" if ev == v_spectype.submit else False, event=ev)  # fmt: skip
        # a correction's label and wrong step are its draft until it is saved
        for comp, name in ((c_label, "label"), (c_step, "wrong_step")):
            marked(comp, lambda ex, st, v, page, name=name: vet_writes.vet_choose(
                ctx, ex, st, name, v, page), False, trigger_mode="always_last")  # fmt: skip

        def on_undo(st, mk, err, sm, fr, im, page: str = "", request: gr.Request = None):
            ex = context.expert_for(ctx, request)
            st = tabbed(st, page, request)
            st, view = vet_writes.vet_undo(
                ctx, ex, st, desk.display_with(st, views.Display(mk, err, sm, fr, im)), page
            )
            return show(st, view)

        undo_ins = [state, *display, target_box]
        then_ahead(b_undo.click(on_undo, undo_ins, view_outs, api_name="undo",
                                js=from_page(len(undo_ins), tab_js), **FAST))  # fmt: skip
        # -- end vet desk

        # the box keeps showing the comment: it is the candidate's, saved or in its draft
        # keys.js holds later keys until the comment is saved (its answer ends with loupeDone)
        for ev in (comment_btn.click, comment.submit):
            marked(comment, lambda ex, st, text, page: vet_writes.vet_comment(
                ctx, ex, st, text, page), "comment" if ev == comment_btn.click else False,
                event=ev)  # fmt: skip

        # -- desk: each control refreshes the shown candidate with the new choice
        desk_ins = [state, o_tmpl, z_slider, o_norm, o_allmk, o_arms, o_sky, *filters, *display,
                    target_box]  # fmt: skip
        desk_js = from_page(len(desk_ins), "window.loupeTarget ? window.loupeTarget(false) : ''")

        def desk_op(op: str, step: float = 0.0):
            def fn(st, tmpl, z, norm, allmk, arms, sky, tk, band, status, survey, split, mk, err,
                   sm, fr, im, page: str = "", request: gr.Request = None):  # fmt: skip
                ex = context.expert_for(ctx, request)
                st = tabbed(st, page, request)
                t = vet_target.parse(ctx, st, page)
                if t is not None and t.cid != st.get("current"):
                    st = vet_page.focus(st, t.cid, t.key, t.task)  # the candidate on the page
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
                    st, note = desk.keep_z(ctx, ex, st, page)
                picked = desk.desk_of(st)["template"]
                if op == "template" or picked != before:
                    # the template chosen is drawn over this candidate only, and is the
                    # expert's spectral type for it
                    st, _ = desk.keep(ctx, ex, st, "Template", picked, page, template=picked)
                    st, note = desk.set_mark(ctx, ex, st, "spectype",
                                             "" if picked == "none" else picked, page)  # fmt: skip
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

        # Each desk call is a write on the candidate the page names; keys.js waits for its
        # answer (loupeDone) before the next key, as for a grade.
        def desk_event(ev: Any, op: Any, ins: list[Any], js: str, **kw: Any) -> None:
            ev(op, ins, view_outs, js=js, **FAST, **kw).then(None, form_box, None,
                                                            js=form_done_js,
                                                            api_name=False)  # fmt: skip

        for comp in (o_norm, o_allmk, o_arms, o_sky, o_tmpl):
            desk_event(comp.input, desk_op("option"), desk_ins, desk_js, api_name=False,
                       trigger_mode="always_last")  # fmt: skip
        desk_event(z_slider.input, desk_op("z"), desk_ins, desk_js, api_name="desk_z",
                   trigger_mode="always_last")  # fmt: skip
        desk_event(z_slider.release, desk_op("z"), desk_ins, desk_js, api_name=False,
                   trigger_mode="always_last")  # fmt: skip
        # Enter in the box: keys.js puts the typed text in window.loupeTypedZ and presses the
        # hidden button, whose call carries it in place of z_typed (API callers pass the text).
        typed_ins = [state, o_tmpl, z_typed, o_norm, o_allmk, o_arms, o_sky, *filters, *display,
                     target_box]  # fmt: skip
        n_typed = len(typed_ins)
        z_typed_go.click(desk_op("typed"), typed_ins, view_outs, api_name="desk_z_typed",
                         js=f"(...a) => {{ a = a.slice(0, {n_typed}); a[2] = "
                            "String(window.loupeTypedZ ?? a[2] ?? ''); "
                            f"a[{n_typed - 1}] = window.loupeTarget ? window.loupeTarget(false) "
                            ": ''; return a; }",
                         trigger_mode="always_last", **FAST).then(
            None, form_box, None, api_name=False,
            js=f"(v) => {{ ({form_done_js})(v); "
               "setTimeout(() => window.loupeZBack && window.loupeZBack(), 50); }",
        )  # fmt: skip
        for btn, step in z_steps:
            desk_event(btn.click, desk_op("nudge", step), desk_ins, desk_js, api_name=False)
        desk_event(z_adopt.click, desk_op("adopt"), desk_ins, desk_js, api_name="desk_adopt")
        desk_event(t_next.click, desk_op("template"), desk_ins, desk_js, api_name=False)
        # -- end desk

    return wire
