"""The Spec-o3 reward: accuracy minus 0.2 for a format error (1 / 0.8 / 0 / -0.2).

Plain functions in TRL's reward signature (`completions`, dataset columns as keyword
arguments, one float per completion). A completion is either the raw assistant text or,
in TRL's multi-turn rollouts, the list of messages the model and the tool exchanged. Tool
use is not rewarded directly.

A format error is: missing or unbalanced `<think>`, not exactly one `<answer>...</answer>`,
or no `\\boxed{YES|NO}` inside it. The rules per turn are `agent.protocol.parse_turn`'s, the
ones the agent loop records, so training and vetting count the same errors.
"""

from __future__ import annotations

from typing import Any

from agent.protocol import parse_turn, think_block, tool_call_block

FORMAT_PENALTY = 0.2


def completion_text(completion: Any) -> str:
    """The assistant text of a completion: a string as is, or every assistant turn joined.

    >>> completion_text("<think>a</think>")
    '<think>a</think>'
    >>> completion_text([
    ...     {"role": "assistant", "content": "<think>zoom</think>",
    ...      "tool_calls": [{"type": "function", "function": {"name": "t", "arguments": {"x": 1}}}]},
    ...     {"role": "tool", "name": "t", "content": [{"type": "text", "text": "plotted"}]},
    ...     {"role": "assistant", "content": [{"type": "text", "text": "<answer>x</answer>"}]},
    ... ])
    '<think>zoom</think>\\n<tool_call>\\n{"name": "t", "arguments": {"x": 1}}\\n</tool_call>\\n<answer>x</answer>'
    """
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, (list, tuple)):
        return ""
    parts = []
    for message in completion:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):
            text = "".join(
                c.get("text") or ""
                for c in content
                if isinstance(c, dict) and c.get("type") == "text"
            )
        else:
            text = content or ""
        # A rollout's parser may have split reasoning out of the content; put it back.
        if message.get("reasoning_content"):
            text = think_block(message["reasoning_content"]) + text
        for call in message.get("tool_calls") or []:
            fn = call.get("function", call)
            text += tool_call_block(fn.get("name", ""), fn.get("arguments", {}))
        parts.append(text)
    return "\n".join(parts)


def assistant_turns(completion: Any) -> list[str]:
    """The raw text of each assistant turn: a string is one turn; messages give one each.

    >>> assistant_turns("<think>a</think>")
    ['<think>a</think>']
    >>> assistant_turns([{"role": "assistant", "content": "x"}, {"role": "tool", "content": "y"},
    ...                  {"role": "assistant", "content": "z"}])
    ['x', 'z']
    """
    if isinstance(completion, str):
        return [completion]
    if not isinstance(completion, (list, tuple)):
        return []
    return [
        completion_text([m])
        for m in completion
        if isinstance(m, dict) and m.get("role") == "assistant"
    ]


def format_error(completion: Any) -> str | None:
    """Why a completion breaks the answer format, or None when it is well formed.

    Every assistant turn must pass `agent.parse.parse_turn` (balanced, non-empty `<think>`;
    one tool call, or exactly one `<answer>` holding `\\boxed{YES|NO}`), and the last turn,
    only the last, must be the answer.

    >>> format_error("<think>broad lines</think><answer>\\\\boxed{YES} a WD</answer>") is None
    True
    >>> format_error("<answer>\\\\boxed{YES}</answer>")
    'turn 1: missing <think>'
    >>> format_error("<think>a</think><answer>YES</answer>")
    'turn 1: no \\\\boxed{} inside <answer>'
    >>> format_error([{"role": "assistant", "content": "<think>zoom</think>",
    ...                "tool_calls": [{"function": {"name": "t", "arguments": {"x": 1}}}]}])
    'the last turn does not answer'
    """
    turns = assistant_turns(completion)
    if not turns:
        return "no assistant output"
    for i, raw in enumerate(turns):
        parsed = parse_turn(raw)
        if parsed.errors:
            return f"turn {i + 1}: {parsed.error}"
        if parsed.is_answer and i < len(turns) - 1:
            return f"turn {i + 1} answers before the last turn"
    if not parse_turn(turns[-1]).is_answer:
        return "the last turn does not answer"
    return None


def extract_verdict(completion: Any) -> str | None:
    """ "YES"/"NO" from the last turn's boxed answer (a verdict boxed outside <answer> counts).

    The fallback means a badly formatted but right answer still earns 0.8, as in Spec-o3.

    >>> extract_verdict("<think>x</think><answer>\\\\boxed{yes} broad lines</answer>")
    'YES'
    >>> extract_verdict("I think \\\\boxed{NO}")
    'NO'
    >>> extract_verdict("no verdict here") is None
    True
    """
    turns = assistant_turns(completion)
    return parse_turn(turns[-1]).answer if turns else None


def _truths(ground_truth: Any, n: int) -> list[str | None]:
    if ground_truth is None or isinstance(ground_truth, str):
        return [ground_truth] * n
    return [None if g is None else str(g).strip().upper() for g in ground_truth]


def accuracy_reward(
    completions: list[Any], ground_truth: list[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """1.0 where the boxed verdict equals the label, else 0.0 (None where the label is unknown).

    >>> accuracy_reward(["<answer>\\\\boxed{YES}</answer>", "\\\\boxed{NO}", "nothing"],
    ...                 ground_truth=["YES", "YES", "NO"])
    [1.0, 0.0, 0.0]
    """
    truths = _truths(ground_truth, len(completions))
    out: list[float | None] = []
    for completion, truth in zip(completions, truths, strict=True):
        if truth is None:
            out.append(None)
            continue
        out.append(1.0 if extract_verdict(completion) == truth else 0.0)
    return out


def format_penalty(completions: list[Any], **kwargs: Any) -> list[float]:
    """-0.2 for each completion with a format error, 0.0 otherwise.

    >>> format_penalty(["<think>a</think><answer>\\\\boxed{NO}</answer>", "\\\\boxed{NO}"])
    [0.0, -0.2]
    """
    return [-FORMAT_PENALTY if format_error(c) is not None else 0.0 for c in completions]


def speco3_reward(
    completions: list[Any], ground_truth: list[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """Accuracy minus 0.2 for a format error: 1, 0.8, 0 or -0.2.

    >>> speco3_reward(
    ...     ["<think>a</think><answer>\\\\boxed{YES}</answer>", "<answer>\\\\boxed{YES}</answer>",
    ...      "<think>a</think><answer>\\\\boxed{NO}</answer>", "\\\\boxed{NO}"],
    ...     ground_truth=["YES", "YES", "YES", "YES"])
    [1.0, 0.8, 0.0, -0.2]
    """
    acc = accuracy_reward(completions, ground_truth)
    fmt = format_penalty(completions)
    return [None if a is None else round(a + f, 10) for a, f in zip(acc, fmt, strict=True)]
