"""`launch.py import-labels FILE.csv --expert NAME`: earlier verdicts become that expert's reviews.

Columns: `id` (with an optional `task`) or `path,task`; `label` YES/NO (also yes/no, 1/0,
true/false); optional `reason` and `comment`. Each row is recorded as NAME's review of the
candidate: accept where the label agrees with the agent's verdict, reject where it does
not, and correct where the agent has not vetted the candidate. The `reason` of a label
that differs from the agent's verdict is the review's explanation, what the model should
have concluded: that row exports as a reject with a reason does (an SFT row ending in that
reasoning, a DPO pair, an RL label). A `comment` is the note to other experts and is never
trained on: a row with a comment and no reason exports as a reject without one does, the
same neutral row the app's reject gives. A `reason` with a label that agrees with the agent
is kept as the accept's comment, never trained on: no text is dropped, and the summary counts
where each went. Text is kept as written (blanks, line breaks). Where two rows name one
candidate and expert, the later one wins and the summary names the one it superseded.
This is how a team brings in a past
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
a `#` header line); a file
with no YES/NO verdict column (a Prospect or Marz file says what the object is, not whether
it is the task's class) is refused whole, in one line.

A row never guesses its candidate: an id the store gives to candidates of several tasks, or
a TARGETID of an object with several candidates, is refused in one line naming the id and
its candidates unless the row has a `task` or `--task` names it (`task`). With `dry_run`,
nothing is written: the report's `planned` says, row by row, what each would change.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.formats.catalogue import LABEL_ALIASES
from annotate.export.spreadsheet import uncell
from annotate.export.vi import TIME_FORMAT
from annotate.export.vi_ids import target_id
from annotate.review import decide, derive_label
from db.models import DECISIONS
from db.store import Store, StoreError

# Column names of Loupe's VI CSV in other layouts (and Loupe's `verdict`), read as these.
ALIASES = {"verdict": "label", "vi_scanner": "expert", "vi_quality": "grade", "qop": "grade",
           "vi_z": "redshift", "finz": "redshift", "vi_comment": "comment",
           "targetid": "object_id", "name": "id", "vi_issue": "issues",
           "vi_spectype": "spectype", "fintn": "spectype"}  # fmt: skip
# Free text, kept exactly as written (other cells lose the blanks around them).
TEXTS = ("reason", "reasoning", "comment", "note")
_EOL = re.compile(r"\r\n|\r|\n")


@dataclass
class ImportReport:
    recorded: int = 0  # new or changed reviews
    unchanged: int = 0  # identical to what was already stored
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)
    # (line, later line): a row replaced by a later one for the same candidate and expert
    superseded: list[tuple[int, int]] = field(default_factory=list)
    trained: int = 0  # reasons and reasonings recorded as what the model should learn
    as_comment: int = 0  # reasons or reasonings kept in the comment (the decision takes none)
    comments: int = 0  # rows whose comment was recorded
    steps_dropped: int = 0  # wrong steps of a trajectory this store does not hold
    # a dry run: (line, what the row would change), nothing written
    planned: list[tuple[int, str]] = field(default_factory=list)
    dry_run: bool = False

    def __str__(self) -> str:
        would = "would record" if self.dry_run else "recorded"
        out = f"{self.recorded} {would}, {self.unchanged} unchanged, {len(self.errors)} refused"
        if self.superseded:
            pairs = ", ".join(f"line {a} by line {b}" for a, b in self.superseded)
            out += (f"; {len(self.superseded)} superseded by a later row for the same "
                    f"candidate and expert, which wins ({pairs})")  # fmt: skip
        if self.trained or self.as_comment or self.comments:
            out += (f"; text: {self.trained} reason(s) trained on, {self.as_comment} reason(s) "
                    f"kept as comments (the decision here takes none; not trained on), "
                    f"{self.comments} comment(s)")  # fmt: skip
        if self.steps_dropped:
            out += (f"; {self.steps_dropped} wrong step(s) dropped (a step of a trajectory "
                    "this store does not hold)")  # fmt: skip
        return out


def import_labels(
    store: Store,
    path: str | Path,
    expert: str | None,
    *,
    create_expert: bool = False,
    source: str = "import",
    task: str | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Record every good row of the CSV at `path` as `expert`'s review (or, where the file
    has an `expert` column, as the review of the expert it names). `task` is the task of
    rows that name none; with `dry_run` nothing is written and `report.planned` says what
    each row would change."""
    path = Path(path)
    report = ImportReport(dry_run=dry_run)
    if expert is not None and store.expert(expert) is None and not create_expert:
        # A typo must not become a phantom expert holding a whole campaign's reviews.
        raise StoreError(
            f"{no_expert(store, expert)} (create it with `launch.py add-expert`, or pass "
            "--create-expert)"
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
    if not header & {"label", "action"}:
        # one line for the file, not a refusal repeated on each of its rows
        raise StoreError(
            f"{path}: no 'label' column, nor a 'verdict' (a YES/NO for the task); nothing "
            "recorded. A Prospect or Marz file says what each object is, not whether it is "
            f"the task's class: add a verdict column (header: {sorted(header)})"
        )
    if not header & {"id", "object_id"} and not {"path", "task"} <= header:
        raise StoreError(f"{path}: needs an 'id' column or 'path' and 'task' columns")
    _refuse_missing_experts(store, path, rows, expert, create=create_expert)
    base = path.resolve().parent
    targets = _Targets(store)
    # One decision per candidate and expert: the last row of the file naming them wins, so
    # a file read twice records nothing the second time (and never two revisions per read).
    last: dict[tuple[int, str], tuple[int, dict[str, str], Any]] = {}
    for line, rec in rows:
        try:
            _label(rec)
            who = rec.get("expert") or expert
            if not who:
                raise StoreError("no expert: the row names none and --expert is not given")
            if store.expert(who) is None and not create_expert:
                raise StoreError(f"{no_expert(store, who)} (pass --create-expert to create it)")
            info = _candidate(store, rec, base, targets, task)
        except (StoreError, PermissionError) as err:
            report.errors.append((line, str(err)))
            continue
        earlier = last.get((info.id, who))
        if earlier is not None:
            report.superseded.append((earlier[0], line))
        last[(info.id, who)] = (line, rec, info)
    for (_, who), (line, rec, info) in sorted(last.items(), key=lambda kv: kv[1][0]):
        try:
            if dry_run:
                changed, said = _plan_row(store, rec, who, info, report)
                report.planned.append((line, said))
            else:
                changed = _import_row(store, rec, who, info, source, create_expert, report)
        except (StoreError, PermissionError) as err:
            report.errors.append((line, str(err)))
            continue
        if changed:
            report.recorded += 1
        else:
            report.unchanged += 1
    report.errors.sort()
    return report


def _refuse_missing_experts(
    store: Store,
    path: Path,
    rows: list[tuple[int, dict[str, str]]],
    default: str | None,
    *,
    create: bool,
) -> None:
    """Refuse the whole file, before anything is recorded, when rows name no expert (and
    --expert gives none) or, unless `create`, name experts the store does not have: a
    missing flag or a mistyped name is one problem to fix, not a refusal repeated on each
    of the file's rows."""
    named: dict[str, int] = {}
    nameless = 0
    for _, rec in rows:
        who = rec.get("expert") or default
        if who:
            named[who] = named.get(who, 0) + 1
        else:
            nameless += 1
    if nameless:
        which = "its rows" if nameless == len(rows) else f"{nameless} of its {len(rows)} rows"
        raise StoreError(
            f"{path}: {which} name no expert (an `expert` column) and --expert is not given; "
            "nothing recorded (pass --expert NAME for the rows that name none)"
        )
    unknown = [] if create else [who for who in named if store.expert(who) is None]
    if unknown:
        rows_of = {who: f"{named[who]} row{'s' * (named[who] != 1)}" for who in unknown}
        which = ", ".join(f"{who!r} ({n}{_nearest(store, who)})" for who, n in rows_of.items())
        raise StoreError(
            f"{path}: no expert {which} in the store; nothing recorded (create it with "
            "`launch.py add-expert`, or pass --create-expert)"
        )


def no_expert(store: Store, name: str) -> str:
    """ "no expert 'alcie'", with the nearest name the store has ("did you mean 'alice'?")."""
    return f"no expert {name!r}{_nearest(store, name)}"


def _nearest(store: Store, name: str) -> str:
    names = [e.name for e in store.experts()]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not close:
        folded = {n.casefold(): n for n in names}
        close = [folded[name.casefold()]] if name.casefold() in folded else []
    return f"; did you mean {close[0]!r}?" if close else ""


def _read_rows(fh: io.TextIOBase) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(the header with Loupe's lower-case names, [(line, row)]), the line where each row
    starts. A Marz results file puts its header on the last of its leading '#' lines.

    The CSV is parsed as one text, never split into lines first: a quoted cell keeps its
    line breaks (\\n, \\r\\n, \\r) and U+2028, U+2029 and U+0085 are ordinary characters.
    A file Loupe wrote (one with its `action` column) has its spreadsheet escape taken off
    (`annotate.export.spreadsheet.uncell`). Free text (`TEXTS`) is kept as written."""
    text = fh.read()
    start, skipped, head = 0, 0, None
    while text.startswith("#", start):  # Marz: the header is the last '#' line
        m = _EOL.search(text, start)
        head, skipped = start, skipped + 1
        start = len(text) if m is None else m.end()
    if head is not None:
        start = head + 1  # the header line without its '#'
        skipped -= 1
    reader = csv.reader(io.StringIO(text[start:], newline=""))
    names = [str(c).strip().lower() for c in next(reader, [])]
    if "qop" in names:  # Marz: ID is its running number, Name the object's id
        names = ["marz_id" if n == "id" else n for n in names]
    # another tool's name for a column, unless the file also has Loupe's own
    names = [n if ALIASES.get(n, n) in names else ALIASES.get(n, n) for n in names]
    escaped = "action" in names  # Loupe's own file: its cells went through `cell`
    rows = []
    first = reader.line_num + 1
    for values in reader:
        if any(v.strip() for v in values):
            rec = {}
            for n, v in zip(names, values):
                if n:
                    v = uncell(v) if escaped else v
                    rec[n] = v if n in TEXTS else v.strip()
            rows.append((skipped + first, rec))
        first = reader.line_num + 1
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


def _decision(
    rec: dict[str, str], label: str | None, verdict: str | None, report: ImportReport
) -> dict[str, Any]:
    """The review the row records: as Loupe's VI CSV wrote it (an `action` column), else
    from the label against the agent's verdict. No text is dropped: a reason or reasoning
    the decision here takes no explanation for (an accept, a skip, a flag) is kept in its
    comment, never trained on; `report` counts where each went."""
    grade = _number(rec, "grade", int)
    if grade == 0:
        grade = None  # VI quality 0, Marz QOP 0: nothing there / not inspected
    extras: dict[str, Any] = {
        "grade": grade,
        "redshift": _number(rec, "redshift"),
        "redshift_source": rec.get("redshift_source") or None,
        "seconds": _number(rec, "seconds"),
        "issues": rec.get("issues") or None,
        "spectype": rec.get("spectype") or None,
    }
    if extras["redshift"] is not None and not extras["redshift_source"]:
        extras["redshift_source"] = "expert"
    action = rec.get("action", "").lower()
    step = None
    if action in ("accept", "reject") and label is not None:
        # An accept or reject judged the verdict of the agent in the store it was made in;
        # the label it left (the `verdict` column) is the fact. Against another verdict here
        # (or none, in a store not vetted yet) the same action would record the opposite
        # label, or nothing: it becomes the decision that gives the same label here.
        said = None if verdict is None else derive_label(action, verdict, None)
        if said != label:
            action = "correct" if verdict is None else "accept" if label == verdict else "reject"
    if action:
        if action not in DECISIONS:
            raise StoreError(f"action {action!r} is not a decision ({', '.join(DECISIONS)})")
        step = _number(rec, "wrong_step", int)
    else:
        if label is None:
            raise StoreError(f"label {rec.get('label', '')!r} is not YES or NO")
        action = "correct" if verdict is None else "accept" if label == verdict else "reject"
    # A reason is trained on only where the label overrules the agent (a reject's reason, a
    # correction's reasoning); any other is the expert's note, kept in the comment.
    texts = [(n, rec.get(n) or "") for n in ("reason", "reasoning")]
    texts = [(n, t) for n, t in texts if t.strip()]
    if action == "correct":
        texts.reverse()  # a correction's own text first, a reject's reason else
    explanation = texts.pop(0)[1] if texts and action in ("reject", "correct") else None
    comment = rec.get("comment") or ""
    if action != "correct" and (rec.get("note") or "").strip():
        texts.append(("note", rec["note"]))  # only a correction has a note of its own
    for n, t in texts:
        comment = f"{comment}\n\n{n}: {t}" if comment else t
    report.trained += explanation is not None
    report.as_comment += len(texts)
    report.comments += bool(rec.get("comment"))
    # The step named is one of the trajectory judged; a store not vetted yet has none, and
    # a decision that does not overrule the agent names none.
    if step is not None and (verdict is None or action not in ("reject", "correct")):
        report.steps_dropped += 1
        step = None
    return {
        "action": action,
        "label": label if action == "correct" else None,
        "explanation": explanation,
        "wrong_step": None if step is None else step - 1,  # written 1-based
        "comment": comment or None,
        # a correction's note to other experts, in its own field (never trained on)
        "note": (rec.get("note") or None) if action == "correct" else None,
        **extras,
    }


def _label(rec: dict[str, str]) -> str | None:
    label = LABEL_ALIASES.get(rec.get("label", "").lower())
    if label is None and not rec.get("action"):
        raise StoreError(
            f"label {rec.get('label', '')!r} is not YES or NO"
            if "label" in rec
            else "no YES/NO verdict (a 'label' or 'verdict' column)"
        )
    return label


class _Targets:
    """The store's candidates by the TARGETID a VI file gives them (`vi_ids.target_id`),
    read once, when a row names its object by TARGETID alone."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.by_id: dict[int, list[tuple[int, str]]] | None = None

    def find(self, targetid: str, task: str | None) -> list[Any]:
        """Every candidate (of `task`, if given) of the object with this TARGETID."""
        if self.by_id is None:
            self.by_id = {}
            for cid, oid, survey, t in self.store.object_ids():
                self.by_id.setdefault(target_id(survey, oid), []).append((cid, t))
        found = [cid for cid, t in self.by_id.get(int(targetid), []) if task in (None, t)]
        return [self.store.candidate(cid) for cid in found]


def _one(found: list[Any], what: str, task: str | None) -> Any:
    """The one candidate of `found`, or None; several are refused, never guessed at."""
    if len(found) <= 1:
        return found[0] if found else None
    names = ", ".join(f"{c.key} ({c.task})" for c in found)
    fix = "" if task else ": give the row a task (a `task` column) or pass --task"
    many = f"{len(found)} candidates of task {task!r}" if task else f"{len(found)} candidates"
    raise StoreError(f"{what} names {many}, {names}{fix}; nothing recorded for it")


def _candidate(
    store: Store, rec: dict[str, str], base: Path, targets: _Targets, default: str | None = None
) -> Any:
    """The candidate a row names: by `id`, by `path` and `task`, or by `object_id` (a
    Prospect file's TARGETID: DESI's own, or the one Loupe gave the object); the row's
    task, else `default`. A row that names several candidates is refused (`_one`)."""
    task = rec.get("task") or default or None
    key = rec.get("id") or rec.get("object_id")
    if key and not rec.get("path"):
        info = None
        if not rec.get("id") and re.fullmatch(r"-?[0-9]+", key):
            info = _one(targets.find(key, task), f"TARGETID {key}", task)
        if info is None:
            found = store.candidates_with_key(key, task)
            info = _one(found, f"id {key!r}", task)
        if info is None:
            raise StoreError(
                f"no candidate with id {key!r}" + (f" for task {task!r}" if task else "")
            )
        return info
    if rec.get("path"):
        if not task:
            raise StoreError("a row identified by path needs a task")
        for candidate in _path_forms(rec["path"], base):
            info = store.find_by_path(candidate, task)
            if info is not None:
                return info
        raise StoreError(f"no candidate for path {rec['path']!r} and task {task!r}")
    raise StoreError("empty id and path")


def _import_row(
    store: Store,
    rec: dict[str, str],
    expert: str,
    info: Any,
    source: str,
    create: bool,
    report: ImportReport,
) -> bool:
    label = _label(rec)
    counts = ImportReport()
    decision = _decision(rec, label, info.verdict, counts)
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
    review = decide(store, expert, info.id, source=source, verbatim=True, **decision)
    if when is not None:
        review = store.set_review_time(review.id, when)  # when the decision was made
    for name in ("trained", "as_comment", "comments", "steps_dropped"):
        setattr(report, name, getattr(report, name) + getattr(counts, name))
    return before is None or before != _state(review)


def _plan_row(
    store: Store, rec: dict[str, str], expert: str, info: Any, report: ImportReport
) -> tuple[bool, str]:
    """What recording the row would do, in words, without writing: (changes anything,
    the line that says so)."""
    decision = _decision(rec, _label(rec), info.verdict, report)
    label = derive_label(decision["action"], info.verdict, decision["label"])
    new = f"{decision['action']} -> {label or '-'}"
    rows = store.reviews(candidate_id=info.id, expert=expert) if store.expert(expert) else []
    where = f"{info.key} ({info.task}) as {expert}"
    if not rows or rows[0].action == "undo":
        return True, f"{where}: would record {new}"
    r = rows[0]
    fields = ("comment", "explanation", "wrong_step", "grade", "redshift", "issues", "spectype")
    changed = [f for f in fields if getattr(r, f) != decision.get(f)]
    old = f"{r.action} -> {r.label or '-'}"
    if old == new and not changed:
        return False, f"{where}: unchanged ({old})"
    also = f" (and {', '.join(changed)})" if changed else ""
    return True, f"{where}: would replace {old} by {new}{also}"


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
