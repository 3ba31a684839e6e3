"""Checkpoints and RL rows the ecosystem's tools open: stock processor classes, the
authors' data_source names. (LLaMA-Factory and verl themselves: bench/interop.sh.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

# The data_source values the authors' verl scorer (`compute_score`) knows as YES/NO tasks.
AUTHORS_SOURCES = {"cv", "carbon", "cc", "ss", "wd", "gm"}


def _has_torchvision() -> bool:
    try:
        import torchvision  # noqa: F401
    except Exception:  # absent, or a build that does not match torch
        return False
    return True


def assert_stock_processor(folder: Path) -> None:
    """The folder names only transformers' own processor classes, with a video processor
    config, and AutoProcessor builds a processor from it (not a bare tokenizer)."""
    import transformers
    from transformers import AutoProcessor

    cfg = json.loads((folder / "processor_config.json").read_text())
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["processor_class"] == "Qwen2_5_VLProcessor"
    assert tok.get("processor_class", "Qwen2_5_VLProcessor") == "Qwen2_5_VLProcessor"
    assert cfg["image_processor"]["image_processor_type"] == "Qwen2VLImageProcessor"
    video = cfg["video_processor"]
    assert video["video_processor_type"] == "Qwen2VLVideoProcessor"
    for key in ("patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std"):
        assert video[key] == cfg["image_processor"][key]
    names = {cfg["processor_class"], tok.get("processor_class"), video["video_processor_type"],
             cfg["image_processor"]["image_processor_type"]} - {None}  # fmt: skip
    assert all(hasattr(transformers, n) for n in names), names
    try:
        proc = AutoProcessor.from_pretrained(folder)
    except ImportError as exc:  # transformers builds no Qwen2.5-VL video processor without it
        assert "torchvision" in str(exc).lower()
        if _has_torchvision():
            raise
        return  # never a bare tokenizer: with torchvision, the stock processor (below)
    assert type(proc).__name__ == "Qwen2_5_VLProcessor"
    assert type(proc.image_processor).__name__.startswith("Qwen2VLImageProcessor")
    assert type(proc.video_processor).__name__ == "Qwen2VLVideoProcessor"


def test_tiny_model_saves_stock_processor_classes(tiny_model_dir):
    assert_stock_processor(Path(tiny_model_dir))


def test_a_trained_checkpoint_saves_stock_processor_classes(tiny_model_dir, tmp_path):
    """What sft.py, grpo.py and dpo.py save (`save_for_policy`), from a processor loaded
    the way they load it, with or without torchvision."""
    from agent.policies.hf import load_processor, processor_class
    from training.chat_template import apply_speco3_template
    from training.common import save_processor, stock_class_name

    processor = load_processor(tiny_model_dir)
    apply_speco3_template(processor)
    save_processor(processor, tmp_path)
    assert_stock_processor(tmp_path)
    # Loupe's torchvision-free class is saved as the stock one it extends
    assert stock_class_name(processor_class().__new__(processor_class())) == "Qwen2_5_VLProcessor"
    again = load_processor(tmp_path)
    assert again.tokenizer.chat_template == processor.tokenizer.chat_template
    # a trainer's intermediate checkpoints call the processor's own save_pretrained
    processor.save_pretrained(tmp_path / "checkpoint-1")
    assert_stock_processor(tmp_path / "checkpoint-1")


def test_rl_rows_use_the_authors_data_source_names(training_sample):
    from agent.tasks import TASKS
    from annotate.export.rl import SPECVI_SOURCE
    from training.data import load_rl_dataset

    assert {SPECVI_SOURCE.get(t, t) for t in TASKS} <= AUTHORS_SOURCES
    _, rl_path = training_sample
    rows = [json.loads(x) for x in rl_path.read_text().splitlines() if x.strip()]
    assert rows and {r["data_source"] for r in rows} <= AUTHORS_SOURCES
    # and Loupe reads its task back from them
    assert {r["task"] for r in load_rl_dataset(rl_path)} == {r["task"] for r in rows}
