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


def spectra_meta(refs: list[CandidateRef]) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """Survey metadata for each ref (index -> meta), reading each file once, and
    index -> problem for refs whose spectrum cannot be read.

    The files are untrusted: each is read in a limited worker process
    (`agent.formats.sandbox`), several at a time, so a file that would take more memory
    or time than a read may is refused ("refused: <file> needs more than N MB to read")
    and the others go on."""
    from concurrent.futures import ThreadPoolExecutor

    from agent.formats.sandbox import ReadRefused, WorkerStartError, pool, read_metas

    by_path: dict[str, list[int]] = {}
    for i, ref in enumerate(refs):
        by_path.setdefault(ref.path, []).append(i)
    metas: dict[int, dict[str, Any]] = {}
    problems: dict[int, str] = {}
    if not by_path:
        return metas, problems
    reads = pool()

    def one(path: str, idx: list[int]) -> list[Any]:
        locs = [(refs[i].hdu, refs[i].row) for i in idx]
        try:
            return reads.call(path, read_metas, path, locs)
        except ReadRefused as err:
            return [str(err)] * len(idx)
        except SpectrumError as err:
            return [err.problem] * len(idx)
        except WorkerStartError:
            raise  # nothing can be read: one line naming why, not one per file
        except Exception as err:  # a reader bug must not stop the whole ingest
            log.exception("reading %s failed", path)
            return [f"{type(err).__name__}: {err}"] * len(idx)

    items = list(by_path.items())
    with ThreadPoolExecutor(max_workers=max(1, min(reads.limits.workers, len(items)))) as ex:
        answers = list(ex.map(lambda item: one(*item), items))
    for (_, idx), got in zip(items, answers):
        for i, meta in zip(idx, got):
            if isinstance(meta, str):
                problems[i] = meta
            elif isinstance(meta, tuple):  # (kind, source, problem) from the worker
                problems[i] = meta[2]
            else:
                metas[i] = _meta_of_info(meta)
    return metas, problems


def read_upload(
    path: Path, task: str, roots: list[Path] | None
) -> tuple[list[CandidateRef], dict[str, dict[str, Any]]]:
    """The candidates an uploaded file (a spectrum, a catalogue, a parquet) names, every
    spectrum read once to prove it readable, all in a limited worker process: a file
    past a limit raises `ReadRefused` ("refused: <file> needs more than N MB to read").
    With them, the survey metadata of each (by `ref.location`), for `ingest_refs`'s
    `known`: the file is not read again for it."""
    from agent.formats.sandbox import checked_upload, pool

    found = pool().call(path, checked_upload, str(path), task, roots)
    return [ref for ref, _ in found], {ref.location: _meta_of_info(m) for ref, m in found}


def read_sources(path: Path, task: str, roots: list[Path] | None) -> list[CandidateRef]:
    """The candidates a server path names (a file, folder, glob or catalogue), expanded in
    a limited worker process as an upload is."""
    from agent.formats.sandbox import expand_limited, pool

    return pool().call(path, expand_limited, str(path), task, roots)


def _meta_of_info(info: Any) -> dict[str, Any]:
    from db.store import SURVEY_META

    out = {k: getattr(info, k) for k in SURVEY_META}
    return {k: v for k, v in out.items() if v not in (None, "")}


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
    known: dict[str, dict[str, Any]] | None = None,
) -> tuple[Any, list[tuple[str, str]], list[CandidateRef]]:
    """Check `refs` (their spectra read for survey metadata, their files hashed) and add the
    good ones; returns (AddReport, [(item, problem)], the refs now in the store). An id the
    store already gives to another spectrum comes back as a `Conflict`. `read="new"` reads
    only the files of spectra the store does not hold yet: a run that reads each spectrum
    anyway (`vet --db`) then pays one extra read per new spectrum, for its survey, position
    and SNR, and none on a resumed run. `known` maps a ref's `location` to its survey
    metadata read already (an upload's check): those are not read again."""
    from db.store import file_hash

    refs, errors = one_candidate_per_spectrum(store, refs)
    metas: dict[int, dict[str, Any]] = {}
    problems: dict[int, str] = {}
    known = known or {}
    if read:
        held = store.stored_spectra(refs) if read == "new" else set()
        fresh = [i for i in range(len(refs)) if i not in held and refs[i].location not in known]
        got, bad = spectra_meta([refs[i] for i in fresh])
        metas = {fresh[j]: v for j, v in got.items()}
        problems = {fresh[j]: v for j, v in bad.items()}
    metas.update({i: known[r.location] for i, r in enumerate(refs) if r.location in known})
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


def one_candidate_per_spectrum(
    store, refs: list[CandidateRef]
) -> tuple[list[CandidateRef], list[tuple[str, str]]]:
    """`refs` without those giving a second id to one spectrum (file, HDU, row) for one
    task, which the store refuses (one candidate per spectrum and task); each left out is
    a `Conflict` naming both ids and the file. The first, or the stored one, stands.
    Checked before anything is read or written, so nothing is half-added."""
    from db.store.values import ref_key

    holders = store.spectrum_holders(refs) if refs else {}
    first: dict[tuple[str, str], CandidateRef] = {}
    kept: list[CandidateRef] = []
    errors: list[tuple[str, str]] = []
    for i, ref in enumerate(refs):
        loc = ref.location
        stored = holders.get(i)
        if stored is not None and stored != ref.id:
            errors.append(Conflict((
                _where(ref),
                f"{loc} is already candidate {stored!r} (task {ref.task}) in the store: one "
                f"spectrum is one candidate per task, so id {ref.id!r} is not added",
            )))  # fmt: skip
            continue
        seen = first.setdefault((ref_key(ref.path, ref.hdu, ref.row), ref.task), ref)
        if seen.id != ref.id:
            errors.append(Conflict((
                _where(ref),
                f"{loc} is already candidate {seen.id!r} (task {ref.task}) in "
                f"{seen.origin or seen.path}: one spectrum is one candidate per task, so id "
                f"{ref.id!r} is not added",
            )))  # fmt: skip
            continue
        kept.append(ref)
    return kept, errors


def _where(ref: CandidateRef) -> str:
    return f"{ref.id} ({ref.location})"
