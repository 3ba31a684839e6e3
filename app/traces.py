"""What the figures share below the figure level: min/max decimation, Plotly typed arrays,
and the flux, smoothed and ±1σ traces of a spectrum, its arms (B/R/Z, before merging) and
its sky, each read from the spectrum as the display shows it (`app.shown.Shown`, computed
once per figure set) and a selection of its pixels (`app.plots` builds the figures)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from app.shown import Shown

# Points drawn in the global panel at most (min/max pairs): two per pixel column of its plot
# area at a 1400 px window, so thinning is invisible; more points only cost drawing time on
# every switch (a LAMOST spectrum has ~3900 pixels).
GLOBAL_POINTS = 2400
# Points in a zoom panel at most: two per pixel column of the widest panel, so min/max
# decimation is invisible (every pixel column keeps its extremes) and only wide windows on
# finely sampled spectra are thinned at all.
ZOOM_POINTS = 2400
# Traces with more points than this use scattergl. Decimated traces (at most GLOBAL_POINTS
# or ZOOM_POINTS) stay SVG: one path of a few thousand points redraws faster than a WebGL
# context is created, and the page redraws both plots on every switch.
WEBGL_ABOVE = 5000

FLUX_COLOUR = "#1f3b73"
ERROR_COLOUR = "rgba(31,59,115,0.18)"
SMOOTH_COLOUR = "#d1495b"
# Arms in Prospect's colours (b, r, z); arms of other names take the next spare colour.
ARM_COLOURS = {"B": "#1f77b4", "R": "#d62728", "Z": "#800000"}
SPARE_ARM_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2")
SKY_COLOUR = "rgba(110,110,110,0.55)"
MERGED_OPACITY = 0.3  # the merged flux under the arms, as Prospect fades its coadd


# -- numerics ---------------------------------------------------------------------------


def minmax_decimate(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_points` points keeping each bin's minimum and maximum, in x order.

    NaN (masked) pixels are kept as gaps: a bin with any NaN emits one NaN between its
    extremes, so the line breaks where the data has holes. Computed for all bins at once
    (the bins as rows of one array): it runs for every trace of every panel drawn.
    """
    n = x.size
    if n <= max_points:
        return x, y
    n_bins = max(1, max_points // 2)
    edges = np.linspace(0, n, n_bins + 1).astype(int)
    a, b = edges[:-1], edges[1:]
    a, b = a[b > a], b[b > a]
    idx = a[:, None] + np.arange(int((b - a).max()))[None, :]
    inside = idx < b[:, None]
    seg = y[np.minimum(idx, n - 1)]
    finite = inside & np.isfinite(seg)
    lo = np.argmin(np.where(finite, seg, np.inf), axis=1)
    hi = np.argmax(np.where(finite, seg, -np.inf), axis=1)
    any_finite = finite.any(axis=1)
    gaps = (inside & ~finite).any(axis=1)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    rows = np.arange(a.size)
    # up to three points a bin, in x order: the first extreme, a gap, the second extreme;
    # a bin with no finite pixel is one gap at its start
    px = np.stack([x[a + first], x[a + (first + second) // 2], x[a + second]], axis=1)
    py = np.stack([seg[rows, first], np.full(a.size, np.nan), seg[rows, second]], axis=1)
    px[~any_finite, 0] = x[a[~any_finite]]
    py[~any_finite, 0] = np.nan
    keep = np.stack(
        [np.ones(a.size, bool), any_finite & gaps, any_finite & (second != first)], axis=1
    )
    return px[keep].astype(float), py[keep].astype(float)


def ylimits(y: np.ndarray, err: np.ndarray | None = None) -> list[float] | None:
    f = y[np.isfinite(y)]
    if f.size == 0:
        return None
    lo, hi = np.percentile(f, [0.5, 99.5]) if f.size > 50 else (f.min(), f.max())
    pad = 0.08 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.1
    return [float(lo - pad), float(hi + pad)]


def typed_array(a: np.ndarray) -> dict[str, str]:
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
        "x": typed_array(X),
        "y": typed_array(Y),
        "mode": "lines",
        "fill": "toself",
        "fillcolor": ERROR_COLOUR,
        "line": {"width": 0},
        "hoverinfo": "skip",
        "name": "±1σ (ivar)",
    }


def spectrum_traces(
    shown: Shown, sel: slice | np.ndarray, *, max_points: int | None
) -> list[dict[str, Any]]:
    """The ±1σ band (where shown), the flux and the smoothed flux (where asked) of the
    pixels `sel`."""
    xs, ys = shown.x[sel], shown.flux[sel]
    traces: list[dict[str, Any]] = []
    if shown.err is not None:
        e = shown.err[sel]
        traces.append(_band_trace(xs, ys - e, ys + e, max_points))
    fx, fy = minmax_decimate(xs, ys, max_points) if max_points else (xs, ys)
    traces.append(
        {
            "type": _trace_type(fx.size),
            "x": typed_array(fx),
            "y": typed_array(fy),
            "mode": "lines",
            "name": "flux",
            "line": {"color": FLUX_COLOUR, "width": 1},
            "hovertemplate": "%{x:.1f} Å<br>%{y:.4g}<extra></extra>",
        }
    )
    if shown.smoothed is not None:
        sm = shown.smoothed[sel]
        sx, sy = minmax_decimate(xs, sm, max_points) if max_points else (xs, sm)
        traces.append(
            {
                "type": _trace_type(sx.size),
                "x": typed_array(sx),
                "y": typed_array(sy),
                "mode": "lines",
                "name": f"smoothed ({shown.smooth_width} px)",
                "line": {"color": SMOOTH_COLOUR, "width": 1.5},
                "hoverinfo": "skip",
            }
        )
    return traces


def arm_traces(
    shown: Shown, *, window: tuple[float, float] | None = None, max_points: int | None
) -> list[dict[str, Any]]:
    """One line per arm shown (none for a spectrum read as one), named "arm B" ..., in its
    own colour; masked pixels are gaps. `window`: rest-frame Angstrom to keep;
    `max_points`: the budget of all arms together."""
    out: list[dict[str, Any]] = []
    arms = shown.arms or ()
    spare = iter(SPARE_ARM_COLOURS * 4)
    budget = None if not max_points else max(200, max_points // max(1, len(arms)))
    for arm in arms:
        colour = ARM_COLOURS.get(arm.name.upper()) or next(spare, FLUX_COLOUR)
        x, y = arm.x, arm.y
        if window is not None:
            sel = (arm.rest >= window[0]) & (arm.rest <= window[1])
            if not sel.any():
                continue
            x, y = x[sel], y[sel]
        fx, fy = minmax_decimate(x, y, budget) if budget else (x, y)
        out.append(
            {
                "type": _trace_type(fx.size),
                "x": typed_array(fx),
                "y": typed_array(fy),
                "mode": "lines",
                "name": f"arm {arm.name}",
                "line": {"color": colour, "width": 1},
                "hovertemplate": f"{arm.name}: %{{x:.1f}} Å<br>%{{y:.4g}}<extra></extra>",
            }
        )
    return out


def sky_trace(
    shown: Shown, sel: slice | np.ndarray, *, max_points: int | None
) -> dict[str, Any] | None:
    """The file's sky spectrum as a faint line (None where none is shown or no pixel is
    selected), named "sky", with its unit where it is not the flux's."""
    if shown.sky is None:
        return None
    xs, ys = shown.x[sel], shown.sky[sel]
    if xs.size == 0:
        return None
    fx, fy = minmax_decimate(xs, ys, max_points) if max_points else (xs, ys)
    spec = shown.spec
    unit = spec.sky.unit if spec.sky is not None else ""
    same = unit.strip().lower() == (spec.flux_unit or "").strip().lower()
    return {
        "type": _trace_type(fx.size),
        "x": typed_array(fx),
        "y": typed_array(fy),
        "mode": "lines",
        "name": "sky" if same else f"sky ({unit})",
        "line": {"color": SKY_COLOUR, "width": 1},
        "hovertemplate": "sky: %{x:.1f} Å<br>%{y:.4g}<extra></extra>",
    }
