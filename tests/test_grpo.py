"""Multi-turn GRPO on the tiny Qwen2.5-VL with the zoom tool in the loop.

A random tiny model never writes a valid tool call, so the rollouts' text comes from a
scripted sampler standing in for `model.generate`: one rollout per group thinks, zooms and
answers; the other zooms without thinking (a format error). Everything else is real: the
environment renders the global view and the zooms with `agent.tool`, TRL parses the tool
calls with the Spec-o3 template, runs the tool, feeds the images back, scores the rollouts
with `training.rewards` and updates the weights.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from agent.protocol import assistant_turn, system_message, tool_response_turn, user_turn  # noqa: E402
from agent.tool import call_tool, global_view  # noqa: E402
from training.chat_template import apply_speco3_template  # noqa: E402
from training.data import load_rl_dataset, simulated_spectrum, spectrum_from_ref  # noqa: E402
from training.grpo import GRPOScriptConfig, SpectrumEnvironment, tool_reply  # noqa: E402

CALL = json.dumps(
    {
        "name": "spectral_visualization_tool",
        "arguments": {"wavelength_range": [4780, 4940], "label": "H-beta"},
    }
)
GOOD_ZOOM = f"<think>Check H-beta.</think>\n<tool_call>\n{CALL}\n</tool_call>"
BAD_ZOOM = f"<tool_call>\n{CALL}\n</tool_call>"  # no <think>: a format error
ANSWER_YES = "<think>Broad and deep.</think><answer>\\boxed{YES} broad Balmer lines.</answer>"
ANSWER_NO = "<think>Narrow and shallow.</think><answer>\\boxed{NO} narrow Balmer lines.</answer>"


def test_tool_turn_tokenises_like_the_agent_loop(tiny_model_dir):
    """A rollout's tool message renders to the very text of the loop's tool-response turn."""
    from agent.policies.hf import load_processor

    processor = apply_speco3_template(load_processor(tiny_model_dir))
    spectrum = simulated_spectrum("wd", True, seed=3)
    view = global_view(spectrum, renderer="fast").image
    for args in (
        {"wavelength_range": [4780, 4940], "label": "H-beta"},
        {"wavelength_range": [1, 2]},
    ):
        result = call_tool(spectrum, "spectral_visualization_tool", args, renderer="fast")
        head = [system_message(), user_turn("wd", view), assistant_turn(GOOD_ZOOM)]
        loop = head + [tool_response_turn(result.text, result.image)]
        rollout = head + [
            {"role": "tool", "name": "spectral_visualization_tool", "content": tool_reply(result)}
        ]
        as_loop = processor.apply_chat_template(loop, tokenize=False, add_generation_prompt=True)
        as_rollout = processor.apply_chat_template(
            rollout, tokenize=False, add_generation_prompt=True
        )
        assert as_rollout == as_loop
    assert "<tool_response>\n<|vision_start|>" in as_loop or result.image is None


def test_template_writes_the_tool_block_once(tiny_model_dir):
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
        supports_tool_calling,
    )

    from agent.policies.hf import load_processor

    processor = apply_speco3_template(load_processor(tiny_model_dir))
    assert supports_tool_calling(processor)
    assert is_chat_template_prefix_preserving(processor)
    assert is_chat_template_stop_token_trained(processor)
    env = SpectrumEnvironment(renderer="fast")
    msgs = [system_message(), {"role": "user", "content": [{"type": "text", "text": "q"}]}]
    text = processor.apply_chat_template(
        msgs, tools=[env.spectral_visualization_tool], tokenize=False
    )
    assert text.count("# Tools") == 1  # agent.protocol already wrote it; not again
    bare = [{"role": "user", "content": [{"type": "text", "text": "q"}]}]
    text = processor.apply_chat_template(
        bare, tools=[env.spectral_visualization_tool], tokenize=False
    )
    assert text.count("# Tools") == 1 and "spectral_visualization_tool" in text


def test_the_environment_tool_is_described_by_the_protocol_alone():
    """TRL builds the tool's schema from the method; its name, description and argument
    texts are the protocol's, not a second wording."""
    from transformers.utils import get_json_schema

    from agent.protocol import TOOL_NAME, TOOL_SCHEMA

    fn = get_json_schema(SpectrumEnvironment().spectral_visualization_tool)["function"]
    published = TOOL_SCHEMA["function"]
    assert fn["name"] == TOOL_NAME and fn["description"] == published["description"]
    assert fn["parameters"]["required"] == published["parameters"]["required"]
    described = {k: p["description"] for k, p in fn["parameters"]["properties"].items()}
    assert described == {
        k: p["description"] for k, p in published["parameters"]["properties"].items()
    }


def test_environment_resets_from_specvi_rows_and_zooms(training_sample):
    _, rl_path = training_sample
    rows = load_rl_dataset(rl_path)
    row = rows[0]
    env = SpectrumEnvironment(renderer="fast")
    first = env.reset(**row)
    assert first[0]["type"] == "image" and first[0]["image"].size[0] > 100
    assert "white dwarf" in first[1]["text"].lower()
    assert env.spectrum.wavelength.size == spectrum_from_ref(row["spectrum"]).wavelength.size
    reply = env.spectral_visualization_tool([4780, 4940], "H-beta")
    assert reply[0]["type"] == "image"
    assert reply[-1]["text"].strip().startswith("Generated spectral visualization")
    refused = env.spectral_visualization_tool([100, 200])
    assert [c["type"] for c in refused] == ["text"] and "outside" in refused[0]["text"]
    assert [c["error"] is None for c in env.calls] == [True, False]


def _scripted_generate(model, tokenizer, log):
    """Stand-in for `model.generate`: each row's next turn depends on what it saw so far."""
    import torch

    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.pad_token_id
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")

    def generate(input_ids=None, attention_mask=None, generation_config=None, **kwargs):
        outs = []
        for i, row in enumerate(input_ids):
            seen = tokenizer.decode(row[attention_mask[i].bool()])
            turn_start = seen.rfind("<|im_start|>assistant")
            if "<tool_response>" not in seen:
                text = GOOD_ZOOM if i % 2 == 0 else BAD_ZOOM
            else:
                # the two rollouts of a prompt answer differently: the group's rewards differ
                text = ANSWER_YES if i % 2 == 0 else ANSWER_NO
                last_turn = seen[turn_start:] if turn_start >= 0 else ""
                assert "<tool_response>" not in last_turn
            outs.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [im_end])
        log.append(
            {
                "rows": len(outs),
                "image_tokens": int((input_ids == image_pad).sum()),
                "pixel_rows": int(kwargs["pixel_values"].shape[0])
                if "pixel_values" in kwargs
                else 0,
            }
        )
        width = max(map(len, outs))
        new = torch.full((len(outs), width), pad, dtype=input_ids.dtype)
        for i, o in enumerate(outs):
            new[i, : len(o)] = torch.tensor(o)
        return torch.cat([input_ids, new], dim=1)

    return generate


@pytest.mark.slow
def test_two_grpo_steps_with_the_zoom_tool(tiny_model_dir, training_sample, tmp_path, monkeypatch):
    import training.rewards as rewards_mod
    from training import common, grpo

    _, rl_path = training_sample
    out = tmp_path / "grpo-out"
    cfg = GRPOScriptConfig(
        model=str(tiny_model_dir),
        dataset=str(rl_path),
        output_dir=str(out),
        renderer="fast",
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        max_steps=2,
        max_completion_length=1024,
        learning_rate=1e-3,
        gradient_checkpointing=False,
        save_strategy="no",
    )
    calls = []
    real_tool = SpectrumEnvironment.spectral_visualization_tool

    @functools.wraps(real_tool)  # the tool schema is read from the signature and docstring
    def spy_tool(self, wavelength_range, label=None):
        reply = real_tool(self, wavelength_range, label)
        calls.append((self.candidate_id, list(wavelength_range), [c["type"] for c in reply]))
        return reply

    monkeypatch.setattr(SpectrumEnvironment, "spectral_visualization_tool", spy_tool)
    scored = []
    real_penalty = rewards_mod.speco3_format_penalty

    @functools.wraps(real_penalty)  # TRL logs a reward under its function's name
    def spy_penalty(completions, **kwargs):
        values = real_penalty(completions, **kwargs)
        scored.extend(zip(completions, values, kwargs["ground_truth"], strict=True))
        return values

    monkeypatch.setattr(rewards_mod, "speco3_format_penalty", spy_penalty)

    trainer = grpo.build_trainer(cfg)
    log = []
    model = trainer.model
    monkeypatch.setattr(
        model, "generate", _scripted_generate(model, trainer.processing_class.tokenizer, log)
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()

    # the tool ran once per rollout and returned an image each time
    assert len(calls) == 4
    assert all(types[0] == "image" for _, _, types in calls)
    # first turn: the global view only; second turn: global view + the zoom, per rollout
    assert log[0]["pixel_rows"] > 0 and log[0]["image_tokens"] > 0
    assert log[1]["image_tokens"] > log[0]["image_tokens"]
    # rewards, the authors' scoring by default: the tags balance over the whole response, so
    # the rollout whose first turn lacks <think> is not penalised; Loupe's stricter scoring
    # (`--reward loupe`) would have charged it
    assert cfg.reward == "speco3" and len(scored) == 4
    assert [v for _, v, _ in scored] == [0.0] * 4
    completions = [c for c, _, _ in scored]
    for completion in completions:
        assert [m["role"] for m in completion] == ["assistant", "tool", "assistant"]
    accuracy = rewards_mod.speco3_accuracy(completions, ground_truth=[t for *_, t in scored])
    assert sorted(accuracy) == [0.0, 0.0, 1.0, 1.0]
    strict = rewards_mod.format_penalty(completions)
    assert [v == 0.0 for v in strict] == [
        c[0]["content"].startswith("<think>") for c in completions
    ]
    assert sorted(strict) == [-0.2, -0.2, 0.0, 0.0]
    history = {k: v for h in trainer.state.log_history for k, v in h.items()}
    assert history["tools/call_frequency"] > 0
    assert "rewards/speco3_accuracy/mean" in history
    assert "rewards/speco3_format_penalty/mean" in history
    changed = [n for n, p in model.named_parameters() if not before[n].equal(p.detach())]
    assert changed and not any("visual" in n.split(".") for n in changed)

    common.save_for_policy(trainer, trainer.processing_class, str(out), {"stage": "grpo"})
    from tests.test_sft import assert_loads_for_policy

    assert_loads_for_policy(Path(out))


def test_specvi_parquet_rows_load(tmp_path):
    """SpecVI-Bench's schema (nested structs, NaN flux, `data_source` aliases) as published."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    from training.data import DataError

    spec = simulated_spectrum("carbon", True, seed=5)
    flux = spec.flux.copy()
    flux[10:20] = np.nan
    png = io.BytesIO()
    Image.new("RGB", (64, 40), (10, 200, 10)).save(png, format="PNG")

    def row(i, source, truth):
        return {
            "data_source": source,
            "prompt": [{"role": "user", "content": "<image>Is this a carbon star?"}],
            "images": [{"bytes": png.getvalue(), "path": None}],
            "reward_model": {"ground_truth": truth, "style": "rule"},
            "agent_name": "tool_agent",
            "extra_info": {
                "index": i,
                "name": f"spec-{i}.fits",
                "tools_kwargs": {
                    "spectral_visualization_tool": {
                        "create_kwargs": {
                            "flux": flux.tolist(),
                            "wavelength": spec.wavelength.tolist(),
                            "redshift": 0.001,
                        }
                    }
                },
            },
        }

    path = tmp_path / "train_cc.parquet"
    pq.write_table(pa.Table.from_pylist([row(0, "carbon", "YES"), row(1, "cc", "NO")]), path)
    ds = load_rl_dataset(path)
    assert ds["task"] == ["carbon", "carbon"] and ds["ground_truth"] == ["YES", "NO"]
    assert ds["id"] == ["spec-0.fits", "spec-1.fits"]
    loaded = spectrum_from_ref(ds[1]["spectrum"])
    assert loaded.redshift == 0.001 and loaded.mask[10:20].all() and not loaded.mask[30]
    env = SpectrumEnvironment(renderer="fast")
    first = env.reset(**ds[0])  # the row's own image and question
    assert first[0]["image"].size == (64, 40) and first[1]["text"] == "Is this a carbon star?"

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([row(0, "carbon", "MAYBE")]), bad)
    with pytest.raises(DataError, match=r"bad.parquet row 0: label must be YES or NO"):
        load_rl_dataset(bad)


def test_example_configs_load():
    from training.common import parse_config
    from training.sft import SFTScriptConfig

    root = Path(__file__).resolve().parent.parent / "training" / "configs"
    cpu = ["--bf16", "false"]  # the files ask for bf16, which needs a GPU
    sft = [parse_config(SFTScriptConfig, ["--config", str(f), *cpu]) for f in root.glob("sft_*")]
    grpo = [parse_config(GRPOScriptConfig, ["--config", str(f), *cpu]) for f in root.glob("grpo_*")]
    assert sft and grpo
    assert all(c.learning_rate == 2e-5 and c.freeze_vision for c in sft)
    for c in grpo:
        assert (c.num_generations, c.learning_rate, c.beta, c.max_tool_calling_iterations) == (
            8,
            1e-6,
            0.0,
            7,
        )


def test_folder_trains_on_the_train_split_only(tmp_path, training_sample):
    """SpecVI-Bench rows carry no split column: a folder's test_* files are left out unless
    --splits asks for them."""
    import shutil

    from training.grpo import split_names

    _, rl_path = training_sample
    folder = tmp_path / "specvi"
    folder.mkdir()
    lines = [json.loads(x) for x in rl_path.read_text().splitlines() if x.strip()]
    for name, rows in (("train_cc.jsonl", lines[:4]), ("test_cc.jsonl", lines[4:])):
        (folder / name).write_text("".join(json.dumps({**r, "split": None}) + "\n" for r in rows))
    assert len(load_rl_dataset(folder, splits=split_names("train"))) == 4
    assert len(load_rl_dataset(folder, splits=split_names("all"))) == len(lines)
    assert len(load_rl_dataset(folder, splits=split_names("test"))) == len(lines) - 4
    # a file named explicitly is read whatever its name
    assert len(load_rl_dataset(folder / "test_cc.jsonl")) == len(lines) - 4
    shutil.rmtree(folder)


def test_renderer_defaults_to_what_the_inputs_record(tmp_path, training_sample):
    from training.common import RendererMismatch
    from training.grpo import training_renderer

    _, rl_path = training_sample  # its manifest records "fast"
    cfg = GRPOScriptConfig(model=str(tmp_path), dataset=str(rl_path))
    assert training_renderer(cfg) == "fast"
    cfg.renderer = "speco3"
    with pytest.raises(RendererMismatch):
        training_renderer(cfg)


@pytest.mark.parametrize("with_images", [True, False])
def test_specvi_row_opens_as_vet_opens_it(tmp_path, with_images):
    """A SpecVI-Bench row is asked with its own prompt and images in GRPO as in `vet`, under
    the same overview title and pixels."""
    import numpy as np

    from agent.formats import load_one
    from agent.formats.specvi import prompt_for
    from agent.protocol import opening_messages, tools_block
    from agent.tool import spectrum_title
    from tests.test_loop import _specvi_file

    path, overview = _specvi_file(tmp_path, with_images=with_images)
    spectrum = load_one(path, row=0)
    view = global_view(spectrum, renderer="speco3")
    rp = prompt_for(spectrum)
    vet = opening_messages("cv", view.image, rp.messages, rp.images)

    row = load_rl_dataset(path)[0]
    env = SpectrumEnvironment(renderer="speco3")
    user = env.reset(**row)
    assert (
        spectrum_title(env.spectrum) == spectrum_title(spectrum) == "spec-55862-B6212_sp06-003.fits"
    )
    # the row's system text (plus the tool block) and an empty user turn that reset fills
    assert row["prompt"] == [
        {"role": "system", "content": "You vet spectra.\n\n" + tools_block()},
        {"role": "user", "content": ""},
    ]
    assert row["prompt"][0]["content"] == vet[0]["content"][0]["text"]
    assert [c["type"] for c in user] == [c["type"] for c in vet[1]["content"]] == ["image", "text"]
    assert user[1]["text"] == vet[1]["content"][1]["text"] == "Is this a CV? Answer in \\boxed{}."
    got, want = np.asarray(user[0]["image"]), np.asarray(vet[1]["content"][0]["image"])
    assert got.shape == want.shape and np.array_equal(got, want)
    if with_images:  # the row's own overview, not a re-rendered one
        assert user[0]["image"].size == overview.size
    else:
        assert np.array_equal(got, np.asarray(view.image))
