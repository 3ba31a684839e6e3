"""The training scripts' configs are TRL's own, extended with Loupe's fields, and read by
TRL's parser; every field says what it is for."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

pytest.importorskip("trl")

from trl import DPOConfig, GRPOConfig, SFTConfig  # noqa: E402

from training.common import LoupeArguments, parse_config  # noqa: E402
from training.dpo import DPOScriptConfig  # noqa: E402
from training.grpo import GRPOScriptConfig  # noqa: E402
from training.sft import SFTScriptConfig  # noqa: E402

SCRIPT_CONFIGS = [(SFTScriptConfig, SFTConfig), (GRPOScriptConfig, GRPOConfig),
                  (DPOScriptConfig, DPOConfig)]  # fmt: skip
CONFIGS = Path(__file__).resolve().parent.parent / "training" / "configs"


@pytest.mark.parametrize("cls,trl_cls", SCRIPT_CONFIGS, ids=lambda c: c.__name__)
def test_script_configs_extend_trl_and_keep_every_help(cls, trl_cls):
    assert issubclass(cls, trl_cls) and issubclass(cls, LoupeArguments)
    names = {f.name for f in dataclasses.fields(cls)}
    # every field of TRL's config and of Loupe's is there, once
    assert {f.name for f in dataclasses.fields(trl_cls)} <= names
    assert {f.name for f in dataclasses.fields(LoupeArguments)} <= names
    own = names - {f.name for f in dataclasses.fields(trl_cls)}
    undocumented = [f.name for f in dataclasses.fields(cls) if f.name in own or
                    f.name in LoupeArguments.__dataclass_fields__ if not f.metadata.get("help")]  # fmt: skip
    assert not undocumented
    # and none is a re-declared copy of a TRL field with another type
    hints, trl_hints = typing.get_type_hints(cls), typing.get_type_hints(trl_cls)
    changed = [n for n in trl_hints if hints[n] != trl_hints[n] and n != "use_vllm"]
    assert not changed


def test_a_subclass_changes_defaults_and_parses_every_trl_field():
    sft, grpo = SFTScriptConfig(), GRPOScriptConfig()
    assert (sft.learning_rate, grpo.learning_rate) == (2e-5, 1e-6)
    assert (sft.output_dir, grpo.output_dir) == ("checkpoints/sft", "checkpoints/grpo")
    # TRL's own fields are set from the command line, typed by TRL's parser: an int, an
    # optional int, a bool, a Literal-like string, a list
    cfg = parse_config(
        GRPOScriptConfig,
        ["--seed", "7", "--save_total_limit", "3", "--log_completions", "true",
         "--vllm_mode", "server", "--reward_weights", "1.0", "0.5"],
    )  # fmt: skip
    assert (cfg.seed, cfg.save_total_limit, cfg.num_generations) == (7, 3, 8)
    assert cfg.log_completions is True and cfg.vllm_mode == "server"
    assert cfg.reward_weights == [1.0, 0.5]
    # a name containing "int" is a string, not an int
    cfg = parse_config(SFTScriptConfig, ["--model", "/models/int8-qwen", "--min_grade", "3"])
    assert (cfg.model, cfg.min_grade) == ("/models/int8-qwen", 3)
    # bf16: on with CUDA only, unless set
    assert cfg.bf16 is False and parse_config(SFTScriptConfig, ["--bf16", "false"]).bf16 is False


def test_bad_values_and_unknown_fields_exit_with_a_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_config(SFTScriptConfig, ["--learning_rate", "fast"])
    assert exc.value.code == 2 and "learning_rate" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rat: 1e-5\n")
    with pytest.raises(SystemExit):
        parse_config(SFTScriptConfig, ["--config", str(bad)])
    assert "learning_rat" in capsys.readouterr().err


def test_help_lists_loupe_and_trl_fields(capsys):
    with pytest.raises(SystemExit):
        parse_config(DPOScriptConfig, ["--help"])
    out = capsys.readouterr().out
    assert "--beta" in out and "--force_renderer" in out and "--freeze_vision" in out
    assert "--config" in out


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*_qwen2_5_vl_*.yaml")), ids=lambda p: p.name)
def test_launch_configs_load(path):
    cls = {"sft": SFTScriptConfig, "grpo": GRPOScriptConfig, "dpo": DPOScriptConfig}[
        path.name.split("_")[0]
    ]
    cfg = parse_config(cls, ["--config", str(path), "--bf16", "false"])
    assert cfg.freeze_vision and cfg.gradient_checkpointing and cfg.save_only_model
    if cls is GRPOScriptConfig:
        assert cfg.vllm_image_limit >= cfg.max_tool_calling_iterations + 1
        # vLLM's context holds the prompt and the whole rollout
        assert cfg.vllm_max_model_length >= cfg.max_completion_length + 1536


def test_authors_response_length_is_offered():
    cfg = parse_config(
        GRPOScriptConfig,
        ["--config", str(CONFIGS / "grpo_qwen2_5_vl_7b_32k.yaml"), "--bf16", "false"],
    )
    assert cfg.max_completion_length == 32768
