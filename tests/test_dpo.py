"""dpo.py's configuration and its renderer check (training itself: tests/test_loop_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from training.common import RendererMismatch, parse_config  # noqa: E402
from training.dpo import DPOScriptConfig, main, training_renderer  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "training" / "configs"


def test_7b_config_is_sized():
    # bf16 false: the file asks for bf16, which TrainingArguments refuses without a GPU
    argv = ["--config", str(CONFIGS / "dpo_qwen2_5_vl_7b.yaml"), "--bf16", "false"]
    cfg = parse_config(DPOScriptConfig, argv)
    assert cfg.per_device_train_batch_size == 1 and cfg.gradient_accumulation_steps == 4
    assert cfg.gradient_checkpointing and cfg.freeze_vision and cfg.max_length >= 16384
    assert (cfg.beta, cfg.loss_type) == (0.1, ["sigmoid"])


def test_renderer_of_pairs_against_the_checkpoint(tmp_path):
    pairs, model = tmp_path / "pairs", tmp_path / "model"
    (pairs / "hf" / "train").mkdir(parents=True)
    model.mkdir()
    (pairs / "manifest.json").write_text(json.dumps({"kind": "pairs", "renderer": "fast"}))
    (model / "loupe_training.json").write_text(json.dumps({"renderer": "speco3"}))
    # the manifest is found from any sub-path of the export
    cfg = DPOScriptConfig(model=str(model), dataset=str(pairs / "hf" / "train"))
    with pytest.raises(RendererMismatch, match="'fast'.*speco3"):
        training_renderer(cfg)
    cfg.force_renderer = True
    assert training_renderer(cfg) == "fast"
    argv = ["--model", str(model), "--dataset", str(pairs), "--output_dir", str(tmp_path / "o")]
    assert main(argv) == 2  # refused before any model is loaded
    assert main(["--model", str(model)]) == 2  # no dataset
