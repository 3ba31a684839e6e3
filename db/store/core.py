"""The store's core: engine, locks, transactions, audit, migrations, settings.

Every write runs in one transaction (`_tx`) together with its `AuditEvent` (`_audit`);
reads run in `_ro`. SQLite writes start with BEGIN IMMEDIATE so concurrent writers queue on
the busy timeout instead of failing on a lock upgrade (and threads of one process queue on a
Python lock first). SQLite runs in WAL mode with foreign keys on; commits are fsynced except
those that only move leases (`_tx(ephemeral=True)`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Engine, create_engine, event, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from db import models as m
from db.models import utcnow
from db.store import tally
from db.store.errors import DatabaseError
from db.store.rules import MODEL_CALIBRATION, VETTED, queue_confidence, queue_priority

log = logging.getLogger(__name__)

_DB_DIR = Path(__file__).resolve().parent.parent  # the db package
MIGRATIONS = _DB_DIR / "migrations"
REPO = _DB_DIR.parent
# Every command's --db default: the demo database `make run` seeds, or $LOUPE_DB.
DEFAULT_DB = os.environ.get("LOUPE_DB", "data/loupe.db")


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
        log.debug("no git checkout and no installed loupe package", exc_info=True)
        return "unknown"


def file_hash(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return "sha256:" + h.hexdigest()


class CoreMixin:
    """Connection, transactions, audit trail, schema and settings of a `Store`."""

    def __init__(
        self,
        url: str | Path = DEFAULT_DB,
        *,
        migrate: bool = True,
        busy_timeout_ms: int = 30000,
        echo: bool = False,
        create: bool = True,
    ):
        # create=False: a SQLite file that is not there is refused, not made (a mistyped
        # --db must not become a new, empty store).
        url_s = str(url)
        if "://" not in url_s:
            url_s = f"sqlite:///{Path(url_s).expanduser()}"
        try:
            self.url = make_url(url_s)
        except ArgumentError:
            raise DatabaseError(
                f"{str(url)!r} is not a database: give a file path, sqlite:///FILE or "
                "postgresql+psycopg://USER@HOST/NAME"
            ) from None
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.is_postgres = self.url.get_backend_name() == "postgresql"
        self._busy_timeout_s = busy_timeout_ms / 1000
        memory = self.is_sqlite and self.url.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"echo": echo}
        if memory:
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
        elif self.is_sqlite:
            folder = Path(self.url.database).expanduser().parent
            if not create and not Path(self.url.database).expanduser().exists():
                raise DatabaseError(
                    f"{self._where()}: no database there (ingest, demo or serve on its "
                    "default path create one)"
                )
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise DatabaseError(
                    f"{self._where()}: cannot create its folder {str(folder)!r} "
                    f"({err.strerror or err}); choose a place you can write to"
                ) from None
            kwargs.update(
                connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
            )
        else:
            kwargs.update(pool_pre_ping=True)
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except (NoSuchModuleError, ArgumentError, ImportError) as err:
            raise DatabaseError(
                f"{self._where()}: no database driver for "
                f"{self.url.drivername!r} ({err}); use a file path, sqlite:///FILE or "
                "postgresql+psycopg://USER@HOST/NAME"
            ) from None
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
        tally.install(self._write, self._write_ephemeral)
        self._code_version: str | None = None
        if migrate:
            try:
                self.migrate()
            except DBAPIError as err:
                self.engine.dispose()
                raise self._unusable(err) from None

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

    def _where(self) -> str:
        if self.is_sqlite:
            return repr(self.url.database or ":memory:")
        return repr(self.url.render_as_string(hide_password=True))

    def _unusable(self, err: DBAPIError) -> DatabaseError:
        """A one-line error for a database that cannot be opened or written, saying what to do."""
        what = str(err.orig).strip().splitlines()[0] if err.orig is not None else str(err)
        if "locked" in what or "busy" in what:
            return DatabaseError(
                f"{self._where()}: the database is locked by another process (waited "
                f"{self._busy_timeout_s:g} s); retry when that process has finished, or stop it"
            )
        if self.is_sqlite and "not a database" in what:
            return DatabaseError(
                f"{self._where()}: not a SQLite database ({what}); give a Loupe database or "
                "a new file name"
            )
        if self.is_sqlite and "unable to open" in what:
            return DatabaseError(
                f"{self._where()}: cannot open the database file ({what}); give a file (not "
                "a folder) in a folder you can write to"
            )
        return DatabaseError(f"{self._where()}: cannot use the database ({what})")

    def __enter__(self) -> Self:
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
        try:
            with wl, self._locked(), maker() as s, s.begin():
                yield s
                tally.apply(s)  # the Dashboard's counts, last (db/store/tally.py)
        except OperationalError as err:
            # Another process held SQLite's write lock past the busy timeout.
            if err.orig is not None and "locked" in str(err.orig):
                raise self._unusable(err) from None
            raise

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
            elif key == MODEL_CALIBRATION:
                s.flush()
                self._reprioritise(s, self._threshold(s))

    def _threshold(self, s: Session) -> float:
        row = s.get(m.Setting, "threshold")
        return 0.5 if row is None else float(row.value.get("value", 0.5))

    def _reprioritise(self, s: Session, threshold: float) -> None:
        cals = self._calibrations(s)
        rows = s.execute(
            select(
                m.Candidate.id,
                m.Candidate.confidence,
                m.Candidate.disagreement,
                m.Trajectory.state,
                m.AgentRun.fingerprint,
                m.Task.name,
            )
            .outerjoin(m.Trajectory, m.Trajectory.id == m.Candidate.trajectory_id)
            .outerjoin(m.AgentRun, m.AgentRun.id == m.Trajectory.run_id)
            .outerjoin(m.Task, m.Task.id == m.Candidate.task_id)
        ).all()
        s.execute(
            update(m.Candidate),
            [
                {
                    "id": r.id,
                    "priority": queue_priority(
                        queue_confidence(r.confidence, r.name, cals.get(r.fingerprint)),
                        vetted=r.state in VETTED,
                        disagreement=r.disagreement,
                        threshold=threshold,
                    ),
                }
                for r in rows
            ],
        )

    def _calibrations(self, s: Session) -> dict[str, Any]:
        """Run fingerprint -> the model calibration fitted for that run (empty if none)."""
        row = s.get(m.Setting, MODEL_CALIBRATION)
        return {} if row is None else dict(row.value.get("value") or {})

    def _queue_confidence(self, s: Session, c: m.Candidate) -> float | None:
        """The candidate's P(YES) as the queue ranks it: calibrated for the run whose
        trajectory the candidate shows, where `calibrate --run` fitted one."""
        cals = self._calibrations(s)
        if not cals or c.confidence is None or c.trajectory_id is None:
            return c.confidence
        fp, task = s.execute(
            select(m.AgentRun.fingerprint, m.Task.name)
            .join(m.Trajectory, m.Trajectory.run_id == m.AgentRun.id)
            .join(m.Task, m.Task.id == c.task_id)
            .where(m.Trajectory.id == c.trajectory_id)
        ).one()
        return queue_confidence(c.confidence, task, cals.get(fp))

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
