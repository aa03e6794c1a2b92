"""0023: on PostgreSQL, the assets' search term and its trigram index are an expression of the id,
not the id itself.

pg_trgm's operator class answers equality as well as ``ILIKE``, so the planner could take the
trigram index on ``assets.id`` for a lookup of an asset by its id: it did for the receiver's move
of sightings, whose every row then read the postings of every asset sharing the id's trigrams
(:data:`bridge.catalog.schema.POSTGRES_TERMS`). The view of the search's terms is made again with
the expression, and the index, where the catalog has one (pg_trgm could be had when 0019 ran),
on it. Nothing changes on SQLite, whose search is an FTS5 table.
"""

from __future__ import annotations

from alembic import op

from bridge.catalog.schema import postgres_search, postgres_search_view

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

INDEXED = "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'assets_trgm'"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql("DROP VIEW asset_search")
    bind.exec_driver_sql(postgres_search_view())
    if bind.exec_driver_sql(INDEXED).first() is not None:
        bind.exec_driver_sql("DROP INDEX assets_trgm")
        bind.exec_driver_sql(postgres_search("assets")[1])
