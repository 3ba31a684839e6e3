"""The rules policy: plays the Spec-o3 conversation from a task module's verdict and zooms."""

from __future__ import annotations

import importlib
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from agent.measure import arrays_of, coverage
from agent.policies.base import Episode, Reply
from agent.policies.rules.calibration import calibrated
from agent.policies.rules.features import Evidence, finite, measure_all
from agent.policies.rules.narration import Zoom, global_thought
from agent.protocol import format_turn
from agent.spectrum import Spectrum
from agent.tasks import TASKS, task_name

# What a task module holds; tests check every task in agent.tasks has all of it.
TASK_PARTS = ("evidence", "ZOOMS", "CALIBRATION", "HYPOTHESIS", "TARGET")


def resolve(task: str) -> str:
    return task_name(task)


@cache
def task_module(task: str) -> ModuleType:
    """The module that inspects `task`, named by the task's `inspector` in agent.tasks."""
    t = resolve(task)
    if t not in TASKS or not TASKS[t].inspector:
        known = ", ".join(n for n, d in TASKS.items() if d.inspector)
        raise ValueError(f"unknown task {task!r}; known: {known}")
    return importlib.import_module(TASKS[t].inspector)


def describe(label: str, m: dict[str, float]) -> str:
    """What the zoom window called `label` (in any task's plan) showed."""
    for name, t in TASKS.items():
        if t.inspector:
            for z in task_module(name).ZOOMS:
                if z.label == label:
                    return z.describe(m)
    return f"In the {label} window nothing was measured."


@dataclass
class Verdict:
    task: str
    p_yes: float
    evidence: Evidence
    measurements: dict[str, float]

    @property
    def answer(self) -> str:
        return "YES" if self.p_yes > 0.5 else "NO"


def inspect(spectrum: Spectrum, task: str, measurements: dict[str, float] | None = None) -> Verdict:
    """The inspector's verdict on one spectrum for one task, without the conversation."""
    mod = task_module(task)
    t = resolve(task)
    m = measurements if measurements is not None else measure_all(spectrum)
    ev = mod.evidence(m)
    return Verdict(t, calibrated(mod.CALIBRATION, ev.score, ev.coverage), ev, m)


@dataclass
class _Plan:
    zooms: list[Zoom]
    skipped: list[str]
    verdict: Verdict


class RulesPolicy:
    """Deterministic expert-style inspector (the default backend)."""

    name = "rules"
    model_id: str | None = None
    renderer = "fast"

    def __init__(self, max_zooms: int = 5, cache_size: int = 256, model: str | dict | None = None):
        self.max_zooms = max_zooms
        # A fitted inspector model (`launch.py calibrate`): a JSON file, whose path is the
        # run's model, or a store's payload, named by its tag (inspector-vN); either way the
        # run and every trajectory name the version that produced it.
        self.learned = None
        if isinstance(model, dict):
            from agent.policies.rules.learned import InspectorModel

            self.learned = InspectorModel.from_json(model)
            self.model_id = self.learned.tag
        elif model:
            from agent.policies.rules.learned import load

            self.learned = load(model)
            self.model_id = str(model)
        self._cache: OrderedDict[tuple[str, int, str], _Plan] = OrderedDict()
        self._cache_size = cache_size

    def _plan(self, ep: Episode) -> _Plan:
        key = (ep.candidate_id, id(ep.spectrum), ep.task)
        plan = self._cache.get(key)
        if plan is not None:
            return plan
        task = resolve(ep.task)
        verdict = inspect(ep.spectrum, task)
        if self.learned is not None:
            verdict = self.learned.apply(verdict)
        arr = arrays_of(ep.spectrum)
        zooms, skipped = [], []
        for z in task_module(task).ZOOMS:
            if coverage(arr, *z.window) < 0.2:
                skipped.append(f"{z.label} ({z.window[0]:.0f}-{z.window[1]:.0f} Å)")
            else:
                zooms.append(z)
        limit = max(0, min(self.max_zooms, ep.max_turns - 1))
        plan = _Plan(zooms[:limit], skipped, verdict)
        self._cache[key] = plan
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return plan

    def act(self, episodes: list[Episode]) -> list[Reply]:
        out = []
        for ep in episodes:
            try:
                out.append(self._act_one(ep))
            except Exception as exc:  # one bad spectrum never ends a batch
                out.append(Reply(text="", error=f"rules: {type(exc).__name__}: {exc}"))
        return out

    def _act_one(self, ep: Episode) -> Reply:
        plan = self._plan(ep)
        m = plan.verdict.measurements
        n_zoom = sum(1 for s in ep.steps if s.tool_call is not None)
        i = n_zoom
        prev = plan.zooms[i - 1] if 0 < i <= len(plan.zooms) else None
        if i < len(plan.zooms):
            zoom = plan.zooms[i]
            if i == 0:
                thought = global_thought(m, task_module(plan.verdict.task).HYPOTHESIS)
                if plan.skipped:
                    thought += " Not covered by the data: " + "; ".join(plan.skipped) + "."
            else:
                thought = prev.describe(m) if prev else ""
            thought += f" Next I zoom into {zoom.label}."
            keys = prev.keys if prev else []
            meas = {k: float(m[k]) for k in keys if finite(m.get(k))}
            return Reply(
                text=format_turn(thought, zoom.window, label=zoom.label),
                measurements=meas,
            )
        # Final answer.
        self._cache.pop((ep.candidate_id, id(ep.spectrum), ep.task), None)
        v = plan.verdict
        ev = v.evidence
        parts = []
        if prev:
            parts.append(prev.describe(m))
        parts += [n.rstrip(".") + "." for n in ev.notes]
        if ev.missing:
            parts.append(
                "Outside the coverage: " + ", ".join(ev.missing) + ", so I am less certain."
            )
        conf = v.p_yes if v.answer == "YES" else 1 - v.p_yes
        parts.append(f"Overall score {ev.score:+.1f}; P(YES) = {v.p_yes:.2f}.")
        target = task_module(v.task).TARGET
        key_note = ev.notes[0] if ev.notes else "no diagnostic feature measured"
        expl = (
            f"{'Consistent with' if v.answer == 'YES' else 'Not'} {target} "
            f"(confidence {conf:.2f}): {key_note}."
        )
        text = format_turn(" ".join(parts), answer=v.answer, explanation=expl)
        meas = {k: float(val) for k, val in m.items() if finite(val)}
        meas["score"] = float(ev.score)
        meas["coverage"] = float(ev.coverage)
        if self.learned is not None:
            meas["inspector_version"] = float(self.learned.version)
        return Reply(text=text, p_yes=float(v.p_yes), measurements=meas)
