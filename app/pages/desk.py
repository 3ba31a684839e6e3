"""The vet page's desk: redshift, template overlay, continuum-normalised view, all markers.

The expert's choices live in the session state (`state["desk"]`) and reach the figures as
fields of `Display` (`display_with`). The redshift shown starts at the agent's estimate
(the trajectory's `redshift`, else the spectrum file's pipeline Z) for each candidate; an
expert's own value holds for that candidate only, and is what the review records.

Beside it, Prospect's issue flags (Shift+R bad redshift fit, Shift+C bad spectral type,
Shift+S bad spectrum) and the expert's spectral type (typed, or the template chosen with
`t`) are kept as a grade is. Each of these, the redshift and the template included, is the
candidate's draft in the store (`annotate.drafts`): saved with the decision, or added to
the decision already made as a revision (`keep`); `follow` puts a candidate's own values on
the desk when it is shown, so nothing carries over to the next one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agent.errors import LoupeError
from agent.redshift import set_aside
from agent.spectrum import Spectrum
from agent.templates import Template, builtin_templates
from agent.trajectory import Trajectory
from annotate import drafts, review
from app.context import Context, Viewer, refusal
from app.pages import vet_target
from app.render_md import escape
from app.views import Display

Z_MIN, Z_MAX = -0.01, 7.0
SMALL_STEP, LARGE_STEP = 0.001, 0.05  # `[` `]` and `{` `}`


class RedshiftError(LoupeError, ValueError):
    """A typed redshift that is not a number in the control's range."""


def templates(ctx: Context) -> list[Template]:
    """The team's templates (`serve --templates DIR`) first, then the built-in ones."""
    return [*getattr(ctx, "templates", []), *builtin_templates()]


def template_names(ctx: Context) -> list[str]:
    return ["none", *(t.name for t in templates(ctx))]


def template_named(ctx: Context, name: str | None) -> Template | None:
    if not name or name == "none":
        return None
    return next((t for t in templates(ctx) if t.name == name), None)


def estimate(spec: Spectrum, traj: Trajectory | None) -> tuple[float, str]:
    """The agent's redshift for this candidate and where it came from."""
    z = getattr(traj, "redshift", None) if traj is not None else None
    if isinstance(z, dict):  # Trajectory.redshift: {"value", "quality", "source"}
        z = z.get("value")
    if z is not None:
        return float(z), "agent"
    return float(spec.redshift), "pipeline"


def agent_z_note(spec: Spectrum, traj: Trajectory | None) -> str:
    """How the agent got its redshift, and a pipeline value the reader set aside."""
    z = getattr(traj, "redshift", None) if traj is not None else None
    parts = []
    if isinstance(z, dict) and z.get("source") not in (None, "none"):
        q = z.get("quality")
        parts.append(f"{z['source']}" + (f", {q}" if q and q != z["source"] else ""))
    aside = set_aside(spec)
    if aside is not None:
        parts.append(f"file's Z {aside[0]:.4f} set aside: {aside[1]}")
    return "; ".join(parts)


def desk_of(state: dict | None) -> dict[str, Any]:
    return dict((state or {}).get("desk") or {})


def display_with(state: dict | None, display: Display) -> Display:
    """`display` with the desk's choices (the chosen z names the candidate it was set on)."""
    d = desk_of(state)
    return dataclasses.replace(
        display,
        normalised=bool(d.get("normalised")),
        all_markers=bool(d.get("all_markers")),
        arms=bool(d.get("arms")),
        sky=bool(d.get("sky")),
        template=d.get("template") or "none",
        z=d.get("z"),
        z_key=d.get("z_key"),
    )


def _mine(display: Display, key: str | None) -> float | None:
    return display.z if display.z is not None and key and display.z_key == key else None


def overlay(
    ctx: Context, display: Display, key: str, spec: Spectrum, traj: Trajectory | None
) -> tuple[Template | None, float]:
    """The template to draw on candidate `key` and the redshift to draw it at."""
    z = _mine(display, key)
    return template_named(ctx, display.template), shown_z(
        z if z is not None else estimate(spec, traj)[0]
    )


def redshift_info(
    display: Display, key: str, spec: Spectrum, traj: Trajectory | None
) -> dict[str, Any]:
    """What the redshift control shows for candidate `key`."""
    est, source = estimate(spec, traj)
    z = _mine(display, key)
    return {"estimate": est, "source": source, "z": est if z is None else z,
            "set_by_expert": z is not None, "note": agent_z_note(spec, traj)}  # fmt: skip


def shown_z(z: float) -> float:
    """z at the control's resolution (its step, 0.0001), as the slider shows it and the
    template is drawn; a pipeline's -0.00003 is 0, never "-0.0000"."""
    return round(float(z), 4) + 0.0


def info_html(info: dict[str, Any] | None) -> str:
    if not info:
        return '<div id="desk-z-info">no redshift</div>'
    who = "agent" if info["source"] == "agent" else "pipeline (file's Z)"
    on = info.get("decided")
    kept = f"saved on your {escape(on)}" if on else "in your draft, saved with your decision"
    mine = (f" · yours: <b>{shown_z(info['z']):.4f}</b> ({kept})"
            if info["set_by_expert"] else "")  # fmt: skip
    note = f' <span class="z-note">({escape(info["note"])})</span>' if info.get("note") else ""
    return (f'<div id="desk-z-info">{escape(who)} z = <b>{shown_z(info["estimate"]):.4f}</b>'
            f"{note}{mine}</div>")  # fmt: skip


def typed_z(text: Any) -> float:
    """The redshift the expert typed in the box, or a clear refusal."""
    raw = str(text if text is not None else "").strip()
    try:
        z = float(raw)
    except ValueError:
        z = float("nan")
    if not Z_MIN <= z <= Z_MAX:  # NaN fails this too
        raise RedshiftError(
            f"redshift {raw or '(empty)'!r} is not a number from {Z_MIN} to {Z_MAX:g}"
        )
    return z


def enter_z(state: dict, text: Any) -> tuple[dict, str]:
    """The redshift typed in the box (Enter) as the expert's; a refusal keeps the state and
    says why."""
    try:
        return set_z(state, typed_z(text)), ""
    except RedshiftError as e:
        return state, f"Redshift not changed: {escape(e)}."


def with_message(view: Any, message: str) -> Any:
    return dataclasses.replace(view, message=message)


def set_z(state: dict, z: float | None, source: str = "expert") -> dict:
    """The expert's redshift for the shown candidate (None: back to the agent's); `source`
    "agent" when the expert adopted the agent's (or pipeline's) estimate as it is."""
    state = dict(state or {})
    d = desk_of(state)
    if z is None or state.get("key") is None:
        d.pop("z", None)
        d.pop("z_key", None)
        d.pop("z_source", None)
    else:
        d["z_source"] = source
        d["z"] = round(min(Z_MAX, max(Z_MIN, float(z))), 5) + 0.0  # never "-0.0000"
        d["z_key"] = state.get("key")
    state["desk"] = d
    return state


def set_option(state: dict, **opts: Any) -> dict:
    state = dict(state or {})
    d = desk_of(state)
    d.update(opts)
    state["desk"] = d
    return state


def chosen_z(state: dict | None) -> tuple[float | None, str | None]:
    """The expert's redshift on the shown candidate, for the review: (z, "expert") or None."""
    d = desk_of(state)
    if d.get("z") is not None and d.get("z_key") == (state or {}).get("key"):
        return float(d["z"]), d.get("z_source") or "expert"
    return None, None


# The built-in templates a task's candidates are judged against: its own class, then what
# usually masquerades as it. `t` offers these first.
TASK_TEMPLATES: dict[str, tuple[str, ...]] = {
    "cv": ("cataclysmic variable", "M dwarf", "QSO"),
    "carbon": ("carbon star", "S star", "M giant"),
    "s_type": ("S star", "M giant", "carbon star"),
    "m_giant": ("M giant", "M dwarf", "K giant", "S star"),
    "wd": ("DA white dwarf", "DB white dwarf", "A star", "QSO"),
}


def next_template(ctx: Context, current: str | None, step: int = 1, task: str | None = None) -> str:
    """The template after `current` (`t`): the task's own classes first, then the rest."""
    names = template_names(ctx)
    first = [n for n in TASK_TEMPLATES.get(task or "", ()) if n in names]
    names = ["none", *first, *(n for n in names[1:] if n not in first)]
    i = names.index(current) if current in names else 0
    return names[(i + step) % len(names)]


def task_of(ctx: Context, state: dict | None) -> str | None:
    """The task of the candidate shown."""
    cid = (state or {}).get("current")
    return None if cid is None else ctx.read.candidate(cid).task


def adopt_z(ctx: Context, state: dict | None) -> float | None:
    """The agent's (or pipeline's) redshift of the shown candidate, to adopt as it is."""
    cid = (state or {}).get("current")
    if cid is None:
        return None
    c = ctx.read.candidate(cid)
    traj = ctx.read.trajectory(c.trajectory_id) if c.trajectory_id is not None else None
    return estimate(ctx.read.load_spectrum(cid), traj)[0]


MARKS = {"issues": "Issue flags", "spectype": "Spectral type"}


def follow(state: dict, key: str, draft: dict[str, Any], mine: Any,
           names: list[str] | None = None) -> dict:  # fmt: skip
    """The desk's redshift and template as they are for candidate `key`: the expert's
    decision's redshift (when decided) or their draft's, and the draft's template (on a
    decided candidate, the template its spectral type names, of `names`); none carries over
    from another candidate."""
    state = dict(state or {})
    d = desk_of(state)
    for k in ("z", "z_key", "z_source"):
        d.pop(k, None)
    if mine is not None:
        z, src = getattr(mine, "redshift", None), getattr(mine, "redshift_source", None)
    else:
        z, src = draft.get("redshift"), draft.get("redshift_source")
    if z is not None and src is not None:
        d.update(z=round(float(z), 5) + 0.0, z_key=key, z_source=src)
    template = draft.get("template")
    if template is None and mine is not None and getattr(mine, "spectype", None) in (names or []):
        template = mine.spectype
    d["template"] = template or "none"
    state["desk"] = d
    return state


def marks(draft: dict[str, Any], mine: Any) -> dict[str, str | None]:
    """The issue flags and spectral type of the shown candidate: its decision's when the
    expert has decided it, else its draft's."""
    src = draft if mine is None else {k: getattr(mine, k, None) for k in MARKS}
    return {k: src.get(k) for k in MARKS}


def keep(ctx: Context, ex: Viewer | None, state: dict, what: str, shown: str,
         page: Any = None, **fields: Any) -> tuple[dict, str]:  # fmt: skip
    """Set draft fields on the candidate the page names (`app.pages.vet_target.mark`): kept in
    the draft until the expert decides it, or added to their decision as a revision. Returns
    the state and what the desk says."""
    state = dict(state or {})
    try:
        drafts.clean_all(fields)
    except review.ReviewError as e:
        return state, refusal(f"{what} not kept", e)
    return state, vet_target.mark(ctx, ex, state, page, what.lower(), f"{what} {shown}",
                                  **fields)[1]  # fmt: skip


def set_mark(ctx: Context, ex: Viewer | None, state: dict, name: str, value: Any,
             page: Any = None) -> tuple[dict, str]:  # fmt: skip
    """Issue flags (`name` "issues": letters or a list of them) or the spectral type
    ("spectype") on the candidate the page names: added to the expert's decision as a
    revision if they have decided it, else kept in their draft on it and saved with their
    decision."""
    what = MARKS[name]
    if isinstance(value, (list, tuple)):
        value = "".join(value)
    try:
        v = review.issue_flags(value) if name == "issues" else review.spectral_type(value)
    except review.ReviewError as e:
        return dict(state or {}), refusal(f"{what} not kept", e)
    return keep(ctx, ex, state, what, f"**{escape(v)}**" if v else "cleared", page,
                **{name: v})  # fmt: skip


def keep_z(ctx: Context, ex: Viewer | None, state: dict, page: Any = None) -> tuple[dict, str]:
    """The redshift on the desk (`set_z`) as the expert's for the candidate the page names."""
    z, src = chosen_z(state)
    shown = "cleared" if z is None else f"**{shown_z(z):.4f}**"
    return keep(ctx, ex, state, "Redshift", shown, page, redshift=z, redshift_source=src)
