"""The degrader: LAMOST grid, noise at the asked SNR, RV shift, gaps, air to vacuum."""

from __future__ import annotations

import numpy as np
import pytest

from agent.measure import arrays_of, der_snr, measure_line
from agent.spectrum import Spectrum
from training.degrade import C_KMS, degrade, lamost_grid


def _lib(frame="vacuum", lo=3500.0, hi=9500.0, line=6564.6):
    w = np.arange(lo, hi, 0.5)
    f = 100.0 * (1 - 0.6 * np.exp(-0.5 * ((w - line) / 1.0) ** 2))
    return Spectrum(w, f, frame=frame)


def test_lamost_grid_and_coverage_gaps():
    d = degrade(_lib(lo=4000.0, hi=8000.0), snr=20, rng=0)
    g = lamost_grid()
    assert np.allclose(d.wavelength, g)
    assert d.wavelength.size == 3909 and np.allclose(np.diff(np.log10(d.wavelength)), 1e-4)
    # Outside the source's 4000-8000 A the pixels are masked with ivar 0.
    out = (g < 4000) | (g > 8000)
    assert d.mask[out].all() and (d.ivar[out] == 0).all()
    assert not d.mask[(g > 4100) & (g < 7900)].any()


@pytest.mark.parametrize("snr", [10.0, 20.0, 50.0])
def test_noise_matches_requested_snr(snr):
    w = np.arange(3500.0, 9500.0, 1.0)
    flat = Spectrum(w, np.full_like(w, 50.0))
    d = degrade(flat, snr=snr, flux_cal_error=0.0, rng=1)
    good = d.good
    assert der_snr(d.flux[good]) == pytest.approx(snr, rel=0.1)
    assert np.median(d.flux[good] * np.sqrt(d.ivar[good])) == pytest.approx(snr, rel=0.05)


def test_rv_shift_is_recovered():
    rv = 250.0
    d = degrade(_lib(), snr=200, rv_kms=rv, flux_cal_error=0.0, rng=2)
    ln = measure_line(arrays_of(d), "Ha", 6564.6, 15.0, [(6520, 6540), (6590, 6610)], smooth_px=1)
    shift = (ln.center - 6564.6) / 6564.6 * C_KMS
    assert shift == pytest.approx(rv, abs=40.0)  # a LAMOST pixel is ~69 km/s
    # Resolution: the 2.35 A line comes out near lambda/1800 = 3.6 A (plus the source width).
    assert 3.2 < ln.fwhm < 5.0


def test_air_source_is_moved_to_vacuum():
    air = degrade(_lib(frame="air", line=6562.8), snr=300, flux_cal_error=0.0, rng=3)
    ln = measure_line(arrays_of(air), "Ha", 6564.6, 15.0, [(6520, 6540), (6590, 6610)], smooth_px=1)
    assert ln.center == pytest.approx(6564.6, abs=0.8)
    assert air.frame == "vacuum"


def test_zero_filled_library_stretch_is_a_gap():
    s = _lib()
    f = s.flux.copy()
    f[(s.wavelength > 5000) & (s.wavelength < 5200)] = 0.0
    d = degrade(Spectrum(s.wavelength, f), snr=20, rng=4)
    g = d.wavelength
    assert d.mask[(g > 5010) & (g < 5190)].all()


def test_bad_snr_is_refused():
    with pytest.raises(ValueError, match="snr"):
        degrade(_lib(), snr=0)


def test_cli_writes_lamost_files_and_a_labelled_catalogue(tmp_path):
    import csv

    import launch
    from agent.formats import load_one, write_lamost_fits

    src = tmp_path / "lib.fits"
    write_lamost_fits(_lib(lo=3700.0, hi=9000.0), src)
    out = tmp_path / "out"
    rc = launch.main(
        [
            "degrade",
            "--input",
            str(src),
            "--task",
            "wd",
            "--label",
            "NO",
            "--snr",
            "10",
            "--snr",
            "20",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    rows = list(csv.DictReader(open(out / "catalog.csv")))
    assert [r["label"] for r in rows] == ["NO", "NO"] and {r["task"] for r in rows} == {"wd"}
    spec = load_one(out / rows[0]["path"])
    assert spec.wavelength.size == 3909 and spec.ivar is not None


# -- survey layouts: what LAMOST, SDSS/BOSS and DESI files deliver --------------------------

from agent.formats import load_one  # noqa: E402
from training.sim.surveys import LAYOUTS, observe_survey, write_survey  # noqa: E402


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("snr", [5.0, 20.0])
def test_survey_file_reads_back_at_the_asked_snr(tmp_path, layout, snr):
    w = np.arange(3400.0, 10600.0, 0.5)
    f = 100.0 * (1 - 0.6 * np.exp(-0.5 * ((w - 6564.6) / 1.5) ** 2))
    obs = observe_survey(Spectrum(w, f), layout, snr=snr, rng=np.random.default_rng(0))
    path = write_survey(obs, tmp_path / f"{layout}.fits", "x1")
    s = load_one(path)
    assert s.frame == "vacuum"
    good = s.good & (np.abs(s.wavelength - 6564.6) > 30)
    assert np.median(s.flux[good] * np.sqrt(s.ivar[good])) == pytest.approx(snr, rel=0.15)
    lo, hi = {"lamost": (3700, 9100), "sdss": (3600, 10400), "desi": (3600, 9824)}[layout]
    assert s.wavelength[0] == pytest.approx(lo, abs=1) and s.wavelength[-1] == pytest.approx(
        hi, abs=2
    )
    if layout == "lamost":
        assert np.allclose(np.diff(np.log10(s.wavelength)), 1e-4)
    elif layout == "sdss":
        assert s.meta.survey == "SDSS" and s.flux_unit.startswith("1E-17")
        assert np.allclose(
            np.diff(np.log10(s.wavelength)), 1e-4, atol=5e-7
        )  # float32 loglam, as in SDSS files
    else:
        # DESI arms are linear 0.8 A grids, merged by the reader where they overlap.
        assert s.meta.survey == "DESI" and s.meta.extra["arms"] == ["B", "R", "Z"]
        assert np.allclose(np.diff(s.wavelength)[:100], 0.8)


def test_survey_redshift_moves_a_template_and_pipeline_z_is_written(tmp_path):
    w = np.arange(1000.0, 6000.0, 0.5)
    f = 10.0 + 50.0 * np.exp(-0.5 * ((w - 2799.0) / 20.0) ** 2)  # Mg II-like broad line
    obs = observe_survey(
        Spectrum(w, f),
        "sdss",
        snr=30,
        redshift=1.27,
        rng=np.random.default_rng(3),
        catastrophic_z=0.0,
        sky_residual=0.0,
    )
    s = load_one(write_survey(obs, tmp_path / "spec.fits", "q"))
    assert s.redshift == pytest.approx(1.27, abs=0.002)
    peak = s.wavelength[np.argmax(np.where(s.good, s.flux, 0))]
    assert peak == pytest.approx(2799.0 * 2.27, abs=15)


def test_bad_columns_and_uncovered_arms_are_masked(tmp_path):
    w = np.arange(4000.0, 7000.0, 0.5)  # nothing for the DESI Z arm
    obs = observe_survey(
        Spectrum(w, np.full_like(w, 30.0)),
        "desi",
        snr=10,
        rng=np.random.default_rng(1),
        bad_column_rate=1.0,
    )
    assert any(a.bad[np.isfinite(a.flux) & (a.ivar == 0) & (a.flux != 0)].any() for a in obs.arms)
    s = load_one(write_survey(obs, tmp_path / "c.fits", "d"))
    assert not s.good[s.wavelength > 7100].any()
    assert np.all(np.abs(s.flux[s.good]) < 30 * 20)  # flagged garbage never reaches the data
