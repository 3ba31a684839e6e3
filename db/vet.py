"""`launch.py vet`: run an agent policy over candidates, writing JSONL or, with --db, the store.

Every flag of the batch runner (`agent.runner`) applies. With `--db URL` each trajectory is
committed to the store as soon as it is finished (a candidate not yet ingested is created
from the trajectory's spectrum reference), and candidates that already have a finished
trajectory from the same policy and model are skipped, so a killed run resumes where it
stopped.

    python launch.py vet --input "data/*.fits" --task cv --policy rules --db loupe.db
"""

from __future__ import annotations

import argparse
from typing import Any

from agent.trajectory import Trajectory


class StoreSink:
    """The runner's sink protocol (done_keys / write / close) over a `Store`."""

    def __init__(self, store: Any, policy: str | None = None, model: str | None = None):
        self.store = store
        self.policy = policy
        self.model = model
        self.written = 0

    def done_keys(self) -> set[tuple[str, str]]:
        return self.store.done_keys(policy=self.policy, model=self.model)

    def write(self, trajectory: Trajectory) -> None:
        self.store.record_trajectory(trajectory, actor="vet")
        self.written += 1

    def close(self) -> None:
        self.store.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agent import runner

    runner.add_arguments(parser)
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="Record trajectories into this database (file or SQLAlchemy URL) "
        "instead of only writing JSONL.",
    )


def make_sink(args: argparse.Namespace) -> StoreSink:
    from db.store import Store

    policy = getattr(args, "policy", None)
    model = getattr(args, "model", None)
    return StoreSink(
        Store(args.db),
        policy=policy if isinstance(policy, str) else None,
        model=model if isinstance(model, str) else None,
    )


def main(args: argparse.Namespace) -> int:
    from agent import runner

    if getattr(args, "db", None):
        sink = make_sink(args)
        try:
            return int(runner.main(args, sink=sink) or 0)
        finally:
            sink.close()
    return int(runner.main(args) or 0)
