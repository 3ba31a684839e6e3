"""Turning what a user points Loupe at into candidates: catalogue CSVs, SpecVI-Bench parquet,
spectrum files (every spectrum in a multi-spectrum file), folders and globs.

With `roots`, every path (after resolving `..` and symlinks) must lie inside one of them,
so a catalogue or upload cannot reach files outside the data folders.
"""

from __future__ import annotations

import csv
import glob
from pathlib import Path
from typing import Any

from agent.catalog import CandidateRef
from agent.formats.common import (
    FITS_MAGIC,
    GZIP_MAGIC,
    LIMITS,
    PARQUET_MAGIC,
    LayoutError,
    LimitError,
    check_file,
    file_stem,
)
from agent.spectrum import SpectrumError
from agent.tasks import task_name

CATALOGUE_COLUMNS = ("path", "task", "id", "hdu", "row", "label")
SPECTRUM_SUFFIXES = (
    ".fits", ".fit", ".fts", ".fits.gz", ".fit.gz", ".fts.gz",
    ".txt", ".dat", ".csv", ".ecsv", ".tsv", ".asc", ".parquet",
)  # fmt: skip
LABELS = {"yes": "YES", "y": "YES", "1": "YES", "true": "YES",
          "no": "NO", "n": "NO", "0": "NO", "false": "NO"}  # fmt: skip
GLOB_CHARS = set("*?[")


def normalise_label(value: Any, where: str) -> str | None:
    """YES/NO from yes/no/1/0/true/false (any case); empty -> None."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    label = LABELS.get(text.lower())
    if label is None:
        raise SpectrumError(where, f"label {text!r} is not YES/NO (or 1/0, true/false)")
    return label


def normalise_task(task: str | None) -> str | None:
    if task is None or not str(task).strip():
        return None
    return task_name(str(task))


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


def is_catalogue(path: Path) -> bool:
    """A CSV whose header names catalogue columns (path, task, label, ...), not flux."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    cols = {c.strip().lower() for c in first.split(",")}
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
    out: list[CandidateRef] = []
    task = normalise_task(task)
    for source in sources:
        src = Path(source).expanduser()
        if not src.exists() and GLOB_CHARS & set(str(source)):
            matches = sorted(glob.glob(str(src), recursive=True))
            if not matches:
                raise SpectrumError(source, "glob matches no files")
            for m in matches:
                p = Path(m)
                if p.is_dir():
                    out += _folder(p, task, roots)
                elif _looks_like_spectrum(p) or is_catalogue(p):
                    out += _one_source(p, task, roots)
            continue
        if src.is_dir():
            out += _folder(src, task, roots)
        else:
            out += _one_source(src, task, roots)
    return out


def _folder(folder: Path, task: str | None, roots: list[Path] | None) -> list[CandidateRef]:
    """Spectrum files below `folder`; files of no spectrum layout are skipped, while a
    damaged spectrum file (truncated, all NaN, ...) is an error naming it."""
    _guard(folder, roots)
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and _looks_like_spectrum(p):
            try:
                out += _spectrum_file(p, task, roots)
            except LayoutError:
                continue  # readable, but not a spectrum (a notes CSV, a plain image)
    return out


def _one_source(path: Path, task: str | None, roots: list[Path] | None) -> list[CandidateRef]:
    _guard(path, roots)
    check_file(path)
    head = _magic(path)
    if head == PARQUET_MAGIC:
        return _parquet(path, task, roots)
    if not head.startswith((b"SIMP", GZIP_MAGIC)) and is_catalogue(path):
        return _catalogue(path, task, roots)
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
        t = rec["task"] or task
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
            )
        )
    return out


def _catalogue(path: Path, task: str | None, roots: list[Path] | None) -> list[CandidateRef]:
    """Rows of `path,task[,id,hdu,row,label]`; paths are relative to the CSV's folder.
    The first bad line refuses the whole catalogue (`catalogue_lines` keeps the good ones)."""
    good, bad = catalogue_lines(path, task, roots)
    if bad:
        raise bad[0]
    return good


def catalogue_lines(
    path: Path, task: str | None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """Every line of a catalogue CSV: the candidates of the good lines and one error per
    bad line (naming the CSV and its line), so a caller may keep the good ones. A CSV that
    cannot be read at all, or lacks a required column, raises."""
    if path.stat().st_size > LIMITS.max_file_bytes:
        raise LimitError(path, "catalogue CSV over the size limit")
    base = path.resolve().parent
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = [c.strip().lower() for c in (reader.fieldnames or [])]
            records = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SpectrumError(path, f"unreadable catalogue CSV ({exc})") from None
    for col in ("path", "task"):
        if col not in header and not (col == "task" and task):
            raise SpectrumError(path, f"catalogue CSV lacks the required column {col!r}")
    good: list[CandidateRef] = []
    bad: list[SpectrumError] = []
    for n, raw in enumerate(records, start=2):  # line 1 is the header
        try:
            good.append(_catalogue_row(raw, base, f"{path} line {n}", task, roots))
        except SpectrumError as err:
            bad.append(err)
    return good, bad


def _catalogue_row(
    raw: dict, base: Path, where: str, task: str | None, roots: list[Path] | None
) -> CandidateRef:
    rec = {str(k).strip().lower(): (v or "").strip() for k, v in raw.items() if k}
    if not rec.get("path"):
        raise SpectrumError(where, "empty path")
    resolved = _guard(base / rec["path"], roots, shown=f"{where}: {rec['path']}")
    if not resolved.is_file():
        raise SpectrumError(where, f"spectrum file not found: {rec['path']}")
    t = normalise_task(rec.get("task")) or task
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
    )
