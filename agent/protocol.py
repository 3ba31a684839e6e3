"""The Spec-o3 conversation protocol: the one place its text is written and read.

What a model reads and writes, in the format the published Spec-o3 checkpoints were
trained on (Qwen2.5-VL chat, hermes-style tools):

- the tool: `TOOL_NAME`, `TOOL_SCHEMA`, and the `# Tools` block of the system prompt;
- the messages: `system_message`, `user_turn` (global view + task prompt),
  `assistant_turn`, `tool_response_turn` (`<tool_response>` image + text);
- an assistant turn: `format_turn` writes it, `parse_turn` reads it back;
- image references (`render:<renderer>:<lo>:<hi>`), which stand for re-renderable zooms;
- a whole run: `to_messages` writes a trajectory as the conversation, `from_messages`
  reads a conversation back into turns (`agent.trajectory.Trajectory` wraps both).

An assistant turn is `<think>thought</think>` followed either by
`\\n<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` (what Qwen's hermes
template writes for a tool call) or by `<answer>\\boxed{YES|NO} explanation</answer>`.

The parsing rules are Spec-o3's reward rules, applied per turn: every turn thinks inside a
balanced, non-empty set of `<think>` tags; a turn either calls the tool once inside
`<tool_call>{json}</tool_call>` or answers inside exactly one `<answer>...</answer>` holding
`\\boxed{YES}` or `\\boxed{NO}`. Anything else is a format error, recorded with its reason;
`parse_turn` never raises, whatever the text. What the turn does follows verl's rollout,
which the published checkpoints were trained in: a turn holding a readable tool call runs
the tool (a verdict written beside it is a format error, not the end of the episode); any
other turn ends it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.tasks import TASKS, get_task

Kind = Literal["tool", "answer", "invalid"]
Verdict = Literal["YES", "NO"]

# -- the tool ---------------------------------------------------------------------------
TOOL_NAME = "spectral_visualization_tool"

# The schema exactly as the published checkpoints saw it during RL: verl reads the tool
# config through a pydantic model that keeps only `type`, `description` and `enum` per
# property, so the `items` of the config's `wavelength_range` never reached the prompt.
# Key order is the model's field order, which is how `tojson` writes it into `<tools>`.
TOOL_DESCRIPTION = (
    "A tool for visualizing spectral data with wavelength range zooming capabilities."
)

TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "wavelength_range": {
                    "type": "array",
                    "description": (
                        "Wavelength range to focus on [min_wavelength, max_wavelength] in Angstroms"
                    ),
                },
                "label": {
                    "type": "string",
                    "description": "Optional label for the spectral feature being analyzed",
                },
            },
            "required": ["wavelength_range"],
        },
    },
}

# Text that may not appear inside a thought or an explanation: it would change how the turn
# parses (or, for <image>, how LLaMA-Factory counts images).
FORBIDDEN = (
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "\\boxed",
    "<image>",
)


# -- prompts ----------------------------------------------------------------------------
SYSTEM_TEXT = (
    "You are an expert spectroscopist who vets candidate rare objects in optical survey "
    "spectra. Look at the whole spectrum, zoom into the diagnostic wavelength windows with "
    "the tool, reason about what each zoom shows, and then give your verdict."
)

# Qwen2.5's hermes tool block, word for word: the models were trained on this wording.
# It sits in the system text, as Qwen's own template writes it, so the conversation
# renders the same with or without a template's `tools=` support.
TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
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
    return TOOLS_HEADER + body + TOOLS_FOOTER


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


# -- messages ---------------------------------------------------------------------------
def text_item(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_item(ref: str) -> dict[str, Any]:
    return {"type": "image", "image": ref}


def system_message() -> dict[str, Any]:
    return {"role": "system", "content": [text_item(system_prompt())]}


def user_turn(task: str, global_image: str) -> dict[str, Any]:
    """The first user turn: the global view, then the task prompt."""
    return {"role": "user", "content": [image_item(global_image), text_item(task_prompt(task))]}


# What verl's chat template writes as the system text when a prompt has no system message.
DEFAULT_SYSTEM = "You are a helpful assistant."


def opening_messages(
    task: str,
    global_image: Any,
    prompt: Sequence[dict[str, Any]] | None = None,
    images: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """The system message and first user turn of an episode.

    Without `prompt`: Loupe's system prompt and task turn (`system_message`, `user_turn`).
    With the chat messages a SpecVI-Bench row carries: those messages as verl rendered them,
    `<image>` placeholders replaced in order by `images` (then `global_image`), and the
    `# Tools` block after the row's system text (verl's default text when it has none).

    >>> m = opening_messages("cv", "G", [{"role": "user", "content": "<image>Is this a CV?"}])
    >>> m[0]["content"][0]["text"].startswith(DEFAULT_SYSTEM + "\\n\\n# Tools")
    True
    >>> m[1]["content"]
    [{'type': 'image', 'image': 'G'}, {'type': 'text', 'text': 'Is this a CV?'}]
    """
    if not prompt:
        return [system_message(), user_turn(task, global_image)]
    pool = [*images, global_image]
    system_text, out = DEFAULT_SYSTEM, []
    for message in prompt:
        role = message.get("role")
        text = "".join(message_texts(message))
        if role == "system":
            system_text = text
            continue
        content: list[dict[str, Any]] = []
        for i, piece in enumerate(text.split("<image>")):
            if i:
                content.append(image_item(pool.pop(0) if pool else global_image))
            if piece:
                content.append(text_item(piece))
        out.append({"role": role, "content": content})
    if "<tools>" not in system_text:
        system_text += "\n\n" + tools_block()
    return [{"role": "system", "content": [text_item(system_text)]}, *out]


def assistant_turn(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [text_item(text)]}


def tool_response_turn(text: str, image: Any | None) -> dict[str, Any]:
    """A tool result as Spec-o3 returns it: a user turn `<tool_response>` image + text.

    The reply text follows the image directly, as verl's rollout rendered it
    (`<|vision_end|>Generated ...`, no newline between them).

    >>> [i.get("text", "<image>") for i in tool_response_turn("Done.", "img")["content"]]
    ['<tool_response>\\n', '<image>', 'Done.\\n</tool_response>']
    """
    content = [text_item("<tool_response>\n")]
    if image is not None:
        content.append(image_item(image))
    content.append(text_item(text + "\n</tool_response>"))
    return {"role": "user", "content": content}


# -- image references -------------------------------------------------------------------
def image_reference(renderer: str, window: tuple[float, float] | None) -> str:
    """Reference to a re-renderable image: `render:<renderer>:<lo>:<hi>` for a zoom and
    `render:<renderer>:global` for the global view.

    Numbers are written with repr so the reference gives back the exact window.

    >>> image_reference("fast", (4800, 4920.5))
    'render:fast:4800.0:4920.5'
    """
    if window is None:
        return f"render:{renderer}:global"
    return f"render:{renderer}:{float(window[0])!r}:{float(window[1])!r}"


def parse_reference(ref: Any) -> tuple[str, tuple[float, float] | None] | None:
    """(renderer, window) from an image reference (window None for the global view);
    None when `ref` is not a render reference (e.g. a file path).

    >>> parse_reference("render:fast:4800.0:4920.5")
    ('fast', (4800.0, 4920.5))
    """
    if not isinstance(ref, str) or not ref.startswith("render:"):
        return None
    parts = ref.split(":")
    if len(parts) == 3 and parts[2] == "global" and parts[1]:
        return parts[1], None
    if len(parts) != 4 or not parts[1]:
        return None
    try:
        lo, hi = float(parts[2]), float(parts[3])
    except ValueError:
        return None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    return parts[1], (lo, hi)


# -- writing an assistant turn ----------------------------------------------------------
def think_block(thought: str) -> str:
    """`<think>thought</think>`, the thought stripped of surrounding whitespace."""
    return f"<think>{thought.strip()}</think>"


def tool_call_block(name: str | None, arguments: dict[str, Any] | str | None) -> str:
    """The hermes tool-call block: `\\n<tool_call>\\n{json}\\n</tool_call>`.

    `arguments` given as a JSON string (OpenAI style) is decoded first; a string that is
    not JSON is kept as a string, so the turn reads back with a format error.

    >>> print(tool_call_block("t", '{"x": 1}').strip())
    <tool_call>
    {"name": "t", "arguments": {"x": 1}}
    </tool_call>
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"\n<tool_call>\n{body}\n</tool_call>"


def answer_block(answer: str, explanation: str = "") -> str:
    """`<answer>\\boxed{YES|NO} explanation</answer>`."""
    expl = (explanation or "").strip()
    return f"<answer>\\boxed{{{answer}}}{' ' + expl if expl else ''}</answer>"


def format_turn(
    thought: str,
    window: tuple[float, float] | None = None,
    *,
    answer: str | None = None,
    explanation: str = "",
    label: str | None = None,
    arguments: dict[str, Any] | None = None,
) -> str:
    """The one way an assistant turn is written: `<think>` then a tool call or an answer.

    A zoom gives `window` (rest-frame Angstrom) and an optional `label`, or the tool's
    `arguments` as they are; a final turn gives `answer` ("YES"/"NO") and `explanation`.
    Raises ValueError for a turn that would not read back as written: neither or both of
    a call and an answer, or protocol tags inside the thought or the explanation.

    >>> print(format_turn("Check H-beta.", (4800, 4920), label="H-beta"))
    <think>Check H-beta.</think>
    <tool_call>
    {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800.0, 4920.0], "label": "H-beta"}}
    </tool_call>
    >>> format_turn("Broad Balmer lines.", answer="YES", explanation="A DA white dwarf.")
    '<think>Broad Balmer lines.</think><answer>\\\\boxed{YES} A DA white dwarf.</answer>'
    """
    for what, text in (("thought", thought), ("explanation", explanation)):
        bad = [tag for tag in FORBIDDEN if tag in (text or "")]
        if bad:
            raise ValueError(f"the {what} may not contain {', '.join(bad)}")
    is_call = window is not None or arguments is not None
    if answer is not None:
        if is_call:
            raise ValueError("a turn either calls the tool or answers, not both")
        if answer not in ("YES", "NO"):
            raise ValueError(f"answer must be YES or NO, got {answer!r}")
        return think_block(thought) + answer_block(answer, explanation)
    if not is_call:
        raise ValueError("a turn needs a window (or tool arguments) or an answer")
    if arguments is None:
        lo, hi = window  # type: ignore[misc]
        arguments = {"wavelength_range": [float(lo), float(hi)]}
        if label is not None:
            arguments["label"] = label
    return think_block(thought) + tool_call_block(TOOL_NAME, arguments)


# -- reading an assistant turn ----------------------------------------------------------
# The answer block and the boxed verdict, read as the published reward reads them (a box
# holds everything up to its first `}`). `training.rewards` scores with these patterns and
# `agent.confidence` finds the verdict's position with `BOXED_OPEN`.
ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
BOXED_OPEN = re.compile(r"\\boxed\{\s*")
BOXED = re.compile(r"\\boxed\{([^}]*)\}")
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TOOL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FIRST_TAG = re.compile(r"<(?:think|/think|tool_call|/tool_call|answer|/answer)>")


@dataclass
class ParsedTurn:
    raw: str
    thought: str = ""
    tool_call: dict[str, Any] | None = None  # {"name": str, "arguments": dict}
    answer: Verdict | None = None
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

    @property
    def window(self) -> tuple[float, float] | None:
        """The requested `wavelength_range` of a tool call, when it is two numbers."""
        if self.tool_call is None:
            return None
        rng = self.tool_call.get("arguments", {}).get("wavelength_range")
        if isinstance(rng, list | tuple) and len(rng) == 2:
            try:
                return (float(rng[0]), float(rng[1]))
            except (TypeError, ValueError):
                return None
        return None


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

    # A decodable tool call runs the tool, whatever else the turn holds: verl's rollout ends
    # an episode only on a turn without one, so a `\\boxed{}` or `<answer>` written beside a
    # call did not stop the published model either.
    calls = _TOOL.findall(text)
    decoded = [_decode_call(c) for c in calls]
    call = next((c for c, _ in decoded if c is not None), None)  # verl skips undecodable ones
    problem = next((p for _, p in decoded if p), None)
    a_open, a_close = text.count("<answer>"), text.count("</answer>")
    boxed_anywhere = BOXED.findall(text)
    if call is not None:
        if len(calls) > 1:
            turn.errors.append(
                f"{len(calls)} tool calls in one turn; only the first readable one was run"
            )
        if problem:
            turn.errors.append(problem)
        if a_open or a_close:
            turn.errors.append("an <answer> in a turn that calls the tool; the tool was run")
        elif boxed_anywhere:
            turn.errors.append(
                "a \\boxed{} verdict in a turn that calls the tool; the tool was run"
            )
        turn.tool_call = call
        return

    # <answer>: a turn that opens or closes one, or boxes a verdict, is a final turn.
    answers = ANSWER_BLOCK.findall(text)
    if a_open or a_close or boxed_anywhere:
        turn.is_answer = True
        if a_open != 1 or a_close != 1 or len(answers) != 1:
            turn.errors.append(
                f"need exactly one <answer>...</answer> ({a_open} open, {a_close} closed)"
            )
        body = answers[-1] if answers else ""
        boxed = BOXED.search(body)
        if boxed is None:
            if answers:
                turn.errors.append("no \\boxed{} inside <answer>")
            boxed = BOXED.search(text)  # Spec-o3's fallback: a verdict boxed elsewhere
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
            turn.errors.append(
                f"a tool call that could not be run ({problem or 'unclosed <tool_call>'}) "
                "and an answer in one turn; the answer was taken"
            )
        return

    # <tool_call>: exactly one JSON object with a name and an arguments object.
    if not calls:
        if "<tool_call>" in text:
            turn.errors.append("unclosed <tool_call>")
        else:
            turn.errors.append("neither a tool call nor an <answer>")
        return
    if len(calls) > 1:
        turn.errors.append(
            f"{len(calls)} tool calls in one turn; only the first readable one was run"
        )
    turn.errors.append(problem or "tool call could not be read")


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


# -- whole conversations ----------------------------------------------------------------
class StepLike(Protocol):
    """What `to_messages` reads from a step (`agent.trajectory.Step` has it)."""

    raw: str
    tool_call: dict[str, Any] | None
    answer: str | None
    observation_text: str | None
    observation_image: str | None


def to_messages(task: str, steps: Iterable[StepLike], global_image: str) -> list[dict[str, Any]]:
    """A run as the Spec-o3 conversation (Qwen2.5-VL chat, hermes tools).

    system + `# Tools` block; user: global view image + task prompt; then per step the
    assistant's raw text and, after a tool call, a user turn `<tool_response>` image +
    text `</tool_response>`. Images are references, which `agent.tool` renders on demand.
    """
    messages = [system_message(), user_turn(task, global_image)]
    for step in steps:
        messages.append(assistant_turn(step.raw))
        if step.tool_call is not None and step.answer is None:
            messages.append(tool_response_turn(step.observation_text or "", step.observation_image))
    return messages


@dataclass
class Observation:
    """The tool's reply to a turn as a conversation holds it."""

    text: str
    image: Any | None  # the image reference, None when the tool refused
    window: tuple[float, float] | None  # from a render reference, else None


@dataclass
class Conversation:
    """A Spec-o3 conversation read back: the task, the global view and the turns."""

    task: str
    global_image: Any | None
    turns: list[tuple[ParsedTurn, Observation | None]]


def from_messages(messages: Sequence[Any]) -> Conversation:
    """Read Spec-o3 messages back into parsed turns, each with the tool reply after it.

    Assistant texts are parsed exactly as the agent loop parses them, so malformed text
    becomes recorded format errors here too. The task is the one whose prompt the first
    user turn holds ("" when none). Never raises on odd content.
    """
    msgs = [m for m in messages if isinstance(m, dict)]
    task, gimg = "", None
    users = [m for m in msgs if m.get("role") == "user"]
    if users:
        first_text = "".join(message_texts(users[0]))
        gimg = next(iter(message_images(users[0])), None)
        task = next((t for t in TASKS if task_prompt(t) in first_text), "")
    turns: list[tuple[ParsedTurn, Observation | None]] = []
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m.get("role") == "assistant":
            parsed = parse_turn("".join(message_texts(m)))
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            obs = None
            if (
                not parsed.is_answer
                and parsed.tool_call is not None
                and nxt is not None
                and nxt.get("role") in ("user", "tool")
                and "<tool_response>" in "".join(message_texts(nxt))
            ):
                obs = _observation(nxt)
                i += 1
            turns.append((parsed, obs))
        i += 1
    return Conversation(task=task, global_image=gimg, turns=turns)


def _observation(message: dict[str, Any]) -> Observation:
    imgs = message_images(message)
    image = imgs[0] if imgs else None
    content = message.get("content")
    items = content if isinstance(content, list) else []
    at = next((i for i, item in enumerate(items) if _is_image(item)), None)
    if at is not None:
        # The reply is the text after the image (`tool_response_turn` puts nothing between
        # them), so a reply that itself begins with a newline keeps it.
        text = "".join(message_texts({"content": items[at + 1 :]}))
        text = text.rsplit("</tool_response>", 1)[0]
    else:
        text = "".join(message_texts(message))
        text = text.replace("<tool_response>", "", 1).rsplit("</tool_response>", 1)[0]
        text = text[1:] if text.startswith("\n") else text
    text = text[:-1] if text.endswith("\n") else text
    window = None
    if image is not None:
        ref = parse_reference(image)
        window = ref[1] if ref else None
    return Observation(text=text, image=image, window=window)


def message_texts(message: dict[str, Any]) -> list[str]:
    """The text parts of a chat message (string content or typed items)."""
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    out = []
    for item in content:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and item.get("type", "text") == "text" and "text" in item:
            out.append(str(item["text"]))
    return out


def message_images(message: dict[str, Any]) -> list[Any]:
    """The image parts of a chat message, in order."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [item.get("image") for item in content if _is_image(item)]


def _is_image(item: Any) -> bool:
    return isinstance(item, dict) and (item.get("type") == "image" or "image" in item)
