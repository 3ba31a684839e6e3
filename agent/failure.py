"""The record of a candidate whose vetting failed outside the agent loop (a worker died, the
policy raised), shared by the batch run's process pool and its Ray pool
(`annotate.vetting.runner`, `annotate.vetting.cluster`) so both report a failure the same
way."""

from __future__ import annotations

from agent.refs import CandidateRef
from agent.trajectory import Trajectory


def task_key(task: str) -> str:
    """The canonical task name (aliases resolved); an unknown task stays as given."""
    from agent.tasks import resolve_task

    try:
        return resolve_task(task)
    except ValueError:
        return task


def failed(c: CandidateRef, policy: str, exc: BaseException) -> Trajectory:
    """An "error" trajectory for `c` naming the exception, so the run goes on and a resume
    does not retry it forever."""
    return Trajectory(
        id=c.id,
        task=task_key(c.task),
        spectrum_ref=c.spectrum_ref,
        policy=policy,
        state="error",
        format_ok=False,
        error=f"worker failed: {type(exc).__name__}: {exc}",
        label=c.label if c.label in ("YES", "NO") else None,
    )
