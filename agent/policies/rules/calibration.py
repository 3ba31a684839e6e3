"""From an evidence score to a calibrated P(YES).

`p_yes = sigmoid(a * score * (0.4 + 0.6 * coverage) + b)` with (a, b) per task, kept in
the task's module as `CALIBRATION`. The constants were fitted on the tune split of the
survey-like benchmark (slope by logistic regression with the intercept held at the physics
threshold, pooled over tasks with < 5 positive objects); refit them with

    python -m training.benchmark --out data/bench --skip-build --fit-calibration
"""

from __future__ import annotations

import math

# P(YES) never above this while a decisive reading speaks against the target, or while no
# reading the task's YES must rest on speaks for it, whatever else speaks for it; a fitted
# model's correction of the verdict keeps the cap too.
VETO_CAP = 0.3


def calibration_input(score: float, coverage_frac: float) -> float:
    """What the calibration reads: the score shrunk by the diagnostics that could not be
    checked (missing ones move the evidence towards the prior rather than inventing any).

    >>> calibration_input(2.0, 0.5)
    1.4
    """
    return float(score) * (0.4 + 0.6 * float(coverage_frac))


def sigmoid(x: float) -> float:
    """The logistic function, clamped so no input overflows.

    >>> sigmoid(0.0), sigmoid(1e9) == sigmoid(30.0) < 1.0
    (0.5, True)
    """
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))


def calibrated(constants: tuple[float, float], x: float) -> float:
    """P(YES) from the calibration's input `x` (`calibration_input`).

    >>> round(calibrated((1.5, 0.0), calibration_input(2.0, 1.0)), 3)
    0.953
    >>> calibrated((1.5, 0.0), calibration_input(0.0, 0.3))
    0.5
    """
    a, b = constants
    return sigmoid(a * x + b)
