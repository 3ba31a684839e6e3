"""accelerate launch --config_file training/configs/zero3_8gpu.yaml training/dpo.py \\
        --config training/configs/dpo_qwen2_5_vl_7b.yaml

DPO of a Qwen2.5-VL (or any local VLM folder) on Loupe's preference pairs.

One GPU: `python training/dpo.py --config training/configs/dpo_qwen2_5_vl_7b.yaml`.
CPU smoke run on the tiny model (`python -m training.tiny_model /tmp/tiny`):

    python training/dpo.py --model /tmp/tiny --dataset PAIRS_EXPORT --output_dir /tmp/dpo --max_steps 2

Reads the folder `launch.py export pairs --out PAIRS_EXPORT` writes, as it is (its `hf/`
train split): each row is the conversation up to the turn where an expert's trajectory
and the agent's part (`prompt`, with every image before it), the expert's turn there
(`chosen`) and the agent's (`rejected`). TRL's `DPOTrainer` processes the images on the fly
(`DataCollatorForVisionPreference`) and takes the loss on the completions only; the
reference model is the starting checkpoint. Start from the SFT (or GRPO) checkpoint that
produced the rejected runs; the pairs' images must have been drawn with the renderer it
was trained with (checked, unless --force_renderer). The vision tower stays frozen. The
config is TRL's `DPOConfig` with Loupe's fields (`DPOScriptConfig`); beta 0.1, the sigmoid
loss (TRL's defaults).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_utils import SaveStrategy, SchedulerType
from trl import DPOConfig

from training.common import (
    LoupeArguments,
    export_training_renderer,
    load_for,
    parse_config,
    train_on_export,
)


@dataclass
class DPOScriptConfig(LoupeArguments, DPOConfig):
    """TRL's `DPOConfig` with Loupe's fields and DPO defaults for Loupe's pairs."""

    model: str = field(
        default="checkpoints/sft",
        metadata={"help": "The checkpoint to improve (and the reference model): usually SFT's."},
    )
    dataset: str = field(
        default="",
        metadata={"help": "Pairs export folder (`launch.py export pairs`), or its hf/ folder."},
    )
    output_dir: str | None = field(
        default="checkpoints/dpo", metadata={"help": "Where checkpoints and the final model go."}
    )
    learning_rate: float = field(default=1e-6, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: SchedulerType | str = field(
        default="cosine", metadata={"help": "Learning-rate schedule."}
    )
    warmup_steps: float = field(
        default=0.05,
        metadata={"help": "Warm-up steps; a float in [0, 1) is a fraction of all steps."},
    )
    num_train_epochs: float = field(default=2.0, metadata={"help": "Passes over the pairs."})
    per_device_train_batch_size: int = field(
        default=1, metadata={"help": "Pairs per device per micro-batch (each holds 1-8 images)."}
    )
    gradient_accumulation_steps: int = field(
        default=4,
        metadata={"help": "Micro-batches per optimiser step (8 GPUs x 1 x 4 = 32 pairs)."},
    )
    save_strategy: SaveStrategy | str = field(
        default="epoch",
        metadata={"help": "'epoch', 'steps' or 'no' (the final model is saved anyway)."},
    )
    max_length: int | None = field(
        default=16384,
        metadata={
            "help": "Tokens per prompt + completion (images included), cut at the end; a "
            "prompt with 8 zooms is about 8-10k tokens."
        },
    )


def training_renderer(cfg: DPOScriptConfig) -> str:
    """The renderer of the pairs' images, checked against the starting checkpoint's."""
    return export_training_renderer(cfg, "the pairs export")


def build_trainer(cfg: DPOScriptConfig) -> Any:
    from trl import DPOTrainer

    from training.data import load_pairs_dataset

    model, processor = load_for(cfg)
    dataset = load_pairs_dataset(cfg.dataset, min_grade=cfg.min_grade)
    return DPOTrainer(model=model, args=cfg, train_dataset=dataset, processing_class=processor)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(
        DPOScriptConfig,
        argv,
        description="DPO of a Qwen2.5-VL (or any local VLM folder) on Loupe's preference pairs.",
    )
    return train_on_export(
        cfg, build_trainer, stage="dpo", what="a pairs export", renderer=training_renderer
    )


if __name__ == "__main__":
    sys.exit(main())
