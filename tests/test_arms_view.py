"""The arms and sky view: DESI files keep their B/R/Z arms and sky beside the merged spectrum
the agent reads, SDSS its COADD sky, a file without sky says so; the desk draws them only when
asked (`b`, `y`), in the whole-spectrum panel and the zooms, and in Chromium."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from astropy.io import fits

from agent.formats import load_one, read_spectra
from agent.spectrum import Spectrum, SpectrumError
from app import plots
from app.traces import ARM_COLOURS, decode
from tests import fits_factory


def _observed(layout: str, folder: Path, name: str = "x1", seed: int = 0) -> Path:
    """A spectrum with a few emission lines as `layout`'s pipeline writes it (simulated)."""
    from training.sim.surveys import observe_survey, write_survey

    w = np.linspace(3000.0, 11000.0, 16000)
    f = 1.0 + w / 1e4
    for c in (4863.0, 6565.0, 8500.0):
        f = f + 2.0 * np.exp(-0.5 * ((w - c) / 4.0) ** 2)
    obs = observe_survey(Spectrum(w, f), layout, snr=15, rng=np.random.default_rng(seed))
    return write_survey(obs, folder / f"{name}.fits", name)


def _without(path: Path, names: set[str], out: Path) -> Path:
    with fits.open(path) as hdul:
        fits.HDUList([h.copy() for h in hdul if h.name not in names]).writeto(out)
    return out


# -- readers -------------------------------------------------------------------------------


def test_desi_file_keeps_its_three_arms_and_sky_with_units(tmp_path):
    path = _observed("desi", tmp_path)
    spec = load_one(path)
    with fits.open(path) as hdul:
        assert [a.name for a in spec.arms] == ["B", "R", "Z"]
        for arm in spec.arms:
            np.testing.assert_array_equal(arm.wavelength, hdul[f"{arm.name}_WAVELENGTH"].data)
            np.testing.assert_array_equal(arm.flux, hdul[f"{arm.name}_FLUX"].data[0])
            ivar = hdul[f"{arm.name}_IVAR"].data[0]
            bad = (hdul[f"{arm.name}_MASK"].data[0] != 0) | (ivar <= 0)
            np.testing.assert_array_equal(arm.mask, bad)
            np.testing.assert_array_equal(arm.ivar, np.where(bad, 0.0, ivar))
        skies = {a: hdul[f"{a}_SKY"].data[0].astype(float) for a in "BRZ"}
    # the sky on the merged pixels, in the flux's unit (the file's BUNIT says it in its words)
    assert spec.sky is not None and spec.sky.flux.shape == spec.flux.shape
    assert spec.sky.unit == spec.flux_unit == "1e-17 erg/(s cm2 Angstrom)"
    only_b = spec.wavelength < 5700.0
    np.testing.assert_allclose(
        spec.sky.flux[only_b], np.interp(spec.wavelength[only_b], spec.arms[0].wavelength,
                                         skies["B"]), rtol=1e-6)  # fmt: skip
    # a sky line the simulator put there ([O I] 5579) stands out of the sky continuum
    near = np.abs(spec.wavelength - 5579.0) < 2
    assert spec.sky.flux[near].max() > 3 * np.median(spec.sky.flux)

    # What the agent reads is what it read before: the file without its sky, merged alike,
    # and the plain-JSON form (exports) carries neither arms nor sky.
    plain = load_one(_without(path, {"B_SKY", "R_SKY", "Z_SKY"}, tmp_path / "nosky.fits"))
    for field in ("wavelength", "flux", "ivar", "mask"):
        np.testing.assert_array_equal(getattr(spec, field), getattr(plain, field))
    assert plain.sky is None and len(plain.arms) == 3
    d = spec.to_dict()
    assert "arms" not in d and "sky" not in d and d["flux"][:50] == plain.to_dict()["flux"][:50]


def test_desi_rows_keep_their_own_arms_as_copies(tmp_path):
    """Each target's arms are its own row, copied: a cached spectrum of one row does not
    keep the whole file's arrays alive. A file with no SKY HDUs has no sky, not zeros."""
    path = fits_factory.write_desi_coadd(tmp_path, nspec=3)
    spectra = read_spectra(path)
    assert len(spectra) == 3
    with fits.open(path) as hdul:
        for i, s in enumerate(spectra):
            assert s.sky is None
            assert [a.name for a in s.arms] == ["B", "R", "Z"]
            for a in s.arms:
                assert a.flux.base is None  # owns its data
                np.testing.assert_array_equal(a.flux, hdul[f"{a.name}_FLUX"].data[i])
                assert a.mask[:5].all() and not a.mask[5:].any()  # the file's MASK bits


def test_sdss_keeps_its_coadd_sky_and_lamost_says_it_has_none(tmp_path):
    sdss = load_one(_observed("sdss", tmp_path))
    with fits.open(tmp_path / "x1.fits") as hdul:
        col = hdul["COADD"].data["sky"].astype(float)
        unit = hdul[0].header["BUNIT"]
    assert sdss.arms == () and sdss.sky is not None
    np.testing.assert_array_equal(sdss.sky.flux, col)
    assert sdss.sky.unit == unit == sdss.flux_unit
    lamost = load_one(_observed("lamost", tmp_path, "l1"))
    assert lamost.sky is None and lamost.arms == ()


def test_real_sdss_and_lamost_files(shared_spectra):
    real = load_one(shared_spectra / "sdss" / "sample_spectrum.fits")
    with fits.open(shared_spectra / "sdss" / "sample_spectrum.fits") as hdul:
        np.testing.assert_array_equal(real.sky.flux, hdul["COADD"].data["sky"].astype(float))
    assert real.sky.unit == real.flux_unit
    # LAMOST's low-resolution image holds flux, ivar, wavelength/subcontinuum, and/or masks:
    # no sky row, so no sky is shown
    first = sorted((shared_spectra / "lamost").glob("*.fits"))[0]
    assert load_one(first).sky is None


def _desi_hdus(tmp_path: Path) -> fits.HDUList:
    return fits.open(fits_factory.write_desi_coadd(tmp_path, nspec=2))


@pytest.mark.parametrize(
    ("hdu", "shape"),
    [("B_IVAR", (2, 100)), ("R_FLUX", (2, 17)), ("Z_MASK", (1, 10)), ("B_SKY", (2, 3))],
)
def test_arm_hdus_of_other_lengths_are_refused_naming_the_file_and_hdu(tmp_path, hdu, shape):
    hdul = _desi_hdus(tmp_path)
    hdus = [h.copy() for h in hdul if h.name != hdu]
    hdus.append(fits.ImageHDU(np.ones(shape, np.float32), name=hdu))
    if hdu == "B_SKY":  # every arm has a sky, B's of the wrong shape
        hdus += [fits.ImageHDU(np.ones(hdul[f"{a}_FLUX"].data.shape, np.float32),
                               name=f"{a}_SKY") for a in "RZ"]  # fmt: skip
    bad = tmp_path / "bad.fits"
    fits.HDUList(hdus).writeto(bad)
    with pytest.raises(SpectrumError) as err:
        load_one(bad, row=0)
    assert str(bad) in str(err.value) and hdu in str(err.value)


def test_a_sky_in_some_arms_only_is_not_shown(tmp_path, caplog):
    hdul = _desi_hdus(tmp_path)
    hdus = [h.copy() for h in hdul]
    hdus.append(fits.ImageHDU(np.ones(hdul["B_FLUX"].data.shape, np.float32), name="B_SKY"))
    part = tmp_path / "part.fits"
    fits.HDUList(hdus).writeto(part)
    with caplog.at_level(logging.WARNING, logger="agent.formats.desi"):
        assert load_one(part, row=0).sky is None
    assert "B_SKY only" in caplog.text


# -- figures -------------------------------------------------------------------------------


def _names(fig: dict) -> list[str]:
    return [t.get("name", "") for t in fig["data"]]


def test_figures_draw_arms_and_sky_only_when_asked(tmp_path):
    spec = load_one(_observed("desi", tmp_path))
    plain = plots.global_figure(spec)
    assert _names(plain) == ["±1σ (ivar)", "flux"] and not plain["layout"]["showlegend"]
    both = plots.global_figure(spec, arms=True, sky=True, frame="observed")
    go.Figure(both)  # valid Plotly
    assert _names(both) == ["sky", "±1σ (ivar)", "flux", "arm B", "arm R", "arm Z"]
    by = {t["name"]: t for t in both["data"]}
    assert {n[-1]: by[n]["line"]["color"] for n in ("arm B", "arm R", "arm Z")} == ARM_COLOURS
    assert by["flux"]["opacity"] < 1  # the merged line fades under the arms
    assert both["layout"]["showlegend"]
    # each arm is drawn where it is, decimated as the flux is
    for a in spec.arms:
        x = decode(by[f"arm {a.name}"]["x"])
        assert x.size <= plots.GLOBAL_POINTS
        # (min/max decimation keeps each bin's extremes, so the ends are within a bin)
        assert abs(x[0] - a.wavelength[0]) < 8 and abs(x[-1] - a.wavelength[-1]) < 8
    sky = decode(by["sky"]["y"])
    assert np.nanmax(sky) == pytest.approx(np.nanmax(spec.sky.flux), rel=1e-5)
    assert _names(plots.global_figure(spec, sky=True))[0] == "sky"
    assert not any(n.startswith("arm") for n in _names(plots.global_figure(spec, sky=True)))
    # rest frame, normalised: the arms on the same scale as the normalised flux
    norm = plots.global_figure(spec, arms=True, normalised=True)
    ry = decode({t["name"]: t for t in norm["data"]}["arm R"]["y"]).astype(float)
    assert abs(np.nanmedian(ry) - 1.0) < 0.2
    # a zoom on Halpha carries the R arm only, at full resolution
    zoom = plots.window_figure(spec, (6500.0, 6630.0), title="Ha", arms=True, sky=True)
    assert _names(zoom) == ["sky", "±1σ (ivar)", "flux", "arm R"]


def test_a_file_without_arms_or_sky_says_so(tmp_path):
    spec = load_one(_observed("lamost", tmp_path))
    fig = plots.global_figure(spec, arms=True, sky=True)
    assert _names(fig) == ["±1σ (ivar)", "flux"]
    assert fig["layout"]["title"]["text"].endswith("· no arms in this file · no sky in this file")
    assert "no sky" not in plots.global_figure(spec)["layout"]["title"]["text"]


# -- the desk: handlers and Chromium ---------------------------------------------------------


def _desi_candidate(ctx, tmp_path: Path) -> str:
    from app.pages.upload import ingest_and_vet

    folder = tmp_path / "data" / "desi"
    folder.mkdir(parents=True)
    path = _observed("desi", folder, "coadd-desi-1")
    assert ingest_and_vet(ctx, [{"id": "desi-1", "task": "cv", "path": str(path)}]) == 1
    return "desi-1"


def test_the_vet_handlers_draw_arms_and_sky_as_the_desk_asks(tmp_path_factory, tmp_path):
    from app import context as app_context
    from app import views
    from app.pages import desk
    from app.pages import vet as vet_page
    from tests.app_support import context

    ctx = context(tmp_path_factory, tmp_path)
    try:
        key = _desi_candidate(ctx, tmp_path)
        ex = app_context.expert_for(ctx, None)
        D = views.Display()
        st, view = vet_page.vet_jump(ctx, ex, views.new_state(), key, desk.display_with(None, D))
        assert view.candidate_id is not None
        assert _names(view.global_fig) == ["±1σ (ivar)", "flux"]
        st = desk.set_option(st, arms=True)
        st, view = vet_page.vet_refresh(ctx, ex, st, desk.display_with(st, D))
        assert [n for n in _names(view.global_fig) if n.startswith(("arm", "sky"))] == [
            "arm B", "arm R", "arm Z"]  # fmt: skip
        assert all("arm" in " ".join(_names(s.fig)) for s in view.steps if s.fig is not None)
        st = desk.set_option(st, arms=False, sky=True)
        st, view = vet_page.vet_refresh(ctx, ex, st, desk.display_with(st, D))
        assert [n for n in _names(view.global_fig) if n.startswith(("arm", "sky"))] == ["sky"]
    finally:
        ctx.store.close()


GLOBAL = "document.querySelector('#vet-global .js-plotly-plot')"


@pytest.mark.browser
@pytest.mark.slow
def test_b_and_y_toggle_the_arms_and_sky_in_chromium(browser, tmp_path_factory, tmp_path):
    from app.main import serve
    from tests.app_support import ANSWER_MS, context
    from tests.test_browser import _open

    ctx = context(tmp_path_factory, tmp_path)
    key = _desi_candidate(ctx, tmp_path)
    srv = serve(ctx)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url)
        page.wait_for_selector("#vet-global .js-plotly-plot", timeout=30_000)
        page.fill("#jump-id textarea, #jump-id input", key)
        page.keyboard.press("Enter")

        def drawn(predicate: str) -> None:
            page.wait_for_function(
                f"""k => {{ const gd = {GLOBAL}; if (!gd || !gd.data || !gd.layout.meta ||
                    gd.layout.meta.candidate !== k) return false;
                    const names = gd.data.map(t => t.name); return {predicate}; }}""",
                arg=key, timeout=ANSWER_MS,
            )  # fmt: skip

        def traces() -> dict:
            return page.evaluate(
                f"() => Object.fromEntries({GLOBAL}.data.map(t => [t.name, "
                "(t.line || {}).color]))"
            )

        drawn("names.includes('flux') && !names.some(n => n.startsWith('arm '))")
        page.locator("body").click(position={"x": 5, "y": 5})  # keys go to the page
        page.keyboard.press("b")
        drawn("['arm B', 'arm R', 'arm Z'].every(n => names.includes(n))")
        colours = traces()
        assert {n: colours[f"arm {n}"] for n in "BRZ"} == ARM_COLOURS
        assert "sky" not in colours
        page.keyboard.press("y")
        drawn("names[0] === 'sky' && names.includes('arm B')")
        page.keyboard.press("b")
        drawn("names.includes('sky') && !names.some(n => n.startsWith('arm '))")
        assert page.is_checked("#desk-sky input[type=checkbox]")
        assert not page.is_checked("#desk-arms input[type=checkbox]")
        # the cheat sheet lists both keys
        sheet = page.inner_html("#loupe-cheatsheet")
        assert "arms before merging" in sheet and "sky spectrum" in sheet
    finally:
        srv.close()
        ctx.store.close()


def _reference_decimate(x, y, max_points):
    """The bin-by-bin loop `minmax_decimate` replaced: it must give the same points."""
    n = x.size
    if n <= max_points:
        return x, y
    edges = np.linspace(0, n, max(1, max_points // 2) + 1).astype(int)
    xs, ys = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        seg = y[a:b]
        finite = np.isfinite(seg)
        if not finite.any():
            xs.append(float(x[a]))
            ys.append(np.nan)
            continue
        idx = np.flatnonzero(finite)
        lo, hi = idx[np.argmin(seg[idx])], idx[np.argmax(seg[idx])]
        first, second = (lo, hi) if lo <= hi else (hi, lo)
        xs.append(float(x[a + first]))
        ys.append(float(seg[first]))
        if not finite.all():
            xs.append(float(x[a + (first + second) // 2]))
            ys.append(np.nan)
        if second != first:
            xs.append(float(x[a + second]))
            ys.append(float(seg[second]))
    return np.asarray(xs), np.asarray(ys)


def test_decimation_keeps_every_bins_extremes_and_gaps_as_before():
    from app.traces import minmax_decimate

    rng = np.random.default_rng(1)
    for trial in range(120):
        n, cap = int(rng.integers(10, 12000)), int(rng.integers(2, 4000))
        x = np.sort(rng.uniform(3000, 10000, n))
        y = rng.normal(size=n).astype(np.float32 if trial % 2 else np.float64)
        if trial % 3:
            y[rng.random(n) < rng.uniform(0, 0.5)] = np.nan
        if trial % 5 == 0:
            y[n // 4 : n // 2] = np.nan  # whole bins masked
        if trial % 7 == 0:
            y = np.round(y, 1)  # ties: the first of equal extremes
        if trial % 11 == 0:
            y[rng.random(n) < 0.1] = np.inf
        got, want = minmax_decimate(x, y, cap), _reference_decimate(x, y, cap)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert got[0].dtype == want[0].dtype == np.float64
