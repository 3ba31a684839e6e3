"""Adding candidates from the app: uploaded files or a server path inside a data root,
ingested (`annotate.intake.ingest`) and vetted by the serving policy
(`annotate.vetting.into_store.vet_into_store`), the same
pipeline as `launch.py ingest` and `launch.py vet --db`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agent.refs import CandidateRef
from agent.spectrum import SpectrumError
from app.context import AccessError, Context, Viewer, refusal, require
from app.render_md import escape

log = logging.getLogger(__name__)


def ingest_and_vet(
    ctx: Context,
    refs: list[Any],
    *,
    policy: str | None = None,
    actor: str = "app",
    problems: list[tuple[str, str]] | None = None,
    known: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Vet candidates and add them to the store with the agent's trajectory for each.

    `refs` are `CandidateRef`s or catalogue rows (dicts with id, task, path, ...). The files
    are untrusted: they are read and vetted in limited worker processes
    (`annotate.vetting.into_store.vet_then_add`), never in the server, and the candidates
    go into the store once vetted. A spectrum that cannot be read, or that a second id
    names, is logged (and added to `problems`) and left out; the others go on. Candidates
    the serving policy has already vetted (same run set-up) are not vetted again. Returns
    the number of trajectories recorded. `known`: survey metadata read already (by
    `ref.location`), not read again.
    """
    from annotate.vetting.into_store import vet_then_add

    refs = [
        r if isinstance(r, CandidateRef) else
        CandidateRef(id=r["id"], task=r["task"], path=r["path"], hdu=r.get("hdu"),
                     row=r.get("row"), label=r.get("label") or None)
        for r in refs
    ]  # fmt: skip
    refused: list[tuple[str, str]] = []
    stats = vet_then_add(ctx.store, refs, policy=policy or ctx.policy, actor=actor,
                         problems=refused, known=known)  # fmt: skip
    for item, problem in refused:
        log.warning("not ingested: %s: %s", item, problem)
    if problems is not None:
        problems.extend(refused)
    return stats.n


def inside_roots(ctx: Context, path: str | Path) -> Path:
    """`path` resolved, if it lies inside a configured data root (symlinks followed)."""
    p = Path(path).expanduser()
    p = (p if p.is_absolute() else Path.cwd() / p).resolve()
    for root in ctx.data_roots:
        if p == root or root in p.parents:
            return p
    raise AccessError(f"{path}: outside the data roots ({', '.join(map(str, ctx.data_roots))})")


def ingest_upload(
    ctx: Context, ex: Viewer | None, files: list, task: str, path: str | None = None
) -> str:
    """Uploaded spectrum files (size-limited, read before they are kept) or a server path
    inside a data root: ingested and vetted by the agent."""
    import hashlib
    import os
    import shutil
    import threading

    from agent.formats.sandbox import ReadRefused
    from annotate.intake.ingest import read_sources, read_upload

    try:
        require(ex)
    except AccessError as e:
        return f"Refused: {escape(e)}"
    lines: list[str] = []
    refs = []
    known: dict[str, dict[str, Any]] = {}
    upload_dir = ctx.data_roots[0] / "uploads"
    for f in files or []:
        src = Path(getattr(f, "name", f))
        name = src.name
        try:
            size = src.stat().st_size
            if size > ctx.settings.max_upload_bytes:
                raise SpectrumError(name, f"file is {size / 1e6:.1f} MB; the limit is "
                                          f"{ctx.settings.max_upload_bytes / 1e6:.1f} MB")  # fmt: skip
            digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
            upload_dir.mkdir(parents=True, exist_ok=True)
            dest = upload_dir / f"{digest}-{Path(name).name}"
            # copied beside it, then renamed over it: a link planted at that name is
            # replaced, never written through, and a kill leaves no half-written copy
            part = upload_dir / f".{digest}-{os.getpid()}-{threading.get_ident()}.part"
            shutil.copyfile(src, part)
            os.replace(part, dest)
            try:
                # Read whole in a limited worker process (every path a catalogue names
                # kept inside the data roots): a bad file is refused before it is
                # ingested, and a file built to exhaust the server only ends its worker.
                found, metas = read_upload(dest, task, ctx.data_roots)
            except BaseException:  # whatever refused it, the copy must not stay
                dest.unlink(missing_ok=True)
                raise
            known.update(metas)
            refs += found
            lines.append(f"- {escape(name)}: {len(found)} spectrum(s)")
        except ReadRefused as e:
            lines.append(f"- {escape(name)}: refused: {escape(name)} {escape(e.problem)}")
        except (SpectrumError, OSError, ValueError) as e:
            lines.append(f"- {escape(name)}: refused ({escape(e)})")
    if path and path.strip():
        try:
            p = inside_roots(ctx, path.strip())
            found = read_sources(p, task, ctx.data_roots)
            refs += found
            lines.append(f"- {escape(path)}: {len(found)} candidate(s)")
        except (AccessError, SpectrumError, OSError, ValueError) as e:
            lines.append(f"- {escape(path)}: refused ({escape(e)})")
    if refs:
        try:
            refused: list[tuple[str, str]] = []
            n = ingest_and_vet(ctx, refs, actor=ex.name, problems=refused, known=known)
            lines += [f"- not added: {escape(item)}: {escape(why)}" for item, why in refused]
            lines.append(f"\n{n} candidate(s) vetted by the `{escape(ctx.policy)}` agent.")
        except Exception as e:
            lines.append("\n" + refusal("Ingest failed", e))
    return "\n".join(lines) or "Choose files or type a path."
