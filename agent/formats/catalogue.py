"""Turning what a user points Loupe at into candidates: catalogue CSVs, SpecVI-Bench parquet,
spectrum files (every spectrum in a multi-spectrum file), folders and globs.

With `roots`, every path (after resolving `..` and symlinks) must lie inside one of them,
so a catalogue or upload cannot reach files outside the data folders.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import zlib
from pathlib import Path
from typing import Any

from agent.formats.common import (
    FITS_MAGIC,
    GZIP_MAGIC,
    LIMITS,
    PARQUET_MAGIC,
    LayoutError,
    check_file,
    check_text_shape,
    file_stem,
    is_regular,
    read_capped,
)
from agent.refs import CandidateRef, split_conflicts
from agent.spectrum import SpectrumError
from agent.tasks import TASKS, task_name

CATALOGUE_COLUMNS = ("path", "task", "id", "hdu", "row", "label")
SPECTRUM_SUFFIXES = (
    ".fits", ".fit", ".fts", ".fits.gz", ".fit.gz", ".fts.gz",
    ".txt", ".dat", ".csv", ".ecsv", ".tsv", ".asc", ".parquet",
)  # fmt: skip
LABEL_ALIASES = {"yes": "YES", "y": "YES", "1": "YES", "true": "YES",
          "no": "NO", "n": "NO", "0": "NO", "false": "NO"}  # fmt: skip
GLOB_CHARS = set("*?[")


def normalise_label(value: Any, where: str) -> str | None:
    """YES/NO from yes/no/1/0/true/false (any case); empty -> None."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    label = LABEL_ALIASES.get(text.lower())
    if label is None:
        raise SpectrumError(where, f"label {text!r} is not YES/NO (or 1/0, true/false)")
    return label


def normalise_task(task: str | None, where: str | Path = "--task") -> str | None:
    """Loupe's name for `task` (aliases such as `gm` or `cc` map to theirs); empty -> None.
    An unknown name is refused here, at the input, naming `where` and the known tasks."""
    if task is None or not str(task).strip():
        return None
    name = task_name(str(task))
    if name not in TASKS:
        known = ", ".join(TASKS)
        aliases = ", ".join(f"{a}={t.name}" for t in TASKS.values() for a in t.aliases)
        raise SpectrumError(
            where, f"unknown task {str(task).strip()!r}; known tasks: {known} (aliases: {aliases})"
        )
    return name


def _guard(path: Path, roots: list[Path] | None, shown: str | Path | None = None) -> Path:
    """`path` resolved; refused if it escapes every root."""
    resolved = path.resolve()
    if roots is not None:
        allowed = [Path(r).resolve() for r in roots]
        if not any(resolved == r or resolved.is_relative_to(r) for r in allowed):
            raise SpectrumError(
                shown or path, "path lies outside the allowed data folders (refused)"
            )
    return resolved


HEADER_PEEK = 65536  # bytes read (after inflating gzip) to find a catalogue's header line


def catalogue_header(path: Path) -> list[str] | None:
    """The header of `path` parsed as CSV (BOM, quotes and gzip handled), lower-cased; None
    when the file cannot be read or starts like FITS, parquet or binary data."""
    if not is_regular(path):
        return None  # a FIFO or device would block or never end
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEADER_PEEK)
        if head.startswith(GZIP_MAGIC):
            with gzip.open(path, "rb") as gz:
                head = gz.read(HEADER_PEEK)
    except (OSError, EOFError, zlib.error):
        return None
    if head.startswith((FITS_MAGIC, PARQUET_MAGIC)):
        return None
    first = head.split(b"\n", 1)[0]
    if b"\x00" in first:
        return None
    text = first.decode("utf-8-sig", errors="replace")  # the reader names bad bytes later
    try:
        fields = next(csv.reader([text]), [])
    except csv.Error:
        return None
    return [f.strip().lower() for f in fields]


def is_catalogue(path: Path) -> bool:
    """A CSV whose parsed header names catalogue columns (path, task, label, ...), not flux."""
    header = catalogue_header(path)
    if header is None:
        return False
    cols = set(header)
    return "path" in cols or (bool(cols & {"task", "label"}) and "flux" not in cols)


def _looks_like_spectrum(path: Path) -> bool:
    name = path.name.lower()
    if name.startswith("."):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    if head.startswith((FITS_MAGIC, GZIP_MAGIC, PARQUET_MAGIC)):
        return name.endswith(SPECTRUM_SUFFIXES) or head.startswith(FITS_MAGIC)
    return name.endswith(SPECTRUM_SUFFIXES) and not is_catalogue(path)


def expand(
    sources: list[str], task: str | None, roots: list[Path] | None = None
) -> list[CandidateRef]:
    """Every candidate of `sources`; the first bad source or catalogue line raises."""
    refs, errors = expand_each(sources, task, roots)
    if errors:
        raise errors[0]
    return refs


def expand_each(
    sources: list[str], task: str | None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """Every candidate of `sources`, and one error per bad source, file or catalogue line
    (naming it), in input order; a bad item never hides the good ones."""
    try:
        task = normalise_task(task)
    except SpectrumError as err:
        return [], [err]
    refs: list[CandidateRef] = []
    errors: list[SpectrumError] = []
    for source in sources:
        src = Path(source).expanduser()
        if not src.exists() and GLOB_CHARS & set(str(source)):
            matches = [Path(m) for m in sorted(glob.glob(str(src), recursive=True))]
            if not matches:
                errors.append(SpectrumError(source, "glob matches no files"))
            for p in matches:
                if p.is_dir() or not is_regular(p) or _looks_like_spectrum(p) or is_catalogue(p):
                    _gather(p, task, roots, refs, errors)
            continue
        _gather(src, task, roots, refs, errors)
    return refs, errors


def _gather(
    path: Path,
    task: str | None,
    roots: list[Path] | None,
    refs: list[CandidateRef],
    errors: list[SpectrumError],
) -> None:
    """Candidates of one folder or file into `refs`, its problems into `errors`."""
    try:
        if path.is_dir():
            refs += _folder(path, task, roots, errors)
        else:
            refs += _one_source(path, task, roots, errors)
    except SpectrumError as err:
        errors.append(err)
    except OSError as err:
        errors.append(SpectrumError(path, f"cannot read ({err.strerror or err})"))


def _folder(
    folder: Path, task: str | None, roots: list[Path] | None, errors: list[SpectrumError]
) -> list[CandidateRef]:
    """Spectrum files below `folder`; files of no spectrum layout are skipped, while a
    damaged spectrum file (truncated, all NaN, ...) is an error naming it."""
    _guard(folder, roots)
    out: list[CandidateRef] = []
    for p in sorted(folder.rglob("*")):
        if is_regular(p) and _looks_like_spectrum(p):
            try:
                out += _spectrum_file(p, task, roots)
            except LayoutError:
                continue  # readable, but not a spectrum (a notes CSV, a plain image)
            except SpectrumError as err:
                errors.append(err)
    return out


def _one_source(
    path: Path, task: str | None, roots: list[Path] | None, errors: list[SpectrumError]
) -> list[CandidateRef]:
    _guard(path, roots)
    check_file(path)
    head = _magic(path)
    if head == PARQUET_MAGIC:
        return _parquet(path, task, roots)
    if not head.startswith(b"SIMP") and is_catalogue(path):
        good, bad = catalogue_lines(path, task, roots)
        errors += bad
        return good
    return _spectrum_file(path, task, roots)


def _spectrum_file(path: Path, task: str | None, roots: list[Path] | None) -> list[CandidateRef]:
    from agent.formats import read_file

    resolved = _guard(path, roots)
    if resolved.name.lower().endswith(".parquet") or _magic(resolved) == PARQUET_MAGIC:
        return _parquet(resolved, task, roots)
    if task is None:
        raise SpectrumError(path, "no task given for this file (choose one, e.g. cv or wd)")
    spectra = read_file(resolved)
    multi = len(spectra) > 1
    return [
        CandidateRef(
            id=s.meta.id or file_stem(resolved),
            task=task,
            path=str(resolved),
            hdu=s.meta.hdu if multi else None,
            row=s.meta.row if multi else None,
            origin=str(path),
        )
        for s in spectra
    ]


def _magic(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(4)


def _parquet(path: Path, task: str | None, roots: list[Path] | None) -> list[CandidateRef]:
    from agent.formats.specvi import rows

    resolved = _guard(path, roots)
    out = []
    for r, rec in enumerate(rows(resolved)):
        t = normalise_task(rec["task"], f"{path} row {r}") or task
        if t is None:
            raise SpectrumError(path, f"row {r}: no data_source and no task given")
        name = rec["name"] or f"{file_stem(resolved)}-{r}"
        out.append(
            CandidateRef(
                id=file_stem(Path(str(name))),
                task=t,
                path=str(resolved),
                row=r,
                label=normalise_label(rec["label"], f"{path} row {r}"),
                extra=(("source", "specvi"), ("specvi_name", str(name))),
                origin=f"{path} row {r}",
            )
        )
    return out


def catalogue_lines(
    path: Path, task: str | None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """Every line of a catalogue CSV: the candidates of the good lines and one error per
    bad line (naming the CSV and its line), so a caller may keep the good ones. A CSV that
    cannot be read at all, or lacks a required column, raises."""
    text = _catalogue_text(path)
    base = path.resolve().parent
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = [str(c).strip().lower() for c in (reader.fieldnames or [])]
        records = [(reader.line_num, rec) for rec in reader]
    except csv.Error as exc:
        raise SpectrumError(path, f"unreadable catalogue CSV ({exc})") from None
    for col in ("path", "task"):
        if col not in header and not (col == "task" and task):
            raise SpectrumError(
                path, f"catalogue CSV lacks the required column {col!r} (header: {header})"
            )
    good: list[CandidateRef] = []
    bad: list[SpectrumError] = []
    for n, raw in records:  # n: the line the record ends on (quoted fields may span lines)
        try:
            good.append(_catalogue_row(raw, base, f"{path} line {n}", task, roots))
        except SpectrumError as err:
            bad.append(err)
    good, conflicts = split_conflicts(good)
    order = {id(e): i for i, e in enumerate(bad)}
    bad = sorted([*bad, *conflicts], key=lambda e: _line_of(e, order))
    return good, bad


def _line_of(err: SpectrumError, order: dict[int, int]) -> tuple[int, int]:
    # Reports follow the file's line order; conflicts are found after the pass over lines.
    n = err.source.rsplit(" line ", 1)[-1]
    return (int(n) if n.isdigit() else 0, order.get(id(err), 0))


def _catalogue_text(path: Path) -> str:
    """The catalogue's text: gzip inflated (capped), a UTF-8 BOM dropped; a byte that is not
    UTF-8 is named with its line, since that is what a user can go and fix. Its size,
    fields and columns are bounded as a text spectrum's are (`check_text_shape`)."""
    data = read_capped(path, LIMITS.max_text_bytes, "catalogue")
    check_text_shape(path, data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpectrumError(
            path,
            f"line {line} is not UTF-8 (byte 0x{byte:02x}, {bytes([byte]).decode('latin-1')!r} "
            "in latin-1); save the catalogue as UTF-8 (Excel: 'CSV UTF-8')",
        ) from None


def _catalogue_row(
    raw: dict, base: Path, where: str, task: str | None, roots: list[Path] | None
) -> CandidateRef:
    rec = {str(k).strip().lower(): (v or "").strip() for k, v in raw.items() if k}
    if not rec.get("path"):
        raise SpectrumError(where, "empty path")
    resolved = _guard(base / rec["path"], roots, shown=f"{where}: {rec['path']}")
    if not resolved.exists():
        raise SpectrumError(where, f"spectrum file not found: {rec['path']}")
    try:
        check_file(resolved)
    except SpectrumError as err:
        raise SpectrumError(where, f"{rec['path']}: {err.problem}") from None
    t = normalise_task(rec.get("task"), where) or task
    if t is None:
        raise SpectrumError(where, "empty task")
    hdu: int | str | None = rec.get("hdu") or None
    if hdu is not None and hdu.lstrip("-").isdigit():
        hdu = int(hdu)
    row = rec.get("row") or None
    if row is not None:
        try:
            row = int(row)
        except ValueError:
            raise SpectrumError(where, f"row {row!r} is not an integer") from None
        if row < 0:
            raise SpectrumError(where, f"row {row} is negative (rows count from 0)")
    sid = rec.get("id") or file_stem(resolved) + ("" if row is None else f"-{row}")
    extra = tuple((k, v) for k, v in rec.items() if k not in CATALOGUE_COLUMNS and v)
    return CandidateRef(
        id=sid,
        task=t,
        path=str(resolved),
        hdu=hdu,
        row=row,
        label=normalise_label(rec.get("label"), where),
        extra=extra,
        origin=where,
    )
