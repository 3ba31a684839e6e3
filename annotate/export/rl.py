"""The rl writer: label-only rows in SpecVI-Bench's schema, for GRPO.

`{split}.parquet` and `{split}.jsonl`: SpecVI-Bench's row schema plus Loupe's columns (id,
task, label, split, path, hdu, row, object_id, source, grade, redshift, weight, and mask and
ivar of the tool's flux pixels); overview images under `images/`
(in the parquet too, as `{bytes, path}`). verl reads the files as they are: the system
prompt holds no `# Tools` block, since verl's chat template writes it from the tool config.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.protocol import TOOL_NAME, system_prompt, task_prompt, tools_block
from agent.spectrum import Spectrum
from annotate.export.conversation import Images
from annotate.export.record import ExportRecord
from annotate.export.writing import (
    Built,
    ImageStore,
    built_rows,
    common_row,
    dumps,
    split_order,
    write_file,
)

# SpecVI-Bench's data_source names for Loupe's task names (others are the same).
SPECVI_SOURCE = {"carbon": "carbon", "s_type": "ss", "m_giant": "gm", "cv": "cv", "wd": "wd"}
AGENT_NAME = "tool_agent"


def verl_system_prompt() -> str:
    """The system prompt without the `# Tools` block: verl renders the chat template with
    its tool config's schema, which writes that block itself (a second copy would be there
    if the prompt held one already)."""
    text = system_prompt().replace(tools_block(), "").rstrip()
    if "<tools>" in text:
        raise ValueError("the system prompt holds a tool block that is not agent.protocol's")
    return text


def build_row(index: int, r: ExportRecord, spectrum: Spectrum, imgs: Images) -> Built:
    # Every finite flux pixel, masked or not: the authors' tool drops only non-finite flux,
    # so `speco3` draws ivar = 0 pixels and GRPO must get them to draw what vet draws. The
    # mask and ivar of those pixels travel beside the arrays (`mask`, `ivar` columns).
    keep = np.isfinite(spectrum.flux)
    wave = spectrum.vacuum_wavelength()[keep]
    flux = spectrum.flux[keep]
    ivar = None if spectrum.ivar is None else spectrum.ivar[keep]
    name = Path(str(r.spectrum_ref.get("path") or "")).name
    row = {
        "data_source": SPECVI_SOURCE.get(r.task, r.task),
        "prompt": [
            {"role": "system", "content": verl_system_prompt()},
            {"role": "user", "content": "<image>" + task_prompt(r.task)},
        ],
        "ability": "spectral_vetting",
        "reward_model": {"style": "rule", "ground_truth": r.label},
        "agent_name": AGENT_NAME,
        "extra_info": {
            "index": index,
            "name": name,
            "split": r.split,
            "tools_kwargs": {
                TOOL_NAME: {
                    "create_kwargs": {
                        "flux": [float(x) for x in flux],
                        "wavelength": [float(x) for x in wave],
                        "redshift": float(spectrum.redshift),
                    }
                }
            },
        },
    }
    row["mask"] = [bool(x) for x in spectrum.mask[keep]]
    row["ivar"] = None if ivar is None else [float(x) if np.isfinite(x) else 0.0 for x in ivar]
    return Built(index, row, {"images": [imgs.global_view()]})


def write(
    records: Sequence[ExportRecord],
    built: Iterable[Built],
    out: Path,
    tmp: Path,
    errors: list[dict[str, str]],
) -> list[ExportRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    images = ImageStore(out)
    written = []
    for r, b in built_rows(records, built, errors):
        ref = r.spectrum_ref
        png = b.images["images"][0]
        row = {
            **b.row,
            "images": [{"bytes": png, "path": images.put(png)}],
            **common_row(r),
            "split": r.split or "train",
            "path": str(ref.get("path") or ""),
            "hdu": None if ref.get("hdu") is None else str(ref.get("hdu")),
            "row": ref.get("row"),
        }
        rows[row["split"]].append(row)
        written.append(r)
    for split, rs in sorted(rows.items(), key=split_order):
        table = pa.Table.from_pylist(rs, schema=schema())
        pq.write_table(table, out / f"{split}.parquet", compression="zstd")
        text = "\n".join(
            dumps({**x, "images": [{"path": im["path"]} for im in x["images"]]}) for x in rs
        )
        write_file(out / f"{split}.jsonl", (text + "\n").encode())
    return written


def schema():
    import pyarrow as pa

    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    kwargs = pa.struct(
        [
            ("flux", pa.list_(pa.float64())),
            ("wavelength", pa.list_(pa.float64())),
            ("redshift", pa.float64()),
        ]
    )
    tools = pa.struct([(TOOL_NAME, pa.struct([("create_kwargs", kwargs)]))])
    return pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("data_source", pa.string()),
            ("prompt", pa.list_(msg)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("agent_name", pa.string()),
            (
                "extra_info",
                pa.struct(
                    [
                        ("index", pa.int64()),
                        ("name", pa.string()),
                        ("split", pa.string()),
                        ("tools_kwargs", tools),
                    ]
                ),
            ),
            ("id", pa.string()),
            ("candidate", pa.string()),
            ("object_id", pa.string()),
            ("task", pa.string()),
            ("label", pa.string()),
            ("source", pa.string()),
            ("split", pa.string()),
            ("grade", pa.int64()),
            ("redshift", pa.float64()),
            ("weight", pa.float64()),
            ("path", pa.string()),
            ("hdu", pa.string()),
            ("row", pa.int64()),
            # the mask (True = bad) and ivar of the pixels in tools_kwargs' flux, in order
            ("mask", pa.list_(pa.bool_())),
            ("ivar", pa.list_(pa.float64())),
        ]
    )
