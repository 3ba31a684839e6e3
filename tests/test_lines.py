"""The diagnostic-feature catalogue: vacuum wavelengths, band directions, task coverage."""

from __future__ import annotations

import pytest

from agent import lines
from agent.spectrum import air_to_vacuum
from agent.tasks import TASKS


def test_every_task_has_features_of_its_physics():
    for task in TASKS:
        assert len(lines.features_for(task)) >= 5, task
    keys = {t: {f.key for f in lines.features_for(t)} for t in TASKS}
    assert {"H-beta", "H-gamma", "H-delta", "He I 4471", "Ca II K"} <= keys["wd"]
    assert {"H-alpha", "H-beta", "He II 4686", "He I 5876"} <= keys["cv"]
    assert {"C2 4737", "C2 5165", "C2 5636", "CN 7874", "TiO 7054"} <= keys["carbon"]
    assert {"ZrO 4620", "ZrO 5551", "ZrO 6474", "LaO 7403"} <= keys["s_type"]
    assert {"TiO 7054", "TiO 7589", "Na I 8183", "CaH 6382", "Ca II 8542"} <= keys["m_giant"]
    with pytest.raises(ValueError, match="unknown task"):
        lines.features_for("galaxy")


def test_wavelengths_are_vacuum():
    # Well-known vacuum values (SDSS line lists).
    assert lines.get("H-alpha").wavelength == pytest.approx(6564.61, abs=0.05)
    assert lines.get("H-beta").wavelength == pytest.approx(4862.68, abs=0.05)
    assert lines.get("[O III] 5007").wavelength == pytest.approx(5008.24, abs=0.05)
    assert lines.get("Ca II K").wavelength == pytest.approx(3934.78, abs=0.05)
    for f in lines.FEATURES:
        if f.air is not None:
            assert f.wavelength == pytest.approx(float(air_to_vacuum(f.air)), abs=0.01), f.key
            assert f.wavelength > f.air  # vacuum is always longer than air in the optical
        lo, hi = f.window
        assert lo < hi
        if f.kind != "telluric":
            assert lo <= f.wavelength <= hi, f.key


def test_bands_degrade_the_right_way():
    assert all(lines.get(k).degrade == "blue" for k in ("C2 4737", "C2 5165", "C2 5636"))
    assert all(f.degrade == "red" for f in lines.FEATURES if f.species in ("TiO", "ZrO", "LaO"))
    for f in lines.FEATURES:
        assert f.kind in ("line", "band", "telluric")
        if f.kind == "line":
            assert f.degrade is None
        assert set(f.tasks) <= set(TASKS), f.key
    c2 = lines.get("C2 5165")
    assert c2.extent(100) == (c2.wavelength - 100, c2.wavelength)


def test_window_queries():
    inside = lines.features_in(6500, 6620)
    assert "H-alpha" in {f.key for f in inside}
    assert all(6500 <= f.wavelength <= 6620 for f in inside if f.kind != "telluric")
    assert [f.wavelength for f in inside] == sorted(f.wavelength for f in inside)
    # a telluric region counts when it overlaps the window
    assert "O2 A" in {f.key for f in lines.features_in(7650, 7660)}
    assert lines.nearest(4687.5)[0].key == "He II 4686"
    assert lines.nearest(7058, kinds=("band",))[0].key == "TiO 7054"
    assert lines.nearest_in_window(4800, 4920)[0].key == "H-beta"
    with pytest.raises(KeyError, match="no feature"):
        lines.get("unobtainium")
