"""Load candidates into the store (the library of `launch.py ingest`, `commands.ingest`).

Sources are spectrum files, folders, globs, catalogue CSVs (`path,task[,id,hdu,row,label,...]`,
paths relative to the CSV) and SpecVI-Bench parquet files, expanded by
`agent.candidates.collect_candidates`. A bad file, or a bad catalogue line (a missing file, an
unknown task, an id already given to another spectrum, in this run or in the store), is
returned with the problem (a `Conflict` for an id given twice: the first, or the stored one,
stands) and left out; everything else is ingested. Re-running is safe: candidates already in
the store are counted, never duplicated, and each batch commits on its own, so a killed
ingest resumes where it stopped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agent.refs import CandidateRef
from agent.spectrum import SpectrumError

log = logging.getLogger(__name__)


class Conflict(tuple):
    """An (item, problem) pair for an id given to two different spectra: an error, unless
    the caller lets the first one stand (`ingest --keep-first`)."""


def collect(
    sources: list[str], task: str | None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[tuple[str, str]]]:
    """Candidates from every source, and (source or catalogue line, problem) for each one
    that failed; ids given to two spectra come back as `Conflict`s, the first one kept."""
    from agent.candidates import collect_candidates
    from agent.refs import ConflictError

    refs, bad = collect_candidates(sources, task=task, roots=roots)
    errors = [
        Conflict((e.source, e.problem)) if isinstance(e, ConflictError) else (e.source, e.problem)
        for e in bad
    ]
    return refs, errors


def _meta_of(spec) -> dict[str, Any]:
    from db.store import SURVEY_META

    out = {k: getattr(spec.meta, k) for k in SURVEY_META}
    return {k: v for k, v in out.items() if v not in (None, "")}


def spectra_meta(refs: list[CandidateRef]) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """Survey metadata for each ref (index -> meta), reading each file once, and
    index -> problem for refs whose spectrum cannot be read."""
    from agent.formats import read_spectra

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
    read: bool | str = True,
    hash_files: bool = True,
    batch_size: int = 2000,
    actor: str = "ingest",
) -> tuple[Any, list[tuple[str, str]], list[CandidateRef]]:
    """Check `refs` (their spectra read for survey metadata, their files hashed) and add the
    good ones; returns (AddReport, [(item, problem)], the refs now in the store). An id the
    store already gives to another spectrum comes back as a `Conflict`. `read="new"` reads
    only the files of spectra the store does not hold yet: a run that reads each spectrum
    anyway (`vet --db`) then pays one extra read per new spectrum, for its survey, position
    and SNR, and none on a resumed run."""
    from db.store import file_hash

    errors: list[tuple[str, str]] = []
    metas: dict[int, dict[str, Any]] = {}
    problems: dict[int, str] = {}
    if read:
        held = store.stored_spectra(refs) if read == "new" else set()
        fresh = [i for i in range(len(refs)) if i not in held]
        got, bad = spectra_meta([refs[i] for i in fresh])
        metas = {fresh[j]: v for j, v in got.items()}
        problems = {fresh[j]: v for j, v in bad.items()}
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
    refused = {i for i, _, _ in report.errors} | {i for i, _, _ in report.conflicts}
    errors += [(f"{kept[i].id} ({kept[i].path})", why) for i, _, why in report.errors]
    errors += [Conflict((item, why)) for _, item, why in report.conflicts]
    return report, errors, [r for i, r in enumerate(kept) if i not in refused]


def _where(ref: CandidateRef) -> str:
    loc = (
        ref.path
        + ("" if ref.hdu is None else f"[{ref.hdu}]")
        + ("" if ref.row is None else f" row {ref.row}")
    )
    return f"{ref.id} ({loc})"
