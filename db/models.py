"""The store's tables, as SQLAlchemy 2 typed models.

Arrays never live here: a `Spectrum` row is a file reference (path, hdu, row) plus a
content hash and the survey metadata, and the flux is read from the file on demand.

Some `Candidate` columns are denormalised on purpose (`confidence`, `verdict`,
`priority`, `review_count`, `n_yes`, `n_no`, `label`): the hand-off queue reads them through
one index, and every write that changes their inputs updates them in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# What an expert decides on a candidate. A review's action is one of these or "undo": the
# state of a review whose only decision was taken back (no label, never exported or
# counted as a decision; the decision itself stays in the review's history).
DECISIONS = ("accept", "reject", "correct", "skip", "flag")
ACTIONS = (*DECISIONS, "undo")
LABEL_ACTIONS = ("accept", "reject", "correct")  # actions that set a label
ROLES = ("expert", "admin")
SPLITS = ("train", "test", "holdout")
AUTHORED_STATUSES = ("draft", "submitted", "approved", "rejected")
LABELS = ("YES", "NO")
GRADES = (1, 2, 3, 4)  # quality of the decision: 4 certain, 3 probable, 2 possible, 1 a guess
REDSHIFT_SOURCES = ("agent", "expert")  # adopted the agent's estimate / typed by the expert
# Prospect's VI issue flags, in the order it writes them: R bad redshift fit, C bad spectral
# type, S bad spectrum. A review keeps the letters set, concatenated ("RS").
ISSUE_FLAGS = "RCS"
MAX_SPECTYPE = 64  # the expert's spectral type (a template's name, or typed)
# Longest explanation or comment, in characters: enough for a paragraph of reasoning.
MAX_TEXT = 2000


def utcnow() -> dt.datetime:
    # Naive UTC everywhere: SQLite keeps no zone, and mixing aware and naive values breaks
    # comparisons in the lease queries.
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Task(Base):
    __tablename__ = "task"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")


class Spectrum(Base):
    """One spectrum in a file. `ref_key` = "path|hdu|row" makes (path, hdu, row) unique
    even where hdu/row are NULL (NULLs never collide in a UNIQUE index)."""

    __tablename__ = "spectrum"
    id: Mapped[int] = mapped_column(primary_key=True)
    ref_key: Mapped[str] = mapped_column(String(1024), unique=True)
    path: Mapped[str] = mapped_column(String(1024))
    hdu: Mapped[str | None] = mapped_column(String(64))  # int HDUs stored as their digits
    row: Mapped[int | None] = mapped_column(Integer)
    content_hash: Mapped[str | None] = mapped_column(String(80))  # "sha256:<hex>" of the file
    survey: Mapped[str | None] = mapped_column(String(32))
    obsid: Mapped[str | None] = mapped_column(String(64))
    ra: Mapped[float | None] = mapped_column(Float)
    dec: Mapped[float | None] = mapped_column(Float)
    snr: Mapped[float | None] = mapped_column(Float)
    survey_class: Mapped[str | None] = mapped_column(String(64))
    survey_subclass: Mapped[str | None] = mapped_column(String(64))
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Candidate(Base):
    """A spectrum to vet for one task. `key` is the candidate id users see and type."""

    __tablename__ = "candidate"
    __table_args__ = (
        UniqueConstraint("spectrum_id", "task_id", name="uq_candidate_spectrum_task"),
        UniqueConstraint("key", "task_id", name="uq_candidate_key_task"),
        # The queue walks one of these two in order and stops at the first servable row.
        Index("ix_candidate_queue", "is_gold", "auto", "review_count", "priority", "id"),
        Index(
            "ix_candidate_queue_task",
            "task_id",
            "is_gold",
            "auto",
            "review_count",
            "priority",
            "id",
        ),
        Index("ix_candidate_object", "object_id"),
        # the audit's estimates aggregate per task and design stratum from this index alone
        Index(
            "ix_candidate_audit",
            "task_id",
            "audit_stratum",
            "label",
            "label_source",
            "audit_inclusion",
            "confidence",
        ),
        # the audit sample alone (a few percent of the candidates): its reliability points
        # and the queue's audit turns read it without a scan
        Index(
            "ix_candidate_audit_sample",
            "audit_inclusion",
            "task_id",
            "audit_stratum",
            "label",
            "label_source",
            "confidence",
            "review_count",
            sqlite_where=text("audit_inclusion IS NOT NULL"),
            postgresql_where=text("audit_inclusion IS NOT NULL"),
        ),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(256))
    object_id: Mapped[str] = mapped_column(String(256))  # exports dedupe and split by this
    spectrum_id: Mapped[int] = mapped_column(ForeignKey("spectrum.id"))
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id"))
    score: Mapped[float | None] = mapped_column(Float)  # screening score from the catalogue
    source_catalog: Mapped[str | None] = mapped_column(String(256))
    split: Mapped[str | None] = mapped_column(String(16))  # train / test / holdout
    survey: Mapped[str | None] = mapped_column(String(32))  # copy of spectrum.survey for filters
    is_gold: Mapped[bool] = mapped_column(Boolean, default=False)
    gold_label: Mapped[str | None] = mapped_column(String(3))
    known_label: Mapped[str | None] = mapped_column(String(3))  # from the catalogue, if any
    # -- denormalised state, kept current by the store in the writing transaction --
    trajectory_id: Mapped[int | None] = mapped_column(Integer)  # the trajectory shown/judged
    verdict: Mapped[str | None] = mapped_column(String(3))
    confidence: Mapped[float | None] = mapped_column(Float)  # P(YES) of that trajectory
    disagreement: Mapped[bool] = mapped_column(Boolean, default=False)
    priority: Mapped[float] = mapped_column(Float, default=1e6)  # lower is served first
    review_count: Mapped[int] = mapped_column(Integer, default=0)  # label-setting reviews
    n_yes: Mapped[int] = mapped_column(Integer, default=0)
    n_no: Mapped[int] = mapped_column(Integer, default=0)
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    auto: Mapped[bool] = mapped_column(Boolean, default=False)  # auto-accepted: out of the queue
    label: Mapped[str | None] = mapped_column(String(3))  # resolved label
    label_source: Mapped[str | None] = mapped_column(String(16))  # review/adjudication/auto
    adjudicated_label: Mapped[str | None] = mapped_column(String(3))
    adjudicator_id: Mapped[int | None] = mapped_column(ForeignKey("expert.id"))
    adjudication_comment: Mapped[str | None] = mapped_column(Text)
    # In the random audit sample: the probability it was drawn with (estimates weight by
    # 1/pi; annotate.audit.sample). NULL: not in the sample.
    audit_inclusion: Mapped[float | None] = mapped_column(Float)
    # The audit design's stratum at the draw, "<draw>:<verdict> <band>", for every candidate
    # of a draw's population, drawn or not: the estimates weigh it by this, whatever
    # re-scoring does to its P(YES) later. NULL: in no draw's population.
    audit_stratum: Mapped[str | None] = mapped_column(String(32))
    # The inspector version whose re-scoring gave `confidence` and `verdict` (from the
    # trajectory's stored inputs, annotate.learning.schedule); NULL: the trajectory's own.
    scored_by: Mapped[int | None] = mapped_column(Integer)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class AgentRun(Base):
    __tablename__ = "agent_run"
    id: Mapped[int] = mapped_column(primary_key=True)
    # sha256 of (policy, model, renderer, params): a rerun with the same set-up resumes it
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    policy: Mapped[str] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(512))
    renderer: Mapped[str] = mapped_column(String(64), default="fast")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    code_version: Mapped[str] = mapped_column(String(128), default="")
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Trajectory(Base):
    __tablename__ = "trajectory"
    __table_args__ = (
        UniqueConstraint("run_id", "candidate_id", name="uq_trajectory_run_candidate"),
        Index("ix_trajectory_candidate", "candidate_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("agent_run.id"))
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id"))
    steps: Mapped[list[Any]] = mapped_column(JSON, default=list)
    verdict: Mapped[str | None] = mapped_column(String(3))
    explanation: Mapped[str] = mapped_column(Text, default="")
    confidence: Mapped[float | None] = mapped_column(Float)
    format_ok: Mapped[bool] = mapped_column(Boolean, default=True)
    state: Mapped[str] = mapped_column(String(16), default="done")
    error: Mapped[str | None] = mapped_column(Text)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[float | None] = mapped_column(Float)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Expert(Base):
    __tablename__ = "expert"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    role: Mapped[str] = mapped_column(String(16), default="expert")
    password_hash: Mapped[str | None] = mapped_column(String(256))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    review_count: Mapped[int] = mapped_column(Integer, default=0)  # drives the gold rate
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class ExpertSession(Base):
    """A login. Only the token's sha256 is kept, so a leaked database grants no sessions."""

    __tablename__ = "expert_session"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    expert_id: Mapped[int] = mapped_column(ForeignKey("expert.id"), index=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires: Mapped[dt.datetime] = mapped_column(DateTime)


# A review whose seconds on the item count in the Dashboard's quantiles (a taken-back one
# does not); the partial indexes on review are built over exactly these rows.
TIMED = "seconds IS NOT NULL AND action != 'undo'"


class Review(Base):
    """One expert's current decision on one candidate; earlier versions in ReviewRevision."""

    __tablename__ = "review"
    __table_args__ = (
        UniqueConstraint("candidate_id", "expert_id", name="uq_review_candidate_expert"),
        Index("ix_review_expert", "expert_id", "id"),
        # the Dashboard's seconds-per-spectrum quantiles read a rank in these (no sort)
        Index("ix_review_seconds_expert", "expert_id", "seconds",
              sqlite_where=text(TIMED), postgresql_where=text(TIMED)),
        Index("ix_review_seconds", "seconds",
              sqlite_where=text(TIMED), postgresql_where=text(TIMED)),
    )  # fmt: skip
    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id"))
    expert_id: Mapped[int] = mapped_column(ForeignKey("expert.id"))
    trajectory_id: Mapped[int | None] = mapped_column(ForeignKey("trajectory.id"))
    action: Mapped[str] = mapped_column(String(16))
    label: Mapped[str | None] = mapped_column(String(3))
    # the reasoning the model should learn (a correction's, or a reject's reason): trained on
    explanation: Mapped[str | None] = mapped_column(Text)
    wrong_step: Mapped[int | None] = mapped_column(Integer)
    comment: Mapped[str | None] = mapped_column(Text)  # a note to other experts: never trained on
    # a correction's note to other experts, beside the comment: never trained on either
    note: Mapped[str | None] = mapped_column(Text)
    seconds: Mapped[float | None] = mapped_column(Float)  # active time on the item
    grade: Mapped[int | None] = mapped_column(Integer)  # GRADES
    redshift: Mapped[float | None] = mapped_column(Float)
    redshift_source: Mapped[str | None] = mapped_column(String(16))  # REDSHIFT_SOURCES
    issues: Mapped[str | None] = mapped_column(String(8))  # ISSUE_FLAGS set, e.g. "RS"
    spectype: Mapped[str | None] = mapped_column(String(MAX_SPECTYPE))
    source: Mapped[str] = mapped_column(String(16), default="app")  # app / import
    revision: Mapped[int] = mapped_column(Integer, default=1)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class CandidateTally(Base):
    """How many candidates are in each state the Dashboard counts, per task: a running
    count the store keeps in the transaction of every write that moves a candidate
    (db/store/tally.py), so the Dashboard reads a few hundred rows, not every candidate.

    `reviewed`: it has a label-setting review; `auto`: auto-accepted and not reviewed.
    For a candidate with an expert label (a review's or an adjudication's, not the
    auto-accept's) also that `label`, the agent's `verdict` ("" for none) and the P(YES)
    bin `bin` = floor(P(YES) * 1000) clipped to 999 (-1 without a P(YES)); "", "" and -1
    for every other candidate. `p_sum`: the sum of floor(P(YES) * 10^10) over the row's
    binned candidates, an integer so that adding and taking away a candidate cancel exactly."""

    __tablename__ = "candidate_tally"
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reviewed: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    auto: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    label: Mapped[str] = mapped_column(String(3), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(3), primary_key=True)
    bin: Mapped[int] = mapped_column(Integer, primary_key=True)
    n: Mapped[int] = mapped_column(Integer, default=0)
    p_sum: Mapped[int] = mapped_column(BigInteger, default=0)


class ReviewTally(Base):
    """How many current reviews hold each action, per task and expert: kept like
    `CandidateTally` (an undone review counts under "undo")."""

    __tablename__ = "review_tally"
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    expert_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    action: Mapped[str] = mapped_column(String(16), primary_key=True)
    n: Mapped[int] = mapped_column(Integer, default=0)


class ReviewRevision(Base):
    """A superseded version of a review, kept when its author revises it."""

    __tablename__ = "review_revision"
    __table_args__ = (UniqueConstraint("review_id", "revision", name="uq_revision"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    review_id: Mapped[int] = mapped_column(ForeignKey("review.id"))
    revision: Mapped[int] = mapped_column(Integer)
    trajectory_id: Mapped[int | None] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(16))
    label: Mapped[str | None] = mapped_column(String(3))
    explanation: Mapped[str | None] = mapped_column(Text)
    wrong_step: Mapped[int | None] = mapped_column(Integer)
    comment: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    seconds: Mapped[float | None] = mapped_column(Float)
    grade: Mapped[int | None] = mapped_column(Integer)  # GRADES
    redshift: Mapped[float | None] = mapped_column(Float)
    redshift_source: Mapped[str | None] = mapped_column(String(16))  # REDSHIFT_SOURCES
    issues: Mapped[str | None] = mapped_column(String(8))  # ISSUE_FLAGS set, e.g. "RS"
    spectype: Mapped[str | None] = mapped_column(String(MAX_SPECTYPE))
    recorded: Mapped[dt.datetime] = mapped_column(DateTime)  # when that version was written
    superseded: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Draft(Base):
    """What an expert has set on a candidate and not yet saved with a decision (grade,
    issue flags, spectral type, redshift, template), as a JSON object: one per expert and
    candidate, kept across page reloads and dropped once a decision holds it."""

    __tablename__ = "draft"
    __table_args__ = (
        UniqueConstraint("expert_id", "candidate_id", name="uq_draft_expert_candidate"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    expert_id: Mapped[int] = mapped_column(ForeignKey("expert.id"))
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id"))
    fields: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class ExpertPref(Base):
    """How an expert last set up the vet desk (queue filters, display options), as a JSON
    object: one row per expert, so that a reload or another machine opens the desk as they
    left it (`annotate.team.prefs` holds which fields and what values)."""

    __tablename__ = "expert_pref"
    expert_id: Mapped[int] = mapped_column(ForeignKey("expert.id"), primary_key=True)
    fields: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class AuthoredTrajectory(Base):
    """A cold-start trajectory an expert wrote by zooming themselves."""

    __tablename__ = "authored_trajectory"
    __table_args__ = (Index("ix_authored_status", "status"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id"), index=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("expert.id"))
    steps: Mapped[list[Any]] = mapped_column(JSON, default=list)
    verdict: Mapped[str | None] = mapped_column(String(3))
    explanation: Mapped[str] = mapped_column(Text, default="")
    renderer: Mapped[str] = mapped_column(String(64), default="fast")
    status: Mapped[str] = mapped_column(String(16), default="draft")
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("expert.id"))
    reviewer_comment: Mapped[str | None] = mapped_column(Text)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Setting(Base):
    """Team settings the store itself applies (decision threshold, overlap, gold rate...)."""

    __tablename__ = "setting"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # {"value": ...}
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Lease(Base):
    """An item handed to an expert, reserved until `expires`."""

    __tablename__ = "lease"
    __table_args__ = (
        UniqueConstraint("candidate_id", "expert_id", name="uq_lease_candidate_expert"),
        Index("ix_lease_candidate_expires", "candidate_id", "expires"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id"))
    expert_id: Mapped[int] = mapped_column(ForeignKey("expert.id"), index=True)
    # the page (browser tab) it was served to: an expert's two tabs never hold one item
    holder: Mapped[str] = mapped_column(String(64), default="", server_default="")
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires: Mapped[dt.datetime] = mapped_column(DateTime)


class AuditEvent(Base):
    """Append-only: the migration installs triggers that refuse UPDATE and DELETE."""

    __tablename__ = "audit_event"
    __table_args__ = (Index("ix_audit_entity", "entity", "entity_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))  # expert name, or "ingest", "vet", ...
    action: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(64))
    entity_id: Mapped[int | None] = mapped_column(Integer)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ExportBatch(Base):
    __tablename__ = "export_batch"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # sft / rl / pairs
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(128), default="")
    path: Mapped[str | None] = mapped_column(String(1024))
    code_version: Mapped[str] = mapped_column(String(128), default="")
    content_hash: Mapped[str | None] = mapped_column(String(80))  # hash over the files written
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ExportFile(Base):
    """A file an export wrote, offered for download by its opaque `token` alone: the app
    serves a file only through this record (never by a path a request spells), and checks
    the viewer's role on each request: admins, or the `owner` named (an expert's own VI
    CSV); no owner: admins only."""

    __tablename__ = "export_file"
    id: Mapped[int] = mapped_column(primary_key=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str] = mapped_column(String(4096))
    name: Mapped[str] = mapped_column(String(255))
    owner: Mapped[str | None] = mapped_column(String(128))
    actor: Mapped[str] = mapped_column(String(128), default="")
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class ExportItem(Base):
    """One item that went into a batch, with the hash of the version exported: an item is
    new for the next incremental batch if its (entity, entity_id, item_hash) is absent."""

    __tablename__ = "export_item"
    __table_args__ = (
        UniqueConstraint("batch_id", "entity", "entity_id", name="uq_export_item"),
        Index("ix_export_item_lookup", "kind", "entity", "entity_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    batch_id: Mapped[int] = mapped_column(ForeignKey("export_batch.id"))
    kind: Mapped[str] = mapped_column(String(16))  # copy of batch.kind for the lookup
    entity: Mapped[str] = mapped_column(String(32))  # review / trajectory / authored / candidate
    entity_id: Mapped[int] = mapped_column(Integer)
    item_hash: Mapped[str] = mapped_column(String(80), default="")
