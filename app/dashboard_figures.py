"""The Dashboard's figures of the audit's estimates and of the inspector's learning curve,
as plain Plotly dicts (see `app.plots`), from plain values the page reads through annotate.

A heading of several lines sits above the plot area, never on it (`title_layout`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from annotate.audit.agreement import WeightedBin
from annotate.audit.sample import TaskEstimates
from app.plots import empty_figure

TITLE_LINE_PX = 17  # one line of a 13 px title
TASK_COLOURS = ["#1f3b73", "#2a9d8f", "#e76f51", "#6d597a", "#f4a261", "#8ab17d", "#b56576"]


def title_layout(lines: Sequence[str], height: int = 320, **extra: Any) -> dict[str, Any]:
    """A layout with a heading of `lines` whose bottom sits on the plot area's top edge,
    in a top margin sized for its lines. An annotation, not Plotly's title: a title of
    several lines hangs down from its anchor whatever its `yanchor`, into the plot."""
    margin = {"l": 55, "r": 10, "t": 18 + TITLE_LINE_PX * len(lines), "b": 45}
    margin.update(extra.pop("margin", {}))
    heading = {"name": "title", "text": "<br>".join(lines), "font": {"size": 13},
               "x": 0.5, "xref": "paper", "xanchor": "center", "y": 1, "yref": "paper",
               "yanchor": "bottom", "yshift": 4, "showarrow": False}  # fmt: skip
    lay: dict[str, Any] = {"annotations": [heading], "height": height, "margin": margin,
                           "plot_bgcolor": "white", "legend": {"orientation": "h", "y": -0.25}}  # fmt: skip
    lay.update(extra)
    return lay


def heading(fig: dict[str, Any]) -> str:
    """The text of a figure's heading (`title_layout`), or of its title."""
    lay = fig.get("layout") or {}
    for a in lay.get("annotations") or []:
        if a.get("name") == "title":
            return a["text"]
    t = lay.get("title")
    return t.get("text", "") if isinstance(t, dict) else str(t or "")


def _colour(k: int) -> str:
    return TASK_COLOURS[k % len(TASK_COLOURS)]


AUDIT_FIGURES = (("precision", "#1f3b73", -0.12), ("completeness", "#e76f51", 0.12))


def precision_figure(estimates: dict[str, TaskEstimates]) -> dict[str, Any]:
    """The YES list's precision and completeness per task, side by side, each with its 95%
    interval as error bars and its estimator in the legend and the hover; a figure a task
    lacks is named below the plot with the reason."""
    data = []
    tasks = list(estimates)
    why: dict[str, list[str]] = {}  # one reason for several tasks and figures is said once
    for fig, colour, shift in AUDIT_FIGURES:
        shown = {t: getattr(e, fig) for t, e in estimates.items()
                 if getattr(e, fig).value is not None}  # fmt: skip
        for t, e in estimates.items():
            if t not in shown:
                why.setdefault(getattr(e, fig).note or "no estimate", []).append(f"{t} {fig}")
        if not shown:
            continue
        names = list(shown)
        vals = [shown[t].value for t in names]
        methods = sorted({shown[t].method for t in names if shown[t].method})
        data.append({
            "type": "scatter", "mode": "markers", "x": [tasks.index(t) + shift for t in names],
            "y": vals, "marker": {"size": 10, "color": colour},
            "name": f"{fig} ({', '.join(methods) or 'known exactly'})",
            "error_y": {"type": "data", "symmetric": False,
                        "array": [shown[t].high - v for t, v in zip(names, vals)],
                        "arrayminus": [v - shown[t].low for t, v in zip(names, vals)]},
            "text": [f"{t} {fig}, n={shown[t].n} audited, {shown[t].method or 'known'}"
                     for t in names],
            "hovertemplate": "%{text}: %{y:.3f}<extra></extra>",
        })  # fmt: skip
    missing = [f"{note} ({', '.join(ts)})" for note, ts in why.items()]
    if not data:
        return empty_figure("No estimate yet: " + "; ".join(missing or ["no tasks"]))
    lines = ["Precision and completeness of the YES list per task (95% intervals)",
             "from the random audit; the legend names each figure's estimator"]  # fmt: skip
    if missing:
        lines += textwrap.wrap("not estimated: " + "; ".join(missing), 80)
    return {"data": data, "layout": title_layout(
        lines, yaxis={"range": [0, 1.02], "title": {"text": "share"}},
        xaxis={"tickmode": "array", "tickvals": list(range(len(tasks))), "ticktext": tasks,
               "range": [-0.5, len(tasks) - 0.5]})}  # fmt: skip


def audit_reliability_figure(bins: Sequence[WeightedBin]) -> dict[str, Any]:
    """The reliability diagram of the audited items, weighted, each bin with its 95%
    interval and its count: unbiased for the confident verdicts the audit draws from."""
    if not bins:
        return empty_figure("Reliability from the audit: nothing audited yet.")
    xs = [b.mean_confidence for b in bins]
    ys = [b.yes_rate for b in bins]
    data = [
        {"type": "scatter", "x": [0, 1], "y": [0, 1], "mode": "lines",
         "line": {"dash": "dot", "color": "#999"}, "name": "perfect"},
        {"type": "scatter", "x": xs, "y": ys, "mode": "markers", "name": "audited (weighted)",
         "marker": {"size": 9, "color": "#2a9d8f"},
         "error_y": {"type": "data", "symmetric": False,
                     "array": [b.high - b.yes_rate for b in bins],
                     "arrayminus": [b.yes_rate - b.low for b in bins]},
         "text": [f"n={b.count} audited" for b in bins],
         "hovertemplate": "P(YES) %{x:.3f}: YES rate %{y:.3f} (%{text})<extra></extra>"},
    ]  # fmt: skip
    n = sum(b.count for b in bins)
    lines = [f"Reliability from the random audit (n={n} audited, weighted): unbiased",
             "for the confident verdicts the audit draws from; bars: 95% intervals"]  # fmt: skip
    return {"data": data, "layout": title_layout(
        lines, xaxis={"title": {"text": "agent P(YES)"}, "range": [0, 1]},
        yaxis={"title": {"text": "expert YES rate"}, "range": [0, 1.02]})}  # fmt: skip


def learning_curve_figure(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Your campaign as the benchmark's learning curve shows it: per task, against the
    labels each inspector version rests on, the F1 change against the plain rules on
    objects held out of the blend's choice with its 95% interval (left), and the weight on
    the learned model (right; 0 = the plain rules). Rows of `versions.CURVE_HEADERS`."""
    if not rows:
        return empty_figure("No inspector version fitted yet: the learning curve starts with "
                            "the first calibration.")  # fmt: skip
    tasks = sorted({r[1] for r in rows})
    data = []
    for k, task in enumerate(tasks):
        mine = sorted((r for r in rows if r[1] == task), key=lambda r: r[2])
        xs = [r[2] for r in mine]
        hover = [f"{r[0]}: {r[5]}, {r[3]} YES labels from {r[4]} objects" for r in mine]
        bars = {"type": "data", "symmetric": False, "visible": True,
                "array": [None if r[9] is None else r[9] - r[7] for r in mine],
                "arrayminus": [None if r[8] is None else r[7] - r[8] for r in mine]}  # fmt: skip
        data.append({"type": "scatter", "mode": "lines+markers", "x": xs,
                     "y": [r[7] for r in mine], "error_y": bars, "name": task,
                     "legendgroup": task, "line": {"color": _colour(k)}, "text": hover,
                     "hovertemplate": "%{text}: F1 change %{y:+.3f} on %{x} labels<extra>"
                     + task + "</extra>"})  # fmt: skip
        data.append({"type": "scatter", "mode": "lines+markers", "x": xs,
                     "y": [r[6] for r in mine], "name": f"{task} weight", "legendgroup": task,
                     "showlegend": False, "line": {"color": _colour(k), "dash": "dash"},
                     "text": hover, "xaxis": "x2", "yaxis": "y2",
                     "hovertemplate": "%{text}: weight %{y:.2f} on %{x} labels<extra>"
                     + task + "</extra>"})  # fmt: skip
    lines = ["Learning curve of your campaign: F1 change against the plain rules on objects",
             "held out of the fit (bars: 95% intervals), and the weight on the learned model"]  # fmt: skip
    lay = title_layout(
        lines, height=340,
        xaxis={"domain": [0, 0.45], "title": {"text": "expert labels"}},
        yaxis={"title": {"text": "F1 change (held-out objects)"}, "zeroline": True},
        xaxis2={"domain": [0.58, 1], "title": {"text": "expert labels"}, "anchor": "y2"},
        yaxis2={"title": {"text": "weight (0 = the rules)"}, "anchor": "x2", "range": [0, 1.02]},
    )  # fmt: skip
    return {"data": data, "layout": lay}
