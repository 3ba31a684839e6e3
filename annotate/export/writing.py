"""What the three format writers share: a built row, content-named image files, streamed
Hugging Face splits and the columns every row carries.

Nothing written holds a timestamp or a random value: the same inputs give byte-identical
files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate.export.record import SPLIT_ORDER, ExportRecord


@dataclass
class Built:
    """One row as a worker built it (or why it could not), by its index in the job list."""

    index: int
    row: dict[str, Any] | None = None
    images: dict[str, list[bytes]] = field(default_factory=dict)
    error: str | None = None


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)


class ImageStore:
    """PNG files named by content, so identical images are written once."""

    def __init__(self, root: Path, folder: str = "images"):
        self.root = root
        self.folder = folder
        self.written: set[str] = set()

    def put(self, png: bytes) -> str:
        name = f"{self.folder}/{sha(png)[:20]}.png"
        if name not in self.written:
            write_file(self.root / name, png)
            self.written.add(name)
        return name


class HFWriter:
    """Rows of one split streamed to an Arrow file, then saved with `save_to_disk`."""

    def __init__(self, features: Any, tmp: Path, split: str):
        from datasets.arrow_writer import ArrowWriter

        self.path = tmp / f"{split}.arrow"
        self.writer = ArrowWriter(features=features, path=str(self.path))
        self.hash = hashlib.sha256()
        self.n = 0

    def write(self, row: dict[str, Any]) -> None:
        self.writer.write(row)
        self.hash.update(dumps({k: v for k, v in row.items() if k != "images"}).encode())
        for img in row.get("images") or []:
            self.hash.update(img["bytes"])
        self.n += 1

    def dataset(self):
        from datasets import Dataset

        self.writer.finalize()
        self.writer.close()
        ds = Dataset.from_file(str(self.path))
        # The fingerprint lands in state.json: derive it from the content, not at random.
        ds._fingerprint = self.hash.hexdigest()[:16]
        return ds


def save_hf(writers: dict[str, HFWriter], out: Path) -> None:
    from datasets import DatasetDict

    # An empty split cannot be loaded back by `load_from_disk`, so only non-empty ones go in.
    dd = DatasetDict({s: w.dataset() for s, w in sorted(writers.items(), key=split_order) if w.n})
    if dd:
        from datasets.utils import logging as ds_logging

        was_on = ds_logging.is_progress_bar_enabled()
        ds_logging.disable_progress_bar()  # one bar per split is noise in a CLI summary
        try:
            dd.save_to_disk(str(out))
        finally:
            if was_on:
                ds_logging.enable_progress_bar()


def split_order(item: tuple[str, Any]) -> int:
    return SPLIT_ORDER.get(item[0], 9)


def message_features():
    from datasets import List, Value

    return List(
        {
            "role": Value("string"),
            "content": List({"type": Value("string"), "text": Value("string")}),
        }
    )


def common_features() -> dict[str, Any]:
    from datasets import Value

    return {
        "id": Value("string"),
        "candidate": Value("string"),
        "object_id": Value("string"),
        "task": Value("string"),
        "label": Value("string"),
        "source": Value("string"),
        "split": Value("string"),
        "grade": Value("int64"),
        "redshift": Value("float64"),
        "weight": Value("float64"),
    }


def common_row(r: ExportRecord) -> dict[str, Any]:
    return {
        "id": r.row_id,
        "candidate": r.key,
        "object_id": r.object_id,
        "task": r.task,
        "label": r.label,
        "source": r.source,
        "split": r.split,
        "grade": r.grade,
        "redshift": r.redshift,
        "weight": r.weight,
    }


def built_rows(
    records: Sequence[ExportRecord], built: Iterable[Built], errors: list[dict[str, Any]]
) -> Iterator[tuple[ExportRecord, Built]]:
    """Each built row with its record; a row that failed to build goes to `errors` instead."""
    for b in built:
        r = records[b.index]
        if b.error:
            errors.append({"id": r.row_id, "candidate": r.key, "reason": b.error})
        else:
            yield r, b
