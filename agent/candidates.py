"""Candidates from whatever a user points Loupe at: a catalogue CSV
`path,task[,id,hdu,row,label]` with paths relative to the CSV, files, globs, folders,
SpecVI-Bench parquet. Each becomes a `CandidateRef` (`agent.refs`); `CandidateRef.load()`
reads the spectrum.
"""

from __future__ import annotations

from pathlib import Path

from agent.formats.catalogue import expand, expand_each
from agent.refs import CandidateRef, split_conflicts
from agent.spectrum import SpectrumError


def expand_candidates(
    sources: list[str], task: str | None, roots: list[Path] | None = None
) -> list[CandidateRef]:
    """Catalogue CSVs, SpecVI-Bench parquet, files, folders and globs -> `CandidateRef`s,
    every one kept (conflicting ids included); `roots` confines them to those folders."""
    return expand(sources, task=task, roots=roots)


def collect_candidates(
    sources: list[str | Path], task: str | None = None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """Like `read_candidates`, but a bad source or catalogue line is returned as an error
    (naming the file and line) beside the good candidates instead of stopping everything;
    ids given to two different spectra come back as `ConflictError`s."""
    refs, errors = expand_each([str(s) for s in sources], task=task, roots=roots)
    kept, conflicts = split_conflicts(refs)
    return kept, errors + list(conflicts)


def read_candidates(
    sources: list[str | Path] | str | Path, task: str | None = None
) -> list[CandidateRef]:
    """Expand catalogue CSVs, parquet files, files, globs and folders into candidates.

    `task` applies to inputs that do not carry their own (plain files, folders, globs).
    """
    if isinstance(sources, (str, Path)):
        sources = [sources]
    refs, conflicts = split_conflicts(expand_candidates([str(s) for s in sources], task=task))
    if conflicts:
        raise conflicts[0]
    return refs
