"""Alembic's environment: run the revisions on the connection :mod:`bridge.catalog.migrate` hands
over (``config.attributes["connection"]``), each in a transaction of its own with its version
stamp (and, on SQLite, ``PRAGMA user_version``, which olbridge releases before 0009 read)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from bridge.catalog.schema import metadata


def keep_user_version(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    """SQLite: the version olbridge's releases before Alembic read, moved with each revision."""
    if ctx.dialect.name == "sqlite" and step.is_upgrade and len(heads) == 1:
        assert ctx.connection is not None
        ctx.connection.exec_driver_sql(f"PRAGMA user_version = {int(next(iter(heads)))}")


context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    transactional_ddl=True,
    transaction_per_migration=True,
    on_version_apply=keep_user_version,
)
with context.begin_transaction():
    context.run_migrations()
