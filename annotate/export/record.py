"""The record an exporter works on, and what an export returns."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.trajectory import Trajectory

Kind = Literal["sft", "rl", "pairs"]
KINDS: tuple[str, ...] = ("sft", "rl", "pairs")
SPLIT_ORDER = {"train": 0, "test": 1, "holdout": 2}
# The renderer exports and training draw images with unless told otherwise: the published
# Spec-o3 tool's plots, so exports, GRPO rollouts and the published checkpoints agree.
# Every manifest and checkpoint records the one used; training refuses a mismatch.
DEFAULT_RENDERER = "speco3"


@dataclass
class ExportRecord:
    """One candidate's exportable decision, independent of where it was stored."""

    candidate_id: int  # the store's candidate id (ExportItem.entity_id)
    key: str  # candidate id users see
    object_id: str
    task: str
    label: str  # resolved YES / NO
    source: str  # sft/pairs: accepted | corrected | authored; rl: review | gold | catalog
    spectrum_ref: dict[str, Any] = field(default_factory=dict)  # path, hdu, row
    split: str | None = None  # the object's existing split, if the store has one
    trajectory: Trajectory | None = None  # sft: what to train on; pairs: chosen
    rejected: Trajectory | None = None  # pairs: the agent's trajectory
    recency: int = 0  # larger is newer (a review or authored id): breaks ties in dedup
    grade: int | None = None  # the expert's quality grade of the decision, 1 (a guess) to 4
    redshift: float | None = None  # the redshift the expert recorded with it

    @property
    def weight(self) -> float:
        """Training weight: grade / 4, and 1.0 for an ungraded decision (none was doubted)."""
        return 1.0 if self.grade is None else self.grade / 4.0

    @property
    def row_id(self) -> str:
        return f"{self.object_id}:{self.task}"

    def content_hash(self) -> str:
        """Hash of what is exported for this record (not of rendered pixels)."""
        payload = {
            "key": self.key,
            "object_id": self.object_id,
            "task": self.task,
            "label": self.label,
            "source": self.source,
            "ref": self.spectrum_ref,
            "trajectory": _traj_payload(self.trajectory),
            "rejected": _traj_payload(self.rejected),
        }
        # only when set: the hashes of ungraded rows stay what earlier batches recorded
        if self.grade is not None or self.redshift is not None:
            payload["grade"], payload["redshift"] = self.grade, self.redshift
        data = json.dumps(payload, sort_keys=True, default=str).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest()


def _traj_payload(t: Trajectory | None) -> Any:
    if t is None:
        return None
    return {
        "steps": [[s.raw, s.window, s.tool_call] for s in t.steps],
        "verdict": t.verdict,
        "explanation": t.explanation,
    }


@dataclass
class ExportResult:
    kind: str
    out: Path
    manifest: dict[str, Any]
    items: list[tuple[int, str]]  # (candidate id, content hash) of the rows written
    errors: list[dict[str, str]]
    seconds: float = 0.0
    batch_id: int | None = None
    existing: bool = False  # `out` already held this recorded batch; nothing was written
