"""The vet page: the hand-off queue, one candidate's trajectory drawn, the expert's decision.

Each handler takes the `Context`, the acting `Viewer` and the page's state and returns new
state plus a `VetView`. Decisions are recorded through `annotate.review` and every queue
move (next item, jump, lease) through `annotate.queue`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import astuple, dataclass
from typing import Any
from weakref import WeakKeyDictionary

from agent.measure import spectrum_snr
from agent.spectrum import Spectrum, SpectrumError
from agent.trajectory import Step, Trajectory
from annotate import drafts, review
from annotate.queue import Filters as StoreFilters
from app import plots
from app.context import USER_ERRORS, Context, Viewer, refusal
from app.markers import markers_for
from app.pages import desk
from app.pages.vet_html import finite_or_none, header_html, steps_html, thought_html
from app.pages.vet_texts import ALL_TEXTS, page_text
from app.render_md import escape, render_md
from app.shown import shown
from app.views import Display, QueueFilters, StepView, VetView, new_state

HISTORY = 200  # candidates kept for k (previous) per session
MAX_PANELS = 12  # step panels drawn per candidate (Spec-o3 trajectories zoom a few times)


IMAGE_PANEL_HEIGHT = 470  # px per step when the model's images are shown beside the panels


def _model_image(spec: Spectrum, step: Step, renderer: str) -> Any:
    from agent.tool import render_step

    return render_step(spec, step, renderer)


@dataclass
class _Panels:
    """What a candidate's page draws from its spectrum and trajectory (not its reviews)."""

    meta: dict[str, Any]  # ra, dec, snr, simulated, survey from the file
    gfig: dict[str, Any]
    steps: list[StepView]
    choices: list[str]
    answer: str
    suggested: str | None
    zoom_fig: dict[str, Any] | None
    thoughts_html: str
    redshift: dict[str, Any] | None
    notes: str = ""  # a render failure, said in the page's message


# Panels are built ahead while the expert reads (`prefetch`) and again when they come back
# with k: built once per (store, candidate, trajectory, display), newest kept. They depend on
# the spectrum, the trajectory and the display only, so decisions leave them valid; the
# header (reviews, grade) is built fresh every time.
PANEL_CACHE = 48
_panel_caches: WeakKeyDictionary[Any, OrderedDict[tuple, _Panels]] = WeakKeyDictionary()
_panel_lock = threading.Lock()


def _panels(
    ctx: Context, info: dict[str, Any], traj: Trajectory | None, display: Display
) -> _Panels:
    key = (info["cid"], info.get("tid"), astuple(display))
    with _panel_lock:
        cache = _panel_caches.setdefault(ctx.store, OrderedDict())
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
    panels = _build_panels(ctx, info, traj, display)
    with _panel_lock:
        cache[key] = panels
        while len(cache) > PANEL_CACHE:
            cache.popitem(last=False)
    return panels


def _build_panels(
    ctx: Context, info: dict[str, Any], traj: Trajectory | None, display: Display
) -> _Panels:
    spec = ctx.read.load_spectrum(info["cid"])
    meta = {
        # the SNR the inspector measures (and says in its thoughts), not the file's keyword
        "ra": spec.meta.ra, "dec": spec.meta.dec, "snr": finite_or_none(spectrum_snr(spec)),
        "simulated": spec.meta.simulated, "survey": spec.meta.survey,
    }  # fmt: skip
    markers = (
        markers_for(info["task"], all_markers=display.all_markers) if display.markers else None
    )
    template, tz = desk.overlay(ctx, display, info["id"], spec, traj)
    # the spectrum as the display shows it, once: every panel, trace and marker reads it
    drawn = shown(
        spec, "observed" if display.frame == "observed" else "rest",
        normalised=display.normalised, smooth_width=int(display.smooth or 0),
        show_error=display.error, arms=display.arms, sky=display.sky,
    )  # fmt: skip
    gfig = plots.global_panel(drawn, traj, markers=markers, template=template, template_z=tz,
                              marker_z=tz)  # fmt: skip
    steps: list[StepView] = []
    choices = ["none"]
    answer = ""
    notes = ""
    if traj is not None:
        # the lines where the shown z puts them
        for i, (step, fig) in enumerate(plots.step_panels(drawn, traj, markers=markers,
                                                           marker_z=tz)):  # fmt: skip
            choices.append(str(i + 1))
            if step.answer is not None and fig is None:
                continue  # the answer is shown below the panels
            if fig is None:  # a refused or malformed zoom: its row says so
                fig = plots.empty_figure(f"step {i + 1}: no zoom", height=plots.PANEL_HEIGHT)
            img = None
            if display.images and step.window is not None:
                try:
                    img = _model_image(spec, step, traj.renderer)
                except Exception as e:  # a render failure must not hide the candidate
                    notes += "\n\n" + refusal(f"step {i + 1}: image not rendered", e)
            reading = traj.steps[i + 1] if i + 1 < len(traj.steps) else None
            steps.append(StepView(fig, thought_html(i, step, reading), img))
        final = next((s for s in reversed(traj.steps) if s.answer is not None), None)
        state = f" · state {escape(traj.state)}" if traj.state != "done" else ""
        err = f"<br><span style='color:#c1121f'>{escape(traj.error)}</span>" if traj.error else ""
        answer = (
            f'<div class="loupe-answer"><b>Agent answer: {escape(traj.verdict or "none")}</b>'
            f"{state}{render_md(traj.explanation or (final.explanation if final else ''))}"
            f"{err}</div>"
        )
    suggested = None
    if traj is not None and traj.verdict in ("YES", "NO"):
        suggested = "NO" if traj.verdict == "YES" else "YES"
    steps = steps[:MAX_PANELS]
    height = IMAGE_PANEL_HEIGHT if display.images else plots.PANEL_HEIGHT
    zoom_fig = None
    if steps:
        zoom_fig = plots.stack_panels(
            [sv.fig for sv in steps], panel_height=height, revision=str(info["id"])
        )
    for fig in (gfig, zoom_fig):
        if fig is not None:
            fig.setdefault("layout", {})["meta"] = {"candidate": str(info["id"])}
    return _Panels(
        meta, gfig, steps, choices, answer, suggested, zoom_fig, steps_html(steps, height),
        desk.redshift_info(display, info["id"], spec, traj), notes,
    )  # fmt: skip


def build_view(
    ctx: Context,
    info: dict[str, Any],
    traj: Trajectory | None,
    display: Display,
    message: str = "",
) -> VetView:
    """The whole vet page for one candidate, from its record and its trajectory."""
    t0 = time.perf_counter()
    try:
        p = _panels(ctx, info, traj, display)
    except (SpectrumError, OSError) as e:
        return VetView(
            info["id"], header_html(info, traj), plots.empty_figure(f"cannot read spectrum: {e}"),
            [], "", message=f"**{escape(info['id'])}**: cannot read its spectrum: {escape(e)}",
        )  # fmt: skip
    for k in ("ra", "dec", "snr"):
        if info.get(k) is None:
            info[k] = p.meta[k]
    info["simulated"] = info.get("simulated") or p.meta["simulated"]
    if not info.get("survey"):
        info["survey"] = p.meta["survey"]
    view = VetView(
        info["id"],
        header_html(info, traj),
        p.gfig,
        p.steps,
        p.answer,
        correct_label=p.suggested,
        explanation="",  # the expert's own reasoning; the agent's is contradicted
        step_choices=list(p.choices),
        message=message + p.notes,
        zoom_fig=p.zoom_fig,
        thoughts_html=p.thoughts_html,
    )
    view.redshift = p.redshift
    view.server_ms = (time.perf_counter() - t0) * 1000
    return view


def empty_view(message: str) -> VetView:
    return VetView(None, "", plots.empty_figure(message), [], "", message=message)


def _info(ctx: Context, cid: int, ex: Viewer) -> tuple[dict[str, Any], Trajectory | None]:
    c = ctx.read.candidate(cid)
    traj = ctx.read.trajectory(c.trajectory_id) if c.trajectory_id is not None else None
    reviews = review.decisions(ctx.store, cid)  # a taken-back review is no decision
    mine = review.my_decision(ctx.store, ex.name, cid)
    info = {
        "cid": c.id, "tid": c.trajectory_id, "id": c.key, "task": c.task, "survey": c.survey, "split": c.split,
        "spectrum_ref": c.spectrum_ref, "reviews": reviews, "gold": c.is_gold,
        "my_review": None if mine is None else f"{mine.action} → {mine.label or '–'}",
        "my_review_row": mine, "status": c.status,
        "grade": None if mine is None else mine.grade,
    }  # fmt: skip
    return info, traj


def _show(
    ctx: Context, ex: Viewer, state: dict, cid: int | None, display: Display, message: str = ""
) -> tuple[dict, VetView]:
    state = dict(state or new_state())
    if cid is None:
        state.update(current=None, key=None, shown_at=None)
        return state, _with_surveys(ctx, empty_view(message or "Nothing left to vet here."))
    info, traj = _info(ctx, cid, ex)
    if state.get("current") != cid:
        state["shown_at"] = time.time()  # the clock for "seconds on item" starts now
    state["current"], state["key"], state["task"] = cid, info["id"], info["task"]
    mine = info["my_review_row"]
    # the candidate's own draft: its grade, flags, type, redshift and template, never the
    # last candidate's
    draft = drafts.get(ctx.store, ex.name, cid)
    state = desk.follow(state, info["id"], draft, mine)
    display = desk.display_with(state, display)
    if mine is None and draft.get("grade"):
        info["grade"] = draft["grade"]  # chosen, saved with the decision
    view = build_view(ctx, info, traj, display, message)
    if mine is not None and mine.action == "correct":
        view.correct_label = mine.label
        view.explanation = mine.explanation or ""
    view.grade = info.get("grade")
    marks = desk.marks(draft, mine)
    view.issues, view.spectype = marks["issues"], marks["spectype"]
    view.template = display.template
    if view.redshift is not None:
        view.redshift = {**view.redshift, "decided": None if mine is None else mine.action}
    view.form = {"key": info["id"], "task": info["task"], "expert": ex.name,
                 "store": ctx.store_token(),
                 "reason": (mine.explanation or "") if mine is not None and mine.action == "reject"
                 else "",
                 "comment": (mine.comment if mine is not None else draft.get("comment")) or "",
                 "explanation": view.explanation,
                 "note": (mine.comment or "") if mine is not None and mine.action == "correct"
                 else ""}  # fmt: skip
    return state, _with_surveys(ctx, view)


def _with_surveys(ctx: Context, view: VetView) -> VetView:
    view.surveys = ctx.surveys()
    return view


def store_filters(f: QueueFilters):
    """The page's filters as the store's."""
    band = f.confidence_range()
    status = None if f.status in (None, "", "any") else f.status
    return StoreFilters(
        task=None if f.task in (None, "", "all") else f.task,
        confidence_min=band[0] if band else None,
        confidence_max=band[1] if band else None,
        status=status,
        survey=None if f.survey in (None, "", "all") else f.survey,
        split=None if f.split in (None, "", "all") else f.split,
    )


def _push(state: dict, cid: int) -> dict:
    hist = [h for h in (state.get("history") or [])]
    hist.append(cid)
    hist = hist[-HISTORY:]
    state.update(history=hist, pos=len(hist) - 1)
    return state


def vet_next(
    ctx: Context, ex: Viewer | None, state: dict, filters: QueueFilters, display: Display
) -> tuple[dict, VetView]:
    """Forward: through this session's history first (after k), then the hand-off queue.
    Moving records nothing: the items this session has shown are passed over (only `s`
    records a skip)."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    hist = list(state.get("history") or [])
    pos = int(state.get("pos", -1))
    queue = ctx.queue()
    gone: list[str] = []
    for i in range(pos + 1, len(hist)):  # through the history first, to items still ours
        if _held(ctx, queue, ex, hist[i], gone):
            state["pos"] = i
            return _show(ctx, ex, state, hist[i], display, _gone(gone))
    try:
        cid = queue.next_id(ex.name, store_filters(filters), exclude=hist)
    except (*USER_ERRORS, ValueError) as e:  # a bad filter value names itself
        return _show(ctx, ex, state, state.get("current"), display, f"Queue: {escape(e)}")
    if cid is None:
        return _show(ctx, ex, state, None, display,
                     _gone(gone) + "Nothing left in the queue for these filters.")  # fmt: skip
    return _show(ctx, ex, _push(state, cid), cid, display, _gone(gone))


def _held(ctx: Context, queue: Any, ex: Viewer, cid: int, gone: list[str]) -> bool:
    """Whether the expert may still decide `cid` (leased to them if so); the key of an item
    another expert has taken meanwhile is added to `gone`."""
    if queue.hold(ex.name, cid):
        return True
    gone.append(ctx.read.candidate(cid).key)
    return False


def _gone(keys: list[str]) -> str:
    if not keys:
        return ""
    return (f"Passed over {escape(', '.join(keys))}: taken by another expert meanwhile "
            "(the team's overlap is reached). ")  # fmt: skip


def vet_prev(
    ctx: Context, ex: Viewer | None, state: dict, filters: QueueFilters, display: Display
) -> tuple[dict, VetView]:
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    hist = list(state.get("history") or [])
    pos = int(state.get("pos", -1))
    queue = ctx.queue()
    gone: list[str] = []
    for i in range(pos - 1, -1, -1):  # back through the history, to items still ours
        if _held(ctx, queue, ex, hist[i], gone):
            state["pos"] = i
            return _show(ctx, ex, state, hist[i], display, _gone(gone))
    cid = state.get("current")
    return _show(ctx, ex, state, cid, display,
                 _gone(gone) + "This is the first candidate of the session.")  # fmt: skip


def vet_refresh(ctx: Context, ex: Viewer | None, state: dict, display: Display):
    """Same candidate, other display options (markers, smoothing, frame, images)."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    return _show(ctx, ex, state, state.get("current"), display)


def tasks_of(ctx: Context, key: str) -> list[str]:
    """The tasks `key` is a candidate of (an object may be screened for several)."""
    from agent.tasks import TASKS

    return [t for t in TASKS if (c := ctx.read.find_candidate(key, t)) and c.key == key]


def vet_jump(
    ctx: Context,
    ex: Viewer | None,
    state: dict,
    key: str,
    display: Display,
    task: str | None = None,
):
    """Jump to a candidate by its id (leased to this expert; others holding it are named).
    An id that is a candidate of several tasks opens nothing until a task is chosen:
    `view.jump_tasks` lists them."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    key = (key or "").strip()
    state = dict(state or new_state())
    if not key:
        return _show(ctx, ex, state, state.get("current"), display, "Type a candidate id.")
    task = None if task in (None, "", "all") else task
    if task is None:
        tasks = tasks_of(ctx, key)
        if len(tasks) > 1:
            st, view = _show(ctx, ex, state, state.get("current"), display,
                             f"**{escape(key)}** is a candidate of {len(tasks)} tasks "
                             f"({escape(', '.join(tasks))}): choose one.")  # fmt: skip
            view.jump_tasks = tasks
            return st, view
    info, others = ctx.queue().jump(ex.name, key, task)
    if info is None:
        return _show(ctx, ex, state, state.get("current"), display,
                     f"No candidate **{escape(key)}**.")  # fmt: skip
    msg = f"Also open for {escape(', '.join(others))}." if others else ""
    return _show(ctx, ex, _push(state, info.id), info.id, display, msg)


def vet_act(
    ctx: Context,
    ex: Viewer | None,
    state: dict,
    action: str,
    filters: QueueFilters,
    display: Display,
    *,
    label: str | None = None,
    explanation: str | None = None,
    wrong_step: str | int | None = None,
    comment: str | None = None,
    active_seconds: float | None = None,
    shown: str | None = None,
    page: str | dict | None = None,
) -> tuple[dict, VetView]:
    """Record the expert's decision on the shown candidate at once, then show the next.

    The decision saves the candidate's whole draft (`annotate.drafts`) and `page`, the
    texts the page kept for it ({"key", "comment", "reason", "explanation"}, as JSON; used
    only when its key is the shown candidate's).

    `shown` is the id the page showed when the key was pressed (the page draws the next
    candidate at the press and sends the decision later): a decision meant for another
    candidate than this session's is refused, never applied to the wrong one.

    `active_seconds` is the page's count of active time on the item (paused while the tab
    is hidden or after IDLE_SECONDS without input); without it (an API call) the wall clock
    since the item was shown is used. A grade chosen with 1-4 is saved with the decision."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    cid = state.get("current")
    if action not in review.DECISIONS:
        return _show(ctx, ex, state, cid, display, f"Unknown action {escape(action)}.")
    if cid is None:
        return vet_next(ctx, ex, state, filters, display)
    if shown and shown != str(state.get("key")):
        return _show(ctx, ex, state, cid, display,
                     f"Not saved: your **{escape(action)}** was pressed on {escape(shown)}, but "
                     f"this page is on {escape(state.get('key'))} now (an earlier key's answer "
                     "brought it); decide it again.")  # fmt: skip
    step = None
    if wrong_step not in (None, "", "none"):
        try:
            step = int(wrong_step) - 1  # shown 1-based, stored 0-based
        except (TypeError, ValueError):
            return _show(ctx, ex, state, cid, display, f"Bad step number {escape(wrong_step)}.")
    if action == "correct" and label not in ("YES", "NO"):
        return _show(ctx, ex, state, cid, display, "Choose the correct label (YES or NO) first.")
    seconds = _seconds(state, active_seconds)
    mine = review.my_decision(ctx.store, ex.name, cid)
    # The whole draft goes with the decision: the store's (grade, flags, type, redshift, a
    # comment given through the API) and the text the page kept for this candidate.
    fields = drafts.take(ctx.store, ex.name, cid)
    if mine is not None:  # a decision revised: what it holds stays unless changed
        kept = {k: getattr(mine, k) for k in drafts.SAVED if getattr(mine, k) is not None}
        fields = {**kept, **fields}
    typed = page_text(page, state.get("key"), state.get("task"))
    # a correction's note first, else the comment typed on the page (even emptied), else the
    # draft's (given through the API) or the decision's
    kept_note = fields.pop("comment", None)
    note = comment or (typed["comment"] if "comment" in typed else kept_note)
    if explanation is None and action in ("reject", "correct"):
        explanation = typed.get("reason" if action == "reject" else "explanation")
    queue = ctx.queue()
    if not queue.hold(ex.name, cid):  # served to another expert while this one looked
        st, view = vet_next(ctx, ex, state, filters, display)
        view.message = (f"Not saved: {escape(state.get('key') or cid)} was taken by another "
                        "expert meanwhile (the team's overlap is reached). " + view.message)  # fmt: skip
        return st, view
    try:
        review.decide(ctx.store, ex.name, cid, action, label=label, explanation=explanation,
                      wrong_step=step, comment=note or None, seconds=seconds,
                      overlap=queue.config.overlap, **fields)  # fmt: skip
    except Exception as e:  # refused (another's review, bad value): say so, keep the item
        return _show(ctx, ex, state, cid, display, refusal("Not saved", e))
    try:  # the decision holds the draft now; one left behind is ignored beside a decision
        drafts.settle(ctx.store, ex.name, cid)
    except Exception as e:
        refusal("Draft not cleared", e)  # logged: the decision itself is saved
    key = state.get("key") or cid
    saved = f"Saved **{action}** on {escape(key)}" + (
        f" ({seconds:.1f} s active on item)." if seconds is not None else "."
    )
    if action in ("correct", "reject") and explanation and about_the_agent(explanation):
        saved += " " + AGENT_NOTE_WARNING
    st, view = vet_next(ctx, ex, state, filters, display)
    view.message = saved + (" " + view.message if view.message else "")
    # the page drops the texts it kept for it: the decision holds them
    view.form = {**view.form, "saved": {"key": str(key), "task": state.get("task"),
                                        "texts": list(ALL_TEXTS)}}  # fmt: skip
    return st, view


def vet_comment(ctx: Context, ex: Viewer | None, state: dict, text: str) -> tuple[dict, str]:
    """A comment on the shown candidate: added to this expert's review if there is one,
    else kept in their draft on it and saved with their decision."""
    state = dict(state or new_state())
    if ex is None:
        return state, "Log in first."
    cid = state.get("current")
    text = (text or "").strip()[: review.MAX_TEXT]
    if not cid:
        return state, "Nothing to comment on."
    if not text:
        return state, "Write a comment first."
    try:
        mine = drafts.set_field(ctx.store, ex.name, cid, comment=text)
    except Exception as e:
        return state, refusal("Comment not saved", e)
    if mine is None:
        return state, (f"Comment kept in your draft on {escape(state.get('key'))}: it is "
                       "saved with your decision.")  # fmt: skip
    return state, f"Comment saved on {escape(state.get('key'))} (your {escape(mine.action)})."


IDLE_SECONDS = 60  # the page stops counting active time after this long without input

# Reasoning the model should learn is written about the spectrum, as the model would; these
# read like a note about the agent instead.
_ABOUT_AGENT = re.compile(r"\b(the agent|the model|mislabel\w*|the ai)\b", re.IGNORECASE)
AGENT_NOTE_WARNING = (
    "Note: the reasoning reads like a note about the agent; the model learns it as its own "
    "words, so write it about the spectrum, in the first person (notes for other experts go "
    "in the note box)."
)


def about_the_agent(text: str) -> bool:
    """Whether reasoning meant for training reads like a note about the agent.

    >>> about_the_agent("The agent mislabelled this"), about_the_agent("I see C2 at 5165 Å")
    (True, False)
    """
    return bool(_ABOUT_AGENT.search(text or ""))


def _seconds(state: dict, active: float | None) -> float | None:
    if active is not None:
        try:
            v = float(active)
        except (TypeError, ValueError):
            v = -1.0
        if v >= 0 and v == v and v != float("inf"):
            return round(v, 3)
    shown_at = state.get("shown_at")
    return round(max(0.0, time.time() - shown_at), 3) if shown_at else None


def vet_grade(ctx: Context, ex: Viewer | None, state: dict, grade: Any) -> tuple[dict, str]:
    """Keys 1-4: the expert's grade for the shown candidate. Added to their decision as a
    revision if they have decided it, else kept in their draft and saved with the decision."""
    state = dict(state or new_state())
    if ex is None:
        return state, "Log in first."
    cid = state.get("current")
    try:
        g = int(grade)
    except (TypeError, ValueError):
        return state, f"A grade is 1-4 (got {escape(grade)})."
    if g not in review.GRADES:
        return state, f"A grade is 1-4 (got {g})."
    if cid is None:
        return state, "Nothing to grade."
    try:
        mine = drafts.set_field(ctx.store, ex.name, cid, grade=g)
    except Exception as e:
        return state, refusal("Grade not saved", e)
    if mine is None:
        return state, (f"Grade {g} kept in your draft on {escape(state.get('key'))}: it is "
                       "saved with your decision.")  # fmt: skip
    return state, f"Grade {g} saved on {escape(state.get('key'))} (your {escape(mine.action)})."


def vet_undo(
    ctx: Context, ex: Viewer | None, state: dict, display: Display
) -> tuple[dict, VetView]:
    """`u`: take back this expert's last decision (kept in the review's history) and show
    that candidate again."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    shown = state.get("current")
    try:
        done = review.undo(ctx.store, ex.name, lease_seconds=ctx.queue().config.lease_seconds,
                           keep=[shown] if shown is not None else [])  # fmt: skip
    except Exception as e:
        return _show(ctx, ex, state, shown, display, refusal("Not undone", e))
    if done is None:
        return _show(ctx, ex, state, shown, display, "Nothing to undo.")
    last = done.taken
    if done.now.action == "undo":  # undecided again: the undone values are its draft
        drafts.restore(ctx.store, ex.name, last.candidate_id, last)
    hist = list(state.get("history") or [])
    if last.candidate_id in hist:
        state["pos"] = hist.index(last.candidate_id)
    else:
        state = _push(state, last.candidate_id)
    state["current"] = None  # the clock starts again
    st, view = _show(ctx, ex, state, last.candidate_id, display)
    now = done.now
    back = ("it is undecided again" if now.action == "undo"
            else f"your earlier **{escape(now.action)}** is back")  # fmt: skip
    view.message = f"Took back your **{escape(last.action)}**: {back}."
    # the undone decision's texts go back into the form (keys.js keeps them as its draft)
    view.form = {**view.form, "restore": {
        "comment": last.comment or "",
        "reason": (last.explanation or "") if last.action == "reject" else "",
        "explanation": (last.explanation or "") if last.action == "correct" else "",
    }}  # fmt: skip
    if done.others:
        view.message += f" Also open for {escape(', '.join(done.others))}."
    return st, view


def prefetch(
    ctx: Context, ex: Viewer | None, state: dict, filters: QueueFilters, display: Display
) -> dict[str, Any] | None:
    """The candidates j and k would show from here, built while the expert reads, so the
    page can draw them at the key press: {"for": shown id, "next"/"after"/"prev": {"key",
    "header", "global" (the figure's JSON), "token"}}. "after" is the one that follows
    "next": a second decision pressed before the server has answered the first is drawn at
    its key press too.

    The next two items of the hand-off queue are leased now (the queue serves an expert the
    items they hold first, oldest lease first, so j, a decision or a skip brings exactly
    these); their panels are kept in the panel cache, so the server's answer to the key is
    cheap too, and "after" is built once: it is the next "next"."""
    state = state or {}
    cid, key = state.get("current"), state.get("key")
    if ex is None or cid is None:
        return None
    hist = list(state.get("history") or [])
    pos = int(state.get("pos", -1))
    out: dict[str, Any] = {"for": key}
    try:
        queue = ctx.queue()

        def following(i: int, keep: list[int]) -> int | None:
            # through the history first (as vet_next), then the queue; the items shown and
            # drawn ahead keep their leases
            if 0 <= i < len(hist):
                return hist[i]
            return queue.next_id(ex.name, store_filters(filters), exclude=[*hist, *keep],
                                 keep=keep)  # fmt: skip

        nxt = following(pos + 1, [cid])
        after = None if nxt is None else following(pos + 2 if pos + 1 < len(hist) else len(hist),
                                                   [cid, nxt])  # fmt: skip
        prev = hist[pos - 1] if 0 < pos < len(hist) else None
        for name, other in (("next", nxt), ("after", after), ("prev", prev)):
            if other is None or other == cid or (name == "after" and other == nxt):
                continue
            info, traj = _info(ctx, other, ex)
            view = build_view(ctx, info, traj, display)
            if view.global_fig is None or view.message:
                continue  # an unreadable spectrum: the server's answer says so
            fig = plots.to_json(view.global_fig)
            out[name] = {"key": info["id"], "header": view.header_html,
                         "global": plots.to_json(plots.stamped(view.global_fig, fig)),
                         "token": plots.drawn_token(view, fig)}  # fmt: skip
    except (*USER_ERRORS, ValueError):
        return None  # the key press asks again and says what is wrong
    return out
