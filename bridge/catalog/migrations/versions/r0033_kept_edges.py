"""0033: the received lineage of the runs retention deletes, kept.

Health's at-risk walk reads the receiver's lineage from its runs' inputs and outputs, as of a
time. Retention of ``external_runs`` deleted those runs (keeping each job's latest), and with them
edges that ``olbridge lineage`` still shows: an asset downstream of a FAIL through an older run of
a job was no longer at risk after a pass. ``kept_edges`` keeps each such edge with the earliest end
of a run that made it (:func:`bridge.catalog.writes_kept.fold_received`). A catalog's runs deleted
before this version are gone: their edges cannot be made again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "kept_edges",
        sa.Column("upstream_id", TEXT, nullable=False),
        sa.Column("downstream_id", TEXT, nullable=False),
        sa.Column("since", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("upstream_id", "downstream_id"),
    )
    op.create_index("kept_edges_downstream", "kept_edges", ["downstream_id"])
