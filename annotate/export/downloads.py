"""Export files offered for download by an opaque token, never by a path.

An export's files (every label, the gold items, each expert's reviews) reach a browser
only through `/download/TOKEN` (`app.downloads`): `offer` records each file in the store
under a fresh random token, and `open_download` maps a token back to the file the store
recorded, checking the viewer's role on every request. A request never names a path, so
no spelling of one (`..`, `/proc/self/root`, symlinks, hard links, percent-encoding) can
reach a file the store did not record for that viewer.

Who may download: an active admin, or the expert a file was offered to (`owner`: the VI
CSV of their own decisions). An admin demoted or deactivated meanwhile is refused on the
next request.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent.errors import LoupeError
from db.store import Store

ROUTE = "/download"  # the one route that serves export files: ROUTE/TOKEN


@dataclass(frozen=True)
class Download:
    """A file on offer: its token, the name it downloads as, and its link."""

    token: str
    name: str

    @property
    def url(self) -> str:
        return f"{ROUTE}/{self.token}"


class DownloadRefused(LoupeError):
    """A download refused: `status` is the HTTP status that says why (401 not logged in,
    403 not this viewer's, 404 no such file)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def offer(
    store: Store, paths: Iterable[str | Path], *, actor: str, owner: str | None = None
) -> list[Download]:
    """Record `paths` for download, each under a new unguessable token; `owner` None: for
    admins only, else for that expert too."""
    rows = []
    for p in paths:
        path = Path(os.path.abspath(p))
        rows.append((secrets.token_urlsafe(24), str(path), path.name))
    store.record_export_files(rows, owner=owner, actor=actor)
    return [Download(token, name) for token, _, name in rows]


def open_download(store: Store, token: str, viewer: str | None) -> tuple[BinaryIO, str, int]:
    """The recorded file for `token`, opened for `viewer` (a name), with its download name
    and size; `DownloadRefused` when the viewer may not have it or it is gone. The file is
    opened without following a symlink in its last component, so a link put in place of a
    recorded file is not followed out of the export."""
    if not viewer:
        raise DownloadRefused("log in first", 401)
    expert = store.expert(viewer)
    if expert is None or not expert.active:
        raise DownloadRefused("log in first", 401)
    row = store.export_file(token)
    if row is None:
        raise DownloadRefused("no such download", 404)
    if expert.role != "admin" and row.owner != expert.name:
        raise DownloadRefused(f"{expert.name} is not an admin: export files are for admins", 403)
    try:
        fd = os.open(row.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        raise DownloadRefused(f"{row.name} is no longer on the server", 404) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise DownloadRefused(f"{row.name} is not a file", 404)
    return os.fdopen(fd, "rb"), row.name, info.st_size
