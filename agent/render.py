"""Two spectrum renderers behind one function, `render`.

- `speco3` draws the published Spec-o3 tool's figure, pixel for pixel, so the published
  checkpoints see what they were trained on: its matplotlib plot (figure size by the plotted
  span, "Spectrum" title on zooms, bold labels, major and minor grid, fixed x tick steps,
  a stats box in the emptiest quadrant, `tight_layout`) saved at 80 dpi with a tight box.
  Figures are kept per size and updated in place; the pixels are the same as from a fresh
  figure (tests check this).
- `fast` rasterises with numpy and PIL: axes, grid, tick labels and axis labels a VLM can
  read, 448x448 by default, an order of magnitude faster. Each pixel column is drawn from
  the first, min, max and last flux that fall in it, so a line one pixel wide is never lost
  however many pixels share a column.

`fast` draws masked and non-finite flux as gaps: the line stops on each side. `speco3` drops
them as the published plot drops invalid points, so its line joins their neighbours.
Markers for catalogue features (`agent.lines`) are optional and off by default, because
models were not trained with them. They sit at `redshift` in the plotted frame, so a quasar
plotted at its observed wavelengths carries Mg II where its Mg II lies; telluric regions stay
where the atmosphere puts them.
"""

from __future__ import annotations

import io
import math
import os
import threading
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from agent.lines import FEATURES, Feature
from agent.mpl_shortcuts import install_text_layout_cache, memoize_ticks
from agent.tasks import TASKS

Renderer = Literal["fast", "speco3"]
RENDERERS: tuple[str, ...] = ("fast", "speco3")
DEFAULT_SIZE = (448, 448)

# Pillow frees an image's memory with the image unless told to keep some (its block
# allocator's cache, PILLOW_BLOCKS_MAX, is off by default), so in the agent loop each new
# 448x448 image (800 kB) came from fresh pages, and filling them was about a fifth of a
# fast render. An episode holds its global view and zooms (six images) until it ends;
# a few kept blocks let the next episode's images reuse that memory. Only raised, never
# lowered, and left alone where the environment sets it. No pixel depends on it.
_KEEP_IMAGE_BLOCKS = 8
if "PILLOW_BLOCKS_MAX" not in os.environ and hasattr(Image.core, "set_blocks_max"):
    Image.core.set_blocks_max(max(Image.core.get_blocks_max(), _KEEP_IMAGE_BLOCKS))

# marker colours by feature kind (RGB)
_MARKER_RGB = {"line": (200, 30, 30), "band": (20, 140, 60), "telluric": (130, 130, 130)}

Markers = bool | str | Iterable[Feature] | None


def render(
    wave: np.ndarray,
    flux: np.ndarray,
    *,
    renderer: str = "fast",
    title: str | None = None,
    markers: Markers = None,
    size: tuple[int, int] | None = None,
    mask: np.ndarray | None = None,
    window: tuple[float, float] | None = None,
    redshift: float = 0.0,
) -> Image.Image:
    """Plot `flux` against `wave` (Angstrom) over `window` (default: all of it) as an RGB image.

    `mask` (True = bad) and non-finite flux are left out. `markers`: None/False (none), True
    (every catalogue feature in the window), a task name (that task's features), or Features;
    they are drawn at (1 + `redshift`) times their rest wavelength.
    `size` is (width, height) in pixels for `fast`; `speco3` sizes its figure itself, by the
    overview rule when there is no window or a `title` (the tool titles only its global view,
    with the file name) and by the zoom rule otherwise, with the title "Spectrum".
    """
    wave = np.asarray(wave, dtype=np.float64)
    flux = np.asarray(flux, dtype=np.float64)
    if wave.ndim != 1 or wave.shape != flux.shape:
        raise ValueError(f"wave and flux must be 1-D of equal length ({wave.shape}, {flux.shape})")
    if mask is not None:
        flux = np.where(np.asarray(mask, dtype=bool), np.nan, flux)
    if window is None:
        lo, hi = float(np.nanmin(wave)), float(np.nanmax(wave))
    else:
        lo, hi = float(window[0]), float(window[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"window must be finite with min < max, got ({lo}, {hi})")
    sel = (wave >= lo) & (wave <= hi)
    w, f = wave[sel], flux[sel]
    feats = resolve_markers(markers, lo, hi, redshift)
    if renderer == "fast":
        return _render_fast(w, f, lo, hi, title=title, markers=feats, size=size or DEFAULT_SIZE)
    if renderer == "speco3":
        overview = window is None or title is not None
        return _render_speco3(w, f, lo, hi, title=title, markers=feats, overview=overview)
    raise ValueError(f"unknown renderer {renderer!r}; choose one of {', '.join(RENDERERS)}")


def resolve_markers(markers: Markers, lo: float, hi: float, redshift: float = 0.0) -> list[Feature]:
    """The catalogue features to mark inside [lo, hi], placed at `redshift`: each line and
    band at (1 + redshift) times its rest wavelength; telluric regions are not shifted."""
    if markers is None or markers is False:
        return []
    if not (math.isfinite(redshift) and redshift > -1.0):
        raise ValueError(f"markers: redshift must be finite and above -1, got {redshift}")
    if markers is True:
        chosen = FEATURES
    elif isinstance(markers, str):
        if markers not in TASKS:
            raise ValueError(f"markers: unknown task {markers!r}; known: {', '.join(TASKS)}")
        chosen = [f for f in FEATURES if markers in f.tasks]
    else:
        chosen = list(markers)
    s = 1.0 + redshift
    out = []
    for f in chosen:
        if f.kind == "telluric":
            if f.window[1] >= lo and f.window[0] <= hi:
                out.append(f)
        elif lo <= f.wavelength * s <= hi:
            out.append(f if s == 1.0 else _shifted(f, s))
    return sorted(out, key=lambda f: f.wavelength)


def _shifted(f: Feature, s: float) -> Feature:
    return replace(f, wavelength=f.wavelength * s, window=(f.window[0] * s, f.window[1] * s))


# ---------------------------------------------------------------------------------------
# speco3: the published tool's matplotlib plot
# ---------------------------------------------------------------------------------------


# The published tool's plot, as its `plot_spectrum` draws it and its tool saves it:
#   figure size by the plotted data's wavelength span (zoom and overview rules differ; x1.05 in
#   width above 10000 points, x0.95 under 50), 80 dpi; blue line, width 1.0, alpha 0.8; bold
#   axis labels (12 pt) and title (14 pt, pad 20); major grid (alpha 0.3, width 0.5) and minor
#   grid (alpha 0.1, width 0.3); ticks inward, labels 10 pt; fixed x tick steps by span and
#   automatic minor y ticks; x and y limits autoscaled with matplotlib's default margins;
#   `tight_layout`; a stats box (9 pt, round, white at alpha 0.8) in the quadrant holding the
#   fewest points; saved with `bbox_inches="tight"`. Invalid points are dropped (the line
#   joins their neighbours), and the zooms are titled "Spectrum".
SPECO3_DPI = 80
SPECO3_ZOOM_TITLE = "Spectrum"

# (minimum span, major step, minor step), first match wins
_SPECO3_XSTEPS = (
    (5000.0, 1000.0, 200.0),
    (1000.0, 200.0, 50.0),
    (500.0, 100.0, 20.0),
    (300.0, 100.0, 25.0),
    (150.0, 50.0, 25.0),
    (100.0, 25.0, 5.0),
    (50.0, 10.0, 2.0),
    (20.0, 5.0, 1.0),
    (5.0, 2.0, 0.5),
    (-math.inf, 1.0, 0.2),
)

# axes-fraction anchor of the stats box by corner: x, y, ha, va
_CORNER_XY = {
    "upper left": (0.02, 0.98, "left", "top"),
    "upper right": (0.98, 0.98, "right", "top"),
    "lower left": (0.02, 0.02, "left", "bottom"),
    "lower right": (0.98, 0.02, "right", "bottom"),
}


def speco3_figsize(span: float, n_points: int, *, overview: bool = False) -> tuple[float, float]:
    """Figure size (inches) for `n_points` spanning `span` Angstrom, as the published tool
    chooses it: zooms by their span (never the 10x6 overview size), the overview by its own
    rule; x1.05 in width above 10000 points, x0.95 under 50."""
    if overview:
        if span > 3000:
            width, height = 10.0, 6.0
        elif span > 1000:
            width, height = 8.0, 5.0
        elif span > 200:
            width, height = 7.0, 4.5
        else:
            width, height = 6.0, 4.0
    elif span < 50:
        width, height = 6.0, 4.0
    elif span < 200:
        width, height = 7.0, 4.5
    elif span < 1000:
        width, height = 8.0, 5.0
    else:
        width, height = 9.0, 5.5
    if n_points > 10000:
        width *= 1.05
    elif n_points < 50:
        width *= 0.95
    return (width, height)


def speco3_xsteps(span: float) -> tuple[float, float]:
    """(major, minor) x tick step in Angstrom for data spanning `span` Angstrom."""
    for least, major, minor in _SPECO3_XSTEPS:
        if span >= least:
            return major, minor
    raise AssertionError("unreachable: the last row takes any span")


def emptiest_corner(x: np.ndarray, y: np.ndarray) -> str:
    """The corner ("upper left", "upper right", "lower left", "lower right") whose quadrant,
    split at the middle of the data's x and y ranges, holds the fewest points; points on a
    midline count for both sides, and ties go in that order."""
    x_mid = (x.min() + x.max()) / 2
    y_mid = (y.min() + y.max()) / 2
    counts = (
        int(np.sum((x <= x_mid) & (y >= y_mid))),
        int(np.sum((x >= x_mid) & (y >= y_mid))),
        int(np.sum((x <= x_mid) & (y <= y_mid))),
        int(np.sum((x >= x_mid) & (y <= y_mid))),
    )
    return ("upper left", "upper right", "lower left", "lower right")[int(np.argmin(counts))]


def speco3_stats(x: np.ndarray, y: np.ndarray) -> str:
    """The stats box text."""
    return (
        f"Data points: {len(x)}\n"
        f"λ range: {x.min():.1f} - {x.max():.1f} Å\n"
        f"Flux range: {y.min():.2e} - {y.max():.2e}"
    )


class _Speco3Figure:
    """One figure of one size with the artists every plot has; `draw` updates them.

    matplotlib's figure, axes, tick and text objects are the slow part of a plot, so they
    are made once per size. Everything a plot changes is set again on each `draw`, from the
    state a fresh figure starts in (subplot parameters included), so a reused figure gives
    the pixels a fresh one gives.

    Three shortcuts, none of which changes a pixel (tests hold a `plain=True` figure, drawn
    by matplotlib's own code throughout, against them): minor tick labels hidden (they are
    empty), ticks recomputed only when their inputs change, and text layouts measured once
    per string and font (both in `agent.mpl_shortcuts`). Together they take about half of
    a plot's time.
    """

    def __init__(self, figsize: tuple[float, float], *, plain: bool = False) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import AutoMinorLocator

        self.fig = fig = Figure(figsize=figsize, dpi=SPECO3_DPI)
        if not plain:
            install_text_layout_cache()
            fig._loupe_text_layouts = {}
        FigureCanvasAgg(fig)
        self.subplotpars = {
            k: getattr(fig.subplotpars, k) for k in ("left", "right", "bottom", "top")
        }
        self.ax = ax = fig.add_subplot(111)
        (self.line,) = ax.plot([], [], color="blue", linewidth=1.0, alpha=0.8, label="Spectrum")
        ax.set_xlabel("Wavelength (Å)", fontsize=12, fontweight="bold")
        ax.set_ylabel("Flux", fontsize=12, fontweight="bold")
        ax.set_title("", fontsize=14, fontweight="bold", pad=20)
        ax.grid(True, alpha=0.3, linestyle="-", linewidth=0.5)
        ax.grid(True, which="minor", alpha=0.1, linestyle="-", linewidth=0.3)
        ax.tick_params(axis="both", which="major", labelsize=10, direction="in")
        # Minor ticks have empty labels: hidden, they are not measured at every layout pass.
        # An empty label is drawn as nothing and its zero-size box lies inside the box of
        # the axes and major labels, so neither the pixels nor the layout change.
        ax.tick_params(axis="both", which="minor", direction="in")
        ax.yaxis.set_minor_locator(AutoMinorLocator())
        if not plain:
            ax.tick_params(axis="both", which="minor", labelbottom=False, labelleft=False)
            for axis in (ax.xaxis, ax.yaxis):
                memoize_ticks(axis)
        self.stats = ax.text(
            0.02,
            0.98,
            "",
            transform=ax.transAxes,
            verticalalignment="top",
            horizontalalignment="left",
            fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8},
        )

    def draw(self, x: np.ndarray, y: np.ndarray, title: str, markers: list[Feature]) -> Image.Image:
        from matplotlib.ticker import MultipleLocator

        fig, ax = self.fig, self.ax
        self.line.set_data(x, y)
        ax.relim()
        ax.autoscale_view()
        ax.title.set_text(title)
        major, minor = speco3_xsteps(float(x.max() - x.min()))
        ax.xaxis.set_major_locator(MultipleLocator(major))
        ax.xaxis.set_minor_locator(MultipleLocator(minor))
        # the published plot lays out before its stats box exists
        self.stats.set_visible(False)
        fig.subplots_adjust(**self.subplotpars)
        fig.tight_layout()
        tx, ty, ha, va = _CORNER_XY[emptiest_corner(x, y)]
        self.stats.set_position((tx, ty))
        self.stats.set_horizontalalignment(ha)
        self.stats.set_verticalalignment(va)
        self.stats.set_text(speco3_stats(x, y))
        self.stats.set_visible(True)
        extra = [_mpl_marker(ax, feat) for feat in markers]
        try:
            return _save_tight(fig)
        finally:
            for artists in extra:
                for a in artists:
                    a.remove()


class _Discard(io.RawIOBase):
    """A file that keeps nothing: the pixels are read from the canvas instead."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b)


def _save_tight(fig) -> Image.Image:
    """The figure as `savefig(dpi=80, bbox_inches="tight")` draws it, as an RGB image.

    The same steps as savefig's tight box, less its layout pass (the plot has just been laid
    out) and the PNG round trip: measure the tight box, pad it, draw only it, and read the
    pixels from the canvas.
    """
    from matplotlib import rcParams

    renderer = fig.canvas.get_renderer()
    bbox = fig.get_tightbbox(renderer).padded(rcParams["savefig.pad_inches"])
    fig.set_layout_engine(None)  # laid out already: savefig must not lay out again
    fig.savefig(_Discard(), format="rgba", dpi=SPECO3_DPI, bbox_inches=bbox)
    return Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("RGB")


_FIG_LOCK = threading.Lock()
_FIGS: dict[tuple[float, float], _Speco3Figure] = {}


def _render_speco3(
    w: np.ndarray,
    f: np.ndarray,
    lo: float,
    hi: float,
    *,
    title: str | None,
    markers: list[Feature],
    overview: bool = False,
    reuse: bool = True,
) -> Image.Image:
    ok = np.isfinite(w) & np.isfinite(f)
    x, y = w[ok], f[ok]
    if x.size == 0:
        raise ValueError(f"no valid flux in the window ({lo:g}, {hi:g}) Å to plot")
    if np.any(np.diff(x) < 0):
        order = np.argsort(x)
        x, y = x[order], y[order]
    figsize = speco3_figsize(float(x.max() - x.min()), int(x.size), overview=overview)
    with _FIG_LOCK:
        if not reuse:
            return _Speco3Figure(figsize).draw(x, y, title or SPECO3_ZOOM_TITLE, markers)
        fig = _FIGS.get(figsize)
        if fig is None:
            fig = _FIGS[figsize] = _Speco3Figure(figsize)
        return fig.draw(x, y, title or SPECO3_ZOOM_TITLE, markers)


def _mpl_marker(ax, feat: Feature) -> list:
    """Draw one catalogue feature; returns the artists added."""
    rgb = tuple(c / 255 for c in _MARKER_RGB[feat.kind])
    trans = ax.get_xaxis_transform()
    added = []
    if feat.kind == "telluric":
        added.append(ax.axvspan(feat.window[0], feat.window[1], color=rgb, alpha=0.12, lw=0))
    else:
        added.append(ax.axvline(feat.wavelength, color=rgb, ls="--", lw=0.8, alpha=0.7))
        if feat.degrade:
            lo, hi = ax.get_xlim()
            dx = 0.06 * (hi - lo) * (-1 if feat.degrade == "blue" else 1)
            added.append(
                ax.annotate(
                    "",
                    xy=(feat.wavelength + dx, 0.93),
                    xytext=(feat.wavelength, 0.93),
                    xycoords=trans,
                    arrowprops={"arrowstyle": "->", "color": rgb, "lw": 0.8},
                )
            )
    added.append(
        ax.text(
            feat.wavelength,
            0.99,
            feat.label,
            transform=trans,
            ha="center",
            va="top",
            fontsize=8,
            color=rgb,
        )
    )
    return added


# ---------------------------------------------------------------------------------------
# fast: numpy + PIL rasteriser
# ---------------------------------------------------------------------------------------

_BLUE = (31, 60, 220)
_GRID = (225, 225, 225)
_AXIS = (0, 0, 0)
_TEXT = (20, 20, 20)


@lru_cache(maxsize=1)
def _font_path() -> str | None:
    # DejaVu Sans (shipped with matplotlib) has the Å glyph that PIL's default font lacks.
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return str(path)
    return None


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    path = _font_path()
    if path is not None:
        return ImageFont.truetype(path, size=size)
    return ImageFont.load_default(size=size)


@lru_cache(maxsize=8)
def _rotated_label(text: str, size: int) -> Image.Image:
    font = _font(size)
    _, _, r, b = font.getbbox(text)
    im = Image.new("L", (r + 2, b + 2), 0)
    ImageDraw.Draw(im).text((1, 1), text, font=font, fill=255)
    return im.rotate(90, expand=True)


@lru_cache(maxsize=4096)
def _stamp(text: str, size: int, anchor: str) -> tuple[Image.Image, int, int]:
    """`text` drawn once as an antialiased mask, with its offset from the anchor point.
    Tick labels and line names repeat from zoom to zoom, and drawing them glyph by glyph
    each time was a quarter of the fast renderer's time."""
    font = _font(size)
    left, top, right, bottom = font.getbbox(text, anchor=anchor)
    im = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(im).text((-left, -top), text, font=font, fill=255, anchor=anchor)
    return im, left, top


@lru_cache(maxsize=4096)
def _text_length(text: str, size: int) -> float:
    """`_font(size).getlength(text)`: tick labels and line names repeat from zoom to zoom,
    and FreeType measures them anew on every call."""
    return _font(size).getlength(text)


@lru_cache(maxsize=64)
def _text_bbox(text: str, size: int) -> tuple[int, int, int, int]:
    """`_font(size).getbbox(text)`, for the few fixed strings the layout is sized by."""
    return _font(size).getbbox(text)


def _text(img: Image.Image, xy: tuple[int, int], text: str, size: int, fill, anchor: str) -> None:
    mask, left, top = _stamp(text, size, anchor)
    img.paste(fill, (int(xy[0]) + left, int(xy[1]) + top), mask)


def nice_ticks(lo: float, hi: float, target: int = 6) -> tuple[np.ndarray, float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) inside [lo, hi], about `target` of them."""
    span = hi - lo
    if not np.isfinite(span) or span <= 0:
        return np.array([lo]), 1.0
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = mag
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw:
            step = m * mag
            break
    first = math.ceil(lo / step - 1e-9) * step
    ticks = np.arange(first, hi + step * 1e-9, step)
    return ticks, step


def _decimals(step: float) -> int:
    if step >= 1:
        return 0
    d = -math.floor(math.log10(step))
    return d + (1 if round(step / 10.0**-d, 6) not in (1.0, 2.0, 5.0) else 0)


def _tick_labels(ticks: np.ndarray, step: float) -> tuple[list[str], str]:
    """Labels for `ticks`, and a scale note ("×1e-17") when values are tiny or huge."""
    big = float(np.max(np.abs(ticks))) if ticks.size else 0.0
    scale_note = ""
    if big and (big >= 1e6 or big < 1e-3):
        k = int(math.floor(math.log10(big)))
        ticks, step = ticks / 10.0**k, step / 10.0**k
        scale_note = f"×1e{k}"
    d = _decimals(step)
    return [
        f"{t:.{d}f}".replace("-0", "0") if abs(t) < 0.5 * step else f"{t:.{d}f}" for t in ticks
    ], scale_note


def _pixel_polylines(xs: np.ndarray, ys: np.ndarray, run: np.ndarray) -> list[list[int]]:
    """Flat [x0, y0, x1, y1, ...] polylines, one per unbroken run, decimated per pixel column."""
    col = np.rint(xs).astype(np.int64)
    yi = np.rint(ys).astype(np.int64)
    key = run * (1 << 20) + col  # non-decreasing: wavelength order within increasing runs
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    ends = np.append(starts[1:], key.size)
    gx = col[starts]
    first, last = yi[starts], yi[ends - 1]
    ymin = np.minimum.reduceat(yi, starts)
    ymax = np.maximum.reduceat(yi, starts)
    pts = np.empty((starts.size, 4, 2), dtype=np.int64)
    pts[:, :, 0] = gx[:, None]
    pts[:, 0, 1], pts[:, 1, 1], pts[:, 2, 1], pts[:, 3, 1] = first, ymin, ymax, last
    grun = run[starts]
    cuts = np.flatnonzero(grun[1:] != grun[:-1]) + 1
    if cuts.size == 0:  # no gap: one polyline (what np.split gives, without its overhead)
        return [pts.reshape(-1).tolist()]
    return [seg.reshape(-1).tolist() for seg in np.split(pts, cuts)]


def _render_fast(
    w: np.ndarray,
    f: np.ndarray,
    lo: float,
    hi: float,
    *,
    title: str | None,
    markers: list[Feature],
    size: tuple[int, int],
) -> Image.Image:
    width, height = int(size[0]), int(size[1])
    if width < 64 or height < 64:
        raise ValueError(f"size must be at least 64x64, got {width}x{height}")
    fs = max(9, round(min(width, height) / 36))
    img = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(img)

    good = np.isfinite(f)
    if good.any():
        fmin, fmax = float(f[good].min()), float(f[good].max())
    else:
        fmin, fmax = 0.0, 1.0
    if fmax <= fmin:
        pad = abs(fmin) * 0.05 or 1.0
        fmin, fmax = fmin - pad, fmax + pad
    pad = 0.05 * (fmax - fmin)
    ylo, yhi = fmin - pad, fmax + pad

    yticks, ystep = nice_ticks(ylo, yhi, target=max(3, height // 80))
    ylabels, ynote = _tick_labels(yticks, ystep)
    xticks, xstep = nice_ticks(lo, hi, target=max(3, width // 85))
    xlabels, _ = _tick_labels(xticks, xstep)

    asc = _text_bbox("0", fs)[3]
    ytext_w = max((_text_length(s, fs) for s in ylabels), default=0)
    lab_h = _text_bbox("Flux", fs + 1)[3]
    left = int(ytext_w) + 5 + lab_h + 10
    right = max(10, int(_text_length(xlabels[-1], fs) / 2) + 2) if xlabels else 10
    top = (_text_bbox("Ag", fs + 1)[3] + 10) if title else max(8, asc // 2 + 4)
    if ynote:
        top = max(top, asc + 8)
    bottom = asc + 6 + lab_h + 12
    x0, y0 = left, top
    x1, y1 = width - right - 1, height - bottom - 1
    pw, ph = x1 - x0, y1 - y0
    if pw < 16 or ph < 16:
        raise ValueError(f"size {width}x{height} leaves no room for the plot")
    sx = pw / (hi - lo)
    sy = ph / (yhi - ylo)

    # grid, ticks and tick labels
    for t, s in zip(xticks, xlabels):
        px = int(round(x0 + (t - lo) * sx))
        draw.line((px, y0 + 1, px, y1 - 1), fill=_GRID)
        draw.line((px, y1, px, y1 + 4), fill=_AXIS)
        _text(img, (px, y1 + 6), s, fs, _TEXT, "mt")
    for t, s in zip(yticks, ylabels):
        py = int(round(y1 - (t - ylo) * sy))
        draw.line((x0 + 1, py, x1 - 1, py), fill=_GRID)
        draw.line((x0 - 4, py, x0, py), fill=_AXIS)
        _text(img, (x0 - 6, py), s, fs, _TEXT, "rm")
    if ynote:
        _text(img, (x0, y0 - 3), ynote, fs, _TEXT, "lb")

    label_right: list[int] = []  # right edge of the last label on each text row
    for feat in markers:
        _pil_marker(img, draw, feat, lo, hi, x0, y0, x1, y1, sx, fs, label_right)

    # the spectrum
    if good.any():
        run = np.cumsum(~good)[good]
        xs = x0 + (w[good] - lo) * sx
        ys = y1 - (f[good] - ylo) * sy
        for seg in _pixel_polylines(xs, ys, run):
            if len(seg) == 8 and seg[0:2] == seg[6:8] and seg[3] == seg[5]:
                draw.point(seg[0:2], fill=_BLUE)
            else:
                draw.line(seg, fill=_BLUE, width=1)

    draw.rectangle((x0, y0, x1, y1), outline=_AXIS)
    _text(img, ((x0 + x1) // 2, height - 4), "Wavelength (Å)", fs + 1, _TEXT, "md")
    ylab = _rotated_label("Flux", fs + 1)
    img.paste(_TEXT, (3, (y0 + y1 - ylab.height) // 2), ylab)
    if title:
        text = title
        while _text_length(text, fs + 1) > width - 8 and len(text) > 4:
            text = text[:-4] + "…"
        # A spectrum's global view is drawn once per task, under the same title: stamped
        # like the tick labels (the same pixels as drawing it glyph by glyph).
        _text(img, (width // 2, 4), text, fs + 1, _TEXT, "mt")
    return img


def _pil_marker(img, draw, feat: Feature, lo, hi, x0, y0, x1, y1, sx, fs, label_right) -> None:
    font = _font(fs)
    rgb = _MARKER_RGB[feat.kind]
    if feat.kind == "telluric":
        a = int(round(x0 + (max(feat.window[0], lo) - lo) * sx))
        b = int(round(x0 + (min(feat.window[1], hi) - lo) * sx))
        for px in range(a, b + 1, 3):
            draw.line((px, y1 - 6, px, y1 - 1), fill=rgb)
        _text(img, ((a + b) // 2, y1 - 8), feat.label, fs, rgb, "mb")
        return
    px = int(round(x0 + (feat.wavelength - lo) * sx))
    for py in range(y0 + 14, y1, 6):
        draw.line((px, py, px, min(py + 3, y1 - 1)), fill=rgb)
    # labels that would overlap the previous one go one text row lower
    half = int(_text_length(feat.label, fs) / 2) + 2
    row = next((i for i, r in enumerate(label_right) if px - half > r), len(label_right))
    if row == len(label_right):
        label_right.append(0)
    label_right[row] = px + half
    _text(img, (px, y0 + 2 + row * (getattr(font, "size", 11) + 2)), feat.label, fs, rgb, "mt")
    if feat.degrade:
        d = -1 if feat.degrade == "blue" else 1
        tip = px + d * 14
        yy = y0 + 18
        draw.line((px, yy, tip, yy), fill=rgb)
        draw.line((tip, yy, tip - d * 4, yy - 3), fill=rgb)
        draw.line((tip, yy, tip - d * 4, yy + 3), fill=rgb)


def to_png(img: Image.Image, compress_level: int = 1) -> bytes:
    """PNG bytes of a rendered image (fast compression: these images are re-rendered anyway)."""
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


__all__ = [
    "DEFAULT_SIZE",
    "FEATURES",
    "RENDERERS",
    "emptiest_corner",
    "nice_ticks",
    "render",
    "resolve_markers",
    "speco3_figsize",
    "speco3_stats",
    "speco3_xsteps",
    "to_png",
]
