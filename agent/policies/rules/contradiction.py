"""What a confident YES of each task may never say: the sentences the inspector writes for
evidence AGAINST the target, and pairs of sentences that cannot both be true.

One table for the test that checks every trajectory (tests/test_evidence.py) and for the
accuracy report, which counts the trajectories of each split that break it.

>>> found("m_giant", 0.9, "Na I 8183/8195 EW 3.3 Å: strong, as in a high-gravity dwarf.")
['as in a high-gravity dwarf']
>>> found("m_giant", 0.2, "Na I 8183/8195 EW 3.3 Å: strong, as in a high-gravity dwarf.")
[]
>>> found("wd", 0.03, "The data cannot tell, so my answer stays near even odds.")
['near even odds']
"""

from __future__ import annotations

# task -> sentences that say the candidate is NOT the target
AGAINST: dict[str, tuple[str, ...]] = {
    "m_giant": (
        "as in a high-gravity dwarf",
        "CaH as strong as a dwarf's",
        "as only a dwarf shows",
        "as only a high-gravity M dwarf shows",
        "an S star, not an ordinary M giant",
        "too blue for an M star",
    ),
    "wd": (
        "narrow, as in an A/B star",
        "too narrow for a white dwarf",
        "no higher-series partner at that width",
        "not a DZ white dwarf",
        "not the lines tens of Å wide of a DB white dwarf",
        "the lower gravity of a hot subdwarf",
        "as only a gravity lower than a white dwarf's allows",
    ),
    "s_type": ("ZrO no stronger",),
    "carbon": ("TiO bands present",),
}
# P(YES) strictly between these is "near even odds": the only answers that may hedge
HEDGE_LOW, HEDGE_HIGH = 0.2, 0.8
HEDGES = ("near even odds", "Cannot tell whether")

# task -> (sentence, sentence) that contradict each other in one trajectory
EXCLUSIVE: dict[str, tuple[tuple[str, str], ...]] = {
    # a DB has no hydrogen: "no Balmer lines" cannot stand beside measured ones
    "wd": (
        ("with no Balmer lines", "weak, narrow Balmer lines (hot subdwarf or B star)"),
        ("with no hydrogen", "weak, narrow Balmer lines (hot subdwarf or B star)"),
        # the high series is either merged by a white dwarf's pressure or resolved
        ("H8-H10 blend together", "the series is resolved to H12"),
    ),
}


def found(task: str, p_yes: float | None, text: str) -> list[str]:
    """The contradictions in `text` (a trajectory's thoughts and explanation) of a verdict
    with this P(YES): a hedge beside a clear answer, and for a verdict leaning YES (P > 0.5)
    what its task forbids."""
    if p_yes is None:
        return []
    out = [s for s in HEDGES if s in text and not HEDGE_LOW < p_yes < HEDGE_HIGH]
    if p_yes <= 0.5:
        return out
    out += [s for s in AGAINST.get(task, ()) if s in text]
    out += [f"{a} / {b}" for a, b in EXCLUSIVE.get(task, ()) if a in text and b in text]
    return out
