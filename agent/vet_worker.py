"""What a vet worker (`agent.formats.sandbox.vet_pool`) runs: one candidate vetted whole,
its file read and judged in the worker, only the trajectory sent back.

Apart from `agent.formats.sandbox` because the loop it runs reads through the sandbox's
names (a file past a limit is said as a read worker says it)."""

from __future__ import annotations

from typing import Any

# Policies a vet worker has built, by their settings: a worker vets many candidates, and a
# policy (a model's weights) is built once per worker, not once per candidate.
_POLICIES: dict[str, Any] = {}


def vet_one(ref: Any, policy: str, kwargs: dict[str, Any], max_turns: int,
            renderer: str | None, params: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Vet one candidate (read, zoom, answer) and return its trajectory as a dict: what a
    vet worker runs for an untrusted file, so neither the file nor what the agent makes of
    it is ever held by the server."""
    from agent.loop import run_batch
    from agent.policies import get_policy

    key = repr((policy, sorted(kwargs.items())))
    if key not in _POLICIES:
        _POLICIES.clear()  # one policy at a time: another's weights are let go
        _POLICIES[key] = get_policy(policy, **kwargs)
    got = run_batch([ref], _POLICIES[key], max_turns=max_turns, renderer=renderer, params=params)
    return got[0].to_dict()
