"""The vetting tasks: one binary question per target class, with what to look for.

Each task is data, in the structure Spec-o3 prompts use (a question, then the class's key
visual indicators), written in Loupe's own words from the physics in the paper notes. A new
task is a new `Task` entry in `TASKS`, whose `inspector` names the rule-based inspector's
module for it (evidence, zoom plan and calibration in one file). SpecVI-Bench names its
tasks differently (cc, carbon, gm, ss); `resolve_task` maps those aliases.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.errors import LoupeError


class TaskError(LoupeError, ValueError):
    """A task name Loupe does not know; the message lists the ones it does."""


@dataclass(frozen=True)
class Task:
    name: str  # Loupe's name, used in catalogues and the store
    target: str  # the class in words, as the question names it
    question: str
    indicators: tuple[str, ...]  # the key visual indicators, one per line in the prompt
    contaminants: tuple[str, ...] = ()  # what usually masquerades as the target
    aliases: tuple[str, ...] = ()  # other names (SpecVI-Bench data_source / file suffix)
    # The rule-based inspector's module for this task: its evidence, zooms and calibration.
    inspector: str = ""


# The one list of tasks. Its order (cv, carbon, s_type, m_giant, wd) is the order reports,
# tables and menus show them in.
TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task(
            name="cv",
            inspector="agent.policies.rules.cv",
            target="cataclysmic variable",
            question="Is this object a cataclysmic variable (CV)?",
            indicators=(
                "Balmer lines in emission (H-alpha 6563 Å, H-beta 4861 Å, higher-order lines), "
                "often broad or double-peaked because they come from an accretion disk.",
                "He I emission at 5876 and 6678 Å; He II 4686 Å emission points to a magnetic "
                "system.",
                "A blue continuum from the disk, sometimes with a red-dwarf continuum and its "
                "molecular bands showing underneath at the red end.",
                "Emission lines at zero redshift: a QSO shows broad lines at shifted wavelengths "
                "instead.",
            ),
            contaminants=("Be stars", "T Tauri stars", "active M dwarfs", "QSOs", "symbiotics"),
        ),
        Task(
            name="carbon",
            inspector="agent.policies.rules.carbon",
            target="carbon star",
            question="Is this object a carbon star (C-type)?",
            indicators=(
                "C2 Swan band heads at 4737, 5165 and 5636 Å: sharp edges with the flux "
                "degrading towards the blue.",
                "CN bands in the red and near infrared (around 7874 and 8067 Å).",
                "No TiO bands: the saw-tooth TiO absorption at 7054 and 7589 Å of M stars is "
                "absent.",
                "A red continuum with very little flux in the blue.",
            ),
            contaminants=("M giants", "K giants", "CH stars"),
            aliases=("cc", "c_star"),
        ),
        Task(
            name="s_type",
            inspector="agent.policies.rules.s_type",
            target="S-type star",
            question="Is this object an S-type star?",
            indicators=(
                "ZrO band heads at 4620, 5551 and 6474 Å alongside the TiO bands of a cool star.",
                "LaO absorption near 7403 Å.",
                "TiO bands present but weaker relative to ZrO than in an ordinary M giant.",
                "A cool, red continuum.",
            ),
            contaminants=("M giants",),
            aliases=("ss", "s_star"),
        ),
        Task(
            name="m_giant",
            inspector="agent.policies.rules.m_giant",
            target="M giant",
            question="Is this object an M giant star?",
            indicators=(
                "Strong TiO bands (7054, 7589 Å and the bands in the blue) of an M-type star.",
                "A weak Na I 8183/8195 Å doublet: it is strong in M dwarfs and weak in giants.",
                "Weak CaH bands at 6382 and 6750 Å (strong in dwarfs).",
                "A strong Ca II triplet at 8498, 8542 and 8662 Å.",
            ),
            contaminants=("M dwarfs", "S-type stars", "carbon stars"),
            aliases=("gm", "mgiant"),
        ),
        Task(
            name="wd",
            inspector="agent.policies.rules.wd",
            target="white dwarf",
            question="Is this object a white dwarf?",
            indicators=(
                "Very broad, deep Balmer absorption (H-beta 4861, H-gamma 4340, H-delta 4102 Å) "
                "tens to over a hundred Å wide from pressure broadening (DA type).",
                "A blue continuum without metal lines; Ca II K at 3934 Å points to an A star.",
                "He I absorption at 4471, 4922 and 5876 Å instead of Balmer lines (DB type); "
                "C2 Swan bands (DQ) or Ca II H&K (DZ) in rarer types.",
                "Balmer lines narrower than a white dwarf's belong to A/B stars or hot subdwarfs.",
            ),
            contaminants=("hot subdwarfs", "A stars", "B stars"),
        ),
    ]
}

_ALIASES = {alias: t.name for t in TASKS.values() for alias in t.aliases}


def resolve_task(name: str) -> str:
    """Loupe's task name for `name` or one of its aliases; TaskError naming the choices."""
    key = (name or "").strip().lower()
    if key in TASKS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    choices = ", ".join(sorted(TASKS) + sorted(_ALIASES))
    raise TaskError(f"unknown task {name!r}; choose one of: {choices}")


def task_name(name: str | None) -> str:
    """Loupe's task name for `name` or one of its aliases; other names come back lower-cased.

    >>> task_name(" GM "), task_name("wd"), task_name("o_star")
    ('m_giant', 'wd', 'o_star')
    """
    key = (name or "").strip().lower()
    return _ALIASES.get(key, key)


def get_task(name: str) -> Task:
    return TASKS[resolve_task(name)]
