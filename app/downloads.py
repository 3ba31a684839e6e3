"""Export files leave the server one way: `/download/TOKEN`, the token an export recorded
for the file (`annotate.export.downloads`), the viewer's role checked on each request.

Gradio's own file route (`/gradio_api/file=PATH`, and the older `/file=PATH` and
`/file/PATH`) serves a path the request spells. The export folder is not among Gradio's
allowed paths (it is among its blocked ones), and no export file is ever handed to a
Gradio component; on top of that, `install_file_route_guard` refuses, for everyone,
admins included, any file-route request whose target lies in the export folder, found
the way the kernel will open it: the path as Gradio normalises it (`..` taken off the
text), then every directory on the way compared by device and inode with the export
folder (so `/proc/self/root/...`, `/proc/self/cwd/...`, `/dev/fd/...`, bind mounts and
symlinked directories count as what they open), the final file's real path (a symlink
into the folder), and for a file with more than one name, its inode against the
folder's files (a hard link).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from annotate.export import downloads
from app.auth import guard, user_for_request

# Gradio's routes that read a file named in the request, with or without its API prefix.
FILE_ROUTE = re.compile(r"/file(?:=|/)(?P<path>.*)$", re.DOTALL)
CHUNK = 1 << 16


def install_downloads(app: FastAPI, ctx: Any) -> None:
    """Add `GET|HEAD /download/{token}`: the recorded file, to an admin or its owner."""

    def viewer(request: Request) -> str | None:
        return user_for_request(ctx.store, request) if ctx.login else ctx.local_expert

    def fetch(request: Request, token: str):
        return downloads.open_download(ctx.store, token, viewer(request))

    async def download(request: Request) -> Response:
        token = request.path_params["token"]
        try:
            fh, name, size = await run_in_threadpool(fetch, request, token)
        except downloads.DownloadRefused as e:
            return JSONResponse({"detail": f"Refused: {e}"}, status_code=e.status)
        headers = {
            "Content-Disposition": _attachment(name),
            "Content-Length": str(size),
            "Cache-Control": "private, no-store",
            "X-Content-Type-Options": "nosniff",
        }
        if request.method == "HEAD":
            fh.close()
            return Response(headers=headers, media_type="application/octet-stream")
        return StreamingResponse(
            _chunks(fh), headers=headers, media_type="application/octet-stream"
        )

    app.add_api_route(
        downloads.ROUTE + "/{token}", download, methods=["GET", "HEAD"], include_in_schema=False
    )


def _chunks(fh) -> Iterator[bytes]:
    with fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _attachment(name: str) -> str:
    from urllib.parse import quote

    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name)}"


def install_file_route_guard(app: FastAPI, folder: str | Path) -> None:
    """Refuse every Gradio file-route request whose target lies in `folder` (403), whoever
    asks: export files download through `/download/TOKEN` only."""
    root = Path(os.path.abspath(folder))

    async def no_export_files(request: Request) -> Response | None:
        match = FILE_ROUTE.search(request.url.path)
        if match and await run_in_threadpool(reaches, match["path"], root):
            return JSONResponse(
                {"detail": "Refused: export files download through their link on the Export tab"},
                status_code=403,
            )
        return None

    guard(app, no_export_files)


def reaches(path: str, root: Path) -> bool:
    """Whether opening `path` as Gradio's file route does (its text lexically normalised,
    then opened by the kernel) lands in `root` or below. Anything that cannot be checked
    counts as inside: it is refused."""
    try:
        return _reaches(path, root)
    except (OSError, ValueError):
        return True


def _reaches(path: str, root: Path) -> bool:
    if "\x00" in path:
        return True
    # Gradio opens abspath(text); a leading "//" is kept by abspath and read as "/" by Linux
    lexical = "/" + os.path.abspath(path).lstrip("/")
    real_root = Path(os.path.realpath(root))
    for p in (lexical, os.path.realpath(lexical), os.path.realpath(path)):
        if Path(p).is_relative_to(root) or Path(p).is_relative_to(real_root):
            return True
    try:
        root_id = _ident(os.stat(root))
    except FileNotFoundError:
        return False  # no export folder: nothing to reach
    # Every directory the kernel walks through, as it opens it: magic links such as
    # /proc/self/root or /proc/<pid>/cwd, bind mounts and symlinks resolve to what they are.
    walked = lexical
    while walked not in ("/", ""):
        walked = os.path.dirname(walked)
        try:
            if _ident(os.stat(walked)) == root_id:
                return True
        except OSError:
            continue
    try:
        target = os.stat(lexical)
    except OSError:
        return False  # nothing there: Gradio answers "not allowed" itself
    if _ident(target) == root_id:
        return True
    if stat.S_ISREG(target.st_mode) and target.st_nlink > 1:
        return _ident(target) in _inodes(real_root)  # a hard link to an export file
    return False


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _inodes(root: Path) -> set[tuple[int, int]]:
    """(device, inode) of every file under `root` that has another name somewhere."""
    out = set()
    for folder, _, names in os.walk(root):
        for n in names:
            try:
                st = os.stat(os.path.join(folder, n), follow_symlinks=False)
            except OSError:
                continue
            if st.st_nlink > 1:
                out.add(_ident(st))
    return out
