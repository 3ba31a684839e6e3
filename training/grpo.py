"""accelerate launch --config_file training/configs/zero3_8gpu.yaml training/grpo.py \\
        --config training/configs/grpo_qwen2_5_vl_7b.yaml

Multi-turn GRPO with the zoom tool in the loop, on RL exports or SpecVI-Bench parquet.

vLLM server mode instead of colocation: start the server on some GPUs
(`CUDA_VISIBLE_DEVICES=6,7 trl vllm-serve --model MODEL --tensor_parallel_size 2`), then
launch on the others with `--vllm_mode server` (see docs/gpu.md).
CPU smoke run on the tiny model (`python -m training.tiny_model /tmp/tiny`):

    python training/grpo.py --model /tmp/tiny --dataset RL_EXPORT --output_dir /tmp/grpo --max_steps 2

Each rollout starts as the agent loop starts an episode: the environment's `reset` loads
the row's spectrum and returns its global view and the task prompt; the model's tool calls
run `agent.tool.call_tool` with the same renderer inference uses and get back the image and
the published reply text. Tool tokens carry no loss. Reward = accuracy + format penalty,
the authors' scoring by default (`--reward speco3`; `--reward loupe` for Loupe's stricter
one, `training.rewards`). Defaults follow the paper: group size 8, lr 1e-6, no KL term,
clip 0.2, token-mean loss, temperature 1.0, up to 7 tool calls, 3 epochs; the batch
defaults give 64 prompts per generation and 32 per optimiser step on 8 GPUs. The config is
TRL's `GRPOConfig` with Loupe's fields (`GRPOScriptConfig`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_utils import SaveStrategy, SchedulerType
from trl import GRPOConfig

from agent.errors import LoupeError
from agent.protocol import TOOL_NAME, TOOL_SCHEMA
from training.common import (
    LoupeArguments,
    checkpoint_renderer,
    load_for,
    parse_config,
    resolve_renderer,
    train_and_save,
    use_cuda,
)


@dataclass
class GRPOScriptConfig(LoupeArguments, GRPOConfig):
    """TRL's `GRPOConfig` with Loupe's fields, the paper's GRPO defaults and the rollout
    fields Loupe adds (renderer, reward, splits, the vLLM image limit)."""

    model: str = field(
        default="checkpoints/sft",
        metadata={"help": "Hub id or local folder of the (cold-started) model to train."},
    )
    dataset: str = field(
        default="",
        metadata={
            "help": "RL export (parquet/JSONL), SpecVI-Bench parquet, or a folder of them; "
            "several separated by commas."
        },
    )
    splits: str = field(
        default="train",
        metadata={
            "help": "Splits to train on, comma-separated, or 'all': rows whose split column "
            "names another are left out, and so are files of a folder named for another split "
            "(test.parquet, test_cc.parquet). Rows without a split are kept."
        },
    )
    output_dir: str | None = field(
        default="checkpoints/grpo", metadata={"help": "Where the model goes."}
    )
    renderer: str | None = field(
        default=None,
        metadata={
            "help": "Renderer of the global view and zooms: 'speco3' (what the published "
            "checkpoints saw) or 'fast'. Default: the one the RL export and the starting "
            "checkpoint record (they must agree unless --force_renderer), else speco3. "
            "Recorded in the checkpoint; vet with the same one."
        },
    )
    reward: str = field(
        default="speco3",
        metadata={
            "help": "Reward scoring (training.rewards): 'speco3', the authors' (format check "
            "over the whole response, \\boxed{} then a bare YES/NO) for reproduction, or "
            "'loupe', the stricter one (-0.2 per format error).",
        },
    )
    vllm_image_limit: int = field(
        default=9,
        metadata={
            "help": "Images vLLM accepts per prompt in colocate mode (limit_mm_per_prompt): "
            "the global view + max_tool_calling_iterations zooms + 1 spare; must be at least "
            "max_tool_calling_iterations + 1."
        },
    )
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate (constant)."})
    lr_scheduler_type: SchedulerType | str = field(
        default="constant", metadata={"help": "Learning-rate schedule."}
    )
    num_train_epochs: float = field(default=3.0, metadata={"help": "Passes over the prompts."})
    num_generations: int | None = field(
        default=8, metadata={"help": "Group size: rollouts per prompt."}
    )
    per_device_train_batch_size: int = field(
        default=8, metadata={"help": "Rollouts per device per micro-batch."}
    )
    gradient_accumulation_steps: int = field(
        default=4,
        metadata={"help": "Micro-batches per optimiser step (8 GPUs x 8 x 4 = 32 prompts x 8)."},
    )
    steps_per_generation: int | None = field(
        default=8,
        metadata={"help": "Micro-batches per generation round (8 GPUs x 8 x 8 = 64 prompts x 8)."},
    )
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (the paper uses none)."})
    max_tool_calling_iterations: int | None = field(
        default=7, metadata={"help": "Tool calls per rollout (7 zooms + the answer = 8 turns)."}
    )
    max_completion_length: int | None = field(
        default=8192,
        metadata={
            "help": "Tokens per rollout after the prompt, tool images and replies included "
            "(the authors' max_response_length was 32768: grpo_qwen2_5_vl_7b_32k.yaml)."
        },
    )
    use_vllm: bool | None = field(  # type: ignore[assignment]
        default=None, metadata={"help": "Generate with vLLM; default: on with CUDA, off on CPU."}
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.35, metadata={"help": "GPU memory share for vLLM in colocate mode."}
    )
    vllm_max_model_length: int | None = field(
        default=16384,
        metadata={
            "help": "vLLM's context (prompt + rollout, images included): the prompt with the "
            "global view is ~1.5k tokens, max_completion_length 8k more; sizes the KV cache."
        },
    )
    save_strategy: SaveStrategy | str = field(
        default="steps", metadata={"help": "'steps', 'epoch' or 'no'."}
    )
    save_steps: float = field(default=10, metadata={"help": "Checkpoint every N optimiser steps."})

    def __post_init__(self) -> None:
        if self.use_vllm is None:
            self.use_vllm = use_cuda()
        super().__post_init__()


# -- the environment ---------------------------------------------------------------------


def tool_reply(result: Any) -> list[dict[str, Any]]:
    """A `ToolResult` as the tool message content TRL renders inside `<tool_response>`.

    Built from `agent.protocol.tool_response_turn` (what the agent loop sends) minus the
    wrapper tags the chat template adds, so a rollout's tool turn tokenises exactly like the
    loop's.
    """
    from agent.protocol import tool_response_turn

    placeholder = "image" if result.image is not None else None
    items = [dict(item) for item in tool_response_turn(result.text, placeholder)["content"]]
    head, tail = "<tool_response>\n", "\n</tool_response>"
    if items[0].get("type") != "text" or not items[0]["text"].startswith(head):
        raise ValueError("tool response turn does not open with <tool_response>")
    if items[-1].get("type") != "text" or not items[-1]["text"].endswith(tail):
        raise ValueError("tool response turn does not close with </tool_response>")
    items[0]["text"] = items[0]["text"][len(head) :]
    items[-1]["text"] = items[-1]["text"][: -len(tail)]
    out = []
    for item in items:
        if item.get("type") == "image":
            out.append({"type": "image", "image": result.image})
        elif item.get("text"):
            out.append({"type": "text", "text": item["text"]})
    return out


def tool_docstring() -> str:
    """The zoom tool's description and arguments from `agent.protocol.TOOL_SCHEMA`, in the
    Google style TRL reads a tool's schema from, so the tool is described in one place.

    >>> print(tool_docstring().splitlines()[0])
    A tool for visualizing spectral data with wavelength range zooming capabilities.
    """
    fn = TOOL_SCHEMA["function"]
    args = "".join(
        f"\n    {name}: {prop['description']}"
        for name, prop in fn["parameters"]["properties"].items()
    )
    return f"{fn['description']}\n\nArgs:{args}\n"


class SpectrumEnvironment:
    """One rollout's world: the candidate's spectrum and the zoom tool over it."""

    renderer = "speco3"

    def __init__(self, renderer: str | None = None):
        self.renderer = renderer or self.renderer
        self.spectrum = None
        self.candidate_id = ""
        self.calls: list[dict[str, Any]] = []  # every tool call of the current rollout
        self.images = 0  # images returned in the current rollout

    def reset(self, **row: Any) -> list[dict[str, Any]]:
        """Load the row's spectrum; return the first user turn's content as `vet` opens the
        episode (`agent.protocol.opening_messages`): the global view and the task prompt, or
        a SpecVI-Bench row's own prompt and images. The row's `prompt` holds the turns
        before it (`training.data.rl_prompt`)."""
        from agent.formats.specvi import row_prompt
        from agent.protocol import opening_messages
        from agent.tool import global_view
        from training.data import DataError, row_prompt_source, spectrum_from_ref

        self.candidate_id = str(row.get("id", ""))
        self.calls, self.images = [], 0
        try:
            self.spectrum = spectrum_from_ref(row["spectrum"])
        except Exception as exc:
            raise DataError(
                f"candidate {self.candidate_id!r}: cannot load its spectrum ({exc})"
            ) from exc
        try:
            src = row_prompt_source(row["spectrum"])
            rp = row_prompt(*src) if src is not None else None
        except Exception as exc:
            raise DataError(
                f"candidate {self.candidate_id!r}: cannot read its row's prompt ({exc})"
            ) from exc
        view = global_view(self.spectrum, renderer=self.renderer)
        if view.error:
            raise DataError(f"candidate {self.candidate_id!r}: {view.error}")
        if rp is None:
            opening = opening_messages(row["task"], view.image)
        else:
            opening = opening_messages(row["task"], view.image, rp.messages, rp.images)
        return list(opening[-1]["content"])

    def spectral_visualization_tool(
        self, wavelength_range: list[float], label: str | None = None
    ) -> list[dict[str, Any]]:
        from agent.tool import call_tool

        arguments: dict[str, Any] = {"wavelength_range": wavelength_range}
        if label is not None:
            arguments["label"] = label
        result = call_tool(self.spectrum, TOOL_NAME, arguments, renderer=self.renderer)
        self.calls.append({"arguments": arguments, "error": result.error})
        self.images += result.image is not None
        return tool_reply(result)

    # TRL reads a tool's description and arguments from its docstring: the protocol's.
    spectral_visualization_tool.__doc__ = tool_docstring()


def environment_factory(renderer: str):
    def make() -> SpectrumEnvironment:
        return SpectrumEnvironment(renderer=renderer)

    return make


# -- main --------------------------------------------------------------------------------


def build_trainer(cfg: GRPOScriptConfig) -> Any:
    from trl import GRPOTrainer

    from training.data import load_rl_dataset
    from training.rewards import reward_functions

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, processor = load_for(cfg)
    processor.tokenizer.padding_side = "left"
    reward_funcs = reward_functions(cfg.reward)  # summed: TRL weighs each 1 by default
    calls = cfg.max_tool_calling_iterations or 0
    if cfg.vllm_image_limit < calls + 1:
        raise ValueError(
            f"vllm_image_limit {cfg.vllm_image_limit} < max_tool_calling_iterations + 1 "
            f"({calls + 1}): a rollout's last zooms would be refused"
        )
    if cfg.use_vllm and cfg.vllm_mode == "colocate":
        limit_vllm_images(cfg.vllm_image_limit)
    dataset = load_rl_dataset(
        dataset_paths(cfg), splits=split_names(cfg.splits), min_grade=cfg.min_grade
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=cfg,
        train_dataset=dataset,
        processing_class=processor,
        environment_factory=environment_factory(training_renderer(cfg)),
    )


def limit_vllm_images(n: int) -> None:
    """Let TRL's colocated vLLM engine take `n` images per prompt.

    TRL builds `vllm.LLM` without `limit_mm_per_prompt`, and a vLLM whose default is lower
    than a rollout's images (the global view + up to 7 zooms) refuses the rollout; TRL's
    module-level `LLM` gets the limit bound in. In server mode pass it to the server:
    `trl vllm-serve ... --limit_mm_per_prompt '{"image": 9}'` where supported (docs/gpu.md).
    """
    import functools

    import trl.generation.vllm_generation as gen

    llm = getattr(gen, "LLM", None)
    if llm is None or isinstance(llm, functools.partial):
        return
    gen.LLM = functools.partial(llm, limit_mm_per_prompt={"image": n})


def dataset_paths(cfg: GRPOScriptConfig) -> list[str]:
    return [p.strip() for p in cfg.dataset.split(",") if p.strip()]


def split_names(text: str | None) -> list[str] | None:
    """`--splits train,val` -> ["train", "val"]; "all" (or empty) -> None, every split."""
    names = [s.strip() for s in (text or "").split(",") if s.strip()]
    return None if not names or names == ["all"] else names


def training_renderer(cfg: GRPOScriptConfig) -> str:
    """`cfg.renderer`, else what the RL exports and the starting checkpoint record; they must
    agree (the rollouts' images are drawn with it) unless `cfg.force_renderer`."""
    from training.data import export_renderer

    recorded = {p: export_renderer(p) for p in dataset_paths(cfg)}
    recorded[cfg.model] = checkpoint_renderer(cfg.model)
    return resolve_renderer(cfg.renderer, recorded, force=cfg.force_renderer)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(
        GRPOScriptConfig,
        argv,
        description="Multi-turn GRPO with the zoom tool in the loop, on RL exports or SpecVI-Bench parquet.",
    )
    if not cfg.dataset:
        print(
            "grpo.py: --dataset is required (an RL export or SpecVI-Bench parquet)", file=sys.stderr
        )
        return 2
    from training.rewards import SCORINGS

    if cfg.reward not in SCORINGS:
        print(
            f"grpo.py: --reward {cfg.reward!r}: choose one of {', '.join(SCORINGS)}",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    from training.data import check_export

    try:
        for path in dataset_paths(cfg):
            check_export(path)  # an empty export stops here, before any model is loaded
        renderer = training_renderer(cfg)
        trainer = build_trainer(cfg)
    except LoupeError as exc:
        print(f"grpo.py: {exc}", file=sys.stderr)
        return 2
    train_and_save(trainer, cfg, stage="grpo", renderer=renderer)
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    print(
        f"grpo: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f} s, "
        f"mean reward {json.dumps([round(r, 3) for r in rewards])}; model saved to {cfg.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
