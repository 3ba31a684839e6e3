"""`launch.py import-labels FILE.csv --expert NAME`: earlier verdicts become that expert's reviews.

Columns: `id` (with an optional `task`) or `path,task`; `label` YES/NO (also yes/no, 1/0,
true/false); optional `reason` and `comment`. Each row is recorded as NAME's review of the
candidate: accept where the label agrees with the agent's verdict, reject where it does
not, and correct where the agent has not vetted the candidate. The `reason` of a label
that differs from the agent's verdict is the review's explanation, what the model should
have concluded: that row exports as a reject with a reason does (an SFT row ending in that
reasoning, a DPO pair, an RL label). A `comment` is the note to other experts and is never
trained on: a row with a comment and no reason exports as a reject without one does, the
same neutral row the app's reject gives. This is how a team brings in a past
visual-inspection campaign (Prospect or Marz CSVs) or catalogue labels. A bad row is
reported with its line number and the reason; the good rows are kept. Importing the same
file again changes nothing. NAME must be an existing expert unless `--create-expert` is
given, and even then it is created only when a row is recorded: a refused file, or one
whose every row is refused, leaves the store as it was.

    python launch.py import-labels prospect_results.csv --expert ada --db loupe.db
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agent.formats.catalogue import LABEL_ALIASES
from annotate.review import decide
from db.store import DEFAULT_DB, Store, StoreError


@dataclass
class ImportReport:
    recorded: int = 0  # new or changed reviews
    unchanged: int = 0  # identical to what was already stored
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)

    def __str__(self) -> str:
        return f"{self.recorded} recorded, {self.unchanged} unchanged, {len(self.errors)} refused"


def import_labels(
    store: Store,
    path: str | Path,
    expert: str,
    *,
    create_expert: bool = False,
    source: str = "import",
) -> ImportReport:
    """Record every good row of the CSV at `path` as `expert`'s review."""
    path = Path(path)
    report = ImportReport()
    if store.expert(expert) is None and not create_expert:
        # A typo must not become a phantom expert holding a whole campaign's reviews.
        raise StoreError(
            f"no expert {expert!r} (create it with `launch.py add-expert`, or pass --create-expert)"
        )
    try:
        fh = open(path, newline="", encoding="utf-8-sig")
    except OSError as err:
        raise StoreError(f"{path}: cannot open ({err.strerror or err})") from None
    with fh:
        try:
            reader = csv.DictReader(fh)
            header = {str(c).strip().lower() for c in reader.fieldnames or []}
            if "label" not in header:
                raise StoreError(f"{path}: no 'label' column (header: {sorted(header)})")
            if "id" not in header and not {"path", "task"} <= header:
                raise StoreError(f"{path}: needs an 'id' column or 'path' and 'task' columns")
            rows = list(reader)
        except (csv.Error, UnicodeDecodeError) as err:
            raise StoreError(f"{path}: unreadable CSV ({err})") from None
    base = path.resolve().parent
    for line, raw in enumerate(rows, start=2):
        rec = {str(k).strip().lower(): (v or "").strip() for k, v in raw.items() if k}
        try:
            changed = _import_row(store, rec, expert, base, source, create_expert)
        except (StoreError, PermissionError) as err:
            report.errors.append((line, str(err)))
            continue
        if changed:
            report.recorded += 1
        else:
            report.unchanged += 1
    return report


def _import_row(
    store: Store, rec: dict[str, str], expert: str, base: Path, source: str, create: bool
) -> bool:
    label = LABEL_ALIASES.get(rec.get("label", "").lower())
    if label is None:
        raise StoreError(f"label {rec.get('label', '')!r} is not YES or NO")
    task = rec.get("task") or None
    info = None
    if rec.get("id"):
        info = store.find_candidate(rec["id"], task)
        if info is None:
            raise StoreError(
                f"no candidate with id {rec['id']!r}" + (f" for task {task!r}" if task else "")
            )
    elif rec.get("path"):
        if not task:
            raise StoreError("a row identified by path needs a task")
        for candidate in _path_forms(rec["path"], base):
            info = store.find_by_path(candidate, task)
            if info is not None:
                break
        if info is None:
            raise StoreError(f"no candidate for path {rec['path']!r} and task {task!r}")
    else:
        raise StoreError("empty id and path")
    if info.verdict is None:
        action = "correct"
    else:
        action = "accept" if label == info.verdict else "reject"
    # A reason is trained on only where the label overrules the agent; a comment never is
    # (a note to other experts, not the model's reasoning).
    reason = rec.get("reason", "") if action != "accept" else ""
    if create and store.expert(expert) is None:
        store.ensure_expert(expert)  # only now: the row is good and about to be recorded
    before = _current(store, info.id, expert)
    # the reason a reject or correct carries is its explanation
    review = decide(
        store,
        expert,
        info.id,
        action,
        label=label,
        explanation=reason or None,
        comment=rec.get("comment") or None,
        source=source,
    )
    return before is None or before != (
        review.revision,
        review.action,
        review.label,
        review.comment,
        review.explanation,
    )


def _current(store: Store, candidate_id: int, expert: str):
    rows = store.reviews(candidate_id=candidate_id, expert=expert)
    if not rows:
        return None
    r = rows[0]
    return (r.revision, r.action, r.label, r.comment, r.explanation)


def _path_forms(path: str, base: Path) -> list[str]:
    p = Path(path).expanduser()
    forms = [str(p)]
    if not p.is_absolute():
        forms += [str((base / p).resolve()), str(p.resolve())]
    else:
        forms.append(str(p.resolve()))
    return list(dict.fromkeys(forms))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "csv", metavar="FILE.csv", help="CSV with id (or path,task), label, reason, comment."
    )
    parser.add_argument("--expert", required=True, help="Whose reviews these become.")
    parser.add_argument(
        "--create-expert",
        action="store_true",
        help="Create the expert if there is none of that name (otherwise an unknown name "
        "is refused).",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="Database file or SQLAlchemy URL.")


def main(args: argparse.Namespace) -> int:
    """Exit 1 when some rows were refused (each named; the rest are recorded). An unknown
    expert or an unreadable file is a `StoreError`: launch.py prints it and exits 2."""
    store = Store(args.db)
    try:
        report = import_labels(
            store, args.csv, args.expert, create_expert=getattr(args, "create_expert", False)
        )
    finally:
        store.close()
    for line, why in report.errors:
        print(f"import-labels: {args.csv} line {line}: {why}", file=sys.stderr)
    print(f"import-labels: {report} as {args.expert!r}")
    return 1 if report.errors else 0
