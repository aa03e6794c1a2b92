"""0030: a skipped task run is no run of its task for health.

Each task's latest run that ended (``latest_task_runs``) is what health takes for the last run
that was to write the task's outputs; a SKIPPED one said nothing, so a task that failed and then
was skipped (dbt skips the models below a failed test) looked mended: its outputs left FAIL, and
the health watch sent RECOVERED. The latest run kept now leaves the skipped ones out; here each
task whose kept run is a skip gets its latest run that is not, or none.
"""

from __future__ import annotations

from alembic import op

from bridge.catalog.writes_kept import FILL_LATEST_RUNS

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql("DELETE FROM latest_task_runs WHERE state = 'SKIPPED'")
    bind.exec_driver_sql(FILL_LATEST_RUNS)  # the tasks whose row went (the others' stay: DO NOTHING)
