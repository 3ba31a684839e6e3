"""The vet desk as each expert left it: the queue's filters and the display options are kept
per expert (`annotate.team.prefs`, in the store) as they change them, and the page opens
with them, its first candidate built with them. The toolbar says which filters narrow the
queue, so a remembered filter is never a silent one.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from annotate.team import prefs
from app import context
from app.pages import desk
from app.render_md import escape

log = logging.getLogger(__name__)

# the page's inputs in the order every vet event takes them, then the desk's toggles (which
# live in the session's state, `app.pages.desk`)
FILTERS = ("task", "band", "status", "survey", "split")
DISPLAY = ("markers", "error", "smooth", "frame", "images")
TOGGLES = ("normalised", "all_markers", "arms", "sky")
FIELDS = (*FILTERS, *DISPLAY, *TOGGLES)
LABELS = {"task": "task", "band": "P(YES)", "status": "status", "survey": "survey",
          "split": "split", "smooth": "smoothed", "frame": "frame",
          "markers": "no markers", "error": "no ±1σ", "images": "model's images"}  # fmt: skip


def summary_html(p: dict[str, Any]) -> str:
    """What narrows the queue or changes the view beyond the toolbar's own toggles, in one
    line beside the options button ("all candidates" when nothing does)."""
    parts = [f"{LABELS[k]} <b>{escape(p[k])}</b>" for k in FILTERS
             if p[k] != prefs.DEFAULTS[k]]  # fmt: skip
    view = []
    if p["smooth"]:
        view.append(f"smoothed <b>{int(p['smooth'])} px</b>")
    if p["frame"] != "rest":
        view.append(f"<b>{escape(p['frame'])}</b> frame")
    if p["images"]:
        view.append("model's images")
    queue = "queue: " + (" · ".join(parts) if parts else "all candidates")
    return (f'<div class="loupe-options-summary" title="o opens the filters and display options">'
            f"{queue}{' · ' + ' · '.join(view) if view else ''}</div>")  # fmt: skip


def _kept(ctx: context.Context, ex: Any) -> dict[str, Any]:
    if ex is None:
        return dict(prefs.DEFAULTS)
    try:
        return prefs.remembered(ctx.store, ex.name)
    except Exception as e:  # the desk opens with its defaults rather than not at all
        log.warning("desk preferences of %s not read: %s", ex.name, e)
        return dict(prefs.DEFAULTS)


def opening(
    ctx: context.Context, ex: Any, st: dict, values: list[Any], choices: dict[str, list]
) -> tuple[dict, list[Any], dict[str, Any]]:
    """The page's filter and display `values` (FILTERS then DISPLAY, as the page sends them)
    replaced by the expert's kept ones, and the state's desk with their toggles: (state,
    values, the expert's whole desk). A kept value the page no longer offers (`choices`
    per field) is left at the page's."""
    p = _kept(ctx, ex)
    out = []
    for name, v in zip((*FILTERS, *DISPLAY), values):
        ok = name not in choices or p[name] in choices[name]
        out.append(p[name] if ok else v)
        p[name] = out[-1]
    st = desk.set_option(st, **{k: bool(p[k]) for k in TOGGLES})
    return st, out, p


def updates(p: dict[str, Any], shown: dict[str, Any]) -> list[Any]:
    """The components' new values for the expert's desk `p`, in FIELDS order except the
    survey (sent with its choices by the view), then the summary; a value the page shows
    already is skipped (a change would redraw the candidate for nothing)."""
    out = [gr.update(value=p[k]) if p[k] != shown.get(k, prefs.DEFAULTS[k]) else gr.skip()
           for k in FIELDS if k != "survey"]  # fmt: skip
    return [*out, summary_html(p)]


def wire(ctx: context.Context, comps: dict[str, Any], summary: Any) -> None:
    """Each remembered component, changed by the expert (a click, a key), keeps the whole
    desk as it now is for them and updates the summary."""
    ins = [comps[k] for k in FIELDS]

    def keep(task, band, status, survey, split, markers, error, smooth, frame, images,
             normalised, all_markers, arms, sky, request: gr.Request) -> str:  # fmt: skip
        # named one by one: Gradio hands the request only to a named parameter
        ex = context.expert_for(ctx, request)
        values = dict(zip(FIELDS, (task, band, status, survey, split, markers, error, smooth,
                                   frame, images, normalised, all_markers, arms, sky)))  # fmt: skip
        if ex is None:
            return summary_html({**prefs.DEFAULTS, **values})
        try:
            return summary_html(prefs.remember(ctx.store, ex.name, **values))
        except Exception as e:  # shown, never lost silently: the view itself changed
            log.warning("desk preferences of %s not kept: %s", ex.name, e)
            return summary_html({**prefs.DEFAULTS, **values}).replace(
                "</div>", f" · <i>not remembered: {escape(e)}</i></div>"
            )

    # one event for them all: the page's config and Gradio's start grow by one dependency
    gr.on([comp.input for comp in ins], keep, ins, summary, api_name=False,
          show_progress="hidden", trigger_mode="always_last")  # fmt: skip
