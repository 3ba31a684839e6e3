"""The agent loop: global view + task -> assistant turn -> parse -> zoom -> ... -> answer.

An episode opens with Loupe's system prompt and task turn, or, for a SpecVI-Bench row, with
the row's own prompt and overview image (`agent.formats.specvi.prompt_for`).

Episodes advance in lock step so a batching policy (vLLM, HF, HTTP concurrency) gets one
batch per turn. Nothing here raises for a bad candidate, a bad reply or a refused zoom:
each ends as a recorded `Trajectory` (state "done", "max_turns" or "error"; `format_ok`;
the step's `error`). The loop knows nothing of databases or UIs.

Timing: a step's `seconds` is its share of the batched policy call (wall time / batch size)
plus the time its own tool call took, so the per-spectrum cost of a batch adds up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from agent.errors import LoupeError
from agent.formats.specvi import prompt_for
from agent.policies.base import Episode, Policy, Reply
from agent.protocol import (
    assistant_turn,
    opening_messages,
    parse_turn,
    tool_response_turn,
)
from agent.refs import CandidateRef
from agent.spectrum import Spectrum
from agent.tasks import resolve_task
from agent.trajectory import Trajectory, finish, record_observation, step_from_parsed

log = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 8  # 7 zooms + the answer, as in Spec-o3's RL

Item = CandidateRef | tuple[Spectrum, str]


def run_episode(
    spectrum: Spectrum,
    task: str,
    policy: Policy,
    max_turns: int = DEFAULT_MAX_TURNS,
    renderer: str | None = None,
) -> Trajectory:
    return run_batch([(spectrum, task)], policy, max_turns=max_turns, renderer=renderer)[0]


def run_batch(
    items: Iterable[Item],
    policy: Policy,
    max_turns: int = DEFAULT_MAX_TURNS,
    renderer: str | None = None,
    params: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """One Trajectory per item, in order. Items are CandidateRefs or (spectrum, task) pairs."""
    renderer = renderer or getattr(policy, "renderer", None) or "fast"
    max_turns = max(1, int(max_turns))
    runs: list[_Run] = []
    for item in items:
        runs.append(_start(item, policy, renderer, max_turns, params or {}))

    for turn in range(max_turns):
        active = [r for r in runs if r.traj.state == "running"]
        if not active:
            break
        for r in active:
            r.episode.turn = turn
        t0 = time.perf_counter()
        replies = _act(policy, [r.episode for r in active])
        share = (time.perf_counter() - t0) / len(active)
        for r, reply in zip(active, replies):
            _advance(r, reply, share, renderer, last_turn=turn == max_turns - 1)

    for r in runs:
        if r.traj.state == "running":  # max_turns == 0 steps taken; cannot happen, but be total
            finish(r.traj)
        # Own cost only (setup + its steps), not the time spent waiting on batch mates.
        r.traj.seconds = r.setup + sum(st.seconds for st in r.traj.steps)
    return [r.traj for r in runs]


# -- internals -------------------------------------------------------------------------
class _Run:
    __slots__ = ("traj", "episode", "setup")

    def __init__(self, traj: Trajectory, episode: Episode | None, t0: float):
        self.traj = traj
        self.episode = episode
        self.setup = time.perf_counter() - t0  # loading + global view


def _start(item: Item, policy: Policy, renderer: str, max_turns: int, params: dict) -> _Run:
    from agent.protocol import image_reference
    from agent.tool import global_view

    t0 = time.perf_counter()
    traj = Trajectory(
        id="",
        task="",
        policy=getattr(policy, "name", "") or "",
        model=getattr(policy, "model_id", None),
        renderer=renderer,
        started_at=time.time(),
        params={"max_turns": max_turns, **params},
    )
    try:
        if isinstance(item, CandidateRef):
            traj.id, traj.task = item.id, item.task
            traj.spectrum_ref = item.spectrum_ref
            traj.label = item.label if item.label in ("YES", "NO") else None
            traj.task = resolve_task(item.task)
            spectrum = item.load()
        else:
            spectrum, task = item
            traj.task = task
            traj.id = spectrum.meta.id or spectrum.meta.source or ""
            traj.spectrum_ref = {
                "path": spectrum.meta.source,
                "hdu": spectrum.meta.hdu,
                "row": spectrum.meta.row,
            }
            traj.task = resolve_task(task)
        view = global_view(spectrum, renderer=renderer)
        if view.error:  # the tool has logged a failure of its own
            raise LoupeError(f"global view failed: {view.error}")
        # the global view, re-rendered with its title
        traj.params["global_image"] = image_reference(renderer, None)
        row = prompt_for(spectrum)
    except LoupeError as exc:  # a bad file or task must not stop the batch
        return _failed(traj, exc, t0)
    except MemoryError:  # a worker's address-space cap: this file, not the batch, fails
        run = _failed(traj, MemoryError(), t0)
        traj.error = _refused_for_memory(traj)
        return run
    except Exception as exc:  # nor must a bug, but that one is logged with its traceback
        log.exception("candidate %r (%s): the episode could not start", traj.id, traj.task)
        return _failed(traj, exc, t0)

    if row is not None:
        # A SpecVI-Bench row is asked with its own prompt and overview, as it was published.
        traj.params["prompt"] = "row"
        messages = opening_messages(traj.task, view.image, row.messages, row.images)
    else:
        messages = opening_messages(traj.task, view.image)
    episode = Episode(
        candidate_id=traj.id,
        task=traj.task,
        spectrum=spectrum,
        messages=messages,
        steps=traj.steps,
        renderer=renderer,
        max_turns=max_turns,
    )
    return _Run(traj, episode, t0)


def _failed(traj: Trajectory, exc: BaseException, t0: float) -> _Run:
    traj.state = "error"
    traj.format_ok = False
    traj.error = _describe(exc)
    return _Run(traj, None, t0)


def _refused_for_memory(traj: Trajectory) -> str:
    """What a read worker says of a file past its memory limit (`ReadRefused`), said of
    this candidate's file."""
    from agent.formats.sandbox import ReadRefused, SandboxLimits

    source = (traj.spectrum_ref or {}).get("path") or traj.id
    return str(ReadRefused(source, f"needs more than {SandboxLimits().memory_mb} MB to read"))


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


def _policy_name(policy: Policy) -> str:
    return getattr(policy, "name", "") or type(policy).__name__


def _act(policy: Policy, episodes: Sequence[Episode]) -> list[Reply]:
    try:
        replies = list(policy.act(list(episodes)))
    except Exception as exc:  # the backend failed for the whole batch
        if not isinstance(exc, LoupeError):
            log.exception("policy %r failed on a batch of %d", _policy_name(policy), len(episodes))
        return [Reply(text="", error=f"policy failed: {_describe(exc)}") for _ in episodes]
    if len(replies) != len(episodes):
        msg = f"policy returned {len(replies)} replies for {len(episodes)} episodes"
        return [Reply(text="", error=msg) for _ in episodes]
    return [
        r if isinstance(r, Reply) else Reply(text="", error=f"policy returned {type(r).__name__}")
        for r in replies
    ]


def _advance(run: _Run, reply: Reply, share: float, renderer: str, last_turn: bool) -> None:
    from agent.protocol import image_reference
    from agent.tool import call_tool

    traj, ep = run.traj, run.episode
    if reply.error:
        traj.state = "error"
        traj.error = reply.error
        finish(traj)
        return
    t0 = time.perf_counter()
    parsed = parse_turn(reply.text)
    step = step_from_parsed(parsed)
    step.measurements = dict(reply.measurements or {})
    ep.messages.append(assistant_turn(parsed.raw))

    if step.tool_call is not None:
        call = step.tool_call
        try:
            result = call_tool(ep.spectrum, call["name"], call["arguments"], renderer=renderer)
            err = result.error
            text = result.error if err else (result.text or "")
            window = None if err else result.window
            image = None if err else result.image
        except Exception as exc:  # the tool must not end the run either (call_tool never raises)
            log.exception("candidate %r: the zoom tool raised", traj.id)
            err, text, window, image = _describe(exc), f"tool failed: {_describe(exc)}", None, None
        ref = image_reference(renderer, window) if image is not None else None
        record_observation(step, text, ref, window, tool_error=image is None)
        ep.messages.append(tool_response_turn(text, image))
    step.seconds = share + (time.perf_counter() - t0)
    traj.steps.append(step)

    if step.tool_call is None or last_turn:
        if step.answer is not None and reply.p_yes is not None:
            traj.confidence = _clip01(reply.p_yes)
        finish(traj)


def _clip01(p: float) -> float | None:
    try:
        p = float(p)
    except (TypeError, ValueError):
        return None
    if p != p:  # NaN
        return None
    return min(1.0, max(0.0, p))
