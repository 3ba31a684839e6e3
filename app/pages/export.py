"""The export page: admins run the SFT, RL and pairs exports (`annotate.export`) and
download what they wrote, download the decisions as VI CSVs (`annotate.export.vi`) and the
catalogue: each task's YES list with its estimated precision (`annotate.export.catalogue`),
after closing the campaign, where the agent's sure verdicts become its labels.
Only admins see the earlier batches (their folders) and the files."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from annotate import export
from app.context import AccessError, Context, Viewer, require
from app.render_md import escape
from app.views import ExportView

HISTORY_HEADERS = ["batch", "kind", "created", "by", "folder", "rows", "renderer", "left out"]


def export_history(ctx: Context, ex: Viewer | None) -> dict[str, Any]:
    """Earlier batches, for admins only: a batch's folder name is the way to its files."""
    if ex is None or not ex.admin:
        return {"headers": HISTORY_HEADERS, "data": []}
    rows = [[b.id, b.kind, str(b.created)[:19], b.actor, b.path or "",
             (b.manifest or {}).get("rows", ""), (b.manifest or {}).get("renderer", ""),
             ((b.manifest or {}).get("left_out") or {}).get("total", "")]
            for b in ctx.read.export_batches()]  # fmt: skip
    return {"headers": HISTORY_HEADERS, "data": rows}


def left_out_text(manifest: dict[str, Any]) -> str:
    """How many decisions an export left out and why, as one Markdown line."""
    lo = manifest.get("left_out") or {}
    if not lo.get("total"):
        return "No decision left out."
    why = "; ".join(f"{escape(r)}: {n}" for r, n in (lo.get("reasons") or {}).items())
    return f"**{lo['total']}** decision(s) left out ({why})."


def download_links(ctx: Context, ex: Viewer | None, files: list[str]) -> str:
    """`files` as download links (HTML) for the viewer: each recorded in the store under a
    new token (`annotate.export.downloads`), served by `/download/TOKEN` to admins, and to
    the viewer when it is their own (a non-admin's VI CSV). No path reaches the page."""
    if ex is None or not files:
        return ""
    from html import escape as html_escape

    from annotate.export import downloads

    owner = None if ex.admin else ex.name
    offered = downloads.offer(ctx.store, files, actor=ex.name, owner=owner)
    items = "".join(
        f'<li><a href="{d.url}" download="{html_escape(d.name)}">{html_escape(d.name)}</a></li>'
        for d in offered
    )
    return f'<ul class="loupe-downloads">{items}</ul>'


def run_export(ctx: Context, ex: Viewer | None, kind: str) -> ExportView:
    """Run one export (admins only); list its files as download links."""
    try:
        require(ex, admin=True)
        if kind not in ("sft", "rl", "pairs"):
            raise ValueError(f"unknown export {kind!r}")
        # a random tail: a folder's name must not be enough to find its files
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = ctx.export_dir / f"{kind}-{stamp}-{secrets.token_hex(8)}"
        result = export.run_export(ctx.store, kind, out, actor=ex.name)
    except (AccessError, ValueError) as e:
        return ExportView(f"Refused: {escape(e)}", None, [], export_history(ctx, ex))
    folder = Path(result.out)
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
    # Image folders can hold thousands of files: link the data and the manifest first.
    files.sort(key=lambda f: (Path(f).suffix in (".png", ".jpg"), f))
    m = result.manifest
    by_source = ", ".join(f"{s} {n}" for s, n in m.get("counts", {}).get("source", {}).items())
    msg = (f"**{kind}** export: {len(result.items)} new item(s) ({by_source or 'none'}), "
           f"{len(result.errors)} error(s), renderer `{m.get('renderer')}`, "
           f"{result.seconds:.1f} s, in `{escape(folder)}` (batch {result.batch_id}). "
           + left_out_text(m))  # fmt: skip
    return ExportView(msg, result.manifest, files[:50], export_history(ctx, ex))


def vi_download(ctx: Context, ex: Viewer | None, layout: str = "loupe") -> tuple[str, list[str]]:
    """The decisions as VI CSVs, one per campaign: a message and the files. Admins get
    every expert's; an expert their own, written outside the admins' export folder (which
    only admins may read) so that the page can hand it to them."""
    import tempfile

    from annotate.export import vi

    try:
        require(ex)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        if ex.admin:
            folder = ctx.export_dir / f"vi-{stamp}-{secrets.token_hex(8)}"  # unguessable
            paths = vi.write_per_campaign(ctx.store, folder, layout=layout)
        else:
            folder = Path(tempfile.mkdtemp(prefix=f"loupe-vi-{stamp}-"))
            paths = vi.write_per_campaign(ctx.store, folder, layout=layout, expert=ex.name)
    except (AccessError, ValueError) as e:
        return f"Refused: {escape(e)}", []
    if not paths:
        return "No decisions yet: nothing to write.", []
    whose = "" if ex.admin else " of your decisions"
    return (f"VI CSV{whose}: {len(paths)} campaign(s) in `{escape(folder)}` ({escape(layout)} "
            "columns; see docs/vi_csv.md).", [str(p) for p in paths])  # fmt: skip


def catalogue_download(ctx: Context, ex: Viewer | None) -> tuple[str, list[str]]:
    """Each task's YES list as CSV and FITS, with its precision (admins only): a message
    quoting the precision per task, and the files."""
    from annotate.export import catalogue

    try:
        require(ex, admin=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = ctx.export_dir / f"catalogue-{stamp}-{secrets.token_hex(8)}"  # as above
        cat = catalogue.write_catalogue(ctx.store, folder)
    except (AccessError, ValueError) as e:
        return f"Refused: {escape(e)}", []
    quotes = [escape(t["quote"]) for t in cat.manifest["tasks"].values()]
    if not quotes:
        return "No task yet: nothing to write.", []
    return ("Catalogue (see docs/audit.md): " + "; ".join(quotes) + ".",
            [str(p) for p in cat.files])  # fmt: skip


def close_campaign(ctx: Context, ex: Viewer | None) -> str:
    """Auto-accept the agent's sure verdicts nobody reviewed (admins only), at the team's
    `auto_accept` certainty, else 0.9 (`annotate.audit.sample.accept_confident`), so that
    the catalogue lists the agent's YES beside the experts'."""
    from annotate.audit.sample import accept_confident

    try:
        require(ex, admin=True)
        n, sure = accept_confident(ctx.store, actor=ex.name if ex else "admin")
    except (AccessError, ValueError) as e:
        return f"Refused: {escape(e)}"
    return (f"{n} verdict(s) at least {sure:g} sure auto-accepted: the agent's labels now, "
            "in the catalogue's YES list; an expert's decision replaces them.")  # fmt: skip
