"""candidate audit_stratum: the audit design's stratum each candidate was drawn from

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

A draw of the random audit (`annotate.audit.sample.draw_for_store`) records, for every
candidate of its population (drawn or not), the stratum its P(YES) put it in at the draw,
as "<draw>:<verdict> <band>" (e.g. "1:YES 0.95-0.99"). The estimates weigh each candidate by
that stratum, whatever re-scoring does to its P(YES) afterwards. NULL: in no draw's
population. The indexes let the estimates aggregate per task and stratum in the database,
and read the audit sample (a partial index) without a scan.
Existing samples keep their inclusion probabilities; their strata are unknown (NULL) until
the next draw, which puts every confident candidate outside a design into a new one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = ["task_id", "audit_stratum", "label", "label_source", "audit_inclusion", "confidence"]
SAMPLE = ["audit_inclusion", "task_id", "audit_stratum", "label", "label_source", "confidence",
          "review_count"]  # fmt: skip
IN_SAMPLE = sa.text("audit_inclusion IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.add_column(sa.Column("audit_stratum", sa.String(length=32), nullable=True))
    op.create_index("ix_candidate_audit", "candidate", COLUMNS)
    op.create_index("ix_candidate_audit_sample", "candidate", SAMPLE,
                    sqlite_where=IN_SAMPLE, postgresql_where=IN_SAMPLE)  # fmt: skip


def downgrade() -> None:
    op.drop_index("ix_candidate_audit_sample", table_name="candidate")
    op.drop_index("ix_candidate_audit", table_name="candidate")
    with op.batch_alter_table("candidate", schema=None) as batch_op:
        batch_op.drop_column("audit_stratum")
