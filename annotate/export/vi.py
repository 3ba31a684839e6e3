"""The visual-inspection CSV: every expert decision as one plain row, per campaign.

    python launch.py export vi --out vi.csv                      # every campaign, one file
    python launch.py export vi --out vi.csv --campaign demo      # one campaign
    python launch.py export vi --out vi.csv --layout prospect    # DESI Prospect's VI file
    python launch.py export vi --out vi.csv --layout marz        # a Marz results file

A campaign is the catalogue the candidates were ingested from (`source_catalog`), else their
task. One row per expert and candidate (the review as it stands; revisions are not rows).
The columns are documented in docs/vi_csv.md. `--layout prospect` writes Prospect's 16
ordered VI fields first (`PROSPECT_FIELDS`, filled from the spectrum file's header and
fibermap where it has them) and `--layout marz` the columns of a Marz results file
(`MARZ_FIELDS`, under a `#` header line as Marz writes it); Loupe's own columns follow, so
`import-labels` reads any layout back into the same decisions. Decisions are read, never
written: the file is no export batch and can be re-run at will. Every cell goes through
`annotate.export.spreadsheet.csv_line` (no formula runs in a spreadsheet; line breaks and
blanks stay inside their quoted cell); TARGETID and VI_spectype are `vi_ids`'.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from annotate.export.spreadsheet import csv_line
from annotate.export.vi_ids import prospect_spectype, target_id
from db.models import DECISIONS
from db.store import Store, StoreError

COLUMNS: tuple[str, ...] = (
    "id", "task", "campaign", "survey", "object_id", "action", "verdict", "grade", "redshift",
    "redshift_source", "issues", "spectype", "reason", "reasoning", "wrong_step", "comment", "note",
    "expert", "seconds", "time",
)  # fmt: skip
# prospect.utilities.vi_file_fields, in its order; VI_quality runs 0-4 (0: nothing there)
PROSPECT_FIELDS: tuple[str, ...] = (
    "TARGETID", "EXPID", "NIGHT", "TILEID", "Spec_version", "Redrock_version",
    "Template_version", "Redrock_spectype", "Redrock_z", "Redrock_deltachi2", "VI_scanner",
    "VI_quality", "VI_issue", "VI_z", "VI_spectype", "VI_comment",
)  # fmt: skip
# Marz's ResultsGenerator (one automatic result, manual results on): its columns in order
MARZ_FIELDS: tuple[str, ...] = (
    "ID", "Name", "RA", "DEC", "Mag", "Type", "AutoTID", "AutoTN", "AutoZ", "AutoXCor",
    "FinTID", "FinTN", "FinZ", "QOP", "Comment",
)  # fmt: skip
# The Loupe column each of their fields carries (the others come from the spectrum file;
# VI_spectype is Prospect's class of the expert's `spectype`, which follows in its own column).
PROSPECT_FROM = {"VI_scanner": "expert", "VI_quality": "grade", "VI_issue": "issues",
                 "VI_z": "redshift", "VI_comment": "comment"}  # fmt: skip
MARZ_FROM = {"Name": "id", "FinTN": "spectype", "FinZ": "redshift", "QOP": "grade",
             "Comment": "comment"}  # fmt: skip
LAYOUTS: tuple[str, ...] = ("loupe", "prospect", "marz")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class VIError(ValueError):
    """A VI export that cannot be written (an unknown layout or campaign)."""


def campaign_of(candidate: Any) -> str:
    return candidate.source_catalog or candidate.task


def vi_rows(
    store: Store, *, campaign: str | None = None, expert: str | None = None
) -> Iterator[dict[str, Any]]:
    """One dict per decision (keys COLUMNS), in the order the decisions were first made;
    only `expert`'s if given. A taken-back decision (`undo`) is a revision, not a decision:
    it has no row."""
    experts = {e.id: e.name for e in store.experts()}
    cands: dict[int, Any] = {}
    for r in store.reviews(actions=DECISIONS):  # an undo is a revision, not a decision
        if expert is not None and experts.get(r.expert_id) != expert:
            continue
        c = cands.get(r.candidate_id)
        if c is None:
            c = cands[r.candidate_id] = store.candidate(r.candidate_id)
        camp = campaign_of(c)
        if campaign is not None and camp != campaign:
            continue
        z = r.redshift
        yield {
            "id": c.key,
            "task": c.task,
            "campaign": camp,
            "survey": c.survey or "",
            "object_id": c.object_id,
            "action": r.action,
            "verdict": r.label or "",
            "grade": "" if r.grade is None else int(r.grade),
            "redshift": "" if z is None else f"{float(z):.5f}",
            "redshift_source": r.redshift_source or "",
            "issues": r.issues or "",  # Prospect's flags as it writes them, e.g. "RS"
            "spectype": r.spectype or "",
            # the explanation is a reject's reason or a correction's reasoning
            "reason": (r.explanation or "") if r.action == "reject" else "",
            "reasoning": (r.explanation or "") if r.action == "correct" else "",
            "wrong_step": "" if r.wrong_step is None else int(r.wrong_step) + 1,  # 1-based
            "comment": r.comment or "",
            "note": (r.note or "") if r.action == "correct" else "",
            "expert": experts.get(r.expert_id, ""),
            "seconds": "" if r.seconds is None else f"{float(r.seconds):.1f}",
            "time": (r.updated or r.created).strftime(TIME_FORMAT),
            "_cid": c.id,
        }


def _pipeline(store: Store, cid: int, cache: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What the candidate's file says of itself: pipeline class and z, and (DESI) the
    fibermap's and header's ids; {} when the file cannot be read."""
    if cid not in cache:
        try:
            # read in a limited worker, without its arrays: the file is untrusted
            meta, z = store.spectrum_header(cid)
        except (OSError, ValueError, StoreError):
            cache[cid] = {}
        else:
            desi = meta.extra.get("desi") or {}
            cache[cid] = {"class": meta.survey_class or "", "z": z, **desi}
    return cache[cid]


def _int_or(value: Any, default: int = -1) -> Any:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def prospect_row(row: dict[str, Any], pipe: dict[str, Any]) -> list[Any]:
    """Prospect's 16 fields, with its defaults (-1, "") where Loupe has nothing; TARGETID is
    the DESI file's, else one of Loupe's own that no DESI TARGETID takes (`vi_ids`)."""
    z = pipe.get("z")
    return [
        target_id(row.get("survey"), row["object_id"], pipe.get("TARGETID")),
        _int_or(pipe.get("EXPID")), _int_or(pipe.get("NIGHT")), _int_or(pipe.get("TILEID")),
        pipe.get("SPECPROD", "-1"), pipe.get("RRVER", "-1"), pipe.get("TEMNAM", "-1"),
        pipe.get("class", ""), "-1" if not pipe else f"{round(float(z or 0.0), 4) + 0.0:.4f}",
        pipe.get("DELTACHI2", "-1"), row["expert"],
        -1 if row["grade"] == "" else row["grade"], row["issues"], row["redshift"],
        prospect_spectype(row["spectype"]), row["comment"],
    ]  # fmt: skip


def _degrees(value: Any) -> str:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return ""
    return f"{f:.6f}" if math.isfinite(f) else ""


def marz_row(
    n: int, row: dict[str, Any], pipe: dict[str, Any], position: tuple[Any, Any] = (None, None)
) -> list[Any]:
    """Marz's results columns: RA and DEC in degrees from the stored position (empty where
    the file gave none); QOP 0 is "not inspected", as Marz writes it."""
    z = pipe.get("z")
    return [
        n, row["id"], _degrees(position[0]), _degrees(position[1]), "", pipe.get("class", ""),
        "", "",
        "" if not pipe else f"{float(z or 0.0):.5f}", "", "0", row["spectype"], row["redshift"],
        0 if row["grade"] == "" else row["grade"], row["comment"],
    ]  # fmt: skip


def campaigns(store: Store, expert: str | None = None) -> list[str]:
    me = None if expert is None else store.expert(expert)
    cids = {r.candidate_id for r in store.reviews(actions=DECISIONS)
            if expert is None or (me is not None and r.expert_id == me.id)}  # fmt: skip
    return sorted({campaign_of(store.candidate(cid)) for cid in cids})


def header(layout: str) -> list[str]:
    """The file's header row in `layout`: its tool's fields, then Loupe's not among them."""
    if layout == "prospect":
        return [*PROSPECT_FIELDS, *(c for c in COLUMNS if c not in PROSPECT_FROM.values())]
    if layout == "marz":
        return [*MARZ_FIELDS, *(c for c in COLUMNS if c not in MARZ_FROM.values())]
    return list(COLUMNS)


def write_vi(
    store: Store,
    out: str | Path,
    *,
    campaign: str | None = None,
    layout: str = "loupe",
    expert: str | None = None,
) -> int:
    """Write the VI CSV to `out` (UTF-8, comma-separated, a header row), of every expert's
    decisions or `expert`'s; returns its rows."""
    if layout not in LAYOUTS:
        raise VIError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    known = campaigns(store, expert)
    if campaign is not None and campaign not in known:
        raise VIError(f"no decisions in campaign {campaign!r}; known: {known}")
    names = header(layout)
    own = [c for c in names if c in COLUMNS]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    n = 0
    files: dict[int, dict[str, Any]] = {}
    rows = list(vi_rows(store, campaign=campaign, expert=expert))
    where = store.positions(r["_cid"] for r in rows) if layout == "marz" else {}
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        if layout == "marz":  # Marz reads its header from the last '#' line
            fh.write("# Loupe decisions as a Marz results file\n#")
        fh.write(csv_line(names))
        for row in rows:
            n += 1
            lead: list[Any] = []
            if layout == "prospect":
                lead = prospect_row(row, _pipeline(store, row["_cid"], files))
            elif layout == "marz":
                pipe = _pipeline(store, row["_cid"], files)
                lead = marz_row(n, row, pipe, where.get(row["_cid"], (None, None)))
            # no text cell runs as a formula in a spreadsheet, and any line break or blank
            # stays inside its quoted cell (annotate.export.spreadsheet)
            fh.write(csv_line([*lead, *(row[c] for c in own)]))
    tmp.replace(out)  # a reader never sees half a file
    return n


def write_per_campaign(
    store: Store, folder: str | Path, *, layout: str = "loupe", expert: str | None = None
) -> list[Path]:
    """One `vi_<campaign>.csv` per campaign in `folder` (only `expert`'s decisions if given)."""
    folder = Path(folder)
    paths = []
    for camp in campaigns(store, expert):
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in camp)
        p = folder / f"vi_{safe}.csv"
        write_vi(store, p, campaign=camp, layout=layout, expert=expert)
        paths.append(p)
    return paths
