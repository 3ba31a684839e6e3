"""The zoom tool, compatible with Spec-o3's `spectral_visualization_tool`.

The model asks for `wavelength_range` = [min, max] in rest-frame vacuum Angstrom (and an
optional `label`); the tool re-plots the real flux over that window and answers with the
image and the published text convention:

    Generated spectral visualization focused on wavelength range (a, b) Å for {label}.

The rules are the published tool's, so a published checkpoint meets the replies it was
trained on: (a, b) echoes the numbers the model asked for, written the way Python writes a
tuple of them (4800 stays 4800, 4800.0 stays 4800.0); any label that is not empty is named;
arguments other than these two are ignored; a call without a range plots the whole
spectrum; a window partly outside the data is clipped, and one pixel with finite flux in it
is enough; a window wholly outside the data, reversed or malformed gets the published
refusal text. Nothing here raises on a bad call: `call_tool` turns every malformed argument
into an error `ToolResult` the model sees as its observation.

Which pixels are drawn depends on the renderer: `speco3` drops only non-finite flux, as the
published plot does (LAMOST pixels with ivar <= 0 keep finite flux and are drawn), while
`fast` also leaves out masked pixels.

Images are not stored. A step records its window and renderer as an image reference
("render:fast:4800.0:4920.0"), and `render_step` draws it again on demand; the renderers
are deterministic.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from agent.protocol import TOOL_NAME, parse_reference
from agent.render import RENDERERS, Markers, render
from agent.spectrum import Spectrum, SpectrumError
from agent.trajectory import Step, Trajectory

log = logging.getLogger(__name__)

# verl cuts longer tool replies to this many characters (multi_turn.max_tool_response_length)
MAX_REPLY_CHARS = 1024


@dataclass
class ToolResult:
    """What the tool answers: reply text and image, or an error text (then no image)."""

    text: str
    image: Image.Image | None = None
    window: tuple[float, float] | None = None  # plotted window (after clipping), rest frame
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# -- spectrum helpers ------------------------------------------------------------------


def spectrum_title(spectrum: Spectrum) -> str:
    """The global view's title: the spectrum's file name (as the published tool titles it).

    A SpecVI-Bench row is titled with its `extra_info.name`, the name its own overview image
    carries; `vet` and GRPO both title through this function.
    """
    m = spectrum.meta
    extra = m.extra if isinstance(m.extra, dict) else {}
    name = extra.get("specvi_name") or extra.get("name")
    if name:
        return str(name)
    if m.source:
        fname = Path(str(m.source)).name
        # a file holding many spectra (DESI, templates, parquet): say which one
        return f"{fname} [{m.id}]" if m.row is not None and m.id else fname
    return m.id or "spectrum"


def data_range(spectrum: Spectrum) -> tuple[float, float]:
    """Rest-frame vacuum range covered by valid (unmasked) pixels."""
    rest = spectrum.rest_wavelength()[spectrum.good]
    return float(rest.min()), float(rest.max())


def full_range(spectrum: Spectrum) -> tuple[float, float]:
    """Rest-frame vacuum range of every pixel: the range the published tool checks against."""
    rest = spectrum.rest_wavelength()
    rest = rest[np.isfinite(rest)]
    return float(rest.min()), float(rest.max())


def bad_pixels(spectrum: Spectrum, renderer: str) -> np.ndarray:
    """Pixels `renderer` leaves out: non-finite flux for `speco3` (what the published plot
    drops), the spectrum's mask for `fast`."""
    if renderer == "speco3":
        return ~np.isfinite(spectrum.flux)
    return spectrum.mask | ~np.isfinite(spectrum.flux)


def extract_region(spectrum: Spectrum, lo: float, hi: float) -> Spectrum:
    """The part of `spectrum` whose rest-frame vacuum wavelength lies in [lo, hi].

    Like specutils' `extract_region`: the result keeps the spectrum's own wavelength frame,
    redshift, units and metadata (so its `rest_wavelength()` is the window). Raises
    `SpectrumError` when fewer than two pixels fall inside.
    """
    lo, hi = float(lo), float(hi)
    src = spectrum.meta.source or spectrum.meta.id or None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise SpectrumError(src, f"region must be finite with min < max, got ({lo}, {hi})")
    rest = spectrum.rest_wavelength()
    sel = (rest >= lo) & (rest <= hi)
    if sel.sum() < 2:
        raise SpectrumError(
            src, f"region ({lo:g}, {hi:g}) Å holds {int(sel.sum())} pixel(s); need at least 2"
        )
    return spectrum.replace(
        wavelength=spectrum.wavelength[sel],
        flux=spectrum.flux[sel],
        ivar=None if spectrum.ivar is None else spectrum.ivar[sel],
        mask=spectrum.mask[sel],
    )


# -- the tool ---------------------------------------------------------------------------


def _echo(v: Any) -> str:
    # How Python writes the number inside a tuple: the published tool formats tuple(range).
    if isinstance(v, (bool, np.bool_)):
        return repr(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return repr(v)


def _range_text(wavelength_range: Any) -> str:
    return f"({_echo(wavelength_range[0])}, {_echo(wavelength_range[1])})"


def reply_text(wavelength_range: tuple[Any, Any] | None, label: Any = None) -> str:
    """The published tool's reply for a successful plot (`wavelength_range` None: no range).

    >>> reply_text([4800, 4920.5], "H-beta")
    'Generated spectral visualization focused on wavelength range (4800, 4920.5) Å for H-beta.'
    >>> reply_text(None)
    'Generated full spectrum visualization.'
    """
    if wavelength_range is None:
        text = "Generated full spectrum visualization"
    else:
        rng = _range_text(wavelength_range)
        text = f"Generated spectral visualization focused on wavelength range {rng} Å"
    return _truncate(f"{text} for {label}." if label else f"{text}.")


def refusal_text(wavelength_range: Any, full: tuple[float, float]) -> str:
    """The published tool's reply to a range it will not plot (outside, reversed, malformed).

    >>> refusal_text([10000, 12000], (3700.0, 9100.04))
    'Error: The specified wavelength range [10000, 12000] is invalid or outside the available data range [3700.0, 9100.0].'
    """
    return _truncate(
        f"Error: The specified wavelength range {wavelength_range} is invalid or outside "
        f"the available data range [{full[0]:.1f}, {full[1]:.1f}]."
    )


def _truncate(text: str) -> str:
    # as verl cut a long tool reply before the model saw it
    if len(text) > MAX_REPLY_CHARS:
        return text[:MAX_REPLY_CHARS] + "...(truncated)"
    return text


def _error(text: str) -> ToolResult:
    return ToolResult(text=text, image=None, window=None, error=text)


def _check_renderer(renderer: str) -> str | None:
    if renderer not in RENDERERS:
        return f"Error: unknown renderer {renderer!r}; choose one of {', '.join(RENDERERS)}."
    return None


def render_window(
    spectrum: Spectrum,
    window: tuple[float, float],
    *,
    renderer: str = "fast",
    title: str | None = None,
    markers: Markers = None,
    size: tuple[int, int] | None = None,
    redshift: float | None = None,
) -> Image.Image:
    """The image of `spectrum` over a rest-frame window, exactly as the tool draws it.

    `redshift` is the source's redshift the trajectory uses (measured or the pipeline's;
    None: the spectrum's own): markers sit there, so a quasar the pipeline put at rest but
    the inspector measured at z = 1.5 carries its Mg II marker near 7000 A, where its Mg II is.
    """
    return render(
        spectrum.rest_wavelength(),
        spectrum.flux,
        mask=bad_pixels(spectrum, renderer),
        window=window,
        renderer=renderer,
        title=title,
        markers=markers,
        size=size,
        redshift=marker_redshift(spectrum, redshift),
    )


def marker_redshift(spectrum: Spectrum, z: float | None) -> float:
    """The source at redshift `z`, as seen in the frame the tool plots (the spectrum's rest
    frame by its own redshift); 0 when `z` is None."""
    if z is None:
        return 0.0
    return (1.0 + float(z)) / (1.0 + float(spectrum.redshift)) - 1.0


def trajectory_redshift(traj: Trajectory) -> float | None:
    """The redshift a trajectory's reading used, or None when it measured none."""
    z = traj.redshift or {}
    if z.get("source") in (None, "none") or z.get("value") is None:
        return None
    return float(z["value"])


def zoom(
    spectrum: Spectrum,
    wavelength_range: Any,
    label: Any = None,
    *,
    renderer: str = "fast",
    markers: Markers = None,
    size: tuple[int, int] | None = None,
) -> ToolResult:
    """Plot `spectrum` over `wavelength_range` (rest-frame vacuum Angstrom).

    Follows the published tool: clips a window partly outside the data; refuses (error
    text, no image) one wholly outside it, reversed or malformed; plots any window with at
    least one drawable pixel. `wavelength_range` None plots the whole spectrum (drawn by the
    zoom rule over the full range, so its reference re-renders it; the published tool used
    its overview figure size there).
    """
    err = _check_renderer(renderer)
    if err:
        return _error(err)
    full = full_range(spectrum)
    if wavelength_range is None:
        lo, hi = full
    else:
        parsed = _parse_range(wavelength_range, full)
        if parsed is None:
            return _error(refusal_text(wavelength_range, full))
        lo, hi = parsed
    rest = spectrum.rest_wavelength()
    inside = (rest >= lo) & (rest <= hi) & ~bad_pixels(spectrum, renderer)
    if not inside.any():
        shown = "None" if wavelength_range is None else _range_text(wavelength_range)
        return _error(
            "Error processing spectral visualization: "
            f"No data points in specified wavelength range {shown}"
        )
    win = (max(lo, full[0]), min(hi, full[1]))
    if win[1] <= win[0]:  # the window meets the data at its last pixel: keep it as asked
        win = (lo, hi)
    try:
        image = render_window(spectrum, win, renderer=renderer, markers=markers, size=size)
    except Exception as exc:  # a plotting failure is an observation, not a crash; logged as a bug
        log.exception("zoom %s of %r (%s renderer) failed", win, spectrum.meta.id, renderer)
        return _error(_truncate(f"Error processing spectral visualization: {exc}"))
    return ToolResult(text=reply_text(wavelength_range, label), image=image, window=win)


def global_view(
    spectrum: Spectrum,
    *,
    renderer: str = "fast",
    markers: Markers = None,
    size: tuple[int, int] | None = None,
) -> ToolResult:
    """The whole spectrum, titled with its file name: the first user turn's image."""
    err = _check_renderer(renderer)
    if err:
        return _error(err)
    # speco3 plots every finite pixel, as the published overview does; fast keeps to valid ones
    win = full_range(spectrum) if renderer == "speco3" else data_range(spectrum)
    try:
        image = render_window(
            spectrum,
            win,
            renderer=renderer,
            title=spectrum_title(spectrum),
            markers=markers,
            size=size,
        )
    except Exception as exc:  # an observation, not a crash; logged as a bug
        log.exception("global view of %r (%s renderer) failed", spectrum.meta.id, renderer)
        return _error(f"Error processing spectral visualization: {exc}")
    return ToolResult(text="Generated full spectrum visualization.", image=image, window=win)


def call_tool(
    spectrum: Spectrum,
    name: Any,
    arguments: Any,
    *,
    renderer: str = "fast",
    markers: Markers = None,
    size: tuple[int, int] | None = None,
) -> ToolResult:
    """Run a raw parsed tool call; every problem becomes an error ToolResult, never an exception.

    Extra arguments are ignored and a missing range plots the whole spectrum, as the
    published tool does; an unknown tool or arguments that are not an object get the text
    verl answered them with.
    """
    try:
        if name != TOOL_NAME:
            return _error(f"Error when executing tool: {name!r}")
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return _error("Error when executing tool: tool arguments are not valid JSON")
        if not isinstance(arguments, dict):
            return _error(
                f"Error when executing tool: '{type(arguments).__name__}' object has no "
                "attribute 'get'"
            )
        return zoom(
            spectrum,
            arguments.get("wavelength_range"),
            arguments.get("label", ""),
            renderer=renderer,
            markers=markers,
            size=size,
        )
    except Exception as exc:  # belt and braces: the agent loop must never see a raise
        spectrum_id = getattr(getattr(spectrum, "meta", None), "id", None)
        log.exception("tool call %r on %r failed", name, spectrum_id)
        return _error(f"Error processing spectral visualization: {type(exc).__name__}: {exc}")


def render_step(
    spectrum: Spectrum,
    step: Step,
    renderer: str | None = None,
    *,
    markers: Markers = None,
    size: tuple[int, int] | None = None,
    redshift: float | None = None,
) -> Image.Image | None:
    """Draw a trajectory step's observation again from its window (None if it had none).

    The renderer recorded in the step's image reference wins over `renderer`, so the image is
    the one the model saw. Markers sit at `redshift` (`trajectory_redshift`; see
    `render_window`).
    """
    window = step.window
    parsed = parse_reference(step.observation_image)
    if parsed is not None:
        renderer = parsed[0]
        window = window if window is not None else parsed[1]
    if window is None:
        return None
    renderer = renderer or "fast"
    if renderer not in RENDERERS:
        return None
    return render_window(
        spectrum, window, renderer=renderer, markers=markers, size=size, redshift=redshift
    )


def render_reference(
    spectrum: Spectrum, ref: str, *, markers: Markers = None, size: tuple[int, int] | None = None
) -> Image.Image | None:
    """Draw the image an image reference names (the global view included)."""
    parsed = parse_reference(ref)
    if parsed is None or parsed[0] not in RENDERERS:
        return None
    renderer, window = parsed
    if window is None:
        return global_view(spectrum, renderer=renderer, markers=markers, size=size).image
    return render_window(spectrum, window, renderer=renderer, markers=markers, size=size)


# -- argument checking ------------------------------------------------------------------


def _parse_range(v: Any, full: tuple[float, float]) -> tuple[float, float] | None:
    """(min, max) of a range the published tool accepts, else None (it refuses).

    It accepts two numbers, min < max, not wholly outside the data. Unlike Python's
    comparisons there, booleans, numeric strings and non-finite numbers are refused.
    """
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return None
    if not all(
        isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))
        for x in v
    ):
        return None
    lo, hi = float(v[0]), float(v[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    if hi < full[0] or lo > full[1]:
        return None
    return lo, hi
