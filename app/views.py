"""The records the pages show: plain dataclasses the Gradio layer maps onto components."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class QueueFilters:
    """The vet page's queue filters, as the page's controls hold them."""

    task: str = "all"
    band: str = "all"  # "all" or "lo-hi" on P(YES)
    status: str = "any"  # any / unreviewed / reviewed / conflict / flagged
    survey: str = "all"
    split: str = "all"

    def confidence_range(self) -> tuple[float, float] | None:
        if not self.band or self.band == "all":
            return None
        lo, hi = (float(v) for v in self.band.split("-"))
        return lo, hi


@dataclass
class Display:
    markers: bool = True
    error: bool = True
    smooth: int = 0
    frame: str = "rest"
    images: bool = False
    # The desk's view options (app.pages.desk): continuum-normalised flux, every marker of
    # the catalogue rather than the task's key species, a template drawn at redshift z, the
    # file's arms before merging (DESI B/R/Z) and its sky spectrum.
    normalised: bool = False
    all_markers: bool = False
    arms: bool = False
    sky: bool = False
    template: str = "none"
    z: float | None = None  # the expert's redshift, for the candidate `z_key` only
    z_key: str | None = None


@dataclass
class StepView:
    fig: dict[str, Any] | None
    thought_html: str
    image: Any = None  # PIL image the model saw, when asked for


@dataclass
class VetView:
    candidate_id: str | None
    header_html: str
    global_fig: dict[str, Any] | None
    steps: list[StepView]
    answer_html: str
    correct_label: str | None = None
    wrong_step: str = "none"  # the correct panel's step, 1-based as it shows it
    explanation: str = ""
    step_choices: list[str] = field(default_factory=lambda: ["none"])
    message: str = ""
    surveys: list[str] = field(default_factory=list)
    server_ms: float = 0.0
    # What the page draws: the step panels as one figure, and beside it each step's
    # thought (and image) in a block of the same height, so step k sits next to panel k.
    zoom_fig: dict[str, Any] | None = None
    thoughts_html: str = ""
    grade: int | None = None  # this expert's grade (1-4), saved or waiting for a decision
    issues: str | None = None  # Prospect's issue flags ("RS"), saved or waiting, as the grade
    spectype: str | None = None  # the expert's spectral type, saved or waiting
    jump_tasks: list[str] = field(default_factory=list)  # an ambiguous jump: choose a task
    # The redshift control's reading for this candidate (app.pages.desk.redshift_info).
    redshift: dict[str, Any] | None = None
    template: str = "none"  # the template drawn over this candidate (its draft's)
    # The text boxes' saved values for this candidate, for keys.js, which fills the boxes
    # (its own per-candidate drafts first): {"key", "comment", "explanation", "note",
    # "restore": the undone decision's texts, "saved": the id whose texts a decision saved}
    form: dict[str, Any] = field(default_factory=dict)


@dataclass
class DraftView:
    header_html: str
    global_fig: dict[str, Any] | None
    rows: list[list[Any]]
    verdict: str | None
    explanation: str
    message: str = ""
    tasks: list[str] = field(default_factory=list)  # an id of several tasks: choose one


@dataclass
class DashboardView:
    summary: str
    progress: dict
    rates: dict
    confusion: dict
    reliability: dict
    speed: dict
    gold: dict
    per_task: dict[str, Any]  # {"headers", "data"}
    kappa: dict[str, Any]


@dataclass
class ExportView:
    """What the export page shows after a run: its message, manifest, files and history."""

    message: str
    manifest: dict[str, Any] | None
    files: list[str]
    history: dict[str, Any]


def new_state() -> dict[str, Any]:
    """Per-session state: the candidate shown (store id and key), when it was shown, the
    session's history for k/j and the candidates this page decided (what `u` takes back,
    newest last). It says where j and k go; no write acts on it: every write names its
    candidate (app.pages.vet_target). What the expert sets on a candidate before deciding it
    is its draft, in the store (`annotate.drafts`), not here: a reload keeps it."""
    return {"current": None, "key": None, "shown_at": None, "history": [], "pos": -1,
            "decided": []}  # fmt: skip


def current_id(state: dict[str, Any]) -> str:
    return (state or {}).get("key") or ""
