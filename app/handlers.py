"""Everything the pages do, as plain functions over plain values.

Each function takes the `Context` (the store and the server's settings), the acting
expert and the page's state, and returns new state plus a view record; the Gradio layer
(`app.ui`) only maps those records onto components. Tests call these directly.

Writes go through `annotate` (reviews, queue leases, authored trajectories, exports), which
records them in the store with the acting expert and an audit event. Permission checks
happen here, before any write: with login on, anonymous callers get nothing, experts write
only as themselves, and only admins export or manage experts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from agent.spectrum import Spectrum, SpectrumError
from agent.trajectory import Step, Trajectory
from app import plots
from app.render_md import escape, render_md

MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # one spectrum file; survey files are a few MB at most
HISTORY = 200  # candidates kept for k (previous) per session
MAX_PANELS = 12  # step panels drawn per candidate (Spec-o3 trajectories zoom a few times)


class AccessError(LoupeError, PermissionError):
    """The caller may not do this (not logged in, not an admin, not their review)."""


@dataclass
class Context:
    store: Any  # db.store.Store
    login: bool = False
    data_roots: list[Path] = field(default_factory=list)
    local_expert: str = "local"  # who acts in single-user mode
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    policy: str = "rules"
    export_dir: Path = Path("exports")
    queue: Any = None  # db.store.QueueConfig; None = the team's stored settings
    _surveys: tuple[float, list[str]] = (0.0, [])

    def queue_config(self):
        if self.queue is not None:
            return self.queue
        from annotate.queue import Queue

        return Queue.from_settings(self.store).config

    def surveys(self) -> list[str]:
        """Surveys present, for the filter (cached a minute: it is a full scan)."""
        t, names = self._surveys
        if time.time() - t > 60:
            names = self.store.surveys()
            self._surveys = (time.time(), names)
        return names


@dataclass
class Expert:
    name: str
    role: str = "expert"

    @property
    def admin(self) -> bool:
        return self.role == "admin"


# -- vet page records ---------------------------------------------------------------------


@dataclass
class Filters:
    task: str = "all"
    band: str = "all"  # "all" or "lo-hi" on P(YES)
    status: str = "any"  # any / unreviewed / reviewed / conflict / flagged
    survey: str = "all"
    split: str = "all"

    def confidence_range(self) -> tuple[float, float] | None:
        if not self.band or self.band == "all":
            return None
        lo, hi = (float(v) for v in self.band.split("-"))
        return lo, hi


@dataclass
class Display:
    markers: bool = True
    error: bool = True
    smooth: int = 0
    frame: str = "rest"
    images: bool = False


@dataclass
class StepView:
    fig: dict[str, Any] | None
    thought_html: str
    image: Any = None  # PIL image the model saw, when asked for


@dataclass
class VetView:
    candidate_id: str | None
    header_html: str
    global_fig: dict[str, Any] | None
    steps: list[StepView]
    answer_html: str
    correct_label: str | None = None
    explanation: str = ""
    step_choices: list[str] = field(default_factory=lambda: ["none"])
    message: str = ""
    surveys: list[str] = field(default_factory=list)
    server_ms: float = 0.0
    # What the page draws: the step panels as one figure, and beside it each step's
    # thought (and image) in a block of the same height, so step k sits next to panel k.
    zoom_fig: dict[str, Any] | None = None
    thoughts_html: str = ""


IMAGE_PANEL_HEIGHT = 470  # px per step when the model's images are shown beside the panels


def _png_uri(img: Any) -> str:
    import base64

    from agent.render import to_png

    return "data:image/png;base64," + base64.b64encode(to_png(img)).decode("ascii")


def _steps_html(steps: list[StepView], height: int) -> str:
    blocks = []
    for i, sv in enumerate(steps):
        img = ""
        if sv.image is not None:
            img = (f'<img class="loupe-model-image" src="{_png_uri(sv.image)}" '
                   f'alt="step {i + 1}: the image the model saw">')  # fmt: skip
        blocks.append(
            f'<div class="loupe-note" id="vet-thought-{i}" style="height:{height}px">'
            f"{sv.thought_html}{img}</div>"
        )
    return f'<div class="loupe-notes">{"".join(blocks)}</div>'


def new_state() -> dict[str, Any]:
    """Per-session state: the candidate shown (store id and key), when it was shown, the
    session's history for k/j, and a comment waiting for the next action."""
    return {"current": None, "key": None, "shown_at": None, "history": [], "pos": -1,
            "comment": None}  # fmt: skip


def current_id(state: dict[str, Any]) -> str:
    return (state or {}).get("key") or ""


# -- identity -----------------------------------------------------------------------------


def expert_for(ctx: Context, request: Any) -> Expert | None:
    """The acting expert: the logged-in one, the local one without login, None if anonymous."""
    if not ctx.login:
        return Expert(ctx.local_expert, "admin")
    name = getattr(request, "username", None) if request is not None else None
    if not name:
        return None
    row = ctx.store.expert(name)
    if row is None or not getattr(row, "active", True):
        return None
    return Expert(row.name, row.role)


def require(ex: Expert | None, admin: bool = False) -> Expert:
    if ex is None:
        raise AccessError("log in first")
    if admin and not ex.admin:
        raise AccessError(f"{ex.name} is not an admin")
    return ex


def whoami(ctx: Context, ex: Expert | None) -> str:
    if ex is None:
        return "Not logged in."
    mode = "" if ctx.login else " (single-user mode)"
    out = f"Vetting as **{escape(ex.name)}** ({ex.role}){mode}. Press `?` for the keyboard."
    if ctx.login:
        out += " [Log out](/logout)"
    return out


# -- vet page -----------------------------------------------------------------------------


def _conf_bar(p: float | None) -> str:
    if p is None:
        return '<span class="loupe-conf" title="no confidence"></span> n/a'
    pct = max(0.0, min(1.0, float(p))) * 100
    return (
        f'<span class="loupe-conf" title="P(YES) = {p:.2f}">'
        f'<span class="tick" style="left:calc({pct:.1f}% - 2px)"></span></span>'
        f" P(YES) <b>{p:.2f}</b>"
    )


def _fmt(v: Any, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def header_html(info: dict[str, Any], traj: Trajectory | None) -> str:
    verdict = traj.verdict if traj else None
    vcls = verdict or "none"
    reviews = info.get("reviews") or []
    mine = info.get("my_review")
    parts = [
        f'<span class="id">{escape(info["id"])}</span>',
        f"<span>{escape(info.get('survey') or '–')}</span>",
        f"<span>RA {_fmt(info.get('ra'), '.5f')} Dec {_fmt(info.get('dec'), '+.5f')}</span>",
        f"<span>SNR {_fmt(info.get('snr'), '.1f')}</span>",
        f"<span>task <b>{escape(info.get('task'))}</b></span>",
        f'<span>agent <span class="loupe-verdict {vcls}">{escape(verdict or "no verdict")}</span></span>',
        f"<span>{_conf_bar(traj.confidence if traj else None)}</span>",
        f"<span>{escape(traj.policy if traj else '')}"
        f"{' / ' + escape(traj.model) if traj and traj.model else ''}</span>",
    ]
    if info.get("split"):
        parts.append(f"<span>split {escape(info['split'])}</span>")
    if info.get("simulated") and (info.get("survey") or "").lower() != "simulated":
        parts.append('<span title="generated by Loupe, not observed">simulated</span>')
    if mine:
        parts.append(f"<span>your review: <b>{escape(mine)}</b></span>")
    if reviews:
        parts.append(f"<span>{len(reviews)} review(s)</span>")
    return f'<div class="loupe-head">{"".join(parts)}</div>'


def _thought_html(i: int, step: Step, reading: Step | None = None) -> str:
    """The notes beside zoom panel i. In the Spec-o3 format a turn's thought is written
    before its zoom, so what the agent read in zoom i is the *next* turn's thought: that is
    shown first, beside the panel it reads; the thought that asked for the zoom folds away."""
    if step.window is not None:
        title = f"<b>Step {i + 1}</b> · zoom {step.window[0]:.0f}–{step.window[1]:.0f} Å"
    elif step.answer is not None:
        title = "<b>Answer</b>"
    else:
        title = f"<b>Step {i + 1}</b>"
    err = f'<p style="color:#c1121f">error: {escape(step.error)}</p>' if step.error else ""
    asked = render_md(step.thought) or "<p><i>(no thought)</i></p>"
    if reading is None or step.window is None:
        return f"<div>{title}{asked}{err}</div>"
    read = render_md(reading.thought) or "<p><i>(no thought)</i></p>"
    return (
        f"<div>{title}{err}<div class='loupe-reading'>{read}</div>"
        f"<details><summary>why it zoomed here (step {i + 1})</summary>{asked}</details></div>"
    )


def _model_image(spec: Spectrum, step: Step, renderer: str) -> Any:
    from agent.tool import render_step

    return render_step(spec, step, renderer)


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
        spec = ctx.store.load_spectrum(info["cid"])
    except (SpectrumError, OSError) as e:
        return VetView(
            info["id"], header_html(info, traj), plots.empty_figure(f"cannot read spectrum: {e}"),
            [], "", message=f"**{escape(info['id'])}**: cannot read its spectrum: {escape(e)}",
        )  # fmt: skip
    for k in ("ra", "dec", "snr"):
        if info.get(k) is None:
            info[k] = getattr(spec.meta, k, None)
    info["simulated"] = info.get("simulated") or spec.meta.simulated
    if not info.get("survey"):
        info["survey"] = spec.meta.survey
    markers = plots.markers_for(info["task"]) if display.markers else None
    frame = "observed" if display.frame == "observed" else "rest"
    smooth = int(display.smooth or 0)
    gfig = plots.global_figure(
        spec, traj, markers=markers, frame=frame, smooth_width=smooth, show_error=display.error
    )
    steps: list[StepView] = []
    choices = ["none"]
    answer = ""
    if traj is not None:
        for i, (step, fig) in enumerate(
            plots.step_figures(
                spec,
                traj,
                markers=markers,
                frame=frame,
                smooth_width=smooth,
                show_error=display.error,
            )  # fmt: skip
        ):
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
                    message += f"\n\nstep {i + 1}: image not rendered ({escape(e)})"
            reading = traj.steps[i + 1] if i + 1 < len(traj.steps) else None
            steps.append(StepView(fig, _thought_html(i, step, reading), img))
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
    view = VetView(
        info["id"],
        header_html(info, traj),
        gfig,
        steps,
        answer,
        correct_label=suggested,
        explanation=traj.explanation if traj else "",
        step_choices=choices,
        message=message,
        zoom_fig=zoom_fig,
        thoughts_html=_steps_html(steps, height),
    )
    view.server_ms = (time.perf_counter() - t0) * 1000
    return view


def empty_view(message: str) -> VetView:
    return VetView(None, "", plots.empty_figure(message), [], "", message=message)


def _info(ctx: Context, cid: int, ex: Expert) -> tuple[dict[str, Any], Trajectory | None]:
    c = ctx.store.candidate(cid)
    traj = ctx.store.trajectory(c.trajectory_id) if c.trajectory_id is not None else None
    reviews = ctx.store.reviews(candidate_id=cid)
    me = ctx.store.expert(ex.name)
    mine = next((r for r in reviews if me is not None and r.expert_id == me.id), None)
    info = {
        "cid": c.id, "id": c.key, "task": c.task, "survey": c.survey, "split": c.split,
        "spectrum_ref": c.spectrum_ref, "reviews": reviews, "gold": c.is_gold,
        "my_review": None if mine is None else f"{mine.action} → {mine.label or '–'}",
        "my_review_row": mine, "status": c.status,
    }  # fmt: skip
    return info, traj


def _show(
    ctx: Context, ex: Expert, state: dict, cid: int | None, display: Display, message: str = ""
) -> tuple[dict, VetView]:
    state = dict(state or new_state())
    if cid is None:
        state.update(current=None, key=None, shown_at=None)
        return state, _with_surveys(ctx, empty_view(message or "Nothing left to vet here."))
    info, traj = _info(ctx, cid, ex)
    if state.get("current") != cid:
        state["shown_at"] = time.time()  # the clock for "seconds on item" starts now
        state["comment"] = None
    state["current"], state["key"] = cid, info["id"]
    view = build_view(ctx, info, traj, display, message)
    mine = info["my_review_row"]
    if mine is not None and mine.action == "correct":
        view.correct_label = mine.label
        view.explanation = mine.explanation or view.explanation
    return state, _with_surveys(ctx, view)


def _with_surveys(ctx: Context, view: VetView) -> VetView:
    view.surveys = ctx.surveys()
    return view


def store_filters(f: Filters):
    """The page's filters as the store's."""
    from db.store import Filters as StoreFilters

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


def _my_review(ctx: Context, ex: Expert, cid: int) -> Any:
    """This expert's review of the candidate (one per expert and candidate), or None."""
    me = ctx.store.expert(ex.name)
    if me is None:
        return None
    return next(iter(ctx.store.reviews(candidate_id=cid, expert=me.id)), None)


def _push(state: dict, cid: int) -> dict:
    hist = [h for h in (state.get("history") or [])]
    hist.append(cid)
    hist = hist[-HISTORY:]
    state.update(history=hist, pos=len(hist) - 1)
    return state


def vet_next(
    ctx: Context, ex: Expert | None, state: dict, filters: Filters, display: Display
) -> tuple[dict, VetView]:
    """Forward: through this session's history first (after k), then the hand-off queue."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    hist = list(state.get("history") or [])
    pos = int(state.get("pos", -1))
    if 0 <= pos < len(hist) - 1:
        state["pos"] = pos + 1
        return _show(ctx, ex, state, hist[pos + 1], display)
    cur = state.get("current")
    if cur is not None and _my_review(ctx, ex, cur) is None:
        # Moving on from an undecided item at the head of the queue passes it (a skip):
        # otherwise the queue would hand the same item straight back.
        return vet_act(ctx, ex, state, "skip", filters, display)
    try:
        sf = store_filters(filters)
        cid = ctx.store.next_item(ex.name, ctx.queue_config(), sf)
    except Exception as e:  # a bad filter value names itself
        return _show(ctx, ex, state, state.get("current"), display, f"Queue: {escape(e)}")
    if cid is None:
        return _show(ctx, ex, state, None, display, "Nothing left in the queue for these filters.")
    return _show(ctx, ex, _push(state, cid), cid, display)


def vet_prev(
    ctx: Context, ex: Expert | None, state: dict, filters: Filters, display: Display
) -> tuple[dict, VetView]:
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    hist = list(state.get("history") or [])
    pos = int(state.get("pos", -1))
    if pos <= 0:
        cid = hist[0] if hist else None
        return _show(ctx, ex, state, cid, display, "This is the first candidate of the session.")
    state["pos"] = pos - 1
    return _show(ctx, ex, state, hist[pos - 1], display)


def vet_refresh(ctx: Context, ex: Expert | None, state: dict, display: Display):
    """Same candidate, other display options (markers, smoothing, frame, images)."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    return _show(ctx, ex, state, state.get("current"), display)


def vet_jump(ctx: Context, ex: Expert | None, state: dict, key: str, display: Display):
    """Jump to a candidate by its id (leased to this expert; others holding it are named)."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    key = (key or "").strip()
    state = dict(state or new_state())
    if not key:
        return _show(ctx, ex, state, state.get("current"), display, "Type a candidate id.")
    info = ctx.store.find_candidate(key)
    if info is None:
        return _show(ctx, ex, state, state.get("current"), display,
                     f"No candidate **{escape(key)}**.")  # fmt: skip
    others = ctx.store.claim(ex.name, info.id)
    msg = f"Also open for {escape(', '.join(others))}." if others else ""
    return _show(ctx, ex, _push(state, info.id), info.id, display, msg)


ACTIONS = ("accept", "reject", "correct", "skip", "flag")


def vet_act(
    ctx: Context,
    ex: Expert | None,
    state: dict,
    action: str,
    filters: Filters,
    display: Display,
    *,
    label: str | None = None,
    explanation: str | None = None,
    wrong_step: str | int | None = None,
    comment: str | None = None,
) -> tuple[dict, VetView]:
    """Record the expert's decision on the shown candidate at once, then show the next."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    cid = state.get("current")
    if action not in ACTIONS:
        return _show(ctx, ex, state, cid, display, f"Unknown action {escape(action)}.")
    if cid is None:
        return vet_next(ctx, ex, state, filters, display)
    step = None
    if wrong_step not in (None, "", "none"):
        try:
            step = int(wrong_step) - 1  # shown 1-based, stored 0-based
        except (TypeError, ValueError):
            return _show(ctx, ex, state, cid, display, f"Bad step number {escape(wrong_step)}.")
    if action == "correct" and label not in ("YES", "NO"):
        return _show(ctx, ex, state, cid, display, "Choose the correct label (YES or NO) first.")
    shown_at = state.get("shown_at")
    seconds = round(max(0.0, time.time() - shown_at), 3) if shown_at else None
    note = (comment or state.get("comment") or None) or None
    try:
        ctx.store.record_review(
            ex.name, cid, action,
            label=label if action == "correct" else None,
            explanation=(explanation or None) if action == "correct" else None,
            wrong_step=step if action in ("correct", "reject") else None,
            comment=note, seconds=seconds,
        )  # fmt: skip
    except Exception as e:  # refused (another's review, bad value): say so, keep the item
        return _show(ctx, ex, state, cid, display, f"Not saved: {escape(e)}")
    key = state.get("key") or cid
    saved = f"Saved **{action}** on {escape(key)}" + (
        f" ({seconds:.1f} s on item)." if seconds is not None else "."
    )
    state["comment"] = None
    st, view = vet_next(ctx, ex, state, filters, display)
    view.message = saved + (" " + view.message if view.message else "")
    return st, view


def vet_comment(ctx: Context, ex: Expert | None, state: dict, text: str) -> tuple[dict, str]:
    """A comment on the shown candidate: added to this expert's review if there is one,
    else kept and saved with the next action on it."""
    state = dict(state or new_state())
    if ex is None:
        return state, "Log in first."
    cid = state.get("current")
    text = (text or "").strip()[:2000]
    if not cid:
        return state, "Nothing to comment on."
    if not text:
        return state, "Write a comment first."
    mine = _my_review(ctx, ex, cid)
    if mine is None:
        state["comment"] = text
        return state, "Comment kept: it is saved with your decision on this candidate."
    try:
        ctx.store.record_review(
            ex.name, cid, mine.action, label=mine.label if mine.action == "correct" else None,
            explanation=mine.explanation, wrong_step=mine.wrong_step, comment=text,
            seconds=mine.seconds, trajectory_id=mine.trajectory_id, review_id=mine.id,
        )  # fmt: skip
    except Exception as e:
        return state, f"Comment not saved: {escape(e)}"
    return state, f"Comment saved on {escape(state.get('key'))}."


# -- adding candidates ------------------------------------------------------------------


def ingest_and_vet(
    ctx: Context, refs: list, *, policy: str | None = None, actor: str = "app"
) -> int:
    """Add candidates to the store and record the agent's trajectory for each.

    A spectrum that cannot be read is reported by the store or skipped by the agent with its
    reason; the others go on. Returns the number of trajectories recorded.
    """
    from agent.catalog import CandidateRef
    from agent.loop import run_batch
    from agent.policies import get_policy

    refs = [
        r if isinstance(r, CandidateRef) else
        CandidateRef(id=r["id"], task=r["task"], path=r["path"], hdu=r.get("hdu"),
                     row=r.get("row"), label=r.get("label") or None)
        for r in refs
    ]  # fmt: skip
    report = ctx.store.add_candidates(refs, actor=actor)
    bad = {str(item) for _, item, _ in report.errors}
    pol = get_policy(policy or ctx.policy)
    items, keep = [], []
    for ref in refs:
        if ref.id in bad:
            continue
        try:
            items.append((ref.load(), ref.task))
            keep.append(ref)
        except SpectrumError:
            continue
    if not items:
        return 0
    trajs = run_batch(items, pol)
    for ref, t in zip(keep, trajs):
        t.id, t.spectrum_ref = ref.id, ref.spectrum_ref
        if ref.label and t.label is None:
            t.label = ref.label
    run_id = ctx.store.start_run(pol.name, pol.model_id, pol.renderer, {}, actor=actor)
    ctx.store.record_trajectories(trajs, run_id, actor=actor)
    return len(trajs)


def inside_roots(ctx: Context, path: str | Path) -> Path:
    """`path` resolved, if it lies inside a configured data root (symlinks followed)."""
    p = Path(path).expanduser()
    p = (p if p.is_absolute() else Path.cwd() / p).resolve()
    for root in ctx.data_roots:
        if p == root or root in p.parents:
            return p
    raise AccessError(f"{path}: outside the data roots ({', '.join(map(str, ctx.data_roots))})")


def ingest_upload(
    ctx: Context, ex: Expert | None, files: list, task: str, path: str | None = None
) -> str:
    """Uploaded spectrum files (size-limited, read before they are kept) or a server path
    inside a data root: ingested and vetted by the agent."""
    import hashlib
    import shutil

    from agent.formats import expand_candidates

    # Every path a file names (a catalogue's lines) must stay inside the data roots too.
    def read_candidates(path: Path, task: str):
        return expand_candidates([str(path)], task=task, roots=ctx.data_roots)

    try:
        require(ex)
    except AccessError as e:
        return f"Refused: {escape(e)}"
    lines: list[str] = []
    refs = []
    upload_dir = ctx.data_roots[0] / "uploads"
    for f in files or []:
        src = Path(getattr(f, "name", f))
        name = src.name
        try:
            size = src.stat().st_size
            if size > ctx.max_upload_bytes:
                raise SpectrumError(name, f"file is {size / 1e6:.1f} MB; the limit is "
                                          f"{ctx.max_upload_bytes / 1e6:.1f} MB")  # fmt: skip
            digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
            upload_dir.mkdir(parents=True, exist_ok=True)
            dest = upload_dir / f"{digest}-{Path(name).name}"
            shutil.copyfile(src, dest)
            try:
                found = read_candidates(dest, task=task)
                for r in found:
                    r.load()  # validate now: a bad file is refused before it is ingested
            except Exception:
                dest.unlink(missing_ok=True)
                raise
            refs += found
            lines.append(f"- {escape(name)}: {len(found)} spectrum(s)")
        except (SpectrumError, OSError, ValueError) as e:
            lines.append(f"- {escape(name)}: refused ({escape(e)})")
    if path and path.strip():
        try:
            p = inside_roots(ctx, path.strip())
            found = read_candidates(p, task=task)
            refs += found
            lines.append(f"- {escape(path)}: {len(found)} candidate(s)")
        except (AccessError, SpectrumError, OSError, ValueError) as e:
            lines.append(f"- {escape(path)}: refused ({escape(e)})")
    if refs:
        try:
            n = ingest_and_vet(ctx, refs, actor=ex.name)
            lines.append(f"\n{n} candidate(s) vetted by the `{escape(ctx.policy)}` agent.")
        except Exception as e:
            lines.append(f"\nIngest failed: {escape(e)}")
    return "\n".join(lines) or "Choose files or type a path."


# -- experts ------------------------------------------------------------------------------


def expert_table(ctx: Context, ex: Expert | None) -> list[list[Any]]:
    if ex is None:
        return []
    return [[e.name, e.role, "yes" if e.active else "no", e.review_count]
            for e in ctx.store.experts()]  # fmt: skip


def add_expert(ctx: Context, ex: Expert | None, name: str, role: str, password: str) -> str:
    from annotate import experts

    try:
        require(ex, admin=True)
        name = (name or "").strip()
        if not name:
            return "Give a name."
        if ctx.store.expert(name) is None:
            experts.create_expert(ctx.store, name, role, password or None, actor=ex.name)
        else:
            experts.update_expert(ctx.store, name, role=role, password=password or None,
                                  actor=ex.name)  # fmt: skip
    except (AccessError, ValueError, PermissionError, LookupError) as e:
        return f"Refused: {escape(e)}"
    return f"Expert **{escape(name)}** saved ({escape(role)})."


# -- author page --------------------------------------------------------------------------
# Thin adapters over `annotate.authoring`: the page's state is an `authoring.Draft` (None
# until a candidate is loaded) and every change goes through that module, which zooms with
# the model's own tool and renderer, checks what the expert types, saves and audits. The
# adapters only turn the page's 1-based step numbers and form values into its calls, and
# its errors into messages. Each returns a changed copy, so a refused change leaves the
# session's draft as it was.


@dataclass
class DraftView:
    header_html: str
    global_fig: dict[str, Any] | None
    rows: list[list[Any]]
    verdict: str | None
    explanation: str
    message: str = ""


def _step_label(step: Step) -> str:
    return str(((step.tool_call or {}).get("arguments") or {}).get("label") or "")


def _draft_view(ctx: Context, d: Any, message: str = "") -> DraftView:
    if d is None or d.candidate_id is None:
        return DraftView("", plots.empty_figure("Load a candidate to start."), [], None, "",
                         message)  # fmt: skip
    try:
        spec = ctx.store.load_spectrum(d.candidate_id)
        fig = plots.global_figure(spec, None, windows=[s.window for s in d.steps],
                                  markers=plots.markers_for(d.task), select=True)  # fmt: skip
    except (SpectrumError, OSError) as e:
        fig = plots.empty_figure(f"cannot read spectrum: {e}")
        message = f"**{escape(d.key)}**: cannot read its spectrum: {escape(e)}"
    rows = [
        [i + 1, f"{s.window[0]:.1f}–{s.window[1]:.1f}", _step_label(s), s.thought]
        for i, s in enumerate(d.steps)
    ]
    status = ""
    if d.authored_id is not None:
        a = ctx.store.authored(d.authored_id)
        status = f" · saved as #{a.id} ({escape(a.status)})"
        if a.reviewer_comment:
            status += f" · reviewer: {escape(a.reviewer_comment)}"
    head = (
        f'<div class="loupe-head"><span class="id">{escape(d.key)}</span>'
        f"<span>task <b>{escape(d.task)}</b></span><span>{len(d.steps)} step(s)"
        f"{status}</span></div>"
    )
    return DraftView(head, fig, rows, d.verdict, d.explanation, message)


def author_load(ctx: Context, ex: Expert | None, d: Any, key: str, start: str):
    """Start a trajectory for a candidate: blank, or the agent's as a draft. An expert's
    own unfinished draft (or one sent back) for the candidate is reopened instead. An
    unknown id keeps the draft in hand."""
    from annotate import authoring as au

    if ex is None:
        return None, _draft_view(ctx, None, "Log in first.")
    key = (key or "").strip()
    info = ctx.store.find_candidate(key) if key else None
    if info is None:
        return d, _draft_view(ctx, d, f"No candidate **{escape(key)}**.")
    own = [a for a in ctx.store.list_authored(author=ex.name, candidate_id=info.id)
           if a.status in ("draft", "rejected")]  # fmt: skip
    if own:
        d = au.load_draft(ctx.store, own[-1].id)
        return d, _draft_view(ctx, d, f"Reopened your draft #{d.authored_id}.")
    if start == "agent draft" and info.trajectory_id is not None:
        t = ctx.store.trajectory(info.trajectory_id)
        d = au.start_draft(info, renderer=t.renderer or "fast", from_trajectory=t,
                           trajectory_id=info.trajectory_id, author=ex.name)  # fmt: skip
        return d, _draft_view(ctx, d, "Started from the agent's trajectory.")
    d = au.start_draft(info, author=ex.name)
    return d, _draft_view(ctx, d, "Blank trajectory: drag across the plot to pick a window.")


def author_zoom(ctx: Context, d: Any, lo: Any, hi: Any, label: str | None):
    """The zoom as the model would see it (image, the draft's renderer) and its panel."""
    from annotate import authoring as au

    if d is None or d.candidate_id is None:
        return None, None, "Load a candidate first."
    try:
        spec = ctx.store.load_spectrum(d.candidate_id)
        res = au.zoom_preview(d, spec, lo, hi, (label or "").strip() or None)
    except (ValueError, TypeError, SpectrumError, OSError) as e:  # AuthoringError included
        return None, None, escape(e)
    fig = plots.window_figure(
        spec, res.window, title=f"{res.window[0]:.0f}–{res.window[1]:.0f} Å",
        markers=plots.markers_for(d.task),
    )  # fmt: skip
    return res.image, fig, escape(res.text)


def _keep_answer(d: Any, verdict: str | None, explanation: str | None) -> None:
    # The answer fields travel with every step operation so nothing typed is lost; their
    # text is checked by `validate` when the draft is submitted.
    if verdict in ("YES", "NO"):
        d.verdict = verdict
    if explanation is not None:
        d.explanation = explanation.strip()


def author_step(
    ctx: Context, ex: Expert | None, d: Any, op: str, *, lo=None, hi=None, label=None,
    thought=None, index=None, verdict=None, explanation=None,
):  # fmt: skip
    """add / replace / up / down / delete / edit (load into the form) a step, by its 1-based
    number (default the last); returns (draft, view, form values)."""
    import copy

    from annotate import authoring as au

    form = [lo, hi, label, thought]
    if ex is None or d is None or d.candidate_id is None:
        return d, _draft_view(ctx, d, "Log in and load a candidate first."), form
    d = copy.deepcopy(d)
    _keep_answer(d, verdict, explanation)
    n = len(d.steps)
    try:
        i = int(index) - 1 if index not in (None, "") else n - 1
    except (TypeError, ValueError):
        i = -1
    label = (label or "").strip()
    try:
        if op in ("add", "replace"):
            if not (thought or "").strip():
                raise au.AuthoringError("write the thought for this step")
            spec = ctx.store.load_spectrum(d.candidate_id)
            if op == "add":
                au.add_step(d, spec, lo, hi, thought.strip(), label=label or None)
                msg, form = f"Added step {len(d.steps)}.", [None, None, "", ""]
            else:
                if not 0 <= i < n:
                    raise au.AuthoringError(f"there is no step {index}")
                au.edit_step(d, i, thought=thought.strip(), window=(lo, hi), label=label,
                             spectrum=spec)  # fmt: skip
                msg = f"Replaced step {i + 1}."
        elif op in ("up", "down", "delete", "edit"):
            if not 0 <= i < n:
                raise au.AuthoringError(f"there is no step {index}")
            if op == "delete":
                au.delete_step(d, i)
                msg = f"Deleted step {i + 1}."
            elif op == "edit":
                s = d.steps[i]
                form = [s.window[0], s.window[1], _step_label(s), s.thought]
                msg = f"Step {i + 1} is in the form: edit it, then Replace step."
            else:
                j = i - 1 if op == "up" else i + 1
                if not 0 <= j < n:
                    raise au.AuthoringError(f"step {i + 1} cannot move {op}")
                au.move_step(d, i, j)
                msg = f"Moved step {i + 1} {op}."
        else:
            raise au.AuthoringError(f"unknown step operation {op!r}")
    except (ValueError, TypeError, SpectrumError, OSError) as e:  # AuthoringError included
        msg = f"Not done: {escape(e)}"
    return d, _draft_view(ctx, d, msg), form


def author_finish(ctx: Context, ex: Expert | None, d: Any, op: str, verdict, explanation):
    """Save the draft in the store; with op "submit", also send it for audit (after
    `validate`, with the spectrum, finds nothing wrong)."""
    import copy

    from annotate import authoring as au

    if ex is None or d is None or d.candidate_id is None:
        return d, _draft_view(ctx, d, "Log in and load a candidate first.")
    d = copy.deepcopy(d)
    try:
        if verdict in ("YES", "NO"):
            au.set_answer(d, verdict, explanation or "")
        else:
            d.explanation = (explanation or "").strip()
        if op == "submit":
            problems = au.validate(d, ctx.store.load_spectrum(d.candidate_id))
            if problems:
                return d, _draft_view(ctx, d, "Before submitting: " + "; ".join(
                    escape(p) for p in problems) + ".")  # fmt: skip
            au.submit(ctx.store, d, ex.name)
            msg = f"Submitted #{d.authored_id} for audit."
        else:
            au.save_draft(ctx.store, d, ex.name)
            msg = f"Draft #{d.authored_id} saved."
    except Exception as e:  # refused by the module or the store: say why, keep the draft
        msg = f"Not saved: {escape(e)}"
    return d, _draft_view(ctx, d, msg)


def audit_choices(ctx: Context, ex: Expert | None) -> list[tuple[str, str]]:
    """Submitted trajectories this expert may audit (not their own)."""
    if ex is None:
        return []
    me = ctx.store.expert(ex.name)
    out = []
    for a in ctx.store.list_authored(status="submitted"):
        if me is not None and a.author_id == me.id:
            continue
        c = ctx.store.candidate(a.candidate_id)
        author = ctx.store.expert(a.author_id)
        out.append((f"#{a.id} · {c.key} ({c.task}) by {author.name if author else '?'}",
                    str(a.id)))  # fmt: skip
    return out


def audit_view(ctx: Context, ex: Expert | None, pick: str | None) -> str:
    """A submitted trajectory as the auditor reads it: each step, the answer, and the
    comments of earlier rounds."""
    from annotate import authoring as au

    if ex is None or not pick:
        return ""
    try:
        a = ctx.store.authored(int(pick))
        t = au.authored_to_trajectory(a, ctx.store.candidate(a.candidate_id))
        history = au.audit_history(ctx.store, a.id)
    except Exception as e:
        return escape(e)
    parts = [_thought_html(i, s) for i, s in enumerate(t.steps) if s.answer is None]
    parts.append(f"<p><b>Verdict {escape(t.verdict)}</b></p>{render_md(t.explanation)}")
    rounds = [h for h in history if h.comment]
    if rounds:
        parts.append("<p><b>Earlier audit rounds</b></p><ul>" + "".join(
            f"<li>{escape(h.actor)} ({escape(h.action)}): {escape(h.comment)}</li>"
            for h in rounds) + "</ul>")  # fmt: skip
    return '<div class="loupe-thought">' + "".join(parts) + "</div>"


def audit_decide(ctx: Context, ex: Expert | None, pick: str | None, op: str, comment: str) -> str:
    """Approve, or send back with a comment (the module requires one)."""
    from annotate import authoring as au

    if ex is None:
        return "Log in first."
    if not pick:
        return "Choose a submitted trajectory."
    try:
        a = au.audit(
            ctx.store, int(pick), ex.name, op == "approve", (comment or "").strip() or None
        )
    except Exception as e:
        return f"Refused: {escape(e)}"
    return f"#{a.id} {'approved' if a.status == 'approved' else 'sent back to its author'}."


# -- dashboard ----------------------------------------------------------------------------


@dataclass
class DashboardView:
    summary: str
    progress: dict
    rates: dict
    confusion: dict
    reliability: dict
    speed: dict
    gold: dict
    per_task: dict[str, Any]  # {"headers", "data"}
    kappa: dict[str, Any]


def _bar_layout(title: str, **extra: Any) -> dict[str, Any]:
    lay = {"title": {"text": title, "font": {"size": 13}}, "height": 300,
           "margin": {"l": 50, "r": 10, "t": 40, "b": 40}, "plot_bgcolor": "white",
           "barmode": "stack", "legend": {"orientation": "h", "y": -0.2}}  # fmt: skip
    lay.update(extra)
    return lay


def _r(v: float) -> float | None:
    return None if v != v else round(float(v), 3)


def dashboard(ctx: Context, ex: Expert | None, task: str = "all", precision: float = 0.95):
    """Progress, decision rates, agent-vs-expert quality, calibration, speed, agreement."""
    from annotate import agreement as ag

    if ex is None:
        empty = plots.empty_figure("Log in first.")
        none = {"headers": ["-"], "data": []}
        return DashboardView("Log in first.", empty, empty, empty, empty, empty, empty, none, none)
    only = None if task in (None, "", "all") else task
    # Aggregated in the database: nothing here grows with the number of candidates.
    st = ctx.store.dashboard_stats(only)
    tasks = st.tasks
    # progress per task
    done, auto, total = st.reviewed, st.auto, st.total
    progress = {
        "data": [
            {"type": "bar", "name": "reviewed", "x": tasks, "y": [done[t] for t in tasks],
             "marker": {"color": "#2a9d8f"}},
            {"type": "bar", "name": "auto-accepted", "x": tasks, "y": [auto[t] for t in tasks],
             "marker": {"color": "#8ab17d"}},
            {"type": "bar", "name": "open", "x": tasks,
             "y": [total[t] - done[t] - auto[t] for t in tasks], "marker": {"color": "#ccc"}},
        ],
        "layout": _bar_layout("Progress per task"),
    }  # fmt: skip
    # action rates per task
    acts = ["accept", "reject", "correct", "skip", "flag"]
    colours = ["#2a9d8f", "#c1121f", "#f4a261", "#999", "#6d597a"]
    counts = {t: {a: st.actions.get(t, {}).get(a, 0) for a in acts} for t in tasks}
    rates = {
        "data": [
            {"type": "bar", "name": a, "x": tasks, "marker": {"color": col},
             "y": [counts[t][a] / max(1, sum(counts[t].values())) for t in tasks]}
            for a, col in zip(acts, colours)
        ],
        "layout": _bar_layout("Decisions per task (share)", yaxis={"tickformat": ".0%"}),
    }  # fmt: skip
    # agent vs experts
    labelled = [(t, v, lab) for t, v, lab, n in st.confusion for _ in range(n)]
    cm = ag.confusion_by_task(labelled)
    per_task = []
    z, ylab = [], []
    for t, conf in cm.items():
        p = ag.prf(conf)
        per_task.append([t, conf.n, conf.tp, conf.fp, conf.fn, conf.tn, conf.unanswered,
                         _r(p.precision), _r(p.recall), _r(p.f1)])  # fmt: skip
    tot = ag.confusion((v, lab) for _, v, lab in labelled) if labelled else None
    if tot is not None:
        z = [[tot.tp, tot.fn], [tot.fp, tot.tn]]
        ylab = ["expert YES", "expert NO"]
    confusion_fig = {
        "data": [{"type": "heatmap", "z": z, "x": ["agent YES", "agent NO"], "y": ylab,
                  "colorscale": "Blues", "showscale": False, "texttemplate": "%{z}"}],
        "layout": _bar_layout(f"Agent vs experts ({'all tasks' if not only else only}; "
                              f"F1 {_r(ag.prf(tot).f1) if tot else '–'})",
                              yaxis={"autorange": "reversed"}),
    } if tot else plots.empty_figure("No expert labels yet.")  # fmt: skip
    # reliability + hand-off threshold
    # each histogram cell stands for its items at the cell's mean P(YES) (cells 0.001 wide)
    scored = [(sm / n, lab) for _, lab, n, sm in st.confidence_hist for _ in range(n)]
    if scored:
        rel = ag.reliability_diagram([s[0] for s in scored], [s[1] for s in scored])
        plan = ag.handoff_plan([s[0] for s in scored], [s[1] for s in scored],
                               target_precision=float(precision))  # fmt: skip
        xs = [b.mean_confidence for b in rel.bins if b.count]
        ys = [b.yes_rate for b in rel.bins if b.count]
        shapes = []
        for thr in (plan.yes_threshold, plan.no_threshold):
            if thr is not None:
                shapes.append({"type": "line", "x0": thr, "x1": thr, "y0": 0, "y1": 1,
                               "line": {"dash": "dash", "color": "#c1121f"}})  # fmt: skip
        reliability = {
            "data": [
                {"type": "scatter", "x": [0, 1], "y": [0, 1], "mode": "lines",
                 "line": {"dash": "dot", "color": "#999"}, "name": "perfect"},
                {"type": "scatter", "x": xs, "y": ys, "mode": "lines+markers", "name": "agent",
                 "text": [f"n={b.count}" for b in rel.bins if b.count]},
            ],
            "layout": _bar_layout(
                f"Reliability (ECE {_r(rel.ece)}); hand-off for precision {precision:.2f}: "
                f"YES ≥ {_r(plan.yes_threshold) if plan.yes_threshold is not None else '–'}, "
                f"NO ≤ {_r(plan.no_threshold) if plan.no_threshold is not None else '–'}, "
                f"{plan.human_fraction:.0%} to humans",
                xaxis={"title": {"text": "agent P(YES)"}, "range": [0, 1]},
                yaxis={"title": {"text": "expert YES rate"}, "range": [0, 1]}, shapes=shapes,
            ),
        }  # fmt: skip
    else:
        reliability = plots.empty_figure("No labelled candidates with a confidence yet.")
    # seconds per spectrum per expert
    secs = st.seconds  # expert -> n, min, q1, median, q3, max
    speed = {
        "data": [{"type": "box", "name": n, "x": [n], "q1": [q["q1"]], "median": [q["median"]],
                  "q3": [q["q3"]], "lowerfence": [q["min"]], "upperfence": [q["max"]],
                  "hovertext": f"{q['n']} timed reviews"} for n, q in secs.items()],
        "layout": _bar_layout("Seconds per spectrum per expert", showlegend=False),
    } if secs else plots.empty_figure("No timed reviews yet.")  # fmt: skip
    # agreement and gold accuracy
    ratings = [ag.Rating(c, t, e, lab) for c, t, e, lab in st.ratings]  # items with 2+ reviews
    kappa = [[t, a.n_items, a.n_ratings, _r(a.fleiss), _r(a.cohen_mean)]
             for t, a in ag.kappa_by_task(ratings).items()]  # fmt: skip
    gs = ag.gold_accuracy([ag.Rating(c, t, e, lab) for c, t, e, lab, _ in st.gold],
                          {c: g for c, _, _, _, g in st.gold})  # fmt: skip
    gold_fig = {
        "data": [{"type": "bar", "x": list(gs), "y": [g.accuracy for g in gs.values()],
                  "text": [f"{g.correct}/{g.n}" for g in gs.values()], "marker": {"color": "#1f3b73"}}],
        "layout": _bar_layout("Gold-standard accuracy per expert", yaxis={"range": [0, 1],
                              "tickformat": ".0%"}),
    } if gs else plots.empty_figure("No gold-standard items reviewed yet.")  # fmt: skip
    n_rev = sum(done.values())
    med = st.seconds_median
    summary = (
        f"**{sum(total.values())}** candidates · **{n_rev}** reviewed · **{st.n_reviews}** "
        f"decisions by **{len(secs) or st.n_reviewers}** expert(s)"
        + (f" · median **{med:.1f} s** per spectrum" if med is not None else "")
    )
    head = ["task", "n", "TP", "FP", "FN", "TN", "no verdict", "precision", "recall", "F1"]
    khead = ["task", "items (2+ raters)", "ratings", "Fleiss κ", "mean Cohen κ"]
    return DashboardView(summary, progress, rates, confusion_fig, reliability, speed, gold_fig,
                         {"headers": head, "data": per_task},
                         {"headers": khead, "data": kappa})  # fmt: skip


# -- exports ------------------------------------------------------------------------------


@dataclass
class ExportResult:
    message: str
    manifest: dict[str, Any] | None
    files: list[str]
    history: dict[str, Any]


def export_history(ctx: Context) -> dict[str, Any]:
    rows = [[b.id, b.kind, str(b.created)[:19], b.actor, b.path or "",
             sum((b.manifest or {}).get("counts", {}).get("total", {}).values())
             if isinstance((b.manifest or {}).get("counts", {}).get("total"), dict) else ""]
            for b in ctx.store.export_batches()]  # fmt: skip
    return {"headers": ["batch", "kind", "created", "by", "folder", "items"], "data": rows}


def run_export(ctx: Context, ex: Expert | None, kind: str) -> ExportResult:
    """Run one export (admins only); list its files as download links."""
    from annotate import export

    try:
        require(ex, admin=True)
        if kind not in ("sft", "rl", "pairs"):
            raise ValueError(f"unknown export {kind!r}")
        out = ctx.export_dir / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
        result = export.run_export(ctx.store, kind, out, actor=ex.name)
    except (AccessError, ValueError) as e:
        return ExportResult(f"Refused: {escape(e)}", None, [], export_history(ctx))
    folder = Path(result.out)
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
    # Image folders can hold thousands of files: link the data and the manifest first.
    files.sort(key=lambda f: (Path(f).suffix in (".png", ".jpg"), f))
    msg = (f"**{kind}** export: {len(result.items)} new item(s), {len(result.errors)} error(s), "
           f"{result.seconds:.1f} s, in `{escape(folder)}` (batch {result.batch_id}).")  # fmt: skip
    return ExportResult(msg, result.manifest, files[:50], export_history(ctx))
