"""0029: the outputs a task run was to write and did not.

A task run that ended FAILED (KILLED, CANCELLED, RETRIED) writes none of its outputs,
and only what a run wrote was kept (``usages``): health counted a failed run against an asset
only where its task had written the asset before, so a new task's first run failing, or a task
failing on an output it never wrote, left the asset as it was. ``unwritten_outputs`` keeps those
outputs by run, and the writes keep each such task among the asset's writers (``kept_writers``,
with no write). Runs recorded before this kept none: their outputs are not known.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "unwritten_outputs",
        sa.Column("task_run_pk", INTEGER, nullable=False),
        sa.Column("asset_id", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("task_run_pk", "asset_id"),
        sa.ForeignKeyConstraint(["task_run_pk"], ["task_runs.pk"]),
    )
    op.create_index("unwritten_outputs_asset", "unwritten_outputs", ["asset_id", "task_run_pk"])
