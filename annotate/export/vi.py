"""The visual-inspection CSV: every expert decision as one plain row, per campaign.

    python launch.py export vi --out vi.csv                      # every campaign, one file
    python launch.py export vi --out vi.csv --campaign demo      # one campaign
    python launch.py export vi --out vi.csv --layout prospect    # Prospect's column names

A campaign is the catalogue the candidates were ingested from (`source_catalog`), else their
task. One row per expert and candidate (the review as it stands; revisions are not rows).
The columns are documented in docs/vi_csv.md; `--layout prospect` and `--layout marz` rename
the ones those tools write, so their users can merge the file with their own on the id.
Decisions are read, never written: the file is no export batch and can be re-run at will.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from db.models import DECISIONS
from db.store import Store

COLUMNS: tuple[str, ...] = (
    "id", "task", "campaign", "survey", "object_id", "action", "verdict", "grade", "redshift",
    "redshift_source", "comment", "expert", "seconds", "time",
)  # fmt: skip
# Where Prospect (DESI VI) and Marz results files have the same quantity, their name for it.
LAYOUTS: dict[str, dict[str, str]] = {
    "loupe": {},
    "prospect": {"object_id": "TARGETID", "expert": "VI_scanner", "grade": "VI_quality",
                 "redshift": "VI_z", "comment": "VI_comment", "verdict": "VI_verdict"},
    "marz": {"id": "Name", "object_id": "SpectrumID", "grade": "QOP", "redshift": "FinZ",
             "comment": "Comment"},
}  # fmt: skip


class VIError(ValueError):
    """A VI export that cannot be written (an unknown layout or campaign)."""


def campaign_of(candidate: Any) -> str:
    return candidate.source_catalog or candidate.task


def vi_rows(store: Store, *, campaign: str | None = None) -> Iterator[dict[str, Any]]:
    """One dict per review (keys COLUMNS), in the order the decisions were first made."""
    experts = {e.id: e.name for e in store.experts()}
    cands: dict[int, Any] = {}
    for r in store.reviews(actions=DECISIONS):  # an undo is a revision, not a decision
        c = cands.get(r.candidate_id)
        if c is None:
            c = cands[r.candidate_id] = store.candidate(r.candidate_id)
        camp = campaign_of(c)
        if campaign is not None and camp != campaign:
            continue
        z = getattr(r, "redshift", None)
        yield {
            "id": c.key,
            "task": c.task,
            "campaign": camp,
            "survey": c.survey or "",
            "object_id": c.object_id,
            "action": r.action,
            "verdict": r.label or "",
            "grade": "" if getattr(r, "grade", None) is None else int(r.grade),
            "redshift": "" if z is None else f"{float(z):.5f}",
            "redshift_source": getattr(r, "redshift_source", None) or "",
            "comment": r.comment or "",
            "expert": experts.get(r.expert_id, ""),
            "seconds": "" if r.seconds is None else f"{float(r.seconds):.1f}",
            "time": (r.updated or r.created).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


def campaigns(store: Store) -> list[str]:
    seen = {
        campaign_of(store.candidate(cid))
        for cid in {r.candidate_id for r in store.reviews(actions=DECISIONS)}
    }
    return sorted(seen)


def write_vi(
    store: Store, out: str | Path, *, campaign: str | None = None, layout: str = "loupe"
) -> int:
    """Write the VI CSV to `out` (UTF-8, comma-separated, a header row); returns its rows."""
    if layout not in LAYOUTS:
        raise VIError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if campaign is not None and campaign not in campaigns(store):
        raise VIError(f"no decisions in campaign {campaign!r}; known: {campaigns(store)}")
    names = LAYOUTS[layout]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    n = 0
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([names.get(c, c) for c in COLUMNS])
        for row in vi_rows(store, campaign=campaign):
            w.writerow([row[c] for c in COLUMNS])
            n += 1
    tmp.replace(out)  # a reader never sees half a file
    return n


def write_per_campaign(store: Store, folder: str | Path, *, layout: str = "loupe") -> list[Path]:
    """One `vi_<campaign>.csv` per campaign in `folder`."""
    folder = Path(folder)
    paths = []
    for camp in campaigns(store):
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in camp)
        p = folder / f"vi_{safe}.csv"
        write_vi(store, p, campaign=camp, layout=layout)
        paths.append(p)
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--campaign", default=None, help="only this campaign (catalogue or task)")
    parser.add_argument(
        "--layout",
        default="loupe",
        choices=tuple(LAYOUTS),
        help="column names: Loupe's, or those Prospect / Marz write for the same quantities",
    )


def main(args: argparse.Namespace) -> int:
    store = Store(args.db)
    try:
        n = write_vi(store, args.out, campaign=args.campaign, layout=args.layout)
    except VIError as exc:
        print(f"export vi: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"vi: {n} decisions into {args.out}")
    return 0
