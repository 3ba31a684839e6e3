"""Candidates: a reference to one spectrum (file, hdu, row) plus the task to vet it for.

`read_candidates` expands whatever a user points Loupe at (a catalogue CSV
`path,task[,id,hdu,row,label]` with paths relative to the CSV, files, globs, folders,
SpecVI-Bench parquet) into `CandidateRef`s; `CandidateRef.load()` reads the spectrum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.spectrum import Spectrum, SpectrumError


@dataclass(frozen=True)
class CandidateRef:
    id: str
    task: str
    path: str  # absolute or relative to the working directory
    hdu: int | str | None = None
    row: int | None = None
    label: str | None = None  # "YES" / "NO" when known
    extra: tuple[tuple[str, Any], ...] = ()
    # Where the candidate came from ("cat.csv line 3", or the file), for messages only.
    origin: str = field(default="", compare=False)

    @property
    def spectrum_ref(self) -> dict[str, Any]:
        return {"path": self.path, "hdu": self.hdu, "row": self.row}

    def load(self) -> Spectrum:
        """The spectrum this candidate refers to (exactly one), with meta.id set to `id`."""
        from agent.formats import load_one

        spec = load_one(Path(self.path), hdu=self.hdu, row=self.row)
        spec.meta.id = self.id
        return spec


class ConflictError(SpectrumError):
    """Two inputs give one (id, task) to different spectra; `first` is the one seen first."""

    def __init__(self, ref: CandidateRef, first: CandidateRef):
        self.ref, self.first = ref, first
        super().__init__(
            ref.origin or ref.path,
            f"id {ref.id!r} (task {ref.task}) points at {_shown(ref)} here but at "
            f"{_shown(first)} in {first.origin or first.path} (conflict)",
        )


def _shown(ref: CandidateRef) -> str:
    where = ref.path
    if ref.hdu is not None:
        where += f"[{ref.hdu}]"
    return where if ref.row is None else f"{where} row {ref.row}"


def split_conflicts(
    refs: list[CandidateRef],
) -> tuple[list[CandidateRef], list[ConflictError]]:
    """The first candidate of each (id, task), and one `ConflictError` for each later one
    pointing at another spectrum. Exact repeats stay: they name the same spectrum, and the
    store and the runner count them once."""
    first: dict[tuple[str, str], CandidateRef] = {}
    kept: list[CandidateRef] = []
    conflicts: list[ConflictError] = []
    for ref in refs:
        seen = first.setdefault((ref.id, ref.task), ref)
        if seen is not ref and seen.spectrum_ref != ref.spectrum_ref:
            conflicts.append(ConflictError(ref, seen))
            continue
        kept.append(ref)
    return kept, conflicts


def collect_candidates(
    sources: list[str | Path], task: str | None = None, roots: list[Path] | None = None
) -> tuple[list[CandidateRef], list[SpectrumError]]:
    """Like `read_candidates`, but a bad source or catalogue line is returned as an error
    (naming the file and line) beside the good candidates instead of stopping everything;
    ids given to two different spectra come back as `ConflictError`s."""
    from agent.formats.catalogue import expand_each

    refs, errors = expand_each([str(s) for s in sources], task=task, roots=roots)
    kept, conflicts = split_conflicts(refs)
    return kept, errors + list(conflicts)


def read_candidates(
    sources: list[str | Path] | str | Path, task: str | None = None
) -> list[CandidateRef]:
    """Expand catalogue CSVs, parquet files, files, globs and folders into candidates.

    `task` applies to inputs that do not carry their own (plain files, folders, globs).
    """
    from agent.formats import expand_candidates

    if isinstance(sources, (str, Path)):
        sources = [sources]
    refs, conflicts = split_conflicts(expand_candidates([str(s) for s in sources], task=task))
    if conflicts:
        raise conflicts[0]
    return refs
