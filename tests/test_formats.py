"""Each layout Loupe reads, written by the test (or by Loupe's own writer) and read back."""

from __future__ import annotations

import numpy as np
import pytest

from agent.formats import load_one, write_lamost_fits
from agent.spectrum import Spectrum, SpectrumMeta, read_spectra


def synthetic(n: int = 3000, seed: int = 0, log: bool = True, frame: str = "vacuum") -> Spectrum:
    """A seeded LAMOST-like spectrum: sloped continuum, one absorption line, noise."""
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(n)) if log else np.linspace(3700, 9000, n)
    flux = 1.0 + wave / 1e4 - 0.5 * np.exp(-0.5 * ((wave - 6564.6) / 4) ** 2)
    flux += rng.normal(0, 0.01, n)
    ivar = np.full(n, 1e4)
    ivar[10:15] = 0  # a masked stretch
    meta = SpectrumMeta(
        id="demo-1",
        survey="simulated",
        ra=10.5,
        dec=-3.25,
        snr=42.0,
        survey_class="STAR",
        survey_subclass="M0",
        simulated=True,
    )
    return Spectrum(wave, flux, ivar=ivar, frame=frame, redshift=0.001, meta=meta)


@pytest.mark.parametrize("layout", ["image", "table"])
def test_lamost_writer_round_trip(tmp_path, layout):
    spec = synthetic()
    path = write_lamost_fits(spec, tmp_path / f"lamost-{layout}.fits", layout=layout)
    back = load_one(path)
    assert back.meta.survey == "LAMOST"
    assert back.meta.id == "demo-1" and back.meta.obsid == "demo-1"
    assert back.frame == "vacuum"
    assert back.meta.simulated
    assert back.meta.survey_class == "STAR" and back.meta.survey_subclass == "M0"
    assert back.meta.ra == pytest.approx(10.5) and back.meta.dec == pytest.approx(-3.25)
    assert back.meta.snr == pytest.approx(42.0)
    assert back.redshift == pytest.approx(0.001)
    assert back.meta.source == str(path) and back.meta.hdu == (0 if layout == "image" else 1)
    np.testing.assert_allclose(back.wavelength, spec.wavelength, rtol=1e-6)
    np.testing.assert_array_equal(back.mask, spec.mask)
    good = spec.good
    np.testing.assert_allclose(back.flux[good], spec.flux[good], rtol=1e-6)
    np.testing.assert_allclose(back.ivar[good], spec.ivar[good], rtol=1e-6)


def test_lamost_writer_resamples_linear_grid_and_converts_air(tmp_path):
    spec = synthetic(log=False, frame="air")
    back = load_one(write_lamost_fits(spec, tmp_path / "air.fits"))
    step = np.diff(np.log10(back.wavelength))
    np.testing.assert_allclose(step, 1e-4, rtol=1e-6)
    assert back.frame == "vacuum"
    # H-alpha absorption placed at 6564.6 A in the air frame lands ~1.8 A redder in vacuum.
    line = back.wavelength[np.argmin(np.where(back.good, back.flux - back.wavelength / 1e4, 9))]
    assert 6564.6 + 1.0 < line < 6564.6 + 3.0


def test_lamost_writer_gzipped_file_reads(tmp_path):
    import gzip

    path = write_lamost_fits(synthetic(), tmp_path / "x.fits")
    gz = tmp_path / "x.fits.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert len(read_spectra(gz)) == 1


def test_lamost_writer_rejects_unknown_layout(tmp_path):
    with pytest.raises(ValueError, match="layout"):
        write_lamost_fits(synthetic(), tmp_path / "x.fits", layout="cube")
