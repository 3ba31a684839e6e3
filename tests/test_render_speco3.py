"""The `speco3` renderer against the published Spec-o3 tool's plotting rule.

The reference properties below are derived from that rule (figure size by data span at
80 dpi, `tight_layout` then a tight save, fixed x tick steps, matplotlib's default 5%
margins, the stats box text and quadrant choice, a "Spectrum" title on zooms), so the
test needs nothing from the published repository.
"""

from __future__ import annotations

import numpy as np
import pytest

from agent import render as R

DPI = 80
# tight_layout leaves 1.08 x the 10 pt tick label size round the content; the tight save
# crops to the content plus 0.1 in. Each dimension loses twice the difference.
SHRINK = 2 * (1.08 * 10 / 72 * DPI - 0.1 * DPI)


def lamost_like(seed: int = 0, slope: float = 1.0):
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909))
    flux = 1000 * (wave / 6000) ** slope + rng.normal(0, 10, wave.size)
    return wave, flux


def figure_for(x: np.ndarray, *, overview: bool = False) -> R._Speco3Figure:
    """The cached figure the last plot of these points was drawn on."""
    return R._FIGS[R.speco3_figsize(float(x.max() - x.min()), x.size, overview=overview)]


def in_window(wave, flux, lo, hi):
    sel = (wave >= lo) & (wave <= hi)
    return wave[sel], flux[sel]


@pytest.mark.parametrize(
    ("window", "figsize"),
    [
        ((6555, 6580), (6.0 * 0.95, 4.0)),  # under 50 points: 5% narrower
        ((4800, 4960), (7.0, 4.5)),  # 160 Å: 552x352 in the published tool
        ((8450, 8700), (8.0, 5.0)),
        ((5000, 5400), (8.0, 5.0)),
        ((4000, 8000), (9.0, 5.5)),
        ((3000, 12000), (9.0, 5.5)),  # a zoom over everything still gets the zoom size
    ],
)
def test_zoom_pixel_size_follows_the_figure_size_rule(window, figsize):
    wave, flux = lamost_like()
    x, _ = in_window(wave, flux, *window)
    assert R.speco3_figsize(float(x.max() - x.min()), x.size) == figsize
    img = R.render(wave, flux, renderer="speco3", window=window)
    expected = (figsize[0] * DPI - SHRINK, figsize[1] * DPI - SHRINK)
    assert abs(img.size[0] - expected[0]) <= 1 and abs(img.size[1] - expected[1]) <= 1, img.size
    if window == (4800, 4960):
        assert img.size == (552, 352)


def test_overview_is_10x6_and_titled_with_what_it_is_given():
    wave, flux = lamost_like()
    img = R.render(wave, flux, renderer="speco3", title="spec-55862-B6212_sp06-005.fits")
    assert abs(img.size[0] - (800 - SHRINK)) <= 1 and abs(img.size[1] - (480 - SHRINK)) <= 1
    ax = figure_for(wave, overview=True).ax
    assert ax.get_title() == "spec-55862-B6212_sp06-005.fits"
    # the tool titles only its global view, so a titled window is the overview too
    titled = R.render(wave, flux, renderer="speco3", window=(3000, 12000), title="x.fits")
    assert titled.size == img.size


def test_zooms_are_titled_spectrum_in_bold_14pt_with_bold_12pt_axis_labels():
    wave, flux = lamost_like()
    img = np.asarray(R.render(wave, flux, renderer="speco3", window=(6500, 6620)))
    x, _ = in_window(wave, flux, 6500, 6620)
    ax = figure_for(x).ax
    assert ax.get_title() == "Spectrum"
    assert ax.title.get_fontsize() == 14 and ax.title.get_fontweight() == "bold"
    assert ax.get_xlabel() == "Wavelength (Å)" and ax.get_ylabel() == "Flux"
    for label in (ax.xaxis.label, ax.yaxis.label):
        assert label.get_fontsize() == 12 and label.get_fontweight() == "bold"
    # the title is ink above the plot, centred
    dark = (img < 100).all(axis=2)
    top = dark[:30]
    cols = np.flatnonzero(top.any(axis=0))
    assert cols.size > 40
    assert abs((cols.min() + cols.max()) / 2 - img.shape[1] / 2) < 40


@pytest.mark.parametrize(
    ("span", "major", "minor"),
    [
        (5400, 1000, 200),
        (4000, 200, 50),
        (700, 100, 20),
        (400, 100, 25),
        (200, 50, 25),
        (120, 25, 5),
        (60, 10, 2),
        (30, 5, 1),
        (10, 2, 0.5),
        (3, 1, 0.2),
    ],
)
def test_x_tick_steps_by_span(span, major, minor):
    assert R.speco3_xsteps(span) == (major, minor)


def test_drawn_ticks_use_the_step_and_limits_have_5_percent_margins():
    wave, flux = lamost_like()
    for window, step in (((4800, 4960), 50), ((6555, 6580), 5), ((4000, 8000), 200)):
        R.render(wave, flux, renderer="speco3", window=window)
        x, y = in_window(wave, flux, *window)
        ax = figure_for(x).ax
        ticks = ax.xaxis.get_majorticklocs()
        assert np.allclose(np.diff(ticks), step) and np.allclose(ticks % step, 0)
        span, yspan = x.max() - x.min(), y.max() - y.min()
        # limits come from the data with margins, not from the asked window
        assert ax.get_xlim() == pytest.approx((x.min() - 0.05 * span, x.max() + 0.05 * span))
        assert ax.get_ylim() == pytest.approx((y.min() - 0.05 * yspan, y.max() + 0.05 * yspan))
        assert ax.yaxis.get_minor_locator().__class__.__name__ == "AutoMinorLocator"
        assert ax.xaxis.get_tick_params()["direction"] == "in"


def test_stats_box_text_and_corner():
    wave, flux = lamost_like(slope=2.0)  # rising: the upper left quadrant is empty
    R.render(wave, flux, renderer="speco3", window=(4800, 4960))
    x, y = in_window(wave, flux, 4800, 4960)
    stats = figure_for(x).stats
    assert stats.get_text() == (
        f"Data points: {x.size}\n"
        f"λ range: {x.min():.1f} - {x.max():.1f} Å\n"
        f"Flux range: {y.min():.2e} - {y.max():.2e}"
    )
    assert "e+02" in stats.get_text()
    assert stats.get_position() == (0.02, 0.98)
    assert (stats.get_horizontalalignment(), stats.get_verticalalignment()) == ("left", "top")
    assert stats.get_fontsize() == 9

    wave, flux = lamost_like(slope=-2.0)  # falling: upper right is empty
    R.render(wave, flux, renderer="speco3", window=(4800, 4960))
    stats = figure_for(in_window(wave, flux, 4800, 4960)[0]).stats
    assert stats.get_position() == (0.98, 0.98)
    assert stats.get_horizontalalignment() == "right"


def test_stats_quadrants_split_at_the_data_midpoints():
    x = np.arange(10.0)
    y = np.r_[np.zeros(5), np.ones(5)]  # low on the left, high on the right
    assert R.emptiest_corner(x, y) == "upper left"
    assert R.emptiest_corner(x, y[::-1]) == "upper right"
    # one outlier far above: the midline sits high, so the lower quadrants are full
    y = np.r_[np.zeros(9), 10.0]
    assert R.emptiest_corner(x, y) == "upper left"


def test_line_is_blue_at_alpha_08_over_white():
    wave, flux = lamost_like()
    img = np.asarray(R.render(wave, flux, renderer="speco3", window=(4800, 4960))).astype(int)
    # blue (0, 0, 255) at alpha 0.8 over white: (51, 51, 255) where the line covers a pixel
    line = (np.abs(img - (51, 51, 255)).max(axis=2) <= 3).sum()
    assert line > 200


def test_reused_figures_give_the_png_bytes_a_fresh_figure_gives():
    wave, flux = lamost_like()
    others = [((6500, 6620), 3.0, None), ((4810, 4950), -1.0, "t.fits"), (None, 1.0, "a")]
    for window, scale, title in others:  # leave state behind in several cached figures
        R.render(wave, flux * scale, renderer="speco3", window=window, title=title)
    for window in ((4800, 4960), (6555, 6580)):
        x, y = in_window(wave, flux, *window)
        reused = R.render(wave, flux, renderer="speco3", window=window)
        fresh = R._render_speco3(x, y, *window, title=None, markers=[], reuse=False)
        assert R.to_png(reused) == R.to_png(fresh)


def test_window_without_valid_flux_is_a_clear_error():
    wave, flux = lamost_like()
    flux[(wave > 5000) & (wave < 5100)] = np.nan
    with pytest.raises(ValueError, match="no valid flux"):
        R.render(wave, flux, renderer="speco3", window=(5010, 5090))


@pytest.mark.parametrize(
    ("window", "scale", "title"),
    [
        ((4800, 4960), 1.0, None),
        ((6555, 6580), 1e-17, None),  # tiny flux: a y offset text beside the title
        ((8450, 8700), -3e6, None),
        ((4000, 8000), 0.002, None),
        (None, 1.0, "spec-55859-F5902_sp01-001.fits"),
        (None, 1e-17, "a long overview title that reaches the offset text " * 2),
    ],
)
def test_shortcuts_keep_the_pixels_of_matplotlibs_own_drawing(window, scale, title):
    # the same plot on a plain figure (every tick, label and text measured by matplotlib
    # each time it asks) and through `render`, after other plots left state in its figure
    wave, flux = lamost_like(seed=3, slope=-1.5)
    R.render(wave, flux * 7.0, renderer="speco3", window=(4700, 5000))
    R.render(wave, flux, renderer="speco3", title="other")
    lo, hi = window or (float(wave.min()), float(wave.max()))
    x, y = in_window(wave, flux * scale, lo, hi)
    figsize = R.speco3_figsize(float(x.max() - x.min()), x.size, overview=window is None)
    plain = R._Speco3Figure(figsize, plain=True).draw(x, y, title or "Spectrum", [])
    fast = R.render(wave, flux * scale, renderer="speco3", window=window, title=title)
    assert plain.size == fast.size
    assert np.array_equal(np.asarray(plain), np.asarray(fast))
