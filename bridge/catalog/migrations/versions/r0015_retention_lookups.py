"""0015: received runs found by their job (``external_sources_job``).

Retention keeps the latest run of each job and deletes the older ones: for each run it would
delete it looks for a later run of the same job, which without this index read every received
run. The index holds the job's namespace and name only, which never change once a run is
written: the updates of a run's sightings and state stay on their page (PostgreSQL's HOT updates,
migration 0013).
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("external_sources_job", "external_sources", ["job_namespace", "job_name"])
