"""The pairs writer: DPO preference pairs, the agent's trajectory against an expert's.

`hf/` holds TRL's conversational preference columns `prompt`, `chosen`, `rejected` and
`images` (the prompt's images). The prompt is the conversation up to the turn where the
two trajectories part (with every image before it), `chosen` the expert's turn there and
`rejected` the agent's, so each completion is one assistant turn and DPO needs no images
inside completions. `jsonl/` has the same with image paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

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
    dumps,
    message_features,
    save_hf,
    write_file,
)


def build_row(index: int, r: ExportRecord, spectrum: Spectrum, imgs: Images) -> Built:
    assert r.trajectory is not None and r.rejected is not None
    chosen = conversation(r.trajectory, imgs)
    rejected = conversation(r.rejected, imgs)
    # The conversations share system + user; they part at the first differing turn.
    n = 0
    while (
        n < min(len(chosen.messages), len(rejected.messages))
        and chosen.messages[n] == rejected.messages[n]
    ):
        n += 1
    if n < 2 or n >= len(chosen.messages) or n >= len(rejected.messages):
        raise ValueError("chosen and rejected trajectories do not differ")
    if chosen.messages[n]["role"] != "assistant" or rejected.messages[n]["role"] != "assistant":
        raise ValueError("the trajectories part at a tool response, not at an assistant turn")
    prompt = chosen.messages[:n]
    n_prompt_images = sum(1 for m in prompt for it in m["content"] if it["type"] == "image")
    row = {"prompt": prompt, "chosen": [chosen.messages[n]], "rejected": [rejected.messages[n]]}
    return Built(index, row, {"images": chosen.images[:n_prompt_images]})


def write(
    records: Sequence[ExportRecord],
    built: Iterable[Built],
    out: Path,
    tmp: Path,
    errors: list[dict[str, str]],
) -> list[ExportRecord]:
    from datasets import Features, Image, List

    features = Features(
        {
            **common_features(),
            "prompt": message_features(),
            "chosen": message_features(),
            "rejected": message_features(),
            "images": List(Image()),
        }
    )
    writers: dict[str, HFWriter] = {}
    lines: dict[str, list[str]] = defaultdict(list)
    images = ImageStore(out / "jsonl")
    written = []
    for r, b in built_rows(records, built, errors):
        split = r.split or "train"
        w = writers.get(split) or writers.setdefault(split, HFWriter(features, tmp, split))
        pngs = b.images["images"]
        w.write({**common_row(r), **b.row, "images": [{"bytes": p, "path": None} for p in pngs]})
        lines[split].append(
            dumps({**common_row(r), **b.row, "images": [images.put(p) for p in pngs]})
        )
        written.append(r)
    save_hf(writers, out / "hf")
    for split, ls in lines.items():
        write_file(out / "jsonl" / f"{split}.jsonl", ("\n".join(ls) + "\n").encode())
    return written
