"""Who acts and with what: the server's context, the acting expert and the permission checks.

With login on, anonymous callers get nothing, experts write only as themselves, and only
admins export or manage experts; the checks happen in the page handlers before any write.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import LoupeError
from annotate.queue import Queue
from annotate.reads import Reads
from app.render_md import escape
from db.settings import DEFAULTS, ServeSettings

log = logging.getLogger(__name__)

# What a person can act on: Loupe's own errors, and the store's refusals to write another
# expert's review (a PermissionError). Anything else is a bug.
USER_ERRORS = (LoupeError, PermissionError)


class AccessError(LoupeError, PermissionError):
    """The caller may not do this (not logged in, not an admin, not their review)."""


@dataclass
class Context:
    store: Any  # db.store.Store
    login: bool = False
    data_roots: list[Path] = field(default_factory=list)
    local_expert: str = "local"  # who acts in single-user mode
    settings: ServeSettings = DEFAULTS
    policy: str = "rules"
    export_dir: Path = Path("exports")
    queue_config: Any = None  # db.store.QueueConfig; None = the team's stored settings
    templates: list[Any] = field(default_factory=list)  # agent.templates.Template (--templates)
    _surveys: tuple[float, list[str]] = (0.0, [])

    def queue(self) -> Queue:
        """The hand-off queue as the team has configured it (read on every call, so a
        changed setting applies to the next item served)."""
        if self.queue_config is not None:
            return Queue(self.store, self.queue_config)
        return Queue.from_settings(self.store, self.settings.lease_seconds)

    @property
    def read(self) -> Reads:
        """What pages read from the store (they write through annotate's workflow)."""
        return Reads(self.store)

    def store_token(self) -> str:
        """Names the database this app serves, for what the page keeps per database (keys.js
        keys its kept texts by it, the expert and the candidate): another database served at
        the same address is another. A digest of the URL, password hidden, never the URL."""
        url = self.store.url.render_as_string(hide_password=True)
        return hashlib.sha256(url.encode()).hexdigest()[:12]

    def surveys(self) -> list[str]:
        """Surveys present, for the filter (cached a minute: it is a full scan)."""
        t, names = self._surveys
        if time.time() - t > 60:
            names = self.read.surveys()
            self._surveys = (time.time(), names)
        return names


@dataclass
class Viewer:
    """The expert using the app (a page's view of a `db.models.Expert` account)."""

    name: str
    role: str = "expert"

    @property
    def admin(self) -> bool:
        return self.role == "admin"


def expert_for(ctx: Context, request: Any) -> Viewer | None:
    """The acting expert: the logged-in one, the local one without login, None if anonymous."""
    if not ctx.login:
        return Viewer(ctx.local_expert, "admin")
    name = getattr(request, "username", None) if request is not None else None
    if not name:
        return None
    row = ctx.read.expert(name)
    if row is None or not getattr(row, "active", True):
        return None
    return Viewer(row.name, row.role)


def require(ex: Viewer | None, admin: bool = False) -> Viewer:
    if ex is None:
        raise AccessError("log in first")
    if admin and not ex.admin:
        raise AccessError(f"{ex.name} is not an admin")
    return ex


def whoami(ctx: Context, ex: Viewer | None) -> str:
    if ex is None:
        return "Not logged in."
    mode = "" if ctx.login else " (single-user mode)"
    out = f"Vetting as **{escape(ex.name)}** ({ex.role}){mode}. Press `?` for the keyboard."
    if ctx.login:
        out += " [Log out](/logout)"
    return out


def refusal(what: str, exc: BaseException) -> str:
    """The message for an action that failed: a user error in its own words; anything else
    is a bug, logged with its traceback and not dressed up as advice."""
    if isinstance(exc, USER_ERRORS):
        return f"{what}: {escape(exc)}"
    log.error("%s", what, exc_info=exc)
    return f"{what}: an internal error occurred (logged on the server)."
