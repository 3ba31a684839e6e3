"""The correction rule: what an expert's reject or correction becomes in sft and pairs.

An expert who rejects or corrects a trajectory gives the label L (a reject flips the
agent's verdict), optionally a reason E (the reasoning the model should have reached,
`Review.explanation`; never the review's comment, a note to other experts) and,
optionally, the index k (0-based, into `Trajectory.steps`) of the first step they judged
wrong.

The row to train on (`corrected_trajectory`: the SFT row, and the chosen side of a pair)
holds no thought that speaks for the verdict the expert overruled:
- which of the agent's zooms are kept: the steps before k, or every zoom step when no k is
  given; the steps from k on and the agent's answer are dropped. A kept zoom keeps its
  window, so its image is the same.
- what a kept zoom's thought becomes: where L overrules the agent's verdict, every kept
  thought is rewritten as a neutral statement of what the zoom is for (`neutral_thought`):
  any observation on the way to the overruled verdict may argue for it, the ones before
  the named step too. Where L agrees with the agent's verdict (a correction of the
  reasoning), the steps before k stand verbatim (the expert judged them sound); with no k
  they are rewritten too. A verbatim thought that the contradiction table
  (`agent.policies.rules.contradiction`) flags for L is rewritten all the same.
- then one final turn `<think>E</think><answer>\\boxed{L} E</answer>`; with no reason E,
  a neutral explanation from the task alone (`neutral_explanation`). Such rows have
  source `rejected` (with E: `corrected`).

The pair's rejected side (`rejected_side`) is the agent's run with the same kept steps
rewritten the same way, then the agent's own turns from where the row's kept steps end:
the prompt the two completions share is the row's, so DPO never reads a thought SFT would
not train on, and the two part at the turn the expert replaced.

The exporter checks every row it writes against the contradiction table
(`contradictions`) and refuses one that fails it, counting it in the manifest.

A reject also gives an RL label (every resolved label does).
"""

from __future__ import annotations

import dataclasses

from agent.policies.rules.contradiction import found
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


def label_p_yes(label: str) -> float:
    """The P(YES) an expert's verdict stands for: certain."""
    return 1.0 if label == "YES" else 0.0


def contradictions(traj: Trajectory, label: str | None = None) -> list[str]:
    """What the contradiction table finds in `traj`'s thoughts and explanation against its
    verdict (`label`, else the trajectory's own), read at the trajectory's P(YES) where
    it agrees with that verdict, else as certain.

    >>> t = Trajectory(id="c", task="m_giant", verdict="YES", steps=[Step(thought="Na I "
    ...     "EW 3.3 Å: strong, as in a high-gravity dwarf.", answer="YES")])
    >>> contradictions(t)
    ['as in a high-gravity dwarf']
    >>> contradictions(t, "NO")
    []
    """
    label = label or traj.verdict
    if label not in ("YES", "NO"):
        return []
    p = traj.confidence
    if p is None or (p > 0.5) != (label == "YES"):
        p = label_p_yes(label)
    parts = [s.thought for s in traj.steps] + [s.explanation or "" for s in traj.steps]
    return found(traj.task, p, "\n".join([*parts, traj.explanation or ""]))


def _kept(agent: Trajectory, wrong_step: int | None) -> list[int]:
    """The indices of the agent's steps the row keeps (module docstring)."""
    if wrong_step is None:
        return [i for i, s in enumerate(agent.steps) if s.answer is None and s.tool_call]
    if not 0 <= wrong_step < max(len(agent.steps), 1):
        raise ValueError(
            f"wrong step {wrong_step} is outside the trajectory's {len(agent.steps)} steps"
        )
    return [i for i, s in enumerate(agent.steps[:wrong_step]) if s.answer is None]


def _rewritten(
    agent: Trajectory, label: str, wrong_step: int | None
) -> tuple[list[Step], list[int]]:
    """The kept steps, each rewritten or verbatim by the rule, and their indices."""
    kept = _kept(agent, wrong_step)
    verbatim = wrong_step is not None and agent.verdict == label
    steps = []
    for i in kept:
        s = Step.from_dict(agent.steps[i].to_dict())
        if not s.raw:
            s.raw = assistant_text(s)
        if not verbatim or found(agent.task, label_p_yes(label), s.thought):
            s.thought = neutral_thought(s)
            s.raw = assistant_text(s)
        steps.append(s)
    return steps, kept


def _check(label: str) -> None:
    if label not in ("YES", "NO"):
        raise ValueError(f"label must be YES or NO, got {label!r}")


def corrected_trajectory(
    agent: Trajectory, label: str, explanation: str | None, wrong_step: int | None = None
) -> Trajectory:
    """The row an expert's reject or correction trains on (SFT row; chosen side of a pair):
    the kept zooms, rewritten by the rule (module docstring), then the expert's answer turn
    (the neutral explanation when none was given).

    >>> from agent.protocol import TOOL_NAME
    >>> call = {"name": TOOL_NAME, "arguments": {"wavelength_range": [8150, 8240],
    ...     "label": "Na I doublet"}}
    >>> t = Trajectory(id="c1", task="m_giant", verdict="YES", steps=[
    ...     Step(thought="Na I weak: a giant.", tool_call=call, raw="A"),
    ...     Step(thought="Na I weak again.", tool_call=call, raw="B"),
    ...     Step(thought="A giant.", answer="YES", raw="C")])
    >>> row = corrected_trajectory(t, "NO", None)
    >>> [s.thought for s in row.steps]  # doctest: +NORMALIZE_WHITESPACE
    ['I zoom into 8150-8240 Å to inspect the Na I doublet.',
     'I zoom into 8150-8240 Å to inspect the Na I doublet.',
     'On inspection the zoomed windows do not show the features that identify an M giant.']
    >>> [s.thought for s in corrected_trajectory(t, "NO", "Na I is strong: a dwarf.", 1).steps]
    ['I zoom into 8150-8240 Å to inspect the Na I doublet.', 'Na I is strong: a dwarf.']
    >>> [s.raw for s in corrected_trajectory(t, "YES", "TiO and weak Na I.", 2).steps[:-1]]
    ['A', 'B']
    """
    _check(label)
    text = (explanation or "").strip() or neutral_explanation(agent.task, label)
    steps, _ = _rewritten(agent, label, wrong_step)
    steps.append(final_step(label, text))
    how = "corrected" if (explanation or "").strip() else "rejected"
    return dataclasses.replace(
        agent,
        steps=steps,
        verdict=label,  # type: ignore[arg-type]
        confidence=label_p_yes(label),
        explanation=text,
        format_ok=True,
        state="done",
        error=None,
        params={**agent.params, "corrected": how},
    )


def rejected_side(agent: Trajectory, label: str, wrong_step: int | None = None) -> Trajectory:
    """The agent's run as the rejected side of a pair: its kept steps rewritten as in
    `corrected_trajectory`, then its own turns after the last kept one.

    >>> from agent.protocol import TOOL_NAME
    >>> call = {"name": TOOL_NAME, "arguments": {"wavelength_range": [1, 2]}}
    >>> t = Trajectory(id="c1", task="wd", verdict="YES", steps=[
    ...     Step(thought="broad", tool_call=call, raw="A"),
    ...     Step(thought="broader", tool_call=call, raw="B"),
    ...     Step(thought="a WD", answer="YES", raw="C")])
    >>> [(s.thought, s.raw[:7]) for s in rejected_side(t, "NO", 1).steps]
    [('I zoom into 1-2 Å.', '<think>'), ('broader', 'B'), ('a WD', 'C')]
    """
    _check(label)
    steps, kept = _rewritten(agent, label, wrong_step)
    after = (kept[-1] + 1) if kept else (wrong_step or 0)
    rest = [Step.from_dict(s.to_dict()) for s in agent.steps[after:]]
    return dataclasses.replace(agent, steps=steps + rest)
