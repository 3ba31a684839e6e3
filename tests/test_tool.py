"""The Spec-o3 compatible zoom tool: replies, clipping, refusals and garbage arguments."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from agent import tool as T
from agent.protocol import TOOL_NAME, TOOL_SCHEMA, image_reference, parse_reference
from agent.spectrum import Spectrum, SpectrumError, SpectrumMeta
from agent.trajectory import Step, Trajectory


def make_spectrum(z: float = 0.0, seed: int = 0) -> Spectrum:
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909)) * (1 + z)  # observed frame
    flux = 500 + rng.normal(0, 5, wave.size)
    flux[100:110] = np.nan  # masked stretch
    return Spectrum(
        wave, flux, redshift=z, meta=SpectrumMeta(id="t1", source="/data/spec-1-2.fits")
    )


def test_schema_is_hermes_function_json():
    fn = TOOL_SCHEMA["function"]
    assert TOOL_SCHEMA["type"] == "function" and fn["name"] == TOOL_NAME
    assert fn["parameters"]["required"] == ["wavelength_range"]
    assert set(fn["parameters"]["properties"]) == {"wavelength_range", "label"}
    json.dumps(TOOL_SCHEMA)


def test_tool_doctests():
    import doctest

    assert doctest.testmod(T).failed == 0


def test_zoom_reply_text_and_image():
    s = make_spectrum()
    r = T.zoom(s, [4800, 4920], "H-beta")
    assert r.ok and r.image is not None and r.image.size == (448, 448)
    assert r.text == (
        "Generated spectral visualization focused on wavelength range (4800, 4920) Å for H-beta."
    )
    assert r.window == (4800.0, 4920.0)
    r = T.zoom(s, [4800.5, 4920.0])
    assert (
        r.text == "Generated spectral visualization focused on wavelength range (4800.5, 4920.0) Å."
    )
    r = T.zoom(s, (6500, 6600), "Hα", renderer="speco3")
    assert r.ok and r.image.size[0] > 400


def test_ranges_are_rest_frame():
    z = 0.5
    s = make_spectrum(z)
    rest = s.rest_wavelength()
    assert rest[0] == pytest.approx(3700, rel=1e-3)
    r = T.zoom(s, [4000, 4100])
    assert r.ok and r.window == (4000.0, 4100.0)
    sub = T.extract_region(s, 4000, 4100)
    assert sub.rest_wavelength().min() >= 4000 and sub.rest_wavelength().max() <= 4100
    assert sub.wavelength.min() == pytest.approx(4000 * 1.5, abs=3)  # observed frame kept
    assert sub.redshift == z and sub.frame == s.frame
    assert sub.wavelength.size == int(((rest >= 4000) & (rest <= 4100)).sum())
    with pytest.raises(SpectrumError, match="pixel"):
        T.extract_region(s, 100, 200)


def test_partly_outside_is_clipped_and_wholly_outside_refused():
    s = make_spectrum()
    lo, hi = T.data_range(s)
    r = T.zoom(s, [8900, 9500])
    assert r.ok and r.window == (8900.0, pytest.approx(hi))
    assert "(8900, 9500)" in r.text  # the reply echoes the request, like the published tool
    r = T.zoom(s, [10000, 12000], "far red")
    assert not r.ok and r.image is None and r.window is None
    assert r.text == r.error
    assert r.error.startswith("Error: The specified wavelength range [10000, 12000] is invalid")
    assert f"[{lo:.1f}, {hi:.1f}]" in r.error
    # a window touching the data by one edge is not outside it
    assert T.zoom(s, [hi, hi + 100]).ok


def test_one_drawable_pixel_is_enough():
    s = make_spectrum()
    rest = s.rest_wavelength()
    # a window that covers only the NaN stretch: nothing to draw, the published plot's error
    r = T.zoom(s, [rest[101], rest[108]])
    assert not r.ok and r.error.startswith(
        "Error processing spectral visualization: No data points in specified wavelength range ("
    )
    # a window around one pixel is plotted
    for renderer in ("fast", "speco3"):
        r = T.zoom(s, [rest[2000] - 0.01, rest[2000] + 0.01], renderer=renderer)
        assert r.ok and r.image is not None, (renderer, r.error)


REFUSED = "Error: The specified wavelength range {} is invalid or outside the available data range"


@pytest.mark.parametrize(
    "args,shown",
    [
        ({"wavelength_range": "abc"}, "abc"),
        ({"wavelength_range": [4800]}, "[4800]"),
        ({"wavelength_range": [4800, 4900, 5000]}, "[4800, 4900, 5000]"),
        ({"wavelength_range": ["a", "b"]}, "['a', 'b']"),
        ({"wavelength_range": ["6500", "6620"]}, "['6500', '6620']"),
        ({"wavelength_range": [None, 4900]}, "[None, 4900]"),
        ({"wavelength_range": [True, 4900]}, "[True, 4900]"),
        ({"wavelength_range": [4900, 4800]}, "[4900, 4800]"),
        ({"wavelength_range": [4900, 4900]}, "[4900, 4900]"),
        ({"wavelength_range": [10000, 12000], "label": "far red"}, "[10000, 12000]"),
        ({"wavelength_range": 4800}, "4800"),
    ],
)
def test_bad_ranges_get_the_published_refusal(args, shown):
    s = make_spectrum()
    lo, hi = T.full_range(s)
    r = T.call_tool(s, TOOL_NAME, args)
    assert not r.ok and r.image is None and r.text == r.error
    assert r.error == REFUSED.format(shown) + f" [{lo:.1f}, {hi:.1f}]."


@pytest.mark.parametrize(
    "name,args,text",
    [
        (
            "image_zoom_in_tool",
            {"wavelength_range": [4800, 4900]},
            "Error when executing tool: 'image_zoom_in_tool'",
        ),
        (
            TOOL_NAME,
            [4800, 4900],
            "Error when executing tool: 'list' object has no attribute 'get'",
        ),
        (TOOL_NAME, None, "Error when executing tool: 'NoneType' object has no attribute 'get'"),
        (TOOL_NAME, "{not json", "Error when executing tool: tool arguments are not valid JSON"),
    ],
)
def test_call_tool_turns_garbage_into_error_results(name, args, text):
    r = T.call_tool(make_spectrum(), name, args)
    assert not r.ok and r.image is None
    assert r.error == text and r.text == r.error


def test_call_tool_accepts_good_calls_in_any_form():
    s = make_spectrum()
    r = T.call_tool(s, TOOL_NAME, '{"wavelength_range": [6500, 6620], "label": "Halpha"}')
    assert r.ok and r.text.endswith("(6500, 6620) Å for Halpha.")
    r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620]}, renderer="nope")
    assert not r.ok and "renderer" in r.error


def test_labels_and_extra_arguments_as_published():
    s = make_spectrum()
    base = "Generated spectral visualization focused on wavelength range (6500, 6620.5) Å"
    for label, tail in [("", "."), (None, "."), (["x"], " for ['x']."), (7, " for 7.")]:
        r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620.5], "label": label})
        assert r.ok and r.text == base + tail
    r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620.5], "zoom": 2, "label": "a"})
    assert r.ok and r.text == base + " for a."
    # no range: the whole spectrum
    r = T.call_tool(s, TOOL_NAME, {"label": "all"})
    assert r.ok and r.text == "Generated full spectrum visualization for all."
    assert r.window == T.full_range(s)
    # a reply longer than verl passed on is cut as verl cut it
    r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620], "label": "x" * 2000})
    assert r.ok and len(r.text) == T.MAX_REPLY_CHARS + len("...(truncated)")


def lamost_like(seed: int = 1) -> Spectrum:
    """ivar = 0 on a quarter of the pixels, flux finite there: LAMOST's bad pixels."""
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909))
    flux = 500 + 40 * np.sin(wave / 30.0) + rng.normal(0, 5, wave.size)
    ivar = np.full(wave.size, 0.04)
    ivar[::4] = 0.0
    ivar[:60] = 0.0  # a dead blue end, as in many LAMOST files
    return Spectrum(wave, flux, ivar=ivar, meta=SpectrumMeta(id="l1", source="/d/spec-9.fits"))


def test_speco3_draws_ivar_zero_pixels_like_the_published_plot():
    from agent.render import render

    s = lamost_like()
    assert s.mask[::4].all() and np.isfinite(s.flux).all()
    rest = s.rest_wavelength()
    window = (6480.0, 6640.0)
    r = T.zoom(s, list(window), renderer="speco3")
    # the published plot: every finite pixel, no mask
    published = render(rest, s.flux, window=window, renderer="speco3")
    masked = render(rest, s.flux, mask=s.mask, window=window, renderer="speco3")
    assert np.array_equal(np.asarray(r.image), np.asarray(published))
    assert not np.array_equal(np.asarray(r.image), np.asarray(masked))
    # the re-rendered reference is the same image
    again = T.render_window(s, r.window, renderer="speco3")
    assert np.array_equal(np.asarray(again), np.asarray(published))
    # the overview too, over every pixel (the dead blue end included)
    g = T.global_view(s, renderer="speco3")
    assert g.window == (rest[0], rest[-1])
    titled = render(rest, s.flux, renderer="speco3", title="spec-9.fits")
    assert np.array_equal(np.asarray(g.image), np.asarray(titled))
    # a window holding only ivar=0 pixels is plotted by speco3
    only_bad = [float(rest[5]), float(rest[50])]
    assert T.zoom(s, only_bad, renderer="speco3").ok


def test_fast_keeps_leaving_masked_pixels_out():
    from agent.render import render

    s = lamost_like()
    rest = s.rest_wavelength()
    r = T.zoom(s, [6480, 6640], renderer="fast")
    masked = render(rest, s.flux, mask=s.mask, window=r.window, renderer="fast")
    assert np.array_equal(np.asarray(r.image), np.asarray(masked))
    only_bad = [float(rest[5]), float(rest[50])]
    r = T.zoom(s, only_bad, renderer="fast")
    assert not r.ok and "No data points" in r.error
    assert T.global_view(s).window == T.data_range(s)


def test_global_view_is_titled_with_the_file_name():
    s = make_spectrum()
    assert T.spectrum_title(s) == "spec-1-2.fits"
    r = T.global_view(s)
    assert r.ok and r.window == T.data_range(s)
    assert r.text == "Generated full spectrum visualization."
    r = T.global_view(s, renderer="speco3")
    assert r.ok and r.image.size[0] > 10 * 80 * 0.8  # 10x6 in at 80 dpi, tight box


def test_image_references_round_trip_and_steps_rerender():
    ref = image_reference("fast", (4800.0, 4920.0))
    assert ref == "render:fast:4800.0:4920.0"
    odd = (3700.123456789, 4012.987654321)
    assert parse_reference(image_reference("speco3", odd)) == ("speco3", odd)
    assert parse_reference(image_reference("fast", None)) == ("fast", None)
    for junk in (None, "", "render:", "render:fast:a:b", "render:fast:5:4", "/tmp/x.png"):
        assert parse_reference(junk) is None

    s = make_spectrum()
    r = T.zoom(s, [8900, 9500], renderer="speco3")
    step = Step(window=r.window, observation_image=image_reference("speco3", r.window))
    again = T.render_step(s, step, "fast")  # the recorded renderer wins
    assert np.array_equal(np.asarray(again), np.asarray(r.image))
    assert T.render_step(s, Step()) is None
    glob = T.render_reference(s, image_reference("fast", None))
    assert np.array_equal(np.asarray(glob), np.asarray(T.global_view(s).image))


def test_a_plotting_bug_is_an_observation_and_a_logged_traceback(caplog, monkeypatch):
    s = make_spectrum()

    def broken(*args, **kwargs):
        raise MemoryError("figure buffer")

    monkeypatch.setattr(T, "render_window", broken)
    caplog.set_level(logging.ERROR, logger="agent.tool")
    r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620]})
    assert r.image is None and r.error.startswith("Error processing spectral visualization")
    assert T.global_view(s).error is not None
    logged = [rec for rec in caplog.records if rec.name == "agent.tool"]
    assert [rec.exc_info[0] for rec in logged] == [MemoryError, MemoryError]
    assert "t1" in logged[0].getMessage()

    # whatever escapes zoom itself is caught by call_tool, recorded and logged too
    caplog.clear()
    monkeypatch.setattr(T, "zoom", lambda *a, **k: 1 / 0)
    r = T.call_tool(s, TOOL_NAME, {"wavelength_range": [6500, 6620]})
    assert "ZeroDivisionError" in r.error
    assert [rec.exc_info[0] for rec in caplog.records] == [ZeroDivisionError]


def test_a_quasars_zoom_marks_its_lines_at_the_redshift_the_trajectory_measured():
    from agent.lines import BY_KEY
    from agent.loop import run_batch
    from agent.policies.rules import RulesPolicy
    from agent.render import resolve_markers
    from training.sim.demo import simulate

    # Once: the zoom titled "Mg II 2800" showed no Mg II marker, as markers sat at rest.
    spec, info = simulate("qso", (0, 3), spec_id="sim-0-0003")
    assert info["z"] > 1.4 and abs(spec.redshift) < 0.01
    t = run_batch([(spec, "cv")], RulesPolicy())[0]
    z = T.trajectory_redshift(t)
    assert z is not None and abs(z - info["z"]) < 0.02
    step = next(s for s in t.steps if "Mg II 2800" in json.dumps((s.tool_call or {}), default=str))
    lo, hi = step.window
    shown = resolve_markers(True, lo, hi, T.marker_redshift(spec, z))
    mg = [f for f in shown if f.key == "Mg II 2800"]
    assert len(mg) == 1 and 6500 < mg[0].wavelength < 7500
    assert abs(mg[0].wavelength - 2799.12 * (1 + z)) < 0.5
    assert not [f for f in resolve_markers(True, lo, hi) if f.key == "Mg II 2800"]  # at rest
    # the image draws it: line-marker red appears in the zoom only at the measured redshift
    mark = [BY_KEY["Mg II 2800"]]
    red = lambda im: ((im[..., 0] > 150) & (im[..., 1] < 80) & (im[..., 2] < 80)).sum()  # noqa: E731
    assert red(np.asarray(T.render_step(spec, step, markers=mark, redshift=z))) > 20
    assert red(np.asarray(T.render_step(spec, step, markers=mark))) == 0


def test_a_stars_markers_stay_at_rest():
    s = make_spectrum(z=0.0003)
    assert T.marker_redshift(s, None) == 0.0
    assert T.marker_redshift(s, s.redshift) == pytest.approx(0.0)
    assert T.marker_redshift(s, 1.5) == pytest.approx(2.5 / 1.0003 - 1)
    traj = Trajectory(id="x", task="wd")
    assert T.trajectory_redshift(traj) is None
    traj.redshift = {"value": 0.0, "quality": "none", "source": "none"}
    assert T.trajectory_redshift(traj) is None
