"""The correction rule, the one rule sft and pairs exports use for an expert's correction.

An expert who corrects a trajectory gives the label L, an explanation E and, optionally,
the index k (0-based, into `Trajectory.steps`) of the first step they judged wrong. The
corrected trajectory keeps the agent's steps before k (all its tool-call steps when k is
not given, dropping its final answer), drops step k and everything after it, and appends
one final assistant turn `<think>E</think><answer>\\boxed{L} E</answer>`. Its verdict is
L, its explanation E. A review that flips the label without an explanation gives no
correction: that candidate goes to rl only (counted under `not_exported` in the manifest).
"""

from __future__ import annotations

import dataclasses

from agent.trajectory import Step, Trajectory
from annotate.authoring import assistant_text, final_step


def corrected_trajectory(
    agent: Trajectory, label: str, explanation: str, wrong_step: int | None = None
) -> Trajectory:
    """The agent's trajectory with an expert's correction as its final answer.

    Keeps the steps before `wrong_step` (every tool-call step when it is None), drops the
    rest, and appends the expert's answer turn (see the module docstring).

    >>> from agent.protocol import TOOL_NAME
    >>> from agent.trajectory import Step, Trajectory
    >>> call = {"name": TOOL_NAME, "arguments": {"wavelength_range": [1, 2]}}
    >>> t = Trajectory(id="c1", task="wd", steps=[Step(thought="a", tool_call=call, raw="A"),
    ...     Step(thought="b", tool_call=call, raw="B"), Step(thought="c", answer="YES", raw="C")],
    ...     verdict="YES")
    >>> c = corrected_trajectory(t, "NO", "Narrow Balmer lines: an A star.", wrong_step=1)
    >>> [s.raw for s in c.steps[:-1]], c.steps[-1].answer, c.verdict
    (['A'], 'NO', 'NO')
    >>> len(corrected_trajectory(t, "NO", "x").steps)  # no index: both zooms kept
    3
    """
    if label not in ("YES", "NO"):
        raise ValueError(f"label must be YES or NO, got {label!r}")
    if not (explanation or "").strip():
        raise ValueError("a correction needs the expert's explanation")
    if wrong_step is None:
        kept = [s for s in agent.steps if s.answer is None and s.tool_call is not None]
    else:
        if not 0 <= wrong_step < max(len(agent.steps), 1):
            raise ValueError(
                f"wrong step {wrong_step} is outside the trajectory's {len(agent.steps)} steps"
            )
        kept = [s for s in agent.steps[:wrong_step] if s.answer is None]
    steps = [Step.from_dict(s.to_dict()) for s in kept]
    for s in steps:
        if not s.raw:
            s.raw = assistant_text(s)
    steps.append(final_step(label, explanation.strip()))
    return dataclasses.replace(
        agent,
        steps=steps,
        verdict=label,  # type: ignore[arg-type]
        explanation=explanation.strip(),
        format_ok=True,
        state="done",
        error=None,
        params={**agent.params, "corrected": True},
    )
