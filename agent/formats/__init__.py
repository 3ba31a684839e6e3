"""Readers for every spectrum layout Loupe accepts, chosen by content, not by file name.

`read_spectra` (the public entry point) and `read_file` sniff the first bytes (FITS, gzip,
parquet 'PAR1', text) and hand the file to the reader for its layout; `load_one` insists on
exactly one spectrum; `write_lamost_fits` writes LAMOST files for simulated or degraded
spectra. Catalogues, folders and globs become candidates in `agent.formats.catalogue`.
"""

from __future__ import annotations

from pathlib import Path

from agent.formats.common import (
    FITS_MAGIC,
    GZIP_MAGIC,
    LIMITS,
    PARQUET_MAGIC,
    LayoutError,
    LimitError,
    Limits,
    check_file,
    gzip_contents,
    gzip_head,
    open_fits,
    pick_hdu,
)
from agent.formats.lamost import write_lamost_fits
from agent.spectrum import Spectrum, SpectrumError

__all__ = [
    "LIMITS",
    "LayoutError",
    "LimitError",
    "Limits",
    "load_one",
    "read_file",
    "read_spectra",
    "sniff",
    "write_lamost_fits",
]


def sniff(path: Path) -> str:
    """'fits', 'parquet', 'text' or 'gzip-text' from the file's first bytes (gzip is looked
    inside); a gzip stream holding anything else is refused, saying what it holds."""
    check_file(path)
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(GZIP_MAGIC):
        data = gzip_head(path)
        if data.startswith(FITS_MAGIC):
            return "fits"
        what = gzip_contents(data)
        if what != "text/CSV":
            raise LayoutError(path, f"gzip holding {what} (gzipped FITS and UTF-8 text are read)")
        return "gzip-text"
    if head.startswith(FITS_MAGIC):
        return "fits"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if b"\x00" in head:
        raise LayoutError(path, "unknown binary format (not FITS, gzip or parquet)")
    return "text"


def read_file(path: Path, hdu: int | str | None = None, row: int | None = None) -> list[Spectrum]:
    """Every spectrum in `path`, or the one at `hdu`/`row`, each in the frame its data
    support (a pipeline redshift the spectrum refutes is set aside: `agent.frame`)."""
    from agent.frame import checked

    return [checked(s) for s in _read_file(Path(path), hdu, row)]


def _read_file(path: Path, hdu: int | str | None, row: int | None) -> list[Spectrum]:
    try:
        kind = sniff(path)
        if kind == "fits":
            return _check_row(path, _read_fits(path, hdu, row), row)
        if kind == "parquet":
            from agent.formats.specvi import read_parquet

            return _check_row(path, read_parquet(path, row=row), row)
        if path.name.lower().endswith((".fits", ".fit", ".fts", ".fits.gz", ".fit.gz")):
            if kind == "gzip-text":
                raise LayoutError(path, "gzip-compressed text/CSV, not FITS (named like FITS)")
            raise LayoutError(path, "named like FITS but not a FITS file (no SIMPLE card)")
        from agent.formats.generic import read_text

        spectra = read_text(path, row=row)
        return _check_row(path, spectra, row)
    except (SpectrumError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:
        # Damaged files reach astropy/pyarrow code paths that raise all kinds of errors
        # (bad header values, malformed column formats); they all mean "corrupt file".
        detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise SpectrumError(
            path, f"corrupt or unsupported content ({type(exc).__name__}: {detail})"
        ) from exc


def read_spectra(
    source: str | Path, hdu: int | str | None = None, row: int | None = None
) -> list[Spectrum]:
    """Every spectrum in `source` (a file), or the one at `hdu`/`row`.

    Raises `SpectrumError` naming the file and the problem for anything unreadable.
    """
    return read_file(Path(source), hdu=hdu, row=row)


def _check_row(path: Path, spectra: list[Spectrum], row: int | None) -> list[Spectrum]:
    """Refuse a row index on a file that holds one spectrum: otherwise `row=5` and no row
    would be two references to the same spectrum (and store it twice)."""
    if row is None or row == "" or any(s.meta.row is not None for s in spectra):
        return spectra
    raise SpectrumError(
        path, f"row {row} given, but the file holds a single spectrum (leave the row empty)"
    )


def _read_fits(path: Path, hdu: int | str | None, row: int | None) -> list[Spectrum]:
    from agent.formats import lamost

    with open_fits(path) as hdul:
        index = pick_hdu(path, hdul, hdu)
        if lamost.is_lamost(hdul):
            if lamost.is_lamost_image(hdul) and index in (None, 0):
                return lamost.read_image(path, hdul)
            table = lamost.find_table(hdul) if index in (None, 0) else index
            if table is not None:
                return lamost.read_table(path, hdul, table)
        from agent.formats import desi, generic, sdss

        if desi.is_desi(hdul):
            return desi.read(path, hdul, row=row)
        if sdss.is_sdss_spec(hdul) and index in (None, 0, sdss.coadd_index(hdul)):
            return sdss.read(path, hdul)
        return generic.read_fits(path, hdul, index, row)


def load_one(path: Path, hdu: int | str | None = None, row: int | None = None) -> Spectrum:
    """Exactly one spectrum: refuses a multi-spectrum file unless `hdu`/`row` picks one."""
    spectra = read_file(Path(path), hdu=hdu, row=row)
    if len(spectra) != 1:
        raise SpectrumError(path, f"holds {len(spectra)} spectra; give an hdu or row to choose one")
    return spectra[0]
