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

Loupe's own VI CSV (`export vi`, any `--layout`) is read back as the decisions it holds:
its `action`, `verdict`, `grade`, `redshift` and `redshift_source`, `issues` and
`spectype`, `reason` (a reject's),
`reasoning` and `wrong_step` (a correction's), `comment`, `seconds` and `time`, each row
as the decision of its `expert` (`--expert` then names the expert of rows that name none).
An accept or reject keeps its label (the `verdict` column) where this store's agent said
otherwise or has not vetted the candidate: it becomes the reject, accept or correction that
gives that label here.
Prospect's and Marz's names are read as Loupe's (`VI_scanner`, `VI_quality`, `VI_issue`,
`VI_z`, `VI_spectype`, `VI_comment`, `TARGETID`; `Name`, `QOP`, `FinTN`, `FinZ`, `Comment`,
a `#` header line); a row with
no YES/NO verdict (a Prospect or Marz file says what the object is, not whether it is the
task's class) is refused with that reason.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.formats.catalogue import LABEL_ALIASES
from annotate.export.vi import TIME_FORMAT
from annotate.review import decide, derive_label
from db.models import DECISIONS
from db.store import Store, StoreError

# Column names of Loupe's VI CSV in other layouts (and Loupe's `verdict`), read as these.
ALIASES = {"verdict": "label", "vi_scanner": "expert", "vi_quality": "grade", "qop": "grade",
           "vi_z": "redshift", "finz": "redshift", "vi_comment": "comment",
           "targetid": "object_id", "name": "id", "vi_issue": "issues",
           "vi_spectype": "spectype", "fintn": "spectype"}  # fmt: skip


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
    expert: str | None,
    *,
    create_expert: bool = False,
    source: str = "import",
) -> ImportReport:
    """Record every good row of the CSV at `path` as `expert`'s review (or, where the file
    has an `expert` column, as the review of the expert it names)."""
    path = Path(path)
    report = ImportReport()
    if expert is not None and store.expert(expert) is None and not create_expert:
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
            names, rows = _read_rows(fh)
        except (csv.Error, UnicodeDecodeError) as err:
            raise StoreError(f"{path}: unreadable CSV ({err})") from None
    header = set(names)
    if not header & {"label", "action", "grade"}:
        raise StoreError(f"{path}: no 'label' column (header: {sorted(header)})")
    if not header & {"id", "object_id"} and not {"path", "task"} <= header:
        raise StoreError(f"{path}: needs an 'id' column or 'path' and 'task' columns")
    if not create_expert:
        _refuse_unknown_experts(store, path, rows, expert)
    base = path.resolve().parent
    for line, rec in rows:
        try:
            _label(rec)
            who = rec.get("expert") or expert
            if not who:
                raise StoreError("no expert: the row names none and --expert is not given")
            if store.expert(who) is None and not create_expert:
                raise StoreError(f"no expert {who!r} (pass --create-expert to create it)")
            changed = _import_row(store, rec, who, base, source, create_expert)
        except (StoreError, PermissionError) as err:
            report.errors.append((line, str(err)))
            continue
        if changed:
            report.recorded += 1
        else:
            report.unchanged += 1
    return report


def _refuse_unknown_experts(
    store: Store, path: Path, rows: list[tuple[int, dict[str, str]]], default: str | None
) -> None:
    """Refuse the whole file, before anything is recorded, when its rows name experts the
    store does not have: one mistyped or new name is one problem to fix (add the expert or
    pass --create-expert), not a refusal repeated on each of its rows."""
    named: dict[str, int] = {}
    for _, rec in rows:
        who = rec.get("expert") or default
        if who:
            named[who] = named.get(who, 0) + 1
    unknown = [who for who in named if store.expert(who) is None]
    if unknown:
        rows_of = {who: f"{named[who]} row{'s' * (named[who] != 1)}" for who in unknown}
        which = ", ".join(f"{who!r} ({n})" for who, n in rows_of.items())
        raise StoreError(
            f"{path}: no expert {which} in the store; nothing recorded (create it with "
            "`launch.py add-expert`, or pass --create-expert)"
        )


def _read_rows(fh: io.TextIOBase) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(the header with Loupe's lower-case names, [(line, row)]). A Marz results file puts
    its header on the last of its leading '#' lines."""
    lines = fh.read().splitlines()
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    if start:  # the header is the last '#' line
        start -= 1
        lines[start] = lines[start].lstrip("#")
    reader = csv.reader(lines[start:])
    names = [str(c).strip().lower() for c in next(reader, [])]
    if "qop" in names:  # Marz: ID is its running number, Name the object's id
        names = ["marz_id" if n == "id" else n for n in names]
    # another tool's name for a column, unless the file also has Loupe's own
    names = [n if ALIASES.get(n, n) in names else ALIASES.get(n, n) for n in names]
    rows = []
    for i, values in enumerate(reader):
        if any(v.strip() for v in values):
            rows.append((start + i + 2, {n: v.strip() for n, v in zip(names, values) if n}))
    return names, rows


def _number(rec: dict[str, str], name: str, cast: type = float) -> Any:
    v = rec.get(name, "")
    if v in ("", "-1") and name == "grade":
        return None  # Prospect's "no quality given"
    if v == "":
        return None
    try:
        return cast(float(v)) if cast is int else cast(v)
    except ValueError:
        raise StoreError(f"{name} {v!r} is not a number") from None


def _decision(rec: dict[str, str], label: str | None, verdict: str | None) -> dict[str, Any]:
    """The review the row records: as Loupe's VI CSV wrote it (an `action` column), else
    from the label against the agent's verdict."""
    grade = _number(rec, "grade", int)
    if grade == 0:
        grade = None  # VI quality 0, Marz QOP 0: nothing there / not inspected
    extras: dict[str, Any] = {
        "grade": grade,
        "redshift": _number(rec, "redshift"),
        "redshift_source": rec.get("redshift_source") or None,
        "seconds": _number(rec, "seconds"),
        "comment": rec.get("comment") or None,
        "issues": rec.get("issues") or None,
        "spectype": rec.get("spectype") or None,
    }
    if extras["redshift"] is not None and not extras["redshift_source"]:
        extras["redshift_source"] = "expert"
    action = rec.get("action", "").lower()
    if action in ("accept", "reject") and label is not None:
        # An accept or reject judged the verdict of the agent in the store it was made in;
        # the label it left (the `verdict` column) is the fact. Against another verdict here
        # (or none, in a store not vetted yet) the same action would record the opposite
        # label, or nothing: it becomes the decision that gives the same label here.
        said = None if verdict is None else derive_label(action, verdict, None)
        if said != label:
            action = "correct" if verdict is None else "accept" if label == verdict else "reject"
            if action == "correct":
                rec = {**rec, "reasoning": rec.get("reason") or rec.get("reasoning") or ""}
    if action:
        if action not in DECISIONS:
            raise StoreError(f"action {action!r} is not a decision ({', '.join(DECISIONS)})")
        # The step named is one of the trajectory judged; a store not vetted yet has none.
        step = _number(rec, "wrong_step", int) if verdict is not None else None
        return {
            "action": action,
            "label": label if action == "correct" else None,
            "explanation": (rec.get("reason") if action == "reject" else
                            rec.get("reasoning") if action == "correct" else None) or None,
            "wrong_step": None if step is None else step - 1,  # written 1-based
            **extras,
        }  # fmt: skip
    if label is None:
        raise StoreError(f"label {rec.get('label', '')!r} is not YES or NO")
    if verdict is None:
        action = "correct"
    else:
        action = "accept" if label == verdict else "reject"
    # A reason is trained on only where the label overrules the agent; a comment never is
    # (a note to other experts, not the model's reasoning).
    reason = rec.get("reason", "") if action != "accept" else ""
    return {"action": action, "label": label if action == "correct" else None,
            "explanation": reason or None, "wrong_step": None, **extras}  # fmt: skip


def _label(rec: dict[str, str]) -> str | None:
    label = LABEL_ALIASES.get(rec.get("label", "").lower())
    if label is None and not rec.get("action"):
        raise StoreError(
            f"label {rec.get('label', '')!r} is not YES or NO"
            if "label" in rec
            else "no YES/NO verdict (a 'label' or 'verdict' column)"
        )
    return label


def _import_row(
    store: Store, rec: dict[str, str], expert: str, base: Path, source: str, create: bool
) -> bool:
    label = _label(rec)
    task = rec.get("task") or None
    info = None
    key = rec.get("id") or rec.get("object_id")
    if key and not rec.get("path"):
        info = store.find_candidate(key, task)
        if info is None:
            raise StoreError(
                f"no candidate with id {key!r}" + (f" for task {task!r}" if task else "")
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
    decision = _decision(rec, label, info.verdict)
    when = None
    if rec.get("time"):
        try:
            when = dt.datetime.strptime(rec["time"], TIME_FORMAT)
        except ValueError:
            raise StoreError(f"time {rec['time']!r} is not {TIME_FORMAT}") from None
    if create and store.expert(expert) is None:
        store.ensure_expert(expert)  # only now: the row is good and about to be recorded
    before = _current(store, info.id, expert)
    # the reason a reject carries, or a correction's reasoning, is its explanation
    review = decide(store, expert, info.id, source=source, **decision)
    if when is not None:
        review = store.set_review_time(review.id, when)  # when the decision was made
    return before is None or before != _state(review)


def _state(r: Any) -> tuple:
    return (r.revision, r.action, r.label, r.comment, r.explanation, r.wrong_step, r.grade,
            r.redshift, r.redshift_source, r.issues, r.spectype, r.updated)  # fmt: skip


def _current(store: Store, candidate_id: int, expert: str):
    rows = store.reviews(candidate_id=candidate_id, expert=expert)
    return _state(rows[0]) if rows else None


def _path_forms(path: str, base: Path) -> list[str]:
    p = Path(path).expanduser()
    forms = [str(p)]
    if not p.is_absolute():
        forms += [str((base / p).resolve()), str(p.resolve())]
    else:
        forms.append(str(p.resolve()))
    return list(dict.fromkeys(forms))
