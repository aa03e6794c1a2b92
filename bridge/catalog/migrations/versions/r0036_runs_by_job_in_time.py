"""0036: a received job's runs found in order of their end.

Health judges a few assets (``assets show``, the web view's pages, ``health --namespace``, the
watch's marked assets) from the received runs that wrote them, found by their jobs through
``external_sources_job`` (job_namespace, job_name): it read every run of each job, in no order,
to find each asset's latest run and latest write, so that a job's page cost grew with each run
the catalog kept of it. The index now holds each run's end and source after its job:

- ``external_sources_job``: (job_namespace, job_name, ended_at, source), was (job_namespace,
  job_name).

A job's latest runs ended by a time are then the first read backwards, a few a job, and every
read by job alone (retention's, a job's runs) reads the same index as before. SQLite keeps this
table's rows in their key, which each of its indexes holds already (source, run_day): there the
index also holds the end. On PostgreSQL the index is made on every partition.
"""

from __future__ import annotations

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("external_sources_job", table_name="external_sources")
    op.create_index("external_sources_job", "external_sources", ["job_namespace", "job_name", "ended_at", "source"])
