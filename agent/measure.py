"""Measurements an astronomer makes on a spectrum, as plain functions on arrays.

Everything here works in the rest-frame vacuum wavelength the zoom tool uses
(`Spectrum.rest_wavelength()`), ignores masked pixels, and says how much of a window
was actually covered so callers can lower their confidence instead of guessing.

Conventions:
- Equivalent width (EW) in Angstrom, positive for absorption, negative for emission.
- Line depth = 1 - (minimum of the continuum-normalised flux) for absorption; for
  emission the peak height above the continuum is reported as `peak`.
- Band depth = 1 - <flux in band> / <pseudo-continuum>; a band-head "jump" is the log
  ratio of the flux just outside a head to the flux just inside it, so a positive jump
  means the band absorbs on the side it degrades towards.
- Lines are searched within +-`tol_kms` of their rest wavelength, so radial velocities
  (or small redshift errors) of a few hundred km/s do not move a line out of its window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agent.spectrum import Spectrum
from agent.units import C_KMS

DEFAULT_TOL_KMS = 500.0


@dataclass(frozen=True)
class Arrays:
    """Rest-frame vacuum wavelength, flux and the good-pixel mask of one spectrum."""

    wave: np.ndarray
    flux: np.ndarray
    good: np.ndarray
    ivar: np.ndarray | None = None

    @property
    def lo(self) -> float:
        return float(self.wave[self.good][0])

    @property
    def hi(self) -> float:
        return float(self.wave[self.good][-1])

    def window(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        sel = (self.wave >= lo) & (self.wave <= hi) & self.good
        return self.wave[sel], self.flux[sel]


def arrays_of(spectrum: Spectrum) -> Arrays:
    good = spectrum.good & np.isfinite(spectrum.flux)
    return Arrays(
        wave=spectrum.rest_wavelength(),
        flux=np.where(good, spectrum.flux, np.nan),
        good=good,
        ivar=spectrum.ivar,
    )


def tolerance(wavelength: float, kms: float = DEFAULT_TOL_KMS) -> float:
    """The wavelength shift (Angstrom) a velocity of `kms` produces at `wavelength`.

    >>> round(tolerance(6564.6, 300.0), 2)
    6.57
    """
    return wavelength * kms / C_KMS


def coverage(arr: Arrays, lo: float, hi: float) -> float:
    """Fraction of [lo, hi] covered by good pixels (0 when the window is off the data).

    >>> w = np.linspace(4000, 5000, 1001)
    >>> a = Arrays(w, np.ones_like(w), w < 4500)
    >>> round(coverage(a, 4400, 4600), 2)
    0.5
    """
    if hi <= lo:
        return 0.0
    inside = (arr.wave >= lo) & (arr.wave <= hi)
    # count_nonzero: the counts `.sum()` gives, without its cast of the mask to integers
    n = int(np.count_nonzero(inside))
    if n == 0:
        return 0.0
    return float(np.count_nonzero(arr.good[inside])) / n * _span_fraction(arr.wave, lo, hi)


def _span_fraction(wave: np.ndarray, lo: float, hi: float) -> float:
    # Part of the window that lies within the wavelength grid at all.
    a, b = max(lo, float(wave[0])), min(hi, float(wave[-1]))
    return max(0.0, b - a) / (hi - lo)


# -- order statistics ----------------------------------------------------------------------


def median(a: np.ndarray) -> np.floating | float:
    """`np.median(a)` of a 1-D float64 array, bit for bit, at a fraction of its cost.

    The measurements take medians of thousands of windows of a few dozen pixels each, where
    `np.median`'s own overhead (about 10 us a call) is most of its time. This takes the same
    order statistics from one `np.partition` and combines them as `np.median` does: the
    middle one, or the sum of the middle two halved; NaN when the array holds a NaN (it
    partitions to the end). Anything else is left to `np.median`: empty arrays, other dtypes
    or shapes, and a zero median (np.median's mean turns -0.0 into +0.0).
    """
    n = a.size
    if n == 0 or a.ndim != 1 or a.dtype != np.float64:
        return np.median(a)
    k = n // 2
    if n % 2:
        part = np.partition(a, (k, -1))
        mid = part[k]
    else:
        part = np.partition(a, (k - 1, k, -1))
        mid = (part[k - 1] + part[k]) / 2
    if np.isnan(part[-1]):
        return part[-1]
    if mid == 0:
        return np.median(a)
    return mid


def percentile(a: np.ndarray, q: float) -> np.floating | float:
    """`np.percentile(a, q)` (its default linear method) of a 1-D float64 array, bit for bit,
    without its per-call overhead (about 25 us, most of a continuum window's cost).

    The same steps as numpy's: the virtual index (n - 1) * q / 100, the two order statistics
    either side of it (the last one at or past the end), and numpy's lerp between them
    (from the nearer end); NaN when the array holds a NaN. Anything else goes to numpy.
    """
    n = a.size
    if n == 0 or a.ndim != 1 or a.dtype != np.float64 or not 0 <= q <= 100:
        return np.percentile(a, q)
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        lo = hi = -1
    else:
        lo = math.floor(v)
        hi = lo + 1
    t = v - lo  # numpy's gamma, taken from the index it reads (-1 at the end)
    part = np.partition(a, sorted({0, lo % n, hi % n, n - 1}))
    if np.isnan(part[-1]):
        return part[-1]
    below, above = part[lo], part[hi]
    diff = above - below
    if t >= 0.5:
        return above - diff * (1 - t)
    return below + diff * t


# -- noise -----------------------------------------------------------------------------


def der_snr(flux: np.ndarray) -> float:
    """Signal-to-noise from the flux alone (DER_SNR, Stoehr et al. 2008).

    Robust to smooth continua and lines: it uses second differences over 2-pixel steps.

    >>> rng = np.random.default_rng(0)
    >>> f = 100 + rng.normal(0, 5, 20000)
    >>> 18 < der_snr(f) < 22
    True
    """
    f = np.asarray(flux, dtype=float)
    f = f[np.isfinite(f)]
    if f.size < 5:
        return float("nan")
    signal = median(f)
    noise = 0.6052697 * median(np.abs(2.0 * f[2:-2] - f[0:-4] - f[4:]))
    if noise <= 0:
        return float("inf")
    return float(signal / noise)


def snr_estimate(arr: Arrays, lo: float | None = None, hi: float | None = None) -> float:
    """Median SNR per pixel over [lo, hi] (whole spectrum by default).

    Uses the inverse variance when it is present and plausible, otherwise DER_SNR.
    """
    lo = arr.lo if lo is None else lo
    hi = arr.hi if hi is None else hi
    sel = (arr.wave >= lo) & (arr.wave <= hi) & arr.good
    if sel.sum() < 10:
        return float("nan")
    if arr.ivar is not None:
        iv = arr.ivar[sel]
        if np.all(iv > 0) and np.all(np.isfinite(iv)):
            snr = median(np.abs(arr.flux[sel]) * np.sqrt(iv))
            if np.isfinite(snr) and snr > 0:
                return float(snr)
    return der_snr(arr.flux[sel])


def spectrum_snr(spectrum: Spectrum) -> float:
    """The spectrum's SNR as the inspector measures and reports it (its `snr`
    measurement: `snr_estimate` over every good pixel); the app's header shows this one,
    not the file's own SNR keyword, so the two never disagree."""
    return snr_estimate(arrays_of(spectrum))


# -- continuum ---------------------------------------------------------------------------


def _robust_level(f: np.ndarray) -> float:
    # Upper-middle of the flux distribution: continuum windows of cool stars are dotted
    # with weak absorption lines, which pull a plain mean down.
    return float(percentile(f, 60))


def pseudo_continuum(
    arr: Arrays, windows: list[tuple[float, float]], min_pixels: int = 3
) -> tuple[float, float] | None:
    """A straight line (slope, intercept) through the level of each continuum window.

    Windows with fewer than `min_pixels` good pixels are skipped; with one usable window
    the continuum is flat; with none it is None.
    """
    xs, ys = [], []
    for lo, hi in windows:
        w, f = arr.window(lo, hi)
        if w.size >= min_pixels:
            xs.append(float(np.mean(w)))
            ys.append(_robust_level(f))
    if not xs:
        return None
    if len(xs) == 1:
        return 0.0, ys[0]
    slope, intercept = np.polyfit(xs, ys, 1)
    return float(slope), float(intercept)


def normalise(
    arr: Arrays, lo: float, hi: float, windows: list[tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Wavelength and continuum-normalised flux over [lo, hi], or None without continuum."""
    cont = pseudo_continuum(arr, windows)
    w, f = arr.window(lo, hi)
    if cont is None or w.size < 3:
        return None
    c = cont[0] * w + cont[1]
    if not np.all(c > 0):
        return None
    return w, f / c


def smooth(y: np.ndarray, n: int) -> np.ndarray:
    """Boxcar of `n` pixels (edges use the partial box)."""
    if n <= 1 or y.size < n:
        return y.copy()
    k = np.ones(n)
    num = np.convolve(y, k, mode="same")
    den = np.convolve(np.ones_like(y), k, mode="same")
    return num / den


# -- lines -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One line measured against its local pseudo-continuum."""

    name: str
    rest: float  # catalogue wavelength
    center: float  # where the extremum was found
    ew: float  # Angstrom, >0 absorption, <0 emission
    depth: float  # 1 - min(normalised flux); 0 if none
    peak: float  # max(normalised flux) - 1; 0 if none
    fwhm: float  # Angstrom, of the dominant sense (absorption or emission); nan if not found
    fwhm_limited: bool  # the half-level crossing ran into the window edge (FWHM is a lower limit)
    emission: bool  # net emission (EW < 0 and the peak beats the dip)
    coverage: float  # good-pixel fraction of the integration window
    noise: float  # rms of the normalised flux in the continuum windows

    @property
    def significant(self) -> bool:
        """The EW is at least ~3 sigma given the continuum noise and window width."""
        return abs(self.ew) > 3.0 * self.ew_error

    @property
    def ew_error(self) -> float:
        return max(self.noise, 1e-3) * math.sqrt(
            max(self.fwhm if self.fwhm > 0 else 5.0, 2.0) * 2.0
        )


def measure_line(
    arr: Arrays,
    name: str,
    rest: float,
    half_width: float,
    windows: list[tuple[float, float]],
    tol_kms: float = DEFAULT_TOL_KMS,
    smooth_px: int = 3,
) -> Line | None:
    """Depth, EW, FWHM and sense of the line at `rest` (searched within +-tol_kms).

    `half_width` sets the integration window [rest-hw, rest+hw]; `windows` are the
    continuum sidebands. Returns None when the line's window is not covered at all.
    """
    shift = tolerance(rest, tol_kms)
    lo, hi = rest - half_width - shift, rest + half_width + shift
    cov = coverage(arr, rest - half_width, rest + half_width)
    if cov < 0.3:
        return None
    usable = [w for w in windows if coverage(arr, *w) > 0.3]
    if not usable:
        # Sidebands off the data: fall back to the outer tenth of the window on each side.
        edge = 0.1 * (hi - lo)
        usable = [(lo - edge, lo + edge), (hi - edge, hi + edge)]
    norm = normalise(arr, lo, hi, usable)
    if norm is None:
        return None
    w, y = norm
    noise = _continuum_noise(arr, usable)
    ys = smooth(y, smooth_px)
    search = np.abs(w - rest) <= max(shift, 2.0 * median(np.diff(w)) if w.size > 1 else shift)
    if not search.any():
        search = np.ones_like(w, dtype=bool)
    i_min = int(np.flatnonzero(search)[np.argmin(ys[search])])
    i_max = int(np.flatnonzero(search)[np.argmax(ys[search])])
    depth = max(0.0, 1.0 - float(ys[i_min]))
    peak = max(0.0, float(ys[i_max]) - 1.0)
    # Integrate over the window re-centred on the found line so RV shifts don't clip a wing.
    center_guess = w[i_max] if peak > depth else w[i_min]
    sel = np.abs(w - center_guess) <= half_width
    if sel.sum() < 3:
        sel = np.ones_like(w, dtype=bool)
    ew = float(np.trapezoid(1.0 - y[sel], w[sel]))
    emission = ew < 0 and peak > depth
    if emission:
        fwhm, limited = _fwhm(w, ys - 1.0, i_max, peak)
        center = float(w[i_max])
    else:
        fwhm, limited = _fwhm(w, 1.0 - ys, i_min, depth)
        center = float(w[i_min])
    return Line(name, rest, center, ew, depth, peak, fwhm, limited, emission, cov, noise)


@dataclass(frozen=True)
class Profile:
    """A symmetric absorption profile fitted to a line: the width and depth noise cannot pinch."""

    depth: float  # of the fitted profile, against the fitted local continuum
    fwhm: float  # Angstrom
    center: float  # rest-frame vacuum Angstrom
    shape: str  # "lorentzian" (pressure-broadened wings) or "gaussian"
    limited: bool  # the width ran to the widest profile tried (a lower limit)
    sig: float  # the depth over its standard error from the fit's residuals
    error: float = float("nan")  # the depth's standard error (a limit on an absent line)

    @property
    def at_bound(self) -> bool:
        """The width ran to the narrowest or widest profile tried: no width was measured,
        only a limit (a blanketed continuum reads as a line as wide as the span)."""
        return self.limited or self.fwhm <= _FIT_WIDTHS[0]


_FIT_WIDTHS = np.geomspace(3.0, 240.0, 44)


def fit_profile(
    arr: Arrays,
    rest: float,
    windows: list[tuple[float, float]],
    tol_kms: float = DEFAULT_TOL_KMS,
) -> Profile | None:
    """Least-squares fit of one absorption line plus a straight continuum, over the span from
    the bluest to the reddest continuum window.

    The half-depth width read off noisy pixels is pinched by noise: a 60 Angstrom white-dwarf
    line can read 15 Angstrom at SNR 5. A profile fitted to every pixel of the line is not,
    and a free continuum offset and slope keep a misplaced continuum level from turning into
    a broad shallow line. Lorentzian and Gaussian profiles of 3-240 Angstrom FWHM, centred
    within +-tol_kms, are tried; the depth and the continuum of each are solved linearly.
    Returns None where fewer than half of the span's pixels (or under 12) are good.
    """
    lo, hi = min(a for a, _ in windows), max(b for _, b in windows)
    if coverage(arr, lo, hi) < 0.5:
        return None
    norm = normalise(arr, lo, hi, [w for w in windows if coverage(arr, *w) > 0.3])
    if norm is None:
        return None
    w, y = norm
    if w.size < 12:  # too few pixels to tell a line's width from its continuum
        return None
    # Bin to ~200 pixels (2-3 A over the 400-500 A span, enough for the 3 A narrowest
    # profile tried): averaging keeps every pixel's signal at a fraction of the cost.
    k = -(-w.size // 200)
    m = w.size // k * k
    w, x = w[:m].reshape(-1, k).mean(1), 1.0 - y[:m].reshape(-1, k).mean(1)
    shift = tolerance(rest, tol_kms)
    centers = np.linspace(rest - shift, rest + shift, 9)
    v = (w - rest) / (hi - lo)
    # The profiles are (widths x centres x pixels) arrays of half a megabyte. Each step is
    # written into one of three buffers rather than a new array: fresh pages for every
    # temporary cost several times the arithmetic. The ufuncs, operands and order are the
    # expressions' own (u2 = (dw / half-width)^2, 1 / (1 + u2), exp(-ln 2 u2), t * v, ...).
    u2 = (w[None, None, :] - centers[None, :, None]) / (0.5 * _FIT_WIDTHS[:, None, None])
    np.square(u2, out=u2)
    t, prod = np.empty_like(u2), np.empty_like(u2)
    n, sv, svv, sx, svx = w.size, v.sum(), (v * v).sum(), x.sum(), (v * x).sum()
    best: tuple[float, str, int, int, np.ndarray, np.ndarray] | None = None
    systems = []
    for shape in ("lorentzian", "gaussian"):
        if shape == "lorentzian":
            np.divide(1.0, np.add(1.0, u2, out=t), out=t)
        else:
            np.exp(np.multiply(-math.log(2.0), u2, out=t), out=t)
        st = t.sum(-1)
        svt = np.multiply(t, v, out=prod).sum(-1)
        stt = np.multiply(t, t, out=prod).sum(-1)
        stx = np.multiply(t, x, out=prod).sum(-1)
        a = np.empty(st.shape + (3, 3))
        a[..., 0, 0], a[..., 1, 1], a[..., 2, 2] = n, svv, stt
        a[..., 0, 1] = a[..., 1, 0] = sv
        a[..., 0, 2] = a[..., 2, 0] = st
        a[..., 1, 2] = a[..., 2, 1] = svt
        b = np.stack([np.full(st.shape, sx), np.full(st.shape, svx), stx], -1)
        try:
            p = np.linalg.solve(a, b[..., None])[..., 0]
        except np.linalg.LinAlgError:
            # A singular system (a profile flat over the span) is passed over, not raised.
            ok = np.abs(np.linalg.det(a)) > 1e-12
            p = np.linalg.solve(np.where(ok[..., None, None], a, np.eye(3)), b[..., None])[..., 0]
            p[~ok] = np.nan
        systems.append((a, b, p))
        # Residual sum of squares of a linear fit: sum(x^2) - p . b.
        rss = np.where(p[..., 2] > 0, (x * x).sum() - (p * b).sum(-1), np.inf)
        i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)
        if np.isfinite(rss[i, j]) and (best is None or rss[i, j] < best[0]):
            best = (float(rss[i, j]), shape, int(i), int(j), p[i, j], a[i, j])
    if best is None:
        # No absorption fits; the error of a typical (40 A Lorentzian) depth still says how
        # deep a line could hide in this noise, which an absence needs.
        i, j = int(np.argmin(np.abs(_FIT_WIDTHS - 40.0))), len(centers) // 2
        a0, b0, p0 = (q[i, j] for q in systems[0])
        err = float("nan")
        if np.all(np.isfinite(p0)) and 1.0 - p0[0] > 0:
            rss0 = max(float((x * x).sum() - p0 @ b0), 0.0)
            err = math.sqrt(rss0 / max(w.size - 3, 1) * float(np.linalg.inv(a0)[2, 2]))
            err /= 1.0 - p0[0]
        return Profile(0.0, float("nan"), rest, "none", False, 0.0, err)
    rss_min, shape, i, j, (c0, c1, d), a_best = best
    sigma = math.sqrt(max(rss_min, 0.0) / max(w.size - 3, 1)) * math.sqrt(
        float(np.linalg.inv(a_best)[2, 2])
    )
    # The depth against the fitted continuum, not the first guess at it.
    level = 1.0 - c0 - c1 * (centers[j] - rest) / (hi - lo)
    depth = float(d / level) if level > 0 else float("nan")
    return Profile(
        depth,
        float(_FIT_WIDTHS[i]),
        float(centers[j]),
        shape,
        i == len(_FIT_WIDTHS) - 1,
        float(d / sigma) if sigma > 0 else float("inf"),
        float(sigma / level) if level > 0 else float("nan"),
    )


def _continuum_noise(arr: Arrays, windows: list[tuple[float, float]]) -> float:
    res = []
    for lo, hi in windows:
        w, f = arr.window(lo, hi)
        if f.size >= 5:
            med = median(f)
            if med > 0:
                res.append(f / med)
    if not res:
        return float("nan")
    y = np.concatenate(res)
    # MAD of pixel-to-pixel differences: insensitive to a residual slope.
    return float(1.4826 * median(np.abs(np.diff(y) - median(np.diff(y)))) / math.sqrt(2))


def _fwhm(w: np.ndarray, prof: np.ndarray, i0: int, height: float) -> tuple[float, bool]:
    """Full width at half of `height` of a positive profile peaking at index i0."""
    if height <= 0 or not np.isfinite(height):
        return float("nan"), False
    half = height / 2.0
    limited = False
    left = i0
    while left > 0 and prof[left] > half:
        left -= 1
    if prof[left] > half:
        limited = True
        xl = w[0]
    else:
        xl = _cross(w[left], w[left + 1], prof[left], prof[left + 1], half)
    right = i0
    n = len(prof)
    while right < n - 1 and prof[right] > half:
        right += 1
    if prof[right] > half:
        limited = True
        xr = w[-1]
    else:
        xr = _cross(w[right - 1], w[right], prof[right - 1], prof[right], half)
    return float(xr - xl), limited


def _cross(x0: float, x1: float, y0: float, y1: float, level: float) -> float:
    if y1 == y0:
        return 0.5 * (x0 + x1)
    return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0))


# -- bands -------------------------------------------------------------------------------


def band_depth(
    arr: Arrays, band: tuple[float, float], windows: list[tuple[float, float]]
) -> float | None:
    """1 - <flux in band> / pseudo-continuum at the band (None if not covered).

    >>> w = np.linspace(7000, 7200, 401)
    >>> f = np.where((w >= 7126) & (w <= 7135), 0.6, 1.0)
    >>> round(band_depth(Arrays(w, f, np.ones_like(w, bool)), (7126, 7135), [(7042, 7046)]), 2)
    0.4
    """
    if coverage(arr, *band) < 0.5:
        return None
    cont = pseudo_continuum(arr, [w for w in windows if coverage(arr, *w) > 0.3], min_pixels=2)
    if cont is None:
        return None
    w, f = arr.window(*band)
    c = cont[0] * w + cont[1]
    if not np.all(c > 0):
        return None
    return float(1.0 - np.mean(f) / np.mean(c))


def flux_ratio(arr: Arrays, num: tuple[float, float], den: tuple[float, float]) -> float | None:
    """<flux in num> / <flux in den> (an index in the style of Reid et al. 1995)."""
    if coverage(arr, *num) < 0.5 or coverage(arr, *den) < 0.5:
        return None
    _, a = arr.window(*num)
    _, b = arr.window(*den)
    mb = float(np.mean(b))
    if mb <= 0:
        return None
    return float(np.mean(a) / mb)


def flux_sigma(arr: Arrays, lo: float, hi: float, reach: float = 50.0) -> float:
    """A pixel's flux error over [lo, hi]: from the inverse variance where it is present and
    plausible, else the continuum over DER_SNR read out to `reach` Å either side (an index's
    band is too narrow for DER_SNR's second differences alone)."""
    sel = (arr.wave >= lo) & (arr.wave <= hi) & arr.good
    if arr.ivar is not None and sel.sum() >= 2:
        iv = arr.ivar[sel]
        if np.all(iv > 0) and np.all(np.isfinite(iv)):
            return float(median(1.0 / np.sqrt(iv)))
    _, f = arr.window(lo - reach, hi + reach)
    snr = der_snr(f)
    return float(median(f)) / snr if np.isfinite(snr) and snr > 0 else float("nan")


def _mean_error(arr: Arrays, lo: float, hi: float, robust: bool = False) -> float:
    """The relative error of the flux averaged over [lo, hi] (of its median if `robust`)."""
    _, f = arr.window(lo, hi)
    level = float(median(f)) if robust else float(np.mean(f))
    if f.size == 0 or level <= 0:
        return float("nan")
    # The median of n Gaussian values scatters sqrt(pi/2) times as much as their mean.
    k = math.sqrt(math.pi / 2) if robust else 1.0
    return k * flux_sigma(arr, lo, hi) / math.sqrt(f.size) / level


def flux_ratio_error(
    arr: Arrays, num: tuple[float, float], den: tuple[float, float]
) -> float | None:
    """The standard error of `flux_ratio` from the flux errors of its two bands.

    >>> w = np.arange(7000.0, 7200.0, 1.0)
    >>> a = Arrays(w, np.ones_like(w), np.ones_like(w, bool), np.full_like(w, 100.0))
    >>> round(flux_ratio_error(a, (7126, 7135), (7042, 7046)), 3)  # 0.1/sqrt(10), 0.1/sqrt(5)
    0.055
    """
    r = flux_ratio(arr, num, den)
    if r is None:
        return None
    e = math.hypot(_mean_error(arr, *num), _mean_error(arr, *den))
    return float(r * e) if math.isfinite(e) else None


def head_jump_error(
    arr: Arrays, head: float, degrades: str, width: float = 25.0, gap: float = 3.0
) -> float | None:
    """The standard error of `head_jump` (a log ratio of two medians) from the flux errors."""
    if head_jump(arr, head, degrades, width, gap) is None:
        return None
    e = math.hypot(
        _mean_error(arr, head - gap - width, head - gap, robust=True),
        _mean_error(arr, head + gap, head + gap + width, robust=True),
    )
    return float(e) if math.isfinite(e) else None


def head_jump(
    arr: Arrays, head: float, degrades: str, width: float = 25.0, gap: float = 3.0
) -> float | None:
    """Log ratio of the flux outside a band head to the flux inside it.

    `degrades` is "blue" (C2 Swan: the band lies blueward of the head) or "red" (TiO, ZrO:
    the band lies redward). A strong band gives a clearly positive jump; a head that is
    absent gives ~0; an opposite-sense band at the same place gives a negative value.

    >>> w = np.linspace(5000, 5300, 601)
    >>> f = np.where(w < 5165, 0.5, 1.0)
    >>> round(head_jump(Arrays(w, f, np.ones_like(w, bool)), 5165, "blue"), 2)
    0.69
    """
    blue = (head - gap - width, head - gap)
    red = (head + gap, head + gap + width)
    if coverage(arr, *blue) < 0.5 or coverage(arr, *red) < 0.5:
        return None
    _, fb = arr.window(*blue)
    _, fr = arr.window(*red)
    mb, mr = float(median(fb)), float(median(fr))
    if mb <= 0 or mr <= 0:
        return None
    ratio = mr / mb if degrades == "blue" else mb / mr
    return float(math.log(ratio))


def continuum_slope(arr: Arrays) -> dict[str, float]:
    """Broad colours of the continuum: log10 flux ratios of line-poor windows.

    `blue_red` = log10 <f(4500-4700)> / <f(6900-7000)>... positive for hot (blue) objects;
    `uv_blue` = log10 <f(3950-4050)> / <f(4500-4700)>; missing windows give nan.
    """
    wins = {
        "u": (3800.0, 3900.0),
        "b": (4500.0, 4700.0),
        "v": (5400.0, 5600.0),
        "r": (6000.0, 6200.0),
        "i": (7400.0, 7550.0),
        "z": (8700.0, 8800.0),
    }
    lv: dict[str, float] = {}
    for k, (lo, hi) in wins.items():
        _, f = arr.window(lo, hi)
        if coverage(arr, lo, hi) > 0.5 and f.size >= 3:
            m = float(median(f))
            lv[k] = m if m > 0 else float("nan")
        else:
            lv[k] = float("nan")

    def lr(a: str, b: str) -> float:
        if not (np.isfinite(lv[a]) and np.isfinite(lv[b])) or lv[a] <= 0 or lv[b] <= 0:
            return float("nan")
        return float(math.log10(lv[a] / lv[b]))

    return {
        "b_r": lr("b", "r"),
        "b_i": lr("b", "i"),
        "u_b": lr("u", "b"),
        "v_i": lr("v", "i"),
        "r_z": lr("r", "z"),
    }
