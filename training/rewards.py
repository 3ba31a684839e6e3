"""GRPO rewards: accuracy minus 0.2 for a format error (1 / 0.8 / 0 / -0.2), scored two ways.

- `"speco3"` (the default, for reproducing the paper): the published scoring, which judges
  the whole response as one text. A format error is an unbalanced or missing `<think>`
  pair anywhere in it, not exactly one `<answer>...</answer>`, or no `\\boxed{YES|NO}`
  inside the answer; the verdict is the answer's box, else the first `\\boxed{}` anywhere,
  else the first bare YES (then NO) word, else the last line.
- `"loupe"`: Loupe's stricter scoring, the rules `agent.protocol.parse_turn` records when
  vetting, applied per turn: every turn thinks, one tool call or one boxed answer per turn,
  and the last turn, only the last, answers; the verdict is the last turn's.

Plain functions in TRL's reward signature (`completions`, dataset columns as keyword
arguments, one float per completion). A completion is either the raw assistant text or,
in TRL's multi-turn rollouts, the list of messages the model and the tool exchanged. Tool
use is not rewarded directly. `reward_functions(scoring)` gives the pair a trainer sums.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.protocol import ANSWER_BLOCK, BOXED, parse_turn, think_block, tool_call_block

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

    Every assistant turn must pass `agent.protocol.parse_turn` (balanced, non-empty `<think>`;
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
    """Loupe scoring: 1.0 where the last turn's verdict equals the label, else 0.0 (None
    where the label is unknown).

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
    """Loupe scoring: -0.2 for each completion with a format error (`format_error`), else 0.0.

    >>> format_penalty(["<think>a</think><answer>\\\\boxed{NO}</answer>", "\\\\boxed{NO}"])
    [0.0, -0.2]
    """
    return [-FORMAT_PENALTY if format_error(c) is not None else 0.0 for c in completions]


def loupe_reward(
    completions: list[Any], ground_truth: list[str] | None = None, **kwargs: Any
) -> list[float | None]:
    r"""Loupe scoring, accuracy minus 0.2 for a format error: 1, 0.8, 0 or -0.2.

    >>> loupe_reward(
    ...     ["<think>a</think><answer>\\boxed{YES}</answer>", "<answer>\\boxed{YES}</answer>",
    ...      "<think>a</think><answer>\\boxed{NO}</answer>", "\\boxed{NO}"],
    ...     ground_truth=["YES", "YES", "YES", "YES"])
    [1.0, 0.8, 0.0, -0.2]
    """
    acc = accuracy_reward(completions, ground_truth)
    fmt = format_penalty(completions)
    return [None if a is None else round(a + f, 10) for a, f in zip(acc, fmt, strict=True)]


# -- the published scoring --------------------------------------------------------------
_VERDICTS = ("YES", "NO")


def response_text(completion: Any) -> str:
    r"""A completion as verl decoded a multi-turn rollout for its reward: assistant turns
    with the tool replies between them (special tokens dropped, so the role names remain).

    >>> response_text("<think>a</think>")
    '<think>a</think>'
    >>> response_text([{"role": "assistant", "content": "<think>z</think>"},
    ...                {"role": "tool", "content": [{"type": "image"},
    ...                                             {"type": "text", "text": "Plotted."}]},
    ...                {"role": "assistant", "content": "<answer>x</answer>"}])
    '<think>z</think>user\n<tool_response>\nPlotted.\n</tool_response>\nassistant\n<answer>x</answer>'
    """
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, (list, tuple)):
        return ""
    out = []
    for message in completion:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            out.append(completion_text([message]))
        elif message.get("role") in ("tool", "user"):
            content = message.get("content")
            if isinstance(content, list):
                text = "".join(
                    c.get("text") or ""
                    for c in content
                    if isinstance(c, dict) and c.get("type") == "text"
                )
            else:
                text = "" if content is None else str(content)
            out.append(f"user\n<tool_response>\n{text}\n</tool_response>\nassistant\n")
    return "".join(out)


def _bare_verdict(text: str) -> str:
    # YES is looked for first, then NO, as the published scoring does
    for word in _VERDICTS:
        m = re.search(rf"\b({word})\b", text, re.IGNORECASE)
        if m:
            return m.group(1).upper()
    return ""


def _boxed_verdict(content: str) -> str:
    content = content.strip()
    return content.upper() if content.upper() in _VERDICTS else content


@dataclass(frozen=True)
class Speco3Score:
    r"""The published scoring of one response: the extracted answer and the format verdict."""

    answer: str  # what was compared with the label (not always YES/NO)
    format_error: bool

    def accuracy(self, truth: str) -> float:
        return 1.0 if " ".join(self.answer.split()) == " ".join(truth.split()) else 0.0

    def score(self, truth: str) -> float:
        return round(self.accuracy(truth) - FORMAT_PENALTY * self.format_error, 10)


def speco3_score(completion: Any) -> Speco3Score:
    r"""Score a response the way the published Spec-o3 reward does (binary tasks).

    Think tags are counted over the whole response; the verdict comes from the answer's
    `\boxed{}`, else any `\boxed{}`, else a bare YES/NO word, else the last line.

    >>> speco3_score("<think>a</think><tool_call>{}</tool_call><answer>\\boxed{yes} WD</answer>")
    Speco3Score(answer='YES', format_error=False)
    >>> speco3_score("<think>a</think><answer>It is NO white dwarf</answer>")
    Speco3Score(answer='NO', format_error=True)
    >>> speco3_score("no tags; I'd say \\boxed{NO} or maybe yes")
    Speco3Score(answer='NO', format_error=True)
    >>> speco3_score("<think>a</think><think>b</think><answer>\\boxed{NO}</answer>")
    Speco3Score(answer='NO', format_error=False)
    """
    text = response_text(completion)
    fmt = text.count("<think>") != text.count("</think>") or text.count("<think>") == 0
    if text.count("<answer>") != 1 or text.count("</answer>") != 1:
        fmt = True
    answers = ANSWER_BLOCK.findall(text)
    answer = ""
    if not answers:
        fmt = True
    else:
        fmt = fmt or len(answers) != 1
        content = answers[-1].strip()
        boxed = BOXED.search(content)
        if boxed is not None:
            answer = _boxed_verdict(boxed.group(1))
            fmt = fmt or answer not in _VERDICTS
        else:
            fmt = True
            answer = _bare_verdict(content)
    if not answer and fmt:
        boxed = BOXED.search(text)
        if boxed is not None:
            answer = _boxed_verdict(boxed.group(1))
        if not answer:
            answer = _bare_verdict(text)
        if not answer:
            lines = [line.strip() for line in text.split("\n") if line.strip()]
            answer = lines[-1] if lines else ""
    answer = answer.strip()
    if not answer:
        fmt, answer = True, text.strip()
    return Speco3Score(answer=answer, format_error=fmt)


def speco3_accuracy(
    completions: list[Any], ground_truth: list[str] | None = None, **kwargs: Any
) -> list[float | None]:
    r"""Published scoring: 1.0 where the extracted answer equals the label, else 0.0.

    >>> speco3_accuracy(["<answer>\\boxed{YES}</answer>", "NO.", "nothing"],
    ...                 ground_truth=["YES", "NO", "NO"])
    [1.0, 1.0, 0.0]
    """
    truths = _truths(ground_truth, len(completions))
    return [
        None if t is None else speco3_score(c).accuracy(t)
        for c, t in zip(completions, truths, strict=True)
    ]


def speco3_format_penalty(completions: list[Any], **kwargs: Any) -> list[float]:
    r"""Published scoring: -0.2 for a response with a format error, else 0.0.

    >>> speco3_format_penalty(["<think>a</think><answer>\\boxed{NO}</answer>", "\\boxed{NO}"])
    [0.0, -0.2]
    """
    return [-FORMAT_PENALTY if speco3_score(c).format_error else 0.0 for c in completions]


def speco3_reward(
    completions: list[Any], ground_truth: list[str] | None = None, **kwargs: Any
) -> list[float | None]:
    r"""Published scoring, accuracy minus 0.2 for a format error: 1, 0.8, 0 or -0.2.

    Unlike `loupe_reward`, a tool-calling turn without `<think>` goes unpunished when the
    tags balance over the whole response, and a bare YES/NO still counts as a verdict.

    >>> speco3_reward(
    ...     ["<think>a</think><answer>\\boxed{YES}</answer>", "<answer>\\boxed{YES}</answer>",
    ...      "<think>a</think><answer>\\boxed{NO}</answer>", "<answer>NO</answer>",
    ...      "<tool_call>{}</tool_call><think>a</think><answer>\\boxed{YES}</answer>"],
    ...     ground_truth=["YES"] * 5)
    [1.0, 0.8, 0.0, -0.2, 1.0]
    """
    truths = _truths(ground_truth, len(completions))
    return [
        None if t is None else speco3_score(c).score(t)
        for c, t in zip(completions, truths, strict=True)
    ]


RewardFunc = Callable[..., list]
SCORINGS = ("speco3", "loupe")


def reward_functions(scoring: str = "speco3") -> list[RewardFunc]:
    """The [accuracy, format penalty] pair of a scoring; a trainer sums them (weights 1, 1).

    >>> [f.__name__ for f in reward_functions()]
    ['speco3_accuracy', 'speco3_format_penalty']
    >>> [f.__name__ for f in reward_functions("loupe")]
    ['accuracy_reward', 'format_penalty']
    """
    if scoring == "speco3":
        return [speco3_accuracy, speco3_format_penalty]
    if scoring == "loupe":
        return [accuracy_reward, format_penalty]
    raise ValueError(f"unknown reward scoring {scoring!r}; choose one of {', '.join(SCORINGS)}")


def reward(scoring: str = "speco3") -> RewardFunc:
    """The summed reward of a scoring as one function (`speco3_reward` or `loupe_reward`)."""
    if scoring not in SCORINGS:
        raise ValueError(f"unknown reward scoring {scoring!r}; choose one of {', '.join(SCORINGS)}")
    return speco3_reward if scoring == "speco3" else loupe_reward
