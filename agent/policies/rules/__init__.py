"""The rule-based inspector: an expert's checklist, measured on the flux arrays.

No weights, no GPU, no torch; deterministic. For each candidate it measures everything an
astronomer would look at once (continuum-normalised depths, equivalent widths, Balmer
FWHM, emission versus absorption, molecular band-head jumps and Reid-style band indices,
gravity-sensitive Na I and Ca II triplet, the continuum colours), caches the numbers, then
plays the Spec-o3 conversation: a hypothesis from the global shape, one zoom per
diagnostic window of the task and of its usual contaminants (each thought quoting what the
previous window showed), and a final `\\boxed{YES|NO}` with a calibrated P(YES).

Per task the evidence is a list of items, each with a direction and weight (positive for
the target class), the sentence that says it and the measurements it rests on; the score,
P(YES), the final thought and the explanation all read that one list. The zoom plan draws
the windows that show the weightiest items, and an item whose feature no drawn window shows
counts for nothing. A decisive discriminant against the target (a dwarf's Na I for an M
giant, a quasar redshift for a CV) holds the score down whatever speaks for it; measurements
the data cannot support are nan with their reason (`Measurements.unreliable`) and below SNR
~7 the evidence shrinks towards even odds. The redshift step (`agent.redshift`) names
quasars and galaxies for the cv, wd and carbon tasks.
`p_yes = sigmoid(a * score * coverage + b)` with (a, b) per task fitted by logistic
regression on the tune split of the survey-like benchmark:

    python -m training.benchmark --out data/bench --fit-calibration

prints refitted constants for the tasks' `CALIBRATION`.

The package: `features` (measurements and shared signals), `calibration`, `narration`
(the sentences), one module per task (its evidence function, zoom plan and calibration
constants together, named by the task's `inspector` in `agent.tasks`), and `policy`.
"""

from __future__ import annotations

from agent.policies.rules.features import Evidence, Item, Measurements, measure_all
from agent.policies.rules.policy import (
    TASK_PARTS,
    Reading,
    RulesPolicy,
    describe,
    inspect,
    resolve,
    task_module,
)

__all__ = [
    "TASK_PARTS",
    "Evidence",
    "Item",
    "Measurements",
    "RulesPolicy",
    "Reading",
    "describe",
    "inspect",
    "measure_all",
    "resolve",
    "task_module",
]
