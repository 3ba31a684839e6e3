"""The rules policy: plays the Spec-o3 conversation from a task module's verdict and zooms."""

from __future__ import annotations

import importlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

from agent import redshift
from agent.measure import arrays_of, coverage
from agent.policies.base import Episode, Reply
from agent.policies.rules.calibration import VETO_CAP, calibrated, calibration_input
from agent.policies.rules.contradiction import HEDGE_HIGH, HEDGE_LOW
from agent.policies.rules.features import (
    ANCHORS,
    Evidence,
    Item,
    feature_of,
    finite,
    measure_all,
)
from agent.policies.rules.narration import Zoom, global_thought
from agent.protocol import format_turn
from agent.redshift import NONE, Redshift
from agent.spectrum import Spectrum
from agent.tasks import TASKS, task_name

log = logging.getLogger(__name__)

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
class Reading:
    """What the rules read in one spectrum for one task: P(YES), the evidence behind it and
    the windows drawn (the answer, YES or NO, is `protocol.Verdict`)."""

    task: str
    p_yes: float
    evidence: Evidence
    measurements: dict[str, float]
    zooms: list[Zoom] = field(default_factory=list)  # the windows drawn, in order
    skipped: list[str] = field(default_factory=list)  # plan windows the data does not cover
    redshift: Redshift = NONE
    doubt: str = ""  # why the spectrum cannot tell, when it cannot
    capped: str = ""  # why P(YES) was held at VETO_CAP, when it was
    correction: str = ""  # what a fitted inspector model (`launch.py calibrate`) changed
    # What the calibration read: the score after any cap, shrunk by noise and by missing
    # coverage. A fitted model reads the same, so it cannot undo either.
    x: float = 0.0

    @property
    def answer(self) -> str:
        return "YES" if self.p_yes > 0.5 else "NO"


def inspect(
    spectrum: Spectrum,
    task: str,
    measurements: dict[str, float] | None = None,
    max_zooms: int = 5,
) -> Reading:
    """The inspector's verdict on one spectrum for one task, without the conversation.

    The evidence is restricted to what the zoom plan draws: an item whose feature lies in no
    drawn window is set aside (`evidence.unused`) and counts for nothing.
    """
    mod = task_module(task)
    t = resolve(task)
    m = measurements if measurements is not None else measure_all(spectrum)
    arr = arrays_of(spectrum)
    z = getattr(m, "redshift", None) or redshift.estimate(spectrum, arr)
    ev = mod.evidence(m)
    if measured_away(z):
        for item in [i for i in ev.items if "redshift" not in i.keys]:
            ev.items.remove(item)
            ev.at_rest.append(item)
    zooms, skipped = plan_zooms(mod.ZOOMS, ev, arr, z, max_zooms)
    for item in list(ev.items):
        if not all(
            any(lo <= a <= hi for lo, hi in (zz.window for zz in zooms)) for a in item.anchors()
        ):
            ev.drop(item)
    p, doubt, capped, x = verdict_probability(mod.CALIBRATION, ev, m)
    return Reading(t, p, ev, m, zooms, skipped, z, doubt, capped, x=x)


def measured_away(z: Redshift) -> bool:
    """Emission lines or a template put the spectrum at an extragalactic redshift."""
    return z.extragalactic and z.source in ("emission lines", "cross-correlation")


def say_window(zoom: Zoom, v: Reading) -> str:
    """What a window showed: its own sentence, or for a spectrum measured at an extragalactic
    redshift, that a star's reading at rest does not apply there."""
    z = v.redshift
    if not measured_away(z) or "redshift" in zoom.keys:
        return zoom.describe(v.measurements)
    lo, hi = (w / (1.0 + z.z) for w in zoom.window)
    return (
        f"At z = {z.z:.3f} this window holds the {z.kind}'s rest-frame {lo:.0f}-{hi:.0f} Å: "
        f"what a star at rest would show here ({zoom.label}) does not apply, so I read "
        "nothing from it."
    )


def verdict_probability(
    constants: tuple[float, float], ev: Evidence, m: dict[str, float]
) -> tuple[float, str, str, float]:
    """P(YES) from the evidence items, why the spectrum cannot tell (if so), why P(YES)
    was capped (if it was), and the calibration's input."""
    snr = m.get("snr")
    score, capped = ev.score, ""
    against = ev.vetoes()
    if against and score > 0.75 * min(i.points for i in against):
        # What speaks for the target cannot outweigh a decisive discriminant against it.
        score = 0.75 * min(i.points for i in against)
        capped = f"a decisive reading speaks against it ({against[0].note})"
    if ev.required and not any(i.points > 0 and set(i.keys) & set(ev.required) for i in ev.items):
        if score > -1.0:
            score = -1.0
            capped = "none of the readings a YES must rest on speaks for it"
    # Below SNR ~7 per pixel every measured line is partly noise: the evidence shrinks
    # towards the task's prior (how rare the target is among candidates), not towards even
    # odds, which would call a noisy ordinary star a coin toss.
    trust = 1.0 if not finite(snr) else min(1.0, max(0.0, (snr - 3.0) / 4.0))
    x = calibration_input(ev.prior + (score - ev.prior) * trust, ev.coverage)
    if ev.undecided and not capped:
        # The reading the answer turns on cannot decide it: the answer may lean no further
        # from even odds than the task's base rate does, on either side (a fitted model
        # reads this x too, so it cannot make the can't-tell answer confident either).
        x_prior = calibration_input(ev.prior, ev.coverage)
        x = min(max(x, -abs(x_prior)), abs(x_prior))
    p = calibrated(constants, x)
    doubt = ""
    if ev.undecided and not capped:
        doubt = ev.undecided
    elif trust < 1.0:
        doubt = f"the spectrum is noisy (SNR ~{snr:.0f} per pixel)"
    elif ev.coverage < 0.5:
        doubt = "most of the diagnostic windows are missing or unreliable"
    if capped:
        p = min(p, VETO_CAP)
    return p, doubt, capped, x


def _shows(window: tuple[float, float], item: Item) -> bool:
    return any(window[0] <= a <= window[1] for a in item.anchors())


def plan_zooms(
    task_zooms: list[Zoom],
    ev: Evidence,
    arr,
    z: Redshift,
    limit: int,
) -> tuple[list[Zoom], list[str]]:
    """The windows to draw: those that show the weightiest evidence first, up to `limit`.

    Every item of evidence needs its feature drawn; an item no planned window shows gets a
    window of its own. Windows the data does not cover are skipped (and said so).
    """
    plan: list[Zoom] = []
    if z.source in ("emission lines", "cross-correlation") and z.extragalactic and z.lines:
        plan.append(redshift_zoom(z))
    plan += list(task_zooms)
    for item in ev.items:
        if item.points and item.anchors() and not any(_shows(zz.window, item) for zz in plan):
            plan.append(item_zoom(item))
    covered, skipped = [], []
    for zz in plan:
        if coverage(arr, *zz.window) < 0.2:
            skipped.append(f"{zz.label} ({zz.window[0]:.0f}-{zz.window[1]:.0f} Å)")
        else:
            covered.append(zz)
    weight = {
        id(zz): sum(abs(i.points) for i in ev.items if _shows(zz.window, i)) for zz in covered
    }
    order = sorted(range(len(covered)), key=lambda k: (-weight[id(covered[k])], k))
    keep = set(order[: max(0, limit)])
    return [zz for k, zz in enumerate(covered) if k in keep], skipped


def redshift_zoom(z: Redshift) -> Zoom:
    name, w = z.lines[0]
    half = max(60.0, 0.03 * w)
    if z.source == "cross-correlation":
        what = redshift.TEMPLATE_LABELS.get(z.template, z.template)
        said = (
            f"{name} of the {what} template falls at {w:.0f} Å"
            + "".join(f", {n} at {x:.0f} Å" for n, x in z.lines[1:])
            + f": the template matches at z = {z.z:.3f} (r = {z.r:.1f}), a {z.kind}, "
            "not a star in our Galaxy."
        )
    else:
        said = (
            f"The bump at {w:.0f} Å is emission {z.fwhm_kms:-.0f} km/s wide; with "
            + ", ".join(f"{n} at {x:.0f} Å" for n, x in z.lines[1:])
            + f" it fits {name} at z = {z.z:.3f}: a {z.kind}, not a star in our Galaxy."
        )
    return Zoom(
        (w - half, w + half), f"{name} at z = {z.z:.3f} (redshift check)", ["redshift"],
        lambda m: said,
    )  # fmt: skip


def item_zoom(item: Item) -> Zoom:
    a = item.anchors()
    lo, hi = min(a) - 60.0, max(a) + 60.0
    note = item.note
    return Zoom(
        (lo, hi),
        f"{lo:.0f}-{hi:.0f} Å ({', '.join(sorted({feature_of(k) for k in item.keys}))})",
        list(item.keys),
        lambda m, note=note: note[:1].upper() + note[1:].rstrip(".") + ".",
    )


@dataclass
class _Plan:
    zooms: list[Zoom]
    skipped: list[str]
    reading: Reading
    p_rules: float  # the plain rules' P(YES), before any fitted model


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
        # One spectrum vetted for several tasks is measured once; the spectrum is kept
        # with its numbers so its id cannot be reused by another object meanwhile.
        self._measured: OrderedDict[tuple[str, int], tuple[Spectrum, dict]] = OrderedDict()
        self._cache_size = cache_size

    def _measure(self, ep: Episode) -> dict[str, float]:
        key = (ep.candidate_id, id(ep.spectrum))
        hit = self._measured.get(key)
        if hit is not None and hit[0] is ep.spectrum:
            return hit[1]
        m = measure_all(ep.spectrum)
        self._measured[key] = (ep.spectrum, m)
        while len(self._measured) > 8:
            self._measured.popitem(last=False)
        return m

    def _plan(self, ep: Episode) -> _Plan:
        key = (ep.candidate_id, id(ep.spectrum), ep.task)
        plan = self._cache.get(key)
        if plan is not None:
            return plan
        limit = max(0, min(self.max_zooms, ep.max_turns - 1))
        reading = inspect(ep.spectrum, resolve(ep.task), self._measure(ep), max_zooms=limit)
        p_rules = reading.p_yes
        if self.learned is not None:
            reading = self.learned.apply(reading)
        plan = _Plan(reading.zooms, reading.skipped, reading, p_rules)
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
                # The reply carries the error into the trajectory; the log keeps the traceback
                # so a bug is not mistaken for a bad spectrum.
                log.exception("rules: inspecting %s for %s failed", ep.candidate_id, ep.task)
                out.append(Reply(text="", error=f"rules: {type(exc).__name__}: {exc}"))
        return out

    def _act_one(self, ep: Episode) -> Reply:
        plan = self._plan(ep)
        v = plan.reading
        m = v.measurements
        i = sum(1 for s in ep.steps if s.tool_call is not None)
        prev = plan.zooms[i - 1] if 0 < i <= len(plan.zooms) else None
        if i < len(plan.zooms):
            zoom = plan.zooms[i]
            if i == 0:
                mod = task_module(v.task)
                thought = global_thought(m, mod.HYPOTHESIS, v.redshift)
                if plan.skipped:
                    thought += " Not covered by the data: " + "; ".join(plan.skipped) + "."
            else:
                thought = say_window(prev, v) if prev else ""
            thought += f" Next I zoom into {zoom.label}."
            keys = prev.keys if prev else []
            meas = {k: float(m[k]) for k in keys if finite(m.get(k))}
            return Reply(
                text=format_turn(thought, zoom.window, label=zoom.label),
                measurements=meas,
            )
        # Final answer: the thought, the explanation and P(YES) all read the same items.
        self._cache.pop((ep.candidate_id, id(ep.spectrum), ep.task), None)
        text = format_turn(final_thought(v, prev), answer=v.answer, explanation=explanation(v))
        meas = {k: float(val) for k, val in m.items() if finite(val)}
        meas["score"] = float(v.evidence.score)
        meas["coverage"] = float(v.evidence.coverage)
        # What a fitted model reads (`learned.TaskModel.p_yes`), so another inspector version
        # can re-score this verdict from the store without rerunning the agent.
        meas["calibration_input"] = float(v.x)
        meas["capped"] = float(bool(v.capped))
        meas["p_rules"] = float(plan.p_rules)
        meas.update(redshift.to_measurements(v.redshift))
        if self.learned is not None:
            meas["inspector_version"] = float(self.learned.version)
        return Reply(text=text, p_yes=float(v.p_yes), measurements=meas)


def _sentence(note: str) -> str:
    return note[:1].upper() + note[1:].rstrip(".") + "."


def final_thought(v: Reading, prev: Zoom | None) -> str:
    """What the last window showed, then the evidence for and against, then P(YES)."""
    ev, m = v.evidence, v.measurements
    target = task_module(v.task).TARGET
    parts = [say_window(prev, v)] if prev else []
    for direction, head in (("for", "For"), ("against", "Against")):
        sel = [i for i in ev.items if i.direction == direction and i.note]
        if sel:
            notes = "; ".join(i.note.rstrip(".") for i in sorted(sel, key=lambda i: -abs(i.points)))
            parts.append(f"{head} {target}: {notes}.")
    # The features the reader saw in a drawn window and that were set aside, with why.
    unreliable = {
        k: why
        for k, why in getattr(m, "unreliable", {}).items()
        if not measured_away(v.redshift)
        and (a := ANCHORS.get(k)) is not None
        and any(zz.window[0] <= a <= zz.window[1] for zz in v.zooms)
    }
    if unreliable:
        parts.append(
            "Not used, as the data cannot support them: "
            + "; ".join(f"{feature_label(k)} ({why})" for k, why in sorted(unreliable.items()))
            + "."
        )
    if ev.at_rest:
        parts.append(
            f"{len(ev.at_rest)} reading(s) made for a star at rest are set aside: at "
            f"z = {v.redshift.z:.3f} they fall on other parts of the {v.redshift.kind}'s spectrum."
        )
    if ev.unused:
        parts.append(
            f"{len(ev.unused)} further reading(s) fell outside the windows I drew and are not used."
        )
    if ev.missing:
        parts.append("Not measured: " + "; ".join(ev.missing) + ", so I am less certain.")
    if v.doubt:
        # A noisy spectrum shrinks the evidence towards the prior; only where that leaves
        # P(YES) near even odds or near the prior may the thought say so, or it would
        # contradict a clear answer.
        if undecided(v) and not HEDGE_LOW < v.p_yes < HEDGE_HIGH:
            parts.append(
                _sentence(v.doubt) + f" The data cannot decide it, so my answer leans no "
                f"further than how seldom {target} turns up among candidates, for an expert "
                "to check."
            )
        elif HEDGE_LOW < v.p_yes < HEDGE_HIGH:
            parts.append(
                _sentence(v.doubt) + " The data cannot tell, so my answer stays near even odds "
                "for an expert to check."
            )
        elif v.p_yes < 0.5 and at_prior(v):
            parts.append(
                _sentence(v.doubt) + f" The data cannot tell, so my answer falls back to how "
                f"seldom {target} turns up among candidates, for an expert to check."
            )
        else:
            parts.append(
                _sentence(v.doubt) + " Each reading counts for less, yet together they still "
                "point one way."
            )
    if v.capped:
        # The cap's note may end in a parenthesis quoting a reading: no full stop before ", so".
        parts.append(
            f"{_sentence(v.capped)[:-1]}, so P(YES) is held at {VETO_CAP:.1f} or below, "
            "whatever speaks for it."
        )
    if v.correction:
        parts.append(_sentence(v.correction))
    parts.append(f"Overall score {ev.score:+.1f}; P(YES) = {v.p_yes:.2f}.")
    return " ".join(parts)


def undecided(v: Reading) -> bool:
    """The reading the answer turns on could not decide it (`Evidence.undecided`)."""
    return bool(v.evidence.undecided) and not v.capped and v.doubt == v.evidence.undecided


def at_prior(v: Reading) -> bool:
    """Noise has left P(YES) about where the task's prior puts it (within 0.5 in log-odds)."""
    x_prior = calibration_input(v.evidence.prior, v.evidence.coverage)
    a, _ = task_module(v.task).CALIBRATION
    return abs(a * (v.x - x_prior)) < 0.5


def explanation(v: Reading) -> str:
    """The verdict in one line, its confidence worded as P(YES), and the evidence it rests on."""
    target = task_module(v.task).TARGET
    p = v.p_yes
    if v.doubt and HEDGE_LOW < p < HEDGE_HIGH:
        key = v.evidence.strongest("for" if p > 0.5 else "against")
        why = f"; the strongest reading: {key.note}" if key else ""
        return f"Cannot tell whether this is {target} (P(YES) = {p:.2f}): {v.doubt}{why}."
    if undecided(v) and not HEDGE_LOW < p < HEDGE_HIGH:
        key = v.evidence.strongest("for" if p > 0.5 else "against")
        why = f"; the strongest reading: {key.note}" if key else ""
        return (
            f"Undecided whether this is {target} (P(YES) = {p:.2f}, no surer than how seldom "
            f"it turns up among candidates): {v.doubt}{why}."
        )
    if v.answer == "YES":
        key = v.evidence.strongest("for")
        return (
            f"Consistent with {target} (P(YES) = {p:.2f}): {key.note if key else 'the evidence'}."
        )
    if v.doubt and p < 0.5 and at_prior(v):
        key = v.evidence.strongest("against")
        why = f"; the strongest reading: {key.note}" if key else ""
        return (
            f"Not {target} as far as this spectrum can tell (P(YES) = {p:.2f}, about how "
            f"seldom it turns up among candidates): {v.doubt}{why}."
        )
    key = v.evidence.strongest("against")
    reason = key.note if key else "no diagnostic feature of it was seen"
    if p < 0.01:
        return f"Not {target}, and I am sure it is not (P(YES) < 0.01): {reason}."
    return f"Not {target} (P(YES) = {p:.2f}): {reason}."


_FEATURE_LABELS = {
    "ha": "H-alpha",
    "hb": "H-beta",
    "hg": "H-gamma",
    "ha_w": "H-alpha profile",
    "hb_w": "H-beta profile",
    "hg_w": "H-gamma profile",
    "hd_w": "H-delta profile",
    "cak": "Ca II K",
    "nad": "Na I D",
    "na8190": "Na I 8183/8195",
    "cat8544": "Ca II 8542",
    "cat8664": "Ca II 8662",
    "hei5877": "He I 5876",
    "hei6680": "He I 6678",
    "hei4473": "He I 4471",
    "hei4923": "He I 4922",
    "heii4687": "He II 4686",
    "tio5": "TiO5 index",
    "cah2": "CaH2 index",
    "cah3": "CaH3 index",
}


def feature_label(name: str) -> str:
    """A reader's name for a measured feature ("hb_w" -> "H-beta profile", "c2_5165" -> "C2 5165")."""
    if name in _FEATURE_LABELS:
        return _FEATURE_LABELS[name]
    mol, _, wave = name.partition("_")
    molecules = {"tio": "TiO", "zro": "ZrO", "lao": "LaO", "vo": "VO", "c2": "C2", "cn": "CN"}
    return f"{molecules[mol]} {wave}" if mol in molecules and wave.isdigit() else name
