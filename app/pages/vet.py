"""The vet page: the hand-off queue, one candidate's trajectory drawn, the expert's decision.

Each handler takes the `Context`, the acting `Viewer` and the page's state and returns new
state plus a `VetView`. Decisions are recorded through `annotate.review` and every queue
move (next item, jump, lease) through `annotate.queue`.
"""

from __future__ import annotations

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
        # what a write from the page names: the revision it saw, and its own decision
        "rev": review.revision(ctx.store, cid), "mine": "" if mine is None else mine.action,
    }  # fmt: skip
    return info, traj


def _correction(draft: dict[str, Any], mine: Any, suggested: str | None) -> tuple[Any, str]:
    """The correct panel's label and wrong step for the candidate: chosen in its panel and
    not saved yet (the draft), else its saved correction's (or a reject's step), else the
    label opposite to the agent's and no step."""
    label = draft.get("label")
    if label is None:
        label = mine.label if mine is not None and mine.action == "correct" else suggested
    step = draft.get("wrong_step")
    if step is None and mine is not None and mine.action in ("correct", "reject"):
        step = None if mine.wrong_step is None else int(mine.wrong_step) + 1
    return label, "none" if step is None else str(step)


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
    # the candidate's own draft: its grade, flags, type, redshift, template and a
    # correction's choices, never the last candidate's
    draft = drafts.get(ctx.store, ex.name, cid)
    state = desk.follow(state, info["id"], draft, mine, desk.template_names(ctx))
    display = desk.display_with(state, display)
    if mine is None and draft.get("grade"):
        info["grade"] = draft["grade"]  # chosen, saved with the decision
    view = build_view(ctx, info, traj, display, message)
    view.correct_label, view.wrong_step = _correction(draft, mine, view.correct_label)
    if mine is not None and mine.action == "correct":
        view.explanation = mine.explanation or ""
    view.grade = info.get("grade")
    marks = desk.marks(draft, mine)
    view.issues, view.spectype = marks["issues"], marks["spectype"]
    view.template = display.template
    if view.redshift is not None:
        view.redshift = {**view.redshift, "decided": None if mine is None else mine.action}
    corrected = mine is not None and mine.action == "correct"
    view.form = {"key": info["id"], "task": info["task"], "cid": info["cid"],
                 "rev": info["rev"], "mine": info["mine"], "expert": ex.name,
                 "store": ctx.store_token(),
                 "reason": (mine.explanation or "") if mine is not None and mine.action == "reject"
                 else "",
                 "comment": (mine.comment if mine is not None else draft.get("comment")) or "",
                 "explanation": view.explanation,
                 "note": (mine.note or "") if corrected else ""}  # fmt: skip
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
        if _held(ctx, queue, ex, hist[i], gone, holder_of(state)):
            state["pos"] = i
            return _show(ctx, ex, state, hist[i], display, _gone(gone))
    tab = holder_of(state)
    try:
        cid = queue.next_id(ex.name, store_filters(filters), exclude=hist, holder=tab)
    except (*USER_ERRORS, ValueError) as e:  # a bad filter value names itself
        return _show(ctx, ex, state, state.get("current"), display, f"Queue: {escape(e)}")
    if cid is None:
        return _show(ctx, ex, state, None, display,
                     _gone(gone) + why_empty(ctx, ex, filters, tab, len(hist)))  # fmt: skip
    return _show(ctx, ex, _push(state, cid), cid, display, _gone(gone))


def holder_of(state: dict | None) -> str:
    """The page (browser tab) the session serves: what its leases are held by."""
    return str((state or {}).get("tab") or "")


def why_empty(ctx: Context, ex: Viewer, filters: QueueFilters, tab: str, seen: int) -> str:
    """Why the queue serves nothing, and what remains (`annotate.queue.Queue.census`)."""
    f = store_filters(filters)
    got = ctx.queue().census(ex.name, f, holder=tab)
    parts = [f"{got['candidates']} candidate(s) match"]
    for k, words in (("decided_by_you", "decided by you"),
                     ("enough_reviews", "have the reviews the team's overlap asks for"),
                     ("auto_accepted", "are left to the agent (it is at least "
                      f"{got['auto_accept']:.0%} sure: the team's `auto_accept`)"),
                     ("audit_waiting", "are audit items waiting to be served"),
                     ("other_tabs", "are open in another tab of yours"),
                     ("other_experts", "are held by other experts now")):  # fmt: skip
        if got.get(k):
            parts.append(f"{got[k]} {words}")
    if seen:
        parts.append(f"{seen} were shown in this tab already (k goes back to them)")
    default = all(v in (None, "", "all", "any") for v in vars(filters).values())
    scope = "these filters (all at their defaults)" if default else "these filters"
    return f"Nothing left in the queue for {scope}: " + "; ".join(parts) + "."


def focus(state: dict, cid: int, key: str = "", task: str = "") -> dict:
    """The session's state moved to candidate `cid` (where a write named it), so that j and k
    go on from there: its place in the history, or added to it."""
    state = dict(state or new_state())
    if state.get("current") != cid:
        hist = list(state.get("history") or [])
        if cid in hist:
            state["pos"] = len(hist) - 1 - hist[::-1].index(cid)
        else:
            state = _push(state, cid)
        state["shown_at"] = time.time()
    state["current"] = cid
    if key:
        state["key"], state["task"] = key, task or state.get("task")
    return state


def _held(ctx: Context, queue: Any, ex: Viewer, cid: int, gone: list[str], tab: str = "") -> bool:
    """Whether this page may still decide `cid` (leased to it if so); the key of an item
    another expert (or another tab of the expert's) has taken meanwhile is added to `gone`."""
    if queue.hold(ex.name, cid, tab):
        return True
    gone.append(ctx.read.candidate(cid).key)
    return False


def _gone(keys: list[str]) -> str:
    if not keys:
        return ""
    return (f"Passed over {escape(', '.join(keys))}: taken by another expert (the team's "
            "overlap is reached) or open in another tab of yours meanwhile. ")  # fmt: skip


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
        if _held(ctx, queue, ex, hist[i], gone, holder_of(state)):
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
    info, others = ctx.queue().jump(ex.name, key, task, holder=holder_of(state))
    if info is None:
        return _show(ctx, ex, state, state.get("current"), display,
                     f"No candidate **{escape(key)}**.")  # fmt: skip
    msg = f"Also open for {escape(', '.join(others))}." if others else ""
    return _show(ctx, ex, _push(state, info.id), info.id, display, msg)


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
                                 keep=keep, holder=holder_of(state))  # fmt: skip

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
