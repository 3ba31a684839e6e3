"""The training scripts' configs extend one base, and every field says what it is for."""

from __future__ import annotations

import dataclasses

import pytest

from training.common import TrainingScriptConfig, parse_config
from training.grpo import GRPOScriptConfig
from training.sft import SFTScriptConfig

SCRIPT_CONFIGS = [SFTScriptConfig, GRPOScriptConfig]


@pytest.mark.parametrize("cls", SCRIPT_CONFIGS, ids=lambda c: c.__name__)
def test_script_configs_extend_the_base_and_keep_every_help(cls):
    assert issubclass(cls, TrainingScriptConfig)
    names = [f.name for f in dataclasses.fields(cls)]
    base = [f.name for f in dataclasses.fields(TrainingScriptConfig)]
    assert names[: len(base)] == base  # the base's fields, then the script's own
    undocumented = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("help")]
    assert not undocumented


def test_a_subclass_changes_defaults_without_losing_the_base_fields():
    sft, grpo = SFTScriptConfig(), GRPOScriptConfig()
    assert (sft.learning_rate, grpo.learning_rate) == (2e-5, 1e-6)
    assert (sft.output_dir, grpo.output_dir) == ("checkpoints/sft", "checkpoints/grpo")
    # a base field a script does not redeclare is set from the command line all the same
    cfg = parse_config(GRPOScriptConfig, ["--save_total_limit", "none", "--seed", "7"])
    assert (cfg.save_total_limit, cfg.seed, cfg.num_generations) == (None, 7, 8)


def test_a_new_script_extends_the_base(capsys):
    @dataclasses.dataclass
    class PairsConfig(TrainingScriptConfig):
        beta: float = dataclasses.field(default=0.1, metadata={"help": "Preference strength."})

    with pytest.raises(SystemExit):
        parse_config(PairsConfig, ["--help"])
    out = capsys.readouterr().out
    assert "--beta" in out and "Preference strength." in out
    assert "--gradient_checkpointing" in out and "Recompute activations" in out
