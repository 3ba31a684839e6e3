"""The sft writer: trajectories to train on, for TRL and for LLaMA-Factory.

- `hf/`: a `datasets.DatasetDict` saved with `save_to_disk`, one split per folder, columns
  `messages` in chat format with `{"type": "image"}` placeholders and `images`, as TRL's
  SFTTrainer reads them.
- `sharegpt/`: LLaMA-Factory's layout: `train.json`/`test.json` with `messages` holding
  `<image>` tokens, `images` paths relative to that folder, `images/*.png`, and
  `dataset_info.json`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.spectrum import Spectrum
from annotate.export.conversation import Images, conversation
from annotate.export.record import ExportRecord
from annotate.export.writing import (
    Built,
    HFWriter,
    ImageStore,
    built_rows,
    common_features,
    common_row,
    message_features,
    save_hf,
    split_order,
    write_file,
)


def build_row(index: int, r: ExportRecord, spectrum: Spectrum, imgs: Images) -> Built:
    assert r.trajectory is not None
    conv = conversation(r.trajectory, imgs)
    return Built(index, {"messages": conv.messages}, {"images": conv.images})


def sharegpt_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for m in messages:
        text = "".join("<image>" if it["type"] == "image" else it["text"] for it in m["content"])
        out.append({"role": m["role"], "content": text})
    return out


def write(
    records: Sequence[ExportRecord],
    built: Iterable[Built],
    out: Path,
    tmp: Path,
    errors: list[dict[str, str]],
) -> list[ExportRecord]:
    from datasets import Features, Image, List

    features = Features(
        {**common_features(), "messages": message_features(), "images": List(Image())}
    )
    writers: dict[str, HFWriter] = {}
    sharegpt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    images = ImageStore(out / "sharegpt")
    written = []
    for r, b in built_rows(records, built, errors):
        msgs = b.row["messages"]
        pngs = b.images["images"]
        sg = sharegpt_messages(msgs)
        n_tokens = sum(m["content"].count("<image>") for m in sg)
        if n_tokens != len(pngs):
            errors.append(
                {
                    "id": r.row_id,
                    "candidate": r.key,
                    "reason": f"{n_tokens} <image> tokens for {len(pngs)} images "
                    "(a thought contains the text <image>)",
                }
            )
            continue
        split = r.split or "train"
        w = writers.get(split) or writers.setdefault(split, HFWriter(features, tmp, split))
        w.write(
            {
                **common_row(r),
                "messages": msgs,
                "images": [{"bytes": p, "path": None} for p in pngs],
            }
        )
        sharegpt[split].append(
            {**common_row(r), "messages": sg, "images": [images.put(p) for p in pngs]}
        )
        written.append(r)
    save_hf(writers, out / "hf")
    info = {}
    for split, rows in sorted(sharegpt.items(), key=split_order):
        write_file(
            out / "sharegpt" / f"{split}.json",
            (json.dumps(rows, ensure_ascii=False, indent=1, sort_keys=True) + "\n").encode(),
        )
        info[f"loupe_sft_{split}"] = {
            "file_name": f"{split}.json",
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system",
            },
        }
    if info:
        write_file(
            out / "sharegpt" / "dataset_info.json",
            (json.dumps(info, indent=2, sort_keys=True) + "\n").encode(),
        )
    return written
