"""The Spectrum record: validation, masking, frames and the JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.spectrum import Spectrum, SpectrumError, SpectrumMeta, air_to_vacuum, vacuum_to_air


def make(n=50, **kw):
    wave = np.linspace(4000, 5000, n)
    return Spectrum(wave, np.ones(n), **kw)


def test_air_to_vacuum_h_alpha():
    assert air_to_vacuum(np.array([6562.80]))[0] == pytest.approx(6564.61, abs=0.01)
    assert air_to_vacuum(np.array([4861.35]))[0] == pytest.approx(4862.71, abs=0.02)
    # Below 2000 A wavelengths are vacuum by convention and stay unchanged.
    assert air_to_vacuum(np.array([1500.0]))[0] == 1500.0


def test_vacuum_air_round_trip():
    w = np.linspace(3000, 10000, 200)
    np.testing.assert_allclose(air_to_vacuum(vacuum_to_air(w)), w, atol=2e-3)


def test_rest_wavelength_uses_frame_and_redshift():
    s = Spectrum(np.array([6562.80, 6600.0]), np.ones(2), frame="air", redshift=0.01)
    assert s.rest_wavelength()[0] == pytest.approx(6564.61 / 1.01, abs=0.01)
    v = Spectrum(np.array([6564.61, 6600.0]), np.ones(2))
    assert v.vacuum_wavelength()[0] == 6564.61


def test_bad_pixels_are_masked_not_errors():
    flux = np.ones(10)
    flux[1], flux[2] = np.nan, np.inf
    ivar = np.ones(10)
    ivar[3], ivar[4] = -1.0, 0.0
    s = Spectrum(np.arange(10.0) + 4000, flux, ivar=ivar)
    assert s.mask.tolist() == [False, True, True, True, True] + [False] * 5
    assert np.isnan(s.error()[3])


@pytest.mark.parametrize(
    "wave,flux,ivar,match",
    [
        ([1.0, 2.0], [1.0], None, "equal length"),
        ([1.0], [1.0], None, "too few"),
        ([1.0, np.nan], [1.0, 1.0], None, "NaN"),
        ([2.0, 1.0], [1.0, 1.0], None, "strictly increasing"),
        ([1.0, 2.0], [np.nan, np.nan], None, "no valid"),
        ([1.0, 2.0], [1.0, 1.0], [0.0, -1.0], "no valid"),
        ([1.0, 2.0], [1.0, 1.0], [1.0], "ivar"),
    ],
)
def test_invalid_spectra_raise(wave, flux, ivar, match):
    with pytest.raises(SpectrumError, match=match):
        Spectrum(np.array(wave), np.array(flux), ivar=None if ivar is None else np.array(ivar))


def test_dict_round_trip_through_json():
    meta = SpectrumMeta(id="x1", survey="LAMOST", obsid="123", ra=1.5, dec=-2.0, snr=30.0,
                        survey_class="STAR", survey_subclass="M0", source="/a/b.fits",
                        hdu=0, row=None, simulated=True, extra={"k": [1, 2]})  # fmt: skip
    ivar = np.full(50, 4.0)
    ivar[3] = 0
    s = make(ivar=ivar, frame="air", redshift=0.02, meta=meta)
    back = Spectrum.from_dict(json.loads(json.dumps(s.to_dict(), allow_nan=True)))
    np.testing.assert_array_equal(back.wavelength, s.wavelength)
    np.testing.assert_array_equal(back.mask, s.mask)
    np.testing.assert_array_equal(back.flux[s.good], s.flux[s.good])
    np.testing.assert_array_equal(back.ivar, s.ivar)
    assert (back.frame, back.redshift, back.meta) == ("air", 0.02, meta)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.floats(-1e6, 1e6) | st.sampled_from([np.nan, np.inf, -np.inf]), min_size=2, max_size=40
    ),
    st.sampled_from(["air", "vacuum"]),
    st.floats(-0.05, 5.0),
)
def test_round_trip_property(flux, frame, z):
    flux = np.array(flux)
    if not np.isfinite(flux).any():
        return
    s = Spectrum(np.linspace(3000, 9000, flux.size), flux, frame=frame, redshift=z)
    back = Spectrum.from_dict(s.to_dict())
    np.testing.assert_array_equal(back.mask, s.mask)
    np.testing.assert_array_equal(back.flux[s.good], s.flux[s.good])
    assert back.frame == frame and back.redshift == z


def test_units_are_the_one_home_of_constants_and_conversions():
    import doctest

    import agent.spectrum
    import agent.tasks
    import agent.units
    from training import degrade

    assert doctest.testmod(agent.units).failed == 0
    assert doctest.testmod(agent.tasks).failed == 0
    assert agent.spectrum.air_to_vacuum is agent.units.air_to_vacuum
    assert degrade.lamost_grid is agent.units.lamost_grid and degrade.C_KMS == agent.units.C_KMS
