"""The sort key and label columns the store keeps current inside its transactions: the
queue's priority and the majority of the experts' labels. What a review's action means for
its label is `annotate.review.derive_label`."""

from __future__ import annotations

import math

import numpy as np

UNVETTED_PRIORITY = 1e6  # candidates with no agent trajectory come after every vetted one
VETTED = ("done", "max_turns")  # trajectory states a human can judge
# Setting holding the model calibrations: run fingerprint -> {"tasks": {task: fitted model},
# "queue_maps": {task: curve}} (`annotate.learning.run_calibration` writes it, the queue reads the
# curves).
MODEL_CALIBRATION = "model_calibration"


def queue_confidence(
    confidence: float | None, task: str | None, entry: dict | None
) -> float | None:
    """P(YES) as the queue ranks it: mapped through the curve a run's calibration entry
    keeps for this task (`queue_maps`: {task: {"x": logits, "p": P(YES)}}, written by
    `annotate.learning.run_calibration`), linear between its points in logit P(YES); unchanged
    without one.

    >>> entry = {"queue_maps": {"cv": {"x": [-2.0, 0.0, 2.0], "p": [0.3, 0.5, 0.7]}}}
    >>> round(queue_confidence(0.5, "cv", entry), 3), queue_confidence(0.99, "x", entry)
    (0.5, 0.99)
    >>> queue_confidence(0.999, "cv", entry), queue_confidence(None, "cv", entry) is None
    (0.7, True)
    """
    if confidence is None or not entry or not math.isfinite(confidence):
        return confidence
    curve = (entry.get("queue_maps") or {}).get(task)
    if not curve:
        return confidence
    p = min(max(float(confidence), 1e-6), 1 - 1e-6)
    return float(np.interp(math.log(p / (1 - p)), curve["x"], curve["p"]))


def queue_priority(
    confidence: float | None,
    *,
    vetted: bool = True,
    disagreement: bool = False,
    threshold: float = 0.5,
    bucket: float = 0.05,
) -> float:
    """Sort key for the hand-off queue: lower is served first.

    Lexicographic on (distance-to-threshold bucket, no disagreement, distance): the least
    certain items first, and within one band the ones where two policies, or an expert and
    the agent, disagree. An unknown confidence counts as distance 0 (a human must look).

    >>> queue_priority(0.52) < queue_priority(0.9)
    True
    >>> queue_priority(0.58, disagreement=True) < queue_priority(0.57)
    True
    >>> queue_priority(None, vetted=False) == UNVETTED_PRIORITY
    True
    """
    if not vetted:
        return UNVETTED_PRIORITY
    d = 0.0 if confidence is None or not math.isfinite(confidence) else abs(confidence - threshold)
    b = math.floor(d / bucket + 1e-9)
    frac = min(max(d / bucket - b, 0.0), 0.999)
    return 2.0 * b + (0.0 if disagreement else 1.0) + frac


def resolve_label(n_yes: int, n_no: int, override: str | None = None) -> str | None:
    """Majority of the experts' labels; an adjudicator's override wins; a tie is None.

    >>> resolve_label(2, 1), resolve_label(1, 1), resolve_label(1, 1, "NO")
    ('YES', None, 'NO')
    """
    if override is not None:
        return override
    if n_yes > n_no:
        return "YES"
    if n_no > n_yes:
        return "NO"
    return None
