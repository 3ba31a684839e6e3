"""What the figures share below the figure level: min/max decimation, smoothing, the
rest and observed frames, the continuum of the normalised view, Plotly typed arrays, and the
flux, smoothed and ±1σ traces of a spectrum, its arms (B/R/Z, before merging) and its sky
(`app.plots` builds the figures from them)."""

from __future__ import annotations

import base64
from typing import Any, Literal

import numpy as np

from agent.spectrum import Arm, Sky, Spectrum, air_to_vacuum, vacuum_to_air

Frame = Literal["rest", "observed"]

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
CONTINUUM_BIN = 200.0  # Angstrom per bin of the continuum estimate
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


def file_to_frame(spec: Spectrum, wave: np.ndarray, frame: Frame) -> np.ndarray:
    """Wavelengths as the file holds them (an arm's, in the spectrum's frame) as `frame`
    shows them: rest frame vacuum, or as they are."""
    if frame == "observed":
        return wave
    vac = air_to_vacuum(wave) if spec.frame == "air" else wave
    return vac / (1.0 + spec.redshift)


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
            "x": typed_array(fx),
            "y": typed_array(fy),
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
                "x": typed_array(sx),
                "y": typed_array(sy),
                "mode": "lines",
                "name": f"smoothed ({smooth_width} px)",
                "line": {"color": SMOOTH_COLOUR, "width": 1.5},
                "hoverinfo": "skip",
            }
        )
    return traces


def arm_traces(
    spec: Spectrum,
    frame: Frame,
    *,
    window: tuple[float, float] | None = None,
    max_points: int | None,
) -> list[dict[str, Any]]:
    """One line per arm of `spec` (none for a spectrum read as one), named "arm B" ..., in
    its own colour; masked pixels are gaps. `window`: rest-frame Angstrom to keep;
    `max_points`: the budget of all arms together."""
    out: list[dict[str, Any]] = []
    spare = iter(SPARE_ARM_COLOURS * 4)
    budget = None if not max_points else max(200, max_points // max(1, len(spec.arms)))
    for arm in spec.arms:
        colour = ARM_COLOURS.get(arm.name.upper()) or next(spare, FLUX_COLOUR)
        x = file_to_frame(spec, arm.wavelength, frame)
        y = np.where(arm.mask, np.nan, arm.flux)
        if window is not None:
            rest = x if frame == "rest" else file_to_frame(spec, arm.wavelength, "rest")
            sel = (rest >= window[0]) & (rest <= window[1])
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
    spec: Spectrum, x: np.ndarray, sel: slice | np.ndarray, *, max_points: int | None
) -> dict[str, Any] | None:
    """The file's sky spectrum as a faint line (None where the file holds none), named
    "sky", with its unit where it is not the flux's."""
    if spec.sky is None:
        return None
    xs, ys = x[sel], np.asarray(spec.sky.flux, dtype=float)[sel]
    if xs.size == 0:
        return None
    fx, fy = minmax_decimate(xs, ys, max_points) if max_points else (xs, ys)
    same = spec.sky.unit.strip().lower() == (spec.flux_unit or "").strip().lower()
    return {
        "type": _trace_type(fx.size),
        "x": typed_array(fx),
        "y": typed_array(fy),
        "mode": "lines",
        "name": "sky" if same else f"sky ({spec.sky.unit})",
        "line": {"color": SKY_COLOUR, "width": 1},
        "hovertemplate": "sky: %{x:.1f} Å<br>%{y:.4g}<extra></extra>",
    }


def continuum(spec: Spectrum, bin_width: float = CONTINUUM_BIN) -> np.ndarray:
    """A pseudo-continuum for the normalised view: per `bin_width` A bin, the median of the
    good pixels after clipping those 2.5 sigma off it (absorption cores, emission peaks),
    interpolated linearly between bin centres. Not a fit: it flattens the shape so lines
    and bands read as depths."""
    return continuum_of(spec.wavelength, spec.flux, ~spec.mask, bin_width)


def continuum_of(
    w: np.ndarray, flux: np.ndarray, good: np.ndarray, bin_width: float = CONTINUUM_BIN
) -> np.ndarray:
    """`continuum` of any sampled flux (a template's too, so it is normalised as the
    spectrum is): wavelengths `w` ascending, `good` the pixels to use."""
    good = good & np.isfinite(flux)
    n_bins = max(1, int(np.ceil((w[-1] - w[0]) / bin_width)))
    edges = np.linspace(w[0], w[-1], n_bins + 1)
    centres, levels = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        sel = good & (w >= a) & (w <= b)
        f = flux[sel]
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
    """The spectrum divided by its `continuum` (ivar scaled with it); its arms and sky are
    divided by the same continuum, so they are drawn on the same scale."""
    cont = continuum(spec)
    ivar = None if spec.ivar is None else spec.ivar * cont**2
    arms = []
    for a in spec.arms:
        c = np.interp(a.wavelength, spec.wavelength, cont)
        iv = None if a.ivar is None else a.ivar * c**2
        arms.append(Arm(a.name, a.wavelength, a.flux / c, iv, a.mask))
    sky = None if spec.sky is None else Sky(spec.sky.flux / cont, spec.sky.unit)
    return spec.replace(flux=spec.flux / cont, ivar=ivar, arms=tuple(arms), sky=sky)
