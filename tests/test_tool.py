"""The Spec-o3 compatible zoom tool: replies, clipping, refusals and garbage arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agent import tool as T
from agent.spectrum import Spectrum, SpectrumError, SpectrumMeta
from agent.trajectory import Step


def make_spectrum(z: float = 0.0, seed: int = 0) -> Spectrum:
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909)) * (1 + z)  # observed frame
    flux = 500 + rng.normal(0, 5, wave.size)
    flux[100:110] = np.nan  # masked stretch
    return Spectrum(
        wave, flux, redshift=z, meta=SpectrumMeta(id="t1", source="/data/spec-1-2.fits")
    )


def test_schema_is_hermes_function_json():
    fn = T.TOOL_SCHEMA["function"]
    assert T.TOOL_SCHEMA["type"] == "function" and fn["name"] == T.TOOL_NAME
    assert fn["parameters"]["required"] == ["wavelength_range"]
    assert set(fn["parameters"]["properties"]) == {"wavelength_range", "label"}
    json.dumps(T.TOOL_SCHEMA)


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


def test_masked_pixels_do_not_count():
    s = make_spectrum()
    rest = s.rest_wavelength()
    # a window that covers only the masked stretch
    r = T.zoom(s, [rest[101], rest[108]])
    assert not r.ok and "valid pixel" in r.error
    # too narrow: fewer than MIN_PIXELS pixels
    r = T.zoom(s, [rest[2000], rest[2000] + 0.5])
    assert not r.ok and "wider range" in r.error


@pytest.mark.parametrize(
    "name,args,fragment",
    [
        ("image_zoom_in_tool", {"wavelength_range": [4800, 4900]}, "unknown tool"),
        (T.TOOL_NAME, {}, "missing required"),
        (T.TOOL_NAME, {"label": "x"}, "missing required"),
        (T.TOOL_NAME, {"wavelength_range": "abc"}, "[min, max]"),
        (T.TOOL_NAME, {"wavelength_range": [4800]}, "[min, max]"),
        (T.TOOL_NAME, {"wavelength_range": [4800, 4900, 5000]}, "[min, max]"),
        (T.TOOL_NAME, {"wavelength_range": ["a", "b"]}, "numbers"),
        (T.TOOL_NAME, {"wavelength_range": [None, 4900]}, "numbers"),
        (T.TOOL_NAME, {"wavelength_range": [True, 4900]}, "numbers"),
        (T.TOOL_NAME, {"wavelength_range": [float("nan"), 4900]}, "finite"),
        (T.TOOL_NAME, {"wavelength_range": [4900, float("inf")]}, "finite"),
        (T.TOOL_NAME, {"wavelength_range": [4900, 4800]}, "min must be smaller"),
        (T.TOOL_NAME, {"wavelength_range": [4900, 4900]}, "min must be smaller"),
        (T.TOOL_NAME, {"wavelength_range": [4800, 4900], "zoom": 2}, "unexpected argument"),
        (T.TOOL_NAME, {"wavelength_range": [4800, 4900], "label": ["x"]}, "'label' must be text"),
        (T.TOOL_NAME, [4800, 4900], "must be an object"),
        (T.TOOL_NAME, "{not json", "not valid JSON"),
        (T.TOOL_NAME, None, "must be an object"),
    ],
)
def test_call_tool_turns_garbage_into_error_results(name, args, fragment):
    r = T.call_tool(make_spectrum(), name, args)
    assert not r.ok and r.image is None
    assert fragment in r.error and r.text == r.error


def test_call_tool_accepts_good_calls_in_any_form():
    s = make_spectrum()
    r = T.call_tool(s, T.TOOL_NAME, '{"wavelength_range": [6500, 6620], "label": "Halpha"}')
    assert r.ok and r.text.endswith("(6500, 6620) Å for Halpha.")
    r = T.call_tool(s, T.TOOL_NAME, {"wavelength_range": ["6500", "6620"]})
    assert r.ok and "(6500.0, 6620.0)" in r.text
    r = T.call_tool(s, T.TOOL_NAME, {"wavelength_range": [6500, 6620]}, renderer="nope")
    assert not r.ok and "renderer" in r.error


def test_global_view_is_titled_with_the_file_name():
    s = make_spectrum()
    assert T.spectrum_title(s) == "spec-1-2.fits"
    r = T.global_view(s)
    assert r.ok and r.window == T.data_range(s)
    assert r.text == "Generated full spectrum visualization."
    r = T.global_view(s, renderer="speco3")
    assert r.ok and r.image.size[0] > 10 * 80 * 0.8  # 10x6 in at 80 dpi, tight box


def test_image_references_round_trip_and_steps_rerender():
    ref = T.image_reference("fast", (4800.0, 4920.0))
    assert ref == "render:fast:4800.0:4920.0"
    odd = (3700.123456789, 4012.987654321)
    assert T.parse_reference(T.image_reference("speco3", odd)) == ("speco3", odd)
    assert T.parse_reference(T.image_reference("fast", None)) == ("fast", None)
    for junk in (None, "", "render:", "render:fast:a:b", "render:fast:5:4", "/tmp/x.png"):
        assert T.parse_reference(junk) is None

    s = make_spectrum()
    r = T.zoom(s, [8900, 9500], renderer="speco3")
    step = Step(window=r.window, observation_image=T.image_reference("speco3", r.window))
    again = T.render_step(s, step, "fast")  # the recorded renderer wins
    assert np.array_equal(np.asarray(again), np.asarray(r.image))
    assert T.render_step(s, Step()) is None
    glob = T.render_reference(s, T.image_reference("fast", None))
    assert np.array_equal(np.asarray(glob), np.asarray(T.global_view(s).image))
