"""The texts an expert types on the vet page (comment, a reject's reason, a correction's
reasoning and note): kept by the page per expert and candidate (app/keys.js, the browser's
storage) until a decision, or an explicit save, carries them to the store.

A decision's request brings the texts kept for the candidate its key was pressed on
(`page_text`); moving away from a decided candidate brings its edited comment, which
amends the decision (`leave`). Each answer tells the page which texts the store now holds
(`VetView.form["saved"]`), and the page drops those.
"""

from __future__ import annotations

import json
from typing import Any

from annotate import review
from app.context import Context, Viewer
from app.pages import vet_target

# the text boxes keys.js keeps per candidate
PAGE_TEXTS = ("comment", "reason", "explanation", "note")


def page_text(page: str | dict | None, key: str | None, task: str | None = None
              ) -> dict[str, str]:  # fmt: skip
    """The texts the page kept for candidate `key` of `task` (its JSON, or a dict): {} when
    they are another candidate's (another id, or the same id's candidate of another task)."""
    if isinstance(page, str):
        try:
            page = json.loads(page) if page.strip() else {}
        except ValueError:
            page = {}
    if not isinstance(page, dict) or key is None or str(page.get("key")) != str(key):
        return {}
    if task and page.get("task") and page["task"] != task:
        return {}
    return {k: page[k][: review.MAX_TEXT].strip() for k in PAGE_TEXTS
            if isinstance(page.get(k), str)}  # fmt: skip


def leave(ctx: Context, ex: Viewer | None, state: dict, page: str | dict | None
          ) -> tuple[str, dict[str, Any] | None]:  # fmt: skip
    """Moving away (j, k) from a candidate the expert has decided: a comment edited in the
    page and not sent amends their decision (a revision) on the candidate the page names
    (`app.pages.vet_target`: refused where it changed meanwhile). Returns what to say (""
    if nothing changed) and what the page is told the store now holds ({"key", "task",
    "texts": {"comment": ...}}, or None); an undecided candidate's texts stay the page's, sent
    with its decision."""
    t = vet_target.parse(ctx, state, page)
    if ex is None or t is None:
        return "", None
    text = page_text(page, t.key, t.task).get("comment")
    if text is None:
        return "", None
    mine = review.my_decision(ctx.store, ex.name, t.cid)
    if mine is None or text == (mine.comment or ""):
        return "", None
    written, said = vet_target.mark(ctx, ex, state, page, "comment", comment=text or None)
    saved = {"key": t.key, "task": t.task, "texts": {"comment": text}}
    return said, saved if written else None


def with_left(out: list[Any], note: str, saved: dict[str, Any] | None, i_message: int,
              i_form: int) -> list[Any]:  # fmt: skip
    """A move's outputs (app/ui/vet.py) with `leave`'s note said first, and the page told
    which comment it kept is in the store now (`saved`)."""
    out = list(out)
    msg = out[i_message]
    out[i_message] = note + (" " + msg if isinstance(msg, str) and msg else "")
    if saved is not None:
        form = json.loads(out[i_form])
        form["saved"] = saved
        out[i_form] = json.dumps(form)
    return out
