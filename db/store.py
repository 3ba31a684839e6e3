"""`Store`: the one object through which Loupe reads and writes its database.

    store = Store("sqlite:///loupe.db")        # or a path, "sqlite://" (memory), any SQLAlchemy URL
    store.add_candidates(refs)                 # CandidateRefs -> AddReport(added, existing, errors)
    run_id = store.start_run("rules", None, "fast", {"max_turns": 8})
    store.record_trajectory(traj, run_id)      # agent.trajectory.Trajectory -> trajectory id
    cid = store.next_item("ada", QueueConfig(overlap=1))   # leases the item to "ada"
    store.record_review("ada", cid, "reject", comment="no C2 bands", seconds=7.5)

Opening a store runs the Alembic migrations up to head. Every write runs in one transaction
together with its `AuditEvent`; SQLite writes start with BEGIN IMMEDIATE so concurrent
writers queue on the busy timeout instead of failing on a lock upgrade (and threads of one
process queue on a Python lock first). SQLite runs in WAL mode with foreign keys on;
commits are fsynced except those that only move leases. On PostgreSQL, a review locks its
candidate row and lease hand-out takes an advisory lock, so counts stay exact.

Public methods (all take/return plain values, dataclasses or detached rows):
- candidates: `add_candidates`, `candidate` -> CandidateInfo, `find_candidate` (jump to
  id), `find_by_path`, `list_candidates(Filters)`, `count_candidates`, `load_spectrum`
  (read from its file through an LRU cache), `set_gold`, `set_split`, `tasks`
- agent runs: `start_run`, `record_trajectory`, `record_trajectories`, `trajectory`,
  `trajectories`, `done_keys`, `runs`
- queue: `next_item`, `claim`, `release`, `leases`, `auto_accept`, `set_setting`, `setting`
- reviews: `record_review`, `reviews`, `review`, `review_history`, `adjudicate`,
  `conflicts`
- experts: `create_expert`, `update_expert`, `ensure_expert`, `expert` (= `get_expert`),
  `experts` (= `list_experts`), `set_password`, `verify_password`, `login` -> token,
  `session_expert(token)` -> name, `logout` (argon2id hashes; only token hashes are kept)
- authored trajectories: `create_authored`, `update_authored`, `submit_authored`,
  `review_authored`, `authored`, `list_authored`
- exports: `labelled_candidates`, `exported_items`, `record_export`, `export_batches`
- dashboard: `dashboard_stats(task)` -> DashboardStats (aggregated in the database)
- audit: `audit_events`, `integrity_check`

Errors: `StoreError` (bad input, names the item), `NotFound`, `StorePermissionError`
(also a PermissionError: e.g. revising another expert's review).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import os
import secrets
import subprocess
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Engine,
    Integer,
    case,
    cast,
    create_engine,
    delete,
    event,
    exists,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from agent.catalog import CandidateRef
from agent.errors import LoupeError
from agent.trajectory import Step
from agent.trajectory import Trajectory as TrajectoryRecord
from db import models as m
from db.models import utcnow

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
REPO = Path(__file__).resolve().parent.parent
# Every command's --db default: the demo database `make run` seeds, or $LOUPE_DB.
DEFAULT_DB = os.environ.get("LOUPE_DB", "data/loupe.db")
UNVETTED_PRIORITY = 1e6  # candidates with no agent trajectory come after every vetted one


class StoreError(LoupeError, ValueError):
    """Bad input for the store; the message names the item and the problem."""


class NotFound(StoreError, LookupError):
    pass


class StorePermissionError(PermissionError):
    """An expert tried something their account may not do."""


# ---------------------------------------------------------------------------------------
# Pure rules the store applies inside its transactions (annotate re-exports them).


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


def derive_label(action: str, verdict: str | None, label: str | None) -> str | None:
    """The label a review sets: accept keeps the agent's verdict, reject flips it, correct
    takes the expert's; skip and flag set none.

    >>> derive_label("accept", "YES", None), derive_label("reject", "YES", None)
    ('YES', 'NO')
    >>> derive_label("correct", "YES", "YES"), derive_label("skip", "NO", None)
    ('YES', None)
    """
    if action not in m.ACTIONS:
        raise StoreError(f"unknown review action {action!r} (expected one of {m.ACTIONS})")
    if action in ("skip", "flag"):
        return None
    if action == "correct":
        if label not in m.LABELS:
            raise StoreError(f"'correct' needs a label YES or NO (got {label!r})")
        return label
    if verdict not in m.LABELS:
        raise StoreError(
            f"{action!r} judges the agent's verdict, but this item has none; use 'correct'"
        )
    if action == "accept":
        if label is not None and label != verdict:
            raise StoreError(f"accept keeps the agent's verdict {verdict}, not {label}")
        return verdict
    flipped = "NO" if verdict == "YES" else "YES"
    if label is not None and label != flipped:
        raise StoreError(f"reject flips the agent's verdict {verdict} to {flipped}, not {label}")
    return flipped


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


def code_version() -> str:
    """`git describe` of the checkout, else the installed package version."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from importlib.metadata import version

        return "loupe " + version("loupe")
    except Exception:
        return "unknown"


def file_hash(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return "sha256:" + h.hexdigest()


def run_fingerprint(policy: str, model: str | None, renderer: str, params: dict[str, Any]) -> str:
    blob = json.dumps([policy, model, renderer, params], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


_hasher = None

# argon2id at RFC 9106's second recommended setting (64 MiB, 3 passes, 4 lanes): about
# 50-100 ms and 64 MiB per guess, so a stolen database resists offline guessing. Pinned here
# rather than left to the library's defaults, which may change between releases.
ARGON2_PARAMS = {"time_cost": 3, "memory_cost": 64 * 1024, "parallelism": 4}


def _password_hasher():
    global _hasher
    if _hasher is None:
        from argon2 import PasswordHasher, Type

        _hasher = PasswordHasher(**ARGON2_PARAMS, hash_len=32, salt_len=16, type=Type.ID)
    return _hasher


def hash_password(password: str) -> str:
    """An argon2id hash (slow on purpose) of a non-empty password."""
    if not password:
        raise StoreError("password is empty")
    return _password_hasher().hash(password)


_DUMMY_HASH: str | None = None


def verify_password_hash(password_hash: str | None, password: str) -> bool:
    """True if `password` matches; an account without a hash never matches (but costs the
    same time, so a missing name cannot be told from a wrong password)."""
    global _DUMMY_HASH
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    hasher = _password_hasher()
    if password_hash is None:
        _DUMMY_HASH = _DUMMY_HASH or hasher.hash("not a password")
        password_hash, password = _DUMMY_HASH, password + "\0"
        try:
            hasher.verify(password_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            pass
        return False
    try:
        return hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _ref_key(path: str, hdu: Any, row: Any) -> str:
    return f"{path}|{'' if hdu is None else hdu}|{'' if row is None else row}"


@functools.lru_cache(maxsize=256)
def _load_spectrum_cached(path: str, hdu: Any, row: Any) -> Any:
    from agent.formats import load_one

    return load_one(Path(path), hdu=hdu, row=row)


# ---------------------------------------------------------------------------------------
# Plain records handed to callers.


@dataclass
class AddReport:
    added: int = 0
    existing: int = 0
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (index, item, reason)

    def __str__(self) -> str:
        return f"{self.added} added, {self.existing} already present, {len(self.errors)} refused"


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
    """

    overlap: int = 1
    gold_rate: float = 0.0
    auto_accept: float | None = None
    lease_seconds: float = 600.0


def _hdu_out(hdu: str | None) -> int | str | None:
    if hdu is None or hdu == "":
        return None
    return int(hdu) if hdu.lstrip("-").isdigit() else hdu


# ---------------------------------------------------------------------------------------


class Store:
    """Loupe's database. `url` is any SQLAlchemy URL or a plain file path (SQLite)."""

    def __init__(
        self,
        url: str | Path = DEFAULT_DB,
        *,
        migrate: bool = True,
        busy_timeout_ms: int = 30000,
        echo: bool = False,
    ):
        url_s = str(url)
        if "://" not in url_s:
            url_s = f"sqlite:///{Path(url_s).expanduser()}"
        self.url = make_url(url_s)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.is_postgres = self.url.get_backend_name() == "postgresql"
        memory = self.is_sqlite and self.url.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"echo": echo}
        if memory:
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
        elif self.is_sqlite:
            Path(self.url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kwargs.update(
                connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
            )
        else:
            kwargs.update(pool_pre_ping=True)
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            _install_sqlite_events(self.engine, busy_timeout_ms, wal=not memory)
        # One shared in-memory connection must not be used by two threads at once.
        self._lock = threading.RLock() if memory else None
        # Threads of one process queue for SQLite's single writer on a Python lock: handing
        # over is immediate, where SQLite's busy handler sleeps in growing steps.
        self._write_lock = threading.Lock() if self.is_sqlite and not memory else None
        self._read = sessionmaker(bind=self.engine, expire_on_commit=False)
        self._write_engine = self.engine.execution_options(loupe_write=True)
        self._write = sessionmaker(bind=self._write_engine, expire_on_commit=False)
        self._lease_engine = self.engine.execution_options(loupe_write=True, loupe_ephemeral=True)
        self._write_ephemeral = sessionmaker(bind=self._lease_engine, expire_on_commit=False)
        self._code_version: str | None = None
        if migrate:
            self.migrate()

    # -- plumbing -----------------------------------------------------------------------
    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (safe to call concurrently)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self._locked(), self._write_engine.begin() as conn:
            if self.is_postgres:
                conn.execute(text("SELECT pg_advisory_xact_lock(7401)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _locked(self):
        return self._lock if self._lock is not None else nullcontext()

    @contextmanager
    def _tx(self, ephemeral: bool = False) -> Iterator[Session]:
        """A write transaction: commits on success, rolls back on any error. `ephemeral`
        marks one that writes only leases, which need not wait for the disk."""
        wl = self._write_lock if self._write_lock is not None else nullcontext()
        maker = self._write_ephemeral if ephemeral else self._write
        with wl, self._locked(), maker() as s, s.begin():
            yield s

    @contextmanager
    def _ro(self) -> Iterator[Session]:
        with self._locked(), self._read() as s, s.begin():
            yield s

    @staticmethod
    def _audit(
        s: Session,
        actor: str,
        action: str,
        entity: str,
        entity_id: int | None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        s.add(
            m.AuditEvent(
                actor=actor,
                action=action,
                entity=entity,
                entity_id=entity_id,
                payload=payload or {},
            )
        )

    def code_version(self) -> str:
        if self._code_version is None:
            self._code_version = code_version()
        return self._code_version

    def integrity_check(self) -> str:
        """'ok' when the database file is sound (SQLite PRAGMA integrity_check)."""
        if not self.is_sqlite:
            return "ok"
        with self._locked(), self.engine.connect() as c:
            rows = c.exec_driver_sql("PRAGMA integrity_check").fetchall()
        return "; ".join(str(r[0]) for r in rows)

    # -- settings -----------------------------------------------------------------------
    def setting(self, key: str, default: Any = None) -> Any:
        return self.settings({key: default})[key]

    def settings(self, defaults: dict[str, Any]) -> dict[str, Any]:
        """Several settings in one read: key -> the stored value, else the default given."""
        with self._ro() as s:
            rows = s.scalars(select(m.Setting).where(m.Setting.key.in_(list(defaults))))
            stored = {r.key: r.value for r in rows}
        return {k: stored.get(k, {}).get("value", d) for k, d in defaults.items()}

    def set_setting(self, key: str, value: Any, actor: str = "admin") -> None:
        with self._tx() as s:
            row = s.get(m.Setting, key)
            if row is None:
                s.add(m.Setting(key=key, value={"value": value}))
            else:
                row.value = {"value": value}
                row.updated = utcnow()
            self._audit(s, actor, "set", "setting", None, {"key": key, "value": value})
            if key == "threshold":
                self._reprioritise(s, float(value))

    def _threshold(self, s: Session) -> float:
        row = s.get(m.Setting, "threshold")
        return 0.5 if row is None else float(row.value.get("value", 0.5))

    def _reprioritise(self, s: Session, threshold: float) -> None:
        rows = s.execute(
            select(
                m.Candidate.id, m.Candidate.confidence, m.Candidate.disagreement, m.Trajectory.state
            ).outerjoin(m.Trajectory, m.Trajectory.id == m.Candidate.trajectory_id)
        ).all()
        s.execute(
            update(m.Candidate),
            [
                {
                    "id": r.id,
                    "priority": queue_priority(
                        r.confidence,
                        vetted=r.state in _VETTED,
                        disagreement=r.disagreement,
                        threshold=threshold,
                    ),
                }
                for r in rows
            ],
        )

    # -- tasks and candidates -----------------------------------------------------------
    def _task_id(self, s: Session, name: str, create: bool = True) -> int:
        tid = s.scalar(select(m.Task.id).where(m.Task.name == name))
        if tid is None:
            if not create:
                raise NotFound(f"unknown task {name!r}")
            t = m.Task(name=name)
            s.add(t)
            s.flush()
            tid = t.id
        return tid

    def tasks(self) -> list[str]:
        with self._ro() as s:
            return list(s.scalars(select(m.Task.name).order_by(m.Task.name)))

    def surveys(self) -> list[str]:
        """The surveys named by any candidate, sorted."""
        with self._ro() as s:
            return sorted({v for v in s.scalars(select(m.Candidate.survey).distinct()) if v})

    def add_candidates(
        self,
        refs: Iterable[CandidateRef],
        *,
        source_catalog: str | None = None,
        split: str | None = None,
        gold: bool = False,
        meta: dict[int, dict[str, Any]] | None = None,
        hashes: dict[str, str] | None = None,
        actor: str = "ingest",
        batch_size: int = 5000,
    ) -> AddReport:
        """Insert candidates (and their spectra) that are not there yet.

        Idempotent: a candidate already present (same file reference and task, or same id
        and task) is counted in `existing`, never duplicated. A bad ref is refused with its
        index and reason in `errors`; the good ones are kept. `meta[i]` holds optional
        spectrum metadata for the i-th ref (survey, ra, dec, snr, obsid, survey_class, ...);
        `hashes` maps a path to its content hash. Each batch commits on its own.
        """
        report = AddReport()
        batch: list[tuple[int, CandidateRef, dict[str, Any]]] = []
        for i, ref in enumerate(refs):
            info = dict(ref.extra)
            if meta and i in meta:
                info.update(meta[i])
            problem = _check_ref(ref, info, split)
            if problem:
                report.errors.append((i, ref.id or ref.path or f"#{i}", problem))
                continue
            batch.append((i, ref, info))
            if len(batch) >= batch_size:
                self._add_batch(batch, report, source_catalog, split, gold, hashes, actor)
                batch = []
        if batch:
            self._add_batch(batch, report, source_catalog, split, gold, hashes, actor)
        return report

    def _add_batch(self, batch, report, source_catalog, split, gold, hashes, actor) -> None:
        now = utcnow()
        with self._tx() as s:
            task_ids = {name: self._task_id(s, name) for name in {r.task for _, r, _ in batch}}
            spec_rows: dict[str, dict[str, Any]] = {}
            for _, ref, info in batch:
                key = _ref_key(ref.path, ref.hdu, ref.row)
                if key in spec_rows:
                    continue
                spec_rows[key] = {
                    "ref_key": key,
                    "path": ref.path,
                    "hdu": None if ref.hdu is None else str(ref.hdu),
                    "row": ref.row,
                    "content_hash": (hashes or {}).get(ref.path) or info.get("content_hash"),
                    "survey": info.get("survey"),
                    "obsid": _str_or_none(info.get("obsid")),
                    "ra": _float_or_none(info.get("ra")),
                    "dec": _float_or_none(info.get("dec")),
                    "snr": _float_or_none(info.get("snr")),
                    "survey_class": info.get("survey_class"),
                    "survey_subclass": info.get("survey_subclass"),
                    "simulated": bool(info.get("simulated", False)),
                    "extra": {
                        k: v for k, v in info.items() if k not in _KNOWN_INFO and _jsonable(v)
                    },
                    "created": now,
                }
            conn = s.connection()
            self._bulk_insert_ignore(conn, m.Spectrum, list(spec_rows.values()))
            keys = list(spec_rows)
            spec_ids: dict[str, int] = {}
            for j in range(0, len(keys), 500):
                chunk = keys[j : j + 500]
                spec_ids.update(
                    s.execute(
                        select(m.Spectrum.ref_key, m.Spectrum.id).where(
                            m.Spectrum.ref_key.in_(chunk)
                        )
                    ).all()
                )
            threshold = self._threshold(s)
            cand_rows = []
            seen: set[tuple[str, int]] = set()
            for _, ref, info in batch:
                sid = spec_ids[_ref_key(ref.path, ref.hdu, ref.row)]
                tid = task_ids[ref.task]
                if (ref.id, tid) in seen:
                    continue
                seen.add((ref.id, tid))
                is_gold = bool(info.get("gold", gold))
                gold_label = info.get("gold_label") or (ref.label if is_gold else None)
                cand_rows.append(
                    {
                        "key": ref.id,
                        "object_id": str(info.get("object_id") or ref.id),
                        "spectrum_id": sid,
                        "task_id": tid,
                        "score": _float_or_none(info.get("score")),
                        "source_catalog": info.get("source_catalog") or source_catalog,
                        "split": info.get("split") or split,
                        "survey": info.get("survey"),
                        "is_gold": is_gold,
                        "gold_label": gold_label,
                        "known_label": ref.label,
                        "priority": queue_priority(None, vetted=False, threshold=threshold),
                        "created": now,
                        "updated": now,
                    }
                )
            added = self._bulk_insert_ignore(conn, m.Candidate, cand_rows)
            report.added += added
            report.existing += len(batch) - added
            self._audit(
                s,
                actor,
                "add_candidates",
                "candidate",
                None,
                {
                    "added": added,
                    "offered": len(batch),
                    "first": batch[0][1].id,
                    "last": batch[-1][1].id,
                },
            )

    def _bulk_insert_ignore(self, conn, model: type[m.Base], rows: list[dict[str, Any]]) -> int:
        """INSERT ... ON CONFLICT DO NOTHING through the driver's executemany; returns the
        number of rows inserted. (SQLAlchemy's per-row parameter processing costs several
        times the insert itself at ingest sizes.)"""
        if not rows:
            return 0
        table = model.__table__
        defaults = {}
        for col in table.columns:  # the Python-side defaults Core would have applied
            if col.name not in rows[0] and col.default is not None and not col.primary_key:
                arg = col.default.arg
                defaults[col.name] = arg(None) if col.default.is_callable else arg
        rows = [{**defaults, **r} for r in rows] if defaults else rows
        cols = list(rows[0])
        json_cols = {c for c in cols if isinstance(table.c[c].type, JSON)}
        ph = "?" if self.is_sqlite else "%s"
        sql = (
            f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([ph] * len(cols))})"
            " ON CONFLICT DO NOTHING"
        )

        params = [[r[c] for c in cols] for r in rows]
        for i, c in enumerate(cols):
            if c in json_cols:
                for p in params:
                    p[i] = json.dumps(p[i])
            elif self.is_sqlite and isinstance(rows[0][c], dt.datetime):
                cache: dict[Any, str] = {}
                for p in params:
                    v = p[i]
                    if isinstance(v, dt.datetime):
                        p[i] = cache.get(v) or cache.setdefault(
                            v, v.strftime("%Y-%m-%d %H:%M:%S.%f")
                        )
        result = conn.exec_driver_sql(sql, [tuple(p) for p in params])
        return max(int(result.rowcount), 0)

    def _info(self, s: Session, c: m.Candidate) -> CandidateInfo:
        sp = s.get(m.Spectrum, c.spectrum_id)
        task = s.scalar(select(m.Task.name).where(m.Task.id == c.task_id))
        return CandidateInfo(
            id=c.id,
            key=c.key,
            task=task,
            object_id=c.object_id,
            spectrum_ref={"path": sp.path, "hdu": _hdu_out(sp.hdu), "row": sp.row},
            spectrum_id=sp.id,
            survey=c.survey or sp.survey,
            split=c.split,
            score=c.score,
            source_catalog=c.source_catalog,
            is_gold=c.is_gold,
            gold_label=c.gold_label,
            known_label=c.known_label,
            trajectory_id=c.trajectory_id,
            verdict=c.verdict,
            confidence=c.confidence,
            disagreement=c.disagreement,
            priority=c.priority,
            review_count=c.review_count,
            n_yes=c.n_yes,
            n_no=c.n_no,
            flagged=c.flagged,
            auto=c.auto,
            label=c.label,
            label_source=c.label_source,
            adjudicated_label=c.adjudicated_label,
        )

    def candidate(self, candidate_id: int) -> CandidateInfo:
        with self._ro() as s:
            c = s.get(m.Candidate, candidate_id)
            if c is None:
                raise NotFound(f"no candidate #{candidate_id}")
            return self._info(s, c)

    def find_candidate(self, key: str, task: str | None = None) -> CandidateInfo | None:
        """Jump-to-id: the candidate with this id (and task, when the id has several);
        a number also matches the internal id."""
        with self._ro() as s:
            q = select(m.Candidate).where(m.Candidate.key == key)
            if task is not None:
                q = q.join(m.Task, m.Task.id == m.Candidate.task_id).where(m.Task.name == task)
            c = s.scalars(q.order_by(m.Candidate.id).limit(1)).first()
            if c is None and str(key).isdigit():
                c = s.get(m.Candidate, int(key))
            return None if c is None else self._info(s, c)

    def find_by_path(self, path: str, task: str) -> CandidateInfo | None:
        with self._ro() as s:
            q = (
                select(m.Candidate)
                .join(m.Spectrum, m.Spectrum.id == m.Candidate.spectrum_id)
                .join(m.Task, m.Task.id == m.Candidate.task_id)
                .where(m.Spectrum.path == path, m.Task.name == task)
                .order_by(m.Candidate.id)
                .limit(1)
            )
            c = s.scalars(q).first()
            return None if c is None else self._info(s, c)

    def _filtered(self, s: Session, q, filters: Filters | None):
        if filters is None:
            return q
        if filters.task is not None:
            q = q.where(m.Candidate.task_id == self._task_id(s, filters.task, create=False))
        if filters.confidence_min is not None:
            q = q.where(m.Candidate.confidence >= filters.confidence_min)
        if filters.confidence_max is not None:
            q = q.where(m.Candidate.confidence <= filters.confidence_max)
        if filters.survey is not None:
            q = q.where(m.Candidate.survey == filters.survey)
        if filters.split is not None:
            q = q.where(m.Candidate.split == filters.split)
        if filters.max_reviews is not None:
            q = q.where(m.Candidate.review_count <= filters.max_reviews)
        if filters.gold is not None:
            q = q.where(m.Candidate.is_gold.is_(filters.gold))
        st = filters.status
        if st == "unreviewed":
            q = q.where(m.Candidate.review_count == 0)
        elif st == "reviewed":
            q = q.where(m.Candidate.review_count > 0)
        elif st == "conflict":
            q = q.where(
                m.Candidate.n_yes > 0, m.Candidate.n_no > 0, m.Candidate.adjudicated_label.is_(None)
            )
        elif st == "flagged":
            q = q.where(m.Candidate.flagged.is_(True))
        elif st is not None:
            raise StoreError(f"unknown status filter {st!r}")
        return q

    def list_candidates(
        self,
        filters: Filters | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        order: str = "priority",
    ) -> list[CandidateInfo]:
        order_by = {"priority": (m.Candidate.priority, m.Candidate.id), "id": (m.Candidate.id,)}[
            order
        ]
        with self._ro() as s:
            try:
                q = self._filtered(s, select(m.Candidate), filters)
            except NotFound:
                return []
            rows = s.scalars(q.order_by(*order_by).limit(limit).offset(offset)).all()
            return [self._info(s, c) for c in rows]

    def count_candidates(self, filters: Filters | None = None) -> int:
        with self._ro() as s:
            try:
                q = self._filtered(s, select(func.count()).select_from(m.Candidate), filters)
            except NotFound:
                return 0
            return int(s.scalar(q))

    def load_spectrum(self, candidate_id: int):
        """The candidate's spectrum, read from its file through an LRU cache."""
        info = self.candidate(candidate_id)
        r = info.spectrum_ref
        spec = _load_spectrum_cached(r["path"], r["hdu"], r["row"])
        spec = spec.replace(meta=type(spec.meta)(**{**spec.meta.__dict__, "id": info.key}))
        return spec

    def set_gold(self, candidate_id: int, label: str | None, actor: str = "admin") -> None:
        if label is not None and label not in m.LABELS:
            raise StoreError(f"gold label must be YES or NO (got {label!r})")
        with self._tx() as s:
            c = self._get_candidate(s, candidate_id)
            c.is_gold, c.gold_label = label is not None, label
            self._audit(s, actor, "set_gold", "candidate", c.id, {"label": label})

    def set_split(self, candidate_ids: Sequence[int], split: str, actor: str = "admin") -> None:
        if split not in m.SPLITS:
            raise StoreError(f"split must be one of {m.SPLITS} (got {split!r})")
        with self._tx() as s:
            s.execute(
                update(m.Candidate)
                .where(m.Candidate.id.in_(list(candidate_ids)))
                .values(split=split)
            )
            self._audit(
                s,
                actor,
                "set_split",
                "candidate",
                None,
                {"ids": list(candidate_ids), "split": split},
            )

    def _get_candidate(self, s: Session, candidate_id: int, lock: bool = False) -> m.Candidate:
        q = select(m.Candidate).where(m.Candidate.id == candidate_id)
        if lock:
            q = q.with_for_update()
        c = s.scalars(q).first()
        if c is None:
            raise NotFound(f"no candidate #{candidate_id}")
        return c

    # -- agent runs and trajectories ----------------------------------------------------
    def start_run(
        self,
        policy: str,
        model: str | None = None,
        renderer: str = "fast",
        params: dict[str, Any] | None = None,
        actor: str = "vet",
    ) -> int:
        """The run with this set-up (policy, model, renderer, params), created if new."""
        with self._tx() as s:
            return self._run_id(s, policy, model, renderer, params or {}, actor)

    def _run_id(self, s: Session, policy, model, renderer, params, actor) -> int:
        fp = run_fingerprint(policy, model, renderer, params)
        rid = s.scalar(select(m.AgentRun.id).where(m.AgentRun.fingerprint == fp))
        if rid is None:
            run = m.AgentRun(
                fingerprint=fp,
                policy=policy,
                model=model,
                renderer=renderer,
                params=json.loads(json.dumps(params, default=str)),
                code_version=self.code_version(),
            )
            s.add(run)
            s.flush()
            rid = run.id
            self._audit(
                s,
                actor,
                "start_run",
                "agent_run",
                rid,
                {"policy": policy, "model": model, "renderer": renderer},
            )
        return rid

    def runs(self) -> list[m.AgentRun]:
        with self._ro() as s:
            return list(s.scalars(select(m.AgentRun).order_by(m.AgentRun.id)))

    def record_trajectory(
        self, traj: TrajectoryRecord, run_id: int | None = None, actor: str = "vet"
    ) -> int:
        """Store one agent trajectory (replacing that run's earlier one for the candidate)."""
        return self.record_trajectories([traj], run_id, actor)[0]

    def record_trajectories(
        self, trajs: Sequence[TrajectoryRecord], run_id: int | None = None, actor: str = "vet"
    ) -> list[int]:
        """Store several trajectories in one transaction; a candidate not yet in the store
        is created from the trajectory's spectrum_ref."""
        for t in trajs:
            _check_trajectory(t)
        with self._tx() as s:
            threshold = self._threshold(s)
            out = []
            for t in trajs:
                rid = (
                    run_id
                    if run_id is not None
                    else self._run_id(s, t.policy, t.model, t.renderer, t.params, actor)
                )
                c = self._candidate_for(s, t)
                row = s.scalars(
                    select(m.Trajectory).where(
                        m.Trajectory.run_id == rid, m.Trajectory.candidate_id == c.id
                    )
                ).first()
                fields = dict(
                    steps=[st.to_dict() for st in t.steps],
                    verdict=t.verdict,
                    explanation=t.explanation or "",
                    confidence=_float_or_none(t.confidence),
                    format_ok=bool(t.format_ok),
                    state=t.state,
                    error=t.error,
                    seconds=float(t.seconds or 0.0),
                    started_at=t.started_at,
                )
                fields["steps"] = json.loads(json.dumps(fields["steps"], default=_json_default))
                if row is None:
                    row = m.Trajectory(run_id=rid, candidate_id=c.id, **fields)
                    s.add(row)
                else:
                    for k, v in fields.items():
                        setattr(row, k, v)
                    row.created = utcnow()
                s.flush()
                # The item shows the newest trajectory with a verdict: a failed or unfinished
                # run of another policy does not hide a finished one.
                shown = s.get(m.Trajectory, c.trajectory_id) if c.trajectory_id else None
                if shown is None or shown.id == row.id or row.verdict or not shown.verdict:
                    c.trajectory_id, c.verdict, c.confidence = row.id, row.verdict, row.confidence
                self._refresh_candidate(s, c, threshold)
                self._audit(
                    s,
                    actor,
                    "record_trajectory",
                    "trajectory",
                    row.id,
                    {
                        "candidate": c.key,
                        "task": t.task,
                        "run": rid,
                        "verdict": t.verdict,
                        "state": t.state,
                    },
                )
                out.append(row.id)
            return out

    def _candidate_for(self, s: Session, t: TrajectoryRecord) -> m.Candidate:
        tid = self._task_id(s, t.task)
        c = s.scalars(
            select(m.Candidate).where(m.Candidate.key == t.id, m.Candidate.task_id == tid)
        ).first()
        if c is not None:
            return c
        ref = t.spectrum_ref or {}
        path = str(ref.get("path") or "")
        if not path:
            raise StoreError(
                f"{t.id}: candidate not in the store and trajectory has no spectrum path"
            )
        key = _ref_key(path, ref.get("hdu"), ref.get("row"))
        sp = s.scalars(select(m.Spectrum).where(m.Spectrum.ref_key == key)).first()
        if sp is None:
            hdu = ref.get("hdu")
            sp = m.Spectrum(
                ref_key=key,
                path=path,
                hdu=None if hdu is None else str(hdu),
                row=ref.get("row"),
                extra={},
            )
            s.add(sp)
            s.flush()
        c = m.Candidate(
            key=t.id,
            object_id=t.id,
            spectrum_id=sp.id,
            task_id=tid,
            known_label=t.label if t.label in m.LABELS else None,
            priority=UNVETTED_PRIORITY,
        )
        s.add(c)
        s.flush()
        return c

    def _to_record(self, s: Session, row: m.Trajectory) -> TrajectoryRecord:
        c = s.get(m.Candidate, row.candidate_id)
        run = s.get(m.AgentRun, row.run_id)
        info = self._info(s, c)
        return trajectory_record(row, run, c.key, info.task, info.spectrum_ref, c.known_label)

    def trajectory(self, trajectory_id: int) -> TrajectoryRecord:
        with self._ro() as s:
            row = s.get(m.Trajectory, trajectory_id)
            if row is None:
                raise NotFound(f"no trajectory #{trajectory_id}")
            return self._to_record(s, row)

    def trajectory_records(self, ids: Sequence[int]) -> dict[int, TrajectoryRecord]:
        """trajectory id -> record, as `trajectory` builds it, read in bulk (one query per
        500 ids, the candidate, task, spectrum and run joined in); unknown ids are left out."""
        ids = list(ids)
        out: dict[int, TrajectoryRecord] = {}
        with self._ro() as s:
            runs = {r.id: r for r in s.scalars(select(m.AgentRun))}
            C, S = m.Candidate, m.Spectrum
            for j in range(0, len(ids), 500):
                q = (
                    select(m.Trajectory, C.key, C.known_label, m.Task.name, S.path, S.hdu, S.row)
                    .join(C, C.id == m.Trajectory.candidate_id)
                    .join(m.Task, m.Task.id == C.task_id)
                    .join(S, S.id == C.spectrum_id)
                    .where(m.Trajectory.id.in_(ids[j : j + 500]))
                )
                for row, key, known, task, path, hdu, n in s.execute(q):
                    ref = {"path": path, "hdu": _hdu_out(hdu), "row": n}
                    out[row.id] = trajectory_record(row, runs[row.run_id], key, task, ref, known)
        return out

    def trajectories(self, candidate_id: int) -> list[tuple[int, TrajectoryRecord]]:
        """(trajectory id, record) for every run over this candidate, oldest first."""
        with self._ro() as s:
            rows = s.scalars(
                select(m.Trajectory)
                .where(m.Trajectory.candidate_id == candidate_id)
                .order_by(m.Trajectory.id)
            ).all()
            return [(r.id, self._to_record(s, r)) for r in rows]

    def done_keys(
        self, policy: str | None = None, model: str | None = None, run_id: int | None = None
    ) -> set[tuple[str, str]]:
        """(candidate id, task) pairs that already have a trajectory (any state but
        'running') from runs matching policy/model/run_id: what a resumed run skips. An
        'error' record counts as done, as in the JSONL sink, so an unreadable file is not
        retried forever; a later record for the same run replaces it."""
        with self._ro() as s:
            q = (
                select(m.Candidate.key, m.Task.name)
                .join(m.Trajectory, m.Trajectory.candidate_id == m.Candidate.id)
                .join(m.AgentRun, m.AgentRun.id == m.Trajectory.run_id)
                .join(m.Task, m.Task.id == m.Candidate.task_id)
                .where(m.Trajectory.state != "running")
            )
            if policy is not None:
                q = q.where(m.AgentRun.policy == policy)
            if model is not None:
                q = q.where(m.AgentRun.model == model)
            if run_id is not None:
                q = q.where(m.AgentRun.id == run_id)
            return set(s.execute(q).tuples())

    def _refresh_candidate(self, s: Session, c: m.Candidate, threshold: float) -> None:
        """Recompute the candidate's denormalised review and queue columns."""
        rows = s.execute(
            select(m.Review.action, m.Review.label).where(m.Review.candidate_id == c.id)
        ).all()
        labels = [r.label for r in rows if r.action in m.LABEL_ACTIONS and r.label in m.LABELS]
        c.n_yes, c.n_no = labels.count("YES"), labels.count("NO")
        c.review_count = len(labels)
        c.flagged = any(r.action == "flag" for r in rows)
        verdicts = set(
            s.scalars(
                select(m.Trajectory.verdict).where(
                    m.Trajectory.candidate_id == c.id, m.Trajectory.verdict.is_not(None)
                )
            )
        )
        c.disagreement = len(verdicts) > 1 or (
            c.verdict is not None and any(lab != c.verdict for lab in labels)
        )
        c.priority = queue_priority(
            c.confidence,
            # a failed run (unreadable file, backend error) gives a human nothing to judge
            vetted=c.trajectory_id is not None
            and getattr(s.get(m.Trajectory, c.trajectory_id), "state", "error") in _VETTED,
            disagreement=c.disagreement,
            threshold=threshold,
        )
        label = resolve_label(c.n_yes, c.n_no, c.adjudicated_label)
        if c.adjudicated_label is not None:
            c.label, c.label_source = label, "adjudication"
        elif c.review_count:
            c.label, c.label_source = label, "review"
        elif c.auto:
            c.label, c.label_source = c.verdict, "auto"
        else:
            c.label, c.label_source = None, None
        c.updated = utcnow()

    # -- experts ------------------------------------------------------------------------
    def _expert(self, s: Session, who: str | int) -> m.Expert:
        q = select(m.Expert).where(
            m.Expert.id == who if isinstance(who, int) else m.Expert.name == who
        )
        e = s.scalars(q).first()
        if e is None:
            raise NotFound(f"no expert {who!r}")
        return e

    def create_expert(
        self,
        name: str,
        role: str = "expert",
        password_hash: str | None = None,
        actor: str = "admin",
    ) -> m.Expert:
        name = (name or "").strip()
        if not name:
            raise StoreError("expert name is empty")
        if role not in m.ROLES:
            raise StoreError(f"role must be one of {m.ROLES} (got {role!r})")
        with self._tx() as s:
            if s.scalar(select(m.Expert.id).where(m.Expert.name == name)) is not None:
                raise StoreError(f"expert {name!r} already exists")
            e = m.Expert(name=name, role=role, password_hash=password_hash)
            s.add(e)
            s.flush()
            self._audit(s, actor, "create_expert", "expert", e.id, {"name": name, "role": role})
            return e

    def update_expert(
        self,
        name: str,
        *,
        role: str | None = None,
        password_hash: str | None = None,
        active: bool | None = None,
        actor: str = "admin",
    ) -> m.Expert:
        if role is not None and role not in m.ROLES:
            raise StoreError(f"role must be one of {m.ROLES} (got {role!r})")
        with self._tx() as s:
            e = self._expert(s, name)
            changed = {}
            if role is not None:
                e.role = changed["role"] = role
            if password_hash is not None:
                e.password_hash = password_hash
                changed["password"] = "changed"
                s.execute(delete(m.ExpertSession).where(m.ExpertSession.expert_id == e.id))
            if active is not None:
                e.active = changed["active"] = bool(active)
            self._audit(s, actor, "update_expert", "expert", e.id, changed)
            return e

    def expert(self, who: str | int) -> m.Expert | None:
        with self._ro() as s:
            try:
                return self._expert(s, who)
            except NotFound:
                return None

    def experts(self) -> list[m.Expert]:
        with self._ro() as s:
            return list(s.scalars(select(m.Expert).order_by(m.Expert.name)))

    def ensure_expert(self, name: str, role: str = "expert") -> m.Expert:
        """The expert called `name`, created (without a password) if absent."""
        e = self.expert(name)
        if e is not None:
            return e
        try:
            return self.create_expert(name, role)
        except StoreError:  # created meanwhile by another process
            e = self.expert(name)
            if e is None:
                raise
            return e

    def set_password(self, name: str, password: str, actor: str = "admin") -> m.Expert:
        return self.update_expert(name, password_hash=hash_password(password), actor=actor)

    def verify_password(self, name: str, password: str) -> m.Expert | None:
        """The active expert if `password` is theirs, else None (same cost either way)."""
        e = self.expert(name) if name else None
        ok = verify_password_hash(e.password_hash if e is not None else None, password or "")
        return e if ok and e is not None and e.active else None

    def login(self, name: str, password: str, ttl_seconds: float = 12 * 3600) -> str | None:
        """A new session token for a correct name and password, else None."""
        e = self.verify_password(name, password)
        if e is None:
            with self._tx() as s:
                self._audit(s, name or "", "login_failed", "expert", None)
            return None
        token = secrets.token_urlsafe(32)
        expires = utcnow() + dt.timedelta(seconds=ttl_seconds)
        with self._tx() as s:
            s.execute(delete(m.ExpertSession).where(m.ExpertSession.expires < utcnow()))
            s.add(m.ExpertSession(token_hash=_token_hash(token), expert_id=e.id, expires=expires))
            self._audit(s, e.name, "login", "expert", e.id)
        return token

    def session_expert(self, token: str | None) -> str | None:
        """The name of the active expert owning this unexpired session token, else None."""
        if not token:
            return None
        with self._ro() as s:
            row = s.get(m.ExpertSession, _token_hash(token))
            if row is None or row.expires <= utcnow():
                return None
            e = s.get(m.Expert, row.expert_id)
            return e.name if e is not None and e.active else None

    def logout(self, token: str) -> None:
        with self._tx() as s:
            row = s.get(m.ExpertSession, _token_hash(token))
            if row is not None:
                s.delete(row)
                self._audit(s, str(row.expert_id), "logout", "expert", row.expert_id)

    get_expert = expert
    list_experts = experts

    # -- queue --------------------------------------------------------------------------
    def next_item(
        self,
        expert: str | int,
        config: QueueConfig | None = None,
        filters: Filters | None = None,
        *,
        gold: bool | None = None,
    ) -> int | None:
        """Lease and return the id of the next candidate `expert` should review, or None.

        Order: fewest reviews so far (every item gets its first look before second looks),
        then `priority` (closest to the threshold, disagreements first within a band). An
        item is served while its reviews plus other experts' live leases stay under
        `config.overlap`, never to an expert who already reviewed (or skipped) it. Every
        `round(1/gold_rate)`-th item is drawn from the gold set when `gold` is None. An item
        the expert already holds a live lease on is served again first.
        """
        config = config or QueueConfig()
        if config.overlap < 1:
            raise StoreError(f"overlap must be >= 1 (got {config.overlap})")
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            if self.is_postgres:
                s.execute(text("SELECT pg_advisory_xact_lock(7402)"))
            now = utcnow()
            try:
                base = self._filtered(s, select(m.Candidate.id), filters)
            except NotFound:
                return None
            held = s.scalar(
                base.join(m.Lease, m.Lease.candidate_id == m.Candidate.id)
                .where(m.Lease.expert_id == e.id, m.Lease.expires > now)
                .order_by(m.Lease.created)
                .limit(1)
            )
            if held is not None and not s.scalar(
                select(exists().where(m.Review.candidate_id == held, m.Review.expert_id == e.id))
            ):
                cid = held
            else:
                if gold is None:
                    period = round(1 / config.gold_rate) if config.gold_rate > 0 else 0
                    gold = bool(period) and (e.review_count % period == period - 1)
                order = [gold, not gold] if config.gold_rate > 0 or gold else [False]
                cid = None
                for g in order:
                    cid = s.scalar(self._queue_query(base, e.id, now, config, g))
                    if cid is not None:
                        break
                if cid is None:
                    return None
            self._lease(s, cid, e.id, now, config.lease_seconds)
            return cid

    def _queue_query(self, base, expert_id: int, now, config: QueueConfig, gold: bool):
        C = m.Candidate
        mine = exists().where(m.Review.candidate_id == C.id, m.Review.expert_id == expert_id)
        q = base.where(C.is_gold.is_(gold), C.auto.is_(False), ~mine)
        if not gold:
            others = (
                select(func.count())
                .select_from(m.Lease)
                .where(
                    m.Lease.candidate_id == C.id,
                    m.Lease.expires > now,
                    m.Lease.expert_id != expert_id,
                )
                .scalar_subquery()
            )
            q = q.where(C.review_count < config.overlap, C.review_count + others < config.overlap)
        if config.auto_accept is not None:
            lo, hi = 1.0 - config.auto_accept, config.auto_accept
            q = q.where(or_(C.confidence.is_(None), (C.confidence > lo) & (C.confidence < hi)))
        return q.order_by(C.review_count, C.priority, C.id).limit(1)

    def _lease(self, s: Session, cid: int, expert_id: int, now, seconds: float) -> None:
        expires = now + dt.timedelta(seconds=seconds)
        # One item at a time per expert: serving a new one releases the previous lease.
        s.execute(
            delete(m.Lease).where(m.Lease.expert_id == expert_id, m.Lease.candidate_id != cid)
        )
        row = s.scalars(
            select(m.Lease).where(m.Lease.expert_id == expert_id, m.Lease.candidate_id == cid)
        ).first()
        if row is None:
            s.add(m.Lease(candidate_id=cid, expert_id=expert_id, expires=expires, created=now))
        else:
            row.expires = expires

    def claim(
        self, expert: str | int, candidate_id: int, lease_seconds: float = 600.0
    ) -> list[str]:
        """Lease a chosen item (jump-to-id); returns the names of other experts holding a
        live lease on it, so the app can warn."""
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            self._get_candidate(s, candidate_id)
            now = utcnow()
            others = list(
                s.scalars(
                    select(m.Expert.name)
                    .join(m.Lease, m.Lease.expert_id == m.Expert.id)
                    .where(
                        m.Lease.candidate_id == candidate_id,
                        m.Lease.expires > now,
                        m.Lease.expert_id != e.id,
                    )
                )
            )
            self._lease(s, candidate_id, e.id, now, lease_seconds)
            return others

    def release(self, expert: str | int, candidate_id: int | None = None) -> None:
        with self._tx(ephemeral=True) as s:
            e = self._expert(s, expert)
            q = delete(m.Lease).where(m.Lease.expert_id == e.id)
            if candidate_id is not None:
                q = q.where(m.Lease.candidate_id == candidate_id)
            s.execute(q)

    def leases(self, candidate_id: int | None = None, live: bool = True) -> list[m.Lease]:
        with self._ro() as s:
            q = select(m.Lease)
            if candidate_id is not None:
                q = q.where(m.Lease.candidate_id == candidate_id)
            if live:
                q = q.where(m.Lease.expires > utcnow())
            return list(s.scalars(q.order_by(m.Lease.id)))

    def auto_accept(
        self, min_certainty: float, task: str | None = None, actor: str = "admin"
    ) -> int:
        """Label unreviewed items whose agent certainty max(p, 1-p) >= min_certainty with
        the agent's verdict (label_source 'auto') and take them out of the queue."""
        if not 0.5 <= min_certainty <= 1.0:
            raise StoreError(f"auto-accept certainty must be in [0.5, 1] (got {min_certainty})")
        C = m.Candidate
        with self._tx() as s:
            q = (
                update(C)
                .where(
                    C.review_count == 0,
                    C.auto.is_(False),
                    C.is_gold.is_(False),
                    C.verdict.is_not(None),
                    C.confidence.is_not(None),
                    or_(C.confidence >= min_certainty, C.confidence <= 1.0 - min_certainty),
                )
                .values(auto=True, label=C.verdict, label_source="auto")
            )
            if task is not None:
                q = q.where(C.task_id == self._task_id(s, task, create=False))
            n = s.execute(q).rowcount
            self._audit(
                s,
                actor,
                "auto_accept",
                "candidate",
                None,
                {"min_certainty": min_certainty, "task": task, "count": n},
            )
            return n

    # -- reviews ------------------------------------------------------------------------
    def record_review(
        self,
        expert: str | int,
        candidate_id: int,
        action: str,
        *,
        label: str | None = None,
        explanation: str | None = None,
        wrong_step: int | None = None,
        comment: str | None = None,
        seconds: float | None = None,
        trajectory_id: int | None = None,
        review_id: int | None = None,
        source: str = "app",
    ) -> m.Review:
        """Record (or revise) `expert`'s review of a candidate; returns the stored review.

        accept/reject judge the agent trajectory shown (`trajectory_id`, default the
        candidate's current one); correct sets `label` and may name the `wrong_step` and a
        corrected `explanation`. One review per expert and candidate: a second call is a
        revision (the old version goes to review_history), and an identical repeat is a
        no-op, so a retried request never stores twice. Passing `review_id` of another
        expert's review raises StorePermissionError.
        """
        if seconds is not None and (not math.isfinite(seconds) or seconds < 0):
            raise StoreError(f"seconds on item must be a non-negative number (got {seconds})")
        with self._tx() as s:
            e = self._expert(s, expert)
            if not e.active:
                raise StorePermissionError(f"expert {e.name!r} is deactivated")
            c = self._get_candidate(s, candidate_id, lock=True)
            existing = None
            if review_id is not None:
                existing = s.get(m.Review, review_id)
                if existing is None:
                    raise NotFound(f"no review #{review_id}")
                if existing.expert_id != e.id:
                    owner = s.get(m.Expert, existing.expert_id)
                    raise StorePermissionError(
                        f"review #{review_id} belongs to {owner.name!r}; "
                        f"{e.name!r} may revise only their own reviews"
                    )
                if existing.candidate_id != c.id:
                    raise StoreError(f"review #{review_id} is not about candidate #{c.id}")
            else:
                existing = s.scalars(
                    select(m.Review).where(
                        m.Review.candidate_id == c.id, m.Review.expert_id == e.id
                    )
                ).first()
            tid = trajectory_id if trajectory_id is not None else c.trajectory_id
            verdict, n_steps = None, None
            if tid is not None:
                tr = s.get(m.Trajectory, tid)
                if tr is None or tr.candidate_id != c.id:
                    raise StoreError(f"trajectory #{tid} is not a trajectory of candidate #{c.id}")
                verdict, n_steps = tr.verdict, len(tr.steps or [])
            try:
                new_label = derive_label(action, verdict, label)
            except StoreError as err:
                raise StoreError(f"candidate {c.key} (#{c.id}): {err}") from None
            if wrong_step is not None:
                if action not in ("correct", "reject"):
                    raise StoreError(f"wrong_step applies to reject/correct, not {action!r}")
                if n_steps is None or not 0 <= wrong_step < n_steps:
                    raise StoreError(
                        f"candidate {c.key}: wrong_step {wrong_step} is not a step "
                        f"of the trajectory judged ({n_steps or 0} steps)"
                    )
            values = dict(
                trajectory_id=tid,
                action=action,
                label=new_label,
                explanation=explanation,
                wrong_step=wrong_step,
                comment=comment,
            )
            if existing is not None:
                if all(getattr(existing, k) == v for k, v in values.items()):
                    return existing  # an identical retry
                s.add(
                    m.ReviewRevision(
                        review_id=existing.id,
                        revision=existing.revision,
                        trajectory_id=existing.trajectory_id,
                        action=existing.action,
                        label=existing.label,
                        explanation=existing.explanation,
                        wrong_step=existing.wrong_step,
                        comment=existing.comment,
                        seconds=existing.seconds,
                        recorded=existing.updated,
                    )
                )
                for k, v in values.items():
                    setattr(existing, k, v)
                existing.seconds = seconds
                existing.revision += 1
                existing.updated = utcnow()
                review, verb = existing, "revise_review"
            else:
                review = m.Review(
                    candidate_id=c.id, expert_id=e.id, seconds=seconds, source=source, **values
                )
                s.add(review)
                s.execute(
                    update(m.Expert)
                    .where(m.Expert.id == e.id)
                    .values(review_count=m.Expert.review_count + 1)
                )
                verb = "review"
            s.flush()
            s.execute(
                delete(m.Lease).where(m.Lease.candidate_id == c.id, m.Lease.expert_id == e.id)
            )
            self._refresh_candidate(s, c, self._threshold(s))
            self._audit(
                s,
                e.name,
                verb,
                "review",
                review.id,
                {
                    "candidate": c.id,
                    "action": action,
                    "label": new_label,
                    "revision": review.revision,
                    "source": source,
                },
            )
            return review

    def review(self, review_id: int) -> m.Review:
        with self._ro() as s:
            r = s.get(m.Review, review_id)
            if r is None:
                raise NotFound(f"no review #{review_id}")
            return r

    def reviews(
        self,
        *,
        candidate_id: int | None = None,
        expert: str | int | None = None,
        task: str | None = None,
        actions: Sequence[str] | None = None,
        since_id: int | None = None,
        limit: int | None = None,
    ) -> list[m.Review]:
        with self._ro() as s:
            q = select(m.Review)
            if candidate_id is not None:
                q = q.where(m.Review.candidate_id == candidate_id)
            if expert is not None:
                q = q.where(m.Review.expert_id == self._expert(s, expert).id)
            if task is not None:
                q = q.join(m.Candidate, m.Candidate.id == m.Review.candidate_id).where(
                    m.Candidate.task_id == self._task_id(s, task, create=False)
                )
            if actions is not None:
                q = q.where(m.Review.action.in_(list(actions)))
            if since_id is not None:
                q = q.where(m.Review.id > since_id)
            q = q.order_by(m.Review.id)
            if limit is not None:
                q = q.limit(limit)
            return list(s.scalars(q))

    def review_history(self, review_id: int) -> list[m.ReviewRevision]:
        """Superseded versions of a review, oldest first (the current one is `review`)."""
        with self._ro() as s:
            return list(
                s.scalars(
                    select(m.ReviewRevision)
                    .where(m.ReviewRevision.review_id == review_id)
                    .order_by(m.ReviewRevision.revision)
                )
            )

    def adjudicate(
        self, admin: str | int, candidate_id: int, label: str | None, comment: str | None = None
    ) -> CandidateInfo:
        """An admin's final label for a candidate (None withdraws the override)."""
        if label is not None and label not in m.LABELS:
            raise StoreError(f"adjudicated label must be YES or NO (got {label!r})")
        with self._tx() as s:
            e = self._expert(s, admin)
            if e.role != "admin":
                raise StorePermissionError(f"{e.name!r} is not an admin and cannot adjudicate")
            c = self._get_candidate(s, candidate_id, lock=True)
            c.adjudicated_label, c.adjudicator_id = label, (e.id if label else None)
            c.adjudication_comment = comment
            self._refresh_candidate(s, c, self._threshold(s))
            self._audit(
                s, e.name, "adjudicate", "candidate", c.id, {"label": label, "comment": comment}
            )
            s.flush()
            return self._info(s, c)

    def conflicts(self, task: str | None = None, limit: int = 1000) -> list[CandidateInfo]:
        """Candidates whose experts disagree and no adjudicator has decided yet."""
        return self.list_candidates(Filters(task=task, status="conflict"), limit=limit, order="id")

    # -- authored trajectories ----------------------------------------------------------
    def create_authored(
        self,
        author: str | int,
        candidate_id: int,
        steps: Sequence[Step | dict],
        verdict: str | None = None,
        explanation: str = "",
        renderer: str = "fast",
    ) -> m.AuthoredTrajectory:
        if verdict is not None and verdict not in m.LABELS:
            raise StoreError(f"verdict must be YES or NO (got {verdict!r})")
        with self._tx() as s:
            e = self._expert(s, author)
            self._get_candidate(s, candidate_id)
            a = m.AuthoredTrajectory(
                candidate_id=candidate_id,
                author_id=e.id,
                steps=_steps_json(steps),
                verdict=verdict,
                explanation=explanation or "",
                renderer=renderer,
            )
            s.add(a)
            s.flush()
            self._audit(
                s,
                e.name,
                "create_authored",
                "authored_trajectory",
                a.id,
                {"candidate": candidate_id},
            )
            return a

    def update_authored(
        self,
        authored_id: int,
        author: str | int,
        *,
        steps: Sequence[Step | dict] | None = None,
        verdict: str | None = None,
        explanation: str | None = None,
    ) -> m.AuthoredTrajectory:
        """The author edits a draft (or a rejected one, which returns it to draft)."""
        if verdict is not None and verdict not in m.LABELS:
            raise StoreError(f"verdict must be YES or NO (got {verdict!r})")
        with self._tx() as s:
            e = self._expert(s, author)
            a = self._authored(s, authored_id)
            if a.author_id != e.id:
                raise StorePermissionError(f"{e.name!r} cannot edit another expert's trajectory")
            if a.status not in ("draft", "rejected"):
                raise StoreError(
                    f"authored trajectory #{a.id} is {a.status}; only drafts are edited"
                )
            if steps is not None:
                a.steps = _steps_json(steps)
            if verdict is not None:
                a.verdict = verdict
            if explanation is not None:
                a.explanation = explanation
            a.status, a.updated = "draft", utcnow()
            self._audit(s, e.name, "update_authored", "authored_trajectory", a.id)
            return a

    def submit_authored(self, authored_id: int, author: str | int) -> m.AuthoredTrajectory:
        with self._tx() as s:
            e = self._expert(s, author)
            a = self._authored(s, authored_id)
            if a.author_id != e.id:
                raise StorePermissionError(f"{e.name!r} cannot submit another expert's trajectory")
            if a.status != "draft":
                raise StoreError(f"authored trajectory #{a.id} is {a.status}, not a draft")
            if a.verdict not in m.LABELS or not a.steps:
                raise StoreError(f"authored trajectory #{a.id} needs steps and a YES/NO verdict")
            a.status, a.updated = "submitted", utcnow()
            self._audit(s, e.name, "submit_authored", "authored_trajectory", a.id)
            return a

    def review_authored(
        self, authored_id: int, reviewer: str | int, approve: bool, comment: str | None = None
    ) -> m.AuthoredTrajectory:
        """A second expert (any expert but the author) approves or sends back a submitted
        trajectory: the audit of cold-start data is peer review, as in the method's paper."""
        with self._tx() as s:
            e = self._expert(s, reviewer)
            a = self._authored(s, authored_id)
            if a.author_id == e.id:
                raise StorePermissionError("an author cannot approve their own trajectory")
            if a.status != "submitted":
                raise StoreError(f"authored trajectory #{a.id} is {a.status}, not submitted")
            a.status = "approved" if approve else "rejected"
            a.reviewer_id, a.reviewer_comment, a.updated = e.id, comment, utcnow()
            self._audit(s, e.name, a.status, "authored_trajectory", a.id, {"comment": comment})
            return a

    def _authored(self, s: Session, authored_id: int) -> m.AuthoredTrajectory:
        a = s.get(m.AuthoredTrajectory, authored_id)
        if a is None:
            raise NotFound(f"no authored trajectory #{authored_id}")
        return a

    def authored(self, authored_id: int) -> m.AuthoredTrajectory:
        with self._ro() as s:
            return self._authored(s, authored_id)

    def list_authored(
        self,
        *,
        status: str | None = None,
        author: str | int | None = None,
        candidate_id: int | None = None,
    ) -> list[m.AuthoredTrajectory]:
        with self._ro() as s:
            q = select(m.AuthoredTrajectory)
            if status is not None:
                q = q.where(m.AuthoredTrajectory.status == status)
            if author is not None:
                q = q.where(m.AuthoredTrajectory.author_id == self._expert(s, author).id)
            if candidate_id is not None:
                q = q.where(m.AuthoredTrajectory.candidate_id == candidate_id)
            return list(s.scalars(q.order_by(m.AuthoredTrajectory.id)))

    # -- dashboard ----------------------------------------------------------------------
    def dashboard_stats(self, task: str | None = None) -> DashboardStats:
        """Progress, decisions, agent-vs-expert counts, a confidence histogram per label,
        seconds per expert, multi-rater labels and gold ratings, for one task or all.

        Every figure is a GROUP BY or a window query over the indexed columns the store
        keeps current, so the cost grows with the number of groups returned, not with the
        candidates read into Python (well under a second at a million candidates)."""
        C, R, T, E = m.Candidate, m.Review, m.Task, m.Expert
        nb = DashboardStats.CONFIDENCE_BINS
        with self._ro() as s:
            names = dict(s.execute(select(T.id, T.name)).tuples().all())
            experts = dict(s.execute(select(E.id, E.name)).tuples().all())
            tid = None
            if task is not None:
                tid = next((i for i, n in names.items() if n == task), None)
                if tid is None:
                    return DashboardStats([], {}, {}, {}, {}, 0, 0, [], [], {}, None, [], [])

            def only(q, col=C.task_id):
                return q if tid is None else q.where(col == tid)

            total, reviewed, auto = {}, {}, {}
            q = select(
                C.task_id,
                func.count(),
                func.sum(case((C.review_count > 0, 1), else_=0)),
                func.sum(case(((C.auto.is_(True)) & (C.review_count == 0), 1), else_=0)),
            ).group_by(C.task_id)
            for t, n, nr, na in s.execute(only(q)):
                total[names[t]], reviewed[names[t]], auto[names[t]] = n, int(nr or 0), int(na or 0)
            tasks = sorted(total)
            actions: dict[str, dict[str, int]] = {t: {} for t in tasks}
            reviewers: set[int] = set()
            n_reviews = 0
            q = (
                select(C.task_id, R.action, R.expert_id, func.count())
                .join(C, C.id == R.candidate_id)
                .group_by(C.task_id, R.action, R.expert_id)
            )
            for t, action, eid, n in s.execute(only(q)):
                acts = actions.setdefault(names[t], {})
                acts[action] = acts.get(action, 0) + n
                reviewers.add(eid)
                n_reviews += n
            expert_label = C.label.in_(m.LABELS) & (
                C.label_source.is_(None) | (C.label_source != "auto")
            )
            # floor(p * bins): SQLite's CAST truncates (= floor on [0, 1]), PostgreSQL's rounds
            k = C.confidence * nb
            k = cast(func.floor(k), Integer) if self.is_postgres else cast(k, Integer)
            b = case((C.confidence >= 1.0, nb - 1), else_=k)
            # One scan gives both the confusion counts and the histogram; grouping by the bin
            # first keeps the planner on the table (through the task index it would fetch
            # each row at random).
            q = (
                select(b, C.label, C.verdict, C.task_id, func.count(), func.sum(C.confidence))
                .where(expert_label)
                .group_by(b, C.label, C.verdict, C.task_id)
            )
            conf_counts: dict[tuple[str, str | None, str], int] = {}
            bins: dict[tuple[int, str], list] = {}
            for k_, lab, v, t, n, sm in s.execute(only(q)):
                key = (names[t], v, lab)
                conf_counts[key] = conf_counts.get(key, 0) + n
                if k_ is not None:
                    acc = bins.setdefault((int(k_), lab), [0, 0.0])
                    acc[0] += n
                    acc[1] += float(sm)
            confusion = [(t, v, lab, n) for (t, v, lab), n in sorted(conf_counts.items(), key=str)]
            hist = [(k_, lab, n, sm) for (k_, lab), (n, sm) in sorted(bins.items())]
            seconds, median = self._seconds_quantiles(s, tid, experts)
            # items reviewed twice or more, found in the (candidate, expert) index alone: a
            # filter on labels or on the candidate row would fetch every reviewed row
            multi = select(R.candidate_id).group_by(R.candidate_id).having(func.count() >= 2)
            q = (
                select(R.candidate_id, C.task_id, R.expert_id, R.label)
                .join(C, C.id == R.candidate_id)
                .where(R.candidate_id.in_(multi), R.label.in_(m.LABELS))
                .order_by(R.id)
            )
            ratings = [(c, names[t], experts[e], lab) for c, t, e, lab in s.execute(only(q))]
            q = (
                select(R.candidate_id, C.task_id, R.expert_id, R.label, C.gold_label)
                .join(C, C.id == R.candidate_id)
                .where(C.is_gold.is_(True), C.gold_label.is_not(None), R.label.in_(m.LABELS))
                .order_by(R.id)
            )
            gold = [(c, names[t], experts[e], lab, g) for c, t, e, lab, g in s.execute(only(q))]
        return DashboardStats(
            tasks=tasks,
            total=total,
            reviewed=reviewed,
            auto=auto,
            actions=actions,
            n_reviews=n_reviews,
            n_reviewers=len(reviewers),
            confusion=confusion,
            confidence_hist=hist,
            seconds=seconds,
            seconds_median=median,
            ratings=ratings,
            gold=gold,
        )

    @staticmethod
    def _seconds_quantiles(s: Session, tid: int | None, experts: dict[int, str]):
        """Nearest-rank quantiles of seconds on item, per expert and overall, computed by
        window functions in the database (only the five ranks per expert come back)."""
        where = "r.seconds IS NOT NULL" + ("" if tid is None else " AND c.task_id = :tid")
        join = "" if tid is None else " JOIN candidate c ON c.id = r.candidate_id"
        # integer division truncates alike in SQLite and PostgreSQL
        ranks = (
            "rn = 1 OR rn = n OR rn = (n - 1) / 4 + 1 OR rn = (n - 1) / 2 + 1"
            " OR rn = 3 * (n - 1) / 4 + 1"
        )
        params = {} if tid is None else {"tid": tid}
        per: dict[str, dict[str, float]] = {}
        rows = s.execute(
            text(
                "SELECT expert_id, rn, n, seconds FROM (SELECT r.expert_id, r.seconds,"
                " row_number() OVER (PARTITION BY r.expert_id ORDER BY r.seconds) AS rn,"
                " count(*) OVER (PARTITION BY r.expert_id) AS n"
                f" FROM review r{join} WHERE {where}) q WHERE {ranks}"
            ),
            params,
        )
        for eid, rn, n, sec in rows:
            d = per.setdefault(experts.get(eid, "?"), {"n": n})
            for key, k in (("min", 1), ("q1", (n - 1) // 4 + 1), ("median", (n - 1) // 2 + 1),
                           ("q3", 3 * (n - 1) // 4 + 1), ("max", n)):  # fmt: skip
                if rn == k:
                    d[key] = float(sec)
        row = s.execute(
            text(
                "SELECT seconds FROM (SELECT r.seconds, row_number() OVER (ORDER BY r.seconds)"
                f" AS rn, count(*) OVER () AS n FROM review r{join} WHERE {where}) q"
                " WHERE rn = (n - 1) / 2 + 1"
            ),
            params,
        ).first()
        return dict(sorted(per.items())), None if row is None else float(row[0])

    # -- exports ------------------------------------------------------------------------
    def labelled_candidates(self, task: str | None = None) -> list[CandidateInfo]:
        """Every candidate with a resolved label (reviews, adjudication or auto), by id."""
        with self._ro() as s:
            q = select(m.Candidate).where(m.Candidate.label.is_not(None))
            if task is not None:
                q = q.where(m.Candidate.task_id == self._task_id(s, task, create=False))
            return [self._info(s, c) for c in s.scalars(q.order_by(m.Candidate.id))]

    def object_splits(self) -> dict[str, set[str]]:
        """object id -> the splits its candidates are already assigned to."""
        out: dict[str, set[str]] = {}
        with self._ro() as s:
            rows = s.execute(
                select(m.Candidate.object_id, m.Candidate.split).where(
                    m.Candidate.split.is_not(None)
                )
            )
            for oid, split in rows:
                out.setdefault(oid, set()).add(split)
        return out

    def reference_labelled_ids(self) -> list[int]:
        """Candidates without a resolved label but with a gold or catalogue label, by id."""
        with self._ro() as s:
            q = (
                select(m.Candidate.id)
                .where(m.Candidate.label.is_(None))
                .where(
                    or_(m.Candidate.gold_label.is_not(None), m.Candidate.known_label.is_not(None))
                )
                .order_by(m.Candidate.id)
            )
            return list(s.scalars(q))

    def exported_items(self, kind: str, entity: str) -> dict[int, set[str]]:
        """entity id -> hashes of its versions already exported in batches of `kind`."""
        out: dict[int, set[str]] = {}
        with self._ro() as s:
            rows = s.execute(
                select(m.ExportItem.entity_id, m.ExportItem.item_hash).where(
                    m.ExportItem.kind == kind, m.ExportItem.entity == entity
                )
            )
            for eid, h in rows:
                out.setdefault(eid, set()).add(h)
        return out

    def record_export(
        self,
        kind: str,
        items: Iterable[tuple[str, int, str]],
        *,
        manifest: dict[str, Any],
        path: str | None = None,
        content_hash: str | None = None,
        actor: str = "export",
    ) -> int:
        """Record a finished export batch and the (entity, id, item_hash) it holds."""
        with self._tx() as s:
            b = m.ExportBatch(
                kind=kind,
                actor=actor,
                path=path,
                content_hash=content_hash,
                manifest=manifest,
                code_version=self.code_version(),
            )
            s.add(b)
            s.flush()
            rows = [
                {"batch_id": b.id, "kind": kind, "entity": en, "entity_id": int(i), "item_hash": h}
                for en, i, h in items
            ]
            if rows:
                s.execute(m.ExportItem.__table__.insert(), rows)
            self._audit(
                s,
                actor,
                "export",
                "export_batch",
                b.id,
                {"kind": kind, "items": len(rows), "hash": content_hash},
            )
            return b.id

    def export_batches(self, kind: str | None = None) -> list[m.ExportBatch]:
        with self._ro() as s:
            q = select(m.ExportBatch)
            if kind is not None:
                q = q.where(m.ExportBatch.kind == kind)
            return list(s.scalars(q.order_by(m.ExportBatch.id)))

    # -- audit --------------------------------------------------------------------------
    def audit_events(
        self,
        *,
        entity: str | None = None,
        entity_id: int | None = None,
        since_id: int | None = None,
        limit: int = 1000,
    ) -> list[m.AuditEvent]:
        with self._ro() as s:
            q = select(m.AuditEvent)
            if entity is not None:
                q = q.where(m.AuditEvent.entity == entity)
            if entity_id is not None:
                q = q.where(m.AuditEvent.entity_id == entity_id)
            if since_id is not None:
                q = q.where(m.AuditEvent.id > since_id)
            return list(s.scalars(q.order_by(m.AuditEvent.id).limit(limit)))


# ---------------------------------------------------------------------------------------


def _install_sqlite_events(engine: Engine, busy_timeout_ms: int, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys = ON")
        if wal:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        opts = conn.get_execution_options()
        write = opts.get("loupe_write", False)
        if write:
            # Commits fsync (FULL) unless the transaction only writes ephemeral state (a
            # lease): then NORMAL, which in WAL mode survives a killed process and can lose
            # only that lease on a power cut. A later FULL commit syncs everything before it.
            sync = "NORMAL" if opts.get("loupe_ephemeral", False) else "FULL"
            conn.exec_driver_sql(f"PRAGMA synchronous = {sync}")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def trajectory_record(
    row: m.Trajectory,
    run: m.AgentRun,
    key: str,
    task: str,
    spectrum_ref: dict[str, Any],
    label: str | None,
) -> TrajectoryRecord:
    """The one `Trajectory` record for a stored trajectory row and its run."""
    return TrajectoryRecord(
        id=key,
        task=task,
        spectrum_ref=dict(spectrum_ref),
        policy=run.policy,
        model=run.model,
        renderer=run.renderer,
        steps=[Step.from_dict(d) for d in row.steps or []],
        verdict=row.verdict,
        explanation=row.explanation,
        confidence=row.confidence,
        format_ok=row.format_ok,
        state=row.state,
        error=row.error,
        label=label,
        started_at=row.started_at,
        seconds=row.seconds,
        params=dict(run.params or {}),
    )


_VETTED = ("done", "max_turns")  # trajectory states a human can judge

# Survey metadata of a spectrum the store keeps in its own columns.
SURVEY_META = (
    "survey",
    "obsid",
    "ra",
    "dec",
    "snr",
    "survey_class",
    "survey_subclass",
    "simulated",
)
_KNOWN_INFO = {
    *SURVEY_META,
    "score",
    "split",
    "object_id",
    "source_catalog",
    "gold",
    "gold_label",
    "content_hash",
}


def _check_ref(ref: CandidateRef, info: dict[str, Any], split: str | None) -> str | None:
    if not ref.id or not str(ref.id).strip():
        return "empty candidate id"
    if not ref.task or not str(ref.task).strip():
        return "empty task"
    if not ref.path:
        return "empty spectrum path"
    if ref.label is not None and ref.label not in m.LABELS:
        return f"label must be YES or NO (got {ref.label!r})"
    sp = info.get("split") or split
    if sp is not None and sp not in m.SPLITS:
        return f"split must be one of {m.SPLITS} (got {sp!r})"
    gl = info.get("gold_label")
    if gl is not None and gl not in m.LABELS:
        return f"gold_label must be YES or NO (got {gl!r})"
    for k in ("score", "ra", "dec", "snr"):
        v = info.get(k)
        if v is not None and v != "" and _float_or_none(v) is None:
            return f"{k} is not a number ({v!r})"
    return None


def _check_trajectory(t: TrajectoryRecord) -> None:
    if not t.id or not t.task:
        raise StoreError(f"trajectory needs a candidate id and a task (got {t.id!r}, {t.task!r})")
    if t.verdict is not None and t.verdict not in m.LABELS:
        raise StoreError(f"{t.id}: verdict must be YES, NO or None (got {t.verdict!r})")
    if t.confidence is not None and not (
        isinstance(t.confidence, (int, float)) and 0.0 <= t.confidence <= 1.0
    ):
        raise StoreError(f"{t.id}: confidence must be in [0, 1] (got {t.confidence!r})")


def _steps_json(steps: Sequence[Step | dict]) -> list[dict[str, Any]]:
    out = [st.to_dict() if isinstance(st, Step) else Step.from_dict(st).to_dict() for st in steps]
    return json.loads(json.dumps(out, default=_json_default))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _float_or_none(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _str_or_none(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False
