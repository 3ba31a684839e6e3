"""The text a model reads: system prompt with the hermes `# Tools` block, and the task turn.

Everything here is defined in `agent.protocol`, the one home of the Spec-o3 conversation
format; this module names the prompt-building part of it.
"""

from __future__ import annotations

from agent.protocol import (
    ANSWER_FORMAT,
    DEFAULT_SYSTEM,
    SYSTEM_TEXT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_SCHEMA,
    assistant_turn,
    image_item,
    opening_messages,
    system_message,
    system_prompt,
    task_prompt,
    text_item,
    tool_response_turn,
    tools_block,
    user_turn,
)

__all__ = [
    "ANSWER_FORMAT",
    "DEFAULT_SYSTEM",
    "SYSTEM_TEXT",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_SCHEMA",
    "assistant_turn",
    "image_item",
    "opening_messages",
    "system_message",
    "system_prompt",
    "task_prompt",
    "text_item",
    "tool_response_turn",
    "tools_block",
    "user_turn",
]
