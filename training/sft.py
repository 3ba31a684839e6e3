"""accelerate launch --config_file training/configs/zero3_8gpu.yaml training/sft.py \\
        --config training/configs/sft_qwen2_5_vl_7b.yaml

Cold-start SFT of a Qwen2.5-VL (or any local VLM folder) on Loupe's SFT export.

One GPU: `python training/sft.py --config training/configs/sft_qwen2_5_vl_7b.yaml`.
CPU smoke run on the tiny model (`python -m training.tiny_model /tmp/tiny`):

    python training/sft.py --model /tmp/tiny --dataset EXPORT_DIR --output_dir /tmp/sft --max_steps 3

Multi-turn conversations with images (global view, zooms) in the Spec-o3 format; the loss
covers only assistant tokens (prompts, tool responses and images are masked); the vision
tower and projector stay frozen. Defaults follow the paper: full fine-tune, lr 2e-5 cosine,
warmup 0.05, 5 epochs, batch 4 per device, cutoff 32,768 tokens, bf16 on GPUs. The config
is TRL's `SFTConfig` with Loupe's fields (`SFTScriptConfig`): every field can be set in the
YAML file and overridden on the command line; the saved output folder loads back into the
`hf` policy as it is.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_utils import SaveStrategy, SchedulerType
from trl import SFTConfig

from training.common import (
    LoupeArguments,
    export_training_renderer,
    load_for,
    parse_config,
    train_on_export,
)


@dataclass
class SFTScriptConfig(LoupeArguments, SFTConfig):
    """TRL's `SFTConfig` with Loupe's fields and the paper's SFT defaults."""

    model: str = field(
        default="Qwen/Qwen2.5-VL-7B-Instruct",
        metadata={"help": "Hub id or local folder of the vision-language model to train."},
    )
    dataset: str = field(
        default="",
        metadata={"help": "SFT export folder (`launch.py export sft`) or JSONL of messages rows."},
    )
    output_dir: str | None = field(
        default="checkpoints/sft", metadata={"help": "Where checkpoints and the final model go."}
    )
    learning_rate: float = field(default=2e-5, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: SchedulerType | str = field(
        default="cosine", metadata={"help": "Learning-rate schedule."}
    )
    warmup_steps: float = field(
        default=0.05,
        metadata={"help": "Warm-up steps; a float in [0, 1) is a fraction of all steps."},
    )
    num_train_epochs: float = field(default=5.0, metadata={"help": "Passes over the data."})
    per_device_train_batch_size: int = field(
        default=4, metadata={"help": "Conversations per device per micro-batch."}
    )
    save_strategy: SaveStrategy | str = field(
        default="epoch",
        metadata={"help": "'epoch', 'steps' or 'no' (the final model is saved anyway)."},
    )
    max_length: int | None = field(
        default=32768, metadata={"help": "Cutoff in tokens (images included) per conversation."}
    )
    assistant_only_loss: bool = field(
        default=True,
        metadata={
            "help": "Loss on the assistant turns only (prompts, tool replies, images masked)."
        },
    )


# -- main --------------------------------------------------------------------------------


def training_renderer(cfg: SFTScriptConfig) -> str:
    """The renderer of the export's images, checked against the starting checkpoint's."""
    return export_training_renderer(cfg, "the export")


def build_trainer(cfg: SFTScriptConfig) -> Any:
    from trl import SFTTrainer

    from training.data import load_sft_dataset

    model, processor = load_for(cfg)
    dataset = load_sft_dataset(cfg.dataset, min_grade=cfg.min_grade)
    return SFTTrainer(model=model, args=cfg, train_dataset=dataset, processing_class=processor)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(
        SFTScriptConfig,
        argv,
        description="Cold-start SFT of a Qwen2.5-VL (or any local VLM folder) on Loupe's SFT export.",
    )
    return train_on_export(
        cfg, build_trainer, stage="sft", what="an SFT export", renderer=training_renderer
    )


if __name__ == "__main__":
    sys.exit(main())
