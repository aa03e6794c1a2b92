"""PostgreSQL's trigram index of the assets' search answers the search, never a lookup of an asset
by its id (migration 0023): pg_trgm answers equality too, and an index on the id column itself
was one the planner took for the receiver's move of sightings, reading for each row the postings
of every asset sharing its id's trigrams."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from bridge.catalog import Catalog
from bridge.catalog.browse import AssetFilter, list_assets
from tests.conftest import at
from tests.helpers import decl, invoke
from tests.postgres import PostgresServer
from tests.test_engines import (
    undo_alert_heads,
    undo_alerts_told,
    undo_edges_by_whole_key,
    undo_health_due,
    undo_health_purged,
    undo_kept_edges,
    undo_kept_writers_gone,
    undo_lineage_by_run,
    undo_own_facts_kept,
    undo_unwritten_outputs,
    undo_uses_by_asset_in_time,
    undo_writers_by_task,
)

IDS = [f"postgres://warehouse:5432/shop.public.table_{n:04d}" for n in range(5000)]


def undo_search_by_expression(execute: Callable[[str], Any]) -> None:
    """A PostgreSQL catalog's search as migration 0023 found it: its term and trigram index the id
    column itself."""
    execute("DROP VIEW asset_search")
    execute(
        "CREATE VIEW asset_search AS SELECT id AS asset_id, id AS term FROM assets UNION ALL "
        "SELECT asset_id AS asset_id, ol_namespace || '/' || ol_name AS term FROM external_datasets UNION ALL "
        "SELECT asset_id AS asset_id, namespace || '/' || name AS term FROM external_identifiers"
    )
    execute("DROP INDEX assets_trgm")
    execute("CREATE INDEX assets_trgm ON assets USING gin (id gin_trgm_ops)")


def plan(conn: psycopg.Connection[Any], statement: str, *params: Any) -> str:
    rows = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", params).fetchall()
    return json.dumps(rows[0][0])


def lookups_by_id_and_search(url: str) -> tuple[str, str]:
    """The plans of a search, and of a lookup of an asset by id with the primary key and the other
    indexes that hold the id gone (in a transaction rolled back), so that the trigram index is the
    only one left that could answer it;
    every scan but a bitmap scan off, so that an index answers each where one can."""
    with psycopg.connect(url) as conn:
        for scan in ("seqscan", "indexscan", "indexonlyscan"):  # only bitmap scans: by an index's condition
            conn.execute(f"SET LOCAL enable_{scan} = off")
        search = plan(conn, "SELECT asset_id FROM asset_search WHERE term ILIKE %s", "%table_012%")
        conn.execute("ALTER TABLE assets DROP CONSTRAINT assets_pkey CASCADE")
        conn.execute("DROP INDEX assets_type, assets_namespace, assets_namespace_type")  # (…, id): they hold it too
        by_id = plan(conn, "SELECT type FROM assets WHERE id = %s", IDS[7])
        conn.rollback()
    return by_id, search


def test_the_trigram_index_answers_the_search_not_a_lookup_by_id(postgres: PostgresServer) -> None:
    url = postgres.url(postgres.create_database())
    with Catalog(url) as catalog:
        if not catalog.search_indexed():  # a server without pg_trgm (the pgserver package's)
            pytest.skip("this PostgreSQL has no pg_trgm: the search reads every asset (test_ui tests that)")
        version = int(catalog._conn.execute("SHOW server_version_num").fetchone()[0])
        if version < 140000:
            pytest.skip("pg_trgm's GIN indexes answer equality from PostgreSQL 14 on")
        catalog.set_asset(decl(IDS[0], type="Table"), now=at(0))
        with catalog.transaction() as cur:  # the rest as the first, in bulk
            cur.executemany(
                "INSERT INTO assets (id, type, namespace, metadata, origin, created_at, updated_at) "
                "SELECT ?, type, namespace, metadata, origin, created_at, updated_at FROM assets WHERE id = ?",
                [(asset_id, IDS[0]) for asset_id in IDS[1:]],
            )
            cur.execute("ANALYZE assets")
        found = [a.asset.id for a in list_assets(catalog, AssetFilter(search="TABLE_012"), limit=50).assets]
        assert found == IDS[120:130]
    by_id, search = lookups_by_id_and_search(url)
    assert "assets_trgm" in search
    assert "assets_trgm" not in by_id and "Seq Scan" in by_id

    # a catalog of the version before: the index on the column answered the lookup by id
    with Catalog(url) as catalog:

        def back_to_22(cur: Any) -> None:
            undo_kept_writers_gone(cur.execute)  # migration 0038's
            undo_alerts_told(cur.execute)  # migration 0037's
            undo_health_purged(cur.execute)  # migration 0035's
            undo_kept_edges(cur.execute)  # migration 0033's
            undo_alert_heads(cur.execute)  # migration 0032's
            undo_writers_by_task(cur.execute)  # migration 0031's
            undo_unwritten_outputs(cur.execute)  # migration 0029's
            undo_lineage_by_run(cur.execute)  # migration 0028's
            undo_uses_by_asset_in_time(cur.execute)  # migration 0027's
            undo_edges_by_whole_key(cur.execute)  # migration 0026's
            undo_own_facts_kept(cur.execute)  # migration 0025's
            undo_health_due(cur.execute)  # migration 0024's
            undo_search_by_expression(cur.execute)
            cur.execute("UPDATE alembic_version SET version_num = '0022'")
            catalog.db.engine.stamp(cur, 22)

        catalog.db.write(back_to_22)
    by_id, _ = lookups_by_id_and_search(url)
    assert "assets_trgm" in by_id
    code, out, err = invoke(url, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 22, err
    by_id, search = lookups_by_id_and_search(url)
    assert "assets_trgm" in search and "assets_trgm" not in by_id
    with Catalog(url) as catalog:
        found = [a.asset.id for a in list_assets(catalog, AssetFilter(search="table_012"), limit=50).assets]
        assert found == IDS[120:130]
