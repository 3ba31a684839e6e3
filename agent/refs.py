"""`CandidateRef`: a reference to one spectrum (file, hdu, row) plus the task to vet it for.

Readers (`agent.formats.catalogue`) build them and everything downstream (runner, store,
exporters) passes them around; `agent.candidates` turns what a user points Loupe at into them.
Two references that give one (id, task) to different spectra are a `ConflictError`.
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
    def location(self) -> str:
        """The spectrum as messages name it: `path[hdu] row N`."""
        where = self.path + ("" if self.hdu is None else f"[{self.hdu}]")
        return where if self.row is None else f"{where} row {self.row}"

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
            f"id {ref.id!r} (task {ref.task}) points at {ref.location} here but at "
            f"{first.location} in {first.origin or first.path} (conflict)",
        )


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
