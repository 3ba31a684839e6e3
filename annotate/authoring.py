"""Cold-start trajectories written by experts, and the audit they pass before training.

The logic behind the Author page, free of any UI:

- `Draft` holds what an expert is writing: steps (each a zoom window with its thought),
  a verdict and an explanation. `start_draft` starts one from nothing or from an agent's
  trajectory. `add_step` zooms with the same tool, and the same renderer, the model will
  use, so the expert sees exactly the image the model will see; the step keeps the
  window, the tool call and the observation reference. Steps are edited, reordered and
  deleted by index.
- `validate` lists what stops a draft from being submitted; `to_trajectory` turns a valid
  draft into an `agent.trajectory.Trajectory` (policy "expert") whose assistant texts
  parse back exactly as a model's would.
- The audit: the author submits; a second expert (never the author) approves it or sends
  it back with comments; the author revises and resubmits, as many rounds as it takes.
  Every round's comment is kept.

`assistant_text` writes a step as the Spec-o3 assistant turn through `agent.protocol`, the one
writer of that text; exporters use it for steps that an expert, not a model, wrote.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from agent.errors import LoupeError
from agent.protocol import FORBIDDEN, TOOL_NAME, format_turn
from agent.spectrum import Spectrum
from agent.trajectory import Step, Trajectory


class AuthoringError(LoupeError, ValueError):
    """A draft operation that cannot be done; the message says why."""


def assistant_text(step: Step) -> str:
    """The Spec-o3 assistant turn for `step` (`agent.protocol.format_turn` writes it):
    `<think>` then a tool call or an answer.

    >>> s = Step(thought="Check H-beta.", tool_call={"name": TOOL_NAME,
    ...          "arguments": {"wavelength_range": [4800, 4920]}})
    >>> print(assistant_text(s))
    <think>Check H-beta.</think>
    <tool_call>
    {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800, 4920]}}
    </tool_call>
    >>> print(assistant_text(Step(thought="Broad Balmer lines.", answer="YES",
    ...                           explanation="A DA white dwarf.")))
    <think>Broad Balmer lines.</think><answer>\\boxed{YES} A DA white dwarf.</answer>
    """
    if step.answer is not None:
        return format_turn(step.thought, answer=step.answer, explanation=step.explanation or "")
    if step.tool_call is None:
        raise ValueError("a step needs a tool call or an answer")
    # The arguments as asked (4800, not 4800.0): the tool echoes what was asked.
    return format_turn(step.thought, arguments=dict(step.tool_call.get("arguments") or {}))


def final_step(label: str, explanation: str, thought: str | None = None) -> Step:
    """The closing answer turn an expert gives: `\\boxed{label}` and their explanation."""
    if label not in ("YES", "NO"):
        raise ValueError(f"verdict must be YES or NO, got {label!r}")
    step = Step(thought=(thought or explanation).strip(), answer=label, explanation=explanation)  # type: ignore[arg-type]
    step.raw = assistant_text(step)
    return step


# -- the draft ----------------------------------------------------------------------------
@dataclass
class Draft:
    """An expert's trajectory in the making. `steps` are the zoom turns, in order; the final
    answer is `verdict` + `explanation` (+ `final_thought`, the reasoning before it)."""

    candidate_id: int | None
    key: str
    task: str
    spectrum_ref: dict[str, Any] = field(default_factory=dict)
    renderer: str = "fast"
    steps: list[Step] = field(default_factory=list)
    verdict: str | None = None
    explanation: str = ""
    final_thought: str = ""
    authored_id: int | None = None  # the stored row, once saved
    author: str | None = None
    status: str = "draft"
    based_on: int | None = None  # agent trajectory id it started from


def start_draft(
    candidate: Any,
    *,
    renderer: str = "fast",
    from_trajectory: Trajectory | None = None,
    trajectory_id: int | None = None,
    author: str | None = None,
) -> Draft:
    """A new draft for `candidate` (a store `CandidateInfo`, or anything with id, key, task
    and spectrum_ref), empty or seeded with an agent trajectory's zooms and answer.

    From a trajectory, every zoom the tool answered with an image is kept with its thought
    (refused calls and malformed turns are dropped); windows are kept, the images will be
    drawn with `renderer`.
    """
    d = Draft(
        candidate_id=getattr(candidate, "id", None),
        key=str(getattr(candidate, "key", "") or getattr(candidate, "id", "")),
        task=candidate.task,
        spectrum_ref=dict(getattr(candidate, "spectrum_ref", {}) or {}),
        renderer=renderer,
        author=author,
        based_on=trajectory_id,
    )
    if from_trajectory is not None:
        for s in from_trajectory.steps:
            if s.answer is not None:
                d.verdict = s.answer
                d.explanation = (s.explanation or "").strip()
                d.final_thought = s.thought.strip()
            elif s.tool_call is not None and s.window is not None:
                args = dict(s.tool_call.get("arguments") or {})
                d.steps.append(
                    _zoom_step(s.thought, s.window, args.get("label"), s.observation_text, renderer)
                )
    return d


def _zoom_step(
    thought: str,
    window: tuple[float, float],
    label: str | None,
    text: str | None,
    renderer: str,
    asked: tuple[float, float] | None = None,
) -> Step:
    from agent.protocol import image_reference

    lo, hi = asked or window
    args: dict[str, Any] = {"wavelength_range": [_num(lo), _num(hi)]}
    if label:
        args["label"] = label
    step = Step(
        thought=(thought or "").strip(),
        tool_call={"name": TOOL_NAME, "arguments": args},
        window=(float(window[0]), float(window[1])),
        observation_text=text,
        observation_image=image_reference(renderer, window),
    )
    try:
        step.raw = assistant_text(step)
    except ValueError:
        step.raw = ""  # protocol text in a thought taken from an agent's run: validate names it
    return step


def _num(v: float) -> float | int:
    # 4800.0 is asked as 4800, as an astronomer types it; the tool echoes what was asked.
    v = float(v)
    return int(v) if v.is_integer() else round(v, 3)


def zoom_preview(draft: Draft, spectrum: Spectrum, lo: float, hi: float, label: str | None = None):
    """The tool's answer for a window (image exactly as the model will see it), or
    AuthoringError with the tool's error text. Nothing is added to the draft."""
    from agent.tool import zoom

    if lo is None or hi is None:
        raise AuthoringError("type or drag a window: both ends are needed")
    lo, hi = float(lo), float(hi)
    if lo > hi:
        lo, hi = hi, lo  # a drag from right to left
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        raise AuthoringError(f"window ({lo}, {hi}) is not a valid range")
    result = zoom(spectrum, [_num(lo), _num(hi)], label or None, renderer=draft.renderer)
    if result.error:
        raise AuthoringError(result.error)
    return result


def add_step(
    draft: Draft,
    spectrum: Spectrum,
    lo: float,
    hi: float,
    thought: str = "",
    *,
    label: str | None = None,
    index: int | None = None,
):
    """Zoom into (lo, hi) with the draft's renderer and add the step (at `index`, default the
    end). Returns the tool's result so the page can show the image. A window the tool
    refuses raises AuthoringError and adds nothing."""
    _check_text(thought, "thought")
    result = zoom_preview(draft, spectrum, lo, hi, label)
    lo, hi = sorted((float(lo), float(hi)))
    step = _zoom_step(thought, result.window, label, result.text, draft.renderer, asked=(lo, hi))
    if index is None:
        draft.steps.append(step)
    else:
        _index(draft, index, allow_end=True)
        draft.steps.insert(index, step)
    return result


def edit_step(
    draft: Draft,
    index: int,
    *,
    thought: str | None = None,
    window: tuple[float, float] | None = None,
    label: str | None = None,
    spectrum: Spectrum | None = None,
):
    """Change a step's thought and/or its window (a new window zooms again: `spectrum`
    is then needed). Returns the tool result for a new window, else None."""
    _index(draft, index)
    old = draft.steps[index]
    result = None
    if thought is not None:
        _check_text(thought, "thought")
    new_thought = old.thought if thought is None else thought
    old_label = (old.tool_call or {}).get("arguments", {}).get("label")
    new_label = old_label if label is None else (label or None)
    if window is not None:
        if spectrum is None:
            raise AuthoringError("changing a window needs the spectrum to zoom again")
        result = zoom_preview(draft, spectrum, window[0], window[1], new_label)
        asked = tuple(sorted((float(window[0]), float(window[1]))))
        draft.steps[index] = _zoom_step(
            new_thought, result.window, new_label, result.text, draft.renderer, asked=asked
        )
    else:
        args = (old.tool_call or {}).get("arguments", {})
        asked = tuple(args.get("wavelength_range") or old.window)
        text = old.observation_text
        if label is not None and new_label != old_label:
            from agent.tool import reply_text

            text = reply_text(tuple(args.get("wavelength_range") or old.window), new_label)
        draft.steps[index] = _zoom_step(
            new_thought, old.window, new_label, text, draft.renderer, asked=asked
        )
    return result


def move_step(draft: Draft, index: int, to: int) -> None:
    """Move the step at `index` so that it ends up at position `to`."""
    _index(draft, index)
    _index(draft, to)
    draft.steps.insert(to, draft.steps.pop(index))


def delete_step(draft: Draft, index: int) -> Step:
    _index(draft, index)
    return draft.steps.pop(index)


def set_answer(draft: Draft, verdict: str, explanation: str, thought: str | None = None) -> None:
    """The final verdict and explanation (and the reasoning before them)."""
    if verdict not in ("YES", "NO"):
        raise AuthoringError(f"verdict must be YES or NO, got {verdict!r}")
    _check_text(explanation, "explanation")
    if thought is not None:
        _check_text(thought, "final thought")
        draft.final_thought = thought.strip()
    draft.verdict = verdict
    draft.explanation = (explanation or "").strip()


def _index(draft: Draft, i: int, allow_end: bool = False) -> None:
    n = len(draft.steps) + (1 if allow_end else 0)
    if not isinstance(i, int) or not 0 <= i < n:
        raise AuthoringError(f"no step {i} (the draft has {len(draft.steps)} steps)")


def _check_text(text: str | None, what: str) -> None:
    for tag in FORBIDDEN:
        if tag in (text or ""):
            raise AuthoringError(f"the {what} may not contain {tag!r}")


def validate(draft: Draft, spectrum: Spectrum | None = None) -> list[str]:
    """Everything that stops this draft from being submitted (empty when it is ready).

    A final verdict YES/NO and an explanation; at least one zoom step with a thought; every
    window finite with min < max (and, given the spectrum, one the tool accepts); no text
    that would change how a turn parses.
    """
    problems = []
    if draft.verdict not in ("YES", "NO"):
        problems.append("no final verdict (YES or NO)")
    if not draft.explanation.strip():
        problems.append("no final explanation")
    if not any(s.thought.strip() for s in draft.steps):
        problems.append("no step with a thought: zoom at least once and say what it shows")
    for i, s in enumerate(draft.steps):
        w = s.window
        if w is None or not all(math.isfinite(v) for v in w) or not w[0] < w[1]:
            problems.append(f"step {i + 1}: window {w} is not a valid range")
            continue
        if not s.thought.strip():
            problems.append(f"step {i + 1}: no thought")
        if spectrum is not None:
            from agent.tool import zoom

            r = zoom(spectrum, list(w), renderer=draft.renderer)
            if r.error:
                problems.append(f"step {i + 1}: {r.error}")
    for what, text in [
        ("explanation", draft.explanation),
        ("final thought", draft.final_thought),
    ] + [(f"step {i + 1} thought", s.thought) for i, s in enumerate(draft.steps)]:
        for tag in FORBIDDEN:
            if tag in (text or ""):
                problems.append(f"{what} contains {tag!r}")
    return problems


def to_trajectory(draft: Draft, *, check: bool = True) -> Trajectory:
    """The draft as a finished `Trajectory` (policy "expert"); AuthoringError listing the
    problems when it is not valid."""
    if check:
        problems = validate(draft)
        if problems:
            raise AuthoringError("; ".join(problems))
    steps = [dataclasses.replace(s, raw=assistant_text(s)) for s in draft.steps]
    if draft.verdict in ("YES", "NO"):
        steps.append(final_step(draft.verdict, draft.explanation, draft.final_thought or None))
    return Trajectory(
        id=draft.key,
        task=draft.task,
        spectrum_ref=dict(draft.spectrum_ref),
        policy="expert",
        model=draft.author,
        renderer=draft.renderer,
        steps=steps,
        verdict=draft.verdict,  # type: ignore[arg-type]
        explanation=draft.explanation,
        confidence=None,
        format_ok=True,
        state="done",
        params={"authored_id": draft.authored_id, "based_on": draft.based_on},
    )


# -- persistence and the audit (through db.store.Store) ----------------------------------
def _stored_steps(draft: Draft) -> list[dict[str, Any]]:
    steps = [dataclasses.replace(s, raw=assistant_text(s)).to_dict() for s in draft.steps]
    if draft.verdict in ("YES", "NO"):
        steps.append(
            final_step(draft.verdict, draft.explanation, draft.final_thought or None).to_dict()
        )
    return steps


def save_draft(store: Any, draft: Draft, author: str) -> Draft:
    """Create or update the stored draft (only its author may). A trajectory sent back by
    the auditor returns to draft when its author saves it again."""
    if draft.candidate_id is None:
        raise AuthoringError("the draft is not attached to a stored candidate")
    if draft.authored_id is None:
        row = store.create_authored(
            author,
            draft.candidate_id,
            _stored_steps(draft),
            verdict=draft.verdict,
            explanation=draft.explanation,
            renderer=draft.renderer,
        )
        draft.authored_id = row.id
    else:
        row = store.update_authored(
            draft.authored_id,
            author,
            steps=_stored_steps(draft),
            verdict=draft.verdict,
            explanation=draft.explanation,
        )
    draft.author = author
    draft.status = row.status
    return draft


def load_draft(store: Any, authored_id: int) -> Draft:
    row = store.authored(authored_id)
    c = store.candidate(row.candidate_id)
    author = store.expert(row.author_id)
    t = authored_to_trajectory(row, c)
    d = start_draft(c, renderer=row.renderer, from_trajectory=t)
    d.verdict = row.verdict
    d.explanation = row.explanation or ""
    d.authored_id, d.status = row.id, row.status
    d.author = author.name if author is not None else None
    return d


def submit(store: Any, draft: Draft, author: str, spectrum: Spectrum | None = None) -> Draft:
    """Validate, save and submit for audit; AuthoringError listing the problems if invalid."""
    problems = validate(draft, spectrum)
    if problems:
        raise AuthoringError("cannot submit: " + "; ".join(problems))
    save_draft(store, draft, author)
    row = store.submit_authored(draft.authored_id, author)
    draft.status = row.status
    return draft


def audit(store: Any, authored_id: int, reviewer: str, approve: bool, comment: str | None = None):
    """A second expert's decision on a submitted trajectory: approve, or send it back with
    comments (required, so the author knows what to change). The store refuses the author
    auditing their own work."""
    if not approve and not (comment or "").strip():
        raise AuthoringError("sending a trajectory back needs a comment saying what to change")
    return store.review_authored(authored_id, reviewer, approve, comment)


@dataclass
class AuditRound:
    at: Any
    actor: str
    action: str  # create_authored / update_authored / submit_authored / approved / rejected
    comment: str | None


def audit_history(store: Any, authored_id: int) -> list[AuditRound]:
    """Every event in the trajectory's life, oldest first, with the auditors' comments."""
    events = store.audit_events(entity="authored_trajectory", entity_id=authored_id, limit=10000)
    return [AuditRound(e.at, e.actor, e.action, (e.payload or {}).get("comment")) for e in events]


def authored_to_trajectory(row: Any, candidate: Any) -> Trajectory:
    """A stored AuthoredTrajectory row as a `Trajectory` (policy "expert")."""
    steps = [Step.from_dict(d) for d in row.steps or []]
    for s in steps:
        if not s.raw:
            s.raw = assistant_text(s)
    if row.verdict in ("YES", "NO") and not (steps and steps[-1].answer is not None):
        steps.append(final_step(row.verdict, row.explanation or ""))
    return Trajectory(
        id=candidate.key,
        task=candidate.task,
        spectrum_ref=dict(candidate.spectrum_ref),
        policy="expert",
        renderer=row.renderer,
        steps=steps,
        verdict=row.verdict,
        explanation=row.explanation or "",
        format_ok=True,
        state="done",
        params={"authored_id": row.id},
    )
