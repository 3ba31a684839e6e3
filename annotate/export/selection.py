"""What an export draws from the store: the records, one per object and task, and their splits.

- One row per object and task (`Candidate.object_id`); when several sources offer one, an
  approved authored trajectory beats a correction (a reject or correct with a reason),
  which beats a reject without a reason, which beats an accepted agent run; the newest
  wins among equals. How a reject or correction becomes a row: `correction`. Labels come from the store's resolution rule
  (`Candidate.label`: majority with an adjudicator's override).
- Splits by object: an object's existing `Candidate.split` wins (if its candidates name
  several, the most held-out one: holdout > test > train); otherwise a hash of the object
  id puts `--test-fraction` of objects in test. No object is in two splits.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.trajectory import Trajectory
from annotate.authoring import authored_to_trajectory
from annotate.export.correction import contradictions, corrected_trajectory, rejected_side
from annotate.export.record import SPLIT_ORDER, ExportRecord

# A source's rank when several offer one object+task: higher wins.
SOURCE_RANK = {
    "authored": 4,
    "corrected": 3,
    "rejected": 2,
    "accepted": 1,
    "review": 3,
    "gold": 2,
    "catalog": 1,
    "auto": 0,  # the agent's own verdict, auto-accepted (--include-auto): nobody saw it
}
# For pairs a correction is preferred: it shares the agent's steps up to the wrong one, a
# cleaner contrast; an unexplained reject's neutral answer comes last.
PAIR_RANK = {"corrected": 3, "authored": 2, "rejected": 1}
log = logging.getLogger(__name__)


def hash_split(object_id: str, test_fraction: float, salt: str = "loupe") -> str:
    """`test` for about `test_fraction` of object ids, `train` for the rest; stable.

    >>> hash_split("obj-1", 0.0), hash_split("obj-1", 1.0)
    ('train', 'test')
    """
    h = int(hashlib.sha256(f"{salt}:{object_id}".encode()).hexdigest()[:12], 16) / 16**12
    return "test" if h < test_fraction else "train"


def object_split(
    object_id: str, existing: Iterable[str | None], test_fraction: float, salt: str = "loupe"
) -> str:
    """The split of an object: its candidates' existing split wins (the most held-out one
    if they disagree), else the hash.

    >>> object_split("o", ["train", None, "test"], 0.1)
    'test'
    >>> object_split("o", [None], 0.0)
    'train'
    """
    named = {s for s in existing if s}
    unknown = named - set(SPLIT_ORDER)
    if unknown:
        raise ValueError(f"object {object_id}: unknown split {sorted(unknown)}")
    if named:
        return max(named, key=SPLIT_ORDER.__getitem__)
    return hash_split(object_id, test_fraction, salt)


def dedup(
    records: Iterable[ExportRecord], rank: dict[str, int] | None = None
) -> list[ExportRecord]:
    """One record per (object, task): the best source (`rank`), then the newest."""
    rank = SOURCE_RANK if rank is None else rank
    best: dict[tuple[str, str], ExportRecord] = {}

    def key(r: ExportRecord) -> tuple:
        return (rank.get(r.source, 0), r.recency, r.candidate_id)

    for r in records:
        k = (r.object_id, r.task)
        if k not in best or key(r) > key(best[k]):
            best[k] = r
    return list(best.values())


def sort_key(r: ExportRecord) -> tuple:
    return (SPLIT_ORDER.get(r.split or "train", 9), r.task, r.object_id, r.key, r.candidate_id)


def assign_splits(
    records: Iterable[ExportRecord],
    existing_splits: dict[str, set[str]],
    test_fraction: float,
    salt: str = "loupe",
) -> None:
    """Set each record's split to its object's (`object_split`), in place. `existing_splits`
    maps object id -> the splits its candidates carry in the store (all of them, not only
    exported)."""
    for r in records:
        splits = set(existing_splits.get(r.object_id, set())) | ({r.split} if r.split else set())
        r.split = object_split(r.object_id, splits, test_fraction, salt)


# -- reading the store -------------------------------------------------------------------
@dataclass
class Collected:
    records: list[ExportRecord]
    not_exported: dict[str, int]  # reason -> count
    existing_splits: dict[str, set[str]]
    graded: dict[int, dict[str, tuple[int | None, float | None]]] = field(default_factory=dict)


def collect(
    store: Any, kind: str, include_auto: bool = False, min_grade: int | None = None
) -> Collected:
    """The records a `kind` export draws from, read from a `db.store.Store`; with
    `min_grade`, only decisions an expert graded at least that (`ExportRecord.grade`)."""
    got = _collect(store, kind, include_auto)
    for r in got.records:
        r.grade, r.redshift = got.graded.get(r.candidate_id, {}).get(r.label, (None, None))
    if min_grade is not None:
        kept = [r for r in got.records if r.grade is not None and r.grade >= min_grade]
        if len(kept) < len(got.records):
            why = f"grade below --min-grade {min_grade} (or ungraded)"
            got.not_exported[why] = got.not_exported.get(why, 0) + len(got.records) - len(kept)
        got.records = kept
    return got


def grades(reviews: list[Any]) -> dict[int, dict[str, tuple[int | None, float | None]]]:
    """candidate id -> label -> (grade, redshift) of the decision: the latest grade and the
    latest redshift among the expert reviews that set that label."""
    out: dict[int, dict[str, tuple[int | None, float | None]]] = {}
    for r in sorted(reviews, key=lambda r: (r.updated, r.id)):
        if r.label not in ("YES", "NO"):
            continue
        g, z = out.setdefault(r.candidate_id, {}).get(r.label, (None, None))
        g = r.grade if getattr(r, "grade", None) is not None else g
        z = r.redshift if getattr(r, "redshift", None) is not None else z
        out[r.candidate_id][r.label] = (g, z)
    return out


def _collect(store: Any, kind: str, include_auto: bool) -> Collected:
    skipped: Counter = Counter()
    all_reviews = store.reviews()
    existing = store.object_splits()
    extra_ids = store.reference_labelled_ids() if kind == "rl" else []
    cands = store.labelled_candidates()
    usable = []
    for c in cands:
        if c.label_source == "auto" and not include_auto:
            skipped["auto-accepted (no expert saw it)"] += 1
            continue
        usable.append(c)
    if kind == "rl":
        records = [
            _rl_record(c, c.label, "auto" if c.label_source == "auto" else "review") for c in usable
        ]
        # the agent's own auto-accepted label is no expert's: an approved trajectory of
        # the candidate still counts (and outranks it where both are exported)
        labelled = {c.id for c in cands if c.label_source != "auto"}
        for a in store.list_authored(status="approved"):
            # an audited expert trajectory is an expert label too
            if a.candidate_id not in labelled and a.verdict in ("YES", "NO"):
                c = store.candidate(a.candidate_id)
                records.append(_rl_record(c, a.verdict, "authored"))
                records[-1].recency = a.id
                labelled.add(c.id)
        for cid in extra_ids:
            if cid in labelled:
                continue
            c = store.candidate(cid)
            label, source = (c.gold_label, "gold") if c.gold_label else (c.known_label, "catalog")
            if label in ("YES", "NO"):
                records.append(_rl_record(c, label, source))
        return Collected(records, dict(skipped), existing, grades(all_reviews))

    reviews: dict[int, list[Any]] = defaultdict(list)
    for r in all_reviews:
        reviews[r.candidate_id].append(r)
    info_by_id = {c.id: c for c in cands}
    wanted = {c.trajectory_id for c in usable if c.trajectory_id is not None}
    wanted |= {r.trajectory_id for rs in reviews.values() for r in rs if r.trajectory_id}
    trajectories = store.trajectory_records(sorted(wanted))

    def traj(tid: int) -> Trajectory:
        if tid not in trajectories:
            trajectories[tid] = store.trajectory(tid)
        return trajectories[tid]

    records: list[ExportRecord] = []
    for c in usable:
        rec, reason = _review_record(c, reviews.get(c.id, []), traj, kind)
        if rec is not None:
            records.append(rec)
        elif reason:
            skipped[reason] += 1

    for a in store.list_authored(status="approved"):
        c = info_by_id.get(a.candidate_id) or store.candidate(a.candidate_id)
        if c.label in ("YES", "NO") and c.label != a.verdict and c.label_source != "auto":
            skipped["approved authored verdict disagrees with the resolved label"] += 1
            continue
        chosen = authored_to_trajectory(a, c)
        rejected = None
        if kind == "pairs":
            agent = traj(c.trajectory_id) if c.trajectory_id is not None else None
            if agent is None or agent.verdict == a.verdict:
                continue  # nothing to contrast: the agent reached the same verdict
            rejected = agent
        records.append(
            ExportRecord(
                candidate_id=c.id,
                key=c.key,
                object_id=c.object_id,
                task=c.task,
                label=a.verdict,
                source="authored",
                spectrum_ref=dict(c.spectrum_ref),
                split=c.split,
                trajectory=chosen,
                rejected=rejected,
                recency=a.id,
            )
        )
    records = _consistent(records, skipped)
    return Collected(records, dict(skipped), existing, grades(all_reviews))


def _consistent(records: list[ExportRecord], skipped: Counter) -> list[ExportRecord]:
    """The records whose row to train on passes the contradiction table
    (`correction.contradictions`); each refused one is counted in `skipped` by what broke."""
    kept = []
    for r in records:
        bad = contradictions(r.trajectory, r.label) if r.trajectory is not None else []
        if bad:
            log.warning("%s: row refused, it contradicts its verdict %s: %s", r.row_id, r.label,
                        "; ".join(bad))  # fmt: skip
            skipped[f"row contradicts its verdict {r.label}: {'; '.join(bad)}"] += 1
        else:
            kept.append(r)
    return kept


def _rl_record(c: Any, label: str, source: str) -> ExportRecord:
    return ExportRecord(
        candidate_id=c.id,
        key=c.key,
        object_id=c.object_id,
        task=c.task,
        label=label,
        source=source,
        spectrum_ref=dict(c.spectrum_ref),
        split=c.split,
    )


def _reason(review: Any) -> str:
    """The reasoning the model should learn from a review (not its comment, a note to
    other experts that is never trained on). An imported review whose explanation is its
    comment word for word holds no reason: earlier `import-labels` copied an empty
    `reason` column's comment there."""
    reason = (getattr(review, "explanation", None) or "").strip()
    comment = (getattr(review, "comment", None) or "").strip()
    if reason and reason == comment and getattr(review, "source", None) == "import":
        return ""
    return reason


def _review_record(
    c: Any, reviews: list[Any], traj: Callable[[int], Trajectory], kind: str
) -> tuple[ExportRecord | None, str | None]:
    """The accepted, corrected or rejected trajectory behind a candidate's resolved label."""
    label = c.label
    agreeing = [r for r in reviews if r.label == label]
    base = dict(
        candidate_id=c.id,
        key=c.key,
        object_id=c.object_id,
        task=c.task,
        label=label,
        spectrum_ref=dict(c.spectrum_ref),
        split=c.split,
    )
    # A reject or correction of a trajectory: with a reason, or flipping the verdict without
    # one (a reject as most experts leave it). Reviews with a reason come first.
    fixes = []
    for r in agreeing:
        if r.action not in ("correct", "reject") or r.trajectory_id is None:
            continue
        if _reason(r) or traj(r.trajectory_id).verdict != label:
            fixes.append(r)
    if fixes:
        r = max(fixes, key=lambda r: (bool(_reason(r)), r.updated, r.id))
        agent = traj(r.trajectory_id)
        reason = _reason(r)
        try:
            fixed = corrected_trajectory(agent, label, reason, r.wrong_step)
            # pairs: the agent's side reads the same rewritten steps up to where they part
            rejected = rejected_side(agent, label, r.wrong_step) if kind == "pairs" else agent
        except ValueError as exc:
            return None, f"correction not applicable ({exc})"
        source = "corrected" if reason else "rejected"
        return (
            ExportRecord(**base, source=source, trajectory=fixed, rejected=rejected, recency=r.id),
            None,
        )
    if kind == "pairs":
        return None, None  # an accepted run has nothing to contrast with
    accepted = [r for r in agreeing if r.trajectory_id is not None]
    tid = (
        max(accepted, key=lambda r: (r.updated, r.id)).trajectory_id
        if accepted
        else c.trajectory_id
    )
    if tid is None:
        return None, "no agent trajectory (label only: rl)"
    t = traj(tid)
    if t.verdict != label:
        return None, "label differs from the agent's verdict and no expert judged that run"
    if not t.format_ok or t.state != "done":
        return None, "agent trajectory malformed or unfinished"
    recency = max((r.id for r in agreeing), default=0)
    # An auto-accepted label (exported with --include-auto) is the agent agreeing with
    # itself; its rows say so, and any expert's row of the object wins over it.
    source = "auto" if c.label_source == "auto" and not agreeing else "accepted"
    return ExportRecord(**base, source=source, trajectory=t, recency=recency), None
