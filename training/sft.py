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

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from agent.errors import LoupeError
from training.common import (
    TrainingScriptConfig,
    checkpoint_renderer,
    load_model_and_processor,
    parse_config,
    resolve_renderer,
    train_and_save,
    trainer_args,
    use_cuda,
)


@dataclass
class SFTScriptConfig(TrainingScriptConfig):
    """`TrainingScriptConfig` with the SFT defaults (the base's) and the SFT-only fields."""

    dataset: str = field(
        default="",
        metadata={"help": "SFT export folder (`launch.py export sft`) or JSONL of messages rows."},
    )
    output_dir: str = field(
        default="checkpoints/sft", metadata={"help": "Where checkpoints and the final model go."}
    )
    warmup_ratio: float = field(default=0.05, metadata={"help": "Fraction of steps for warm-up."})
    max_length: int = field(
        default=32768, metadata={"help": "Cutoff in tokens (images included) per conversation."}
    )


# -- main --------------------------------------------------------------------------------


def training_renderer(cfg: TrainingScriptConfig) -> str:
    """The renderer of the export's images, checked against the starting checkpoint's."""
    from training.data import export_renderer

    return resolve_renderer(
        export_renderer(cfg.dataset),
        {"the export": export_renderer(cfg.dataset), cfg.model: checkpoint_renderer(cfg.model)},
        force=cfg.force_renderer,
    )


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
    dataset = load_sft_dataset(cfg.dataset, min_grade=cfg.min_grade)
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
    # The images were drawn at export time; the policy must see the same renderer.
    try:
        renderer = training_renderer(cfg)
    except LoupeError as exc:
        print(f"sft.py: {exc}", file=sys.stderr)
        return 2
    trainer = build_trainer(cfg)
    result = train_and_save(trainer, cfg, stage="sft", renderer=renderer)
    print(
        f"sft: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"final loss {result.training_loss:.4f}; model saved to {cfg.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
