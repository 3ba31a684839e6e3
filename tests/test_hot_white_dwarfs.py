"""White dwarfs of every temperature, and answers that cannot tell handed off, not buried."""

from __future__ import annotations

import numpy as np
import pytest

from agent.policies.rules import inspect
from agent.policies.rules.contradiction import found
from agent.policies.rules.policy import explanation, final_thought
from agent.spectrum import Spectrum
from training.degrade import degrade

W = np.arange(3600.0, 9300.0, 0.5)
BALMER = (6564.6, 4862.7, 4341.7, 4102.9, 3971.2, 3890.2, 3836.5, 3799.0, 3771.7, 3751.2)


def _lorentz(centre, fwhm, depth):
    return depth / (1 + ((W - centre) / (fwhm / 2)) ** 2)


def _g(centre, fwhm, depth):
    return depth * np.exp(-0.5 * ((W - centre) / (fwhm / 2.3548)) ** 2)


def _survey(flux, snr=20, seed=0, wave=W):
    return degrade(Spectrum(wave, flux), snr=snr, rv_kms=40.0, flux_cal_error=0.05, rng=seed)


def hot_da(fwhm=38.0, depth=0.22):
    """A DA white dwarf near 40,000 K (DA1.2-DA1.5): a continuum at the Rayleigh-Jeans
    limit and Balmer lines shallow and 30-45 Å wide (its hydrogen mostly ionised), still
    pressure-broadened so that the lines beyond H8 merge."""
    f = (W / 5000.0) ** -4.0
    for c in BALMER:
        f = f * (1 - _lorentz(c, fwhm, depth))
    return f


def _thought_and_answer(v):
    return final_thought(v, None) + " " + explanation(v)


@pytest.mark.parametrize("snr,seed", [(8, 0), (12, 1), (20, 2), (35, 3)])
def test_a_hot_da_with_shallow_lines_under_50_angstrom_is_a_white_dwarf(snr, seed):
    # Once: DAs hotter than ~30,000 K were answered NO at P(YES) 0.00-0.02, their 30-45 Å
    # lines taken for a hot subdwarf's against a fixed 50 Å floor made for cooler DAs.
    v = inspect(_survey(hot_da(), snr=snr, seed=seed), "wd")
    assert v.answer == "YES", v.evidence.notes
    assert any("hotter than about 30,000 K" in n for n in v.evidence.notes), v.evidence.notes
    assert not found("wd", v.p_yes, _thought_and_answer(v))


def test_a_hot_subdwarfs_deeper_lines_of_that_width_stay_a_subdwarfs():
    # The gravity sign the hot DA test rests on: at that width a subdwarf's lines are
    # deeper (less ionised hydrogen at a gravity 100-1000 times lower).
    v = inspect(_survey(hot_da(fwhm=38.0, depth=0.45), snr=20), "wd")
    assert v.answer == "NO", v.evidence.notes
    assert any("lower gravity of a hot subdwarf" in n for n in v.evidence.notes)


def test_a_hot_da_width_without_the_high_series_is_a_cant_tell_not_a_confident_no():
    # The same hot DA seen only from 4000 Å (H8-H10 not covered): the line's width and depth
    # fit a hot DA and a hot subdwarf alike, so the answer is handed off near the base rate.
    keep = W >= 4000.0
    spec = _survey(hot_da()[keep], snr=20, wave=W[keep])
    v = inspect(spec, "wd")
    assert v.evidence.undecided, v.evidence.notes
    assert 0.05 < v.p_yes < 0.95
    text = _thought_and_answer(v)
    assert "cannot decide it" in text and "Undecided whether" in text
    assert not found("wd", v.p_yes, text)


def do_white_dwarf():
    """A DO white dwarf near 60,000 K: He II 4686 its strongest line, He II 5412 and 4541
    beside it, the Pickering lines at H-beta and H-gamma weak, no hydrogen, no He I."""
    f = (W / 5000.0) ** -4.0
    for c, d in ((4685.7, 0.3), (5411.5, 0.18), (4541.6, 0.1), (4859.3, 0.04), (4338.7, 0.04)):
        f = f * (1 - _g(c, 15.0, d))
    return f


@pytest.mark.parametrize("snr,seed", [(12, 0), (20, 1), (35, 2)])
def test_he_ii_4686_without_hydrogen_is_a_do_white_dwarf(snr, seed):
    v = inspect(_survey(do_white_dwarf(), snr=snr, seed=seed), "wd")
    assert v.answer == "YES", v.evidence.notes
    assert any("DO white dwarf" in n for n in v.evidence.notes), v.evidence.notes
    assert not found("wd", v.p_yes, _thought_and_answer(v))


def test_he_ii_beside_balmer_lines_is_no_do():
    # An sdO or O star: He II 4686 beside its Balmer lines (narrow, 15 Å, as FEIGE34's).
    f = do_white_dwarf()
    for c in BALMER:
        f = f * (1 - _g(c, 15.0, 0.25))
    v = inspect(_survey(f, snr=20), "wd")
    assert v.answer == "NO", v.evidence.notes
    assert not any("DO white dwarf" in n for n in v.evidence.notes)


def _m_giant(wave):
    f = (wave / 5000.0) ** 3.0
    for h in (4955.0, 5168.0, 5448.0, 6160.0, 7055.0, 7590.0, 8433.0):
        f = f * np.where((wave > h) & (wave < h + 150), 1 - 0.5 * np.exp(-(wave - h) / 120.0), 1.0)
    return f


@pytest.mark.parametrize("snr,seed", [(12, 0), (35, 1)])
def test_an_s_type_candidate_ending_before_lao_7403_is_a_cant_tell(snr, seed):
    # A library spectrum ending at 7380 Å (MILES-like) has no LaO 7403: its weak ZrO cannot
    # tell an MS/S star from an M giant, so the thought says it cannot decide, and P(YES)
    # is no surer than the base rate, not a confident NO.
    w = np.arange(3600.0, 7380.0, 0.5)
    spec = _survey(_m_giant(w), snr=snr, seed=seed, wave=w)
    v = inspect(spec, "s_type")
    assert v.evidence.undecided and "ends at" in v.evidence.undecided, v.evidence.notes
    x_prior = 1.795 * (-1.0) * (0.4 + 0.6 * v.evidence.coverage)
    assert v.p_yes >= 1 / (1 + np.exp(-x_prior)) - 1e-9
    text = _thought_and_answer(v)
    assert "LaO 7403" in text and "cannot decide it" in text
    assert not found("s_type", v.p_yes, text)
    # the same star with LaO covered is answered on what LaO shows
    full = inspect(_survey(_m_giant(W), snr=snr, seed=seed), "s_type")
    assert not full.evidence.undecided and full.answer == "NO"


def test_a_faint_m_giants_sodium_within_its_noise_of_a_giants_is_no_dwarf_veto():
    from agent.policies.rules.features import Measurements
    from agent.policies.rules.m_giant import evidence

    # An M giant of the tune split at SNR 8 (LAMOST): Na I EW 2.1 Å at 3.3 sigma, within 1.7
    # of its own sigma of a giant's 1.0 Å, had vetoed it as a dwarf at P(YES) 0.02.
    giant = {"tio5": 0.55, "tio_7054": 0.3, "cah3": 0.86, "snr": 8.0, "b_r": -0.4}
    faint = evidence(Measurements({**giant, "na8190_ew": 2.1, "na8190_sig": 3.3}))
    assert not any(i.decisive for i in faint.items), faint.notes
    # the same EW measured clearly (8 sigma) is a dwarf's, and vetoes
    clear = evidence(Measurements({**giant, "na8190_ew": 2.1, "na8190_sig": 8.0}))
    assert any(i.decisive and "as in a dwarf" in i.note for i in clear.items), clear.notes


def test_both_splits_hold_hot_das_and_a_helium_white_dwarf():
    import re

    from training import benchmark
    from training.benchmark.sources import load_sources, read_splits

    spectra = benchmark.DEFAULT_SPECTRA
    if not (spectra / "manifest.csv").exists():
        pytest.skip("../shared/spectra is not available")
    frozen = read_splits()
    hot, helium = {"tune": set(), "test": set()}, {"tune": set(), "test": set()}
    for s in load_sources(spectra):
        if s.label != "wd" or s.obj not in frozen:
            continue
        t = re.search(r"\bD([ABOQZC]+)(\d(?:\.\d)?)?", s.spectral_type)
        if t and t.group(1) == "A" and t.group(2) and float(t.group(2)) < 4.0:
            hot[frozen[s.obj]].add(s.obj)  # DA1-DA3: hotter than ~13,000 K
        if t and t.group(1).startswith("B"):
            helium[frozen[s.obj]].add(s.obj)  # DB, DBQ
    assert hot["tune"] and hot["test"], hot
    assert helium["tune"] and helium["test"], helium


def test_a_faint_db_whose_hydrogen_cannot_be_ruled_out_is_handed_off(shared_spectra, tmp_path):
    from agent.formats import load_one
    from training.sim.surveys import observe_survey, write_survey

    # Once: the DB white dwarf LTT9491 at SNR 5-12 was answered NO at P(YES) 0.015-0.03,
    # its He I too weak to read as a DB's and "no Balmer line above the noise" taken for no
    # white dwarf, while the noise could hide a line as deep as a white dwarf's.
    spec = load_one(shared_spectra / "calspec/ltt9491_002.fits.gz", hdu=1)
    seen = 0
    for k, (layout, snr) in [(2, ("lamost", 8)), (4, ("lamost", 8)), (5, ("lamost", 8))]:
        obs = observe_survey(spec, layout, snr=snr, rng=np.random.default_rng(k), rv_kms=20.0)
        v = inspect(load_one(write_survey(obs, tmp_path / f"{k}.fits", f"ltt9491-{k}")), "wd")
        if v.answer == "YES" or any(i.decisive for i in v.evidence.items):
            continue  # found (a DC reading), or a decisive reading such as a noise-made redshift
        # Its lines are within the noise: a NO is never a confident one.
        assert v.p_yes >= 0.05, (layout, snr, v.p_yes, v.evidence.notes)
        if v.evidence.undecided:
            assert "cannot decide it" in _thought_and_answer(v)
            seen += 1
    assert seen, "no realisation was a can't-tell"


def test_a_fitted_model_cannot_make_a_cant_tell_answer_confident():
    from agent.policies.rules import Evidence, Reading
    from agent.policies.rules.learned import InspectorModel, TaskModel

    # A combiner weighting the other readings (here a steep Platt map) would turn the hot-DA
    # width without its gravity sign into P(YES) 0.99 or 0.01; the can't-tell holds.
    ev = Evidence(undecided="the higher Balmer lines do not tell their gravity apart")
    ev.add(1.0, "a blue continuum")
    ev.checked = 1
    for x, p_rules in ((2.0, 0.9), (-2.0, 0.1)):
        v = Reading("wd", p_rules, ev, {}, doubt=ev.undecided)
        v.x = x
        out = InspectorModel(3, {"wd": TaskModel("platt", a=5.0, b=0.0)}).apply(v)
        assert 0.1 - 1e-9 <= out.p_yes <= 0.9 + 1e-9, (x, out.p_yes)


def dza_white_dwarf(ha_depth: float = 0.11) -> np.ndarray:
    """A DZ(A) white dwarf near 11,000 K: Ca II H and K its strongest lines, and of hydrogen
    only a shallow H-alpha (the trace hydrogen a helium atmosphere shows)."""
    x = 1.4388e8 / (W * 11000.0)
    f = 1.0 / (W**5 * np.expm1(x))
    for c, d in ((3934.8, 0.55), (3969.6, 0.45)):
        f = f * (1 - _g(c, 10.0, d))
    return f * (1 - _g(6564.6, 16.0, ha_depth))


@pytest.mark.parametrize("snr,seed", [(12, 0), (20, 1), (35, 2), (35, 3)])
def test_a_dz_whose_only_hydrogen_is_h_alpha_within_its_noise_is_handed_off(snr, seed):
    # Once: a calcium-line white dwarf was answered NO at P(YES) 0.001-0.008, "H-alpha is
    # there" (depth 0.11 +- 0.02, counted a line from 0.1) taken for an A/F/G star's hydrogen
    # while H-beta to H-delta were measured absent.
    v = inspect(_survey(dza_white_dwarf(), snr=snr, seed=seed), "wd")
    assert v.p_yes > 0.05, v.evidence.notes
    if any("H-alpha is there" in n for n in v.evidence.notes):
        assert v.evidence.undecided, v.evidence.notes
        assert "cannot be told" in _thought_and_answer(v)
    assert not found("wd", v.p_yes, _thought_and_answer(v))


def test_a_metal_line_star_with_clear_hydrogen_keeps_its_veto():
    # H-alpha far beyond its noise (depth 0.3): hydrogen is there, no DZ can't-tell.
    v = inspect(_survey(dza_white_dwarf(ha_depth=0.35), snr=35, seed=0), "wd")
    assert not v.evidence.undecided, v.evidence.notes
    assert v.p_yes < 0.5


def daz_white_dwarf_one_line() -> tuple[np.ndarray, np.ndarray]:
    """A DAZ near 14,000 K seen to 4700 Å with H-delta masked (bad columns): broad Balmer
    lines (H-gamma ~100 Å), the high series merged, and a Ca II K line of EW ~2 Å."""
    x = 1.4388e8 / (W * 14000.0)
    f = 1.0 / (W**5 * np.expm1(x))
    for c in BALMER:
        f = f * (1 - _lorentz(c, 110.0 * c / 4341.7, 0.35))
    f = f * (1 - _g(3934.8, 5.0, 0.35))
    f = np.where((W > 4040.0) & (W < 4170.0), np.nan, f)
    keep = W < 4700.0
    return W[keep], f[keep]


@pytest.mark.parametrize("snr,seed", [(12, 1), (20, 2), (12, 4)])
def test_a_dazs_calcium_line_beside_broad_merged_balmer_lines_is_no_a_star_sign(snr, seed):
    # Once: DAs whose one measured Balmer line was 130 Å wide, the high series merged, were
    # answered NO at P(YES) 0.50: a Ca II K line of EW 1.7 Å counted -1.5 as an A star's.
    wave, flux = daz_white_dwarf_one_line()
    v = inspect(_survey(flux, snr=snr, seed=seed, wave=wave), "wd")
    assert any("DAZ's metal line" in n for n in v.evidence.notes), v.evidence.notes
    assert v.answer == "YES", (v.p_yes, v.evidence.notes)
    assert not found("wd", v.p_yes, _thought_and_answer(v))
