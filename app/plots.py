"""Plotly figures of a candidate and its trajectory, built as plain figure dicts.

Dicts, not `go.Figure`: building and validating graph objects costs tens of milliseconds per
panel, and switching candidates must stay well under 300 ms with up to eight panels. The
dicts follow Plotly's schema (the tests validate them with `go.Figure`).

- The global panel decimates to `GLOBAL_POINTS` with a min/max envelope per bin, so narrow
  lines and spikes stay visible however long the spectrum is; zoom panels keep every pixel
  up to two per screen pixel column (`ZOOM_POINTS`), beyond which they are thinned the same
  way.
- The zoom panels of a trajectory are drawn as one figure of stacked subplots
  (`stack_panels`): the browser redraws one plot per candidate instead of one per step.
- Traces above `WEBGL_ABOVE` points are WebGL (`scattergl`); decimated ones stay SVG,
  because creating a WebGL context on every redraw costs more than drawing a few thousand
  points as one SVG path, and a page only gets a handful of WebGL contexts.
- Wavelengths are shown in the rest frame (vacuum, what the zoom tool's ranges refer to)
  or in the observed frame of the file; windows and markers follow the chosen frame.
- Masked pixels (NaN flux, ivar <= 0, survey mask) become gaps, never data.
- On demand (`arms`, `sky`), a file's arms before merging (DESI's B/R/Z, in Prospect's
  colours, over the merged flux faded) and its sky spectrum (a faint line); a file that
  holds neither says so in the title. Nothing of them is built unless asked.

A candidate's figures are built in one pass: the spectrum is converted to the display once
(`app.shown.shown`: frame, normalisation, smoothing, masking, arms, sky), and the panels
(`global_panel`, `step_panels`) read that; `global_figure`, `window_figure` and
`step_figures` do both for one figure. The traces are in `app.traces`; line and band
markers, their labels and the template overlay in `app.markers`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from agent.spectrum import Spectrum
from agent.trajectory import Step, Trajectory
from app.markers import ZOOM_WIDTH_PX, Marker, marker_shapes, template_trace
from app.shown import Frame, Shown, shown
from app.traces import (
    GLOBAL_POINTS,
    MERGED_OPACITY,
    ZOOM_POINTS,
    arm_traces,
    sky_trace,
    spectrum_traces,
    ylimits,
)

PANEL_HEIGHT = 260  # px of one zoom panel
WINDOW_COLOURS = ["#f4a261", "#2a9d8f", "#e76f51", "#8ab17d", "#b56576", "#6d597a", "#e9c46a"]


def _layout(title: str, xlabel: str, height: int) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"},
        "height": height,
        "margin": {"l": 55, "r": 10, "t": 30, "b": 40},
        "xaxis": {"title": {"text": xlabel}, "showgrid": True, "gridcolor": "#eee"},
        "yaxis": {"title": {"text": "flux"}, "showgrid": True, "gridcolor": "#eee"},
        "plot_bgcolor": "white",
        "paper_bgcolor": "white",
        "showlegend": False,
        "hovermode": "x",
        "uirevision": title,
    }


# inside the plot's top right, under Plotly's toolbar (which sits above it)
LEGEND = {
    "orientation": "h",
    "x": 1,
    "xanchor": "right",
    "y": 0.98,
    "yanchor": "top",
    "bgcolor": "rgba(255,255,255,0.7)",
}


def _arms_and_sky(
    view: Shown,
    traces: list[dict[str, Any]],
    sel: slice | Any,
    *,
    max_points: int | None,
    window: tuple[float, float] | None = None,
) -> list[dict[str, Any]]:
    """`traces` with the arms over the faded merged flux and the sky under everything,
    where the display shows them."""
    if view.arms is not None:
        drawn = arm_traces(view, window=window, max_points=max_points)
        if drawn:
            traces = [
                {**t, "opacity": MERGED_OPACITY} if t.get("name") == "flux" else t for t in traces
            ]
            at = next((i + 1 for i, t in enumerate(traces) if t.get("name") == "flux"), 0)
            traces = traces[:at] + drawn + traces[at:]
    tr = sky_trace(view, sel, max_points=max_points)
    if tr is not None:
        traces = [tr, *traces]
    return traces


def global_panel(
    view: Shown,
    traj: Trajectory | None = None,
    *,
    markers: list[Marker] | None = None,
    max_points: int = GLOBAL_POINTS,
    highlight: int | None = None,
    windows: list[tuple[float, float]] | None = None,
    select: bool = False,
    height: int = 320,
    template: Any = None,
    template_z: float = 0.0,
    marker_z: float | None = None,
) -> dict[str, Any]:
    """The whole spectrum as `view` shows it, with every zoom window shaded and numbered
    (1 = first zoom). Line markers are drawn for an object at `marker_z` (the page's shown
    redshift; None: the spectrum's own).

    `windows` overrides the trajectory's windows (the author page's draft steps);
    `select=True` makes dragging select an x range instead of zooming; `template`
    (agent.templates.Template) is drawn at `template_z`.
    """
    spec = view.spec
    traces = spectrum_traces(view, slice(None), max_points=max_points)
    traces = _arms_and_sky(view, traces, slice(None), max_points=max_points)
    layout = _layout(
        f"{spec.id or 'spectrum'}: whole spectrum" + (f" ({traj.task})" if traj else "")
        + view.lacks,
        view.xlabel,
        height,
    )  # fmt: skip
    if any(t.get("name", "").startswith(("arm ", "sky")) for t in traces):
        layout["showlegend"] = True
        layout["legend"] = dict(LEGEND)
    layout["yaxis"]["title"]["text"] = view.ylabel
    yl = ylimits(view.flux)
    if yl:
        layout["yaxis"]["range"] = yl
    if template is not None:
        tr = template_trace(view, template, template_z)
        if tr is not None:
            traces.append(tr)
            layout["showlegend"] = True
            layout["legend"] = dict(LEGEND)
        else:
            layout["title"]["text"] += f" · {template.name} at z = {template_z:.3f} is off the data"
    xr = (float(view.x[0]), float(view.x[-1]))
    layout["xaxis"]["range"] = [xr[0], xr[1]]
    shapes: list[dict] = []
    notes: list[dict] = []
    if windows is None:
        windows = [s.window for s in (traj.steps if traj else []) if s.window is not None]
    for i, (lo, hi) in enumerate(windows):
        a, b = (float(v) for v in view.to_frame(np.array([lo, hi])))
        colour = WINDOW_COLOURS[i % len(WINDOW_COLOURS)]
        strong = highlight is not None and highlight == i
        shapes.append(
            {
                "type": "rect", "xref": "x", "yref": "paper", "x0": a, "x1": b, "y0": 0, "y1": 1,
                "fillcolor": colour, "opacity": 0.35 if strong else 0.18, "layer": "below",
                "line": {"color": colour, "width": 2 if strong else 1},
            }
        )  # fmt: skip
        notes.append(
            {
                "x": (a + b) / 2, "xref": "x", "y": 1.0, "yref": "paper", "yanchor": "top",
                "text": f"<b>{i + 1}</b>", "showarrow": False,
                "font": {"size": 13, "color": "white"}, "bgcolor": colour, "borderpad": 2,
            }
        )  # fmt: skip
    if markers:
        s2, n2 = marker_shapes(view, markers, xr, z=marker_z)
        shapes += s2
        notes += n2
    layout["shapes"] = shapes
    layout["annotations"] = notes
    if select:
        layout["dragmode"] = "select"
        layout["selectdirection"] = "h"
    return {"data": traces, "layout": layout}


def window_panel(
    view: Shown,
    window: tuple[float, float],
    *,
    title: str,
    markers: list[Marker] | None = None,
    height: int = PANEL_HEIGHT,
    max_points: int | None = ZOOM_POINTS,
    marker_z: float | None = None,
) -> dict[str, Any]:
    """One window (rest-frame Angstrom) of `view` at full resolution (up to `max_points`).
    What the file lacks is said once, over the whole spectrum."""
    lo, hi = float(min(window)), float(max(window))
    sel = view.select(lo, hi)
    traces = spectrum_traces(view, sel, max_points=max_points)
    traces = _arms_and_sky(view, traces, sel, max_points=max_points, window=(lo, hi))
    layout = _layout(title, view.xlabel, height)
    layout["yaxis"]["title"]["text"] = view.ylabel
    a, b = (float(v) for v in view.to_frame(np.array([lo, hi])))
    layout["xaxis"]["range"] = [a, b]
    if sel.any():
        yl = ylimits(view.flux[sel])
        if yl:
            layout["yaxis"]["range"] = yl
    else:
        layout["annotations"] = [
            {
                "text": "no pixels in this window", "x": 0.5, "y": 0.5, "xref": "paper",
                "yref": "paper", "showarrow": False,
            }
        ]  # fmt: skip
    if markers:
        s2, n2 = marker_shapes(view, markers, (a, b), ZOOM_WIDTH_PX, z=marker_z)
        layout["shapes"] = s2
        layout["annotations"] = layout.get("annotations", []) + n2
    return {"data": traces, "layout": layout}


def step_panels(
    view: Shown,
    traj: Trajectory,
    *,
    markers: list[Marker] | None = None,
    marker_z: float | None = None,
) -> list[tuple[Step, dict[str, Any] | None]]:
    """Each step with its window panel of `view` (None for a step with no window: the
    answer, errors)."""
    out: list[tuple[Step, dict[str, Any] | None]] = []
    n = 0
    for step in traj.steps:
        if step.window is None:
            out.append((step, None))
            continue
        fig = window_panel(view, step.window, title=step_title(n, step), markers=markers,
                           marker_z=marker_z)  # fmt: skip
        out.append((step, fig))
        n += 1
    return out


# -- one figure at a time, from the spectrum (the author page, tests) ---------------------


def global_figure(
    spec: Spectrum,
    traj: Trajectory | None = None,
    *,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    normalised: bool = False,
    arms: bool = False,
    sky: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """`global_panel` of `spec` shown in `frame` (`normalised` divides by the continuum;
    `arms` and `sky` draw the file's arms and sky spectrum); `kwargs` go to `global_panel`."""
    view = shown(spec, frame, normalised=normalised, smooth_width=smooth_width,
                 show_error=show_error, arms=arms, sky=sky)  # fmt: skip
    return global_panel(view, traj, **kwargs)


def window_figure(
    spec: Spectrum,
    window: tuple[float, float],
    *,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    normalised: bool = False,
    arms: bool = False,
    sky: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """`window_panel` of `spec` shown as `global_figure` shows it."""
    view = shown(spec, frame, normalised=normalised, smooth_width=smooth_width,
                 show_error=show_error, arms=arms, sky=sky)  # fmt: skip
    return window_panel(view, window, **kwargs)


def step_figures(
    spec: Spectrum,
    traj: Trajectory,
    *,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    normalised: bool = False,
    arms: bool = False,
    sky: bool = False,
    **kwargs: Any,
) -> list[tuple[Step, dict[str, Any] | None]]:
    """`step_panels` of `spec` shown as `global_figure` shows it."""
    view = shown(spec, frame, normalised=normalised, smooth_width=smooth_width,
                 show_error=show_error, arms=arms, sky=sky)  # fmt: skip
    return step_panels(view, traj, **kwargs)


def step_title(index: int, step: Step) -> str:
    label = ""
    if step.tool_call:
        label = str((step.tool_call.get("arguments") or {}).get("label") or "")
    lo, hi = step.window or (0.0, 0.0)
    return f"{index + 1}. {lo:.0f}–{hi:.0f} Å" + (f" · {label}" if label else "")


def _axis_ref(ref: str, k: int, axis: str) -> str:
    """A one-panel figure's reference ("x", "y", "paper", "x domain") for subplot `k`:
    the panel's paper is its subplot's domain."""
    name = f"{axis}{k if k > 1 else ''}"
    return name if ref == axis else f"{name} domain"


def stack_panels(
    figs: list[dict[str, Any]], *, panel_height: int = PANEL_HEIGHT, revision: str = ""
) -> dict[str, Any]:
    """Panels from `window_figure` (or `empty_figure`) as one figure, one row each.

    Every panel keeps its traces, axes, ranges, markers and notes; its title becomes a
    note above its row. Row k spans exactly `panel_height` px from the top (`k *
    panel_height`), so text laid out beside the figure in blocks of that height lines up.
    """
    n = max(1, len(figs))
    total = n * panel_height
    top_gap, bottom_gap = 26, 44  # px inside a row: its title; tick labels and axis title
    layout: dict[str, Any] = {
        "height": total,
        "margin": {"l": 55, "r": 10, "t": 0, "b": 0},
        "plot_bgcolor": "white",
        "paper_bgcolor": "white",
        "showlegend": False,
        "hovermode": "x",
        "shapes": [],
        "annotations": [],
    }
    data: list[dict[str, Any]] = []
    revs = []
    for i, fig in enumerate(figs):
        k = i + 1
        sub = fig["layout"]
        y1 = 1 - (i * panel_height + top_gap) / total
        y0 = 1 - ((i + 1) * panel_height - bottom_gap) / total
        xa = dict(sub.get("xaxis") or {})
        ya = dict(sub.get("yaxis") or {})
        xname, yname = _axis_ref("x", k, "x"), _axis_ref("y", k, "y")
        xa.update(domain=[0.0, 1.0], anchor=yname)
        if i < n - 1 and "title" in xa:  # the axis title once, under the last panel
            xa["title"] = {"text": ""}
        ya.update(domain=[y0, y1], anchor=xname)
        layout["xaxis" + xname[1:]] = xa
        layout["yaxis" + yname[1:]] = ya
        for t in fig["data"]:
            data.append({**t, "xaxis": xname, "yaxis": yname})
        for key in ("shapes", "annotations"):
            for item in sub.get(key) or []:
                item = dict(item)
                for ref in ("xref", "yref"):
                    item[ref] = _axis_ref(item.get(ref, ref[0]), k, ref[0])
                layout[key].append(item)
        title = ((sub.get("title") or {}).get("text")) or ""
        revs.append(title)
        if title:
            layout["annotations"].append(
                {
                    "text": title, "x": 0, "xref": f"{xname} domain", "xanchor": "left",
                    "y": 1, "yref": f"{yname} domain", "yanchor": "bottom",
                    "showarrow": False, "font": {"size": 13},
                }
            )  # fmt: skip
    # Keep the expert's own zoom/pan while the same panels are redrawn (markers, smoothing),
    # not across candidates (`revision` names the candidate).
    layout["uirevision"] = "|".join([revision, *revs])
    return {"data": data, "layout": layout}


def empty_figure(message: str, height: int = 200) -> dict[str, Any]:
    """A figure that holds only `message`, broken into lines: Plotly draws an annotation
    on one line, and a long one is clipped at both sides of a half-width panel.

    >>> empty_figure("a " * 40)["layout"]["annotations"][0]["text"].count("<br>")
    1
    """
    import textwrap

    message = "<br>".join(textwrap.wrap(message, 60)) or message
    return {
        "data": [],
        "layout": {
            "height": height,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {
                    "text": message,
                    "x": 0.5,
                    "y": 0.5,
                    "xref": "paper",
                    "yref": "paper",
                    "showarrow": False,
                    "font": {"size": 14},
                }
            ],  # fmt: skip
            "plot_bgcolor": "white",
        },
    }


def to_json(fig: dict[str, Any]) -> str:
    return json.dumps(fig, separators=(",", ":"), allow_nan=False)


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def stamped(fig: dict[str, Any], text: str | None = None, **meta: Any) -> dict[str, Any]:
    """`fig` (not changed: it may be cached) with its content's hash in `layout.meta.h`, and
    `meta`. `text`: `to_json(fig)` where the caller has it already (a whole spectrum's
    figure is the largest thing a vet answer serialises)."""
    layout = fig.get("layout") or {}
    h = _hash(to_json(fig) if text is None else text)
    return {**fig, "layout": {**layout, "meta": {**(layout.get("meta") or {}), "h": h, **meta}}}


def drawn_token(view: Any, text: str | None = None) -> str:
    """Names a `VetView`'s header and whole-spectrum figure: the page sends back the token of
    what it drew ahead at a key press, and the server's answer then leaves both as drawn.
    `text`: the figure's `to_json` where the caller has it already."""
    if text is None:
        text = "" if view.global_fig is None else to_json(view.global_fig)
    return _hash(view.header_html + "\0" + text)
