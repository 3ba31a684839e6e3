"""Plot builders: valid Plotly figures, decimation that keeps features, frames, markers."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from agent.spectrum import Spectrum, SpectrumMeta
from agent.trajectory import Step, Trajectory
from app import markers, plots, shown, traces
from app.render_md import render_md


def _spec(n: int = 4000, z: float = 0.0, frame: str = "vacuum", seed: int = 0) -> Spectrum:
    rng = np.random.default_rng(seed)
    w = np.linspace(3700.0, 9100.0, n)
    f = 1.0 + 0.02 * rng.normal(size=n)
    ivar = np.full(n, 2500.0)
    f[200:210] = np.nan  # a masked stretch
    return Spectrum(w, f, ivar, frame=frame, redshift=z, meta=SpectrumMeta(id="obj-1"))


def _traj() -> Trajectory:
    def zoom(lo, hi, label):
        return Step(
            thought=f"look at {label}",
            tool_call={
                "name": "spectral_visualization_tool",
                "arguments": {"wavelength_range": [lo, hi], "label": label},
            },  # fmt: skip
            window=(lo, hi),
        )

    return Trajectory(
        id="obj-1", task="wd",
        steps=[zoom(4800, 4950, "Hβ"), zoom(6480, 6650, "Hα"),
               Step(thought="done", answer="YES", explanation="broad Balmer")],
        verdict="YES", confidence=0.8, policy="rules",
    )  # fmt: skip


def test_minmax_decimation_keeps_extremes_and_bounds_size():
    x = np.arange(100_000, dtype=float)
    y = np.zeros_like(x)
    y[54_321] = 50.0  # a one-pixel spike must survive
    y[77_777] = -30.0
    dx, dy = traces.minmax_decimate(x, y, 4000)
    assert dx.size <= 4000 + 10
    assert dy.max() == 50.0 and dy.min() == -30.0
    assert 54_321.0 in dx
    assert np.all(np.diff(dx) >= 0)


def test_decimation_keeps_gaps():
    x = np.arange(10_000, dtype=float)
    y = np.ones_like(x)
    y[5000:5100] = np.nan
    _, dy = traces.minmax_decimate(x, y, 1000)
    assert np.isnan(dy).any()


def test_global_figure_is_valid_plotly_with_numbered_windows():
    spec, traj = _spec(20_000), _traj()
    fig = plots.global_figure(spec, traj, markers=markers.markers_for("wd"), smooth_width=5)
    go.Figure(fig)  # raises on anything outside Plotly's schema
    flux = next(t for t in fig["data"] if t["name"] == "flux")
    assert flux["type"] == "scatter"  # decimated: one SVG path, no WebGL context to create
    assert len(traces.decode(flux["x"])) <= traces.GLOBAL_POINTS + 10
    full = plots.global_figure(spec, traj, max_points=20_000)
    assert next(t for t in full["data"] if t["name"] == "flux")["type"] == "scattergl"
    assert np.isnan(traces.decode(flux["y"])).any()  # masked pixels are gaps, not data
    rects = [
        s for s in fig["layout"]["shapes"] if s["type"] == "rect" and s.get("opacity", 0) > 0.1
    ]
    assert [(r["x0"], r["x1"]) for r in rects] == [(4800, 4950), (6480, 6650)]
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert "<b>1</b>" in texts and "<b>2</b>" in texts
    assert any("Hβ" in t.split("/") for t in texts)  # diagnostic markers (shared when close)
    assert any(t["name"].startswith("smoothed") for t in fig["data"])
    assert any(t.get("fill") == "toself" for t in fig["data"])  # ivar band


def test_step_panels_are_full_resolution_and_follow_the_frame():
    spec = _spec(20_000, z=0.01)
    traj = _traj()
    panels = plots.step_figures(spec, traj, frame="rest")
    (s1, f1), (s2, f2), (s3, f3) = panels
    assert f3 is None and s3.answer == "YES"
    go.Figure(f1)
    flux = next(t for t in f1["data"] if t["name"] == "flux")
    rest = spec.rest_wavelength()
    assert len(traces.decode(flux["x"])) == int(((rest >= 4800) & (rest <= 4950)).sum())
    assert f1["layout"]["xaxis"]["range"] == [4800.0, 4950.0]
    obs = plots.step_figures(spec, traj, frame="observed")[0][1]
    lo, hi = obs["layout"]["xaxis"]["range"]
    assert lo == pytest.approx(4800 * 1.01) and hi == pytest.approx(4950 * 1.01)


def test_stacked_panels_keep_each_panel_in_its_row():
    spec, traj = _spec(20_000, z=0.01), _traj()
    panels = plots.step_figures(spec, traj, markers=markers.markers_for("wd"), smooth_width=3)
    figs = [f for _, f in panels if f is not None] + [plots.empty_figure("step 3: no zoom")]
    fig = plots.stack_panels(figs, panel_height=200, revision="obj-1")
    go.Figure(fig)  # raises on anything outside Plotly's schema
    lay = fig["layout"]
    assert lay["height"] == 600 and "obj-1" in lay["uirevision"]
    assert lay["xaxis"]["range"] == figs[0]["layout"]["xaxis"]["range"]
    assert lay["xaxis2"]["range"] == figs[1]["layout"]["xaxis"]["range"]
    assert lay["yaxis2"]["range"] == figs[1]["layout"]["yaxis"]["range"]
    axes = [t["xaxis"] for t in fig["data"]]
    assert axes == ["x"] * len(figs[0]["data"]) + ["x2"] * len(figs[1]["data"])
    for a, b in zip(fig["data"], figs[0]["data"] + figs[1]["data"]):
        assert a["y"] == b["y"] and a["type"] == b["type"]
    for k, name in enumerate(["yaxis", "yaxis2", "yaxis3"]):  # row k: its own 200 px
        lo, hi = lay[name]["domain"]
        assert k * 200 < (1 - hi) * 600 < (1 - lo) * 600 < (k + 1) * 200
        assert lay[name]["anchor"] == ("x" if k == 0 else f"x{k + 1}")
    notes = {a["text"]: a for a in lay["annotations"]}
    assert (notes["Hβ"]["xref"], notes["Hβ"]["yref"]) == ("x", "y domain")  # in window 1 only
    assert notes["Hα"]["xref"] == "x2"
    assert notes["2. 6480–6650 Å · Hα"]["yref"] == "y2 domain"  # the panel's title
    assert notes["step 3: no zoom"]["xref"] == "x3 domain"
    lines = [s for s in lay["shapes"] if s["type"] == "line"]
    assert {s["xref"] for s in lines} <= {"x", "x2"} and {s["yref"] for s in lines} <= {
        "y domain",
        "y2 domain",
    }


def test_wide_zoom_is_thinned_but_keeps_its_lines():
    spec = _spec(200_000)
    flux = spec.flux.copy()
    rest = spec.rest_wavelength()
    i = int(np.searchsorted(rest, 6000.0))
    flux[i] = 9.0  # a one-pixel emission line
    spec = spec.replace(flux=flux)
    fig = plots.window_figure(spec, (5000, 7000), title="wide")
    f = next(t for t in fig["data"] if t["name"] == "flux")
    y = traces.decode(f["y"])
    assert ((rest >= 5000) & (rest <= 7000)).sum() > traces.ZOOM_POINTS
    assert len(y) <= traces.ZOOM_POINTS + 10 and np.nanmax(y) == pytest.approx(9.0)
    assert f["type"] == "scatter"


def test_markers_only_inside_window_and_air_frame_shift():
    spec = _spec(frame="air")
    m = [markers.Marker("Hβ", 4862.7), markers.Marker("TiO", 7054.0, 7144.0, "band")]
    fig = plots.window_figure(spec, (4800, 4950), title="t", markers=m, frame="observed")
    names = [a["text"] for a in fig["layout"]["annotations"]]
    assert names == ["Hβ"]
    x = fig["layout"]["shapes"][0]["x0"]
    assert x < 4862.7  # air wavelengths are shorter than vacuum
    assert x == pytest.approx(4862.7 / 1.000279, abs=0.2)


def test_crowded_marker_labels_are_merged_not_overprinted():
    spec = _spec()
    m = [markers.Marker("Ca H", 3969.6), markers.Marker("Hε", 3971.2), markers.Marker("Hδ", 4102.9)]
    fig = plots.global_figure(spec, None, markers=m)
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert texts == ["Ca H/Hε", "Hδ"]  # 1.6 Å apart on a 5400 Å panel: one label
    assert len([s for s in fig["layout"]["shapes"] if s["type"] == "line"]) == 3  # every line
    zoom = plots.window_figure(spec, (3940, 4000), title="t", markers=m)
    assert [a["text"] for a in zoom["layout"]["annotations"]] == ["Ca H", "Hε"]  # room here


def test_error_band_has_holes_at_masked_pixels():
    spec = _spec(3000)
    fig = plots.window_figure(spec, (3700, 4200), title="t")
    band = next(t for t in fig["data"] if t.get("fill") == "toself")
    x, y = traces.decode(band["x"]), traces.decode(band["y"])
    assert np.isnan(y).sum() == 2
    assert np.isnan(x).sum() == 2  # two polygons: before and after the masked stretch
    masked = spec.rest_wavelength()[200:210]
    inside = (x > masked[0]) & (x < masked[-1])
    assert not inside.any()


def test_flux_survives_physical_units():
    spec = _spec()
    spec = spec.replace(flux=spec.flux * 1e-17, ivar=spec.ivar * 1e34)
    fig = plots.window_figure(spec, (5000, 5100), title="t")
    y = traces.decode(next(t for t in fig["data"] if t["name"] == "flux")["y"])
    assert np.nanmedian(y) == pytest.approx(1e-17, rel=0.05)


def test_smooth_ignores_bad_pixels():
    f = np.array([1.0, 1.0, 100.0, 1.0, 1.0])
    bad = np.array([False, False, True, False, False])
    out = shown.smooth(f, bad, 3)
    assert np.isnan(out[2]) and out[1] == pytest.approx(1.0) and out[3] == pytest.approx(1.0)


def test_empty_window_says_so():
    fig = plots.window_figure(_spec(), (100, 200), title="outside")
    assert "no pixels" in fig["layout"]["annotations"][0]["text"]


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        '<a href="javascript:alert(1)">y</a>',
        "<iframe src=//evil></iframe>",
        "<svg onload=alert(1)>",
    ],
)
def test_model_text_is_inert(text):
    from html.parser import HTMLParser

    found: list[tuple[str, list]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    P().feed(render_md("Thought: " + text))
    for tag, attrs in found:
        assert tag in {"p", "a", "code", "em", "strong"}, tag
        for k, v in attrs:
            assert not k.startswith("on")
            assert not (v or "").lower().startswith("javascript")


def test_markdown_formatting_survives():
    out = render_md("**Hβ** FWHM `62 Å`\n\n- broad\n- deep")
    assert "<strong>Hβ</strong>" in out and "<code>62 Å</code>" in out and "<li>broad</li>" in out


# -- the desk: markers that matter, thinned labels, units, normalised view, templates -------


def _label_xs(fig) -> list[float]:
    return sorted(a["x"] for a in fig["layout"]["annotations"] if a.get("textangle") == -90)


def test_only_the_tasks_key_markers_unless_all_are_asked():
    names = {m.name for m in markers.markers_for("wd")}
    assert "C2" not in names and {"Hα", "Hβ", "He I"} <= names
    assert "C2" in {m.name for m in markers.markers_for("wd", all_markers=True)}
    mg = markers.markers_for("m_giant")
    assert not any(m.kind == "telluric" for m in mg) and any(m.name == "TiO" for m in mg)
    assert len(markers.markers_for("m_giant", all_markers=True)) > len(mg)


@pytest.mark.parametrize("all_markers", [False, True])
def test_marker_labels_never_collide_on_a_crowded_whole_spectrum(all_markers):
    spec = _spec()
    fig = plots.global_figure(spec, markers=markers.markers_for("m_giant", all_markers=all_markers))
    xs = _label_xs(fig)
    lo, hi = fig["layout"]["xaxis"]["range"]
    px = np.diff(xs) / (hi - lo) * markers.PLOT_WIDTH_PX
    assert len(xs) >= 5 and px.min() >= markers.LABEL_PX
    # every marker's name is still reachable: on its label or its label's hover text
    hover = " ".join(a.get("hovertext", "") for a in fig["layout"]["annotations"])
    for m in markers.markers_for("m_giant", all_markers=all_markers):
        assert m.name in hover


def test_flux_units_on_the_y_axis():
    spec = _spec()
    assert plots.global_figure(spec)["layout"]["yaxis"]["title"]["text"] == (
        "flux (arbitrary units)"
    )
    spec.flux_unit = "1E-17 erg/cm^2/s/Ang"
    fig = plots.global_figure(spec)
    assert fig["layout"]["yaxis"]["title"]["text"] == "flux (1E-17 erg/cm^2/s/Ang)"
    win = plots.window_figure(spec, (4800, 4950), title="w", normalised=True)
    assert win["layout"]["yaxis"]["title"]["text"] == "flux / continuum"


def test_continuum_normalised_view_flattens_the_shape():
    w = np.linspace(3700.0, 9100.0, 4000)
    f = 5.0 * (w / 6000.0) ** -2 * (1 - 0.6 * np.exp(-0.5 * ((w - 6564.6) / 8) ** 2))
    spec = Spectrum(w, f, np.full(w.size, 100.0), meta=SpectrumMeta(id="slope"))
    n = shown.normalise(spec)
    good = np.abs(w - 6564.6) > 60
    assert np.allclose(np.median(n.flux[good]), 1.0, atol=0.02)
    assert np.percentile(np.abs(n.flux[good] - 1), 95) < 0.05  # the slope is gone
    assert n.flux[np.argmin(np.abs(w - 6564.6))] < 0.55  # the line keeps its depth
    fig = plots.global_figure(spec, normalised=True)
    assert traces.decode(fig["data"][-1]["y"]).max() < 1.3


def test_template_overlay_lands_the_quasar_lines_at_the_chosen_redshift():
    from agent.templates import builtin_templates

    qso = next(t for t in builtin_templates() if t.kind == "qso")
    spec = _spec()
    for z in (0.3, 1.27):
        fig = plots.global_figure(spec, template=qso, template_z=z, frame="observed")
        tr = fig["data"][-1]
        assert tr["name"] == f"template: QSO at z = {z:.4f}"
        x, y = traces.decode(tr["x"]), traces.decode(tr["y"])
        line = 6564.6 if z == 0.3 else 2798.75  # H-alpha, or Mg II at z 1.27
        at = np.abs(x - line * (1 + z)) < 30
        off = np.abs(x - line * (1 + z)) > 300
        assert np.nanmax(y[at]) > 1.5 * np.nanmedian(y[off])  # the line is where z puts it
    # off the data: said in the title, no trace
    from agent.templates import Template

    w = np.linspace(4000, 5000, 100)
    short = Template("short", "file", w, np.ones_like(w))
    fig = plots.global_figure(spec, template=short, template_z=2.0)
    assert fig["data"][-1]["name"] == "flux"
    assert "off the data" in fig["layout"]["title"]["text"]
    go.Figure(plots.global_figure(spec, template=qso, template_z=1.0))
