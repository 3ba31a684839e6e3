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
import time
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_utils import SaveStrategy, SchedulerType
from trl import SFTConfig

from agent.errors import LoupeError
from training.common import (
    LoupeArguments,
    checkpoint_renderer,
    load_model_and_processor,
    parse_config,
    resolve_renderer,
    train_and_save,
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
    from training.data import export_renderer

    return resolve_renderer(
        export_renderer(cfg.dataset),
        {"the export": export_renderer(cfg.dataset), cfg.model: checkpoint_renderer(cfg.model)},
        force=cfg.force_renderer,
    )


def build_trainer(cfg: SFTScriptConfig) -> Any:
    from trl import SFTTrainer

    from training.data import load_sft_dataset

    model, processor = load_model_and_processor(
        cfg.model,
        bf16=cfg.bf16,
        chat_template=cfg.chat_template,
        attn=cfg.attn_implementation,
        freeze=cfg.freeze_vision,
    )
    dataset = load_sft_dataset(cfg.dataset, min_grade=cfg.min_grade)
    return SFTTrainer(model=model, args=cfg, train_dataset=dataset, processing_class=processor)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(
        SFTScriptConfig,
        argv,
        description="Cold-start SFT of a Qwen2.5-VL (or any local VLM folder) on Loupe's SFT export.",
    )
    if not cfg.dataset:
        print("sft.py: --dataset is required (an SFT export folder)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    from training.data import check_export

    try:
        check_export(cfg.dataset)  # an empty export stops here, before any model is loaded
        # The images were drawn at export time; the policy must see the same renderer.
        renderer = training_renderer(cfg)
        trainer = build_trainer(cfg)
    except LoupeError as exc:
        print(f"sft.py: {exc}", file=sys.stderr)
        return 2
    result = train_and_save(trainer, cfg, stage="sft", renderer=renderer)
    print(
        f"sft: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"final loss {result.training_loss:.4f}; model saved to {cfg.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
