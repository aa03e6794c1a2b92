"""A catalog target's engine: SQLite for a file (or ``:memory:``), PostgreSQL for a
``postgresql://`` URL (imported only then: it needs the driver), and what a driver's error about
the catalog's storage stands for, whichever engine raised it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bridge.catalog.engine import Engine, is_url, masked
from bridge.catalog.sqlite import SqliteEngine
from bridge.catalog.sqlite import storage_error as sqlite_storage_error
from bridge.errors import CatalogError


def open_engine(target: str | Path) -> Engine:
    """The engine of a catalog target: a ``postgresql://`` URL, else a SQLite file (or ``:memory:``)."""
    if is_url(target):
        try:
            from bridge.catalog.postgres import PostgresEngine  # psycopg: only where a URL is given
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("psycopg"):
                raise
            raise CatalogError(
                f"catalog {masked(target)}: a PostgreSQL catalog needs the driver psycopg, which is not installed; "
                "install it with pip install 'psycopg[binary]>=3.2,<4' (from a clone of olbridge: "
                "pip install -e '.[postgres]')"
            ) from None
        return PostgresEngine(str(target))
    return SqliteEngine(target)


def storage_error(exc: BaseException, where: str | Path) -> CatalogError | None:
    """The CatalogError that a driver's error about the catalog's storage stands for (SQLite: the
    file, the disk, a lock; PostgreSQL: the server, the connection, the password, privileges),
    naming the catalog (``where``, as messages show it); None for any other error (a fault in
    olbridge, left to surface)."""
    found = sqlite_storage_error(exc, where)
    if found is None and sys.modules.get("psycopg") is not None:  # only loaded where a catalog URL was opened
        from bridge.catalog.postgres import storage_error as postgres_storage_error

        found = postgres_storage_error(exc, str(where))
    return found


__all__ = ["open_engine", "storage_error"]
