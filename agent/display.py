"""A display copy of a spectrum too large for a server to hold.

A survey spectrum has a few thousand pixels; a file may hold ten million (within
`LOUPE_MAX_PIXELS`), hundreds of MB as float64 arrays. The views draw a few thousand points
per panel at most (a minimum and a maximum per pixel column), so a server needs far less.
`display_copy` keeps a subset of the pixels, by index: every array of the copy is the
original's at the same pixels, so the copy is a `Spectrum` like any other, with its units,
frame, redshift and metadata. It keeps

- inside each window the views zoom into (a trajectory's windows, rest-frame Angstrom),
  every pixel where the window holds at most `WINDOW_PIXELS`; a wider window keeps, in each
  of `WINDOW_BINS` bins, its lowest and highest good flux and one bad pixel where the bin has
  any: four bins to each of the zoom panel's (`app.traces.ZOOM_POINTS` points, a minimum
  and a maximum per bin), so the panel draws the same extremes and gaps as from the whole;
- over the whole spectrum the same envelope in `max_pixels // 4` bins, for the global
  panel, and every k-th pixel (about `max_pixels // 2` of them), a uniform sample, so that
  medians (the SNR, the normalised view's continuum) come out as they do on the whole.

A spectrum of at most `max_pixels` pixels is returned as it is. The copy says what it is in
`meta.extra["display"]` (the file's pixels and those kept).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from agent.spectrum import Arm, Sky, Spectrum, air_to_vacuum

# A spectrum with more pixels than this is reduced for display (a survey's has ~4,000-8,000).
DISPLAY_PIXELS = 131_072
# A zoom window with at most this many pixels is kept whole; a wider one as an envelope of
# WINDOW_BINS bins (the zoom panel draws 1,200 bins: app.traces.ZOOM_POINTS // 2).
WINDOW_PIXELS = 16_384
WINDOW_BINS = 4_800
# Windows kept at full resolution per copy, at most (a trajectory has a handful).
MAX_WINDOWS = 32


def envelope(flux: np.ndarray, bad: np.ndarray, lo: int, hi: int, n_bins: int) -> np.ndarray:
    """Indices in [lo, hi) of each of `n_bins` equal bins' lowest and highest good flux and
    of one bad pixel where the bin has any (so a gap stays a gap); all of them where the
    range has no more than 2 * n_bins pixels.

    >>> f = np.array([3.0, 1, 2, 9, 5, 4, 0, 8]); bad = np.zeros(8, bool); bad[5] = True
    >>> envelope(f, bad, 0, 8, 2).tolist()
    [1, 3, 5, 6, 7]
    """
    n = hi - lo
    if n <= 2 * n_bins:
        return np.arange(lo, hi)
    k = -(-n // n_bins)
    nb = -(-n // k)
    pad = nb * k - n
    f = flux[lo:hi]
    b = bad[lo:hi] | ~np.isfinite(f)
    low = np.where(b, np.inf, f)
    high = np.where(b, -np.inf, f)
    if pad:
        low = np.concatenate([low, np.full(pad, np.inf)])
        high = np.concatenate([high, np.full(pad, -np.inf)])
        b = np.concatenate([b, np.zeros(pad, bool)])
    low, high, b = low.reshape(nb, k), high.reshape(nb, k), b.reshape(nb, k)
    base = lo + np.arange(nb) * k
    good = np.isfinite(low.min(axis=1))
    gap = b.any(axis=1)
    out = [
        base[good] + low.argmin(axis=1)[good],
        base[good] + high.argmax(axis=1)[good],
        base[gap] + b.argmax(axis=1)[gap],
    ]
    return np.unique(np.concatenate(out))


def kept_pixels(
    rest: np.ndarray,
    flux: np.ndarray,
    bad: np.ndarray,
    windows: Sequence[tuple[float, float]],
    max_pixels: int,
) -> np.ndarray:
    """The indices a display copy keeps of one set of arrays (see the module's docstring);
    `rest` is the rest-frame vacuum wavelength, ascending."""
    n = rest.size
    parts = [np.array([0, n - 1]), envelope(flux, bad, 0, n, max(1, max_pixels // 4))]
    step = max(1, -(-n // max(1, max_pixels // 2)))
    parts.append(np.arange(0, n, step))
    for lo, hi in list(dict.fromkeys((float(a), float(b)) for a, b in windows))[:MAX_WINDOWS]:
        a = max(0, int(np.searchsorted(rest, min(lo, hi), "left")) - 1)
        b = min(n, int(np.searchsorted(rest, max(lo, hi), "right")) + 1)
        if b - a <= WINDOW_PIXELS:
            parts.append(np.arange(a, b))
        elif b > a:
            parts.append(envelope(flux, bad, a, b, WINDOW_BINS))
    return np.unique(np.concatenate(parts))


def display_copy(
    spec: Spectrum,
    windows: Sequence[tuple[float, float]] = (),
    max_pixels: int = DISPLAY_PIXELS,
) -> Spectrum:
    """`spec` as the views draw it: itself where it has at most `max_pixels` pixels, else
    the subset of its pixels the module's docstring describes (`windows`: rest-frame
    Angstrom ranges shown at full resolution)."""
    n = spec.wavelength.size
    big_arms = any(a.wavelength.size > max_pixels for a in spec.arms)
    if n <= max_pixels and not big_arms:
        return spec
    rest = spec.rest_wavelength()
    idx = kept_pixels(rest, spec.flux, spec.mask, windows, max_pixels) if n > max_pixels else None
    arms = tuple(_arm_copy(spec, a, windows, max_pixels) for a in spec.arms)
    meta = dataclasses.replace(
        spec.meta,
        extra={**spec.meta.extra, "display": {"pixels": n, "kept": n if idx is None else idx.size}},
    )
    if idx is None:
        return spec.replace(arms=arms, meta=meta)
    sky = None if spec.sky is None else Sky(np.asarray(spec.sky.flux)[idx], spec.sky.unit)
    return Spectrum(
        wavelength=spec.wavelength[idx],
        flux=spec.flux[idx],
        ivar=None if spec.ivar is None else spec.ivar[idx],
        mask=spec.mask[idx],
        frame=spec.frame,
        redshift=spec.redshift,
        flux_unit=spec.flux_unit,
        meta=meta,
        arms=arms,
        sky=sky,
    )


def _arm_copy(
    spec: Spectrum, arm: Arm, windows: Sequence[tuple[float, float]], max_pixels: int
) -> Arm:
    if arm.wavelength.size <= max_pixels:
        return arm
    wave = air_to_vacuum(arm.wavelength) if spec.frame == "air" else arm.wavelength
    idx = kept_pixels(wave / (1.0 + spec.redshift), arm.flux, arm.mask, windows, max_pixels)
    ivar = None if arm.ivar is None else arm.ivar[idx]
    return Arm(arm.name, arm.wavelength[idx], arm.flux[idx], ivar, arm.mask[idx])


def nbytes(spec: Spectrum) -> int:
    """The bytes a spectrum's arrays take (what a cache of spectra is bounded by)."""
    arrays = [spec.wavelength, spec.flux, spec.ivar, spec.mask]
    for a in spec.arms:
        arrays += [a.wavelength, a.flux, a.ivar, a.mask]
    if spec.sky is not None:
        arrays.append(np.asarray(spec.sky.flux))
    return int(sum(a.nbytes for a in arrays if a is not None)) + 2048  # + the record's own
