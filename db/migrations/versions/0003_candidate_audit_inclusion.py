"""candidate audit inclusion probability

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A candidate drawn into the random audit records the probability with which it was drawn
(`annotate.audit.sample.draw_audit`: n_h / N_h of its stratum), so every estimate can
weight it by 1/pi; NULL for a candidate not in the audit sample. Nullable, so existing
rows stay valid; plain ADD COLUMN on PostgreSQL, batch copy on SQLite.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.add_column(sa.Column("audit_inclusion", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.drop_column("audit_inclusion")
