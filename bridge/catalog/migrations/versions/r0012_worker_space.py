"""0012: where a stream worker's pid means something (``stream_workers.space``).

A worker that finds another's process gone releases its claims (or takes the lease) at once,
rather than when its heartbeat lapses. The host's name alone does not say that a pid can be
looked up: containers with the host's network share its name but not its processes. The space
is the kernel's boot id and the pid namespace; a worker registered without one (by the code
before) is only ever taken over when its heartbeat lapses.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("stream_workers", sa.Column("space", TEXT, nullable=True))
