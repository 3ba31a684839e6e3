"""Cross-correlation of a spectrum against the built-in templates (Tonry & Davis 1979).

Spectrum and templates are put on one log-wavelength grid, where a redshift is a shift by a
constant number of pixels, and their smooth continua are divided out so the correlation
reads lines and bands, not the slope of the continuum (a hot star and a blue quasar share
that). The correlation at each shift is normalised over the part of the template the
spectrum covers, so a peak height is a correlation coefficient (1: the same shape).

`correlate(arr)` returns, for every template, the best shift in its allowed redshift range
(stars within +-0.002 of rest, galaxies up to z = 1, the quasar up to z = 3) with the
peak height and the Tonry & Davis r: the peak height over the noise of the correlation
function, estimated from its antisymmetric part about the peak. `agent.redshift` turns that
into a `Redshift`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from agent.measure import Arrays, median
from agent.templates import builtin_templates

DLN = 4.6e-4  # log-wavelength step: 138 km/s, ~2 LAMOST pixels; sub-pixel peaks fix z to ~20 km/s
LN0 = math.log(900.0)  # the templates' grid starts at Lyman alpha's blue side
K = int(math.log(11000.0 / 900.0) / DLN)  # pixels of the common grid
_BLOCK = 32  # continuum: medians of 32-pixel blocks (4400 km/s) ...
_RUN = 5  # ... then a running median over 5 blocks (22000 km/s, wider than a quasar line)
_TAPER = 0.05  # cosine taper over this fraction of the spectrum at each end
_CLIP = (-1.0, 2.0)  # one sky residual or cosmic ray must not make a peak on its own
_NOISE_LAGS = 400  # lags either side of a peak over which the correlation's noise is read
MIN_PIXELS = 300  # fewer good grid pixels than this: no correlation
# The spectrum is read from here up: the stellar templates model no ultraviolet, so there
# a galaxy or the quasar would explain a library star's UV structure better than they do.
WAVE_MIN = 3000.0
MIN_REL_NOISE = 0.01  # weights stop at SNR 100 per pixel: library spectra are noiseless
PARTS = 3  # a peak is checked in this many stretches of the spectrum ...
PART_SHARE = 0.15  # ... each of which carries this share of it, to count

# Redshift range searched per template kind.
Z_RANGE = {"star": (-0.002, 0.002), "galaxy": (-0.005, 1.0), "qso": (-0.005, 3.0)}

_N = 1 << int(math.ceil(math.log2(K + math.log(1 + Z_RANGE["qso"][1]) / DLN + 64)))


@dataclass(frozen=True)
class Peak:
    """The best match of one template: its redshift, peak height and Tonry & Davis r."""

    template: str
    kind: str  # the template's kind: "star", "galaxy" or "qso"
    z: float
    height: float  # normalised correlation at the peak, -1..1
    r: float  # Tonry & Davis r = height / (sqrt(2) * rms of the antisymmetric part)
    parts: int  # stretches of the spectrum (of PARTS) that carry >= PART_SHARE of the peak


def _shift(z: float) -> float:
    return math.log1p(z) / DLN


def _blocks(n: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, n, max(1, n // _BLOCK) + 1).astype(int)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _continuum(f: np.ndarray, good: np.ndarray) -> np.ndarray:
    """A smooth continuum through f: block medians, a running median over them, interpolated."""
    n = f.size
    centres, meds = [], []
    for a, b in _blocks(n):
        sel = good[a:b]
        if sel.sum() >= _BLOCK // 4:
            centres.append(0.5 * (a + b - 1))
            meds.append(median(f[a:b][sel]))
    if len(meds) < 2:
        return np.zeros(n)
    meds_a = np.asarray(meds)
    half = _RUN // 2
    run = np.array([median(meds_a[max(0, i - half) : i + half + 1]) for i in range(meds_a.size)])
    return np.interp(np.arange(n), centres, run)


def _divided(f: np.ndarray, cont: np.ndarray, good: np.ndarray) -> np.ndarray:
    """f / continuum - 1 where the continuum is positive, 0 elsewhere, clipped."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(good & (cont > 0), f / cont - 1.0, 0.0)
    return np.clip(np.nan_to_num(out), *_CLIP)


def _noise(f: np.ndarray, good: np.ndarray) -> np.ndarray:
    """Per-pixel noise of f from pixel-to-pixel differences in blocks (lines and bands are
    smooth on this grid, so differences see the noise)."""
    n = f.size
    d = np.abs(np.diff(f, prepend=f[0]))
    ok = good & np.roll(good, 1)
    centres, sig = [], []
    for a, b in _blocks(n):
        x = d[a:b][ok[a:b]]
        if x.size >= _BLOCK // 4:
            centres.append(0.5 * (a + b - 1))
            sig.append(1.4826 * median(x) / math.sqrt(2))
    if not sig:
        return np.full(n, np.nan)
    return np.interp(np.arange(n), centres, sig)


@lru_cache(maxsize=1)
def _prepared() -> tuple[tuple[tuple[str, str], ...], np.ndarray, np.ndarray, np.ndarray]:
    """Names and kinds, the FFTs of t and t**2 and t itself for every built-in template,
    continuum-divided on the common grid (once per process)."""
    grid = np.exp(LN0 + DLN * np.arange(K))
    names, ts = [], []
    for t in builtin_templates():
        ok = np.isfinite(t.flux)
        f = np.interp(grid, t.wavelength[ok], t.flux[ok])
        good = np.ones(K, bool)
        ts.append(_divided(f, _continuum(f, good), good))
        names.append((t.name, t.kind))
    tt = np.zeros((len(ts), _N))
    tt[:, :K] = ts
    return tuple(names), np.conj(np.fft.rfft(tt)), np.conj(np.fft.rfft(tt**2)), tt[:, :K]


def _on_grid(arr: Arrays) -> tuple[int, np.ndarray, np.ndarray] | None:
    """First grid index, continuum-divided tapered flux and window weights of the spectrum."""
    good = arr.good & np.isfinite(arr.flux)
    w, f = arr.wave[good], arr.flux[good]
    if w.size < MIN_PIXELS // 2:
        return None
    # Stay clear of the grid's ends so the stellar shifts never read past the templates.
    lo = max(math.log(max(w[0], WAVE_MIN)), LN0 + 16 * DLN)
    hi = min(math.log(w[-1]), LN0 + (K - 16) * DLN)
    k0, k1 = int(math.ceil((lo - LN0) / DLN)), int((hi - LN0) / DLN)
    if k1 - k0 < MIN_PIXELS:
        return None
    lam = np.exp(LN0 + DLN * np.arange(k0, k1 + 1))
    # Average the native pixels that fall in each grid pixel (a grid pixel holds ~2 LAMOST
    # or SDSS pixels: averaging halves the noise power where interpolation would keep it).
    idx = np.rint((np.log(w) - LN0) / DLN).astype(int) - k0
    inb = (idx >= 0) & (idx <= k1 - k0)
    cnt = np.bincount(idx[inb], minlength=k1 - k0 + 1)
    tot = np.bincount(idx[inb], weights=f[inb], minlength=k1 - k0 + 1)
    flux = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.interp(lam, w, f))
    # A grid pixel is good when the native pixels either side of it are: gaps stay gaps.
    ok = np.interp(lam, arr.wave, good.astype(float)) > 0.99
    if ok.sum() < MIN_PIXELS:
        return None
    cont = _continuum(flux, ok)
    sigma = _noise(flux, ok)
    # Where the continuum is lost in the noise, ratios to it are meaningless.
    ok &= np.isfinite(sigma) & (cont > 2.0 * sigma)
    if ok.sum() < MIN_PIXELS:
        return None
    g = _divided(flux, cont, ok)
    n = g.size
    m = max(2, int(_TAPER * n))
    taper = np.ones(n)
    ramp = 0.5 * (1 - np.cos(np.pi * np.arange(m) / m))
    taper[:m], taper[-m:] = ramp, ramp[::-1]
    # Inverse-variance weights (noise of f / continuum): the faint blue end of a red galaxy
    # must not drown the lines its bright part shows (a matched filter, not a plain sum).
    rel = np.where(ok, sigma / np.where(cont > 0, cont, 1.0), 1.0)
    rel = np.maximum(rel, max(0.2 * float(np.median(rel[ok])), MIN_REL_NOISE))  # none takes all
    weight = taper**2 * ok / rel**2
    # A flux step or a bad stretch (a joint, a missed sky line) must not outweigh every line:
    # clip at many times the typical deviation, which a quasar's broad lines stay within.
    dev = g[ok] - np.median(g[ok])
    cap = max(6.0 * 1.4826 * float(np.median(np.abs(dev))), 0.5)
    g = np.clip(g, -cap, cap)
    g = g - float(np.sum(weight * g) / max(np.sum(weight), 1e-30))  # zero weighted mean
    return k0, g, weight


def correlate(arr: Arrays) -> list[Peak]:
    """The best peak of every built-in template within its redshift range, best first.

    Empty when the spectrum has too few good pixels or no structure at all."""
    got = _on_grid(arr)
    if got is None:
        return []
    k0, g, wt = got
    gg = float(np.dot(wt * g, g))
    if gg <= 0:
        return []
    names, tf, t2f, tgrid = _prepared()
    buf = np.zeros(_N)
    buf[k0 : k0 + g.size] = wt * g
    num = np.fft.irfft(np.fft.rfft(buf)[None, :] * tf, _N)
    buf[:] = 0.0
    buf[k0 : k0 + wt.size] = wt
    den = np.fft.irfft(np.fft.rfft(buf)[None, :] * t2f, _N)
    # num[:, s] = sum_k g[k] t[k - s]: the template shifted by s pixels, i.e. z = e^(s DLN) - 1.
    out = []
    for i, (name, kind) in enumerate(names):
        zlo, zhi = Z_RANGE.get(kind, Z_RANGE["star"])
        s_lo, s_hi = int(math.floor(_shift(zlo))), int(math.ceil(_shift(zhi)))
        lags = np.arange(s_lo - _NOISE_LAGS, s_hi + _NOISE_LAGS + 1)
        at = lags % _N  # negative shifts wrap to the end of the FFT's output
        d = den[i, at]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = num[i, at] / np.sqrt(gg * d)
        c = np.where(np.isfinite(c) & (d > 1e-9 * gg), c, 0.0)
        inside = slice(_NOISE_LAGS, _NOISE_LAGS + s_hi - s_lo + 1)
        j = _NOISE_LAGS + int(np.argmax(c[inside]))
        h, dj = _vertex(c, j)
        parts = _parts(wt * g, tgrid[i], k0 - int(lags[j]))
        out.append(Peak(name, kind, math.expm1((lags[j] + dj) * DLN), h, _td_r(c, j, h), parts))
    out.sort(key=lambda p: -p.height)
    return out


def _parts(wg: np.ndarray, t: np.ndarray, start: int) -> int:
    """How many of PARTS equal stretches of the spectrum each carry PART_SHARE of the
    correlation with t placed from grid index `start`: one joint, band or line that happens
    to line up is not a redshift."""
    idx = np.arange(start, start + wg.size)
    inside = (idx >= 0) & (idx < t.size)
    prod = np.where(inside, wg * t[np.clip(idx, 0, t.size - 1)], 0.0)
    total = float(prod.sum())
    if total <= 0:
        return 0
    return sum(float(p.sum()) >= PART_SHARE * total for p in np.array_split(prod, PARTS))


def _vertex(c: np.ndarray, j: int) -> tuple[float, float]:
    """Height and sub-pixel offset of the parabola through the peak and its neighbours."""
    if 0 < j < c.size - 1:
        y0, y1, y2 = c[j - 1], c[j], c[j + 1]
        d = y0 - 2 * y1 + y2
        if d < 0:
            dj = float(np.clip(0.5 * (y0 - y2) / d, -0.5, 0.5))
            return float(y1 - 0.25 * (y0 - y2) * dj), float(dj)
    return float(c[j]), 0.0


def _td_r(c: np.ndarray, j: int, h: float) -> float:
    """Tonry & Davis r: the peak height over sqrt(2) x the rms of the correlation's part
    antisymmetric about the peak (what a second, unrelated shape would add)."""
    n = min(j, c.size - 1 - j, _NOISE_LAGS)
    if n < 10 or h <= 0:
        return 0.0
    lag = np.arange(1, n + 1)
    anti = 0.5 * (c[j + lag] - c[j - lag])
    sigma = float(np.sqrt(np.mean(anti**2)))
    return float(h / (math.sqrt(2) * sigma)) if sigma > 0 else 0.0
