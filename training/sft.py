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

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

C = TypeVar("C")


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


# -- configuration -----------------------------------------------------------------------


def _parse_value(text: str, hint: Any) -> Any:
    hint_s = str(hint)
    if text.lower() in ("none", "null") and "None" in hint_s:
        return None
    if "bool" in hint_s:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true/false, got {text!r}")
    if "dict" in hint_s or "list" in hint_s:
        return json.loads(text)
    if "int" in hint_s and "float" not in hint_s:
        return int(text)
    if "float" in hint_s:
        return float(text)
    return text


def parse_config(cls: type[C], argv: list[str] | None = None, description: str = "") -> C:
    """`cls` from `--config FILE.yaml` (optional), then `--field value` overrides."""
    hints = get_type_hints(cls)
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--config", help="YAML file with any of the fields below")
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        parser.add_argument(
            f"--{f.name}",
            type=str,
            default=None,
            metavar=type(default).__name__.upper() if default is not None else "VALUE",
            help=f"{f.metadata.get('help', '')} (default: {default!r})",
        )
    args = parser.parse_args(argv)
    values: dict[str, Any] = {}
    if args.config:
        import yaml

        loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(loaded, dict):
            parser.error(f"{args.config}: expected a mapping of field: value")
        unknown = sorted(set(loaded) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            parser.error(f"{args.config}: unknown field(s) {', '.join(unknown)}")
        values.update(loaded)
    for f in dataclasses.fields(cls):
        raw = getattr(args, f.name)
        if raw is not None:
            try:
                values[f.name] = _parse_value(raw, hints[f.name])
            except ValueError as exc:
                parser.error(f"--{f.name}: {exc}")
    return cls(**values)


# -- model -------------------------------------------------------------------------------


def use_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def load_model_and_processor(
    model_path: str, bf16: bool, chat_template: str = "speco3", attn: str | None = None
) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForImageTextToText

    from agent.policies.hf import load_processor
    from training.chat_template import apply_speco3_template

    kwargs: dict[str, Any] = {"dtype": torch.bfloat16 if bf16 else torch.float32}
    if attn:
        kwargs["attn_implementation"] = attn
    model = AutoModelForImageTextToText.from_pretrained(model_path, **kwargs)
    processor = load_processor(model_path)
    if chat_template == "speco3":
        apply_speco3_template(processor)
    elif chat_template != "model":
        raise ValueError(f"chat_template must be 'speco3' or 'model', got {chat_template!r}")
    return model, processor


# Name fragments of vision towers and projectors across VLM families (Qwen2.5-VL keeps both
# under `visual`, its projector being `visual.merger`).
_VISION_PARTS = ("visual", "vision_tower", "vision_model", "multi_modal_projector", "mm_projector")


def freeze_vision(model: Any) -> int:
    """Freeze the vision tower and projector; return how many parameters were frozen."""
    frozen = 0
    for name, param in model.named_parameters():
        if any(part in name.split(".") for part in _VISION_PARTS):
            param.requires_grad_(False)
            frozen += param.numel()
    if frozen == 0:
        raise ValueError(
            "found no vision tower or projector parameters to freeze "
            f"(looked for {', '.join(_VISION_PARTS)}); set freeze_vision: false to train all"
        )
    return frozen


def export_renderer(dataset: str) -> str | None:
    """The renderer an SFT export's images were drawn with (its manifest.json), if known."""
    for folder in (Path(dataset), Path(dataset).parent):
        try:
            return json.loads((folder / "manifest.json").read_text()).get("renderer")
        except (OSError, ValueError, AttributeError):
            continue
    return None


def save_for_policy(trainer: Any, processor: Any, output_dir: str, meta: dict[str, Any]) -> None:
    """Final model + processor + tokenizer, loadable by the `hf` policy as they are."""
    trainer.save_model(output_dir)
    if trainer.accelerator.is_main_process:
        processor.save_pretrained(output_dir)
        processor.tokenizer.save_pretrained(output_dir)
        (Path(output_dir) / "loupe_training.json").write_text(
            json.dumps(meta, indent=2, default=str)
        )


# -- main --------------------------------------------------------------------------------


def build_trainer(cfg: SFTScriptConfig) -> Any:
    from trl import SFTConfig, SFTTrainer

    from training.data import load_sft_dataset

    cuda = use_cuda()
    bf16 = cuda if cfg.bf16 is None else cfg.bf16
    model, processor = load_model_and_processor(
        cfg.model, bf16=bf16, chat_template=cfg.chat_template, attn=cfg.attn_implementation
    )
    if cfg.freeze_vision:
        freeze_vision(model)
    dataset = load_sft_dataset(cfg.dataset)
    args = SFTConfig(
        output_dir=cfg.output_dir,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_length=cfg.max_length,
        assistant_only_loss=True,
        bf16=bf16,
        use_cpu=not cuda,
        gradient_checkpointing=cfg.gradient_checkpointing,
        deepspeed=cfg.deepspeed,
        logging_steps=cfg.logging_steps,
        save_strategy=cfg.save_strategy,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        save_only_model=True,
        seed=cfg.seed,
        report_to=cfg.report_to,
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
    result = trainer.train()
    save_for_policy(
        trainer,
        trainer.processing_class,
        cfg.output_dir,
        {
            "stage": "sft",
            # The images were drawn at export time; the policy must see the same renderer.
            "renderer": export_renderer(cfg.dataset),
            "config": dataclasses.asdict(cfg),
            "metrics": result.metrics,
        },
    )
    print(
        f"sft: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"final loss {result.training_loss:.4f}; model saved to {cfg.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
