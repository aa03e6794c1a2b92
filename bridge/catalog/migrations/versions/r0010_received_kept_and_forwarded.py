"""0010: what the receiver keeps of what producers said, and what it forwards (issue 14).

- ``received_events.token``: the name of the token that brought an event (``serve --tokens``).
- ``outbox.payload``: a received event's text as it came, queued to go out as it is (kind
  ``forward``, ``serve --forward``).
- ``external_facets``: the latest of each facet of an external run, job and dataset;
  ``external_datasets.all_facets_rank`` / ``all_facets_digest``: the latest event that gave a
  dataset facets, and those facets hashed.
- ``external_identifiers``: a dataset's symlink identifiers, every one given.
- ``external_sources.job_rank`` / ``jobs`` / ``warnings``: a run's job (its earliest event's),
  every job its events named, and their warnings.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _text(name: str, *, nullable: bool = True, default: str | None = None) -> sa.Column[str]:
    return sa.Column(name, TEXT, nullable=nullable, server_default=default)


def upgrade() -> None:
    op.add_column("received_events", _text("token"))
    op.add_column("outbox", _text("payload"))
    op.add_column("external_datasets", _text("all_facets_rank"))
    op.add_column("external_datasets", _text("all_facets_digest"))
    op.add_column("external_sources", _text("job_rank"))
    op.add_column("external_sources", _text("jobs"))
    op.add_column("external_sources", _text("warnings", nullable=False, default="[]"))
    op.create_table(
        "external_facets",
        _text("owner", nullable=False),
        _text("facet_key", nullable=False),
        _text("facet_rank"),
        _text("facet", nullable=False),
        sa.PrimaryKeyConstraint("owner", "facet_key"),
    )
    op.create_table(
        "external_identifiers",
        _text("namespace", nullable=False),
        _text("name", nullable=False),
        _text("asset_id", nullable=False),
        _text("type"),
        _text("id_rank", nullable=False),
        sa.PrimaryKeyConstraint("namespace", "name", "asset_id"),
    )
    op.create_index("external_identifiers_asset", "external_identifiers", ["asset_id"])
