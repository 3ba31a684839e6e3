"""Layouts that are not one survey's: 1-D FITS images with a wavelength solution, template
images with one spectrum per row, FITS tables with wavelength/flux columns, and text
(CSV, ECSV, whitespace columns).

Air or vacuum: a header that says so (AIRORVAC, VACUUM, CTYPE1 AWAV/WAVE, CALSPEC's
"All wavelengths are vacuum") always wins. Otherwise:
- COEFF0/COEFF1 log-lambda solutions are the SDSS/LAMOST convention -> vacuum (the SDSS
  spEigen templates are vacuum).
- Linear IRAF-style solutions (CRVAL1/CDELT1), tables and text default to air, because
  ground-based optical reductions and the stellar libraries built from them use air:
  MILES (Sanchez-Blazquez et al. 2006), STELIB (Le Borgne et al. 2003) and Pickles (1998)
  are all on the air scale.
- CALSPEC (HST, Bohlin et al. 2014) is vacuum; its headers say so in HISTORY and carry
  DBTABLE = 'CRSPECTRUM', both recognised here.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
from astropy.io import fits

from agent.formats.common import (
    LIMITS,
    LayoutError,
    angstrom_factor,
    check_text_shape,
    file_stem,
    frame_from_header,
    hdu_data,
    header_value,
    make_spectrum,
    pow10_wavelength,
    read_capped,
    rows_to_read,
)
from agent.spectrum import Frame, Spectrum, SpectrumError

WAVE_NAMES = ("wavelength", "wave", "lambda", "lam", "wavelen", "wl", "awav")
LOGWAVE_NAMES = ("loglam", "loglambda", "log_wave", "logwave")
FLUX_NAMES = ("flux", "flam", "f_lambda", "flux_density", "spec", "spectrum", "intensity")
IVAR_NAMES = ("ivar", "invvar", "inv_var", "inverse_variance")
ERROR_NAMES = (
    "error", "err", "staterror", "sigma", "flux_error", "flux_err", "err_flux",
    "uncertainty", "unc", "noise", "e_flux",
)  # fmt: skip
MASK_NAMES = ("mask", "and_mask", "andmask", "pixelmask")
ID_NAMES = ("name", "id", "objid", "objname", "object", "targetid", "obsid")


def _find(names: dict[str, str], candidates: tuple[str, ...]) -> str | None:
    for c in candidates:
        if c in names:
            return names[c]
    return None


# -- FITS: choosing the HDU -------------------------------------------------------------
def is_image(h: Any) -> bool:
    return isinstance(h, (fits.PrimaryHDU, fits.ImageHDU, fits.CompImageHDU))


def is_table(h: Any) -> bool:
    return isinstance(h, (fits.BinTableHDU, fits.TableHDU))


def table_columns(h: Any) -> dict[str, str] | None:
    """Lower-case name -> column name for a table HDU that holds wavelength and flux."""
    if not is_table(h):
        return None
    names = {n.lower(): n for n in h.columns.names}
    wave = _find(names, WAVE_NAMES + LOGWAVE_NAMES)
    flux = _find(names, FLUX_NAMES)
    return names if wave and flux else None


def read_fits(path: Path, hdul: fits.HDUList, index: int | None, row: int | None) -> list[Spectrum]:
    if index is None:
        for i, h in enumerate(hdul):
            if is_image(h) and int(h.header.get("NAXIS", 0)) >= 1:
                return read_image(path, hdul, i, row)
            if table_columns(h) is not None:
                return read_table(path, hdul, i, row)
        kinds = ", ".join(f"{i}:{type(h).__name__}" for i, h in enumerate(hdul))
        raise LayoutError(
            path,
            "unknown layout: no image with data and no table with wavelength and flux "
            f"columns (HDUs {kinds})",
        )
    h = hdul[index]
    if is_image(h):
        if int(h.header.get("NAXIS", 0)) == 0:
            raise LayoutError(path, f"HDU {index} is an image HDU with no data")
        return read_image(path, hdul, index, row)
    if is_table(h):
        return read_table(path, hdul, index, row)
    raise LayoutError(path, f"HDU {index} is a {type(h).__name__}, not an image or table")


# -- FITS images ------------------------------------------------------------------------
def image_wavelength(path: Path, header: fits.Header, npix: int) -> tuple[np.ndarray, Frame]:
    """Wavelengths (Angstrom) from a header's 1-D solution and the frame it implies."""
    pix = np.arange(npix, dtype=np.float64)
    c0 = header_value(header, "COEFF0", cast=float)
    c1 = header_value(header, "COEFF1", cast=float)
    if c0 is not None and c1 is not None:
        # SDSS/LAMOST convention: log10(lambda) = COEFF0 + COEFF1 * i, vacuum.
        return pow10_wavelength(path, c0 + c1 * pix), frame_from_header(header, "vacuum")
    ctype = str(header.get("CTYPE1", "")).strip().upper()
    if ctype[:4] in ("WAVE", "AWAV") and "-" in ctype:
        return _wcs_wavelength(path, header, npix), frame_from_header(header, "air")
    crval = header_value(header, "CRVAL1", cast=float)
    delta = header_value(header, "CDELT1", "CD1_1", cast=float)
    if crval is None or delta is None:
        raise LayoutError(
            path,
            "image has no wavelength solution (no COEFF0/COEFF1, and no CRVAL1 with "
            "CDELT1 or CD1_1)",
        )
    if delta == 0:
        raise SpectrumError(path, "wavelength step CDELT1/CD1_1 is zero")
    crpix = header_value(header, "CRPIX1", cast=float) or 1.0
    axis = crval + delta * (pix + 1 - crpix)
    dcflag = header_value(header, "DC-FLAG", cast=int)
    # DC-FLAG = 1 marks a log10 axis (IRAF); a CRVAL1 below 5 can only be log10(Angstrom).
    if dcflag == 1 or (dcflag is None and 2.0 < crval < 5.0 and abs(delta) < 0.01):
        return pow10_wavelength(path, axis), frame_from_header(header, "air")
    unit = header.get("CUNIT1") or _wat_units(header)
    return axis * angstrom_factor(path, unit), frame_from_header(header, "air")


def _wat_units(header: fits.Header) -> str | None:
    wat = str(header.get("WAT1_001", ""))
    for part in wat.split():
        if part.startswith("units="):
            return part[len("units=") :]
    return None


def _wcs_wavelength(path: Path, header: fits.Header, npix: int) -> np.ndarray:
    """Non-linear FITS spectral WCS (e.g. WAVE-LOG) evaluated by astropy.wcs."""
    from astropy.wcs import WCS

    try:
        wcs = WCS(header, naxis=[1])
        world = wcs.pixel_to_world_values(np.arange(npix, dtype=np.float64))
    except Exception as exc:
        raise SpectrumError(path, f"unusable spectral WCS ({exc})") from None
    unit = str(wcs.wcs.cunit[0]) or "m"
    return np.asarray(world, dtype=np.float64) * angstrom_factor(path, unit)


def read_image(path: Path, hdul: fits.HDUList, index: int, row: int | None) -> list[Spectrum]:
    h = hdul[index]
    header = h.header
    data = hdu_data(path, hdul, index)
    if data is None:
        raise LayoutError(path, f"HDU {index} is an image HDU with no data")
    data = np.asarray(data)
    if data.dtype.kind not in "iuf":
        raise LayoutError(path, f"HDU {index}: image data type {data.dtype} is not numeric")
    bands = None
    if data.ndim == 3 and 1 in data.shape[:2]:
        # IRAF multispec "equispec" (bands, 1, npix): band 1 is the spectrum, a band whose
        # BANDID says sigma is its error.
        bands = data.reshape(-1, data.shape[-1])
        data = bands[:1]
    if data.ndim not in (1, 2):
        raise LayoutError(path, f"HDU {index}: image of shape {data.shape} is not a spectrum")
    rows2d = np.atleast_2d(data)
    npix = rows2d.shape[1]
    wave, frame = image_wavelength(path, header, npix)
    survey = header_value(header, "TPLLIB", cast=str) or ""
    if survey.upper() == "MILES":
        frame = frame_from_header(header, "air")  # MILES is on the air scale
    if not survey and "COEFF0" in header and "OBJECT" in header and rows2d.shape[0] > 1:
        survey = "SDSS"  # spEigen template files
    error = None
    if bands is not None:
        for b in range(1, bands.shape[0]):
            if "sigma" in str(header.get(f"BANDID{b + 1}", "")).lower():
                error = bands[b]
    stem = file_stem(path)
    nrows = rows2d.shape[0]
    out = []
    for r in rows_to_read(path, row, nrows, f"HDU {index} image"):
        name = header_value(header, f"NAME{r}", cast=str)
        sid = name or (stem if nrows == 1 else f"{stem}-{r}")
        out.append(
            make_spectrum(
                path,
                wave,
                rows2d[r],
                ivar=_ivar_from_error(error),
                frame=frame,
                hdu=index,
                row=r if nrows > 1 else None,
                flux_unit=str(header.get("BUNIT", "arbitrary")).strip() or "arbitrary",
                id=sid,
                survey=survey,
                ra=header_value(header, "RA", cast=float),
                dec=header_value(header, "DEC", cast=float),
                extra={"object": header_value(header, "OBJECT", cast=str)}
                if "OBJECT" in header
                else {},
            )
        )
    return out


def _ivar_from_error(error: Any) -> np.ndarray | None:
    if error is None:
        return None
    err = np.asarray(error, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(err) & (err > 0), 1.0 / err**2, 0.0)


# -- FITS tables ------------------------------------------------------------------------
def read_table(path: Path, hdul: fits.HDUList, index: int, row: int | None) -> list[Spectrum]:
    h = hdul[index]
    names = table_columns(h)
    if names is None:
        have = ", ".join(h.columns.names) if is_table(h) else "none"
        raise LayoutError(
            path,
            f"HDU {index}: table has no wavelength and flux columns (columns: {have})",
        )
    table = hdu_data(path, hdul, index)
    if table is None or len(table) == 0:
        raise SpectrumError(path, f"HDU {index}: table has no rows (zero-length spectrum)")
    primary = hdul[0].header
    frame = frame_from_header(h.header, frame_from_header(primary, "air"))
    calspec = str(primary.get("DBTABLE", "")).strip().upper() == "CRSPECTRUM"
    if calspec:
        frame = frame_from_header(primary, "vacuum")
    columns = {k: table[v] for k, v in names.items()}
    units = {n.lower(): (h.columns[n].unit or None) for n in h.columns.names}
    out = _columns_to_spectra(
        path, columns, names, units, frame=frame, hdu=index, row=row,
        survey="CALSPEC" if calspec else "",
    )  # fmt: skip
    if calspec and len(out) == 1 and header_value(primary, "TARGETID", cast=str):
        out[0].meta.extra["target"] = header_value(primary, "TARGETID", cast=str)
    return out


def _columns_to_spectra(
    path: Path,
    columns: dict[str, Any],
    names: dict[str, str],
    units: dict[str, str | None],
    *,
    frame: Frame,
    hdu: int | None,
    row: int | None,
    survey: str = "",
) -> list[Spectrum]:
    """Spectra from named columns: scalar columns make one spectrum, array columns one per row."""
    wave_key = next((n for n in WAVE_NAMES if n in names), None)
    log_key = None if wave_key else next(n for n in LOGWAVE_NAMES if n in names)
    flux_key = next(n for n in FLUX_NAMES if n in names)
    ivar_key = next((n for n in IVAR_NAMES if n in names), None)
    err_key = None if ivar_key else next((n for n in ERROR_NAMES if n in names), None)
    mask_key = next((n for n in MASK_NAMES if n in names), None)
    id_key = next((n for n in ID_NAMES if n in names), None)

    def arr(key: str | None) -> np.ndarray | None:
        if key is None:
            return None
        try:
            return np.asarray(columns[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise SpectrumError(path, f"column {names[key]!r} is not numeric") from None

    wave = arr(wave_key or log_key)
    if log_key:
        wave = pow10_wavelength(path, wave)
    else:
        wave = wave * angstrom_factor(path, units.get(wave_key))
    flux, ivar, err, mask = arr(flux_key), arr(ivar_key), arr(err_key), arr(mask_key)
    if err is not None and flux is not None and err.shape == flux.shape:
        # An error of exactly 0 beside a real flux means "not given" (CALSPEC's model
        # extensions), not "bad pixel": such spectra keep their flux and drop the errors.
        ivar = None if np.any((err == 0) & np.isfinite(flux)) else _ivar_from_error(err)
    stem = file_stem(path)
    common = {"frame": frame, "hdu": hdu, "survey": survey}
    if wave.ndim == 1:
        if row not in (None, 0, "0"):
            raise SpectrumError(path, f"row {row} does not exist (file holds one spectrum)")
        return [
            make_spectrum(
                path, wave, flux, ivar=ivar, mask=None if mask is None else mask != 0,
                id=stem, **common,
            )
        ]  # fmt: skip
    if wave.ndim != 2 or flux.shape != wave.shape:
        raise SpectrumError(
            path, f"array columns have shapes {wave.shape} and {flux.shape}, expected (rows, npix)"
        )
    out = []
    for r in rows_to_read(path, row, wave.shape[0], "table"):
        sid = str(columns[id_key][r]).strip() if id_key else f"{stem}-{r}"
        out.append(
            make_spectrum(
                path, wave[r], flux[r],
                ivar=None if ivar is None else ivar[r],
                mask=None if mask is None else mask[r] != 0,
                row=r, id=sid, **common,
            )
        )  # fmt: skip
    return out


# -- text: CSV, ECSV, whitespace columns -----------------------------------------------
def read_text(path: Path, row: int | None = None) -> list[Spectrum]:
    """CSV/ECSV/plain columns: wavelength, flux[, error]; named columns if a header names them.

    Without a header the third column is taken as the 1-sigma error (the common convention
    of two- and three-column spectra), never as ivar. The text is measured first
    (`check_text_shape`), and only the columns a spectrum uses are parsed, as numbers: a
    value that is not one is refused, not kept as a string column as wide as its widest.
    """
    data = read_capped(path, LIMITS.max_text_bytes, "text")  # gzipped text is inflated first
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise LayoutError(path, "unknown layout: not FITS, parquet or UTF-8 text") from None
    if not check_text_shape(path, data, max_lines=LIMITS.max_pixels):
        raise SpectrumError(path, "text file has no data lines (zero-length spectrum)")
    head, offset = _first_data_line(data)
    if data.lstrip().startswith(b"# %ECSV"):
        return _read_ecsv(path, data.decode("utf-8"), row)
    delim = "," if "," in head else ("\t" if "\t" in head else None)
    has_header = any(c.isalpha() and c not in "eEnNaAiIfF" for c in head) or any(
        tok.strip().lower() in WAVE_NAMES + FLUX_NAMES + LOGWAVE_NAMES
        for tok in head.replace(",", " ").split()
    )
    cells = _split(head, delim)
    if has_header:
        header = [c.strip() for c in cells]
        names = {n.lower(): n for n in reversed(header)}  # the first of a repeated name
        if not (_find(names, WAVE_NAMES + LOGWAVE_NAMES) and _find(names, FLUX_NAMES)):
            if len(header) < 2:
                raise LayoutError(path, f"text needs wavelength and flux columns, found {header}")
            raise LayoutError(
                path,
                f"no wavelength and flux columns among {header} (name them e.g. "
                "wavelength, flux, error)",
            )
        used = _used(names)
        index = {k: header.index(names[k]) for k in used}
        body = data[offset:].split(b"\n", 1)[1] if b"\n" in data[offset:] else b""
    else:
        if len(cells) < 2:
            raise LayoutError(
                path, f"text needs wavelength and flux columns, found {len(cells)} column(s)"
            )
        names = {"wavelength": "col1", "flux": "col2"}
        if len(cells) >= 3:
            names["error"] = "col3"
        index = {k: i for i, k in enumerate(names)}
        body = data[offset:]
    values = _numbers(path, body, delim, index, names)
    if values.shape[0] == 0:
        raise SpectrumError(path, "text file has no data rows (zero-length spectrum)")
    columns = {k: values[:, j] for j, k in enumerate(index)}
    names = {k: names[k] for k in index}
    return _columns_to_spectra(path, columns, names, {}, frame="air", hdu=None, row=row)


def _first_data_line(data: bytes) -> tuple[str, int]:
    """The first line that is neither blank nor a comment, and where it starts."""
    pos = 0
    for raw in io.BytesIO(data):
        line = raw.decode("utf-8").strip()
        if line and not line.startswith("#"):
            return line, pos
        pos += len(raw)
    return "", pos


def _split(line: str, delim: str | None) -> list[str]:
    if '"' in line:
        return next(csv.reader([line], delimiter=delim or " ", skipinitialspace=True), [])
    return line.split(delim)


def _used(names: dict[str, str]) -> list[str]:
    """The lower-case names of the columns a spectrum is built from, as `_columns_to_spectra`
    picks them."""
    wave = next((n for n in WAVE_NAMES if n in names), None)
    out = [wave or next(n for n in LOGWAVE_NAMES if n in names)]
    out.append(next(n for n in FLUX_NAMES if n in names))
    ivar = next((n for n in IVAR_NAMES if n in names), None)
    err = None if ivar else next((n for n in ERROR_NAMES if n in names), None)
    mask = next((n for n in MASK_NAMES if n in names), None)
    return out + [k for k in (ivar, err, mask) if k]


def _numbers(
    path: Path, body: bytes, delim: str | None, index: dict[str, int], names: dict[str, str]
) -> np.ndarray:
    """The `index` columns of the data lines as float64, rows x columns."""
    import warnings

    stream = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", newline=None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": checked by the caller
            return np.loadtxt(
                stream, dtype=np.float64, delimiter=delim, comments="#",
                usecols=list(index.values()), ndmin=2, quotechar='"',
            )  # fmt: skip
    except ValueError as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        m = re.search(r"string '(.*?)'? to float64 at row (\d+), column (\d+)", detail)
        if m:
            col, row = int(m[3]) - 1, int(m[2]) + 1
            name = next((names[k] for k, i in index.items() if i == col), f"column {col + 1}")
            if not m[1].strip():
                raise SpectrumError(
                    path, f"column {name!r} has an empty value in data row {row} (write nan "
                    "for a missing one)",
                ) from None  # fmt: skip
            raise SpectrumError(
                path, f"column {name!r} is not numeric: {m[1][:40]!r} in data row {row}"
            ) from None
        raise LayoutError(path, f"unreadable as text columns ({detail[:160]})") from None


def _read_ecsv(path: Path, text: str, row: int | None) -> list[Spectrum]:
    """ECSV declares each column's type (astropy refuses a value that is not one) and may
    give units and the frame in its header."""
    from astropy.table import Table

    _refuse_yaml_aliases(path, text)
    try:
        table = Table.read(text, format="ascii.ecsv", guess=False)
    except Exception as exc:
        raise LayoutError(path, f"unreadable as ecsv text ({exc})") from None
    if len(table) == 0:
        raise SpectrumError(path, "text file has no data rows (zero-length spectrum)")
    names = {n.lower(): n for n in table.colnames}
    if not (_find(names, WAVE_NAMES + LOGWAVE_NAMES) and _find(names, FLUX_NAMES)):
        raise LayoutError(
            path,
            f"no wavelength and flux columns among {table.colnames} (name them e.g. "
            "wavelength, flux, error)",
        )
    columns = {k: table[v] for k, v in names.items()}
    units = {k: (str(table[v].unit) if table[v].unit else None) for k, v in names.items()}
    meta = {str(k).lower(): v for k, v in table.meta.items()}
    return _columns_to_spectra(
        path, columns, names, units, frame=_text_frame(meta), hdu=None, row=row
    )


def _refuse_yaml_aliases(path: Path, text: str) -> None:
    """Refuse an ECSV header whose YAML holds anchors or aliases (`&a`, `*a`), before
    astropy loads it: nine nested aliases of nine make 9^9 values out of a kilobyte once
    anything turns the metadata into text. No ECSV writer needs them; the header is only
    tokenised here, which costs what its text does."""
    import yaml

    lines = []
    for line in text.splitlines()[1:]:  # after "# %ECSV 1.0"
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    try:
        for token in yaml.scan("\n".join(lines), Loader=yaml.SafeLoader):
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                anchor = isinstance(token, yaml.AnchorToken)
                kind, sign = ("anchor", "&") if anchor else ("alias", "*")
                raise SpectrumError(
                    path,
                    f"ECSV header line {token.start_mark.line + 2} holds a YAML {kind} "
                    f"({sign}{token.value}); anchors and aliases are not read (write the "
                    "values out)",
                )
    except yaml.YAMLError:
        return  # astropy names what is wrong with the header in its own words


def _text_frame(meta: dict[str, Any]) -> Frame:
    for key in ("frame", "airorvac", "wavelength_frame"):
        val = str(meta.get(key, "")).lower()
        if val.startswith("vac"):
            return "vacuum"
        if val.startswith("air"):
            return "air"
    return "air"
