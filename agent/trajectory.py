"""One record for one agent run over one candidate: `Trajectory`, made of `Step`s.

The same record passes between the agent loop, the store, the web app and the exporters;
the UI renders from it alone. Observation images are not stored as pixels: the zoom tool
is deterministic, so a step keeps the window and renderer and the image is re-rendered
on demand (`agent.tool.render_step`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["YES", "NO"]
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
