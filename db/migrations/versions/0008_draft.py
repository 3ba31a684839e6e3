"""draft: what an expert set on a candidate before deciding it

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

The desk keeps an expert's grade, issue flags, spectral type, redshift and template for a
candidate they have not decided yet here (one row per expert and candidate), so that a page
reload or another tab loses none of it; a decision takes the row's fields and drops it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "draft",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidate.id"]),
        sa.ForeignKeyConstraint(["expert_id"], ["expert.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("expert_id", "candidate_id", name="uq_draft_expert_candidate"),
    )


def downgrade() -> None:
    op.drop_table("draft")
