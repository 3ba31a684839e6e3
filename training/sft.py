"""accelerate launch --config_file training/configs/zero3_8gpu.yaml training/sft.py \\
        --config training/configs/sft_qwen2_5_vl_7b.yaml

Cold-start SFT of a Qwen2.5-VL (or any local VLM folder) on Loupe's SFT export.

One GPU: `python training/sft.py --config training/configs/sft_qwen2_5_vl_7b.yaml`.
CPU smoke run on the tiny model (`python -m training.tiny_model /tmp/tiny`):

    python training/sft.py --model /tmp/tiny --dataset EXPORT_DIR --output_dir /tmp/sft --max_steps 3

Multi-turn conversations with images (global view, zooms) in the Spec-o3 format; the loss
covers only assistant tokens (prompts, tool responses and images are masked); the vision
tower and projector stay frozen. Defaults follow the paper: full fine-tune, lr 2e-5 cosine,
warmup 0.05, 5 epochs, batch 4 per device, cutoff 32,768 tokens, bf16 on GPUs. Every field
of `SFTScriptConfig` can be set in the YAML file and overridden on the command line; the
saved output folder loads back into the `hf` policy as it is.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training.common import (  # noqa: E402
    load_model_and_processor,
    parse_config,
    train_and_save,
    trainer_args,
    use_cuda,
)


@dataclass
class SFTScriptConfig:
    model: str = field(
        default="Qwen/Qwen2.5-VL-7B-Instruct",
        metadata={"help": "Hub id or local folder of the vision-language model to fine-tune."},
    )
    dataset: str = field(
        default="",
        metadata={"help": "SFT export folder (`launch.py export sft`) or JSONL of messages rows."},
    )
    output_dir: str = field(
        default="checkpoints/sft", metadata={"help": "Where checkpoints and the final model go."}
    )
    chat_template: str = field(
        default="speco3",
        metadata={
            "help": "'speco3' installs Loupe's Spec-o3 template (tool-capable, generation "
            "markers); 'model' keeps the checkpoint's own."
        },
    )
    freeze_vision: bool = field(
        default=True,
        metadata={"help": "Freeze the vision tower and the projector (the paper does)."},
    )
    learning_rate: float = field(default=2e-5, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    warmup_ratio: float = field(default=0.05, metadata={"help": "Fraction of steps for warm-up."})
    num_train_epochs: float = field(default=5.0, metadata={"help": "Passes over the data."})
    max_steps: int = field(
        default=-1, metadata={"help": "Stop after this many optimiser steps (-1: use epochs)."}
    )
    per_device_train_batch_size: int = field(
        default=4, metadata={"help": "Conversations per device per step."}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "Micro-batches accumulated per optimiser step."}
    )
    max_length: int = field(
        default=32768, metadata={"help": "Cutoff in tokens (images included) per conversation."}
    )
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision; default: on with CUDA, off on CPU."}
    )
    gradient_checkpointing: bool = field(
        default=True, metadata={"help": "Recompute activations to save memory."}
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "Attention kernel: 'flash_attention_2', 'sdpa' or 'eager' (default: auto)."
        },
    )
    deepspeed: str | None = field(
        default=None,
        metadata={"help": "DeepSpeed JSON config, when not given by the accelerate config."},
    )
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_strategy: str = field(
        default="epoch",
        metadata={"help": "'epoch', 'steps' or 'no' (the final model is saved anyway)."},
    )
    save_steps: int = field(
        default=500, metadata={"help": "Checkpoint every N steps with 'steps'."}
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Keep at most this many intermediate checkpoints."}
    )
    seed: int = field(default=42, metadata={"help": "Random seed."})
    report_to: str = field(
        default="none", metadata={"help": "Logger: 'none', 'tensorboard', 'wandb', 'trackio'."}
    )
    trainer_kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Any other TRL SFTConfig fields (YAML mapping or JSON on the CLI)."},
    )


# -- data --------------------------------------------------------------------------------


def export_renderer(dataset: str) -> str | None:
    """The renderer an SFT export's images were drawn with (its manifest.json), if known."""
    for folder in (Path(dataset), Path(dataset).parent):
        try:
            return json.loads((folder / "manifest.json").read_text()).get("renderer")
        except (OSError, ValueError, AttributeError):
            continue
    return None


# -- main --------------------------------------------------------------------------------


def build_trainer(cfg: SFTScriptConfig) -> Any:
    from trl import SFTConfig, SFTTrainer

    from training.data import load_sft_dataset

    cuda = use_cuda()
    bf16 = cuda if cfg.bf16 is None else cfg.bf16
    model, processor = load_model_and_processor(
        cfg.model,
        bf16=bf16,
        chat_template=cfg.chat_template,
        attn=cfg.attn_implementation,
        freeze=cfg.freeze_vision,
    )
    dataset = load_sft_dataset(cfg.dataset)
    args = SFTConfig(
        **trainer_args(cfg, cuda=cuda, bf16=bf16),
        warmup_steps=cfg.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        max_length=cfg.max_length,
        assistant_only_loss=True,
        **cfg.trainer_kwargs,
    )
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor)


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
    trainer = build_trainer(cfg)
    # The images were drawn at export time; the policy must see the same renderer.
    result = train_and_save(trainer, cfg, stage="sft", renderer=export_renderer(cfg.dataset))
    print(
        f"sft: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"final loss {result.training_loss:.4f}; model saved to {cfg.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
