"""Plain records the store hands to callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.refs import CandidateRef
from db.settings import DEFAULTS


@dataclass
class AddReport:
    added: int = 0
    existing: int = 0
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (index, item, reason)
    # (index, item, reason): an id and task the store already gives to another spectrum
    conflicts: list[tuple[int, str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        refused = len(self.errors) + len(self.conflicts)
        return f"{self.added} added, {self.existing} already present, {refused} refused"


@dataclass
class CandidateInfo:
    id: int
    key: str
    task: str
    object_id: str
    spectrum_ref: dict[str, Any]
    spectrum_id: int
    survey: str | None
    split: str | None
    score: float | None
    source_catalog: str | None
    is_gold: bool
    gold_label: str | None
    known_label: str | None
    trajectory_id: int | None
    verdict: str | None
    confidence: float | None
    disagreement: bool
    priority: float
    review_count: int
    n_yes: int
    n_no: int
    flagged: bool
    auto: bool
    label: str | None
    label_source: str | None
    adjudicated_label: str | None

    @property
    def status(self) -> str:
        if self.n_yes and self.n_no and self.adjudicated_label is None:
            return "conflict"
        if self.review_count or self.adjudicated_label is not None:
            return "reviewed"
        if self.auto:
            return "auto"
        return "unreviewed"

    @property
    def ref(self) -> CandidateRef:
        r = self.spectrum_ref
        return CandidateRef(
            id=self.key,
            task=self.task,
            path=r["path"],
            hdu=r["hdu"],
            row=r["row"],
            label=self.known_label,
        )


@dataclass
class Filters:
    """Which candidates a queue or a listing may draw from (None = any)."""

    task: str | None = None
    confidence_min: float | None = None  # on P(YES)
    confidence_max: float | None = None
    status: str | None = None  # unreviewed / reviewed / conflict / flagged
    survey: str | None = None
    split: str | None = None
    max_reviews: int | None = None  # only items with at most this many label-setting reviews
    gold: bool | None = None  # only gold items (True) or only others (False)


@dataclass
class DashboardStats:
    """What the dashboard draws, aggregated in the database (`Store.dashboard_stats`).

    Labels here are expert labels only (reviews or adjudication; auto-accepted items are
    the agent's own verdict and left out of every quality figure).
    """

    tasks: list[str]
    total: dict[str, int]  # task -> candidates
    reviewed: dict[str, int]  # task -> candidates with a label-setting review
    auto: dict[str, int]  # task -> auto-accepted, not reviewed
    actions: dict[str, dict[str, int]]  # task -> review action -> count
    n_reviews: int
    n_reviewers: int
    confusion: list[tuple[str, str | None, str, int]]  # (task, agent verdict, label, count)
    # (bin, label, count, sum of P(YES)) over expert-labelled items with a confidence;
    # bin = floor(P(YES) * CONFIDENCE_BINS), clipped to the last bin
    confidence_hist: list[tuple[int, str, int, float]]
    seconds: dict[str, dict[str, float]]  # expert -> n, min, q1, median, q3, max (nearest rank)
    seconds_median: float | None  # over every timed review
    ratings: list[tuple[int, str, str, str]]  # (candidate, task, expert, label), 2+ reviews
    gold: list[tuple[int, str, str, str, str]]  # (candidate, task, expert, label, gold label)

    CONFIDENCE_BINS = 1000


@dataclass
class QueueConfig:
    """How the hand-off queue serves items.

    threshold: decision threshold the priority measures distance from (store setting).
    overlap: each item is reviewed by this many experts (k).
    gold_rate: share of served items drawn from the gold-standard set (0 = none).
    auto_accept: items whose agent certainty max(p, 1-p) reaches this are not served.
    lease_seconds: how long a served item stays reserved for its expert.
    audit_rate: share of confident verdicts drawn into the random audit, and of served
        items taken from that sample (0 = none; the team's default is
        `annotate.audit.sample.AUDIT_RATE`).
    """

    overlap: int = 1
    gold_rate: float = 0.0
    auto_accept: float | None = None
    lease_seconds: float = DEFAULTS.lease_seconds
    audit_rate: float = 0.0
