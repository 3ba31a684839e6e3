"""Figures (plain Plotly dicts, `app.plots`) as the values of Gradio plots."""

from __future__ import annotations

from typing import Any

from gradio.components.plot import PlotData

from app.plots import to_json


def plot(fig: dict[str, Any] | None) -> PlotData | None:
    # Our figures are plain dicts: hand Gradio the JSON directly, skipping graph objects.
    return None if fig is None else PlotData(type="plotly", plot=to_json(fig))
