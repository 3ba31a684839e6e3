"""candidate scored_by: the inspector version that gave its current P(YES)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

When a newly adopted inspector version re-scores the pending candidates from their stored
inputs (`annotate.learning.schedule`), the candidate's P(YES) no longer is its trajectory's: the
version that produced it is recorded here. NULL: the P(YES) is the shown trajectory's own
(its run records the version). Nullable, so existing rows stay valid.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scored_by", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.drop_column("scored_by")
