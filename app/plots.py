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
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from agent.spectrum import Spectrum, vacuum_to_air
from agent.trajectory import Step, Trajectory

Frame = Literal["rest", "observed"]

# Points drawn in the global panel at most (min/max pairs): two per pixel column of its plot
# area at a 1400 px window, so thinning is invisible; more points only cost drawing time on
# every switch (a LAMOST spectrum has ~3900 pixels).
GLOBAL_POINTS = 2400
# Points in a zoom panel at most: two per pixel column of the widest panel, so min/max
# decimation is invisible (every pixel column keeps its extremes) and only wide windows on
# finely sampled spectra are thinned at all.
ZOOM_POINTS = 2400
PANEL_HEIGHT = 260  # px of one zoom panel
# Traces with more points than this use scattergl. Decimated traces (at most GLOBAL_POINTS
# or ZOOM_POINTS) stay SVG: one path of a few thousand points redraws faster than a WebGL
# context is created, and the page redraws both plots on every switch.
WEBGL_ABOVE = 5000

FLUX_COLOUR = "#1f3b73"
ERROR_COLOUR = "rgba(31,59,115,0.18)"
SMOOTH_COLOUR = "#d1495b"
WINDOW_COLOURS = ["#f4a261", "#2a9d8f", "#e76f51", "#8ab17d", "#b56576", "#6d597a", "#e9c46a"]
MARKER_COLOURS = {"line": "#3a86ff", "band": "#7b2cbf", "telluric": "#8d99ae"}
BAND_SPAN = 90.0  # Angstrom of a band's shading beyond its head
LABEL_SEP = 0.015  # marker labels nearer than this fraction of the panel's width are merged
# Rotated labels are ~12 px wide at size 10: anchors closer than this collide. The figures
# do not know their pixel width; PLOT_WIDTH_PX is the vet page's at a 1400 px window.
LABEL_PX = 15
PLOT_WIDTH_PX = 1250
ZOOM_WIDTH_PX = 900  # a zoom panel sits beside its thought
TEMPLATE_COLOUR = "#e07a1f"
CONTINUUM_BIN = 200.0  # Angstrom per bin of the continuum estimate
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


# -- numerics ---------------------------------------------------------------------------


def minmax_decimate(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_points` points keeping each bin's minimum and maximum, in x order.

    NaN (masked) pixels are kept as gaps: a bin with any NaN emits one NaN between its
    extremes, so the line breaks where the data has holes.
    """
    n = x.size
    if n <= max_points:
        return x, y
    n_bins = max(1, max_points // 2)
    edges = np.linspace(0, n, n_bins + 1).astype(int)
    xs: list[float] = []
    ys: list[float] = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        seg = y[a:b]
        finite = np.isfinite(seg)
        if not finite.any():
            xs.append(float(x[a]))
            ys.append(np.nan)
            continue
        idx = np.flatnonzero(finite)
        lo = idx[np.argmin(seg[idx])]
        hi = idx[np.argmax(seg[idx])]
        first, second = (lo, hi) if lo <= hi else (hi, lo)
        xs.append(float(x[a + first]))
        ys.append(float(seg[first]))
        if not finite.all():
            xs.append(float(x[a + (first + second) // 2]))
            ys.append(np.nan)
        if second != first:
            xs.append(float(x[a + second]))
            ys.append(float(seg[second]))
    return np.asarray(xs), np.asarray(ys)


def smooth(flux: np.ndarray, bad: np.ndarray, width: int) -> np.ndarray:
    """Boxcar of `width` pixels that ignores bad pixels (normalised convolution)."""
    if width <= 1:
        return np.where(bad, np.nan, flux)
    good = (~bad) & np.isfinite(flux)
    kernel = np.ones(int(width), dtype=float)
    num = np.convolve(np.where(good, flux, 0.0), kernel, mode="same")
    den = np.convolve(good.astype(float), kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[~good] = np.nan
    return out


def to_frame(spec: Spectrum, rest_wave: np.ndarray | float, frame: Frame) -> np.ndarray:
    """Rest-frame vacuum wavelengths as the chosen frame shows them."""
    w = np.asarray(rest_wave, dtype=float)
    if frame == "rest":
        return w
    obs = w * (1.0 + spec.redshift)
    return vacuum_to_air(obs) if spec.frame == "air" else obs


def frame_wavelength(spec: Spectrum, frame: Frame) -> np.ndarray:
    return spec.rest_wavelength() if frame == "rest" else spec.wavelength


def _ylimits(y: np.ndarray, err: np.ndarray | None = None) -> list[float] | None:
    f = y[np.isfinite(y)]
    if f.size == 0:
        return None
    lo, hi = np.percentile(f, [0.5, 99.5]) if f.size > 50 else (f.min(), f.max())
    pad = 0.08 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.1
    return [float(lo - pad), float(hi + pad)]


def _list(a: np.ndarray) -> dict[str, str]:
    """A Plotly typed array (float32, base64): a tenth of the JSON of a number list and no
    per-value Python work. float32 keeps 7 significant digits (0.001 Å at 9000 Å) and any
    flux unit's range; NaN is a gap, as Plotly reads it."""
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"dtype": "f4", "bdata": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(v: Any) -> np.ndarray:
    """A trace's x or y as a numpy array, whether a typed array or a plain list."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.array([np.nan if e is None else e for e in v], dtype=float)


# -- traces -------------------------------------------------------------------------------


def _trace_type(n: int) -> str:
    return "scattergl" if n > WEBGL_ABOVE else "scatter"


def _band_trace(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, max_points: int | None) -> dict:
    """The ±1σ band as closed polygons, one per run of good pixels, so a masked stretch
    leaves a hole instead of a fill drawn across it. Decimated as an envelope: per bin the
    lowest lower edge and the highest upper edge."""
    n = x.size
    if max_points and n > max_points // 2:
        edges = np.linspace(0, n, max_points // 2 + 1).astype(int)
        edges = edges[np.diff(edges, prepend=-1) > 0]
        starts = edges[:-1]
        lo = np.minimum.reduceat(np.where(np.isfinite(lo), lo, np.inf), starts)
        hi = np.maximum.reduceat(np.where(np.isfinite(hi), hi, -np.inf), starts)
        lo[~np.isfinite(lo)] = np.nan
        hi[~np.isfinite(hi)] = np.nan
        x = x[starts]
    ok = np.isfinite(lo) & np.isfinite(hi)
    px: list[np.ndarray] = []
    py: list[np.ndarray] = []
    idx = np.flatnonzero(ok)
    gap = np.array([np.nan])
    if idx.size:
        for part in np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1):
            px += [x[part], x[part][::-1], gap]
            py += [lo[part], hi[part][::-1], gap]
    X = np.concatenate(px) if px else np.zeros(0)
    Y = np.concatenate(py) if py else np.zeros(0)
    return {
        "type": _trace_type(X.size // 2),
        "x": _list(X),
        "y": _list(Y),
        "mode": "lines",
        "fill": "toself",
        "fillcolor": ERROR_COLOUR,
        "line": {"width": 0},
        "hoverinfo": "skip",
        "name": "±1σ (ivar)",
    }


def _spectrum_traces(
    spec: Spectrum,
    x: np.ndarray,
    sel: slice | np.ndarray,
    *,
    smooth_width: int,
    show_error: bool,
    max_points: int | None,
) -> list[dict[str, Any]]:
    bad = spec.mask
    flux = np.where(bad, np.nan, spec.flux)
    xs, ys = x[sel], flux[sel]
    traces: list[dict[str, Any]] = []
    err = spec.error()
    if show_error and err is not None:
        e = np.where(bad, np.nan, err)[sel]
        traces.append(_band_trace(xs, ys - e, ys + e, max_points))
    fx, fy = minmax_decimate(xs, ys, max_points) if max_points else (xs, ys)
    traces.append(
        {
            "type": _trace_type(fx.size),
            "x": _list(fx),
            "y": _list(fy),
            "mode": "lines",
            "name": "flux",
            "line": {"color": FLUX_COLOUR, "width": 1},
            "hovertemplate": "%{x:.1f} Å<br>%{y:.4g}<extra></extra>",
        }
    )
    if smooth_width and smooth_width > 1:
        sm = smooth(spec.flux, bad, smooth_width)[sel]
        sx, sy = minmax_decimate(xs, sm, max_points) if max_points else (xs, sm)
        traces.append(
            {
                "type": _trace_type(sx.size),
                "x": _list(sx),
                "y": _list(sy),
                "mode": "lines",
                "name": f"smoothed ({smooth_width} px)",
                "line": {"color": SMOOTH_COLOUR, "width": 1.5},
                "hoverinfo": "skip",
            }
        )
    return traces


def _marker_shapes(
    spec: Spectrum,
    markers: list[Marker],
    frame: Frame,
    xr: tuple[float, float],
    width_px: int = PLOT_WIDTH_PX,
) -> tuple[list[dict], list[dict]]:
    shapes: list[dict] = []
    notes: list[dict] = []
    lo, hi = xr
    labels: list[tuple[float, str, str]] = []  # (x, name, colour)
    for m in markers:
        a = float(to_frame(spec, m.wave, frame))
        b = float(to_frame(spec, m.end, frame)) if m.end is not None else None
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


def flux_label(spec: Spectrum, normalised: bool = False) -> str:
    """The y axis's title: the file's flux unit (BUNIT/TUNIT, or the reader's), or said
    plainly to be arbitrary."""
    if normalised:
        return "flux / continuum"
    unit = (spec.flux_unit or "").strip()
    if not unit or unit.lower() in ("arbitrary", "none", "unknown", "counts?"):
        return "flux (arbitrary units)"
    return f"flux ({unit})"


def continuum(spec: Spectrum, bin_width: float = CONTINUUM_BIN) -> np.ndarray:
    """A pseudo-continuum for the normalised view: per `bin_width` A bin, the median of the
    good pixels after clipping those 2.5 sigma off it (absorption cores, emission peaks),
    interpolated linearly between bin centres. Not a fit: it flattens the shape so lines
    and bands read as depths."""
    w = spec.wavelength
    good = ~spec.mask & np.isfinite(spec.flux)
    n_bins = max(1, int(np.ceil((w[-1] - w[0]) / bin_width)))
    edges = np.linspace(w[0], w[-1], n_bins + 1)
    centres, levels = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        sel = good & (w >= a) & (w <= b)
        f = spec.flux[sel]
        if f.size < 5:
            continue
        keep = np.ones(f.size, bool)
        for _ in range(3):
            med = np.median(f[keep])
            sd = 1.4826 * np.median(np.abs(f[keep] - med)) or 1e-30
            new = np.abs(f - med) < 2.5 * sd
            if new.sum() < 5 or (new == keep).all():
                break
            keep = new
        centres.append(float(np.mean(w[sel][keep])))
        levels.append(float(np.median(f[keep])))
    if not centres:
        return np.ones_like(w)
    cont = np.interp(w, centres, levels)
    # A continuum at or below zero (a band-dominated bin) would flip or blow up the view.
    floor = 0.02 * np.nanmax(np.abs(levels)) if np.nanmax(np.abs(levels)) > 0 else 1.0
    return np.where(cont > floor, cont, floor)


def normalise(spec: Spectrum) -> Spectrum:
    """The spectrum divided by its `continuum` (ivar scaled with it)."""
    cont = continuum(spec)
    ivar = None if spec.ivar is None else spec.ivar * cont**2
    return spec.replace(flux=spec.flux / cont, ivar=ivar)


def template_trace(
    spec: Spectrum, template: Any, z: float, frame: Frame, shown_flux: np.ndarray
) -> dict[str, Any] | None:
    """`template` (agent.templates.Template) at redshift `z` over the spectrum, in the shown
    frame, scaled by least squares to the flux as drawn. None where they do not overlap."""
    obs = template.at(z)  # observed vacuum Angstrom
    lo, hi = float(spec.vacuum_wavelength()[0]), float(spec.vacuum_wavelength()[-1])
    sel = (obs >= lo) & (obs <= hi) & np.isfinite(template.flux)
    if sel.sum() < 3:
        return None
    tw, tf = obs[sel], template.flux[sel]
    data = np.interp(tw, spec.vacuum_wavelength(), np.where(spec.mask, np.nan, shown_flux))
    ok = np.isfinite(data)
    if ok.sum() < 3 or not np.any(tf[ok]):
        return None
    scale = float(np.dot(tf[ok], data[ok]) / np.dot(tf[ok], tf[ok]))
    if frame == "rest":
        x = tw / (1.0 + spec.redshift)
    else:
        x = vacuum_to_air(tw) if spec.frame == "air" else tw
    fx, fy = minmax_decimate(x, tf * scale, GLOBAL_POINTS)
    return {
        "type": "scatter",
        "x": _list(fx),
        "y": _list(fy),
        "mode": "lines",
        "name": f"template: {template.name} at z = {z:.4f}",
        "line": {"color": TEMPLATE_COLOUR, "width": 1.5},
        "opacity": 0.85,
        "hoverinfo": "skip",
    }


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


def _xlabel(spec: Spectrum, frame: Frame) -> str:
    if frame == "rest":
        return "rest-frame vacuum wavelength (Å)"
    return f"observed {spec.frame} wavelength (Å), z = {spec.redshift:.4f}"


def global_figure(
    spec: Spectrum,
    traj: Trajectory | None = None,
    *,
    markers: list[Marker] | None = None,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    max_points: int = GLOBAL_POINTS,
    highlight: int | None = None,
    windows: list[tuple[float, float]] | None = None,
    select: bool = False,
    height: int = 320,
    normalised: bool = False,
    template: Any = None,
    template_z: float = 0.0,
) -> dict[str, Any]:
    """The whole spectrum with every zoom window shaded and numbered (1 = first zoom).

    `windows` overrides the trajectory's windows (the author page's draft steps);
    `select=True` makes dragging select an x range instead of zooming; `normalised` divides
    by the `continuum`; `template` (agent.templates.Template) is drawn at `template_z`.
    """
    if normalised:
        spec = normalise(spec)
    x = frame_wavelength(spec, frame)
    traces = _spectrum_traces(
        spec, x, slice(None), smooth_width=smooth_width, show_error=show_error,
        max_points=max_points,
    )  # fmt: skip
    layout = _layout(
        f"{spec.id or 'spectrum'}: whole spectrum" + (f" ({traj.task})" if traj else ""),
        _xlabel(spec, frame),
        height,
    )
    layout["yaxis"]["title"]["text"] = flux_label(spec, normalised)
    yl = _ylimits(np.where(spec.mask, np.nan, spec.flux))
    if yl:
        layout["yaxis"]["range"] = yl
    if template is not None:
        tr = template_trace(spec, template, template_z, frame, spec.flux)
        if tr is not None:
            traces.append(tr)
            layout["showlegend"] = True
            layout["legend"] = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.12}
        else:
            layout["title"]["text"] += f" · {template.name} at z = {template_z:.3f} is off the data"
    xr = (float(x[0]), float(x[-1]))
    layout["xaxis"]["range"] = [xr[0], xr[1]]
    shapes: list[dict] = []
    notes: list[dict] = []
    if windows is None:
        windows = [s.window for s in (traj.steps if traj else []) if s.window is not None]
    for i, (lo, hi) in enumerate(windows):
        a, b = (float(v) for v in to_frame(spec, np.array([lo, hi]), frame))
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
        s2, n2 = _marker_shapes(spec, markers, frame, xr)
        shapes += s2
        notes += n2
    layout["shapes"] = shapes
    layout["annotations"] = notes
    if select:
        layout["dragmode"] = "select"
        layout["selectdirection"] = "h"
    return {"data": traces, "layout": layout}


def window_figure(
    spec: Spectrum,
    window: tuple[float, float],
    *,
    title: str,
    markers: list[Marker] | None = None,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    height: int = PANEL_HEIGHT,
    max_points: int | None = ZOOM_POINTS,
    normalised: bool = False,
) -> dict[str, Any]:
    """One window (rest-frame Angstrom) at full resolution (up to `max_points`)."""
    if normalised:
        spec = normalise(spec)
    lo, hi = float(min(window)), float(max(window))
    rest = spec.rest_wavelength()
    sel = (rest >= lo) & (rest <= hi)
    x = frame_wavelength(spec, frame)
    traces = _spectrum_traces(
        spec, x, sel, smooth_width=smooth_width, show_error=show_error, max_points=max_points
    )
    layout = _layout(title, _xlabel(spec, frame), height)
    layout["yaxis"]["title"]["text"] = flux_label(spec, normalised)
    a, b = (float(v) for v in to_frame(spec, np.array([lo, hi]), frame))
    layout["xaxis"]["range"] = [a, b]
    if sel.any():
        flux = np.where(spec.mask, np.nan, spec.flux)[sel]
        yl = _ylimits(flux)
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
        s2, n2 = _marker_shapes(spec, markers, frame, (a, b), ZOOM_WIDTH_PX)
        layout["shapes"] = s2
        layout["annotations"] = layout.get("annotations", []) + n2
    return {"data": traces, "layout": layout}


def step_title(index: int, step: Step) -> str:
    label = ""
    if step.tool_call:
        label = str((step.tool_call.get("arguments") or {}).get("label") or "")
    lo, hi = step.window or (0.0, 0.0)
    return f"{index + 1}. {lo:.0f}–{hi:.0f} Å" + (f" · {label}" if label else "")


def step_figures(
    spec: Spectrum,
    traj: Trajectory,
    *,
    markers: list[Marker] | None = None,
    frame: Frame = "rest",
    smooth_width: int = 0,
    show_error: bool = True,
    normalised: bool = False,
) -> list[tuple[Step, dict[str, Any] | None]]:
    """Each step with its window panel (None for a step with no window: the answer, errors)."""
    out: list[tuple[Step, dict[str, Any] | None]] = []
    n = 0
    for step in traj.steps:
        if step.window is None:
            out.append((step, None))
            continue
        fig = window_figure(
            spec, step.window, title=step_title(n, step), markers=markers, frame=frame,
            smooth_width=smooth_width, show_error=show_error, normalised=normalised,
        )  # fmt: skip
        out.append((step, fig))
        n += 1
    return out


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
