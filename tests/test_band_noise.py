"""Band indices with their own noise: a TiO reading within its noise is a can't-tell, and a
carbon star's C2 bands do not pass for a quasar's emission lines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent import redshift
from agent.policies.rules import inspect, measure_all
from agent.policies.rules.contradiction import found
from agent.policies.rules.policy import explanation, final_thought
from agent.spectrum import Spectrum
from training.degrade import degrade

W = np.arange(3600.0, 9300.0, 0.5)


def _planck(teff: float) -> np.ndarray:
    x = 1.4388e8 / (W * teff)
    return 1.0 / (W**5 * np.expm1(x))


def _survey(flux, snr, seed):
    return degrade(Spectrum(W, flux), snr=snr, rv_kms=30.0, flux_cal_error=0.05, rng=seed)


def k_giant_with_weak_tio(head: float = 0.09, tio5: float = 0.76) -> np.ndarray:
    """A K5-M0 giant at the K/M boundary: a ~3900 K continuum, the TiO 7054 head's log jump
    near the 0.08 below which the head counts as absent, the TiO5 band (7126-7135 Å) a
    little deeper, and no CaH (a giant's gravity)."""
    f = _planck(3900.0)
    band = (W > 7054.0) & (W < 7300.0)
    f = np.where(band, f * math.exp(-head), f)
    core = (W > 7110.0) & (W < 7150.0)
    return np.where(core, f * tio5 / math.exp(-head), f)


def m_giant(head: float = 0.35, tio5: float = 0.45) -> np.ndarray:
    f = _planck(3600.0)
    for h0, span in ((6159.0, 120.0), (7054.0, 250.0)):
        band = (W > h0) & (W < h0 + span)
        f = np.where(band, f * math.exp(-head), f)
    core = (W > 7110.0) & (W < 7150.0)
    return np.where(core, f * tio5 / math.exp(-head), f)


def _text(v) -> str:
    return final_thought(v, None) + " " + explanation(v)


@pytest.mark.parametrize("seed", range(6))
def test_a_tio_reading_within_its_noise_is_not_a_confident_m_giant(seed):
    # Once: a K giant whose TiO 7054 head read 0.096 +- 0.020 (its bound 0.08) was called an
    # M giant at P(YES) 0.995; whether it is an M star at all was within the noise.
    v = inspect(_survey(k_giant_with_weak_tio(), snr=12, seed=seed), "m_giant")
    assert 0.05 < v.p_yes < 0.95, (v.p_yes, v.evidence.notes)
    assert v.evidence.undecided, v.evidence.notes
    assert "within its own noise" in _text(v)
    assert not found("m_giant", v.p_yes, _text(v))


def test_the_same_tio_at_high_snr_is_read_as_it_stands():
    # With errors ten times smaller, the reading is clear of its bound either way: no doubt.
    m = measure_all(_survey(k_giant_with_weak_tio(head=0.14, tio5=0.7), snr=150, seed=0))
    assert m["tio_7054_err"] < 0.01 and m["tio5_err"] < 0.01
    v = inspect(_survey(k_giant_with_weak_tio(head=0.14, tio5=0.7), snr=150, seed=0), "m_giant")
    assert not v.evidence.undecided, v.evidence.notes


@pytest.mark.parametrize("seed", range(3))
def test_a_clear_m_giant_at_low_snr_keeps_its_answer(seed):
    v = inspect(_survey(m_giant(), snr=12, seed=seed), "m_giant")
    assert not v.evidence.undecided, v.evidence.notes
    assert v.answer == "YES", v.evidence.notes


def test_index_errors_follow_the_flux_errors():
    from agent.measure import Arrays, flux_ratio_error, head_jump, head_jump_error

    w = np.arange(7000.0, 7200.0, 1.0)
    f = np.where(w > 7054, 0.8, 1.0)
    for snr in (10.0, 40.0):
        a = Arrays(w, f, np.ones_like(w, bool), np.full_like(w, snr**2))
        e_ratio = flux_ratio_error(a, (7126, 7135), (7042, 7046))
        e_head = head_jump_error(a, 7054.0, "red")
        assert head_jump(a, 7054.0, "red") == pytest.approx(math.log(1 / 0.8))
        # A ratio of means over 10 and 5 pixels; a log ratio of medians over ~25 each.
        assert e_ratio == pytest.approx(
            0.8 * math.hypot(1 / 0.8 / snr / 10**0.5, 1 / snr / 5**0.5), rel=0.01
        )
        assert e_head == pytest.approx(
            math.sqrt(math.pi / 2) * math.hypot(1 / 0.8, 1.0) / snr / 25**0.5, rel=0.1
        )


def carbon_star() -> np.ndarray:
    """A cool carbon star: C2 Swan bands shading blueward from their heads at 4737, 5165
    and 5636 Å (the flux steps down blueward of each head), on a ~3000 K continuum."""
    f = _planck(3000.0)
    for head in (4737.0, 5165.0, 5636.0):
        band = (W > head - 150.0) & (W < head)
        f = np.where(band, f * np.exp(-0.6 * (1 - (head - W) / 150.0)), f)
    return f


def test_a_redshift_on_the_peaks_between_c2_bands_is_set_aside(monkeypatch):
    # Once: a carbon star at SNR 5 was answered NO at P(YES) 0.01, the flux peaks between its
    # C2 bands fitted as broad emission lines of a galaxy at z = 1.37.
    fake = redshift.Redshift(
        1.368,
        "high",
        "emission lines",
        lines=[("C III] 1909", 4511.0), ("[O II] 3727", 8831.0)],
        kind="galaxy",
    )
    monkeypatch.setattr(redshift, "estimate", lambda spectrum, arr: fake)
    spec = _survey(carbon_star(), snr=8, seed=0)
    m = measure_all(spec)
    assert "C2 bands" in m.unreliable.get("redshift", ""), m.unreliable
    assert m.redshift.source != "emission lines"
    v = inspect(spec, "carbon", m)
    assert not any("fit one redshift" in n for n in v.evidence.notes), v.evidence.notes


def faint_carbon_star(d5165: float = 0.05, others: float = 0.5) -> np.ndarray:
    """A carbon star whose C2 5165 head is weak beside strong 4737 and 5636 heads."""
    f = _planck(3000.0)
    for head, d in ((4737.0, others), (5165.0, d5165), (5636.0, others)):
        band = (W > head - 150.0) & (W < head)
        f = np.where(band, f * np.exp(-d * (1 - (head - W) / 150.0)), f)
    return f


@pytest.mark.parametrize("seed", [0, 3, 4, 8])
def test_a_c2_5165_head_lost_in_the_noise_is_a_cant_tell_when_the_other_heads_stand(seed):
    # At SNR 8 these realisations read the 5165 head under 0.03 ("no C2", -2.5) within 1-2
    # sigma of a weak band, while the 4737 and 5636 heads step 0.3-0.7: the answer leaned
    # to NO beyond the base rate. Combined, the heads say C2 may well be there.
    spec = _survey(faint_carbon_star(), snr=8, seed=seed)
    m = measure_all(spec)
    assert m["c2_5165"] < 0.03
    v = inspect(spec, "carbon", m)
    assert v.evidence.undecided, v.evidence.notes
    assert 0.2 < v.p_yes < 0.95
    assert "cannot be told" in _text(v)
    assert not found("carbon", v.p_yes, _text(v))


@pytest.mark.parametrize("seed", range(3))
def test_an_m_giant_without_c2_gets_no_c2_doubt(seed):
    # TiO is a decisive reading against a carbon star: no can't-tell is made of it.
    v = inspect(_survey(m_giant(), snr=8, seed=seed), "carbon")
    assert not v.evidence.undecided
    assert v.p_yes < 0.3


def s_star_at_the_bound(zro: float = 0.29) -> np.ndarray:
    """An M giant whose ZrO 6474 head steps `zro` (log): 0.29 puts it about 2.6 sigma of
    the M giants' scatter above theirs at this TiO, at the S-star bound of 2.5."""
    f = m_giant()
    band = (W > 6474.0) & (W < 6574.0)
    return np.where(band, f * math.exp(-zro), f)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_zro_excess_within_its_noise_of_the_s_bound_is_no_confident_answer(seed):
    # Once: a star whose ZrO 6474 stood 3.0 sigma above an M giant's (the bound 2.5, the
    # head's own error 0.3 sigma) was called an S star at P(YES) 0.97.
    spec = _survey(s_star_at_the_bound(), snr=12, seed=seed)
    m = measure_all(spec)
    for task in ("s_type", "m_giant"):
        v = inspect(spec, task, m)
        assert v.evidence.undecided.startswith("the ZrO excess"), (task, v.evidence.notes)
        assert 0.05 < v.p_yes < 0.95, (task, v.p_yes)
        assert "ZrO cannot tell an S star from an M giant" in _text(v)
        assert not found(task, v.p_yes, _text(v))


def test_a_strong_zro_excess_stays_an_s_star():
    v = inspect(_survey(s_star_at_the_bound(zro=0.6), snr=12, seed=0), "s_type")
    assert not v.evidence.undecided and v.p_yes > 0.95, v.evidence.notes
