"""0028: a task run's lineage edges found by the run.

``lineage`` was keyed by (upstream, downstream, run) and indexed by its downstream end: nothing
found the edges of one run but a read of the whole table. Three things ask for them: a run
recorded again before it ended (RUNNING, then its end: its edges are replaced), retention's
deletion of the task runs past its window (a batch of runs' edges), and, on PostgreSQL, the check
of the foreign key to ``task_runs`` for each run deleted. ``lineage_run`` (task_run_pk) answers
them through an index.
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("lineage_run", "lineage", ["task_run_pk"])
