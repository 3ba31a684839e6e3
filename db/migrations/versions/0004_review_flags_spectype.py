"""review issue flags and spectral type

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

A review (and each superseded version of it) gains Prospect's VI issue flags (the letters
of R bad redshift fit, C bad spectral type, S bad spectrum, concatenated as Prospect writes
them) and the expert's spectral type (the template chosen on the desk, or typed: Prospect's
VI_spectype, Marz's FinTN). Nullable, so existing reviews stay valid; plain ADD COLUMN on
PostgreSQL, batch copy on SQLite.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLES = ("review", "review_revision")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("issues", sa.String(length=8), nullable=True))
            batch_op.add_column(sa.Column("spectype", sa.String(length=64), nullable=True))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("spectype")
            batch_op.drop_column("issues")
