"""The spectrum as a display shows it, computed once per (spectrum, display) and read by
every trace, marker and axis of its figures (`app.plots`).

`shown(spec, frame, ...)` converts the spectrum to the display frame once: the wavelengths
in the chosen frame (rest-frame vacuum, what the zoom tool's ranges refer to, or the file's
observed frame), the flux divided by its continuum where the view is normalised, masked
pixels as NaN gaps, the ±1σ error, the boxcar-smoothed flux, and the file's arms and sky on
the same scale. A figure then only selects and decimates (`app.traces`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent.spectrum import Arm, Sky, Spectrum, air_to_vacuum, vacuum_to_air

Frame = Literal["rest", "observed"]

CONTINUUM_BIN = 200.0  # Angstrom per bin of the continuum estimate


@dataclass(frozen=True)
class ShownArm:
    """One arm of the file as drawn: wavelengths in the display frame (`x`) and rest-frame
    vacuum (`rest`, to select a window), flux with its bad pixels as NaN."""

    name: str
    x: np.ndarray
    rest: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Shown:
    """A spectrum in the display frame. `spec` is the spectrum drawn (divided by its
    continuum when `normalised`); arrays are per pixel of it, NaN where it is masked."""

    spec: Spectrum
    frame: Frame
    normalised: bool
    rest: np.ndarray  # rest-frame vacuum wavelength: windows are selected on it
    x: np.ndarray  # the wavelength the display shows
    flux: np.ndarray
    err: np.ndarray | None  # None: no error band (not asked, or the file has no ivar)
    smooth_width: int
    smoothed: np.ndarray | None  # None unless smooth_width > 1
    arms: tuple[ShownArm, ...] | None  # None: not asked
    sky: np.ndarray | None  # None: not asked, or the file holds none
    lacks: str = ""  # what was asked for and the file does not hold, said in the title

    @property
    def redshift(self) -> float:
        return float(self.spec.redshift)

    def to_frame(self, rest_wave: np.ndarray | float) -> np.ndarray:
        return to_frame(self.spec, rest_wave, self.frame)

    def select(self, lo: float, hi: float) -> np.ndarray:
        """The pixels inside the rest-frame window [lo, hi]."""
        return (self.rest >= lo) & (self.rest <= hi)

    @property
    def xlabel(self) -> str:
        if self.frame == "rest":
            return "rest-frame vacuum wavelength (Å)"
        return f"observed {self.spec.frame} wavelength (Å), z = {self.spec.redshift:.4f}"

    @property
    def ylabel(self) -> str:
        return flux_label(self.spec, self.normalised)


def shown(
    spec: Spectrum,
    frame: Frame = "rest",
    *,
    normalised: bool = False,
    smooth_width: int = 0,
    show_error: bool = True,
    arms: bool = False,
    sky: bool = False,
) -> Shown:
    """`spec` converted to the display once; the arms and sky only when asked."""
    if normalised:
        spec = normalise(spec)
    bad = spec.mask
    rest = spec.rest_wavelength()
    err = spec.error() if show_error else None
    width = int(smooth_width or 0)
    drawn_arms = None
    if arms:
        drawn_arms = tuple(
            ShownArm(
                a.name,
                file_to_frame(spec, a.wavelength, frame),
                file_to_frame(spec, a.wavelength, "rest"),
                np.where(a.mask, np.nan, a.flux),
            )
            for a in spec.arms
        )
    return Shown(
        spec=spec,
        frame=frame,
        normalised=normalised,
        rest=rest,
        x=rest if frame == "rest" else spec.wavelength,
        flux=np.where(bad, np.nan, spec.flux),
        err=None if err is None else np.where(bad, np.nan, err),
        smooth_width=width,
        smoothed=smooth(spec.flux, bad, width) if width > 1 else None,
        arms=drawn_arms,
        sky=np.asarray(spec.sky.flux, dtype=float) if sky and spec.sky is not None else None,
        lacks=(" · no arms in this file" if arms and not spec.arms else "")
        + (" · no sky in this file" if sky and spec.sky is None else ""),
    )


def flux_label(spec: Spectrum, normalised: bool = False) -> str:
    """The y axis's title: the file's flux unit (BUNIT/TUNIT, or the reader's), or said
    plainly to be arbitrary."""
    if normalised:
        return "flux / continuum"
    unit = (spec.flux_unit or "").strip()
    if not unit or unit.lower() in ("arbitrary", "none", "unknown", "counts?"):
        return "flux (arbitrary units)"
    return f"flux ({unit})"


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


def file_to_frame(spec: Spectrum, wave: np.ndarray, frame: Frame) -> np.ndarray:
    """Wavelengths as the file holds them (an arm's, in the spectrum's frame) as `frame`
    shows them: rest frame vacuum, or as they are."""
    if frame == "observed":
        return wave
    vac = air_to_vacuum(wave) if spec.frame == "air" else wave
    return vac / (1.0 + spec.redshift)


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
