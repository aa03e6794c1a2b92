"""0025: what health reads of olbridge's own task runs, kept as they are written.

Health's pass over a catalog read each task's latest run by a look into every run's task, and
each asset's writers by aggregating every output of every run: work that grows with the history
kept, not with the assets. The writes now keep both as they go, each moved only forward:

- ``latest_task_runs``: each task's latest run that ended (by end, then key): its end, key and
  state;
- ``kept_writers`` (0021's: the writers of runs retention deleted): now every task that wrote an
  asset, with its latest write.

Both are made here from the runs the catalog holds (the writers merged with those kept before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bridge.catalog.writes_kept import FILL_LATEST_RUNS, FILL_WRITERS

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "latest_task_runs",
        sa.Column("flow_namespace", TEXT, nullable=False),
        sa.Column("flow_id", TEXT, nullable=False),
        sa.Column("task_id", TEXT, nullable=False),
        sa.Column("ended_at", TEXT, nullable=False),
        sa.Column("run_pk", INTEGER, nullable=False),
        sa.Column("state", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("flow_namespace", "flow_id", "task_id"),
    )
    bind = op.get_bind()
    bind.exec_driver_sql(FILL_LATEST_RUNS)
    bind.exec_driver_sql(FILL_WRITERS)
