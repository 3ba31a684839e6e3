"""One record for one agent run over one candidate: `Trajectory`, made of `Step`s.

The same record passes between the agent loop, the store, the web app and the exporters;
the UI renders from it alone. Observation images are not stored as pixels: the zoom tool
is deterministic, so a step keeps the window and renderer and the image is re-rendered
on demand (`agent.tool.render_step`).

`to_messages()` / `from_messages()` convert a run to and from the Spec-o3 chat format (the
conversation a model sees and SFT exports hold; `agent.protocol` writes and reads it); `finish()` derives verdict, format_ok and
state from the steps the same way for the agent loop and for rebuilt conversations.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agent import protocol
from agent.protocol import ParsedTurn, Verdict

State = Literal["done", "max_turns", "error", "running"]


@dataclass
class Step:
    """One assistant turn and what the tool answered to it."""

    thought: str = ""
    # {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [a, b], "label": ...}}
    tool_call: dict[str, Any] | None = None
    # The window actually plotted (after clipping), rest-frame Angstrom; None if refused.
    window: tuple[float, float] | None = None
    observation_text: str | None = None  # the tool's text reply (or its error text)
    observation_image: str | None = None  # reference ("render:<renderer>:<lo>:<hi>" or a file path)
    answer: Verdict | None = None  # set on the final step only
    explanation: str | None = None  # the text after \boxed{} in <answer>
    raw: str = ""  # the exact assistant text, for audit and SFT export
    error: str | None = None  # format or tool error for this turn
    seconds: float = 0.0
    measurements: dict[str, float] = field(default_factory=dict)  # numbers behind the thought

    @property
    def is_final(self) -> bool:
        return self.answer is not None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["window"] = list(self.window) if self.window is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        if d.get("window") is not None:
            d["window"] = (float(d["window"][0]), float(d["window"][1]))
        return cls(**d)


@dataclass
class Trajectory:
    """A whole run: the candidate, who ran it, every step, the verdict and its confidence."""

    id: str  # candidate id
    task: str  # one of agent.tasks.TASKS
    spectrum_ref: dict[str, Any] = field(default_factory=dict)  # {"path", "hdu", "row"}
    policy: str = ""  # "rules", "hf", "openai", "vllm", "expert", ...
    model: str | None = None  # model id / checkpoint path
    renderer: str = "fast"
    steps: list[Step] = field(default_factory=list)
    verdict: Verdict | None = None
    explanation: str = ""
    confidence: float | None = None  # P(YES) in [0, 1]
    format_ok: bool = True
    state: State = "running"
    error: str | None = None
    label: Verdict | None = None  # ground truth when the catalogue carries one
    started_at: float | None = None  # unix time
    seconds: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_turns, ...
    # {"value", "quality", "source"} when the policy reported one (agent.redshift)
    redshift: dict[str, Any] | None = None

    @property
    def zooms(self) -> list[Step]:
        return [s for s in self.steps if s.tool_call is not None]

    @property
    def is_correct(self) -> bool | None:
        if self.label is None or self.verdict is None:
            return None
        return self.label == self.verdict

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["steps"] = [s.to_dict() for s in self.steps]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["steps"] = [Step.from_dict(s) for s in d.get("steps") or []]
        return cls(**d)

    # -- the Spec-o3 chat form (agent.protocol writes and reads it) -----------------------
    def to_messages(self, global_image: str | None = None) -> list[dict[str, Any]]:
        """The run as the Spec-o3 conversation; see `agent.protocol.to_messages`."""
        ref = (
            global_image
            or self.params.get("global_image")
            or protocol.image_reference(self.renderer, None)
        )
        return protocol.to_messages(self.task, self.steps, ref)

    @classmethod
    def from_messages(cls, messages: list[dict[str, Any]], **fields: Any) -> Trajectory:
        """Rebuild a run from Spec-o3 messages; `fields` set what chat does not hold (id, ...).

        Assistant texts are re-parsed exactly as the agent loop parses them, so malformed
        text becomes recorded format errors here too. Never raises on odd content.
        """
        conv = protocol.from_messages(messages)
        params = dict(fields.pop("params", {}) or {})
        if conv.global_image is not None:
            params.setdefault("global_image", conv.global_image)
        task = fields.pop("task", None)
        steps: list[Step] = []
        for parsed, obs in conv.turns:
            step = step_from_parsed(parsed)
            if obs is not None:
                record_observation(
                    step, obs.text, obs.image, obs.window, tool_error=obs.image is None
                )
            steps.append(step)
        traj = cls(
            id=fields.pop("id", ""),
            task=conv.task if task is None else task,
            steps=steps,
            params=params,
        )
        finish(traj)
        for k, v in fields.items():
            setattr(traj, k, v)
        return traj

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, default=_jsonable)

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        return cls.from_dict(json.loads(text))


def _jsonable(o: Any) -> Any:
    # numpy scalars sneak in from measurements
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# -- shared by the agent loop and from_messages, so both build identical records ---------
def step_from_parsed(parsed: ParsedTurn) -> Step:
    """A Step from a parsed assistant turn (before any tool observation)."""
    return Step(
        thought=parsed.thought,
        tool_call=None if parsed.is_answer else parsed.tool_call,
        answer=parsed.answer,
        explanation=parsed.explanation,
        raw=parsed.raw,
        error=parsed.error,
    )


def record_observation(
    step: Step,
    text: str,
    image: str | None,
    window: tuple[float, float] | None,
    tool_error: bool,
) -> None:
    """Attach the tool's reply to `step`; a refused call is also recorded as the step's error."""
    step.observation_text = text
    step.observation_image = image
    step.window = window
    if tool_error:
        msg = f"tool error: {text}"
        step.error = f"{step.error}; {msg}" if step.error else msg


def finish(traj: Trajectory, max_turns: int | None = None) -> None:
    """Derive verdict, explanation, format_ok and state from the steps.

    format_ok follows Spec-o3's reward: every turn well formed and the run ends in exactly
    one boxed YES/NO answer. A run that never answered is "max_turns" when it used its
    turns on tool calls, else "done" with a format error (the model stopped making sense).
    """
    steps = traj.steps
    last = steps[-1] if steps else None
    traj.verdict = last.answer if last is not None else None
    traj.explanation = (last.explanation or "") if last is not None else ""
    parse_ok = all(_turn_format_ok(s) for s in steps)
    answered = last is not None and last.answer is not None
    traj.format_ok = bool(parse_ok and answered)
    if last is not None and last.measurements:
        from agent.redshift import from_measurements

        traj.redshift = from_measurements(last.measurements) or traj.redshift
    if traj.state == "error":
        return
    if last is not None and last.tool_call is not None and last.answer is None:
        traj.state = "max_turns"
    else:
        traj.state = "done"


def _turn_format_ok(step: Step) -> bool:
    # A refused tool call is the tool's error, not the model's format error.
    if not step.error:
        return True
    return all(part.startswith("tool error:") for part in step.error.split("; "))
