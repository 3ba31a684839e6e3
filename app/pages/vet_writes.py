"""The vet page's writes: decisions, grades, comments and undo, each on the candidate the
page names (`app.pages.vet_target`), never on the one the session last showed.

A decision saves the form the expert sees: the page sends what its boxes and controls hold
for the candidate the key was pressed on (texts, grade, issue flags, spectral type, a
correction's label and step), and the store's draft (`annotate.drafts`) fills in only what
the page did not send (an API call, the redshift set on the desk). A write the store refuses,
or one whose candidate changed since the page drew it, is said in one line naming the
candidate and its task, and the page keeps what was typed.
"""

from __future__ import annotations

import re
import time
from typing import Any

from annotate import drafts, review
from app.context import Context, Viewer, refusal
from app.pages import vet_target
from app.pages.vet import _show, empty_view, focus, vet_next
from app.pages.vet_texts import PAGE_TEXTS, page_text
from app.render_md import escape
from app.views import Display, QueueFilters, VetView, new_state

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


def _target(ctx: Context, state: dict, page: Any) -> vet_target.Target | None:
    return vet_target.parse(ctx, state, page)


def _form_marks(form: dict[str, Any] | None) -> dict[str, Any]:
    """The grade, issue flags and spectral type the page's form showed, as a draft keeps
    them (`annotate.drafts.clean`); {} where the page sent no form (an API call)."""
    if not form:
        return {}
    out: dict[str, Any] = {}
    for name in ("grade", "issues", "spectype"):
        if name in form:
            v = form[name]
            out[name] = drafts.clean(name, "".join(v) if isinstance(v, list) else v)
    return out


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
    note: str | None = None,
    active_seconds: float | None = None,
    page: str | dict | None = None,
) -> tuple[dict, VetView]:
    """Record the expert's decision on the candidate the page names, then show the next.

    `page` is what the page sends with the key (`vet_target`): the candidate, its task and
    the revision it showed, the texts kept for it (comment, reason, explanation, note) and
    its form (grade, flags, spectral type, a correction's label and step). Without it (an
    API call) the decision is on the candidate the session shows, with the store's draft.
    A decision on a candidate the page no longer holds, or that changed since the page drew
    it, is refused in one line naming it; what was typed stays in the page.

    `active_seconds` is the page's count of active time on the item (paused while the tab
    is hidden or after IDLE_SECONDS without input); without it (an API call) the wall clock
    since the item was shown is used."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    if action not in review.DECISIONS:
        return _show(ctx, ex, state, state.get("current"), display,
                     f"Unknown action {escape(action)}.")  # fmt: skip
    t = _target(ctx, state, page)
    if t is None:
        return vet_next(ctx, ex, state, filters, display)
    what = action
    refused = vet_target.check(ctx, ex, t, what)
    if refused is not None:
        if refused.kind == "changed":  # the candidate again, as it is now
            return _show(ctx, ex, focus(state, t.cid, t.key, t.task), t.cid, display,
                         refused.text)  # fmt: skip
        st, view = vet_next(ctx, ex, state, filters, display)
        view.message = refused.text + (" " + view.message if view.message else "")
        return st, view
    form = t.form or {}
    if wrong_step is None:
        wrong_step = form.get("wrong_step")
    if label is None:
        label = form.get("label")
    step = None
    if wrong_step not in (None, "", "none"):
        try:
            step = int(wrong_step) - 1  # shown 1-based, stored 0-based
        except (TypeError, ValueError):
            return _show(ctx, ex, focus(state, t.cid, t.key, t.task), t.cid, display,
                         f"Bad step number {escape(wrong_step)}.")  # fmt: skip
    if action == "correct" and label not in ("YES", "NO"):
        return _show(ctx, ex, focus(state, t.cid, t.key, t.task), t.cid, display,
                     "Choose the correct label (YES or NO) first.")  # fmt: skip
    state = focus(state, t.cid, t.key, t.task)
    cid = t.cid
    seconds = _seconds(state, active_seconds)
    mine = review.my_decision(ctx.store, ex.name, cid)
    # What is saved: the form the page showed; where it sent none, the store's draft and,
    # on a decision revised, what the decision holds.
    fields = drafts.take(ctx.store, ex.name, cid)
    if mine is not None:
        kept = {k: getattr(mine, k) for k in drafts.SAVED if getattr(mine, k) is not None}
        fields = {**kept, **fields}
    try:
        fields.update(_form_marks(form))
    except review.ReviewError as e:
        return _show(ctx, ex, state, cid, display, refusal("Not saved", e))
    typed = page_text(page, t.key, t.task)
    kept_comment = fields.pop("comment", None)
    if comment is None:
        comment = typed["comment"] if "comment" in typed else kept_comment
    if note is None:
        note = typed.get("note") if action == "correct" else None
        if note is None and action == "correct" and mine is not None:
            note = mine.note
    if explanation is None and action in ("reject", "correct"):
        explanation = typed.get("reason" if action == "reject" else "explanation")
    queue = ctx.queue()
    try:
        review.decide(ctx.store, ex.name, cid, action, label=label, explanation=explanation,
                      wrong_step=step, comment=comment or None, note=note or None,
                      seconds=seconds, overlap=queue.config.overlap, **fields)  # fmt: skip
    except Exception as e:  # refused (another's review, bad value): say so, keep the item
        return _show(ctx, ex, state, cid, display, refusal(f"Not saved on {escape(t.name)}", e))
    try:  # the decision holds the draft now: none is left behind
        drafts.settle(ctx.store, ex.name, cid)
    except Exception as e:
        refusal("Draft not cleared", e)  # logged: the decision itself is saved
    state["decided"] = [*(c for c in state.get("decided") or [] if c != cid), cid][-200:]
    saved = f"Saved **{action}** on {escape(t.name)}" + (
        f" ({seconds:.1f} s active on item)." if seconds is not None else "."
    )
    if action in ("correct", "reject") and explanation and about_the_agent(explanation):
        saved += " " + AGENT_NOTE_WARNING
    st, view = vet_next(ctx, ex, state, filters, display)
    view.message = saved + (" " + view.message if view.message else "")
    # the page drops the texts it kept for it: the decision holds them
    # the page drops the texts it kept for it that the decision saved, as it sent them (a
    # correction typed beside a reject is not the reject's, and stays)
    took = {
        "comment",
        *(("reason",) if action == "reject" else ()),
        *(("explanation", "note") if action == "correct" else ()),
    }
    sent = {k: (typed.get(k) or "") for k in PAGE_TEXTS if k in took}
    view.form = {**view.form, "saved": {"key": t.key, "task": t.task, "texts": sent}}
    return st, view


def vet_comment(
    ctx: Context, ex: Viewer | None, state: dict, text: str, page: Any = None
) -> tuple[dict, str]:
    """A comment on the candidate the page names: added to this expert's review if there is
    one, else kept in their draft on it and saved with their decision."""
    text = (text or "").strip()[: review.MAX_TEXT]
    if not text:
        return dict(state or new_state()), "Write a comment first."
    state = dict(state or new_state())
    return state, vet_target.mark(ctx, ex, state, page, "comment", comment=text)[1]


def vet_grade(
    ctx: Context, ex: Viewer | None, state: dict, grade: Any, page: Any = None
) -> tuple[dict, str]:
    """Keys 1-4: the expert's grade for the candidate the page names. Added to their
    decision as a revision if they have decided it, else kept in their draft and saved with
    the decision."""
    try:
        g = int(grade)
    except (TypeError, ValueError):
        return dict(state or new_state()), f"A grade is 1-4 (got {escape(grade)})."
    if g not in review.GRADES:
        return dict(state or new_state()), f"A grade is 1-4 (got {g})."
    state = dict(state or new_state())
    return state, vet_target.mark(ctx, ex, state, page, f"grade {g}", grade=g)[1]


def vet_choose(
    ctx: Context, ex: Viewer | None, state: dict, name: str, value: Any, page: Any = None
) -> tuple[dict, str]:
    """The correct panel's label or wrong step (`name` "label" or "wrong_step") chosen on
    the candidate the page names: kept in its draft until the correction is saved, so a
    reload, a revisit or an undo shows it again."""
    what = "correction's label" if name == "label" else "wrong step"
    if value in (None, "") and name == "label":
        return dict(state or new_state()), ""
    state = dict(state or new_state())
    return state, vet_target.mark(ctx, ex, state, page, what, **{name: value})[1]


def vet_undo(
    ctx: Context, ex: Viewer | None, state: dict, display: Display, page: Any = None
) -> tuple[dict, VetView]:
    """`u`: take back the decision this page made last (the expert's last one where the
    page has made none: a reload, an API call) and show that candidate again with the
    undone values in its form."""
    if ex is None:
        return state or new_state(), empty_view("Log in to vet.")
    state = dict(state or new_state())
    shown = state.get("current")
    tab = vet_target.holder(state, page)
    state["tab"] = tab
    decided = list(state.get("decided") or [])
    cid = None
    while decided:  # the newest of this page's decisions that still stands
        c = decided.pop()
        if review.my_decision(ctx.store, ex.name, c) is not None:
            cid = c
            break
    state["decided"] = decided
    queue = ctx.queue()
    if cid is None:  # none of this page's: the expert's last decision
        last = review.last_decision(ctx.store, ex.name)
        cid = None if last is None else last.candidate_id
    if cid is not None and queue.held_elsewhere(ex.name, cid, tab):
        return _show(ctx, ex, state, shown, display,
                     f"Not undone: {escape(ctx.read.candidate(cid).key)} is open in another "
                     "tab of yours; undo it there.")  # fmt: skip
    try:
        done = review.undo(ctx.store, ex.name, lease_seconds=queue.config.lease_seconds,
                           keep=[shown] if shown is not None else [], holder=tab,
                           candidate_id=cid)  # fmt: skip
    except Exception as e:
        return _show(ctx, ex, state, shown, display, refusal("Not undone", e))
    if done is None:
        return _show(ctx, ex, state, shown, display, "Nothing to undo.")
    last = done.taken
    undecided = done.now.action == "undo"
    drafts.restore(ctx.store, ex.name, last.candidate_id, last, undecided=undecided)
    info = ctx.read.candidate(last.candidate_id)
    state = focus(state, last.candidate_id, info.key, info.task)
    state["current"] = None  # the clock starts again
    st, view = _show(ctx, ex, state, last.candidate_id, display)
    back = ("it is undecided again" if undecided
            else f"your earlier **{escape(done.now.action)}** is back")  # fmt: skip
    view.message = (f"Took back your **{escape(last.action)}** on "
                    f"{escape(info.key)} · {escape(info.task)}: {back}.")  # fmt: skip
    # the undone decision's texts go back into the form (keys.js keeps them as its draft)
    view.form = {**view.form, "restore": {
        "comment": last.comment or "",
        "reason": (last.explanation or "") if last.action == "reject" else "",
        "explanation": (last.explanation or "") if last.action == "correct" else "",
        "note": (last.note or "") if last.action == "correct" else "",
    }}  # fmt: skip
    if done.others:
        view.message += f" Also open for {escape(', '.join(done.others))}."
    return st, view
