"""An export on disk: its manifest, written so that a recorded batch always names complete
files, and what a folder already holds when an export is run again.

`manifest.json` holds the kind, code version, renderer, counts per split/task/label/source,
what was skipped and why, and the sha256 of every other file; `content_hash`, one hash over
those, is the batch's identity in the store.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from annotate.export import lifetime
from annotate.export.record import ExportRecord, ExportResult
from annotate.export.writing import sha, write_file

FORMAT_VERSION = 2  # 2: renderer names only the renderer; left_out


@contextmanager
def staged(out: Path) -> Iterator[tuple[Path, Path]]:
    """Yields (partial, scratch): the folder to write the export into and one for scratch
    files. On a clean exit `partial` is synced and renamed to `out`; on any error it is
    removed and `out` is left as it was.

    Both are siblings of `out`: a killed export leaves no half-written folder under the
    name the user asked for, and a killed run's folders (Arrow shards among them) are
    swept by the next run, whatever its folder's name (`lifetime.sweep`), instead of
    piling up.
    """
    partial, scratch = lifetime.staging(out)
    lifetime.sweep(out.parent)  # what killed exports left beside it, under any name
    with lifetime.hold(out):  # until the rename: a sweep elsewhere leaves these alone
        for leftover in (partial, scratch):
            if leftover.exists():
                shutil.rmtree(leftover)
        yield from _staged(out, partial, scratch)


def _staged(out: Path, partial: Path, scratch: Path) -> Iterator[tuple[Path, Path]]:
    partial.mkdir(parents=True)
    try:
        scratch.mkdir()
        try:
            yield partial, scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        # On disk before the rename, and the rename on disk before the caller records the
        # batch: a recorded batch always names complete files, even after a power cut.
        _fsync_tree(partial)
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
        _fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(Path(dirpath))


def file_hashes(root: Path) -> dict[str, str]:
    """The sha256 of every file under `root`, by its path relative to `root`."""
    return {
        p.relative_to(root).as_posix(): "sha256:" + sha(p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def content_hash(files: dict[str, str]) -> str:
    """One hash over every file's path and hash (the batch's identity)."""
    text = "".join(f"{p}\t{h}\n" for p, h in sorted(files.items()))
    return "sha256:" + sha(text.encode())


def build_manifest(
    kind: str,
    written: list[ExportRecord],
    errors: list[dict[str, str]],
    files: dict[str, str],
    *,
    renderer: str,
    test_fraction: float,
    salt: str,
    revised: int,
    not_exported: dict[str, int],
    version: str,
    since_batch: int | None,
    n_candidates: int,
    n_unchanged: int,
) -> dict[str, Any]:
    by_task_label: dict[str, Counter] = defaultdict(Counter)
    for r in written:
        by_task_label[r.task][r.label] += 1
    return {
        "kind": kind,
        "format_version": FORMAT_VERSION,
        "code_version": version,
        "renderer": renderer,  # rl: of the overview image; GRPO must render with it too
        "split": {
            "rule": "existing split, else hash of object id",
            "test_fraction": test_fraction,
            "salt": salt,
        },
        "since_batch": since_batch,
        "rows": len(written),
        "revised": revised,
        "unchanged_since_earlier_batches": n_unchanged,
        "candidates_considered": n_candidates,
        "counts": {
            "split": dict(sorted(Counter(r.split for r in written).items())),
            "task": dict(sorted(Counter(r.task for r in written).items())),
            "label": dict(sorted(Counter(r.label for r in written).items())),
            "source": dict(sorted(Counter(r.source for r in written).items())),
            "task_label": {t: dict(sorted(c.items())) for t, c in sorted(by_task_label.items())},
            "split_task_label": _nested(written),
        },
        "errors": sorted(errors, key=lambda e: (e["id"], e["reason"])),
        "not_exported": dict(sorted(not_exported.items())),
        "left_out": left_out(not_exported, errors),
        "files": files,
        "content_hash": content_hash(files),
    }


def left_out(not_exported: dict[str, int], errors: list[dict[str, str]]) -> dict[str, Any]:
    """How many decisions the export left out, by reason: those the selection passed over
    (`not_exported`) and the rows that could not be built (`errors`).

    >>> left_out({"auto-accepted (no expert saw it)": 2}, [{"id": "a", "reason": "x"}])
    {'total': 3, 'reasons': {'auto-accepted (no expert saw it)': 2, 'row could not be built': 1}}
    """
    reasons = dict(sorted(not_exported.items()))
    if errors:
        reasons["row could not be built"] = reasons.get("row could not be built", 0) + len(errors)
    return {"total": sum(reasons.values()), "reasons": reasons}


def _nested(written: list[ExportRecord]) -> dict[str, Any]:
    d: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for r in written:
        d[r.split or "train"][r.task][r.label] += 1
    return {
        s: {t: dict(sorted(c.items())) for t, c in sorted(ts.items())}
        for s, ts in sorted(d.items())
    }


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_file(folder / "manifest.json", text.encode())


def record_batch(store: Any, kind: str, result: ExportResult, actor: str = "") -> int:
    """Record a written export as the store's ExportBatch (one transaction); its id."""
    return store.record_export(
        kind,
        [("candidate", cid, h) for cid, h in result.items],
        manifest=result.manifest,
        path=str(Path(result.out).resolve()),
        content_hash=result.manifest["content_hash"],
        actor=actor or "export",
    )


def folder_state(store: Any, kind: str, out: Path) -> ExportResult | bool:
    """What a non-empty `out` holds: the recorded batch it completes (an ExportResult),
    True for an unrecorded `kind` export (a run killed before its commit: rewrite it), or
    False for anything else (left alone: export_records refuses it)."""
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or manifest.get("kind") != kind:
        return False
    where = str(out.resolve())
    batches = [b for b in store.export_batches() if b.path == where]
    if not batches:
        return True
    b = batches[-1]
    if b.kind != kind or b.content_hash != manifest.get("content_hash"):
        return False
    return ExportResult(
        kind=kind,
        out=out,
        manifest=b.manifest,
        items=[],
        errors=list((b.manifest or {}).get("errors", [])),
        batch_id=b.id,
        existing=True,
    )
