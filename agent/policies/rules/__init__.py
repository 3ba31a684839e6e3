"""The rule-based inspector: an expert's checklist, measured on the flux arrays.

No weights, no GPU, no torch; deterministic. For each candidate it measures everything an
astronomer would look at once (continuum-normalised depths, equivalent widths, Balmer
FWHM, emission versus absorption, molecular band-head jumps and Reid-style band indices,
gravity-sensitive Na I and Ca II triplet, the continuum colours), caches the numbers, then
plays the Spec-o3 conversation: a hypothesis from the global shape, one zoom per
diagnostic window of the task and of its usual contaminants (each thought quoting what the
previous window showed), and a final `\\boxed{YES|NO}` with a calibrated P(YES).

Per task the evidence is summed into a score (log-odds-like, positive = the target class);
`p_yes = sigmoid(a * score * coverage + b)` with (a, b) per task fitted by logistic
regression on the tune split of the survey-like benchmark:

    python -m training.benchmark --out data/bench --fit-calibration

prints refitted constants for the tasks' `CALIBRATION`.

The package: `features` (measurements and shared signals), `calibration`, `narration`
(the sentences), one module per task (its evidence function, zoom plan and calibration
constants together, named by the task's `inspector` in `agent.tasks`), and `policy`.
"""

from __future__ import annotations

from agent.policies.rules.features import Evidence, measure_all
from agent.policies.rules.policy import (
    TASK_PARTS,
    RulesPolicy,
    Verdict,
    describe,
    inspect,
    resolve,
    task_module,
)

__all__ = [
    "TASK_PARTS",
    "Evidence",
    "RulesPolicy",
    "Verdict",
    "describe",
    "inspect",
    "measure_all",
    "resolve",
    "task_module",
]
