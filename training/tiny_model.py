"""A tiny random Qwen2.5-VL, its tokenizer and processor, built locally in about a second.

    python -m training.tiny_model OUT_DIR

Tests and smoke runs use it wherever a real checkpoint would be too big (or is on a hub this
machine cannot reach). It has the architecture, special tokens, processor and chat-template
behaviour of the published Spec-o3 checkpoints, with random weights and a byte-level BPE
vocabulary of ~512 trained on Spec-o3-style trajectory text, so its output is garbage that
still exercises every code path (generation, parsing, format errors, SFT, GRPO).

Its processor is saved under the stock class names (`Qwen2_5_VLProcessor`, with a video
processor config; `training.common.save_processor`), so `AutoProcessor`, LLaMA-Factory and
verl open it where torchvision is installed. Load it back with
`agent.policies.hf.load_processor(OUT_DIR)` (which also works without torchvision) and
`AutoModelForImageTextToText`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Qwen's special tokens, in Qwen's order, then the hermes tool tags and the reasoning tags.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

VOCAB_SIZE = 512
# Small images keep the tiny model fast: at most 16x16 patches of 14 px (64 merged tokens).
MAX_PIXELS = 224 * 224
MIN_PIXELS = 56 * 56


def _corpus() -> list[str]:
    """Trajectory-like text so the BPE merges cover what the model will read and write."""
    from agent.protocol import format_turn, system_prompt, task_prompt
    from agent.tasks import TASKS

    lines = [system_prompt()]
    for name in TASKS:
        lines.append(task_prompt(name))
    for lo, hi, label in [
        (4800, 4920, "H-beta"),
        (6500, 6620, "H-alpha"),
        (5100, 5250, "C2 Swan band"),
        (7000, 7700, "TiO bands"),
        (8150, 8220, "Na I doublet"),
    ]:
        lines.append(
            format_turn(f"I should zoom into {label} near {lo} to {hi}.", (lo, hi), label=label)
        )
        lines.append(
            f"<tool_response>Generated spectral visualization focused on wavelength range "
            f"({lo}, {hi}) Å for {label}.</tool_response>"
        )
    lines.append(
        format_turn("The lines are broad and deep.", answer="YES", explanation="broad Balmer.")
    )
    lines.append(format_turn("No emission is seen.", answer="NO", explanation="no emission lines."))
    return lines * 4


def chat_template() -> str:
    """The tool-capable Spec-o3 template (`training.chat_template`): it renders Spec-o3
    messages exactly as the stock Qwen2.5-VL template does and also accepts `tools=`."""
    from training.chat_template import SPECO3_CHAT_TEMPLATE

    return SPECO3_CHAT_TEMPLATE


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS + ADDED_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=32768,
    )
    fast.add_tokens(ADDED_TOKENS)  # normal added tokens, as in Qwen: they are decoded
    fast.padding_side = "left"
    fast.chat_template = chat_template()
    return fast


def build_model(tokenizer, seed: int = 0):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = tokenizer.convert_tokens_to_ids
    text_config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]},
        "bos_token_id": ids("<|endoftext|>"),
        "eos_token_id": ids("<|im_end|>"),
        "pad_token_id": ids("<|endoftext|>"),
    }
    vision_config = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "fullatt_block_indexes": [1],
        "window_size": 56,
    }
    config = Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids("<|im_end|>")
    model.generation_config.pad_token_id = ids("<|endoftext|>")
    model.generation_config.bos_token_id = ids("<|endoftext|>")
    return model.eval()


def build(out_dir: str | Path, seed: int = 0) -> Path:
    """Write model, tokenizer, processor and chat template to `out_dir`; return it."""
    from transformers import Qwen2VLImageProcessor

    from agent.policies.hf import processor_class
    from training.common import save_processor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    image_processor = Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    processor = processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template()
    )
    model = build_model(tokenizer, seed=seed)
    model.save_pretrained(out)
    save_processor(processor, out)  # stock class names, as a published checkpoint has
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("out_dir", help="folder to write the checkpoint into")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = parser.parse_args(argv)
    out = build(args.out_dir, seed=args.seed)
    print(f"tiny Qwen2.5-VL written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
