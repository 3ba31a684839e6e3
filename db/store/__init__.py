"""`Store`: the one object through which Loupe reads and writes its database.

    store = Store("sqlite:///loupe.db")        # or a path, "sqlite://" (memory), any SQLAlchemy URL
    store.add_candidates(refs)                 # CandidateRefs -> AddReport(added, existing, errors)
    run_id = store.start_run("rules", None, "fast", {"max_turns": 8})
    store.record_trajectory(traj, run_id)      # agent.trajectory.Trajectory -> trajectory id
    cid = store.next_item("ada", QueueConfig(overlap=1))   # leases the item to "ada"
    store.record_review("ada", cid, "reject", label="NO", seconds=7.5)   # as annotate derived it

Opening a store runs the Alembic migrations up to head. Every write runs in one transaction
together with its `AuditEvent`; SQLite writes start with BEGIN IMMEDIATE so concurrent
writers queue on the busy timeout instead of failing on a lock upgrade (and threads of one
process queue on a Python lock first). SQLite runs in WAL mode with foreign keys on;
commits are fsynced except those that only move leases. On PostgreSQL, a review locks its
candidate row and lease hand-out takes an advisory lock, so counts stay exact.

Public methods (all take/return plain values, dataclasses or detached rows):
- candidates: `add_candidates`, `candidate` -> CandidateInfo, `find_candidate` (jump to
  id), `find_by_path`, `list_candidates(Filters)`, `count_candidates`, `candidate_refs`
  (those a run has still to vet), `load_spectrum` (read in a limited worker, its display
  copy kept in a cache bounded in bytes), `spectrum_header`, `set_gold`, `set_split`, `tasks`
- agent runs: `start_run`, `record_trajectory`, `record_trajectories`, `trajectory`,
  `trajectories`, `done_keys`, `runs`
- queue: `next_item`, `claim`, `release`, `leases`, `auto_accept`, `set_setting`, `setting`
- reviews: `record_review`, `reviews`, `review`, `review_history`, `adjudicate`,
  `conflicts`; an expert's draft on a candidate: `draft`, `put_draft`, `drop_draft`;
  how an expert set up the vet desk: `prefs`, `put_prefs`
- experts: `create_expert`, `update_expert`, `ensure_expert`, `expert` (= `get_expert`),
  `experts` (= `list_experts`), `set_password`, `verify_password`, `login` -> token,
  `session_expert(token)` -> name, `logout` (argon2id hashes; only token hashes are kept)
- authored trajectories: `create_authored`, `update_authored`, `submit_authored`,
  `review_authored`, `authored`, `list_authored`
- exports: `labelled_candidates`, `exported_items`, `record_export`, `export_batches`
- dashboard: `dashboard_stats(task)` -> DashboardStats (from running counts kept with each
  write, `tally`), `recount_dashboard` (after a raw bulk load)
- campaign: `audit_population`, `mark_audit`, `next_audit_item` (the audit sample),
  `catalogue_rows`, `stored_scores` (what re-scoring reads)
- audit: `audit_events`, `integrity_check`

Layout: `core` (engine, locks, transactions, audit, migrations, settings), one module per
resource (`candidates`, `runs`, `accounts` with the hashing in `auth`, `queue`, `reviews`,
`authored`, `dashboard` with the running counts it reads in `tally`, `exports`, `campaign`),
the plain `records` handed out, the pure
`rules` (queue priority, majority label) and the `errors`. `Store` mixes the resources into
one object.

Errors: `StoreError` (bad input, names the item), `DatabaseError` (the database cannot be
opened or used; names it, not the flag that chose it), `NotFound`, `StorePermissionError`
(also a PermissionError: e.g. revising another expert's review).
"""

from __future__ import annotations

from db.store.accounts import AccountsMixin
from db.store.auth import ARGON2_PARAMS, hash_password, verify_password_hash
from db.store.authored import AuthoredMixin
from db.store.campaign import CampaignMixin, PopulationRow
from db.store.candidates import SURVEY_META, CandidatesMixin
from db.store.core import DEFAULT_DB, MIGRATIONS, REPO, CoreMixin, code_version, file_hash
from db.store.dashboard import DashboardMixin
from db.store.drafts import DraftsMixin
from db.store.errors import DatabaseError, NotFound, StoreError, StorePermissionError
from db.store.exports import ExportsMixin
from db.store.prefs import PrefsMixin
from db.store.queue import QueueMixin
from db.store.records import AddReport, CandidateInfo, DashboardStats, Filters, QueueConfig
from db.store.reviews import ReviewsMixin
from db.store.rules import UNVETTED_PRIORITY, queue_priority, resolve_label
from db.store.runs import RunsMixin, run_fingerprint, trajectory_record

__all__ = [
    "ARGON2_PARAMS",
    "DEFAULT_DB",
    "MIGRATIONS",
    "REPO",
    "SURVEY_META",
    "UNVETTED_PRIORITY",
    "AddReport",
    "CandidateInfo",
    "DashboardStats",
    "DatabaseError",
    "Filters",
    "NotFound",
    "PopulationRow",
    "QueueConfig",
    "Store",
    "StoreError",
    "StorePermissionError",
    "code_version",
    "file_hash",
    "hash_password",
    "queue_priority",
    "resolve_label",
    "run_fingerprint",
    "trajectory_record",
    "verify_password_hash",
]


class Store(
    CoreMixin,
    CandidatesMixin,
    RunsMixin,
    AccountsMixin,
    QueueMixin,
    ReviewsMixin,
    DraftsMixin,
    PrefsMixin,
    AuthoredMixin,
    DashboardMixin,
    ExportsMixin,
    CampaignMixin,
):
    """Loupe's database. `url` is any SQLAlchemy URL or a plain file path (SQLite)."""
