"""Raw assistant text -> one parsed turn. Never raises, whatever the text.

The format rules are Spec-o3's reward rules, applied per turn: every turn thinks inside a
balanced, non-empty set of `<think>` tags; a turn either calls the tool once inside
`<tool_call>{json}</tool_call>` or answers inside exactly one `<answer>...</answer>` holding
`\\boxed{YES}` or `\\boxed{NO}`. Anything else is a format error, recorded with its reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["tool", "answer", "invalid"]

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TOOL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_FIRST_TAG = re.compile(r"<(?:think|/think|tool_call|/tool_call|answer|/answer)>")


@dataclass
class ParsedTurn:
    raw: str
    thought: str = ""
    tool_call: dict[str, Any] | None = None  # {"name": str, "arguments": dict}
    answer: Literal["YES", "NO"] | None = None
    explanation: str | None = None
    is_answer: bool = False  # the turn ends the episode (it tried to answer)
    errors: list[str] = field(default_factory=list)  # format errors, in order found

    @property
    def kind(self) -> Kind:
        if self.is_answer:
            return "answer"
        if self.tool_call is not None:
            return "tool"
        return "invalid"

    @property
    def format_ok(self) -> bool:
        return not self.errors

    @property
    def error(self) -> str | None:
        return "; ".join(self.errors) if self.errors else None


def parse_turn(text: Any) -> ParsedTurn:
    """Parse one assistant turn. `text` may be anything; non-strings are format errors."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    # Strip lone surrogates and NULs so the record stays JSON/DB safe.
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    turn = ParsedTurn(raw=text)
    try:
        _parse_into(turn, text)
    except Exception as exc:  # a parser bug must never end a run; record it instead
        turn.errors.append(f"unparseable output ({type(exc).__name__}: {exc})")
        turn.is_answer = False
        turn.tool_call = None
    return turn


def _parse_into(turn: ParsedTurn, text: str) -> None:
    if not text.strip():
        turn.errors.append("empty output")
        return

    # <think>: at least one pair, balanced.
    n_open, n_close = text.count("<think>"), text.count("</think>")
    thoughts = [t.strip() for t in _THINK.findall(text)]
    if n_open == 0 and n_close == 0:
        turn.errors.append("missing <think>")
        m = _FIRST_TAG.search(text)
        turn.thought = (text[: m.start()] if m else text).strip()
    elif n_open != n_close:
        turn.errors.append(f"unbalanced <think> tags ({n_open} open, {n_close} closed)")
        turn.thought = "\n".join(thoughts) if thoughts else _after_open_think(text)
    else:
        turn.thought = "\n".join(thoughts)

    # <answer>: a turn that opens or closes one, or boxes a verdict, is a final turn.
    a_open, a_close = text.count("<answer>"), text.count("</answer>")
    answers = _ANSWER.findall(text)
    boxed_anywhere = _BOXED.findall(text)
    if a_open or a_close or boxed_anywhere:
        turn.is_answer = True
        if a_open != 1 or a_close != 1 or len(answers) != 1:
            turn.errors.append(
                f"need exactly one <answer>...</answer> ({a_open} open, {a_close} closed)"
            )
        body = answers[-1] if answers else ""
        boxed = _BOXED.search(body)
        if boxed is None:
            if answers:
                turn.errors.append("no \\boxed{} inside <answer>")
            boxed = _BOXED.search(text)  # Spec-o3's fallback: a verdict boxed elsewhere
            explanation_src = body.strip() if answers else None
        else:
            explanation_src = body[boxed.end() :].strip()
        if boxed is not None:
            verdict = boxed.group(1).strip().strip(".").strip().upper()
            if verdict in ("YES", "NO"):
                turn.answer = verdict  # type: ignore[assignment]
            else:
                turn.errors.append(f"\\boxed{{{boxed.group(1)[:40]}}} is not YES or NO")
        turn.explanation = explanation_src
        if "<tool_call>" in text:
            turn.errors.append("a tool call and an answer in one turn; the tool call was ignored")
        return

    # <tool_call>: exactly one JSON object with a name and an arguments object.
    calls = _TOOL.findall(text)
    if not calls:
        if "<tool_call>" in text:
            turn.errors.append("unclosed <tool_call>")
        else:
            turn.errors.append("neither a tool call nor an <answer>")
        return
    if len(calls) > 1:
        turn.errors.append(f"{len(calls)} tool calls in one turn; only the first was run")
    call, problem = _decode_call(calls[0])
    if problem:
        turn.errors.append(problem)
    turn.tool_call = call


def _after_open_think(text: str) -> str:
    i = text.find("<think>")
    if i < 0:
        return ""
    rest = text[i + len("<think>") :]
    m = _FIRST_TAG.search(rest)
    return (rest[: m.start()] if m else rest).strip()


# Strict JSON: NaN/Infinity and overflowing numbers would make the record unserialisable.
def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _decode_call(body: str) -> tuple[dict[str, Any] | None, str | None]:
    body = body.strip()
    try:
        obj = json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        return None, f"tool call is not valid JSON ({str(exc)[:80]})"
    if not isinstance(obj, dict):
        return None, "tool call is not a JSON object"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, "tool call has no function name"
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments as a JSON string
        try:
            args = json.loads(args, parse_constant=_reject_constant, parse_float=_finite_float)
        except (ValueError, RecursionError):
            return None, "tool call arguments are not valid JSON"
    if not isinstance(args, dict):
        return None, "tool call arguments are not a JSON object"
    return {"name": name, "arguments": args}, None


# -- confidence from token probabilities -----------------------------------------------
_VERDICT_POS = re.compile(r"<answer>.*?\\boxed\{\s*", re.DOTALL)
_VERDICT_ANY = re.compile(r"\\boxed\{\s*")


def verdict_char_index(text: str) -> int | None:
    """Index in `text` of the first character of the boxed verdict (YES/NO), or None.

    The token generated at this character is where a model decided its answer; backends
    read P(YES) from their token probabilities there.
    """
    for pattern in (_VERDICT_POS, _VERDICT_ANY):
        found = list(pattern.finditer(text))
        m = found[-1] if found else None  # the last: the verdict that counts is the final one
        if m is not None and m.end() < len(text) and text[m.end()].upper() in "YN":
            return m.end()
    return None


def yes_share(prefix: str, logprobs: dict[str, float]) -> float | None:
    """P(YES) / (P(YES) + P(NO)) from candidate tokens at the verdict position.

    `logprobs` maps token strings to log-probabilities (the top-k a backend returns);
    `prefix` is the part of the chosen token before the verdict (often "" or "{"). A token
    counts for YES when, after the prefix, it begins a case variant of YES ("Y", "YES",
    "Yes", " yes"), likewise for NO. None when neither side has any mass.
    """
    import math

    yes = no = 0.0
    for tok, lp in logprobs.items():
        if not isinstance(tok, str) or not tok.startswith(prefix):
            continue
        rest = tok[len(prefix) :].strip().upper()
        if not rest or lp is None or not math.isfinite(lp):
            continue
        if "YES".startswith(rest[:3]):
            yes += math.exp(lp)
        elif "NO".startswith(rest[:2]) and not rest.startswith("NON"):
            no += math.exp(lp)
    if yes + no <= 0.0:
        return None
    return yes / (yes + no)
