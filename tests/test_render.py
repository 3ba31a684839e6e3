"""Both renderers: size, content, gaps, figure sizes, speed ordering and figure reuse."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from agent import render as R

BLUE_FAST = np.array(R._BLUE)


def spectrum(n: int = 3909, seed: int = 0):
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(n))
    flux = 1000 * (wave / 6000) ** -1.0 + rng.normal(0, 10, n)
    return wave, flux


def blue_columns(img: Image.Image) -> np.ndarray:
    """Columns of the image that hold any spectrum-blue pixel."""
    a = np.asarray(img.convert("RGB")).astype(int)
    is_blue = (a[..., 2] > 150) & (a[..., 0] < 120) & (a[..., 1] < 140)
    return is_blue.any(axis=0)


def test_fast_default_size_and_content():
    wave, flux = spectrum()
    img = R.render(wave, flux)
    assert img.size == (448, 448) and img.mode == "RGB"
    cols = blue_columns(img)
    assert cols.sum() > 300  # the line spans the plot
    a = np.asarray(img)
    assert (a < 128).any()  # axes and labels drawn in dark ink
    assert R.render(wave, flux, size=(320, 240)).size == (320, 240)


def test_fast_keeps_one_pixel_line_and_draws_no_masked_pixels():
    wave, flux = spectrum()
    flux = np.full_like(flux, 100.0)
    flux[2000] = 5000.0  # a one-pixel emission line among 3909 pixels in 448 px
    img = np.asarray(R.render(wave, flux)).astype(int)
    blue = (img[..., 2] > 150) & (img[..., 0] < 120)
    rows = np.flatnonzero(blue.any(axis=1))
    assert rows.max() - rows.min() > 200  # the spike reaches far above the continuum

    # the same spike masked: no blue above the flat continuum
    mask = np.zeros(flux.size, bool)
    mask[2000] = True
    img2 = np.asarray(R.render(wave, flux, mask=mask)).astype(int)
    blue2 = (img2[..., 2] > 150) & (img2[..., 0] < 120)
    rows2 = np.flatnonzero(blue2.any(axis=1))
    assert rows2.max() - rows2.min() <= 2


def test_masked_region_is_a_gap_in_fast():
    wave, flux = spectrum()
    gap = (wave > 6000) & (wave < 6600)
    flux_nan = flux.copy()
    flux_nan[gap] = np.nan
    full = blue_columns(R.render(wave, flux))
    holed = blue_columns(R.render(wave, flux_nan))
    assert holed.sum() < full.sum() - 20
    # the gap is one run of blank columns inside the plotted span
    span = np.flatnonzero(holed)
    inner = ~holed[span.min() : span.max()]
    assert inner.sum() > 20
    masked = R.render(wave, flux, mask=gap)
    assert np.array_equal(blue_columns(masked), holed)


def test_speco3_drops_masked_points_as_the_published_tool_drops_invalid_ones():
    # the published plot filters non-finite points out, so the line joins their neighbours
    wave, flux = spectrum()
    gap = (wave > 6000) & (wave < 6600)
    flux_nan = flux.copy()
    flux_nan[gap] = np.nan
    holed = np.asarray(R.render(wave, flux_nan, renderer="speco3"))
    masked = np.asarray(R.render(wave, flux, mask=gap, renderer="speco3"))
    dropped = np.asarray(R.render(wave[~gap], flux[~gap], renderer="speco3"))
    assert np.array_equal(holed, masked) and np.array_equal(holed, dropped)
    full = np.asarray(R.render(wave, flux, renderer="speco3"))
    assert not np.array_equal(full, holed)


def test_speco3_figure_size_by_data_span():
    assert R.speco3_figsize(30, 100) == (6.0, 4.0)
    assert R.speco3_figsize(120, 100) == (7.0, 4.5)
    assert R.speco3_figsize(500, 100) == (8.0, 5.0)
    assert R.speco3_figsize(2000, 1000) == (9.0, 5.5)
    assert R.speco3_figsize(5000, 3000) == (9.0, 5.5)  # a zoom never gets the overview size
    assert R.speco3_figsize(5000, 3000, overview=True) == (10.0, 6.0)
    assert R.speco3_figsize(2000, 3000, overview=True) == (8.0, 5.0)
    assert R.speco3_figsize(30, 40) == (6.0 * 0.95, 4.0)
    assert R.speco3_figsize(5000, 20000, overview=True) == (10.0 * 1.05, 6.0)
    wave, flux = spectrum()
    sizes = {}
    for name, window in (("narrow", (6540, 6580)), ("mid", (6400, 6900)), ("full", None)):
        sizes[name] = R.render(wave, flux, renderer="speco3", window=window).size
    # 80 dpi with a tight box: a bit under figsize * 80 in each direction
    assert sizes["narrow"][0] < sizes["mid"][0] < sizes["full"][0]
    assert 6 * 80 * 0.8 < sizes["narrow"][0] <= 6 * 80 + 10
    assert 10 * 80 * 0.8 < sizes["full"][0] <= 10 * 80 + 10


def test_speco3_reused_figure_gives_identical_pixels():
    wave, flux = spectrum()
    R.render(wave, flux * 3, renderer="speco3", window=(4800, 4920), title="other")  # dirty cache
    R.render(wave, -flux, renderer="speco3", window=(4790, 4930), markers=True)
    reused = R.render(wave, flux, renderer="speco3", window=(4800, 4920))
    sel = (wave >= 4800) & (wave <= 4920)
    fresh = R._render_speco3(wave[sel], flux[sel], 4800, 4920, title=None, markers=[], reuse=False)
    assert np.array_equal(np.asarray(reused), np.asarray(fresh))


def test_stats_box_goes_to_the_emptiest_quadrant():
    x = np.linspace(0, 1, 100)
    rising = x  # data fill lower left and upper right
    assert R.emptiest_corner(x, rising) == "upper left"
    falling = 1 - x
    assert R.emptiest_corner(x, falling) == "upper right"
    dip = np.r_[np.ones(50), np.zeros(50)]  # high on the left, low on the right
    assert R.emptiest_corner(x, dip) == "upper right"
    flat = np.full_like(x, 0.5)  # every point sits on the y midline: a tie
    assert R.emptiest_corner(x, flat) == "upper left"


def test_markers_are_optional_and_drawn():
    wave, flux = spectrum()
    plain = np.asarray(R.render(wave, flux, window=(6400, 6700)))
    marked = np.asarray(R.render(wave, flux, window=(6400, 6700), markers=True))
    assert not np.array_equal(plain, marked)
    red = (marked[..., 0] > 150) & (marked[..., 1] < 80) & (marked[..., 2] < 80)
    assert red.sum() > 20  # H-alpha / [N II] markers
    assert R.resolve_markers(None, 6400, 6700) == []
    assert {f.key for f in R.resolve_markers("cv", 6400, 6700)} >= {"H-alpha"}
    with pytest.raises(ValueError, match="unknown task"):
        R.resolve_markers("nope", 6400, 6700)


def test_bad_input_raises_clear_errors():
    wave, flux = spectrum(100)
    with pytest.raises(ValueError, match="renderer"):
        R.render(wave, flux, renderer="plotly")
    with pytest.raises(ValueError, match="equal length"):
        R.render(wave, flux[:-1])
    with pytest.raises(ValueError, match="window"):
        R.render(wave, flux, window=(5000, 4000))
    # all-NaN flux renders an empty plot rather than failing
    img = R.render(wave, np.full(100, np.nan))
    assert blue_columns(img).sum() == 0


def test_tiny_and_huge_flux_get_readable_ticks():
    ticks, step = R.nice_ticks(0.0, 1e-16)
    labels, note = R._tick_labels(ticks, step)
    assert note.startswith("×1e-")
    assert len(set(labels)) == len(labels)
    ticks, step = R.nice_ticks(3700, 9100)
    assert step in (1000.0, 500.0, 2000.0)


def test_fast_is_much_faster_than_speco3():
    wave, flux = spectrum()
    R.render(wave, flux, renderer="speco3")
    R.render(wave, flux)

    def per_image(renderer, n):
        t0 = time.perf_counter()
        for _ in range(n):
            R.render(wave, flux, renderer=renderer, window=(4000, 8000))
        return (time.perf_counter() - t0) / n

    assert per_image("speco3", 3) > 8 * per_image("fast", 10)


def test_markers_sit_at_the_redshift_given_tellurics_do_not_move():
    at_rest = R.resolve_markers(True, 2700, 2900)
    assert "Mg II 2800" in {f.key for f in at_rest}
    shifted = {f.key: f for f in R.resolve_markers(True, 6900, 7100, 1.5)}
    assert shifted["Mg II 2800"].wavelength == pytest.approx(2799.12 * 2.5)
    assert "Mg II 2800" not in {f.key for f in R.resolve_markers(True, 6900, 7100)}
    a_band = {f.key for f in R.resolve_markers(True, 7550, 7700) if f.kind == "telluric"}
    assert a_band and a_band == {
        f.key for f in R.resolve_markers(True, 7550, 7700, 1.5) if f.kind == "telluric"
    }
    with pytest.raises(ValueError, match="redshift"):
        R.resolve_markers(True, 6900, 7100, -1.0)


def test_cached_text_draws_the_pixels_pil_draws():
    from PIL import Image, ImageDraw

    from agent.render import _font, _text

    for text, anchor in (
        ("4861", "mt"),
        ("0.5", "rm"),
        ("Wavelength (Å)", "md"),
        ("×1e-17", "lb"),
        ("spec-55862-B6212_sp06-005.fits [3]…", "mt"),  # a global view's title
    ):
        a = Image.new("RGB", (140, 40), "white")
        ImageDraw.Draw(a).text((70, 20), text, font=_font(12), fill=(40, 40, 40), anchor=anchor)
        b = Image.new("RGB", (140, 40), "white")
        _text(b, (70, 20), text, 12, (40, 40, 40), anchor)
        assert a.tobytes() == b.tobytes(), text
