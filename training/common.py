"""What the training scripts share: Loupe's config fields, YAML + command-line parsing,
model set-up, saving.

Each script's config is TRL's own (`SFTConfig`, `GRPOConfig`, `DPOConfig`) extended with
`LoupeArguments`, the fields TRL has no name for, and the script's own fields and defaults,
as TRL's configs extend `TrainingArguments`. `parse_config` reads them with `TrlParser`, as
TRL's scripts do: `--config FILE.yaml` (any field, and `env:`), then `--field value`.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agent.errors import LoupeError

C = TypeVar("C")


# -- configuration -----------------------------------------------------------------------


@dataclass
class LoupeArguments:
    """The fields every training script adds to its TRL config, with their help texts.

    A script's config is `class XScriptConfig(LoupeArguments, trl.XConfig)`. Mixed in
    first, its defaults below win over TRL's, and its `__post_init__` settles what Loupe leaves to the machine (bf16 on CUDA only)
    before TRL's runs.
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
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "Attention kernel: 'flash_attention_2', 'sdpa' or 'eager' (default: auto)."
        },
    )
    force_renderer: bool = field(
        default=False,
        metadata={
            "help": "Train even when the export's renderer and the starting checkpoint's "
            "(loupe_training.json) differ; the result is recorded with the export's."
        },
    )

    # TrainingArguments fields whose default every Loupe script changes the same way (TRL's
    # BaseConfig does the same): log each step, save a model the `hf` policy loads as it
    # is, keep two checkpoints, log nowhere unless told.
    logging_steps: float = field(default=1, metadata={"help": "Log every N optimiser steps."})
    save_only_model: bool = field(
        default=True,
        metadata={"help": "Checkpoints hold the model only, not the optimiser state."},
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Keep at most this many intermediate checkpoints."}
    )
    report_to: None | str | list[str] = field(
        default="none", metadata={"help": "Logger: 'none', 'tensorboard', 'wandb', 'trackio'."}
    )

    def __post_init__(self) -> None:
        # TRL turns bf16=None into True even on a CPU; Loupe's default is "on with CUDA".
        if getattr(self, "bf16", False) is None and not getattr(self, "fp16", False):
            self.bf16 = use_cuda()
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()


def parse_config(cls: type[C], argv: list[str] | None = None, description: str = "") -> C:
    """`cls` from `--config FILE.yaml` (optional), then `--field value` overrides, read by
    TRL's own parser. A bad file or value exits with the parser's message (status 2)."""
    from trl import TrlParser

    parser = TrlParser(
        cls, description=description, epilog="--config FILE.yaml sets any of these fields."
    )
    try:
        (cfg,) = parser.parse_args_and_config(list(sys.argv[1:] if argv is None else argv))
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    return cfg


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


def stock_class_name(processor: Any) -> str:
    """The transformers class a processor is, or extends (Loupe's torchvision-free
    `QwenVLImageProcessor` is a `Qwen2_5_VLProcessor`)."""
    import transformers

    for cls in type(processor).__mro__:
        if getattr(transformers, cls.__name__, None) is cls:
            return cls.__name__
    raise ValueError(f"{type(processor).__name__} extends no transformers processor class")


def save_processor(processor: Any, output_dir: str | Path) -> None:
    """Save `processor` (and its tokenizer) as the stock classes a Qwen2.5-VL checkpoint
    names (`Qwen2_5_VLProcessor`, its stock image processor, a video processor config),
    whether or not torchvision is installed, so that `AutoProcessor`, LLaMA-Factory and
    verl open the folder as they open the base checkpoint."""
    from agent.policies.hf import name_stock_classes

    processor.save_pretrained(output_dir)
    processor.tokenizer.save_pretrained(output_dir)
    name_stock_classes(output_dir, stock_class_name(processor))


def save_for_policy(trainer: Any, processor: Any, output_dir: str, meta: dict[str, Any]) -> None:
    """Final model + processor + tokenizer, loadable by the `hf` policy as they are (and by
    AutoProcessor, LLaMA-Factory and verl: `save_processor`)."""
    trainer.save_model(output_dir)
    if trainer.accelerator.is_main_process:
        save_processor(processor, output_dir)
        (Path(output_dir) / "loupe_training.json").write_text(
            json.dumps(meta, indent=2, default=str)
        )


def load_for(cfg: Any) -> tuple[Any, Any]:
    """The model and processor a script's config names (template, attention, frozen vision)."""
    return load_model_and_processor(
        cfg.model,
        bf16=cfg.bf16,
        chat_template=cfg.chat_template,
        attn=cfg.attn_implementation,
        freeze=cfg.freeze_vision,
    )


def export_training_renderer(cfg: Any, what: str) -> str:
    """The renderer of an export's images (`what`: the export, named in a mismatch), checked
    against the starting checkpoint's: the policy must see zooms drawn as it was trained on."""
    from training.data import export_renderer

    drawn = export_renderer(cfg.dataset)
    return resolve_renderer(
        drawn, {what: drawn, cfg.model: checkpoint_renderer(cfg.model)}, force=cfg.force_renderer
    )


def train_on_export(cfg: Any, build_trainer: Any, *, stage: str, what: str, renderer: Any) -> int:
    """A script's main on an export folder: refuse a missing or empty export before any model
    is loaded, check the renderer (`renderer(cfg)`), build, train, save; 2 with one line on
    stderr where the script cannot run."""
    script = f"{stage}.py"
    if not cfg.dataset:
        print(f"{script}: --dataset is required ({what} folder)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    from training.data import check_export

    try:
        check_export(cfg.dataset)  # an empty export stops here, before any model is loaded
        drawn = renderer(cfg)
        trainer = build_trainer(cfg)
    except LoupeError as exc:
        print(f"{script}: {exc}", file=sys.stderr)
        return 2
    result = train_and_save(trainer, cfg, stage=stage, renderer=drawn)
    print(
        f"{stage}: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"final loss {result.training_loss:.4f}; model saved to {cfg.output_dir}"
    )
    return 0


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
            "config": cfg.to_dict(),
            "metrics": result.metrics,
        },
    )
    return result
