"""The PostgreSQL engine, a module a job: :mod:`~bridge.catalog.postgres.engine` (the engine:
its URL, connections and what its errors mean), :mod:`~bridge.catalog.postgres.cursor` (the
cursor that translates the shared statements), :mod:`~bridge.catalog.postgres.bulk` (many rows in
one statement) and :mod:`~bridge.catalog.postgres.lookups` (many point lookups in one). Imported
only where a ``postgresql://`` URL is opened: it needs the driver, psycopg.
"""

from __future__ import annotations

from bridge.catalog.postgres.cursor import COPY_FROM, FRAGMENTS, STATEMENTS, SharedCursor, translate
from bridge.catalog.postgres.engine import TIMEOUTS, PostgresEngine, split_url, storage_error, timeouts

__all__ = [
    "COPY_FROM",
    "FRAGMENTS",
    "STATEMENTS",
    "TIMEOUTS",
    "PostgresEngine",
    "SharedCursor",
    "split_url",
    "storage_error",
    "timeouts",
    "translate",
]
