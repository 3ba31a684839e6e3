"""The text a model reads: system prompt with the hermes `# Tools` block, and the task turn.

The structure is Spec-o3's (Qwen2.5-VL chat, hermes-style tools) so the published
checkpoints read Loupe's prompts as they read their training data; the wording is Loupe's.
The `# Tools` block sits in the system text, as Qwen's own template writes it, so the
conversation renders the same with or without a template's `tools=` support.
"""

from __future__ import annotations

import json
from typing import Any

from agent.tasks import get_task
from agent.tool import TOOL_NAME, TOOL_SCHEMA

# One schema for the tool, defined beside the tool itself.
__all__ = ["TOOL_NAME", "TOOL_SCHEMA"]

SYSTEM_TEXT = (
    "You are an expert spectroscopist who vets candidate rare objects in optical survey "
    "spectra. Look at the whole spectrum, zoom into the diagnostic wavelength windows with "
    "the tool, reason about what each zoom shows, and then give your verdict."
)

# Qwen2.5's hermes tool block, word for word: the models were trained on this wording.
_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

ANSWER_FORMAT = (
    "Think step by step inside <think></think> before every action. To look closer, call "
    "the tool once per turn. When you are sure, answer inside <answer></answer> with "
    "\\boxed{YES} or \\boxed{NO} followed by a short explanation of the evidence."
)


def tools_block(tools: list[dict[str, Any]] | None = None) -> str:
    tools = [TOOL_SCHEMA] if tools is None else tools
    body = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return _TOOLS_HEADER + body + _TOOLS_FOOTER


def system_prompt() -> str:
    return SYSTEM_TEXT + "\n\n" + tools_block()


def task_prompt(task: str) -> str:
    """The user's text for `task`: the question, the key visual indicators, the answer format."""
    t = get_task(task)
    lines = [
        "The image shows the full optical spectrum of a candidate.",
        t.question,
        "",
        "Key visual indicators:",
        *[f"- {ind}" for ind in t.indicators],
    ]
    if t.contaminants:
        lines += ["", f"Common look-alikes to rule out: {', '.join(t.contaminants)}."]
    lines += ["", ANSWER_FORMAT]
    return "\n".join(lines)


def text_item(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_item(ref: str) -> dict[str, Any]:
    return {"type": "image", "image": ref}


def system_message() -> dict[str, Any]:
    return {"role": "system", "content": [text_item(system_prompt())]}


def user_turn(task: str, global_image: str) -> dict[str, Any]:
    """The first user turn: the global view, then the task prompt."""
    return {"role": "user", "content": [image_item(global_image), text_item(task_prompt(task))]}


def assistant_turn(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [text_item(text)]}


def tool_response_turn(text: str, image: str | None) -> dict[str, Any]:
    """A tool result as Spec-o3 returns it: a user turn `<tool_response>` image + text."""
    content = [text_item("<tool_response>\n")]
    if image is not None:
        content.append(image_item(image))
    content.append(text_item(("\n" if image is not None else "") + text + "\n</tool_response>"))
    return {"role": "user", "content": content}
