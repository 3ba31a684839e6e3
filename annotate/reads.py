"""What the app reads, and only that: a read-only view of the store.

Pages read through `Reads` (candidates, trajectories, reviews, experts, statistics) and
write only through annotate's workflow functions (`annotate.review`, `annotate.queue`,
`annotate.authoring`, `annotate.team.experts`, the exporters), so no page can change the
database around the workflow's rules. `READS` names the store methods that read; anything
else is refused with an AttributeError naming where writes go.
"""

from __future__ import annotations

from typing import Any

from db.store import Store

READS = frozenset(
    {
        "audit_counts",
        "audit_events",
        "audit_population",
        "audited_items",
        "authored",
        "candidate",
        "count_candidates",
        "dashboard_stats",
        "expert",
        "experts",
        "export_batches",
        "find_candidate",
        "gold_agreement_by_inspector",
        "list_authored",
        "list_candidates",
        "load_spectrum",
        "rejects_without_reason",
        "review",
        "reviews",
        "session_expert",
        "settings",
        "stored_scores",
        "surveys",
        "trajectory",
    }
)


class Reads:
    """The store's read methods (`READS`) and nothing else."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name not in READS:
            raise AttributeError(
                f"{name!r} is not one of the store's reads; the app writes through "
                "annotate's workflow functions"
            )
        return getattr(self._store, name)
