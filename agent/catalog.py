"""Candidates: a reference to one spectrum (file, hdu, row) plus the task to vet it for.

`read_candidates` expands whatever a user points Loupe at (a catalogue CSV
`path,task[,id,hdu,row,label]` with paths relative to the CSV, files, globs, folders,
SpecVI-Bench parquet) into `CandidateRef`s; `CandidateRef.load()` reads the spectrum.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.spectrum import Spectrum


@dataclass(frozen=True)
class CandidateRef:
    id: str
    task: str
    path: str  # absolute or relative to the working directory
    hdu: int | str | None = None
    row: int | None = None
    label: str | None = None  # "YES" / "NO" when known
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def spectrum_ref(self) -> dict[str, Any]:
        return {"path": self.path, "hdu": self.hdu, "row": self.row}

    def load(self) -> Spectrum:
        """The spectrum this candidate refers to (exactly one), with meta.id set to `id`."""
        from agent.formats import load_one

        spec = load_one(Path(self.path), hdu=self.hdu, row=self.row)
        spec.meta.id = self.id
        return spec


def read_candidates(
    sources: list[str | Path] | str | Path, task: str | None = None
) -> list[CandidateRef]:
    """Expand catalogue CSVs, parquet files, files, globs and folders into candidates.

    `task` applies to inputs that do not carry their own (plain files, folders, globs).
    """
    from agent.formats import expand_candidates

    if isinstance(sources, (str, Path)):
        sources = [sources]
    return expand_candidates([str(s) for s in sources], task=task)
