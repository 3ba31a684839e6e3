"""The small protocol every policy (backend) implements.

A policy plays the assistant in the Spec-o3 conversation: given the episode so far it
returns the next assistant text (`<think>...</think><tool_call>...</tool_call>` or
`<think>...</think><answer>\\boxed{YES|NO} ...</answer>`). The loop parses that text exactly
as it would a model's, so the rule-based inspector and a VLM produce the same records.
`act` takes a batch so engines that batch (vLLM, HTTP concurrency) can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.spectrum import Spectrum
from agent.trajectory import Step


@dataclass
class Episode:
    """What a policy may look at when it takes its next turn."""

    candidate_id: str
    task: str
    spectrum: Spectrum
    # Spec-o3 chat so far: [{"role": ..., "content": [{"type": "text"|"image", ...}]}]
    messages: list[dict[str, Any]]
    steps: list[Step]  # parsed steps so far, with tool observations filled in
    renderer: str = "fast"
    max_turns: int = 8
    turn: int = 0  # index of the turn being asked for (0-based)


@dataclass
class Reply:
    text: str  # raw assistant text for this turn
    p_yes: float | None = None  # P(YES) when the backend can tell (logprobs, rules)
    measurements: dict[str, float] = field(default_factory=dict)
    error: str | None = None  # a backend failure (HTTP error, timeout); text may be empty


class Policy(Protocol):
    name: str  # "rules", "hf", "openai", "vllm", ...
    model_id: str | None
    renderer: str  # the renderer whose images this policy was trained on

    def act(self, episodes: list[Episode]) -> list[Reply]:
        """One assistant turn for each episode, in order. Never raises for one bad episode."""
        ...
