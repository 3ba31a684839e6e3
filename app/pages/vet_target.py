"""What a write from the vet page acts on: the candidate, task and revision the page shows.

Every request that writes (a decision, a grade, a flag, a spectral type, a redshift, a
template, a comment, a correction) carries a `Target` read from the page at the moment the
expert pressed the key or clicked: the candidate's store id, its id and task as the header
shows them, the revision of its reviews the page last saw (`annotate.review.revision`) and
the page's own holder id (a browser tab; a reload keeps it). The server acts on exactly that
candidate, or refuses in one line that names it (`check`):

- the page no longer holds it (another of the expert's tabs has it open, or another expert
  took the last slot): nothing is written;
- its reviews changed since the page drew it (decided meanwhile in another tab, by another
  expert, or taken back): a conflict naming what the page showed and what the store holds;
  what the expert typed stays in the page.

Nothing acts on "the current candidate" as the session remembers it: the session's state
only says where j and k go. An API caller that sends no target acts on the candidate the
session shows, as before, without the revision check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from annotate import drafts, review
from app.context import Context, Viewer, refusal
from app.render_md import escape


@dataclass(frozen=True)
class Target:
    cid: int
    key: str
    task: str
    rev: int | None  # None: not said (an API call), so not checked
    tab: str  # the page's holder id ("" for an API caller without one)
    saw: str = ""  # this expert's decision as the page showed it ("" for none)
    form: dict[str, Any] | None = None  # what the page's form held, where it sent it

    @property
    def name(self) -> str:
        """The candidate as status lines name it: id and task."""
        return f"{self.key} · {self.task}"


def payload(raw: Any) -> dict[str, Any]:
    """The page's JSON (or a dict) as a dict; {} when there is none or it is not an object."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def holder(state: dict | None, raw: Any = None, request: Any = None) -> str:
    """The page's holder id: the one it sent, else the one it sent before (kept in the
    session), else the session's own hash (an API client)."""
    tab = payload(raw).get("tab")
    if isinstance(tab, str) and tab.strip():
        return tab.strip()[:64]
    kept = (state or {}).get("tab")
    if kept:
        return str(kept)
    return str(getattr(request, "session_hash", "") or "")


def parse(ctx: Context, state: dict | None, raw: Any, tab: str = "") -> Target | None:
    """The target the page named, or, without one, the candidate the session shows (no
    revision check). None when neither names a candidate."""
    p = payload(raw)
    tab = tab or holder(state, raw)
    form = p.get("form") if isinstance(p.get("form"), dict) else None
    if p.get("cid") not in (None, ""):
        try:
            cid = int(p["cid"])
            rev = None if p.get("rev") in (None, "") else int(p["rev"])
        except (TypeError, ValueError):
            return None
        return Target(cid, str(p.get("key") or ""), str(p.get("task") or ""), rev, tab,
                      str(p.get("saw") or ""), form)  # fmt: skip
    cid = (state or {}).get("current")
    if cid is None:
        return None
    try:
        c = ctx.read.candidate(int(cid))
    except Exception:
        return Target(int(cid), "", "", None, tab, form=form)  # `check` says it is gone
    return Target(c.id, c.key, c.task, None, tab, form=form)


def _now(ctx: Context, ex: Viewer, cid: int) -> str:
    """What the store holds on the candidate now, in words (another expert's vote is not
    named: it would bias this one's)."""
    mine = review.my_decision(ctx.store, ex.name, cid)
    others = [r for r in review.decisions(ctx.store, cid) if mine is None or r.id != mine.id]
    parts = [f"your {mine.action}" if mine is not None else "not decided by you"]
    if others:
        parts.append(f"{len(others)} other expert decision(s)")
    return ", ".join(parts)


@dataclass(frozen=True)
class Refusal:
    """Why a write was not applied: `kind` "unknown" (no such candidate), "elsewhere" (open
    in another tab of the expert's), "taken" (another expert has the last slot) or "changed"
    (its reviews changed since the page drew it); `text` says it in one line."""

    kind: str
    text: str


def check(ctx: Context, ex: Viewer, t: Target, what: str) -> Refusal | None:
    """None when `what` (the write, in words: "accept", "grade 3") may act on the target,
    which is then leased to the page; else why not, in one line naming the candidate."""
    try:
        c = ctx.read.candidate(t.cid)
    except Exception:
        return Refusal("unknown", f"Not saved: your {escape(what)}: no candidate #{t.cid} "
                       "in this store.")  # fmt: skip
    if (t.key and c.key != t.key) or (t.task and c.task != t.task):
        return Refusal("unknown", f"Not saved: your {escape(what)} named {escape(t.key)} · "
                       f"{escape(t.task)}, which is not candidate #{t.cid}; reload the page.")  # fmt: skip
    name = escape(f"{c.key} · {c.task}")
    queue = ctx.queue()
    if not queue.hold(ex.name, c.id, t.tab):
        if queue.held_elsewhere(ex.name, c.id, t.tab):
            return Refusal("elsewhere", f"Not saved: your {escape(what)} on {name}: it is open "
                           "in another tab of yours now; decide it there (what you typed here "
                           "is kept).")  # fmt: skip
        return Refusal("taken", f"Not saved: your {escape(what)} on {name}: it was taken by "
                       "another expert meanwhile (the team's overlap is reached).")  # fmt: skip
    if t.rev is not None:
        now = review.revision(ctx.store, c.id)
        if now != t.rev:
            saw = f"your {t.saw}" if t.saw else "not decided by you"
            return Refusal("changed", f"Not saved: your {escape(what)} on {name}: it changed "
                           f"since this tab showed it (this tab showed: {escape(saw)}; the "
                           f"store holds: {escape(_now(ctx, ex, c.id))}). What you typed is "
                           "kept; look again and decide.")  # fmt: skip
    return None


def mark(ctx: Context, ex: Viewer | None, state: dict | None, page: Any, what: str,
         said: str = "", **fields: Any) -> tuple[bool, str]:  # fmt: skip
    """Set draft fields (`annotate.drafts.set_field`) on the candidate the page names: kept in
    the draft until the expert decides it, or added to their decision as a revision; what
    the desk says (`said`: how it names the change, Markdown, default `what`): (whether it
    was written, the line)."""
    if ex is None:
        return False, "Log in first."
    t = parse(ctx, state, page)
    if t is None:
        return False, f"Nothing shown: {escape(what)} not kept."
    head = said or escape(what.capitalize())
    try:
        same = drafts.unchanged(ctx.store, ex.name, t.cid, **fields)
    except Exception:
        same = False  # set_field says what is wrong with it
    if same:
        # the box's blur after its Enter, a click on what is already chosen: nothing to
        # act on, so not refused for a revision this page's own write has just made
        return False, f"{head} on {escape(t.name)}: already so."
    refused = check(ctx, ex, t, what)
    if refused is not None:
        return False, refused.text
    try:
        mine = drafts.set_field(ctx.store, ex.name, t.cid, **fields)
    except Exception as e:
        return False, refusal(f"{escape(what.capitalize())} not saved on {escape(t.name)}", e)
    if mine is None:
        return (
            True,
            f"{head} kept in your draft on {escape(t.name)}: it is saved with your decision.",
        )
    return True, f"{head} saved on {escape(t.name)} (your {escape(mine.action)}, as a revision)."


def answered(ctx: Context, ex: Viewer | None, state: dict | None, page: Any) -> str:
    """What the page learns after a write: the named candidate's revision now, as JSON
    {"cid", "rev"} ("" when there is none), so that its next write names it."""
    t = parse(ctx, state, page)
    if ex is None or t is None:
        return ""
    try:
        return json.dumps({"cid": t.cid, "rev": review.revision(ctx.store, t.cid)})
    except Exception:
        return ""
