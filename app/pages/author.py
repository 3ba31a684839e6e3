"""The author page: an expert writes a cold-start trajectory by zooming, then another audits it.

Thin adapters over `annotate.authoring`: the page's state is an `authoring.Draft` (None
until a candidate is loaded) and every change goes through that module, which zooms with
the model's own tool and renderer, checks what the expert types, saves and audits. The
adapters only turn the page's 1-based step numbers and form values into its calls, and its
errors into messages. Each returns a changed copy, so a refused change leaves the session's
draft as it was.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from agent.spectrum import SpectrumError
from agent.trajectory import Step, Trajectory
from annotate import authoring as au
from annotate.export.conversation import Images, conversation
from app import plots
from app.context import USER_ERRORS, Context, Viewer, refusal
from app.markers import markers_for
from app.pages.vet import tasks_of, thought_html
from app.render_md import escape, render_md
from app.views import DraftView


def _step_label(step: Step) -> str:
    return str(((step.tool_call or {}).get("arguments") or {}).get("label") or "")


def _draft_view(ctx: Context, d: Any, message: str = "") -> DraftView:
    if d is None or d.candidate_id is None:
        return DraftView("", plots.empty_figure("Load a candidate to start."), [], None, "",
                         message)  # fmt: skip
    try:
        spec = ctx.read.load_spectrum(d.candidate_id)
        fig = plots.global_figure(spec, None, windows=[s.window for s in d.steps],
                                  markers=markers_for(d.task), select=True)  # fmt: skip
    except (SpectrumError, OSError) as e:
        fig = plots.empty_figure(f"cannot read spectrum: {e}")
        message = f"**{escape(d.key)}**: cannot read its spectrum: {escape(e)}"
    rows = [
        [i + 1, f"{s.window[0]:.1f}–{s.window[1]:.1f}", _step_label(s), s.thought]
        for i, s in enumerate(d.steps)
    ]
    status = ""
    if d.authored_id is not None:
        a = ctx.read.authored(d.authored_id)
        status = f" · saved as #{a.id} ({escape(a.status)})"
        if a.reviewer_comment:
            status += f" · reviewer: {escape(a.reviewer_comment)}"
    head = (
        f'<div class="loupe-head"><span class="id">{escape(d.key)}</span>'
        f"<span>task <b>{escape(d.task)}</b></span><span>{len(d.steps)} step(s)"
        f"{status}</span></div>"
    )
    return DraftView(head, fig, rows, d.verdict, d.explanation, message)


def author_load(
    ctx: Context, ex: Viewer | None, d: Any, key: str, start: str, task: str | None = None
):
    """Start a trajectory for a candidate: blank, or the agent's as a draft. An expert's
    own unfinished draft (or one sent back) for the candidate is reopened instead. An
    unknown id keeps the draft in hand; an id of several tasks asks for the task
    (`DraftView.tasks`)."""
    if ex is None:
        return None, _draft_view(ctx, None, "Log in first.")
    key = (key or "").strip()
    task = task or None
    if key and task is None:
        tasks = tasks_of(ctx, key)
        if len(tasks) > 1:
            view = _draft_view(ctx, d, f"**{escape(key)}** is a candidate of {len(tasks)} "
                               f"tasks ({escape(', '.join(tasks))}): choose one.")  # fmt: skip
            view.tasks = tasks
            return d, view
    info = ctx.read.find_candidate(key, task) if key else None
    if info is None:
        return d, _draft_view(ctx, d, f"No candidate **{escape(key)}**.")
    own = [a for a in ctx.read.list_authored(author=ex.name, candidate_id=info.id)
           if a.status in ("draft", "rejected")]  # fmt: skip
    if own:
        d = au.load_draft(ctx.store, own[-1].id)
        return d, _draft_view(ctx, d, f"Reopened your draft #{d.authored_id}.")
    if start == "agent draft" and info.trajectory_id is not None:
        t = ctx.read.trajectory(info.trajectory_id)
        d = au.start_draft(info, renderer=t.renderer or "fast", from_trajectory=t,
                           trajectory_id=info.trajectory_id, author=ex.name)  # fmt: skip
        return d, _draft_view(ctx, d, "Started from the agent's trajectory.")
    d = au.start_draft(info, author=ex.name)
    return d, _draft_view(ctx, d, "Blank trajectory: drag across the plot to pick a window.")


def author_zoom(ctx: Context, d: Any, lo: Any, hi: Any, label: str | None):
    """The zoom as the model would see it (image, the draft's renderer) and its panel."""
    if d is None or d.candidate_id is None:
        return None, None, "Load a candidate first."
    try:
        spec = ctx.read.load_spectrum(d.candidate_id)
        res = au.zoom_preview(d, spec, lo, hi, (label or "").strip() or None)
    except (ValueError, TypeError, SpectrumError, OSError) as e:  # AuthoringError included
        return None, None, escape(e)
    fig = plots.window_figure(
        spec, res.window, title=f"{res.window[0]:.0f}–{res.window[1]:.0f} Å",
        markers=markers_for(d.task),
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
    ctx: Context, ex: Viewer | None, d: Any, op: str, *, lo=None, hi=None, label=None,
    thought=None, index=None, verdict=None, explanation=None,
):  # fmt: skip
    """add / replace / up / down / delete / edit (load into the form) a step, by its 1-based
    number (default the last); returns (draft, view, form values)."""
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
            spec = ctx.read.load_spectrum(d.candidate_id)
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


def author_finish(ctx: Context, ex: Viewer | None, d: Any, op: str, verdict, explanation):
    """Save the draft in the store; with op "submit", also send it for audit (after
    `validate`, with the spectrum, finds nothing wrong)."""
    if ex is None or d is None or d.candidate_id is None:
        return d, _draft_view(ctx, d, "Log in and load a candidate first.")
    d = copy.deepcopy(d)
    try:
        if verdict in ("YES", "NO"):
            au.set_answer(d, verdict, explanation or "")
        else:
            d.explanation = (explanation or "").strip()
        if op == "submit":
            problems = au.validate(d, ctx.read.load_spectrum(d.candidate_id))
            if problems:
                return d, _draft_view(ctx, d, "Before submitting: " + "; ".join(
                    escape(p) for p in problems) + ".")  # fmt: skip
            au.submit(ctx.store, d, ex.name)
            msg = f"Submitted #{d.authored_id} for audit."
        else:
            au.save_draft(ctx.store, d, ex.name)
            msg = f"Draft #{d.authored_id} saved."
    except Exception as e:  # refused by the module or the store: say why, keep the draft
        msg = refusal("Not saved", e)
    return d, _draft_view(ctx, d, msg)


def audit_choices(ctx: Context, ex: Viewer | None) -> list[tuple[str, str]]:
    """Submitted trajectories this expert may audit (not their own)."""
    if ex is None:
        return []
    me = ctx.read.expert(ex.name)
    out = []
    for a in ctx.read.list_authored(status="submitted"):
        if me is not None and a.author_id == me.id:
            continue
        c = ctx.read.candidate(a.candidate_id)
        author = ctx.read.expert(a.author_id)
        out.append((f"#{a.id} · {c.key} ({c.task}) by {author.name if author else '?'}",
                    str(a.id)))  # fmt: skip
    return out


def my_drafts(ctx: Context, ex: Viewer | None) -> str:
    """The author's own drafts and sent-back trajectories (with the auditor's comment),
    newest first, as a Markdown table: load one by its candidate id to go on with it."""
    if ex is None or ctx.read.expert(ex.name) is None:
        return ""
    rows = [a for a in ctx.read.list_authored(author=ex.name)
            if a.status in ("draft", "rejected")]  # fmt: skip
    if not rows:
        return "You have no drafts and nothing sent back."
    out = ["| # | candidate | task | status | steps | last change | auditor's comment |",
           "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for a in sorted(rows, key=lambda a: a.updated, reverse=True):
        c = ctx.read.candidate(a.candidate_id)
        status = "sent back" if a.status == "rejected" else a.status
        comment = escape(a.reviewer_comment or "").replace("|", "\\|").replace("\n", " ")
        out.append(f"| {a.id} | {escape(c.key)} | {escape(c.task)} | {status} | "
                   f"{len(a.steps or [])} | {a.updated:%Y-%m-%d %H:%M} | {comment} |")  # fmt: skip
    return "\n".join(out)


def audit_note(ctx: Context, ex: Viewer | None, choices: list[tuple[str, str]]) -> str:
    """Why the audit list holds what it holds; above all why it is empty, since an author
    cannot approve their own trajectory and single-user mode has only one expert."""
    if ex is None:
        return "Log in to audit trajectories written by others."
    if choices:
        return f"{len(choices)} trajectory(ies) written by others await your audit."
    me = ctx.read.expert(ex.name)
    mine = sum(1 for a in ctx.read.list_authored(status="submitted")
               if me is not None and a.author_id == me.id)  # fmt: skip
    waiting = f" ({mine} of yours await another expert)" if mine else ""
    if not ctx.login:
        return (
            f"Nothing to audit{waiting}: an author cannot approve their own trajectory, and "
            f"single-user mode (served without `--login`) has one expert, "
            f"**{escape(ex.name)}**, who wrote them all. To audit, serve with `--login` and "
            "give a second expert an account (`launch.py add-expert NAME --password-stdin`)."
        )
    return f"Nothing to audit{waiting}: no trajectory written by another expert awaits audit."


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _audit_images(ctx: Context, a: Any, t: Trajectory) -> tuple[bytes, dict[int, bytes]]:
    """The whole-spectrum view and each zoom step's image (by step index), drawn by the
    export itself (`annotate.export.conversation`), so they are the images the model will be
    trained on."""
    spec = ctx.read.load_spectrum(a.candidate_id)
    conv = conversation(copy.deepcopy(t), Images(spec, a.renderer or "fast"))
    zooms = [i for i, s in enumerate(t.steps)
             if s.tool_call is not None and s.answer is None and s.observation_image]  # fmt: skip
    return conv.images[0], dict(zip(zooms, conv.images[1:], strict=True))


def _figure(png: bytes, alt: str) -> str:
    return f'<img class="loupe-audit-image" src="{_png_uri(png)}" alt="{escape(alt)}">'


def audit_view(ctx: Context, ex: Viewer | None, pick: str | None) -> str:
    """A submitted trajectory as the auditor reads it: the whole spectrum and every zoom as
    the model will see them (the export's renderer and drawing), each beside its thought;
    the answer; and the comments of earlier rounds."""
    if ex is None or not pick:
        return ""
    try:
        a = ctx.read.authored(int(pick))
        t = au.authored_to_trajectory(a, ctx.read.candidate(a.candidate_id))
        history = au.audit_history(ctx.store, a.id)
    except (*USER_ERRORS, ValueError) as e:  # an unknown or malformed pick
        return escape(e)
    renderer = a.renderer or "fast"
    try:
        overview, zooms = _audit_images(ctx, a, t)
        err = ""
    except (SpectrumError, OSError, ValueError) as e:
        overview, zooms = None, {}
        err = (f'<p style="color:#c1121f">The images cannot be drawn: {escape(e)}. Do not '
               "approve what you cannot see.</p>")  # fmt: skip
    how = (f"<p>Drawn with the <b>{escape(renderer)}</b> renderer, as <code>export sft "
           f"--renderer {escape(renderer)}</code> draws them for training.</p>")  # fmt: skip
    parts = [how + err]
    if overview is not None:
        parts.append(
            '<div class="loupe-audit-step" id="audit-overview"><div><b>Whole spectrum</b>'
            "<p>The first image the model is shown, with the task's question.</p></div>"
            f"{_figure(overview, 'the whole spectrum as the model sees it')}</div>"
        )
    for i, s in enumerate(t.steps):
        if s.answer is not None:
            continue
        img = zooms.get(i)
        pic = _figure(img, f"step {i + 1}: the zoom the model sees") if img is not None else ""
        parts.append(
            f'<div class="loupe-audit-step" id="audit-step-{i}">{thought_html(i, s)}{pic}</div>'
        )
    final = next((s for s in t.steps if s.answer is not None), None)
    closing = render_md(final.thought) if final is not None and final.thought else ""
    parts.append(f'<div class="loupe-answer">{closing}<p><b>Verdict {escape(t.verdict)}</b></p>'
                 f"{render_md(t.explanation)}</div>")  # fmt: skip
    rounds = [h for h in history if h.comment]
    if rounds:
        parts.append("<p><b>Earlier audit rounds</b></p><ul>" + "".join(
            f"<li>{escape(h.actor)} ({escape(h.action)}): {escape(h.comment)}</li>"
            for h in rounds) + "</ul>")  # fmt: skip
    return '<div class="loupe-audit">' + "".join(parts) + "</div>"


def audit_decide(ctx: Context, ex: Viewer | None, pick: str | None, op: str, comment: str) -> str:
    """Approve, or send back with a comment (the module requires one)."""
    if ex is None:
        return "Log in first."
    if not pick:
        return "Choose a submitted trajectory."
    try:
        a = au.audit(
            ctx.store, int(pick), ex.name, op == "approve", (comment or "").strip() or None
        )
    except Exception as e:
        return refusal("Refused", e)
    return f"#{a.id} {'approved' if a.status == 'approved' else 'sent back to its author'}."
