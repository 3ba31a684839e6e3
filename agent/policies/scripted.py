"""`scripted`: replays given assistant texts. For tests and for replaying recorded runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent.policies.base import Episode, Reply

Script = Sequence[str | Reply]


class ScriptedPolicy:
    """Turn `n` of an episode gets `script[n]` (or `scripts[candidate_id][n]`).

    `script` may also be a callable `(episode) -> str | Reply`. Past the end of a script the
    last entry repeats, so a script of tool calls runs an episode to its turn limit.
    """

    name = "scripted"

    def __init__(
        self,
        script: Script | Callable[[Episode], str | Reply] | None = None,
        scripts: dict[str, Script] | None = None,
        renderer: str = "fast",
        model_id: str | None = None,
        p_yes: float | None = None,
    ):
        self.script = script
        self.scripts = scripts or {}
        self.renderer = renderer
        self.model_id = model_id
        self.p_yes = p_yes
        self.calls = 0  # number of act() batches, for tests of batching

    def act(self, episodes: list[Episode]) -> list[Reply]:
        self.calls += 1
        return [self._one(ep) for ep in episodes]

    def _one(self, ep: Episode) -> Reply:
        script = self.scripts.get(ep.candidate_id, self.script)
        if script is None:
            return Reply(text="", error=f"no script for {ep.candidate_id!r}")
        if callable(script):
            out = script(ep)
        elif len(script) == 0:
            out = ""
        else:
            out = script[min(ep.turn, len(script) - 1)]
        if isinstance(out, Reply):
            return out
        return Reply(text=out, p_yes=self.p_yes)
