"""0026: a received usage or edge found by its whole key through either of its table's indexes.

The receiver checks which of a group's usages and edges it keeps already by a probe of each one's
key (job and direction and dataset; upstream, downstream and job). PostgreSQL answered them
through the smaller index, ``external_usages_asset`` (asset_id) and ``external_lineage_downstream``
(downstream_id, upstream_id), and read every job's row of the dataset (or between the two
datasets) to find the one asked for: on datasets that most jobs read and write, a probe read more
rows each day the catalog kept (a dozen edges after 8,000 events of the scale benchmark's popular
shape, hundreds after a day of them). Both indexes now hold the whole key, so a probe through
either is one look:

- ``external_usages_asset``: (asset_id, job_namespace, job_name, direction), was (asset_id);
- ``external_lineage_downstream``: (downstream_id, upstream_id, job_namespace, job_name), was
  (downstream_id, upstream_id).

The reads by dataset (its jobs; its upstream neighbours with their jobs) are then read from the
index alone. SQLite keeps these tables' rows in their keys, and each index held the key's other
columns already: the same indexes, written out.
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

WHOLE_KEYS = {
    ("external_usages", "external_usages_asset"): ["asset_id", "job_namespace", "job_name", "direction"],
    ("external_lineage", "external_lineage_downstream"): ["downstream_id", "upstream_id", "job_namespace", "job_name"],
}


def upgrade() -> None:
    for (table, index), columns in WHOLE_KEYS.items():
        op.drop_index(index, table_name=table)
        op.create_index(index, table, columns)
