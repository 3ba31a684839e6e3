"""A pipeline redshift the spectrum refutes is set aside before anything is read: a white
dwarf that a survey pipeline fitted as a quasar at z = 2.4 is read at rest (and found), while
real quasars and galaxies keep the pipeline's value."""

from __future__ import annotations

import numpy as np
import pytest
from astropy.io import fits

from agent.formats import load_one
from agent.frame import checked, refutation
from agent.loop import run_batch
from agent.policies.rules import RulesPolicy
from agent.redshift import estimate, set_aside
from agent.spectrum import Spectrum
from agent.templates import builtin_templates
from tests.fits_factory import loglam_grid, write_sdss_spec

TEMPLATES = {t.name: t for t in builtin_templates()}
W = 10 ** loglam_grid(3600, c0=np.log10(3700.0))  # 3700-9100 A at 1e-4 dex


def _observed(name: str, z_true: float, z_pipeline: float, snr: float = 15.0, seed: int = 0):
    t = TEMPLATES[name]
    f = np.interp(W, t.wavelength * (1 + z_true), t.flux)
    sigma = float(np.median(f)) / snr
    noisy = f + np.random.default_rng(seed).normal(0, sigma, W.size)
    return Spectrum(W, noisy, ivar=np.full(W.size, sigma**-2), redshift=z_pipeline)


@pytest.mark.parametrize(
    "name,z_pipeline",
    [("DA white dwarf", 2.38), ("DA white dwarf", 0.6), ("A star", 1.7), ("M dwarf", 0.9)],
)
def test_a_star_given_a_quasar_redshift_is_read_at_rest(name, z_pipeline):
    s = checked(_observed(name, 0.0, z_pipeline))
    assert s.redshift == 0.0
    z, why = set_aside(s)
    assert z == pytest.approx(z_pipeline) and "star at rest" in why


@pytest.mark.parametrize(
    "name,z", [("QSO", 0.8), ("QSO", 1.6), ("QSO", 2.4), ("galaxy, passive", 0.25)]
)
def test_quasars_and_galaxies_keep_the_pipeline_redshift(name, z):
    for snr in (8.0, 20.0):
        s = _observed(name, z, z, snr=snr)
        assert refutation(s) is None
        assert checked(s) is s


def test_a_check_that_cannot_run_keeps_the_pipeline_value(monkeypatch):
    import agent.xcorr

    def broken(arr):
        raise FloatingPointError("boom")

    monkeypatch.setattr(agent.xcorr, "correlate", broken)
    s = _observed("DA white dwarf", 0.0, 2.38)
    assert checked(s) is s


def test_a_stellar_pipeline_redshift_is_not_checked():
    s = _observed("DA white dwarf", 0.0, 0.0003)
    assert checked(s) is s


def test_the_reader_sets_it_aside_and_the_inspector_finds_the_white_dwarf(tmp_path):
    path = write_sdss_spec(tmp_path)
    da = TEMPLATES["DA white dwarf"]
    with fits.open(path, mode="update") as hdul:
        wave = 10 ** hdul["COADD"].data["loglam"].astype(float)
        flux = np.interp(wave, da.wavelength, da.flux)
        rng = np.random.default_rng(1)
        hdul["COADD"].data["flux"] = flux + rng.normal(0, np.median(flux) / 20, wave.size)
        hdul["COADD"].data["ivar"] = np.full(wave.size, (np.median(flux) / 20) ** -2)
        hdul["SPECOBJ"].data["Z"] = [2.38]
        hdul["SPECOBJ"].data["CLASS"] = ["QSO"]
    spec = load_one(path)
    assert spec.redshift == 0.0 and spec.meta.extra["pipeline_z"] == pytest.approx(2.38)
    r = estimate(spec)
    assert not r.extragalactic and r.set_aside is not None
    assert "pipeline gives z = 2.380" in r.describe() and "set it aside" in r.describe()
    (traj,) = run_batch([(spec, "wd")], RulesPolicy())
    assert traj.state == "done" and traj.verdict == "YES", traj.explanation
    assert "set it aside" in traj.steps[0].thought
    assert traj.redshift["value"] == pytest.approx(0.0, abs=0.005)
    # The expert's desk names the source of the agent's z and the value it set aside.
    from app.pages import desk

    note = desk.agent_z_note(spec, traj)
    assert "file's Z 2.3800 set aside" in note and "star at rest" in note
