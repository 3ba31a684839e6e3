"""The zoom tool, compatible with Spec-o3's `spectral_visualization_tool`.

The model asks for `wavelength_range` = [min, max] in rest-frame vacuum Angstrom (and an
optional `label`); the tool re-plots the real flux over that window and answers with the
image and the published text convention:

    Generated spectral visualization focused on wavelength range (a, b) Å for {label}.

As in the published tool, (a, b) echoes the numbers the model asked for, written the way
Python writes a tuple of them (4800 stays 4800, 4800.0 stays 4800.0); a window partly
outside the data is clipped in the plot, and one wholly outside is refused with an error
text. Nothing here raises on a bad call: `call_tool` turns every malformed argument into an
error `ToolResult` the model sees as its observation.

Images are not stored. A step records its window and renderer as an image reference
("render:fast:4800.0:4920.0"), and `render_step` draws it again on demand; the renderers
are deterministic.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

# The tool's name, schema and image references belong to the protocol; named here too.
from agent.protocol import TOOL_NAME, TOOL_SCHEMA, image_reference, parse_reference  # noqa: F401
from agent.render import RENDERERS, Markers, render
from agent.spectrum import Spectrum, SpectrumError
from agent.trajectory import Step

MIN_PIXELS = 3  # fewer valid pixels than this in a window is not a plot


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


# The reference format is part of the protocol (agent.protocol); the tool renders from it.
parse_image_reference = parse_reference


# -- spectrum helpers ------------------------------------------------------------------


def spectrum_title(spectrum: Spectrum) -> str:
    """The global view's title: the spectrum's file name (as the published tool titles it)."""
    m = spectrum.meta
    name = m.extra.get("name") if isinstance(m.extra, dict) else None
    if name:
        return str(name)
    if m.source:
        fname = Path(str(m.source)).name
        # a file holding many spectra (DESI, templates, parquet): say which one
        return f"{fname} [{m.id}]" if m.row is not None and m.id else fname
    return m.id or "spectrum"


def data_range(spectrum: Spectrum) -> tuple[float, float]:
    """Rest-frame vacuum range covered by valid pixels."""
    rest = spectrum.rest_wavelength()[spectrum.good]
    return float(rest.min()), float(rest.max())


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
        return repr(float(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


def reply_text(wavelength_range: tuple[Any, Any], label: str | None) -> str:
    """The published tool's reply for a successful zoom."""
    rng = f"({_echo(wavelength_range[0])}, {_echo(wavelength_range[1])})"
    if label:
        return f"Generated spectral visualization focused on wavelength range {rng} Å for {label}."
    return f"Generated spectral visualization focused on wavelength range {rng} Å."


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
) -> Image.Image:
    """The image of `spectrum` over a rest-frame window, exactly as the tool draws it."""
    return render(
        spectrum.rest_wavelength(),
        spectrum.flux,
        mask=spectrum.mask,
        window=window,
        renderer=renderer,
        title=title,
        markers=markers,
        size=size,
    )


def zoom(
    spectrum: Spectrum,
    wavelength_range: Any,
    label: str | None = None,
    *,
    renderer: str = "fast",
    markers: Markers = None,
    size: tuple[int, int] | None = None,
) -> ToolResult:
    """Plot `spectrum` over `wavelength_range` (rest-frame vacuum Angstrom).

    Clips a window partly outside the data; refuses (error text, no image) one wholly outside
    it, one with fewer than MIN_PIXELS valid pixels, and malformed ranges.
    """
    err = _check_renderer(renderer)
    if err:
        return _error(err)
    parsed = _parse_range(wavelength_range)
    if isinstance(parsed, str):
        return _error(parsed)
    lo, hi = parsed
    dlo, dhi = data_range(spectrum)
    if hi < dlo or lo > dhi:
        return _error(
            f"Error: The specified wavelength range {_shown(wavelength_range)} is invalid or "
            f"outside the available data range [{dlo:.1f}, {dhi:.1f}]."
        )
    win = (max(lo, dlo), min(hi, dhi))
    rest = spectrum.rest_wavelength()
    n_good = int(np.sum(spectrum.good & (rest >= win[0]) & (rest <= win[1])))
    if n_good < MIN_PIXELS:
        return _error(
            f"Error: The specified wavelength range {_shown(wavelength_range)} holds only "
            f"{n_good} valid pixel(s) of this spectrum (need at least {MIN_PIXELS}); "
            f"choose a wider range inside [{dlo:.1f}, {dhi:.1f}]."
        )
    try:
        image = render_window(spectrum, win, renderer=renderer, markers=markers, size=size)
    except Exception as exc:  # a plotting failure is an observation, not a crash
        return _error(f"Error processing spectral visualization: {exc}")
    shown = tuple(wavelength_range) if _is_pair(wavelength_range) else (lo, hi)
    return ToolResult(text=reply_text(shown, label), image=image, window=win)


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
    win = data_range(spectrum)
    try:
        image = render_window(
            spectrum,
            win,
            renderer=renderer,
            title=spectrum_title(spectrum),
            markers=markers,
            size=size,
        )
    except Exception as exc:
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
    """Run a raw parsed tool call; every problem becomes an error ToolResult, never an exception."""
    try:
        if name != TOOL_NAME:
            return _error(f"Error: unknown tool {name!r}; the only tool is {TOOL_NAME!r}.")
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return _error("Error: tool arguments are not valid JSON.")
        if not isinstance(arguments, dict):
            return _error(
                f"Error: tool arguments must be an object with 'wavelength_range', "
                f"got {type(arguments).__name__}."
            )
        extra = sorted(str(k) for k in arguments if k not in ("wavelength_range", "label"))
        if extra:
            return _error(
                f"Error: unexpected argument(s) {', '.join(extra)}; "
                "expected 'wavelength_range' and optionally 'label'."
            )
        if "wavelength_range" not in arguments:
            return _error("Error: missing required argument 'wavelength_range' = [min, max].")
        label = arguments.get("label")
        if label is not None and not isinstance(label, str):
            if isinstance(label, (int, float)) and not isinstance(label, bool):
                label = str(label)
            else:
                return _error(f"Error: 'label' must be text, got {type(label).__name__}.")
        return zoom(
            spectrum,
            arguments["wavelength_range"],
            label,
            renderer=renderer,
            markers=markers,
            size=size,
        )
    except Exception as exc:  # belt and braces: the agent loop must never see a raise
        return _error(f"Error processing spectral visualization: {type(exc).__name__}: {exc}")


def render_step(
    spectrum: Spectrum,
    step: Step,
    renderer: str | None = None,
    *,
    markers: Markers = None,
    size: tuple[int, int] | None = None,
) -> Image.Image | None:
    """Draw a trajectory step's observation again from its window (None if it had none).

    The renderer recorded in the step's image reference wins over `renderer`, so the image is
    the one the model saw.
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
    return render_window(spectrum, window, renderer=renderer, markers=markers, size=size)


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


def _is_pair(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2


def _shown(v: Any) -> str:
    text = repr(list(v)) if isinstance(v, (list, tuple)) else repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _number(v: Any) -> float | None:
    if isinstance(v, (bool, np.bool_)) or v is None:
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _parse_range(v: Any) -> tuple[float, float] | str:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return f"Error: wavelength_range must be [min, max] in Angstrom, got {_shown(v)}."
    if not _is_pair(v):
        return f"Error: wavelength_range must be [min, max] in Angstrom, got {_shown(v)}."
    lo, hi = _number(v[0]), _number(v[1])
    if lo is None or hi is None:
        return f"Error: wavelength_range values must be numbers, got {_shown(v)}."
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"Error: wavelength_range values must be finite, got {_shown(v)}."
    if lo >= hi:
        return (
            f"Error: The specified wavelength range {_shown(v)} is invalid: "
            "min must be smaller than max."
        )
    return lo, hi
