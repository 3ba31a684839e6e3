"""The correction rule: what an expert's reject or correction becomes in sft and pairs.

An expert who rejects or corrects a trajectory gives the label L (a reject flips the
agent's verdict), optionally a reason E (the reasoning the model should have reached,
`Review.explanation`) and, optionally, the index k (0-based, into `Trajectory.steps`) of
the first step they judged wrong.

SFT row (`sft_correction`): no thought in it may contradict its verdict L.
- k given: the agent's steps before k, verbatim (the expert judged them sound), then one
  final turn `<think>E</think><answer>\\boxed{L} E</answer>`.
- no k: the agent's zoom calls are kept (the same windows, so the same images) but each
  thought becomes a neutral statement of what the zoom is for (`neutral_thought`), since
  any of the agent's observations may be the mistake; then the final turn.
- no reason E: the final turn's explanation is a neutral one built from the task alone
  (`neutral_explanation`: the inspected windows do / do not show what the class needs),
  which no kept thought contradicts. Such rows have source `rejected` (with E: `corrected`).

Pair (`corrected_trajectory`, chosen against the agent's run as rejected): the agent's
steps before k verbatim (all its zoom steps when k is not given), then the final turn
with L and E (or the neutral explanation). The two conversations part where the expert
says the agent went wrong, so DPO learns that turn, given the agent's own evidence.

A reject also gives an RL label (every resolved label does).
"""

from __future__ import annotations

import dataclasses

from agent.trajectory import Step, Trajectory
from annotate.authoring import assistant_text, final_step


def neutral_explanation(task: str, label: str) -> str:
    """The explanation of an unexplained reject: the expert's verdict, from the task alone.

    >>> neutral_explanation("wd", "NO")
    'On inspection the zoomed windows do not show the features that identify a white dwarf.'
    """
    from agent.tasks import get_task

    target = get_task(task).target
    head = target.split()[0].split("-")[0]
    # "an M giant", "an S-type star": a lone capital letter is read by its name
    vowel = head[:1] in "aeiouAEIOU" or (len(head) == 1 and head in "AEFHILMNORSX")
    article = "an" if vowel else "a"
    seen = "show" if label == "YES" else "do not show"
    return f"On inspection the zoomed windows {seen} the features that identify {article} {target}."


def neutral_thought(step: Step) -> str:
    """What a zoom is for, from its tool call alone (window and label), no observation.

    >>> from agent.protocol import TOOL_NAME
    >>> neutral_thought(Step(thought="TiO strong: a giant.", tool_call={"name": TOOL_NAME,
    ...     "arguments": {"wavelength_range": [7000, 7200], "label": "TiO 7054 head"}}))
    'I zoom into 7000-7200 Å to inspect the TiO 7054 head.'
    """
    args = dict((step.tool_call or {}).get("arguments") or {})
    lo, hi = (list(args.get("wavelength_range") or step.window or [0, 0]) + [0, 0])[:2]
    what = str(args.get("label") or "").strip().rstrip(".")
    where = f"{float(lo):.0f}-{float(hi):.0f} Å"
    return f"I zoom into {where} to inspect the {what}." if what else f"I zoom into {where}."


def _zoom_steps(agent: Trajectory, wrong_step: int | None) -> list[Step]:
    if wrong_step is None:
        kept = [s for s in agent.steps if s.answer is None and s.tool_call is not None]
    else:
        if not 0 <= wrong_step < max(len(agent.steps), 1):
            raise ValueError(
                f"wrong step {wrong_step} is outside the trajectory's {len(agent.steps)} steps"
            )
        kept = [s for s in agent.steps[:wrong_step] if s.answer is None]
    return [Step.from_dict(s.to_dict()) for s in kept]


def _finish(
    agent: Trajectory, steps: list[Step], label: str, explanation: str, how: str
) -> Trajectory:
    for s in steps:
        if not s.raw:
            s.raw = assistant_text(s)
    steps.append(final_step(label, explanation))
    return dataclasses.replace(
        agent,
        steps=steps,
        verdict=label,  # type: ignore[arg-type]
        explanation=explanation,
        format_ok=True,
        state="done",
        error=None,
        params={**agent.params, "corrected": how},
    )


def _check(label: str) -> None:
    if label not in ("YES", "NO"):
        raise ValueError(f"label must be YES or NO, got {label!r}")


def corrected_trajectory(
    agent: Trajectory, label: str, explanation: str | None, wrong_step: int | None = None
) -> Trajectory:
    """The agent's trajectory with an expert's correction as its final answer (the chosen
    side of a pair): the steps before `wrong_step` verbatim (every zoom step when None),
    then the expert's answer turn (the neutral explanation when none was given).

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
    _check(label)
    text = (explanation or "").strip() or neutral_explanation(agent.task, label)
    return _finish(agent, _zoom_steps(agent, wrong_step), label, text, "pair")


def sft_correction(
    agent: Trajectory, label: str, explanation: str | None, wrong_step: int | None = None
) -> Trajectory:
    """The SFT row of a reject or correction (module docstring): no kept thought contradicts
    the verdict `label`.

    >>> from agent.protocol import TOOL_NAME
    >>> from agent.trajectory import Step, Trajectory
    >>> call = {"name": TOOL_NAME, "arguments": {"wavelength_range": [8150, 8240],
    ...     "label": "Na I doublet"}}
    >>> t = Trajectory(id="c1", task="m_giant", verdict="YES", steps=[
    ...     Step(thought="Na I weak: a giant.", tool_call=call, raw="A"),
    ...     Step(thought="A giant.", answer="YES", raw="B")])
    >>> row = sft_correction(t, "NO", None)
    >>> [s.thought for s in row.steps]  # doctest: +NORMALIZE_WHITESPACE
    ['I zoom into 8150-8240 Å to inspect the Na I doublet.',
     'On inspection the zoomed windows do not show the features that identify an M giant.']
    >>> [s.thought for s in sft_correction(t, "NO", "Na I is strong: a dwarf.", 1).steps]
    ['Na I weak: a giant.', 'Na I is strong: a dwarf.']
    """
    _check(label)
    text = (explanation or "").strip() or neutral_explanation(agent.task, label)
    steps = _zoom_steps(agent, wrong_step)
    if wrong_step is None:
        for s in steps:
            s.thought = neutral_thought(s)
            s.raw = ""  # rewritten from the neutral thought
    return _finish(agent, steps, label, text, "sft")
