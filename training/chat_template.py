"""A tool-capable chat template for Qwen2.5-VL that renders the Spec-o3 conversation format.

The stock Qwen2.5-VL template has no notion of tools, so TRL refuses it for multi-turn GRPO.
This one renders, token for token, the hermes-style layout the Spec-o3 checkpoints were
trained on:

    <|im_start|>system\\n{system text}[\\n\\n# Tools ... <tools>...</tools> ...]<|im_end|>
    <|im_start|>user\\n<image><task text><|im_end|>
    <|im_start|>assistant\\n<think>...</think>[\\n<tool_call>\\n{json}\\n</tool_call>]<|im_end|>
    <|im_start|>user\\n<tool_response>\\n<image>Generated spectral ...\\n</tool_response><|im_end|>
    ...

Two routes lead to the same text: a system message that already holds the `# Tools` block
(what `agent.protocol` writes, so inference and training see identical prompts) is rendered
as is; otherwise, when `tools` are passed, the block is generated from their JSON schemas.
Assistant turns may carry their tool call inside the raw text (SFT exports, model output)
or as structured `tool_calls` (TRL's rollouts); both render the same.

`{% generation %}` markers wrap every assistant turn up to and including `<|im_end|>`, so
`assistant_only_loss=True` trains exactly the assistant tokens and the stop token. The
template is prefix-preserving (appending messages never changes earlier text), which TRL's
multi-turn tool loop relies on.
"""

from __future__ import annotations

from typing import Any

from agent.protocol import (
    DEFAULT_SYSTEM,  # verl's template wrote it for a prompt without one
    TOOLS_FOOTER,
    TOOLS_HEADER,
)


def _jinja_string(text: str) -> str:
    """`text` written inside a double-quoted Jinja string literal (which unescapes it)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# The hermes tool block is the protocol's, word for word, after the system text's blank line
# (as `agent.protocol.system_prompt` joins them).
_TOOLS_HEAD = _jinja_string("\n\n" + TOOLS_HEADER)
_TOOLS_TAIL = _jinja_string(TOOLS_FOOTER)

SPECO3_CHAT_TEMPLATE = (
    """{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is not none -%}
        {%- for item in content -%}
            {#- Arrow-backed datasets give every item every key (None where unused), so the
                `type` field decides; key presence is only a fallback for untyped items. -#}
            {%- if item is string -%}
                {%- set kind = 'string' -%}
            {%- elif item.type is defined and item.type -%}
                {%- set kind = item.type -%}
            {%- elif 'image' in item or 'image_url' in item -%}
                {%- set kind = 'image' -%}
            {%- elif 'video' in item -%}
                {%- set kind = 'video' -%}
            {%- else -%}
                {%- set kind = 'text' -%}
            {%- endif -%}
            {%- if kind == 'string' -%}
                {{- item -}}
            {%- elif kind == 'image' or kind == 'image_url' -%}
                {%- set image_count.value = image_count.value + 1 -%}
                {%- if add_vision_id -%}{{- 'Picture ' ~ image_count.value ~ ': ' -}}{%- endif -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif kind == 'video' -%}
                {%- set video_count.value = video_count.value + 1 -%}
                {%- if add_vision_id -%}{{- 'Video ' ~ video_count.value ~ ': ' -}}{%- endif -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif item.text is defined and item.text is not none -%}
                {{- item.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if messages[0].role == 'system' -%}
    {%- set system_text = render_content(messages[0].content) -%}
    {%- set rest = messages[1:] -%}
{%- else -%}
    {%- set system_text = '"""
    + DEFAULT_SYSTEM
    + """' -%}
    {%- set rest = messages -%}
{%- endif -%}
{{- '<|im_start|>system\\n' + system_text -}}
{%- if tools and '<tools>' not in system_text -%}
    {{- \""""
    + _TOOLS_HEAD
    + """\" -}}
    {%- for tool in tools -%}
        {{- '\\n' + (tool | tojson) -}}
    {%- endfor -%}
    {{- \""""
    + _TOOLS_TAIL
    + """\" -}}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- for message in rest -%}
    {%- if message.role == 'assistant' -%}
        {{- '<|im_start|>assistant\\n' -}}
        {%- generation -%}
            {{- render_content(message.content) -}}
            {%- if message.tool_calls -%}
                {%- for tool_call in message.tool_calls -%}
                    {%- if tool_call.function is defined -%}
                        {%- set tool_call = tool_call.function -%}
                    {%- endif -%}
                    {{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' -}}
                    {%- if tool_call.arguments is string -%}
                        {{- tool_call.arguments -}}
                    {%- else -%}
                        {{- tool_call.arguments | tojson -}}
                    {%- endif -%}
                    {{- '}\\n</tool_call>' -}}
                {%- endfor -%}
            {%- endif -%}
            {{- '<|im_end|>\\n' -}}
        {%- endgeneration -%}
    {%- elif message.role == 'tool' -%}
        {%- if loop.first or rest[loop.index0 - 1].role != 'tool' -%}
            {{- '<|im_start|>user' -}}
        {%- endif -%}
        {{- '\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response>' -}}
        {%- if loop.last or rest[loop.index0 + 1].role != 'tool' -%}
            {{- '<|im_end|>\\n' -}}
        {%- endif -%}
    {%- else -%}
        {{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
{%- endif -%}"""
)

# How TRL/transformers split a generated assistant turn into content and tool calls. Unlike
# the Qwen3 parser, `<think>` stays inside `content`: the Spec-o3 reward judges the raw text,
# including unbalanced or missing reasoning tags.
SPECO3_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"<\|im_end\|>\s*",
            "content": "text",
        },
    },
}


def apply_speco3_template(processor: Any) -> Any:
    """Install the template (and the matching response parser) on a processor or tokenizer.

    Returns the same object. The template is stored on both the processor and its tokenizer
    so `save_pretrained` writes it next to the checkpoint and the `hf` policy picks it up.
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    processor.chat_template = SPECO3_CHAT_TEMPLATE
    tokenizer.chat_template = SPECO3_CHAT_TEMPLATE
    # Older transformers only know the legacy `response_schema`; setting the new-style
    # attribute there is harmless and TRL then falls back to plain decoding.
    tokenizer.response_template = SPECO3_RESPONSE_TEMPLATE
    return processor
