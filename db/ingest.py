"""Load candidates into the store: `launch.py ingest SOURCES... [--task T] [--db URL]`.

SOURCES are spectrum files, folders, globs, catalogue CSVs (`path,task[,id,hdu,row,label,...]`,
paths relative to the CSV) and SpecVI-Bench parquet files, expanded by
`agent.catalog.read_candidates`. A bad file, or a bad catalogue line, is reported with the
problem and skipped; everything else is ingested. Re-running is safe: candidates already in
the store are counted, never duplicated, and each batch commits on its own, so a killed
ingest resumes where it stopped.

    python launch.py ingest data/lamost/*.fits --task cv --db loupe.db
    python launch.py ingest catalogue.csv --split train --source-catalog "LAMOST DR9 CV"
"""

from __future__ import annotations

import argparse
import glob
import logging
import sys
import time
from pathlib import Path
from typing import Any

from agent.catalog import CandidateRef, read_candidates
from agent.spectrum import SpectrumError
from db.store import DEFAULT_DB

log = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sources",
        nargs="+",
        help="Spectrum files, folders, globs, catalogue CSVs or SpecVI parquet.",
    )
    parser.add_argument(
        "--task",
        default=None,
        help="Task for inputs that carry none (plain files, folders, globs).",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="Database file or SQLAlchemy URL.")
    parser.add_argument(
        "--split",
        choices=["train", "test", "holdout"],
        default=None,
        help="Split for candidates whose catalogue gives none.",
    )
    parser.add_argument(
        "--source-catalog",
        default=None,
        help="Name of the catalogue the candidates come from, recorded with each.",
    )
    parser.add_argument(
        "--gold",
        action="store_true",
        help="Mark these candidates as gold-standard items (their label is the gold label).",
    )
    parser.add_argument(
        "--no-read",
        action="store_true",
        help="Do not open catalogue spectra to check them and read survey metadata.",
    )
    parser.add_argument(
        "--no-hash", action="store_true", help="Do not compute each file's sha256 content hash."
    )
    parser.add_argument(
        "--root",
        action="append",
        default=None,
        help="Refuse paths outside this folder (repeatable).",
    )
    parser.add_argument("--batch-size", type=int, default=2000, help="Candidates per transaction.")


def collect(
    sources: list[str], task: str | None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[tuple[str, str]]]:
    """Candidates from every source, and (source, problem) for each one that failed."""
    refs: list[CandidateRef] = []
    errors: list[tuple[str, str]] = []
    for source in sources:
        paths = [Path(source).expanduser()]
        if not paths[0].exists() and GLOB_CHARS & set(source):
            paths = [Path(p) for p in sorted(glob.glob(str(paths[0]), recursive=True))]
            if not paths:
                errors.append((source, "glob matches no files"))
                continue
        for path in paths:
            if path.is_dir():
                files = [
                    p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")
                ]
                for f in files:
                    _one(f, task, roots, refs, errors, quiet_layout=True)
            else:
                _one(path, task, roots, refs, errors, quiet_layout=False)
    return refs, errors


def _one(path: Path, task, roots, refs, errors, quiet_layout: bool) -> None:
    from agent.formats import LayoutError
    from agent.formats.catalogue import is_catalogue

    try:
        got = read_candidates_in(path, task, roots)
    except LayoutError as err:
        if not quiet_layout:  # in a folder, files of no spectrum layout are not errors
            errors.append((str(path), err.problem))
        return
    except SpectrumError as err:
        if path.suffix.lower() == ".csv" and is_catalogue(path):
            good, bad = _catalogue_lines(path, task, roots)
            refs += good
            errors += bad
        else:
            errors.append((str(path), err.problem if err.source == str(path) else str(err)))
        return
    except OSError as err:
        errors.append((str(path), f"cannot read ({err.strerror or err})"))
        return
    refs += got


def read_candidates_in(path: Path, task: str | None, roots: list[Path] | None):
    if roots is None:
        return read_candidates([path], task=task)
    from agent.formats import expand_candidates

    return expand_candidates([str(path)], task=task, roots=roots)


def _catalogue_lines(
    path: Path, task: str | None, roots: list[Path] | None
) -> tuple[list[CandidateRef], list[tuple[str, str]]]:
    """A catalogue with bad lines: the good lines still count, each bad one is reported."""
    from agent.formats.catalogue import catalogue_lines

    try:
        good, bad = catalogue_lines(path, task, roots)
    except (OSError, SpectrumError) as exc:
        return [], [(str(path), getattr(exc, "problem", None) or str(exc))]
    return good, [(err.source, err.problem) for err in bad]


def _meta_of(spec) -> dict[str, Any]:
    from db.store import SURVEY_META

    out = {k: getattr(spec.meta, k) for k in SURVEY_META}
    return {k: v for k, v in out.items() if v not in (None, "")}


def spectra_meta(refs: list[CandidateRef]) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """Survey metadata for each ref (index -> meta), reading each file once, and
    index -> problem for refs whose spectrum cannot be read."""
    from agent.spectrum import read_spectra

    by_path: dict[str, list[int]] = {}
    for i, ref in enumerate(refs):
        by_path.setdefault(ref.path, []).append(i)
    metas: dict[int, dict[str, Any]] = {}
    problems: dict[int, str] = {}
    for path, idx in by_path.items():
        index: dict[tuple[Any, Any], Any] = {}
        if len(idx) > 1:
            try:
                for spec in read_spectra(path):
                    index[(_norm(spec.meta.hdu), spec.meta.row)] = spec
            except Exception:  # noqa: BLE001 (each ref is read again below and named)
                index = {}  # fall back to reading each ref on its own, to name the bad one
        for i in idx:
            ref = refs[i]
            spec = index.get((_norm(ref.hdu), ref.row))
            try:
                metas[i] = _meta_of(spec if spec is not None else ref.load())
            except SpectrumError as err:
                problems[i] = err.problem
            except Exception as err:  # a reader bug must not stop the whole ingest
                log.exception("reading %s failed", _where(ref))
                problems[i] = f"{type(err).__name__}: {err}"
    return metas, problems


def _norm(hdu: Any) -> Any:
    return str(hdu) if hdu is not None else None


def ingest(
    store,
    sources: list[str],
    *,
    task: str | None = None,
    roots: list[Path] | None = None,
    **options: Any,
) -> tuple[Any, list[tuple[str, str]]]:
    """Expand `sources`, check them, add them; returns (AddReport, [(item, problem)]).
    `options` are `ingest_refs`'s."""
    refs, errors = collect(sources, task, roots)
    report, problems, _ = ingest_refs(store, refs, **options)
    return report, errors + problems


def ingest_refs(
    store,
    refs: list[CandidateRef],
    *,
    split: str | None = None,
    source_catalog: str | None = None,
    gold: bool = False,
    read: bool = True,
    hash_files: bool = True,
    batch_size: int = 2000,
    actor: str = "ingest",
) -> tuple[Any, list[tuple[str, str]], list[CandidateRef]]:
    """Check `refs` (their spectra read for survey metadata, their files hashed) and add the
    good ones; returns (AddReport, [(item, problem)], the refs now in the store)."""
    from db.store import file_hash

    errors: list[tuple[str, str]] = []
    metas, problems = spectra_meta(refs) if read else ({}, {})
    meta: dict[int, dict[str, Any]] = {}
    hashes: dict[str, str] = {}
    kept: list[CandidateRef] = []
    for i, ref in enumerate(refs):
        if i in problems:
            errors.append((_where(ref), problems[i]))
            continue
        info = dict(metas.get(i, {}))
        if hash_files and ref.path not in hashes:
            try:
                hashes[ref.path] = file_hash(ref.path)
            except OSError as err:
                errors.append((_where(ref), f"cannot read ({err.strerror or err})"))
                continue
        extra = dict(ref.extra)
        if source_catalog is None and extra.get("source") == "specvi":
            info.setdefault("source_catalog", "SpecVI-Bench")
        meta[len(kept)] = info
        kept.append(ref)
    report = store.add_candidates(
        kept,
        source_catalog=source_catalog,
        split=split,
        gold=gold,
        meta=meta,
        hashes=hashes,
        batch_size=batch_size,
        actor=actor,
    )
    refused = {i for i, _, _ in report.errors}
    errors += [(f"{kept[i].id} ({kept[i].path})", why) for i, _, why in report.errors]
    return report, errors, [r for i, r in enumerate(kept) if i not in refused]


def _where(ref: CandidateRef) -> str:
    loc = (
        ref.path
        + ("" if ref.hdu is None else f"[{ref.hdu}]")
        + ("" if ref.row is None else f" row {ref.row}")
    )
    return f"{ref.id} ({loc})"


def main(args: argparse.Namespace) -> int:
    from db.store import Store

    t0 = time.time()
    store = Store(args.db)
    try:
        report, errors = ingest(
            store,
            args.sources,
            task=args.task,
            split=args.split,
            source_catalog=args.source_catalog,
            gold=args.gold,
            read=not args.no_read,
            hash_files=not args.no_hash,
            roots=[Path(r) for r in args.root] if args.root else None,
            batch_size=args.batch_size,
        )
    finally:
        store.close()
    for item, problem in errors:
        print(f"ingest: skipped {item}: {problem}", file=sys.stderr)
    print(
        f"ingest: {report.added} added, {report.existing} already present, "
        f"{len(errors)} refused ({time.time() - t0:.1f} s) -> {args.db}"
    )
    return 1 if errors else 0
