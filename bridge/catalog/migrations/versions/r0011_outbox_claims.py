"""0011: outbox claims, so that several stream workers share one outbox (PostgreSQL).

Each outbox row may be claimed by one stream worker (``stream_workers.id``) until a time (seconds
since the epoch, the database's clock); a claim expires unless the worker renews it with its
heartbeat. On SQLite the columns stay empty: one worker at a time holds the whole outbox's lease.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
SECONDS: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")


def upgrade() -> None:
    op.add_column("outbox", sa.Column("claimed_by", TEXT, nullable=True))
    op.add_column("outbox", sa.Column("claim_expires", SECONDS, nullable=True))
    op.create_index(
        "outbox_claimed",
        "outbox",
        ["claimed_by"],
        sqlite_where=sa.text("claimed_by IS NOT NULL"),
        postgresql_where=sa.text("claimed_by IS NOT NULL"),
    )
