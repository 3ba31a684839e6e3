"""Readers refuse input that would cost far more memory than its size: a field, a column
count, a decompressed size or a pixel count past `agent.formats.LIMITS`, each refusal naming
the file and the limit, quickly and without the memory a parser would have taken.

The memory checks run the read in a child process and compare its peak resident size with
the one it had just before reading (the imports done; `bench.reader_memory.measure`), so
nothing else in the test run counts.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from agent.formats import LIMITS, LimitError, read_spectra
from agent.spectrum import SpectrumError
from tests import fits_factory

ROOT = Path(__file__).resolve().parents[1]


def read_in_child(path: Path, **env: str) -> dict:
    """Read `path` in a fresh process: the memory the read added (MiB), its time, its outcome."""
    from bench.reader_memory import measure

    return measure(path, env)


def huge_field_csv_gz(tmp_path: Path, field_bytes: int = 4 * 2**20, rows: int = 100) -> Path:
    """A few kB of gzip: a plain spectrum whose last line holds one numeric field of
    `field_bytes` digits (a parser keeps that column as strings that wide, every row)."""
    lines = ["wavelength,flux"] + [f"{4000 + i},{1 + i % 7}" for i in range(rows)]
    text = "\n".join(lines) + "\n" + "9" * field_bytes + ",1\n"
    path = tmp_path / "tiny.csv.gz"
    path.write_bytes(gzip.compress(text.encode(), 9))
    return path


def test_a_tiny_gzip_with_a_huge_field_is_refused_quickly_and_cheaply(tmp_path):
    path = huge_field_csv_gz(tmp_path)
    assert path.stat().st_size < 8192
    got = read_in_child(path)
    assert got["outcome"].startswith("LimitError"), got
    assert "tiny.csv.gz" in got["outcome"] and "1024-character limit" in got["outcome"], got
    assert got["s"] < 5, got
    # The whole inflated text is 4 MiB: the read may hold it a few times, not a column of it
    # per row (before the limit: ~1.6 GB here).
    assert got["mib"] < 100, got


def test_a_million_column_csv_is_refused_quickly(tmp_path):
    path = tmp_path / "wide.csv"
    cells = ",".join(["1.5"] * 1_000_000)
    path.write_text(f"wavelength,flux\n{cells}\n{cells}\n")
    t0 = time.time()
    with pytest.raises(LimitError, match=r"1000000 columns, over the 1000-column limit") as err:
        read_spectra(path)
    assert time.time() - t0 < 5
    assert "wide.csv" in str(err.value)
    headerless = tmp_path / "wide.txt"
    headerless.write_text("\n".join(" ".join(["2.5"] * 1_000_000) for _ in range(3)))
    got = read_in_child(headerless)
    assert "1000000 columns" in got["outcome"] and got["mib"] < 100, got


def test_a_text_value_in_a_spectrum_column_is_refused_not_kept_as_strings(tmp_path):
    """One 1000-character word among 200,000 rows: as a string column it would take
    200,000 x 1000 x 4 bytes (800 MB); the numeric reader refuses it, naming the column."""
    path = tmp_path / "word.csv"
    rows = "".join(f"{4000 + i * 0.01:.2f},1.0\n" for i in range(200_000))
    path.write_text("wavelength,flux\n" + rows + "x" * 1000 + ",1.0\n")
    got = read_in_child(path)
    assert "column 'wavelength' is not numeric: 'xxxx" in got["outcome"], got
    assert got["mib"] < 200, got


def test_text_and_catalogue_size_after_inflating_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(LIMITS, "max_text_bytes", 10_000)
    rows = "".join(f"{4000 + i},1.0\n" for i in range(2000))  # ~20 kB of text
    gz = tmp_path / "big.csv.gz"
    gz.write_bytes(gzip.compress(("wavelength,flux\n" + rows).encode()))
    with pytest.raises(LimitError, match=r"big.csv.gz.*beyond the 10000-byte text limit"):
        read_spectra(gz)
    plain = tmp_path / "big.csv"
    plain.write_text("wavelength,flux\n" + rows)
    with pytest.raises(LimitError, match=r"big.csv.*over the 10000-byte limit"):
        read_spectra(plain)
    from agent.formats.catalogue import catalogue_lines

    cat = tmp_path / "cat.csv"
    cat.write_text("path,task\n" + "a.fits,cv\n" * 2000)
    with pytest.raises(LimitError, match=r"cat.csv.*over the 10000-byte limit"):
        catalogue_lines(cat, None)


def test_text_lines_are_bounded_by_the_pixel_limit(tmp_path, monkeypatch):
    path = fits_factory.write_csv(tmp_path)
    monkeypatch.setattr(LIMITS, "max_pixels", 100)
    with pytest.raises(LimitError, match=r"spec.csv.*over 100 data lines"):
        read_spectra(path)


def test_fits_and_parquet_columns_are_bounded(tmp_path, monkeypatch):
    table = fits_factory.write_fits_table(tmp_path)
    parquet = fits_factory.write_specvi_parquet(tmp_path)
    assert read_spectra(table) and read_spectra(parquet)
    monkeypatch.setattr(LIMITS, "max_columns", 2)
    with pytest.raises(LimitError, match=r"table has 3 columns, over the 2-column limit"):
        read_spectra(table)
    with pytest.raises(LimitError, match=r"parquet has \d+ columns, over the 2-column limit"):
        read_spectra(parquet)


def test_parquet_decompressed_size_is_bounded(tmp_path, monkeypatch):
    """A parquet file of one repeated value is a few kB however many pixels it holds."""
    records = [fits_factory.specvi_record(i, n=4000) for i in range(20)]
    for rec in records:
        create = rec["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]
        create["create_kwargs"]["flux"] = [1.0] * 4000
    path = fits_factory.write_specvi_parquet(tmp_path, records=records)
    assert len(read_spectra(path)) == 20
    monkeypatch.setattr(LIMITS, "max_inflated_bytes", 2**20)
    assert path.stat().st_size < 2**20
    with pytest.raises(LimitError, match=r"parquet columns extra_info inflate to \d+ bytes, "
                       r"over the 1048576-byte limit"):  # fmt: skip
        read_spectra(path)
    from agent.formats.specvi import rows  # what ingest reads of it

    with pytest.raises(LimitError, match=r"over the 1048576-byte limit"):
        rows(path)


def test_limits_are_read_from_the_environment(tmp_path):
    wide = tmp_path / "w.csv"
    wide.write_text("wavelength,flux,a,b,c,d\n4000,1,0,0,0,0\n4001,2,0,0,0,0\n")
    got = read_in_child(wide, LOUPE_MAX_COLUMNS="3", LOUPE_MAX_FIELD_CHARS="10")
    assert "over the 3-column limit" in got["outcome"], got
    assert read_in_child(wide)["outcome"] == "read 1 spectra"
    code = "from agent.formats import LIMITS as L; print(L.max_text_bytes, L.max_field_chars)"
    env = {"LOUPE_MAX_TEXT_BYTES": "123", "LOUPE_MAX_FIELD_CHARS": "45"}
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT)  # fmt: skip
    assert out.stdout.split() == ["123", "45"], out.stderr


def test_well_formed_text_still_reads_in_every_layout(tmp_path):
    """Headerless CSV, tabs, spaces, quoted header names, comments, CRLF line ends."""
    wave = np.arange(4000.0, 4100.0)
    flux = 1 + 0.1 * np.sin(wave)
    body = [f"{w},{f}" for w, f in zip(wave, flux)]
    cases = {
        "plain.csv": "\n".join(body),
        "crlf.csv": "# made by hand\r\nwavelength,flux\r\n" + "\r\n".join(body) + "\r\n",
        "quoted.csv": '"wavelength","flux"\n' + "\n".join(body),
        "tabs.tsv": "wave\tflux\n" + "\n".join(b.replace(",", "\t") for b in body),
        "spaces.dat": "\n".join(b.replace(",", "   ") for b in body) + "\n# trailing note\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, newline="")
        (spec,) = read_spectra(path)
        assert np.allclose(spec.wavelength, wave) and np.allclose(spec.flux, flux), name


def test_a_refusal_is_a_spectrum_error_naming_the_limit(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("4000 1\n4001 " + "1" * 5000 + "\n")
    with pytest.raises(SpectrumError, match=r"long.txt: line 2 has a field of 5000 characters"):
        read_spectra(path)


def test_a_missing_value_is_named_with_its_column_and_row(tmp_path):
    path = tmp_path / "gap.csv"
    path.write_text("wavelength,flux\n4000,1\n4001,\n4002,3\n")
    with pytest.raises(SpectrumError, match=r"column 'flux' has an empty value in data row 2"):
        read_spectra(path)
    path.write_text("wavelength,flux\n4000,1\n4001,nan\n4002,3\n")  # what the message asks for
    (spec,) = read_spectra(path)
    assert spec.mask.tolist() == [False, True, False]
