"""expert_pref: how each expert last set up the vet desk

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-10

The vet desk's queue filters and display options (markers, error band, smoothing, frame,
normalised view, arms, sky, ...) are remembered per expert here (one row each), so that a
page reload or another machine opens the desk as they left it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "expert_pref",
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["expert_id"], ["expert.id"]),
        sa.PrimaryKeyConstraint("expert_id"),
    )


def downgrade() -> None:
    op.drop_table("expert_pref")
