"""What is drawn over a spectrum besides its flux: the task's diagnostic lines and bands
(`markers_for`), their shapes and labels, thinned so that labels do not print over each
other (`thin_labels`), and a template at a trial redshift (`template_trace`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.spectrum import vacuum_to_air
from app.shown import Shown, continuum_of
from app.traces import GLOBAL_POINTS, minmax_decimate, typed_array

MARKER_COLOURS = {"line": "#3a86ff", "band": "#7b2cbf", "telluric": "#8d99ae"}
BAND_SPAN = 90.0  # Angstrom of a band's shading beyond its head
LABEL_SEP = 0.015  # marker labels nearer than this fraction of the panel's width are merged
# Rotated labels are ~12 px wide at size 10: anchors closer than this collide. The figures
# do not know their pixel width; PLOT_WIDTH_PX is the vet page's at a 1400 px window.
LABEL_PX = 15
PLOT_WIDTH_PX = 1250
ZOOM_WIDTH_PX = 900  # a zoom panel sits beside its thought
TEMPLATE_COLOUR = "#e07a1f"
# The species that decide each task. The feature catalogue lists more per task (C2 on a
# white-dwarf task for DQ stars, tellurics, Mg b on cool stars); those are drawn only when
# the expert asks for all markers.
KEY_SPECIES: dict[str, frozenset[str]] = {
    "wd": frozenset({"H I", "He I", "He II"}),
    "cv": frozenset({"H I", "He I", "He II"}),
    "carbon": frozenset({"C2", "CN", "CH", "TiO"}),
    "s_type": frozenset({"ZrO", "LaO", "TiO"}),
    "m_giant": frozenset({"TiO", "CaH", "Na I", "Ca II", "VO"}),
}


@dataclass(frozen=True)
class Marker:
    """A diagnostic feature to draw: a line at `wave`, or a band from `wave` to `end`."""

    name: str
    wave: float  # rest-frame vacuum Angstrom
    end: float | None = None  # other edge of a band (the side the band degrades to)
    kind: str = "line"  # "line" | "band" | "telluric"


def markers_for(task: str, *, all_markers: bool = False) -> list[Marker]:
    """The task's diagnostic lines and bands from the feature catalogue, as plot markers:
    only the species that decide the task (`KEY_SPECIES`) unless `all_markers`.

    Bands are shaded from the head towards the side they degrade to; telluric regions over
    their whole extent.
    """
    from agent.lines import features_for

    try:
        feats = features_for(task)
    except ValueError:
        return []
    key = KEY_SPECIES.get(task)
    if key is not None and not all_markers:
        feats = [f for f in feats if f.species in key]
    out = []
    for f in feats:
        if f.kind == "band":
            end = f.wavelength + (-BAND_SPAN if f.degrade == "blue" else BAND_SPAN)
            out.append(Marker(f.label, f.wavelength, end, "band"))
        elif f.kind == "telluric":
            out.append(Marker(f.label, float(f.window[0]), float(f.window[1]), "telluric"))
        else:
            out.append(Marker(f.label, f.wavelength, None, "line"))
    return out


def marker_shapes(
    shown: Shown,
    markers: list[Marker],
    xr: tuple[float, float],
    width_px: int = PLOT_WIDTH_PX,
    z: float | None = None,
) -> tuple[list[dict], list[dict]]:
    """The markers' shapes and labels within `xr` (in the shown frame); drawn for an object
    at redshift `z` (the one the page shows), where the spectrum's own frame is at its
    `redshift`."""
    shapes: list[dict] = []
    notes: list[dict] = []
    lo, hi = xr
    labels: list[tuple[float, str, str]] = []  # (x, name, colour)
    # a line at rest wavelength w, seen from an object at z, in the spectrum's rest frame
    scale = 1.0 if z is None else (1.0 + float(z)) / (1.0 + shown.redshift)
    for m in markers:
        a = float(shown.to_frame(m.wave * scale))
        b = float(shown.to_frame(m.end * scale)) if m.end is not None else None
        colour = MARKER_COLOURS.get(m.kind, MARKER_COLOURS["line"])
        if b is None:
            if not lo <= a <= hi:
                continue
            shapes.append(
                {
                    "type": "line", "xref": "x", "yref": "paper", "x0": a, "x1": a, "y0": 0,
                    "y1": 1, "line": {"color": colour, "width": 1, "dash": "dot"},
                }
            )  # fmt: skip
        else:
            a0, b0 = min(a, b), max(a, b)
            if b0 < lo or a0 > hi:
                continue
            shapes.append(
                {
                    "type": "rect", "xref": "x", "yref": "paper", "x0": a0, "x1": b0, "y0": 0,
                    "y1": 1, "fillcolor": colour, "opacity": 0.07, "line": {"width": 0},
                    "layer": "below",
                }
            )  # fmt: skip
            if m.kind == "telluric":
                a = a0
            else:  # the band head: where the absorption starts sharply
                shapes.append(
                    {
                        "type": "line", "xref": "x", "yref": "paper", "x0": a, "x1": a, "y0": 0,
                        "y1": 1, "line": {"color": colour, "width": 1},
                    }
                )  # fmt: skip
        labels.append((a, m.name, colour))
    notes += thin_labels(labels, lo, hi, width_px)
    return shapes, notes


def thin_labels(
    labels: list[tuple[float, str, str]], lo: float, hi: float, width_px: int = PLOT_WIDTH_PX
) -> list[dict]:
    """Marker labels that do not print over each other; the lines themselves are all drawn.

    Labels closer than LABEL_SEP of the panel share one label ("Ca H/Hε"); of the labels left,
    one within LABEL_PX of a label already placed (in wavelength order) is dropped and its
    name joins that label's hover text, so a crowded panel keeps one legible label per spot.
    """
    sep = max(LABEL_SEP * (hi - lo), LABEL_PX / max(1, width_px) * (hi - lo))
    groups: list[list[tuple[float, str, str]]] = []
    for lab in sorted(labels, key=lambda t: t[0]):
        if groups and lab[0] - groups[-1][0][0] < sep:
            groups[-1].append(lab)
        else:
            groups.append([lab])
    notes = []
    for g in groups:
        names = list(dict.fromkeys(n for _, n, _ in g))
        text = "/".join(names[:2]) + ("…" if len(names) > 2 else "")
        notes.append(
            {
                "x": g[0][0], "xref": "x", "y": 0.02, "yref": "paper", "text": text,
                "hovertext": ", ".join(names), "showarrow": False, "textangle": -90,
                "xanchor": "right", "yanchor": "bottom", "font": {"size": 10, "color": g[0][2]},
            }
        )  # fmt: skip
    return notes


def template_trace(shown: Shown, template: Any, z: float) -> dict[str, Any] | None:
    """`template` (agent.templates.Template) at redshift `z` over the spectrum, in the shown
    frame, scaled by least squares to the flux as drawn. A normalised view divides the
    template by its own continuum, taken as the spectrum's (`app.shown.continuum_of` over
    the part of it drawn). None where they do not overlap."""
    spec = shown.spec
    vac = spec.vacuum_wavelength()
    obs = template.at(z)  # observed vacuum Angstrom
    lo, hi = float(vac[0]), float(vac[-1])
    sel = (obs >= lo) & (obs <= hi) & np.isfinite(template.flux)
    if sel.sum() < 3:
        return None
    tw, tf = obs[sel], template.flux[sel]
    if shown.normalised:
        tf = tf / continuum_of(tw, tf, np.ones(tw.size, bool))
    data = np.interp(tw, vac, shown.flux)
    ok = np.isfinite(data)
    if ok.sum() < 3 or not np.any(tf[ok]):
        return None
    scale = float(np.dot(tf[ok], data[ok]) / np.dot(tf[ok], tf[ok]))
    if shown.frame == "rest":
        x = tw / (1.0 + spec.redshift)
    else:
        x = vacuum_to_air(tw) if spec.frame == "air" else tw
    fx, fy = minmax_decimate(x, tf * scale, GLOBAL_POINTS)
    return {
        "type": "scatter",
        "x": typed_array(fx),
        "y": typed_array(fy),
        "mode": "lines",
        "name": f"template: {template.name} at z = {z:.4f}",
        "line": {"color": TEMPLATE_COLOUR, "width": 1.5},
        "opacity": 0.85,
        "hoverinfo": "skip",
    }
