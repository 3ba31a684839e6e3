"""Broken and hostile inputs: each is refused with a `SpectrumError` naming the file and the
problem, and no reader crashes or hangs on random or mutated bytes."""

from __future__ import annotations

import gzip
import io
import json
import os
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import fits_factory
import numpy as np
import pytest
from astropy.io import fits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.candidates import expand_candidates, read_candidates
from agent.formats import LIMITS, LimitError, load_one, read_file, read_spectra
from agent.formats.lamost import write_lamost_fits
from agent.spectrum import Spectrum, SpectrumError


def lamost_bytes() -> bytes:
    wave = 10 ** (3.5682 + 1e-4 * np.arange(300))
    buf = io.BytesIO()
    spec = Spectrum(wave, np.ones(300) + np.arange(300) * 1e-3, ivar=np.ones(300))
    path = Path("/tmp") / f"loupe-bad-{id(buf)}.fits"
    write_lamost_fits(spec, path)
    data = path.read_bytes()
    path.unlink()
    return data


LAMOST = lamost_bytes()


def image(tmp: Path, name: str, data, **cards) -> Path:
    hdu = fits.PrimaryHDU(data)
    hdu.header.update(cards)
    hdu.writeto(tmp / name)
    return tmp / name


def table(tmp: Path, name: str, **cols) -> Path:
    columns = [fits.Column(k, "D", array=np.asarray(v, float)) for k, v in cols.items()]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(columns)]).writeto(tmp / name)
    return tmp / name


def write(tmp: Path, name: str, data: bytes | str) -> Path:
    p = tmp / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def patch_card(data: bytes, key: str, value: int) -> bytes:
    """Rewrite one integer header card in place (same 80-byte card length)."""
    i = data.index(key.ljust(8).encode() + b"= ")
    card = f"{key:<8}= {value:>20}".ljust(80).encode()
    return data[:i] + card + data[i + 80 :]


def parquet(tmp: Path, name: str, records: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records), tmp / name)
    return tmp / name


def fifo(tmp: Path) -> Path:
    path = tmp / "pipe.fits"
    os.mkfifo(path)
    return path


def catalogue(tmp: Path, text: str | bytes) -> Path:
    write_lamost_fits(
        Spectrum(np.linspace(4000, 5000, 20), np.ones(20)), tmp / "ok.fits", layout="table"
    )
    return write(tmp, "cat.csv", text)


def desi(tmp: Path, mutate: Callable[[fits.HDUList], None]) -> Path:
    path = fits_factory.write_desi_coadd(tmp, nspec=3)
    with fits.open(path) as hdul:
        hdul = fits.HDUList([h.copy() for h in hdul])
    mutate(hdul)
    hdul.writeto(path, overwrite=True)
    return path


def dead_fibres(h: fits.HDUList) -> None:
    for arm in "BRZ":
        h[f"{arm}_IVAR"].data[:] = 0


def sdss_zero_ivar(tmp: Path) -> Path:
    path = fits_factory.write_sdss_spec(tmp)
    with fits.open(path, mode="update") as h:
        h[1].data["ivar"][:] = 0
    return path


def sdss_no_rows(tmp: Path) -> Path:
    path = fits_factory.write_sdss_spec(tmp)
    with fits.open(path) as h:
        cols = [fits.Column(c.name, c.format, array=np.zeros(0)) for c in h[1].columns]
        empty = fits.BinTableHDU.from_columns(cols, name="COADD")
        fits.HDUList([h[0].copy(), empty]).writeto(path, overwrite=True)
    return path


def lamost_negative_ivar(tmp: Path) -> Path:
    path = write(tmp, "neg.fits", LAMOST)
    with fits.open(path, mode="update") as h:
        h[0].data[1] = -1.0
    return path


def lamost_no_coeff(tmp: Path) -> Path:
    path = write(tmp, "nocoeff.fits", LAMOST)
    with fits.open(path, mode="update") as h:
        del h[0].header["COEFF1"]
    return path


def gzip_bomb(tmp: Path) -> Path:
    """20 MB of zeros in 20 kB of gzip, against a 1 MB inflate cap."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * 2**20
    out = b"".join(comp.compress(chunk) for _ in range(20)) + comp.flush()
    return write(tmp, "bomb.fits.gz", out)


def one_gb_upload(tmp: Path) -> Path:
    """A sparse 1 GB file: refused by size before a byte is read."""
    path = tmp / "upload.fits"
    with open(path, "wb") as fh:
        fh.truncate(2**30)
    return path


def specvi_rec(**extra_info) -> dict:
    rec = fits_factory.specvi_record(0)
    rec["extra_info"] = {**rec["extra_info"], **extra_info}
    return rec


# name -> (builder(tmp) returning path, read kwargs or callable, expected problem regex)
CASES: dict[str, tuple] = {
    "zero-byte FITS": (lambda t: write(t, "empty.fits", b""), {}, r"empty \(0 bytes\)"),
    "truncated FITS data": (lambda t: write(t, "cut.fits", LAMOST[:4000]), {}, "truncated"),
    "truncated FITS header": (
        lambda t: write(t, "head.fits", LAMOST[:1000]),
        {},
        "corrupt FITS|truncated",
    ),
    "not a FITS (text junk)": (
        lambda t: write(t, "junk.fits", "hello world\n"),
        {},
        "not a FITS file",
    ),
    "binary junk": (
        lambda t: write(t, "junk.bin", bytes(range(256)) * 4),
        {},
        "unknown binary format",
    ),
    "PNG image": (
        lambda t: write(t, "pic.fits", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + b"\0" * 64),
        {},
        "unknown binary format",
    ),
    "missing HDU index": (lambda t: write(t, "a.fits", LAMOST), {"hdu": 5}, "HDU 5 does not exist"),
    "missing HDU name": (
        lambda t: write(t, "a.fits", LAMOST),
        {"hdu": "FLUXES"},
        "'FLUXES' does not exist",
    ),
    "table HDU without spectrum columns": (
        fits_factory.write_sdss_spec,
        {"hdu": 2},
        "no wavelength and flux columns",
    ),
    "image expected, header-only HDU": (
        lambda t: fits_factory.write_fits_table(t),
        {"hdu": 0},
        "image HDU with no data",
    ),
    "row beyond template rows": (
        fits_factory.write_template_rows,
        {"hdu": 0, "row": 7},
        "row 7 does not exist",
    ),
    "row not an integer": (
        fits_factory.write_template_rows,
        {"hdu": 0, "row": "x"},
        "not an integer",
    ),
    "all-NaN flux": (
        lambda t: image(t, "nan.fits", np.full(50, np.nan), CRVAL1=4000.0, CDELT1=1.0),
        {},
        "no valid flux pixels",
    ),
    "all-inf flux": (
        lambda t: image(t, "inf.fits", np.full(50, np.inf), CRVAL1=4000.0, CDELT1=1.0),
        {},
        "no valid flux pixels",
    ),
    "negative ivar everywhere": (lamost_negative_ivar, {}, "no valid flux pixels"),
    "zero ivar everywhere (SDSS)": (sdss_zero_ivar, {}, "no valid flux pixels"),
    "non-monotonic wavelength": (
        lambda t: table(t, "nm.fits", WAVELENGTH=[1, 2, 5, 3, 4], FLUX=[1] * 5),
        {},
        "not monotonic",
    ),
    "duplicated wavelength": (
        lambda t: table(t, "dup.fits", WAVELENGTH=[4000, 4001, 4001, 4002], FLUX=[1] * 4),
        {},
        "duplicated wavelength",
    ),
    "duplicated wavelength in CSV": (
        lambda t: write(t, "dup.csv", "wavelength,flux\n4000,1\n4000,2\n4001,1\n"),
        {},
        "duplicated wavelength",
    ),
    "NaN wavelength": (
        lambda t: table(t, "nanw.fits", WAVELENGTH=[4000, np.nan, 4002], FLUX=[1] * 3),
        {},
        "wavelength contains NaN",
    ),
    "negative wavelength": (
        lambda t: table(t, "negw.fits", WAVELENGTH=[-2, -1, 4002], FLUX=[1] * 3),
        {},
        "must be positive",
    ),
    "zero-row table": (lambda t: table(t, "zero.fits", WAVELENGTH=[], FLUX=[]), {}, "no rows"),
    "zero-length SDSS coadd": (sdss_no_rows, {}, "no rows"),
    "single pixel": (
        lambda t: table(t, "one.fits", WAVELENGTH=[4000], FLUX=[1]),
        {},
        "too few pixels",
    ),
    "NAXIS1 = 10^10": (
        lambda t: write(t, "huge.fits", patch_card(LAMOST, "NAXIS1", 10**10)),
        {},
        "over the .* limit",
    ),
    "table NAXIS2 = 10^9": (
        lambda t: write(
            t,
            "rows.fits",
            patch_card(fits_factory.write_fits_table(t).read_bytes(), "NAXIS2", 10**9),
        ),
        {},
        "over the .* limit",
    ),
    "1 GB upload": (one_gb_upload, {}, "over the .*-byte limit"),
    "gzip bomb": (gzip_bomb, {"limit": 2**20}, "gzip bomb"),
    "corrupt gzip": (
        lambda t: write(t, "bad.fits.gz", b"\x1f\x8b\x08\x00" + b"junk" * 50),
        {},
        "corrupt or truncated gzip",
    ),
    "truncated gzip": (
        lambda t: write(t, "cut.fits.gz", gzip.compress(LAMOST)[:500]),
        {},
        "corrupt or truncated gzip",
    ),
    "gzipped non-UTF-8 text": (
        lambda t: write(t, "x.gz", gzip.compress(b"a\xff\xfe b\n")),
        {},
        "gzip holding non-UTF-8 text",
    ),
    "corrupt parquet": (
        lambda t: write(t, "bad.parquet", b"PAR1" + b"\x01" * 100),
        {},
        "unreadable parquet",
    ),
    "parquet without extra_info": (
        lambda t: parquet(t, "p.parquet", [{"a": 1}]),
        {},
        "lacks the SpecVI-Bench column",
    ),
    "parquet row without create_kwargs": (
        lambda t: parquet(t, "p.parquet", [{"extra_info": {"name": "x", "index": 0}}]),
        {},
        "no extra_info.tools_kwargs",
    ),
    "parquet extra_info not JSON": (
        lambda t: parquet(t, "p.parquet", [{"extra_info": "{not json"}]),
        {},
        "not valid JSON",
    ),
    "parquet row out of range": (
        lambda t: parquet(t, "p.parquet", [fits_factory.specvi_record(0)]),
        {"row": 9},
        "row 9 does not exist",
    ),
    "parquet NaN-only flux": (
        lambda t: parquet(
            t,
            "p.parquet",
            [
                specvi_rec(
                    tools_kwargs={
                        "spectral_visualization_tool": {
                            "create_kwargs": {
                                "flux": [None] * 5,
                                "wavelength": [1.0, 2, 3, 4, 5],
                                "redshift": 0,
                            }
                        }
                    }
                )
            ],
        ),
        {},
        "no valid flux pixels",
    ),
    "CSV spectrum with unnamed columns": (
        lambda t: write(t, "s.csv", "a,b\n1,2\n3,4\n"),
        {},
        "no wavelength and flux columns",
    ),
    "CSV spectrum with text values": (
        lambda t: write(t, "s.csv", "wavelength,flux\n4000,abc\n4001,def\n"),
        {},
        "not numeric",
    ),
    "CSV with header only": (lambda t: write(t, "s.csv", "wavelength,flux\n"), {}, "no data"),
    "text with comments only": (
        lambda t: write(t, "s.txt", "# nothing\n# here\n"),
        {},
        "no data lines",
    ),
    "one-column text": (
        lambda t: write(t, "s.txt", "1\n2\n3\n"),
        {},
        "wavelength and flux columns",
    ),
    "image without wavelength solution": (
        lambda t: image(t, "nowcs.fits", np.ones(50)),
        {},
        "no wavelength solution",
    ),
    "zero CDELT1": (
        lambda t: image(t, "z.fits", np.ones(50), CRVAL1=4000.0, CDELT1=0.0),
        {},
        "step .* is zero",
    ),
    "absurd log-lambda": (
        lambda t: image(t, "log.fits", np.ones(50), COEFF0=300.0, COEFF1=1e-4),
        {},
        "out of range",
    ),
    "wavelength unit not a length": (
        lambda t: image(t, "kg.fits", np.ones(50), CRVAL1=4000.0, CDELT1=1.0, CUNIT1="kg"),
        {},
        "not a length",
    ),
    "LAMOST image without COEFF1": (lamost_no_coeff, {}, "COEFF0/COEFF1"),
    "data cube": (
        lambda t: image(t, "cube.fits", np.ones((3, 4, 50)), CRVAL1=4000.0, CDELT1=1.0),
        {},
        "not a spectrum",
    ),
    "DESI flux shape mismatch": (
        lambda t: desi(
            t, lambda h: h.__setitem__("B_FLUX", fits.ImageHDU(np.ones((2, 5)), name="B_FLUX"))
        ),
        {},
        "B_FLUX has shape",
    ),
    "DESI all fibres dead": (lambda t: desi(t, dead_fibres), {}, "none of the 3 FIBERMAP rows"),
    "missing file": (lambda t: t / "nope.fits", {}, "file not found"),
    "folder given as file": (
        lambda t: (t / "dir.fits").mkdir() or t / "dir.fits",
        {},
        "is a folder",
    ),
    "FIFO": (fifo, {}, r"not a regular file \(a FIFO\)"),
    "/dev/zero": (lambda t: Path("/dev/zero"), {}, r"not a regular file \(a character device\)"),
    "/dev/urandom": (lambda t: Path("/dev/urandom"), {}, "not a regular file"),
    "gzip holding binary junk": (
        lambda t: write(t, "junk.gz", gzip.compress(bytes(range(256)) * 4)),
        {},
        "gzip holding unknown binary data",
    ),
    "gzip holding parquet": (
        lambda t: write(t, "p.gz", gzip.compress(b"PAR1" + b"\x01" * 100)),
        {},
        "gzip holding a parquet file",
    ),
    "gzipped text named like FITS": (
        lambda t: write(t, "t.fits.gz", gzip.compress(b"wavelength,flux\n4000,1\n4001,2\n")),
        {},
        "gzip-compressed text/CSV, not FITS",
    ),
    "row 5 on a single-spectrum file": (
        lambda t: write(t, "one.fits", LAMOST),
        {"row": 5},
        "row 5 given, but the file holds a single spectrum",
    ),
    "row -1 on a single-spectrum file": (
        lambda t: write(t, "one.fits", LAMOST),
        {"row": -1},
        "row -1 given, but the file holds a single spectrum",
    ),
    "row on a single-spectrum text file": (
        lambda t: write(t, "s.csv", "wavelength,flux\n4000,1\n4001,2\n"),
        {"row": 3},
        "row 3 does not exist \\(file holds one spectrum\\)",
    ),
    "multi-spectrum file without a row": (
        fits_factory.write_template_rows,
        {"one": True},
        "holds 3 spectra",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_with_clear_error(tmp_path, monkeypatch, case):
    build, kwargs, problem = CASES[case]
    kwargs = dict(kwargs)
    if "limit" in kwargs:
        monkeypatch.setattr(LIMITS, "max_file_bytes", kwargs.pop("limit"))
    path = build(tmp_path)
    reader = load_one if kwargs.pop("one", False) else read_spectra
    with pytest.raises(SpectrumError, match=problem) as err:
        reader(path, **kwargs)
    assert path.name in str(err.value), f"message does not name the file: {err.value}"


def test_limits_are_configurable(tmp_path, monkeypatch):
    path = fits_factory.write_wcs_image(tmp_path, n=1000)
    monkeypatch.setattr(LIMITS, "max_pixels", 500)
    with pytest.raises(LimitError, match="500 limit"):
        read_spectra(path)
    monkeypatch.setattr(LIMITS, "max_pixels", 10_000_000)
    assert read_spectra(path)


# -- catalogues ---------------------------------------------------------------------------
CATALOGUE_CASES = {
    "missing path column": ("file,task\nok.fits,wd\n", {}, "required column 'path'"),
    "missing task column": ("path\nok.fits\n", {}, "required column 'task'"),
    "path traversal": (
        "path,task\n../../etc/passwd,wd\n",
        {"roots": True},
        "outside the allowed data folders",
    ),
    "absolute path outside": (
        "path,task\n/etc/hostname,wd\n",
        {"roots": True},
        "outside the allowed",
    ),
    "listed file missing": ("path,task\nmissing.fits,wd\n", {}, "spectrum file not found"),
    "bad label": ("path,task,label\nok.fits,wd,maybe\n", {}, "label 'maybe' is not YES/NO"),
    "bad row": ("path,task,row\nok.fits,wd,abc\n", {}, "'abc' is not an integer"),
    "empty path": ("path,task\n,wd\n", {}, "empty path"),
    "empty task": ("path,task\nok.fits,\n", {}, "empty task"),
    "unknown task": (
        "path,task\nok.fits,wd\nok.fits,white_dwarf\n",
        {},
        r"line 3: unknown task 'white_dwarf'; known tasks: cv, carbon, s_type, m_giant, wd",
    ),
    "latin-1 byte": (
        "path,task,id\nok.fits,wd,a\nok.fits,wd,caf\xe9\n".encode("latin-1"),
        {},
        r"line 3 is not UTF-8 \(byte 0xe9, 'é' in latin-1\)",
    ),
    "negative row": ("path,task,row\nok.fits,wd,-1\n", {}, "line 2: row -1 is negative"),
    "row on a single-spectrum file": ("path,task,row\nok.fits,wd,5\n", {"load": True}, "row 5"),
    "id given to two spectra": (
        "path,task,id\nok.fits,wd,same\nsub/ok.fits,wd,same\n",
        {"copy": "sub/ok.fits"},
        r"cat.csv line 3.*'same' \(task wd\) points at .*sub/ok.fits here but at "
        r".*/ok.fits in .*cat.csv line 2 \(conflict\)",
    ),
    "listed file is a FIFO": (
        "path,task\npipe,wd\n",
        {"fifo": "pipe"},
        r"line 2: pipe: not a regular file \(a FIFO\)",
    ),
    "gzipped catalogue with a missing file": (
        gzip.compress(b"path,task\nmissing.fits,wd\n"),
        {},
        "line 2: spectrum file not found",
    ),
}


@pytest.mark.parametrize("case", list(CATALOGUE_CASES))
def test_catalogue_refused(tmp_path, case):
    text, opts, problem = CATALOGUE_CASES[case]
    path = catalogue(tmp_path, text)
    if "copy" in opts:
        (tmp_path / opts["copy"]).parent.mkdir()
        (tmp_path / opts["copy"]).write_bytes((tmp_path / "ok.fits").read_bytes())
    if "fifo" in opts:
        os.mkfifo(tmp_path / opts["fifo"])
    roots = [tmp_path] if opts.get("roots") else None
    with pytest.raises(SpectrumError, match=problem) as err:
        refs = expand_candidates([str(path)], opts.get("task"), roots=roots)
        if opts.get("load"):
            [ref.load() for ref in refs]
    assert "cat.csv" in str(err.value) or "ok.fits" in str(err.value)


VALID_CATALOGUES = {
    "UTF-8 BOM (Excel 'CSV UTF-8')": "\ufeffpath,task,id\nok.fits,wd,a\n".encode(),
    "quoted header": b'"path","task","id"\n"ok.fits","wd","a"\n',
    "CRLF line ends": b"path,task,id\r\nok.fits,wd,a\r\n",
    "gzipped": gzip.compress(b"path,task,id\nok.fits,wd,a\n"),
    "gzipped with BOM": gzip.compress("\ufeffpath,task,id\nok.fits,wd,a\n".encode()),
    "alias task (SpecVI name)": b"path,task,id\nok.fits,WD,a\n",
}


@pytest.mark.parametrize("case", list(VALID_CATALOGUES))
def test_valid_catalogues_read(tmp_path, case):
    """Catalogues that were refused with misleading messages (a BOM read as part of the
    'path' column, a quoted header taken for a spectrum, gzip not looked into)."""
    path = catalogue(tmp_path, VALID_CATALOGUES[case])
    refs = read_candidates(path)
    assert [(r.id, r.task, Path(r.path).name) for r in refs] == [("a", "wd", "ok.fits")]
    assert refs[0].load().wavelength.size == 20


def test_task_aliases_map_to_known_tasks(tmp_path):
    path = catalogue(tmp_path, "path,task,id\nok.fits,gm,a\nok.fits,CC,b\nok.fits,ss,c\n")
    assert [r.task for r in read_candidates(path)] == ["m_giant", "carbon", "s_type"]
    assert read_candidates(tmp_path / "ok.fits", task="gm")[0].task == "m_giant"
    with pytest.raises(SpectrumError, match="--task: unknown task 'bogus'; known tasks"):
        read_candidates(tmp_path / "ok.fits", task="bogus")


def test_bad_lines_reported_and_the_rest_kept(tmp_path):
    """`collect_candidates` reports each bad line (file, line, reason) and keeps the rest."""
    from agent.candidates import collect_candidates
    from agent.refs import ConflictError

    path = catalogue(
        tmp_path,
        "path,task,id\nok.fits,wd,a\nmissing.fits,wd,b\nok.fits,nova,c\n"
        "ok.fits,cv,d\nother.fits,cv,d\n",
    )
    (tmp_path / "other.fits").write_bytes((tmp_path / "ok.fits").read_bytes())
    refs, errors = collect_candidates([path, tmp_path / "gone.fits"])
    assert [r.id for r in refs] == ["a", "d"]
    assert [(Path(e.source).name, e.problem.split(";")[0]) for e in errors] == [
        ("cat.csv line 3", "spectrum file not found: missing.fits"),
        ("cat.csv line 4", "unknown task 'nova'"),
        ("cat.csv line 6", errors[2].problem),
        ("gone.fits", "file not found"),
    ]
    conflict = errors[2]
    assert isinstance(conflict, ConflictError)
    assert "other.fits here but at" in conflict.problem and "cat.csv line 5" in conflict.problem


def test_lamost_nan_mask_rows_raise_no_warning(tmp_path):
    path = write(tmp_path, "nanmask.fits", LAMOST)
    with fits.open(path, mode="update") as h:
        h[0].data[3, :50] = np.nan
        h[0].data[3, 50:60] = 1e30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = read_spectra(path)[0]
    assert spec.mask[:60].sum() == 0  # an unusable mask value flags nothing
    assert np.isfinite(spec.flux[~spec.mask]).all()


def test_symlink_escape_refused(tmp_path):
    inside = tmp_path / "in"
    inside.mkdir()
    (inside / "x.fits").symlink_to("/etc/hostname")
    with pytest.raises(SpectrumError, match="outside the allowed") as err:
        expand_candidates([str(inside / "x.fits")], "wd", roots=[inside])
    assert "x.fits" in str(err.value)


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(SpectrumError, match="glob matches no files"):
        read_candidates(str(tmp_path / "*.fits"), task="wd")


# -- fuzzing ------------------------------------------------------------------------------
def _valid_files(tmp: Path) -> dict[str, bytes]:
    files = {
        "lamost.fits": LAMOST,
        "sdss.fits": fits_factory.write_sdss_spec(tmp).read_bytes(),
        "desi.fits": fits_factory.write_desi_coadd(tmp, nspec=2, step=8.0).read_bytes(),
        "table.fits": fits_factory.write_fits_table(tmp).read_bytes(),
        "rows.fits": fits_factory.write_template_rows(tmp, n=200).read_bytes(),
        "spec.csv": fits_factory.write_csv(tmp).read_bytes(),
        "spec.ecsv": fits_factory.write_ecsv(tmp).read_bytes(),
        "p.parquet": fits_factory.write_specvi_parquet(
            tmp, records=[fits_factory.specvi_record(0, n=50)]).read_bytes(),
    }  # fmt: skip
    files["lamost.fits.gz"] = gzip.compress(LAMOST)
    return files


VALID: dict[str, bytes] = {}
FUZZ = settings(
    max_examples=25,
    deadline=3000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _read_or_refuse(path: Path) -> None:
    try:
        spectra = read_file(path)
    except SpectrumError as exc:
        assert path.name in str(exc)
        return
    assert all(isinstance(s, Spectrum) for s in spectra)


@pytest.fixture(scope="module")
def valid_files(tmp_path_factory) -> dict[str, bytes]:
    if not VALID:
        VALID.update(_valid_files(tmp_path_factory.mktemp("valid")))
    return VALID


PREFIXES = [b"SIMPLE  =                    T", b"\x1f\x8b\x08\x00", b"PAR1", b"wavelength,flux\n",
            b"# %ECSV 1.0\n", b""]  # fmt: skip


@FUZZ
@given(prefix=st.sampled_from(PREFIXES), body=st.binary(max_size=3000))
def test_random_bytes_never_crash(tmp_path, prefix, body):
    path = tmp_path / "fuzz.bin"
    path.write_bytes(prefix + body)
    _read_or_refuse(path)


@pytest.mark.parametrize(
    "name", ["lamost.fits", "sdss.fits", "desi.fits", "table.fits", "rows.fits", "spec.csv",
             "spec.ecsv", "p.parquet", "lamost.fits.gz"],
)  # fmt: skip
def test_mutated_valid_files_never_crash(tmp_path, valid_files, name):
    data = valid_files[name]
    _read_or_refuse(write(tmp_path, name, data))  # the unmutated file reads

    @FUZZ
    @given(
        edits=st.lists(
            st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), min_size=1, max_size=8
        ),
        cut=st.one_of(st.none(), st.integers(0, len(data))),
    )
    def run(edits, cut):
        buf = bytearray(data)
        for pos, val in edits:
            buf[pos] = val
        if cut is not None:
            buf = buf[:cut]
        _read_or_refuse(write(tmp_path, name, bytes(buf)))

    run()


def test_fuzz_header_cards(tmp_path):
    """Every integer header card of a LAMOST file set to hostile values."""
    for key in ("NAXIS", "NAXIS1", "NAXIS2", "BITPIX"):
        for value in (-1, 0, 3, 2**31, 10**12):
            path = write(tmp_path, f"{key}-{value}.fits", patch_card(LAMOST, key, value))
            _read_or_refuse(path)


def test_json_like_parquet_struct_is_parsed(tmp_path):
    """Sanity for the fuzz base: the JSON-string flavour of SpecVI rows reads."""
    rec = fits_factory.specvi_record(3, as_json=True)
    assert json.loads(rec["extra_info"])["index"] == 3
    assert read_file(parquet(tmp_path, "j.parquet", [rec]))[0].meta.id.endswith("003")
