"""0021: what health reads of the runs retention deletes, kept.

Health reads an asset's last write and last run from the runs that wrote it. Retention deletes
runs (``external_runs``, ``task_runs``), keeping only the latest of each job or task: an asset
last written by an older run, gone, would lose its last write (a stale asset turning UNKNOWN) and
its last run. Before deleting a run, retention now folds what health reads of it into:

- ``kept_writes``: of the receiver's runs, each asset's latest run (``fact`` = ``run``: its job,
  state and end) and its latest run that wrote it successfully (``write``), as health orders them;
- ``kept_writers``: of olbridge's own, each task that wrote an asset, with its latest write (the
  rows health's writers aggregate gives of usages).

Health reads them beside the runs, as of a time (a fact after it is left out), so an asset
answers after a pass as it did before; as of a time older than the window, only the latest of
what went is left.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "kept_writes",
        sa.Column("asset_id", TEXT, nullable=False),
        sa.Column("fact", TEXT, nullable=False),
        sa.Column("job_namespace", TEXT, nullable=False),
        sa.Column("job_name", TEXT, nullable=False),
        sa.Column("state", TEXT, nullable=False),
        sa.Column("ended_at", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("asset_id", "fact"),
        sa.CheckConstraint("fact IN ('run', 'write')"),
    )
    op.create_table(
        "kept_writers",
        sa.Column("asset_id", TEXT, nullable=False),
        sa.Column("flow_namespace", TEXT, nullable=False),
        sa.Column("flow_id", TEXT, nullable=False),
        sa.Column("task_id", TEXT, nullable=False),
        sa.Column("last_write", TEXT, nullable=True),
        sa.PrimaryKeyConstraint("asset_id", "flow_namespace", "flow_id", "task_id"),
    )
