"""review.note and lease.holder: a correction's note beside the comment; a lease names the
tab that holds it

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

A correction's note to other experts was stored in the review's `comment`, so a comment
typed on the same candidate was lost; the note now has its own column (on the review and on
its revisions), and neither is trained on. A lease now names its holder, the page (browser
tab) it was served to, so that two tabs of one expert are never served the same candidate;
existing leases (and API callers) hold as "".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("review") as t:
        t.add_column(sa.Column("note", sa.Text(), nullable=True))
    with op.batch_alter_table("review_revision") as t:
        t.add_column(sa.Column("note", sa.Text(), nullable=True))
    with op.batch_alter_table("lease") as t:
        t.add_column(sa.Column("holder", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("lease") as t:
        t.drop_column("holder")
    with op.batch_alter_table("review_revision") as t:
        t.drop_column("note")
    with op.batch_alter_table("review") as t:
        t.drop_column("note")
