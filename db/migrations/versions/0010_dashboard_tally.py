"""dashboard tallies: running counts of candidates and reviews, and timed-review indexes

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

The Dashboard read every candidate and every review to count them (0.9 s at a million
candidates). `candidate_tally` and `review_tally` hold those counts, kept by the store in
the transaction of each write (db/store/tally.py); this migration fills them from the rows
already stored, with the same key the store computes (see `CandidateTally`). The partial
indexes on review's timed rows let the seconds-per-spectrum quantiles read a rank without
sorting every review.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TIMED = sa.text("seconds IS NOT NULL AND action != 'undo'")
BINS = 1000  # DashboardStats.CONFIDENCE_BINS
P_SCALE = "10000000000.0"  # tally.P_SCALE

# The key of each candidate, as db/store/tally.py's candidate_keys computes it.
EXPERT = "c.label IN ('YES', 'NO') AND (c.label_source IS NULL OR c.label_source != 'auto')"
BINNED = f"{EXPERT} AND c.confidence IS NOT NULL"


def _backfill(dialect: str) -> None:
    if dialect == "postgresql":
        k = f"CAST(floor(c.confidence * {BINS}) AS INTEGER)"
        p = f"CAST(floor(c.confidence * {P_SCALE}) AS BIGINT)"
        yes, no = "TRUE", "FALSE"
    else:  # SQLite's CAST truncates, which is floor on [0, 1]
        k = f"CAST(c.confidence * {BINS} AS INTEGER)"
        p = f"CAST(c.confidence * {P_SCALE} AS BIGINT)"
        yes, no = "1", "0"
    keys = (
        "SELECT c.task_id AS task_id,"
        f" CASE WHEN c.review_count > 0 THEN {yes} ELSE {no} END AS reviewed,"
        f" CASE WHEN c.auto = {yes} AND c.review_count = 0 THEN {yes} ELSE {no} END AS auto,"
        f" CASE WHEN {EXPERT} THEN c.label ELSE '' END AS label,"
        f" CASE WHEN {EXPERT} THEN coalesce(c.verdict, '') ELSE '' END AS verdict,"
        f" CASE WHEN {BINNED} THEN CASE WHEN c.confidence >= 1.0 THEN {BINS - 1} ELSE {k} END"
        " ELSE -1 END AS bin,"
        f" CASE WHEN {BINNED} THEN {p} ELSE 0 END AS p"
        " FROM candidate c"
    )
    op.execute(
        "INSERT INTO candidate_tally (task_id, reviewed, auto, label, verdict, bin, n, p_sum)"
        " SELECT task_id, reviewed, auto, label, verdict, bin, count(*), sum(p)"
        f" FROM ({keys}) k GROUP BY task_id, reviewed, auto, label, verdict, bin"
    )
    op.execute(
        "INSERT INTO review_tally (task_id, expert_id, action, n)"
        " SELECT c.task_id, r.expert_id, r.action, count(*)"
        " FROM review r JOIN candidate c ON c.id = r.candidate_id"
        " GROUP BY c.task_id, r.expert_id, r.action"
    )


def upgrade() -> None:
    op.create_table(
        "candidate_tally",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("reviewed", sa.Boolean(), nullable=False),
        sa.Column("auto", sa.Boolean(), nullable=False),
        sa.Column("label", sa.String(length=3), nullable=False),
        sa.Column("verdict", sa.String(length=3), nullable=False),
        sa.Column("bin", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("p_sum", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "reviewed", "auto", "label", "verdict", "bin"),
    )
    op.create_table(
        "review_tally",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "expert_id", "action"),
    )
    op.create_index("ix_review_seconds_expert", "review", ["expert_id", "seconds"],
                    sqlite_where=TIMED, postgresql_where=TIMED)  # fmt: skip
    op.create_index("ix_review_seconds", "review", ["seconds"],
                    sqlite_where=TIMED, postgresql_where=TIMED)  # fmt: skip
    _backfill(op.get_bind().dialect.name)


def downgrade() -> None:
    op.drop_index("ix_review_seconds", table_name="review")
    op.drop_index("ix_review_seconds_expert", table_name="review")
    op.drop_table("review_tally")
    op.drop_table("candidate_tally")
