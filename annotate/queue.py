"""The hand-off queue: which candidate each expert sees next.

Order: fewest reviews so far (every item gets its first look before any gets a second),
then closest to the decision threshold (|P(YES) - threshold|, in bands of 0.05), and within
a band the items where two policies or an expert and the agent disagree. Gold-standard
items are mixed in at `gold_rate` to measure each expert, and items of the random audit
sample at `audit_rate` (annotate.audit.sample); `overlap` k asks for k reviews of each item;
items the agent is at least `auto_accept` sure of are not served (save the audit sample's);
a served item is leased to its expert for `lease_seconds`, so two experts get the same item
only when overlap asks for it. The selection runs in the store (one indexed query inside the lease
transaction); this module holds the workflow rules around it (the team's settings, the
lease a jump takes) and is what the app calls for every queue move.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from annotate.audit.sample import AUDIT_RATE, AUDIT_RATE_SETTING, audit_turn
from db.settings import DEFAULTS
from db.store import CandidateInfo, Filters, QueueConfig, Store, queue_priority

__all__ = ["Queue", "QueueConfig", "Filters", "queue_priority"]

# The team settings that configure the queue; their defaults are `QueueConfig`'s (the
# audit's is `AUDIT_RATE`), which `annotate.team.settings` shows and checks.
TEAM_QUEUE_SETTINGS = ("overlap", "gold_rate", "auto_accept", "lease_seconds", AUDIT_RATE_SETTING)


@dataclass
class Queue:
    store: Store
    config: QueueConfig = field(default_factory=QueueConfig)

    @classmethod
    def from_settings(cls, store: Store, lease_seconds: float = DEFAULTS.lease_seconds) -> Queue:
        """A queue configured by the team's stored settings (overlap, gold_rate, ...);
        `lease_seconds` is the lease when the team has stored none."""
        # one read per call: the app builds the queue for every candidate it serves
        from annotate.team.settings import within_bounds

        base = QueueConfig(lease_seconds=lease_seconds, audit_rate=AUDIT_RATE)
        defaults = {name: getattr(base, name) for name in TEAM_QUEUE_SETTINGS}
        v = within_bounds(store.settings(defaults), defaults)
        cfg = dataclasses.replace(
            base,
            overlap=int(v["overlap"]),
            gold_rate=float(v["gold_rate"]),
            auto_accept=v["auto_accept"],
            lease_seconds=float(v["lease_seconds"]),
            audit_rate=float(v[AUDIT_RATE_SETTING]),
        )
        return cls(store, cfg)

    def next(self, expert: str, filters: Filters | None = None) -> CandidateInfo | None:
        """Lease and return the next item for `expert`, or None when nothing is left."""
        cid = self.next_id(expert, filters)
        return None if cid is None else self.store.candidate(cid)

    def next_id(
        self,
        expert: str,
        filters: Filters | None = None,
        exclude: Sequence[int] = (),
        keep: Sequence[int] = (),
        holder: str = "",
    ) -> int | None:
        """Lease the next item for `expert` other than those in `exclude` (the items the
        expert has just moved past); its store id, or None when nothing is left. The
        expert's lease on items in `keep` stays (the one shown while the next is drawn
        ahead); their other leases end. One item in round(1/audit_rate) comes from the
        audit sample, and so do the rest of it once nothing else is left
        (annotate.audit.sample); it is reviewed like any other. `holder` names the page
        (browser tab) served: one page never gets what another page of the expert holds."""
        rate, lease = self.config.audit_rate, self.config.lease_seconds
        e = self.store.expert(expert) if rate > 0 else None
        if e is not None and audit_turn(e.review_count, rate):
            cid = self.store.next_audit_item(expert, lease, filters, exclude, keep, holder)
            if cid is not None:
                return cid
        cid = self.store.next_item(
            expert, self.config, filters, exclude=exclude, keep=keep, holder=holder
        )
        if cid is None and rate > 0:
            cid = self.store.next_audit_item(expert, lease, filters, exclude, keep, holder)
        return cid

    def hold(self, expert: str, candidate_id: int, holder: str = "") -> bool:
        """Whether `expert`'s page `holder` may decide this item now (no other page of theirs
        holds it, and it is their own review, their live lease, or there is room under
        `overlap`), leasing it to that page if so: what going back to an item through the
        history, and every write on the desk, checks first."""
        return self.store.hold(expert, candidate_id, self.config, holder)

    def jump(
        self, expert: str, key: str, task: str | None = None, holder: str = ""
    ) -> tuple[CandidateInfo | None, list[str]]:
        """Open a chosen candidate by id in the page `holder` (which takes it from another
        page of the expert's): (the candidate or None, other experts holding it)."""
        info = self.store.find_candidate(key, task)
        if info is None:
            return None, []
        others = self.store.claim(
            expert, info.id, self.config.lease_seconds, overlap=self.config.overlap,
            holder=holder,
        )  # fmt: skip
        return info, others

    def census(self, expert: str, filters: Filters | None = None, holder: str = "") -> dict:
        """Why nothing under `filters` is served to `expert`'s page `holder`, counted by
        reason (`Store.queue_census`): what an empty queue says."""
        return self.store.queue_census(expert, self.config, filters, holder)

    def held_elsewhere(self, expert: str, candidate_id: int, holder: str = "") -> bool:
        """Whether another page (browser tab) of `expert`'s holds the item now."""
        return self.store.held_elsewhere(expert, candidate_id, holder)

    def remaining(self, filters: Filters | None = None) -> int:
        """Items still short of `overlap` reviews (ignoring leases and auto-accept)."""
        f = dataclasses.replace(filters or Filters(), max_reviews=self.config.overlap - 1)
        return self.store.count_candidates(f)
