"""What the training scripts share: the base config, YAML + command-line parsing, model
set-up, saving.

Each script keeps its own launch command, its config (a subclass of `TrainingScriptConfig`
that adds its own fields and may change defaults) and its trainer construction; this module
holds the pieces whose logic is the same for all of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from agent.errors import LoupeError

C = TypeVar("C")


# -- configuration -----------------------------------------------------------------------


@dataclass
class TrainingScriptConfig:
    """The fields every training script (SFT, GRPO, ...) takes, with their help texts.

    A script's config subclasses this, adds its own fields and redeclares a field to change
    its default (keeping its help), as TRL's configs extend `trainer.base_config`. The
    defaults here are the SFT cold start's; `trainer_args` turns the fields into the TRL
    config arguments they set.
    """

    model: str = field(
        default="Qwen/Qwen2.5-VL-7B-Instruct",
        metadata={"help": "Hub id or local folder of the vision-language model to train."},
    )
    dataset: str = field(
        default="", metadata={"help": "The export (folder or file) to train on; required."}
    )
    min_grade: int | None = field(
        default=None,
        metadata={
            "help": "Train only on decisions an expert graded at least this (1 a guess .. 4 "
            "certain; the exports' `grade` column); ungraded rows are left out too."
        },
    )
    output_dir: str = field(
        default="checkpoints/model",
        metadata={"help": "Where checkpoints and the final model go."},
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
    num_train_epochs: float = field(default=5.0, metadata={"help": "Passes over the data."})
    max_steps: int = field(
        default=-1, metadata={"help": "Stop after this many optimiser steps (-1: use epochs)."}
    )
    per_device_train_batch_size: int = field(
        default=4, metadata={"help": "Training examples per device per micro-batch."}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "Micro-batches accumulated per optimiser step."}
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
        default=500, metadata={"help": "Checkpoint every N optimiser steps with 'steps'."}
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Keep at most this many intermediate checkpoints."}
    )
    seed: int = field(default=42, metadata={"help": "Random seed."})
    report_to: str = field(
        default="none", metadata={"help": "Logger: 'none', 'tensorboard', 'wandb', 'trackio'."}
    )
    force_renderer: bool = field(
        default=False,
        metadata={
            "help": "Train even when the export's renderer and the starting checkpoint's "
            "(loupe_training.json) differ; the result is recorded with the export's."
        },
    )
    trainer_kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Any other fields of the script's TRL config (SFTConfig, GRPOConfig, ...), "
            "as a YAML mapping or JSON on the command line."
        },
    )


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


def trainer_args(cfg: TrainingScriptConfig, *, cuda: bool, bf16: bool) -> dict[str, Any]:
    """The TRL config arguments every script sets the same way, from the base fields."""
    return dict(
        output_dir=cfg.output_dir,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
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
    )


# -- renderer ----------------------------------------------------------------------------


class RendererMismatch(LoupeError, ValueError):
    """The images a script would train on were drawn by another renderer than the one the
    starting checkpoint or another input was trained on."""


def checkpoint_renderer(model: str) -> str | None:
    """The renderer a Loupe checkpoint was trained with (its loupe_training.json), else None."""
    try:
        meta = json.loads((Path(model) / "loupe_training.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("renderer") if isinstance(meta, dict) else None


def resolve_renderer(
    chosen: str | None, recorded: dict[str, str | None], *, force: bool = False
) -> str:
    """The one renderer of a training run: `chosen`, else the one every input records, else
    the default (`annotate.export.DEFAULT_RENDERER`). Inputs (`recorded`: where -> renderer,
    None where unknown) that disagree raise `RendererMismatch` unless `force`.

    >>> resolve_renderer(None, {"export": "fast", "model": None})
    'fast'
    >>> resolve_renderer("speco3", {"export": "fast"}, force=True)
    'speco3'
    """
    from annotate.export.record import DEFAULT_RENDERER

    known = {k: v for k, v in recorded.items() if v}
    renderer = chosen or next(iter(known.values()), None) or DEFAULT_RENDERER
    differ = {k: v for k, v in known.items() if v != renderer}
    if differ and not force:
        where = ", ".join(f"{k} was drawn/trained with {v!r}" for k, v in differ.items())
        raise RendererMismatch(
            f"renderer {renderer!r} does not match the inputs: {where}. A model must see the "
            "images it was trained on; re-export with --renderer, or pass --force_renderer true"
        )
    return renderer


# -- model -------------------------------------------------------------------------------


def use_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def load_model_and_processor(
    model_path: str,
    bf16: bool,
    chat_template: str = "speco3",
    attn: str | None = None,
    freeze: bool = False,
) -> tuple[Any, Any]:
    """The model and its processor with the chosen chat template; `freeze`: vision frozen."""
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
    if freeze:
        freeze_vision(model)
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


# -- training and saving -----------------------------------------------------------------


def save_for_policy(trainer: Any, processor: Any, output_dir: str, meta: dict[str, Any]) -> None:
    """Final model + processor + tokenizer, loadable by the `hf` policy as they are."""
    trainer.save_model(output_dir)
    if trainer.accelerator.is_main_process:
        processor.save_pretrained(output_dir)
        processor.tokenizer.save_pretrained(output_dir)
        (Path(output_dir) / "loupe_training.json").write_text(
            json.dumps(meta, indent=2, default=str)
        )


def train_and_save(trainer: Any, cfg: Any, *, stage: str, renderer: str | None) -> Any:
    """Train, then save the model for the `hf` policy with what it was trained on and how.

    `renderer` is recorded because the policy must draw zooms as the training images were.
    """
    result = trainer.train()
    save_for_policy(
        trainer,
        trainer.processing_class,
        cfg.output_dir,
        {
            "stage": stage,
            "renderer": renderer,
            "config": dataclasses.asdict(cfg),
            "metrics": result.metrics,
        },
    )
    return result
