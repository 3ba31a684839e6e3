"""A fitted correction to the inspector, learned from expert decisions (`launch.py calibrate`).

Per task, one of:

- `rules`: the inspector's own calibration (nothing learned beat it under cross-validation);
- `platt`: p = sigmoid(a x + b) on the input of the inspector's own calibration, x =
  score * (0.4 + 0.6 coverage) after its caps and its noise shrinkage (`Reading.x`);
- `isotonic`: p = a monotone step function of x (interpolated between fitted knots);
- `combiner`: the rules prior plus a learned correction over the inspector's own
  measurements, logit = a x + b + sum_j w_j (m_j - mean_j) / scale_j, missing
  measurements set to their training mean (no correction from what was not measured).
  A Balmer width the rules do not count as measured (`readable`) is missing too.

A learned model is served blended with the rules in the log-odds, with the weight the
labels support (`annotate.learning.evidence`): logit P = (1 - weight) logit P_rules +
weight logit P_learned, so weight 0 is the plain rules and the weight grows with the
evidence. The thought of a verdict a model moved says so, with the version, the weight and
how many expert labels it rests on; a learned YES over a reading the thought quotes
against the target is held at 0.50 (the contradiction table). Inference is plain Python:
the agent needs no scikit-learn. The payload is JSON, versioned; the policy records the
version with every verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from agent.policies.rules.calibration import VETO_CAP, sigmoid

KINDS = ("rules", "platt", "isotonic", "combiner")


class ModelError(LoupeError):
    """An inspector model file that cannot be used."""


@dataclass
class TaskModel:
    kind: str = "rules"
    a: float = 1.0
    b: float = 0.0
    knots_x: list[float] = field(default_factory=list)
    knots_y: list[float] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    labels: int = 0  # expert labels of the task it was fitted on (said in the thought)
    weight: float = 1.0  # the blend's weight on the learned model (0: the plain rules)
    positives: int = 0  # of those labels, how many YES
    objects: int = 0  # distinct objects among the YES labels

    def p_yes(self, x: float, m: dict[str, float], p_rules: float, capped: bool = False) -> float:
        """P(YES) from the rules' calibration input `x`, the measurements and the rules'
        own P(YES): the learned model's, blended with the rules' at `weight` in the
        log-odds; a verdict the rules capped stays at most VETO_CAP.

        >>> tm = TaskModel("platt", a=1.0, b=2.0, weight=0.5)  # learned: sigmoid(2) at x = 0
        >>> round(tm.p_yes(0.0, {}, 0.5), 3), round(sigmoid(1.0), 3)
        (0.731, 0.731)
        >>> TaskModel("platt", a=1.0, b=2.0, weight=0.0).p_yes(0.0, {}, 0.3)
        0.3
        """
        p = self._p_yes(x, m, p_rules)
        if capped:
            p = min(p, VETO_CAP)
        if self.kind != "rules" and self.weight < 1.0:
            p = blend(p_rules, p, self.weight)
        return min(p, VETO_CAP) if capped else p

    def _p_yes(self, x: float, m: dict[str, float], p_rules: float) -> float:
        if self.kind == "platt":
            return sigmoid(self.a * x + self.b)
        if self.kind == "isotonic":
            import numpy as np

            p = float(np.interp(x, self.knots_x, self.knots_y))
            return min(max(p, 1e-4), 1 - 1e-4)
        if self.kind == "combiner":
            return sigmoid(self.a * x + self.b + sum(c for _, c in self.contributions(m)))
        return p_rules

    def contributions(self, m: dict[str, float]) -> list[tuple[str, float]]:
        """(measurement, its term in the log-odds) for the combiner's features."""
        out = []
        m = readable(m)
        for k, mu, sd, w in zip(self.features, self.mean, self.scale, self.weights):
            v = m.get(k)
            z = (float(v) - mu) / sd if _finite(v) and sd > 0 else 0.0
            out.append((k, w * z))
        return out


def logit(p: float) -> float:
    """log(p / (1 - p)), with p clamped to [1e-6, 1 - 1e-6]."""
    p = min(max(float(p), 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def blend(p_rules: float, p_learned: float, weight: float) -> float:
    """The rules' and a learned P(YES) pooled in the log-odds at `weight` on the learned.

    >>> blend(0.2, 0.9, 0.0), round(blend(0.2, 0.9, 1.0), 6)
    (0.2, 0.9)
    """
    if weight <= 0.0:
        return p_rules
    return sigmoid((1.0 - weight) * logit(p_rules) + weight * logit(p_learned))


# The broad Balmer windows whose fitted width the white-dwarf rules read.
BROAD_BALMER = ("hb_w", "hg_w", "hd_w", "ha_w")


def readable(m: dict[str, float]) -> dict[str, float]:
    """The measurements as a combiner may read them: a broad Balmer line's width only where
    the rules count it as measured. A fit under 3 sigma, one that ran to its width bound,
    one with no continuum beside it (`unanchored`), or a line shallower than PRESENT_DEPTH
    has no width; a learned weight on such a number would read a flux-calibration wave or
    blanketed continuum as a white dwarf's pressure-broadened line.

    >>> m = {"ha_w_fwhm": 240.0, "ha_w_fitsig": 2.2, "hb_w_fwhm": 196.0, "hb_w_fitsig": 7.9,
    ...      "hb_w_fitdepth": 0.08, "hg_w_fwhm": 80.0, "hg_w_fitsig": 9.0, "hg_w_fitdepth": 0.4}
    >>> r = readable(m)
    >>> math.isnan(r["ha_w_fwhm"]), math.isnan(r["hb_w_fwhm"]), r["hg_w_fwhm"]
    (True, True, 80.0)
    """
    from agent.policies.rules.features import PRESENT_DEPTH, below_noise, unanchored

    out = dict(m)
    for n in BROAD_BALMER:
        k = f"{n}_fwhm"
        if not _finite(out.get(k)):
            continue
        depth = m.get(f"{n}_fitdepth")
        if (
            below_noise(m, n)
            or unanchored(m, n)
            or m.get(f"{n}_fitbound") == 1.0
            or (_finite(depth) and depth < PRESENT_DEPTH)
        ):
            out[k] = math.nan
    return out


def readable_keys(features: list[str]) -> list[str]:
    """The measurements `readable` consults for these features, beyond the features.

    >>> readable_keys(["hb_w_fwhm", "cak_ew"])
    ['hb_w_fitsig', 'hb_w_fitdepth', 'hb_w_fitbound']
    """
    return [
        f"{n}_{k}"
        for n in BROAD_BALMER
        if f"{n}_fwhm" in features
        for k in ("fitsig", "fitdepth", "fitbound")
    ]


def learned_from(tm: TaskModel) -> str:
    """The weight a task's learned model is blended in at and the labels it rests on.

    >>> print(learned_from(TaskModel("combiner", labels=640, weight=0.62, positives=41,
    ...                              objects=9)))
    the weighting was learned from 640 expert labels (41 YES, from 9 objects) and weighs 0.62 against the rules' 0.38
    """
    said = f"the weighting was learned from {tm.labels} expert labels"
    if tm.positives:
        said += f" ({tm.positives} YES, from {tm.objects} objects)"
    w = min(max(tm.weight, 0.0), 1.0)
    return said + f" and weighs {w:.2f} against the rules' {1.0 - w:.2f}"


def _speaks_against(verdict: Any) -> bool:
    """Whether a note of the verdict's evidence says the candidate is not the target (the
    contradiction table's sentences a YES may never say)."""
    from agent.policies.rules.contradiction import AGAINST

    ev = getattr(verdict, "evidence", None)
    notes = " ".join(getattr(i, "note", "") for i in getattr(ev, "items", []) or [])
    return any(s in notes for s in AGAINST.get(verdict.task, ()))


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


@dataclass
class InspectorModel:
    version: int
    tasks: dict[str, TaskModel]
    created: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # cross-validation, counts

    @property
    def tag(self) -> str:
        return f"inspector-v{self.version}"

    def apply(self, verdict: Any) -> Any:
        """The verdict with P(YES) from this model; a combiner names what moved it most."""
        tm = self.tasks.get(verdict.task)
        if tm is None or tm.kind == "rules":
            return verdict
        m = verdict.measurements
        before = verdict.p_yes
        verdict.p_yes = tm.p_yes(verdict.x, m, verdict.p_yes, bool(verdict.capped))
        if getattr(verdict.evidence, "undecided", "") and not verdict.capped:
            # The reading the answer turns on could not decide it: a learned weighting of
            # the other readings may not make that can't-tell surer than the rules' own.
            lo = min(before, 1.0 - before)
            verdict.p_yes = min(max(verdict.p_yes, lo), 1.0 - lo)
        held = ""
        if verdict.p_yes > 0.5 and _speaks_against(verdict):
            # A reading the thought quotes against the target: a learned weighting may
            # doubt the rules, never answer YES over what the thought itself says.
            verdict.p_yes, held = 0.5, " (held at 0.50: a reading it quotes speaks against)"
        said = ""
        if tm.kind == "combiner":
            top = sorted(tm.contributions(m), key=lambda kc: -abs(kc[1]))[:2]
            said = ", ".join(f"{k} {m[k]:.2f} ({c:+.1f})" for k, c in top if abs(c) >= 0.3)
        # Said in the final thought, so a verdict the correction moved is explained there.
        verdict.correction = (
            f"{self.tag} {tm.kind} moved P(YES) from {before:.2f} to {verdict.p_yes:.2f}{held}"
            + (f", mostly through {said} in the log-odds" if said else "")
            + (f"; {learned_from(tm)}" if tm.labels else "")
        )
        return verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created": self.created,
            "tasks": {t: vars(tm) for t, tm in self.tasks.items()},
            "info": self.info,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "<payload>") -> InspectorModel:
        try:
            tasks = {t: TaskModel(**v) for t, v in d["tasks"].items()}
            model = cls(int(d["version"]), tasks, d.get("created", ""), d.get("info", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{where}: not an inspector model ({exc})") from None
        for t, tm in tasks.items():
            if tm.kind not in KINDS:
                raise ModelError(f"{where}: task {t}: unknown kind {tm.kind!r}")
            if not 0.0 <= tm.weight <= 1.0:
                raise ModelError(f"{where}: task {t}: weight {tm.weight} outside [0, 1]")
            if tm.kind == "combiner" and not (
                len(tm.features) == len(tm.mean) == len(tm.scale) == len(tm.weights)
            ):
                raise ModelError(f"{where}: task {t}: combiner arrays differ in length")
        return model


def load(path: str | Path) -> InspectorModel:
    """An inspector model from a JSON file written by `launch.py calibrate`."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{p}: cannot read the inspector model ({exc})") from None
    return InspectorModel.from_json(data, str(p))
