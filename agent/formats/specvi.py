"""SpecVI-Bench parquet files: one LAMOST candidate per row, with its task and label.

Row schema: `data_source` (carbon/cc, cv, gm, ss, wd), `reward_model.ground_truth`
("YES"/"NO"), `extra_info.name` (the spectrum's file name), `extra_info.index`, and
`extra_info.tools_kwargs.spectral_visualization_tool.create_kwargs` = {flux, wavelength,
redshift}, and usually `prompt` (the chat messages, `<image>` where the overview goes) and
`images` (that overview). Struct columns may also arrive as JSON strings; both are accepted.
The spectra are LAMOST low-resolution, so vacuum wavelengths.

A row's own prompt and overview are what the published model was asked with, so episodes
use them (`row_prompt`, `prompt_for`) instead of Loupe's task prompt; the overview title of
a row is its `extra_info.name` (`agent.tool.spectrum_title`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.formats.common import (
    LIMITS,
    LayoutError,
    LimitError,
    check_file,
    file_stem,
    make_spectrum,
    plausible_redshift,
    rows_to_read,
)
from agent.protocol import TOOL_NAME
from agent.spectrum import Spectrum, SpectrumError
from agent.tasks import task_name

NEEDED = ("data_source", "reward_model", "extra_info")


BATCH_ROWS = 64  # rows decoded at a time: the whole column at once costs several times its size


WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


def _decoded_bytes(chunk: Any) -> int:
    """What a column chunk takes decoded: its values times their width. The footer's
    "uncompressed" size is after dictionary and run-length encoding, which store a column
    of one repeated value in a few bytes whatever its length."""
    width = WIDTH.get(chunk.physical_type, 0)
    return max(chunk.num_values * width, chunk.total_uncompressed_size)


def _records(path: Path, columns: list[str], wanted: set[int] | None = None) -> Iterator[dict]:
    """Row by row (only `wanted` ones, if given), `columns` as Python values, except lists
    of numbers, which stay numpy arrays: as Python objects a float takes ~30 bytes."""
    import pyarrow.parquet as pq

    check_file(path)
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise LayoutError(
                path, f"parquet lacks the SpecVI-Bench column(s) {', '.join(missing)} (has {names})"
            )
        _check_size(path, pf, columns)
        first = decoded = 0
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            # The footer cannot bound what strings decode to: a dictionary-encoded value is
            # stored once and decoded for every row. So what the batches take decoded is
            # counted as they come, each a few rows, and the read stops at the cap.
            decoded += batch.nbytes
            if decoded > LIMITS.inflate_cap:
                raise LimitError(
                    path,
                    f"parquet columns {', '.join(columns)} decode to over {LIMITS.inflate_cap} "
                    f"bytes by row {first + batch.num_rows} (over the "
                    f"{LIMITS.inflate_cap}-byte limit)",
                )
            cols = [batch.column(c) for c in columns]
            for i in range(batch.num_rows):
                if wanted is None or first + i in wanted:
                    yield {c: _lean(col[i]) for c, col in zip(columns, cols)}
            first += batch.num_rows
            if wanted is not None and first > max(wanted, default=-1):
                return
    except SpectrumError:
        raise
    except Exception as exc:
        raise SpectrumError(path, f"unreadable parquet file ({str(exc)[:160]})") from None


def _check_size(path: Path, pf: Any, columns: list[str]) -> None:
    """Refuse before reading: more columns than `LIMITS.max_columns`, or `columns` that
    decode to more than `LIMITS.inflate_cap` bytes (the footer says how many values)."""
    meta = pf.metadata
    if meta.num_columns > LIMITS.max_columns:
        raise LimitError(
            path,
            f"parquet has {meta.num_columns} columns, over the {LIMITS.max_columns}-column limit",
        )
    size = sum(
        _decoded_bytes(rg.column(j))
        for rg in (meta.row_group(i) for i in range(meta.num_row_groups))
        for j in range(rg.num_columns)
        if rg.column(j).path_in_schema.split(".")[0] in columns
    )
    if size > LIMITS.inflate_cap:
        raise LimitError(
            path,
            f"parquet columns {', '.join(columns)} inflate to {size} bytes, over the "
            f"{LIMITS.inflate_cap}-byte limit",
        )


def _lean(value: Any) -> Any:
    import pyarrow as pa

    if isinstance(value, pa.StructScalar) and value.is_valid:
        return {k: _lean(value[k]) for k in value.keys()}
    kind = getattr(value.type, "value_type", None)
    if (
        isinstance(value, (pa.ListScalar, pa.LargeListScalar))
        and value.is_valid
        and (pa.types.is_floating(kind) or pa.types.is_integer(kind))
    ):
        return value.values.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls: NaN
    return value.as_py()


def _plain(value: Any) -> Any:
    """A record of `_records` with its numpy arrays back as lists (as `to_pylist` gives)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.tolist() if isinstance(value, np.ndarray) else value


def _pixels(values: Any) -> Any:
    """Pixel values as given (a numpy array, or a list that may hold nulls: NaN)."""
    if isinstance(values, np.ndarray):
        return values
    return [float("nan") if v is None else v for v in (values or [])]


def _struct(path: Path, value: Any, what: str, r: int) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise SpectrumError(path, f"row {r}: {what} is not valid JSON") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpectrumError(path, f"row {r}: {what} is not a record")
    return value


def rows(path: Path) -> list[dict[str, Any]]:
    """Per row: task (Loupe name), label, name and index, without reading the spectra."""
    import pyarrow.parquet as pq

    check_file(path)
    try:
        names = pq.ParquetFile(path).schema_arrow.names
    except Exception as exc:
        raise SpectrumError(path, f"unreadable parquet file ({str(exc)[:160]})") from None
    cols = [c for c in NEEDED if c in names]
    if "extra_info" not in cols:
        raise LayoutError(path, f"parquet lacks the SpecVI-Bench column extra_info (has {names})")
    out = []
    for r, rec in enumerate(_records(path, cols)):
        info = _struct(path, rec.get("extra_info"), "extra_info", r)
        reward = _struct(path, rec.get("reward_model"), "reward_model", r)
        source = str(rec.get("data_source") or "").strip().lower()
        out.append(
            {
                "task": task_name(source) or None,  # SpecVI names are aliases in agent.tasks
                "label": reward.get("ground_truth"),
                "name": info.get("name"),
                "index": info.get("index"),
            }
        )
    return out


def read_parquet(path: Path, row: int | None = None) -> list[Spectrum]:
    import pyarrow.parquet as pq

    check_file(path)
    try:
        nrows = pq.ParquetFile(path).metadata.num_rows
    except Exception as exc:
        raise SpectrumError(path, f"unreadable parquet file ({str(exc)[:160]})") from None
    wanted = rows_to_read(path, row, nrows, "parquet file")
    out = []
    for r, rec in zip(wanted, _records(path, ["extra_info"], set(wanted))):
        info = _struct(path, rec["extra_info"], "extra_info", r)
        try:
            kw = info["tools_kwargs"][TOOL_NAME]["create_kwargs"]
        except (KeyError, TypeError):
            raise LayoutError(
                path,
                f"row {r}: no extra_info.tools_kwargs.spectral_visualization_tool."
                "create_kwargs (not a SpecVI-Bench row)",
            ) from None
        kw = _struct(path, kw, "create_kwargs", r)
        if "flux" not in kw or "wavelength" not in kw:
            raise LayoutError(path, f"row {r}: create_kwargs lacks flux or wavelength")
        name = str(info.get("name") or f"{file_stem(path)}-{r}")
        out.append(
            make_spectrum(
                path,
                _pixels(kw["wavelength"]),
                _pixels(kw["flux"]),
                frame="vacuum",
                row=r,
                redshift=plausible_redshift(kw.get("redshift")) or 0.0,
                id=file_stem(Path(name)),
                survey="LAMOST",
                extra={"specvi_name": name, "specvi_index": info.get("index")},
            )
        )
    return out


@dataclass
class RowPrompt:
    """The chat messages and images a SpecVI-Bench row asks its question with."""

    messages: list[dict[str, Any]]
    images: list[Any] = field(default_factory=list)  # PIL images, in placeholder order


def row_prompt(path: Path, row: int) -> RowPrompt | None:
    """The `prompt` and `images` of one row; None when the file has no `prompt` column."""
    import pyarrow.parquet as pq

    path = Path(path)
    check_file(path)
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        if "prompt" not in names:
            return None
        cols = [c for c in ("prompt", "images") if c in names]
    except Exception as exc:
        raise SpectrumError(path, f"unreadable parquet file ({str(exc)[:160]})") from None
    # Read as the spectra are: a few rows at a time, what they decode to counted.
    rec = [_plain(r) for r in _records(path, cols, {int(row)})]
    if not rec:
        raise SpectrumError(path, f"row {row} does not exist")
    messages = rec[0].get("prompt")
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            raise SpectrumError(path, f"row {row}: prompt is not valid JSON") from None
    if not messages:
        return None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise SpectrumError(path, f"row {row}: prompt is not a list of chat messages")
    images = [_image(path, row, v) for v in (rec[0].get("images") or [])]
    return RowPrompt(messages=messages, images=images)


def prompt_for(spectrum: Spectrum) -> RowPrompt | None:
    """The row prompt of a spectrum read from a SpecVI-Bench file, else None."""
    m = spectrum.meta
    if not (isinstance(m.extra, dict) and m.extra.get("specvi_name")):
        return None
    if not m.source or m.row is None:
        return None
    return row_prompt(Path(m.source), m.row)


def _image(path: Path, row: int, value: Any) -> Any:
    import io

    from PIL import Image

    if isinstance(value, dict):  # the datasets Image feature: {"bytes": ..., "path": ...}
        value = value.get("bytes") or value.get("path")
    try:
        if isinstance(value, (bytes, bytearray)):
            img = Image.open(io.BytesIO(value))
        elif isinstance(value, str) and value:
            p = Path(value)
            img = Image.open(p if p.is_absolute() else path.parent / p)
        else:
            raise ValueError("neither bytes nor a path")
        return img.convert("RGB")
    except Exception as exc:
        raise SpectrumError(path, f"row {row}: unreadable image in images ({exc})") from None
