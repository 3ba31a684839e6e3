"""Each layout Loupe reads, written by the test (or by Loupe's own writer) and read back."""

from __future__ import annotations

import gzip

import fits_factory
import numpy as np
import pytest
from astropy.io import fits

from agent.candidates import expand_candidates, read_candidates
from agent.formats import load_one, read_file, read_spectra, sniff, write_lamost_fits
from agent.formats.desi import merge_arms
from agent.spectrum import Spectrum, SpectrumError, SpectrumMeta


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
    assert back.meta.survey == "simulated"  # SIMULATE = T wins over the layout
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


# -- SDSS ---------------------------------------------------------------------------------
def test_sdss_spec(tmp_path):
    path = fits_factory.write_sdss_spec(tmp_path)
    spec = load_one(path)
    m = spec.meta
    assert (m.id, m.survey, m.survey_class, m.survey_subclass) == (
        "1234-56789-0042", "SDSS", "STAR", "CV",
    )  # fmt: skip
    assert spec.frame == "vacuum" and m.hdu == 1 and m.source == str(path)
    assert spec.redshift == pytest.approx(0.0002) and m.snr == pytest.approx(17.5)
    assert m.ra == pytest.approx(150.25)
    assert spec.wavelength[0] == pytest.approx(10**3.5682, rel=1e-6)
    assert spec.mask[100:110].all(), "NODATA pixels are masked"
    assert not spec.mask[200:210].any(), "BRIGHTSKY pixels stay visible"


# -- DESI ---------------------------------------------------------------------------------
def test_desi_coadd_one_spectrum_per_target_with_arms_merged(tmp_path):
    path = fits_factory.write_desi_coadd(tmp_path, nspec=3)
    spectra = read_file(path)
    assert [s.meta.row for s in spectra] == [0, 1, 2]
    assert [s.meta.id for s in spectra] == [str(39600000000000 + i) for i in range(3)]
    s0 = spectra[0]
    assert s0.meta.survey == "DESI" and s0.frame == "vacuum"
    assert s0.wavelength[0] == pytest.approx(3600.0) and s0.wavelength[-1] > 9800
    assert np.all(np.diff(s0.wavelength) > 0)
    # REDSHIFTS is in reverse TARGETID order: matched by TARGETID, not by position.
    assert spectra[2].redshift == pytest.approx(0.5) and spectra[2].meta.survey_class == "QSO"
    assert s0.redshift == pytest.approx(0.0) and s0.meta.survey_class == "STAR"
    # In the B/R overlap both arms contribute: ivar adds up (400 + 100).
    overlap = (s0.wavelength > 5770) & (s0.wavelength < 5790)
    np.testing.assert_allclose(s0.ivar[overlap], 500.0, rtol=1e-5)
    only_b = (s0.wavelength > 4000) & (s0.wavelength < 4100)
    np.testing.assert_allclose(s0.ivar[only_b], 400.0, rtol=1e-5)
    # The weighted mean sits on the model continuum (1 + w/1e4) within the noise.
    np.testing.assert_allclose(s0.flux[overlap], 1 + s0.wavelength[overlap] / 1e4, atol=0.03)
    # Masked pixels at the start of each arm: the B start is bad, the R start is covered by B.
    assert s0.mask[:5].all()


def test_desi_merge_weights_by_inverse_variance():
    w = np.array([1.0, 2.0, 3.0])
    grid, flux, ivar = merge_arms([w, w], [np.full(3, 1.0), np.full(3, 3.0)],
                                  [np.full(3, 3.0), np.full(3, 1.0)])  # fmt: skip
    np.testing.assert_allclose(flux, 1.5)  # (3*1 + 1*3) / 4
    np.testing.assert_allclose(ivar, 4.0)


def test_desi_row_picks_one_target(tmp_path):
    path = fits_factory.write_desi_coadd(tmp_path, nspec=4, redshifts=False)
    spec = load_one(path, row=3)
    assert spec.meta.row == 3 and spec.meta.id == str(39600000000003)
    with pytest.raises(SpectrumError, match="holds 4 spectra"):
        load_one(path)


# -- generic images and templates ---------------------------------------------------------
def test_linear_wcs_image_defaults_to_air(tmp_path):
    spec = load_one(fits_factory.write_wcs_image(tmp_path))
    assert spec.frame == "air" and spec.meta.id == "star"
    assert spec.wavelength[0] == pytest.approx(3700.0)
    assert spec.wavelength[1] - spec.wavelength[0] == pytest.approx(5.4)


def test_wcs_image_cd_crpix_and_header_frame(tmp_path):
    path = fits_factory.write_wcs_image(tmp_path, CD1_1=2.0, CRPIX1=11, CRVAL1=5000.0,
                                        AIRORVAC="vac")  # fmt: skip
    path_h = fits.open(path)
    del path_h[0].header["CDELT1"]
    path_h.writeto(path, overwrite=True)
    spec = load_one(path)
    assert spec.wavelength[10] == pytest.approx(5000.0) and spec.frame == "vacuum"


def test_log_wcs_image_dc_flag(tmp_path):
    spec = load_one(fits_factory.write_wcs_image(tmp_path, log=True))
    assert spec.wavelength[0] == pytest.approx(10**3.5682)
    np.testing.assert_allclose(np.diff(np.log10(spec.wavelength)), 1e-4, rtol=1e-6)


def test_wcs_image_in_nanometres(tmp_path):
    path = fits_factory.write_wcs_image(tmp_path, CRVAL1=370.0, CDELT1=0.54, CUNIT1="nm")
    assert load_one(path).wavelength[0] == pytest.approx(3700.0)


def test_miles_header_means_air(tmp_path):
    path = fits_factory.write_wcs_image(tmp_path, TPLLIB="MILES")
    spec = load_one(path)
    assert spec.meta.survey == "MILES" and spec.frame == "air"


def test_template_rows_named_by_namei(tmp_path):
    path = fits_factory.write_template_rows(tmp_path)
    spectra = read_file(path)
    assert [s.meta.id for s in spectra] == ["A0", "Carbon", "WD"]
    assert [s.meta.row for s in spectra] == [0, 1, 2] and spectra[0].frame == "vacuum"
    one = load_one(path, hdu=0, row=1)
    assert one.meta.id == "Carbon" and one.meta.hdu == 0


# -- tables and text ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "wave_col,flux_col,err_col",
    [("WAVELENGTH", "FLUX", "ERROR"), ("wave", "flux", "ivar"), ("Lambda", "Flux", "SIGMA"),
     ("WAVE", "FLAM", "STATERROR"), ("lambda", "flux", None)],
)  # fmt: skip
def test_fits_table_column_names(tmp_path, wave_col, flux_col, err_col):
    path = fits_factory.write_fits_table(tmp_path, wave_col=wave_col, flux_col=flux_col,
                                         err_col=err_col)  # fmt: skip
    spec = load_one(path)
    assert spec.wavelength[0] == pytest.approx(3700.0) and spec.meta.hdu == 1
    if err_col is None:
        assert spec.ivar is None
    else:
        assert spec.ivar is not None and np.all(spec.ivar > 0)


def test_fits_table_loglam_and_units_and_descending(tmp_path):
    loglam = fits_factory.write_fits_table(tmp_path, name="a.fits", wave_col="LOGLAM", unit=None)
    with pytest.raises(SpectrumError, match="out of range"):
        load_one(loglam)  # linear values in a LOGLAM column are refused, not exponentiated
    nm = fits_factory.write_fits_table(tmp_path, name="b.fits", unit="nm")
    assert load_one(nm).wavelength[0] == pytest.approx(37000.0)
    desc = load_one(fits_factory.write_fits_table(tmp_path, name="c.fits", descending=True))
    assert desc.wavelength[0] == pytest.approx(3700.0) and np.all(np.diff(desc.wavelength) > 0)


def test_calspec_style_table_is_vacuum(tmp_path):
    path = fits_factory.write_fits_table(tmp_path, primary_cards={"DBTABLE": "CRSPECTRUM"})
    spec = load_one(path)
    assert spec.frame == "vacuum" and spec.meta.survey == "CALSPEC"


@pytest.mark.parametrize("header,sep,columns", [(True, ",", 3), (False, " ", 2),
                                                (False, "\t", 3), (True, " ", 2)])  # fmt: skip
def test_text_spectra(tmp_path, header, sep, columns):
    path = fits_factory.write_csv(tmp_path, name="s.dat", header=header, sep=sep, columns=columns)
    spec = load_one(path)
    assert spec.wavelength.size == 500 and spec.frame == "air"
    assert (spec.ivar is not None) == (columns == 3)
    if columns == 3:
        np.testing.assert_allclose(spec.ivar, 1e4, rtol=1e-3)  # third column = 1-sigma error


def test_ecsv_keeps_frame_from_meta(tmp_path):
    spec = load_one(fits_factory.write_ecsv(tmp_path))
    assert spec.frame == "vacuum" and np.allclose(spec.ivar, 1e4)


def test_sniffs_content_not_extension(tmp_path):
    fits_file = fits_factory.write_sdss_spec(tmp_path)
    disguised = tmp_path / "looks-like-text.txt"
    disguised.write_bytes(fits_file.read_bytes())
    assert load_one(disguised).meta.survey == "SDSS"
    assert sniff(disguised) == "fits"
    gz = tmp_path / "no-suffix"
    gz.write_bytes(gzip.compress(fits_file.read_bytes()))
    assert sniff(gz) == "fits" and load_one(gz).meta.id == "1234-56789-0042"


# -- SpecVI-Bench parquet -----------------------------------------------------------------
@pytest.mark.parametrize("as_json", [False, True])
def test_specvi_parquet_rows(tmp_path, as_json):
    records = [fits_factory.specvi_record(i, s, lab, as_json=as_json)
               for i, (s, lab) in enumerate([("cv", "YES"), ("carbon", "NO"), ("gm", "YES")])]  # fmt: skip
    path = fits_factory.write_specvi_parquet(tmp_path, records=records)
    spectra = read_file(path)
    assert [s.meta.id for s in spectra] == [f"spec-55862-B6212_sp06-{i:03d}" for i in range(3)]
    assert spectra[1].redshift == pytest.approx(0.001) and spectra[0].frame == "vacuum"
    assert load_one(path, row=2).meta.row == 2
    refs = expand_candidates([str(path)], task=None)
    assert [(r.task, r.label, r.row) for r in refs] == [
        ("cv", "YES", 0), ("carbon", "NO", 1), ("m_giant", "YES", 2),
    ]  # fmt: skip
    assert refs[2].load().meta.id == refs[2].id


# -- candidates ---------------------------------------------------------------------------
def test_catalogue_csv_relative_paths_labels_and_rows(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    fits_factory.write_template_rows(data)
    write_lamost_fits(synthetic(), data / "a.fits")
    cat = tmp_path / "cat.csv"
    cat.write_text(
        "path,task,id,hdu,row,label,note\n"
        "data/a.fits,wd,first,,,yes,bright\n"
        "data/spEigenStar-test.fits,cc,,0,1,0,\n"
        "data/a.fits,cv,third,,,TRUE,\n"
        "data/a.fits,cv,fourth,,,,\n"
    )
    refs = read_candidates(cat)
    assert [r.id for r in refs] == ["first", "spEigenStar-test-1", "third", "fourth"]
    assert [r.label for r in refs] == ["YES", "NO", "YES", None]
    assert [r.task for r in refs] == ["wd", "carbon", "cv", "cv"]
    assert refs[0].extra == (("note", "bright"),)
    assert refs[1].load().meta.id == "spEigenStar-test-1"
    assert np.allclose(refs[1].load().flux, read_file(data / "spEigenStar-test.fits")[1].flux)


def test_catalogue_csv_task_from_argument(tmp_path):
    write_lamost_fits(synthetic(), tmp_path / "a.fits")
    cat = tmp_path / "cat.csv"
    cat.write_text("path\na.fits\n")
    assert read_candidates(cat, task="wd")[0].task == "wd"
    with pytest.raises(SpectrumError, match="'task'") as err:
        read_candidates(cat)
    assert "cat.csv" in str(err.value)


def test_folder_glob_and_multi_spectrum_files(tmp_path):
    write_lamost_fits(synthetic(), tmp_path / "a.fits")
    (tmp_path / "sub").mkdir()
    fits_factory.write_template_rows(tmp_path / "sub")
    (tmp_path / "notes.csv").write_text("object,comment\nx,y\n")  # not a spectrum: skipped
    (tmp_path / "README").write_text("hello")
    refs = read_candidates(tmp_path, task="wd")
    assert sorted(r.id for r in refs) == ["A0", "Carbon", "WD", "demo-1"]
    rows = {r.id: (r.hdu, r.row) for r in refs}
    assert rows["Carbon"] == (0, 1) and rows["demo-1"] == (None, None)
    globbed = read_candidates(str(tmp_path / "**" / "*.fits"), task="cv")
    assert len(globbed) == 4 and {r.task for r in globbed} == {"cv"}
    with pytest.raises(SpectrumError, match="no task"):
        read_candidates(tmp_path / "a.fits")


def test_roots_refuse_traversal_and_symlinks(tmp_path):
    inside, outside = tmp_path / "data", tmp_path / "secret"
    inside.mkdir()
    outside.mkdir()
    write_lamost_fits(synthetic(), outside / "x.fits")
    write_lamost_fits(synthetic(), inside / "ok.fits")
    (inside / "link.fits").symlink_to(outside / "x.fits")
    cat = inside / "cat.csv"
    cat.write_text("path,task\nok.fits,wd\n../secret/x.fits,wd\n")
    with pytest.raises(SpectrumError, match="outside the allowed") as err:
        expand_candidates([str(cat)], None, roots=[inside])
    assert "cat.csv line 3" in str(err.value)
    with pytest.raises(SpectrumError, match="outside the allowed"):
        expand_candidates([str(inside / "link.fits")], "wd", roots=[inside])
    with pytest.raises(SpectrumError, match="outside the allowed"):
        expand_candidates([str(inside)], "wd", roots=[inside])  # the link inside the folder
    ok = expand_candidates([str(inside / "ok.fits")], "wd", roots=[inside])
    assert len(ok) == 1
