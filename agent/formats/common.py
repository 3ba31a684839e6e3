"""What every reader shares: size limits, safe opening, and building a validated `Spectrum`.

Readers never trust a header: pixel counts are checked against `LIMITS` before any data
array is touched, gzip streams are inflated with a cap, text is measured (size, field
length, columns, lines) before a parser sees it, and astropy's own warnings about
truncated files become `SpectrumError`s instead of silently short arrays.

The limits are read from the environment when Loupe starts, for data beyond them:
`LOUPE_MAX_PIXELS` (pixels of one spectrum, elements one FITS HDU claims, lines of a
text spectrum), `LOUPE_MAX_FILE_BYTES` (a file on disk), `LOUPE_MAX_INFLATED_BYTES` (what
a gzip stream or a parquet file's columns inflate to), `LOUPE_MAX_TEXT_BYTES` (a text
spectrum or catalogue after inflating), `LOUPE_MAX_FIELD_CHARS` (one field of a text line), `LOUPE_MAX_COLUMNS`
(columns of a text line, a FITS table or a parquet file).
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from astropy.io import fits

from agent.spectrum import Arm, Frame, Sky, Spectrum, SpectrumError, SpectrumMeta


@dataclass
class Limits:
    """Upper bounds a file must respect before Loupe allocates anything for it."""

    max_pixels: int = int(os.environ.get("LOUPE_MAX_PIXELS", 10_000_000))
    max_file_bytes: int = int(os.environ.get("LOUPE_MAX_FILE_BYTES", 512 * 2**20))
    # What a gzip stream or a parquet file's columns inflate to: a few kB can claim
    # gigabytes, and the readers take a few times this on top.
    max_inflated_bytes: int = int(os.environ.get("LOUPE_MAX_INFLATED_BYTES", 128 * 2**20))
    # Text costs its parser several times its size; survey spectra as text are well under
    # a megabyte, an echelle one some tens.
    max_text_bytes: int = int(os.environ.get("LOUPE_MAX_TEXT_BYTES", 64 * 2**20))
    # Numbers need under 30 characters; a catalogue's paths and names stay under this.
    max_field_chars: int = int(os.environ.get("LOUPE_MAX_FIELD_CHARS", 1024))
    max_columns: int = int(os.environ.get("LOUPE_MAX_COLUMNS", 1000))  # FITS allows 999

    @property
    def inflate_cap(self) -> int:
        """The most a compressed stream may inflate to: under both size limits."""
        return min(self.max_file_bytes, self.max_inflated_bytes)


LIMITS = Limits()

FITS_MAGIC = b"SIMPLE  ="
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"


class LayoutError(SpectrumError):
    """The file is readable but holds no spectrum layout Loupe knows."""


class LimitError(SpectrumError):
    """The file (or what its header claims) is larger than `LIMITS` allows."""


def check_file(path: Path) -> int:
    """Size of `path` in bytes, refusing missing, empty, non-regular and oversized files."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise SpectrumError(path, "file not found") from None
    except OSError as exc:
        raise SpectrumError(path, f"cannot stat file ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpectrumError(path, "is a folder, not a spectrum file")
    if not stat.S_ISREG(st.st_mode):
        # Checked before the size: a FIFO or /dev/zero reports 0 bytes but never ends.
        raise SpectrumError(path, f"not a regular file ({_kind(st.st_mode)})")
    if st.st_size == 0:
        raise SpectrumError(path, "file is empty (0 bytes)")
    if st.st_size > LIMITS.max_file_bytes:
        raise LimitError(
            path, f"file is {st.st_size} bytes, over the {LIMITS.max_file_bytes}-byte limit"
        )
    return st.st_size


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def is_regular(path: Path) -> bool:
    """True for a plain file (following symlinks); False for FIFOs, devices, folders."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def gzip_contents(data: bytes) -> str:
    """What an inflated gzip stream holds, in words, for messages about it."""
    if data.startswith(FITS_MAGIC):
        return "a FITS file"
    if data.startswith(PARQUET_MAGIC):
        return "a parquet file (decompress it first)"
    if data.startswith(GZIP_MAGIC):
        return "another gzip stream (compressed twice)"
    head = data[:4096]
    if b"\x00" in head:
        return "unknown binary data"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not merely a character cut at the 4096-byte edge
            return "non-UTF-8 text"
    return "text/CSV"


def read_capped(path: Path, cap: int | None = None, what: str = "file") -> bytes:
    """The file's bytes, inflated if gzipped; neither the file nor what a gzip stream
    inflates to may pass `cap` bytes (default `LIMITS.max_file_bytes`, and for what a gzip
    stream inflates to `LIMITS.inflate_cap`)."""
    gz_cap = LIMITS.inflate_cap if cap is None else min(cap, LIMITS.inflate_cap)
    cap = LIMITS.max_file_bytes if cap is None else cap
    size = check_file(path)
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == GZIP_MAGIC
    if not gzipped and size > cap:
        raise LimitError(path, f"{what} is {size} bytes, over the {cap}-byte limit")
    raw = path.read_bytes()
    if not gzipped:
        return raw
    return _inflate(path, raw, gz_cap, what)


def gzip_head(path: Path, n: int = 4096) -> bytes:
    """The first `n` inflated bytes of a gzipped file, to tell what it holds; the rest is
    inflated and dropped, so a bomb past `LIMITS.inflate_cap` is refused at any size."""
    cap = LIMITS.inflate_cap
    head, total = b"", 0
    try:
        with gzip.open(path, "rb") as gz:
            while chunk := gz.read(2**20):
                head, total = head or chunk[:n], total + len(chunk)
                if total > cap:
                    raise LimitError(
                        path, f"gzip stream inflates beyond the {cap}-byte limit (gzip bomb?)"
                    )
    except (OSError, EOFError, zlib.error) as exc:
        raise SpectrumError(path, f"corrupt or truncated gzip stream ({exc})") from None
    if not head:
        raise SpectrumError(path, "gzip stream is empty")
    return head


def _inflate(path: Path, raw: bytes, cap: int, what: str) -> bytes:
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            # Inflate in chunks so a bomb is refused as soon as it passes the cap.
            while chunk := gz.read(min(2**20, cap + 1 - len(out))):
                out += chunk
                if len(out) > cap:
                    raise LimitError(
                        path, f"gzip stream inflates beyond the {cap}-byte {what} limit "
                        "(gzip bomb?)",
                    )  # fmt: skip
    except (OSError, EOFError, zlib.error) as exc:
        raise SpectrumError(path, f"corrupt or truncated gzip stream ({exc})") from None
    if not out:
        raise SpectrumError(path, "gzip stream is empty")
    return bytes(out)


def check_text_shape(path: Path, data: bytes, *, max_lines: int | None = None) -> int:
    """Refuse text whose lines a parser would turn into far more memory than the file
    takes: a field over `LIMITS.max_field_chars` characters (a parser keeps the widest
    value of a column for every row), a line of over `LIMITS.max_columns` columns (a column
    object each), or over `max_lines` data lines. Comment lines (`#`) are not data.
    Returns the number of data lines.

    Measured with numpy, a few MB at a time, so a well-formed file costs little: only lines
    longer than the narrowest limit allows are split and looked at one by one.
    """
    fields, columns = LIMITS.max_field_chars, LIMITS.max_columns
    narrow = min(fields, 2 * columns - 1)  # a line this short breaks neither limit
    view = memoryview(data)
    lines = lineno = pos = 0
    while pos < len(data):
        stop = min(pos + TEXT_BLOCK, len(data))
        if stop < len(data):  # whole lines only
            nl = data.find(b"\n", stop)
            stop = len(data) if nl < 0 else nl + 1
        b = np.frombuffer(view[pos:stop], dtype=np.uint8)
        ends = np.flatnonzero(b == 10)
        starts = np.concatenate(([0], ends + 1))[: ends.size + (stop == len(data))]
        lengths = np.concatenate((ends, [b.size]))[: starts.size] - starts
        heads = b[np.minimum(starts, b.size - 1)]
        lines += int(np.count_nonzero((lengths > 0) & (heads != ord("#"))))
        if max_lines is not None and lines > max_lines:
            raise LimitError(path, f"over {max_lines} data lines (the pixel limit)")
        for i in np.flatnonzero(lengths > narrow):
            at = pos + int(starts[i])
            line = bytes(view[at : at + int(lengths[i])]).decode("utf-8", "replace")
            for part in line.splitlines():  # a line of old Mac (CR) endings holds several
                if not part.lstrip().startswith("#"):
                    _check_line(path, part, lineno + int(i) + 1)
        lineno += starts.size
        pos = stop
    return lines


TEXT_BLOCK = 4 * 2**20


def _check_line(path: Path, line: str, n: int) -> None:
    cells = _fields(line)
    if len(cells) > LIMITS.max_columns:
        raise LimitError(
            path, f"line {n} has {len(cells)} columns, over the {LIMITS.max_columns}-column limit"
        )
    widest = max(map(len, cells), default=0)
    if widest > LIMITS.max_field_chars:
        raise LimitError(
            path,
            f"line {n} has a field of {widest} characters, over the "
            f"{LIMITS.max_field_chars}-character limit",
        )


def _fields(line: str) -> list[str]:
    """A text line's fields however it is delimited (commas, tabs or spaces), quotes kept
    together, for measuring them."""
    import csv

    delim = "," if "," in line else ("\t" if "\t" in line else " ")
    if '"' in line:
        try:
            cells = next(csv.reader([line], delimiter=delim, skipinitialspace=True), [])
        except csv.Error:  # a quoted field past the csv module's own limit
            cells = [line]
    else:
        cells = line.split(delim) if delim != " " else line.split()
    return [c for c in cells if c.strip()] if delim == " " else cells


def header_pixels(header: fits.Header) -> int:
    """Elements the header claims its data holds (image pixels or table cells)."""
    naxis = int(header.get("NAXIS", 0) or 0)
    if not 0 < naxis <= 999:
        return 0
    n = 1
    for i in range(1, naxis + 1):
        n *= max(int(header.get(f"NAXIS{i}", 0) or 0), 0)
    if header.get("XTENSION", "").strip() in ("BINTABLE", "TABLE"):
        n //= 4  # NAXIS1 is the row width in bytes; count 4-byte cells
    return n


MAX_HDUS = 1000


def check_headers(path: Path, data: bytes) -> None:
    """Walk the headers with astropy's Header parser and refuse hostile ones *before*
    astropy builds HDUs: a NAXIS of 10^12 makes it loop over 10^12 axes, and a header
    claiming 10^10 pixels would be allocated on first access."""
    f = io.BytesIO(data)
    for i in range(MAX_HDUS + 1):
        if f.tell() >= len(data):
            return
        if i == MAX_HDUS:
            raise LimitError(path, f"more than {MAX_HDUS} HDUs")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                header = fits.Header.fromfile(f)
            naxis = int(header.get("NAXIS", 0) or 0)
        except Exception:
            return  # not a header: fits.open reports the corruption in its own words
        if not 0 <= naxis <= 999:
            raise SpectrumError(path, f"HDU {i}: NAXIS = {naxis} is invalid (FITS allows 0-999)")
        n = header_pixels(header)
        if n > LIMITS.max_pixels:
            raise LimitError(
                path, f"HDU {i} header claims {n} elements, over the {LIMITS.max_pixels} limit"
            )
        _check_columns(path, i, header)
        try:
            bitpix = abs(int(header.get("BITPIX", 8)))
            pcount = max(int(header.get("PCOUNT", 0) or 0), 0)
            gcount = max(int(header.get("GCOUNT", 1) or 1), 1)
            axes = [max(int(header.get(f"NAXIS{k}", 0) or 0), 0) for k in range(1, naxis + 1)]
        except (TypeError, ValueError):
            return
        size = 0 if naxis == 0 else (bitpix // 8) * gcount * (pcount + int(np.prod(axes)))
        f.seek(f.tell() + -(-size // 2880) * 2880)


def _check_columns(path: Path, i: int, header: fits.Header) -> None:
    try:
        n = int(header.get("TFIELDS", 0) or 0)
    except (TypeError, ValueError):
        return  # fits.open names the bad card
    if n > LIMITS.max_columns:
        raise LimitError(
            path, f"HDU {i} table has {n} columns, over the {LIMITS.max_columns}-column limit"
        )


@contextmanager
def open_fits(path: Path) -> Iterator[fits.HDUList]:
    """Open a (possibly gzipped) FITS file with limits checked on every header."""
    data = read_capped(path)
    if not data.startswith(FITS_MAGIC):
        raise SpectrumError(path, "not a FITS file (no SIMPLE card at the start)")
    check_headers(path, data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            hdul = fits.open(io.BytesIO(data), memmap=False, lazy_load_hdus=False)
        except Exception as exc:  # astropy raises OSError, ValueError, IndexError, ...
            raise SpectrumError(path, f"corrupt FITS file ({_short(exc)})") from None
    try:
        # Limits first: a header claiming 10^10 pixels is hostile, not merely truncated.
        for i, h in enumerate(hdul):
            n = header_pixels(h.header)
            if n > LIMITS.max_pixels:
                raise LimitError(
                    path, f"HDU {i} header claims {n} elements, over the {LIMITS.max_pixels} limit"
                )
        for w in caught:
            if "truncated" in str(w.message).lower():
                raise SpectrumError(path, f"FITS file is truncated ({_short(w.message)})")
        yield hdul
    finally:
        hdul.close()


def hdu_data(path: Path, hdul: fits.HDUList, index: int) -> Any:
    """`hdul[index].data`, with astropy's read errors turned into a `SpectrumError`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hdul[index].data
    except Exception as exc:
        raise SpectrumError(path, f"HDU {index}: unreadable data ({_short(exc)})") from None


def pick_hdu(path: Path, hdul: fits.HDUList, hdu: int | str | None) -> int | None:
    """Resolve a user's HDU (index or EXTNAME) to an index; None stays None."""
    if hdu is None or hdu == "":
        return None
    if isinstance(hdu, str) and hdu.strip().lstrip("-").isdigit():
        hdu = int(hdu)
    if isinstance(hdu, int):
        if not 0 <= hdu < len(hdul):
            raise SpectrumError(path, f"HDU {hdu} does not exist (file has {len(hdul)} HDUs)")
        return hdu
    for i, h in enumerate(hdul):
        if h.name.upper() == str(hdu).upper():
            return i
    names = [h.name for h in hdul]
    raise SpectrumError(path, f"HDU {hdu!r} does not exist (HDUs: {names})")


def frame_from_header(header: fits.Header | None, default: Frame) -> Frame:
    """The wavelength frame a header declares; `default` when it says nothing."""
    if header is None:
        return default
    for key in ("AIRORVAC", "WAVEFRAM", "VACORAIR"):
        val = str(header.get(key, "")).strip().lower()
        if val.startswith("vac"):
            return "vacuum"
        if val.startswith("air"):
            return "air"
    if "VACUUM" in header:
        return "vacuum" if bool(header["VACUUM"]) else "air"
    ctype = str(header.get("CTYPE1", "")).strip().upper()
    # FITS WCS paper III: WAVE is vacuum, AWAV is air.
    if ctype.startswith("AWAV"):
        return "air"
    if ctype.startswith("WAVE"):
        return "vacuum"
    history = " ".join(str(v) for v in header.get("HISTORY", [])).lower()
    if "wavelengths are vacuum" in history:
        return "vacuum"
    if "wavelengths are air" in history:
        return "air"
    return default


_ANGSTROM_ALIASES = {"angstrom", "angstroms", "a", "aa", "ang", "0.1 nm", "å"}


def angstrom_factor(path: Path, unit: str | None) -> float:
    """Multiplier taking wavelengths in `unit` to Angstrom (1 when the unit is unstated)."""
    if not unit:
        return 1.0
    u = str(unit).strip().lower()
    if u in _ANGSTROM_ALIASES:
        return 1.0
    from astropy import units

    try:
        return float(units.Unit(unit).to(units.AA))
    except Exception:
        raise SpectrumError(path, f"wavelength unit {unit!r} is not a length") from None


def pow10_wavelength(path: Path, loglam: Any) -> np.ndarray:
    """Angstrom from log10(Angstrom), refusing values no spectrum has (1 to 1e7 A)."""
    loglam = np.asarray(loglam, dtype=np.float64)
    finite = loglam[np.isfinite(loglam)]
    if finite.size and (finite.max() > 7 or finite.min() < 1):
        raise SpectrumError(
            path,
            f"log10 wavelength values {finite.min():g}..{finite.max():g} are out of range "
            "(expected 1 to 7)",
        )
    return 10.0**loglam


def _short(exc: object, n: int = 160) -> str:
    s = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return s if len(s) <= n else s[: n - 3] + "..."


_KNOWN_SUFFIXES = {
    ".gz", ".fits", ".fit", ".fts", ".txt", ".csv", ".ecsv", ".dat", ".tsv", ".asc",
    ".parquet",
}  # fmt: skip


def file_stem(path: Path) -> str:
    """`spec-1.fits.gz` -> `spec-1`; keeps dots inside names such as `MILES_res2.50_x`."""
    name = path.name
    while True:
        suffix = Path(name).suffix.lower()
        if suffix not in _KNOWN_SUFFIXES:
            return name
        name = name[: -len(suffix)]


def where(path: Path, hdu: int | str | None = None, row: int | None = None) -> str:
    """`path [HDU 1, row 3]`: how error messages point at one spectrum inside a file."""
    parts = []
    if hdu is not None:
        parts.append(f"HDU {hdu}")
    if row is not None:
        parts.append(f"row {row}")
    return f"{path} [{', '.join(parts)}]" if parts else str(path)


def as_1d(path: Path, name: str, values: Any, what: str) -> np.ndarray:
    """A float64 1-D array from a column or image row, or a clear error."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise SpectrumError(path, f"{what}: {name} is not numeric") from None
    arr = np.squeeze(arr) if arr.ndim > 1 and 1 in arr.shape else arr
    if arr.ndim != 1:
        raise SpectrumError(path, f"{what}: {name} has shape {arr.shape}, expected 1-D")
    return arr


def make_spectrum(
    path: Path,
    wavelength: Any,
    flux: Any,
    *,
    ivar: Any = None,
    mask: Any = None,
    frame: Frame,
    hdu: int | str | None = None,
    row: int | None = None,
    redshift: float = 0.0,
    flux_unit: str = "arbitrary",
    sky: Any = None,
    sky_unit: str | None = None,
    arms: tuple[Arm, ...] = (),
    **meta: Any,
) -> Spectrum:
    """Validate arrays and build a `Spectrum`; every failure names the file and the problem.

    `sky` (on the same pixels as `flux`, in `sky_unit`, default the flux unit) and `arms`
    are kept for the expert's views only (`agent.spectrum`).

    Descending wavelengths are reversed (some libraries store red to blue); duplicated or
    unordered ones are refused because no single flux belongs to a repeated wavelength.
    NaN/inf flux and ivar <= 0 are masked by `Spectrum` itself.
    """
    loc = where(path, hdu, row)
    wave = as_1d(path, "wavelength", wavelength, loc)
    flx = as_1d(path, "flux", flux, loc)
    if wave.size == 0 or flx.size == 0:
        raise SpectrumError(loc, "zero-length spectrum (no pixels)")
    if wave.size > LIMITS.max_pixels:
        raise LimitError(loc, f"{wave.size} pixels, over the {LIMITS.max_pixels} limit")
    if wave.shape != flx.shape:
        raise SpectrumError(
            loc, f"wavelength ({wave.size} pixels) and flux ({flx.size}) differ in length"
        )
    iv = None if ivar is None else as_1d(path, "ivar", ivar, loc)
    if iv is not None and iv.shape != flx.shape:
        raise SpectrumError(loc, f"ivar ({iv.size} pixels) and flux ({flx.size}) differ in length")
    msk = None if mask is None else np.asarray(mask).astype(bool).reshape(-1)
    if msk is not None and msk.shape != flx.shape:
        raise SpectrumError(loc, f"mask ({msk.size}) and flux ({flx.size}) differ in length")
    sk = None if sky is None else as_1d(path, "sky", sky, loc)
    if sk is not None and sk.shape != flx.shape:
        raise SpectrumError(loc, f"sky ({sk.size} pixels) and flux ({flx.size}) differ in length")
    if not np.all(np.isfinite(wave)):
        bad = int(np.flatnonzero(~np.isfinite(wave))[0])
        raise SpectrumError(loc, f"wavelength contains NaN or inf (first at pixel {bad})")
    if wave.size < 2:
        raise SpectrumError(loc, f"too few pixels ({wave.size})")
    step = np.diff(wave)
    if np.any(step == 0):
        i = int(np.flatnonzero(step == 0)[0])
        n = int(np.count_nonzero(step == 0))
        raise SpectrumError(
            loc, f"duplicated wavelength values ({n} repeats, first {wave[i]:g} A at pixel {i})"
        )
    if np.all(step < 0):
        wave, flx = wave[::-1], flx[::-1]
        iv = None if iv is None else iv[::-1]
        msk = None if msk is None else msk[::-1]
        sk = None if sk is None else sk[::-1]
    elif np.any(step < 0):
        i = int(np.flatnonzero(step < 0)[0])
        raise SpectrumError(
            loc,
            f"wavelength is not monotonic (drops from {wave[i]:g} to {wave[i + 1]:g} A "
            f"at pixel {i + 1})",
        )
    if wave[0] <= 0:
        raise SpectrumError(loc, f"wavelength starts at {wave[0]:g} A (must be positive)")
    if not np.isfinite(redshift):
        redshift = 0.0
    info = SpectrumMeta(source=str(path), hdu=hdu, row=row)
    extra = meta.pop("extra", None) or {}
    for key, val in meta.items():
        if val is not None and val != "":
            setattr(info, key, val)
    info.extra.update(extra)
    if not info.id:
        info.id = file_stem(path)
    try:
        return Spectrum(
            wavelength=wave,
            flux=flx,
            ivar=iv,
            mask=msk,
            frame=frame,
            redshift=float(redshift),
            flux_unit=flux_unit,
            meta=info,
            arms=tuple(arms),
            sky=None if sk is None else Sky(sk, sky_unit or flux_unit),
        )
    except SpectrumError as exc:
        raise SpectrumError(loc, exc.problem) from None


def header_value(header: fits.Header | None, *keys: str, cast: type = str) -> Any:
    """The first of `keys` the header holds with a usable value, cast; else None."""
    if header is None:
        return None
    for key in keys:
        if key in header:
            val = header[key]
            if val is None or (isinstance(val, str) and not val.strip()):
                continue
            try:
                out = cast(val.strip() if isinstance(val, str) else val)
            except (TypeError, ValueError):
                continue
            if isinstance(out, float) and not np.isfinite(out):
                continue
            return out
    return None


def rows_to_read(path: Path, row: int | str | None, n: int, what: str) -> list[int]:
    """Every row index of a `what` with `n` rows, or just `row` (refusing one not there)."""
    if row is None or row == "":
        return list(range(n))
    try:
        r = int(row)
    except (TypeError, ValueError):
        raise SpectrumError(path, f"row {row!r} is not an integer") from None
    if not 0 <= r < n:
        raise SpectrumError(path, f"row {r} does not exist ({what} has {n} rows)")
    return [r]


def plausible_redshift(z: Any) -> float | None:
    """A pipeline redshift, or None for sentinels such as -9999."""
    try:
        z = float(z)
    except (TypeError, ValueError):
        return None
    return z if np.isfinite(z) and -0.1 < z < 12 else None
