"""review grade and expert redshift

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

A review (and each superseded version of it) gains the expert's quality grade (1-4, as
Marz's QOP and Prospect's VI quality) and the expert's redshift with where it came from
("agent" when the expert adopted the agent's estimate, "expert" when typed). All nullable,
so existing reviews stay valid; plain ADD COLUMN on PostgreSQL, batch copy on SQLite.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("review", "review_revision")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("grade", sa.Integer(), nullable=True))
            batch_op.add_column(sa.Column("redshift", sa.Float(), nullable=True))
            batch_op.add_column(sa.Column("redshift_source", sa.String(length=16), nullable=True))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("redshift_source")
            batch_op.drop_column("redshift")
            batch_op.drop_column("grade")
