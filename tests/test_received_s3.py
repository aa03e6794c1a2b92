"""S3 by Hadoop's schemes: a received dataset named ``s3a://bucket`` or ``s3n://bucket`` is the
one OpenLineage names ``s3://bucket`` (and olbridge's own ``s3a://`` ids are exported as), so
lineage joins whatever scheme a producer used; Spark's column lineage, which names its S3 inputs
``s3a://`` where its datasets say ``s3://``, joins its columns to the datasets it read; a token's
namespaces are judged on the store's name."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.model.received import store_namespace, writable, writes_stored
from bridge.receiver.column_lineage import read_column_lineage
from bridge.receiver.imports import catalog_intake
from bridge.receiver.scopes import forbidden
from tests.conftest import at
from tests.helpers import decl, ol_dataset, ol_run_event, run
from tests.test_receiver_columns import IDENTITY, dataset, field

pytestmark = pytest.mark.both_engines


def test_the_hadoop_schemes_of_s3_are_read_as_s3() -> None:
    assert store_namespace("s3a://lake") == "s3://lake" and store_namespace("S3N://lake") == "s3://lake"
    for other in ("s3://lake", "s3x://lake", "gs://lake", "file", "postgres://db:5432", "s3a:/lake", ""):
        assert store_namespace(other) == other


def test_a_dataset_named_by_either_scheme_is_the_same_asset(catalog_target: str, resolver: Resolver) -> None:
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", outputs=(decl("s3a://lake/raw/orders", type="File"),), start=at(0)))
        catalog.record_task_run(run("items", outputs=(decl("s3://lake/raw/items", type="File"),), start=at(0)))
        event = ol_run_event(
            "COMPLETE",
            inputs=[ol_dataset("S3N://lake", "raw/orders"), ol_dataset("s3a://lake", "raw/items")],
            outputs=[ol_dataset("s3a://lake", "mart/daily")],
            time="2025-03-01T09:00:00Z",
        )
        assert [o.ok for o in catalog_intake(catalog, resolver).take([event])] == [True]
        assert sorted(a.id for a in catalog.list_assets()) == [
            "s3://lake/mart/daily",
            "s3://lake/raw/items",
            "s3a://lake/raw/orders",
        ]
        # found by the name the producer gave it (Marquez shows it so), as by olbridge's
        assert catalog.find_asset_id("s3a://lake/mart/daily", resolver) == "s3://lake/mart/daily"
        assert catalog.find_asset_id("s3://lake/mart/daily", resolver) == "s3://lake/mart/daily"
        upstream = catalog.lineage("s3://lake/mart/daily", direction="upstream", depth=1)
        assert {a.id for a in upstream.assets} == {
            "s3://lake/mart/daily",
            "s3://lake/raw/items",
            "s3a://lake/raw/orders",
        }


@pytest.mark.parametrize(
    ("own", "namespace", "name"),
    [
        ("bigquery://proj/ds/t", "bigquery", "proj.ds.t"),
        ("snowflake://xy12345/DB.S.T", "snowflake://xy12345.us-west-1.aws", "DB.S.T"),
        ("S3A://lake/k", "s3://lake", "k"),
        ("POSTGRESQL://pgz/db.s.t", "postgres://pgz:5432", "db.s.t"),
        # as Spark's JDBC reader and Azure Synapse name SQL Server (a sqlserver:// key was exported as
        # mssql://, and their dataset kept apart from it)
        (
            "sqlserver://syn.sql.azuresynapse.net:1433/dw.dbo.sales",
            "sqlserver://syn.sql.azuresynapse.net:1433",
            "dw.dbo.sales",
        ),
        ("SQLSERVER://s/db.dbo.t", "sqlserver://s:1433", "db.dbo.t"),
    ],
)
def test_a_dataset_named_after_an_own_asset_of_any_spelling_is_that_asset(
    catalog_target: str, resolver: Resolver, own: str, namespace: str, name: str
) -> None:
    """Each own id is exported as the dataset the event names, but the event, after the asset,
    made a placeholder of its own (joined only the other way round, where the write takes the
    placeholder over): a BigQuery key with its table as a path segment, a Snowflake locator
    without its region and cloud, a scheme in capitals. The event's dataset is the own asset,
    whichever came first."""
    assert (resolver.dataset_for(own, "Table", {}).namespace, resolver.dataset_for(own, "Table", {}).name) == (
        namespace,
        name,
    )
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", outputs=(decl(own, type="Table"),), start=at(0)))
        event = ol_run_event(
            "COMPLETE",
            inputs=[ol_dataset(namespace, name)],
            outputs=[ol_dataset("s3://lake", "mart/daily")],
            time="2025-03-01T09:00:00Z",
        )
        assert [o.ok for o in catalog_intake(catalog, resolver).take([event])] == [True]
        assert sorted(a.id for a in catalog.list_assets()) == sorted([own, "s3://lake/mart/daily"])
        upstream = catalog.lineage("s3://lake/mart/daily", direction="upstream", depth=1)
        assert {a.id for a in upstream.assets} == {"s3://lake/mart/daily", own}


def spark_s3_event() -> dict[str, Any]:
    """A Spark job reading an S3 table its column lineage names s3a:// (OpenLineage's issue 2938)."""
    lineage = {"fields": {"id": {"inputFields": [field("s3a://lake", "raw/orders", "id", IDENTITY)]}}}
    return ol_run_event(
        "COMPLETE",
        job=("spark", "orders_daily"),
        inputs=[dataset("s3://lake", "raw/orders", ["id"])],
        outputs=[dataset("s3://lake", "mart/orders", ["id"], columnLineage=lineage)],
        time="2025-03-01T09:00:00Z",
    )


def test_spark_s_column_lineage_by_s3a_joins_the_dataset_it_read(catalog_target: str, resolver: Resolver) -> None:
    edges, warnings = read_column_lineage(spark_s3_event())
    assert warnings == ()  # its input is the event's input, not "not an input of this event"
    assert [(e.output, e.column, e.input, e.field) for e in edges] == [
        (("s3://lake", "mart/orders"), "id", ("s3://lake", "raw/orders"), "id")
    ]
    with Catalog(catalog_target) as catalog:
        outcome = catalog_intake(catalog, resolver).take([spark_s3_event()])
        assert [o.ok for o in outcome] == [True] and not outcome[0].warnings, outcome
        assert sorted(a.id for a in catalog.list_assets()) == ["s3://lake/mart/orders", "s3://lake/raw/orders"]
        found = catalog.column_lineage("s3://lake/mart/orders", "id", direction="upstream", depth=1)
        assert {(e.upstream, e.upstream_column) for e in found.edges} == {("s3://lake/raw/orders", "id")}


def test_a_token_writes_s3_by_either_name() -> None:
    """A token of ``s3://lake*`` writes a dataset named ``s3a://lake`` (the same store), and one of
    ``s3a://lake*`` does as before; a token of another store's does not, and the refusal names the
    namespace as the event gave it."""
    event = ol_run_event("COMPLETE", job=("spark", "j"), outputs=[ol_dataset("s3a://lake", "mart/x")])
    for patterns in (("spark", "s3://lake*"), ("spark", "s3a://lake*"), ("spark", "s3?://*")):
        assert forbidden(event, lambda ns, p=patterns: writable(p, ns)) is None, patterns
    refused = forbidden(event, lambda ns: ns == "spark")
    assert refused == ("/outputs/0/namespace", "s3a://lake")
    # the catalog, which keeps the dataset as s3://lake, says the same of each token (whose
    # dataset's sightings it moves, and whose collisions it names)
    for patterns in (("spark", "s3://lake*"), ("spark", "s3a://lake*"), ("spark", "s3?://*")):
        assert writes_stored(patterns, "s3://lake") and writes_stored(patterns, "s3://lake/x"), patterns
    assert not writes_stored(("spark", "s3a://other*"), "s3://lake") and writes_stored(None, "s3://lake")
