"""Making a catalog's schema and bringing an older one to the current version, on either engine.

A new catalog (a new SQLite file, an empty PostgreSQL database or schema) gets the tables of
:mod:`bridge.catalog.schema` in one transaction, stamped with the current version; an existing one
is upgraded by Alembic, run programmatically (no ``alembic.ini``) with the revisions of
``migrations/versions``, each in a transaction of its own. One version number for both engines:
Alembic's revision id (``0009``) in its ``alembic_version`` table, and on SQLite also ``PRAGMA
user_version``, which releases before Alembic read (a SQLite catalog from before has only that:
it is stamped with it first). Several processes may open a PostgreSQL catalog at once: the one
that creates or upgrades it holds an advisory lock meanwhile, and the others wait for it.

SQLAlchemy and Alembic are imported here only, and only when there is something to make or
upgrade: opening a catalog at the current version costs the engine's version check only (a query or two).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bridge.catalog import sql
from bridge.catalog.engine import Cursor, Database, Engine

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"


def revision(version: int) -> str:
    """Alembic's revision id of a schema version (``9`` is ``"0009"``)."""
    return f"{version:04d}"


def create(db: Database) -> bool:
    """Make the schema in an empty database, at the current version; False (nothing done) when
    another process made it meanwhile."""
    from bridge.catalog import schema

    engine = db.engine
    statements = schema.create_statements(engine.name)

    def work(cur: Cursor) -> bool:
        engine.lock_schema(cur)
        if engine.version(cur) is not None:
            return False
        for statement in statements:
            cur.execute(statement)
        cur.execute(
            f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
            f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
        )
        cur.execute(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('{revision(sql.SCHEMA_VERSION)}')")
        engine.stamp(cur, sql.SCHEMA_VERSION)
        return True

    made = db.write(work)
    if made:
        engine.prepare_partitions(db, time.time())
    return made


def upgrade(engine: Engine) -> int | None:
    """Bring an existing catalog to the current version with Alembic, on a connection of its own;
    the version it found once it held the schema's lock (None: current already, brought up to
    date by another process that held it first)."""
    import sqlalchemy
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    sa_engine = engine.sqlalchemy_engine()
    try:
        with sa_engine.connect() as connection:
            engine.lock_schema_for_upgrade(connection)
            config.attributes["connection"] = connection
            stored = _stored_revision(connection)
            legacy = engine.legacy_version(connection) if stored is None else 0
            connection.commit()
            found = legacy or (int(stored) if stored is not None else None)
            if legacy:  # a SQLite catalog from before Alembic: its PRAGMA user_version
                command.stamp(config, revision(legacy))
            command.upgrade(config, revision(sql.SCHEMA_VERSION))
            connection.commit()
    except sqlalchemy.exc.DBAPIError as exc:
        raise exc.orig if exc.orig is not None else exc from None  # the driver's, as every other path gives it
    finally:
        sa_engine.dispose()
    return found if found is not None and found < sql.SCHEMA_VERSION else None


def _stored_revision(connection: Any) -> str | None:
    import sqlalchemy

    if not sqlalchemy.inspect(connection).has_table(VERSION_TABLE):
        return None
    found = connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    return str(found[0]) if found is not None else None


def head() -> str:
    """The newest revision of ``migrations/versions`` (for the tests: it is :data:`sql.SCHEMA_VERSION`)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    found = ScriptDirectory.from_config(config).get_current_head()
    assert found is not None
    return found


__all__ = ["create", "head", "revision", "upgrade"]
