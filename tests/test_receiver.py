"""The receiver's ingest: placeholders, external runs and lineage, idempotence, order, round trips."""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import pickle
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog, ExternalUsage
from bridge.catalog import sql as catalog_sql
from bridge.catalog.browse import raw_events
from bridge.catalog.migrations.legacy import SQLITE_SCRIPTS
from bridge.catalog.runs import Runs
from bridge.delivery.history import iter_events, iter_lines
from bridge.mapping import Resolver
from bridge.model import Identifier, Origin
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from bridge.receiver.imports import catalog_intake
from bridge.receiver.intake import Intake, Outcome
from bridge.receiver.policy import judge
from tests.conftest import at
from tests.helpers import (
    DATASET_EVENT_URL,
    JOB_EVENT_URL,
    PRODUCER,
    catalog_state,
    decl,
    invoke,
    ol_dataset,
    ol_run_event,
    run,
    table_contents,
)
from tests.test_engines import undo_alerts_told, undo_health_purged, undo_kept_writers_gone

pytestmark = pytest.mark.both_engines

RAW = ol_dataset("s3://raw-bucket", "orders/2025")
OTHER_RUN = "0194a1b2-0000-7000-8000-000000000002"
TABLE = ol_dataset(
    "postgres://db.example.com:5432",
    "shop.public.orders",
    documentation={"description": "Orders, one row each"},
    ownership={"owners": [{"name": "team:shop"}, {"name": "user:ada"}]},
    datasetType={"datasetType": "TABLE"},
    schema={"fields": [{"name": "id", "type": "INTEGER"}, {"name": "amount", "type": "DECIMAL"}]},
    symlinks={"identifiers": [{"namespace": "hive://metastore", "name": "shop.orders", "type": "TABLE"}]},
)


@pytest.fixture
def intake(catalog: Catalog, resolver: Resolver) -> Intake:
    return catalog_intake(catalog, resolver)


def take(intake: Intake, *events: dict[str, Any]) -> list[Outcome]:
    return intake.take(list(events))


def test_unknown_datasets_become_external_placeholders(catalog: Catalog, intake: Intake) -> None:
    start = ol_run_event("START", inputs=[RAW], time="2025-03-01T08:00:00Z")
    end = ol_run_event("COMPLETE", inputs=[RAW], outputs=[TABLE], time="2025-03-01T08:05:00Z")
    outcomes = take(intake, start, end)
    assert [o.status for o in outcomes] == ["accepted", "accepted"]
    assert outcomes[0].placeholders == ("s3://raw-bucket/orders/2025",)
    assert outcomes[1].placeholders == ("shop.public.orders",)
    raw = catalog.asset("s3://raw-bucket/orders/2025")
    assert (raw.type, raw.origin, raw.namespace) == ("External", Origin.EXTERNAL, None)
    assert raw.metadata["olNamespace"] == "s3://raw-bucket"
    assert raw.metadata["olName"] == "orders/2025"
    assert raw.metadata["producer"] == PRODUCER
    assert (raw.metadata["firstSeen"], raw.metadata["lastSeen"]) == (
        "2025-03-01T08:00:00.000000Z",
        "2025-03-01T08:05:00.000000Z",
    )
    assert (raw.created_at, raw.updated_at) == (at(0), at(5))  # event times, not the clock
    table = catalog.asset("shop.public.orders")
    assert table.description == "Orders, one row each"
    assert table.metadata["owner"] == "team:shop, user:ada"
    assert table.metadata["datasetType"] == "TABLE"
    # symlinks are identifiers of the asset, not a metadata string
    assert "symlinks" not in table.metadata
    assert table.identifiers == (Identifier("hive://metastore", "shop.orders", "TABLE"),)
    assert set(table.received_facets) == {"documentation", "ownership", "datasetType", "schema", "symlinks"}
    assert [(c.name, c.type) for c in table.columns] == [("id", "INTEGER"), ("amount", "DECIMAL")]
    assert table.metadata["system"] == "postgres"  # what the reverse naming rule says


PARENT = "0194a1b2-0000-7000-8000-0000000000aa"


@pytest.mark.parametrize(
    ("facets", "parent"),
    [
        ({"parent": {"run": {"runId": PARENT}, "job": {"namespace": "airflow", "name": "dag"}}}, PARENT),
        # the key Airflow's integration before its provider (and Great Expectations', and
        # Prefect's) sent the parent under
        ({"parentRun": {"run": {"runId": PARENT}, "job": {"namespace": "airflow", "name": "dag"}}}, PARENT),
        (
            {
                "parent": {"run": {"runId": PARENT}, "job": {"namespace": "airflow", "name": "dag"}},
                "parentRun": {"run": {"runId": OTHER_RUN}, "job": {"namespace": "airflow", "name": "dag"}},
            },
            PARENT,
        ),
        ({"parentRun": {"run": {"runId": "dag-run-7"}, "job": {"namespace": "airflow", "name": "dag"}}}, None),
    ],
    ids=["parent", "parentRun", "parent first", "not a UUID"],
)
def test_a_runs_parent_is_read_from_either_facet_key(
    catalog: Catalog, intake: Intake, facets: dict[str, Any], parent: str | None
) -> None:
    for facet in facets.values():
        facet.update(
            {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json"}
        )
    (outcome,) = take(intake, ol_run_event("START", run={"runId": OTHER_RUN.replace("2", "3"), "facets": facets}))
    assert outcome.status == "accepted", outcome
    (source,) = catalog.external_sources()
    assert source.parent_run_id == parent


def test_external_runs_and_lineage_edges_are_recorded(catalog: Catalog, intake: Intake) -> None:
    take(
        intake,
        ol_run_event("START", inputs=[RAW]),
        ol_run_event("COMPLETE", outputs=[TABLE], time="2025-03-01T08:05:00Z"),
    )
    (source,) = catalog.external_sources()
    assert (source.job_namespace, source.job_name) == ("airflow", "dag.task")
    assert (source.state, source.started, source.ended) == (
        "COMPLETE",
        "2025-03-01T08:00:00.000000Z",
        "2025-03-01T08:05:00.000000Z",
    )
    assert source.inputs == ("s3://raw-bucket/orders/2025",)
    assert source.outputs == ("shop.public.orders",)
    graph = catalog.lineage("s3://raw-bucket/orders/2025", direction="downstream")
    assert [(e.upstream, e.downstream, e.tasks) for e in graph.edges] == [
        ("s3://raw-bucket/orders/2025", "shop.public.orders", ("airflow/dag.task (external)",))
    ]


def test_lineage_walks_from_the_catalogs_flows_through_external_jobs(catalog: Catalog, intake: Intake) -> None:
    catalog.record_task_run(run("load", outputs=(decl("s3://raw-bucket/orders/2025", type="File"),)))
    take(intake, ol_run_event(inputs=[RAW], outputs=[TABLE]))
    graph = catalog.lineage("s3://raw-bucket/orders/2025", direction="downstream")
    assert [e.downstream for e in graph.edges] == ["shop.public.orders"]
    assert (
        catalog.lineage("shop.public.orders", direction="upstream").edges[0].upstream == "s3://raw-bucket/orders/2025"
    )


def test_an_asset_the_catalog_produces_is_never_overwritten(catalog: Catalog, intake: Intake) -> None:
    catalog.record_task_run(
        run(
            "load",
            outputs=(
                decl("s3://raw-bucket/orders/2025", type="File", description="ours", metadata={"owner": "team:data"}),
            ),
        )
    )
    before = catalog.asset("s3://raw-bucket/orders/2025")
    described = ol_dataset(
        "s3://raw-bucket", "orders/2025", documentation={"description": "theirs"}, ownership={"owners": [{"name": "x"}]}
    )
    (outcome,) = take(intake, ol_run_event(inputs=[described], outputs=[TABLE]))
    assert outcome.status == "accepted"
    assert outcome.placeholders == ("shop.public.orders",)
    assert catalog.asset("s3://raw-bucket/orders/2025") == before
    usages = catalog.usages_of("s3://raw-bucket/orders/2025")
    assert [(u.direction, isinstance(u, ExternalUsage)) for u in usages] == [("output", False), ("input", True)]


def test_re_sending_an_event_changes_nothing(catalog: Catalog, intake: Intake) -> None:
    event = ol_run_event(inputs=[RAW], outputs=[TABLE])
    take(intake, event)
    before = table_contents(catalog)
    reordered = dict(reversed(list(copy.deepcopy(event).items())))  # same event, keys in another order
    outcomes = take(intake, event, reordered)
    assert [o.status for o in outcomes] == ["duplicate", "duplicate"]
    assert table_contents(catalog) == before


def test_events_out_of_order_end_in_the_same_state(resolver: Resolver, new_catalog: Callable[[], Catalog]) -> None:
    events = [
        ol_run_event("START", inputs=[RAW], time="2025-03-01T08:00:00Z"),
        ol_run_event("RUNNING", inputs=[RAW], time="2025-03-01T08:02:00Z"),
        ol_run_event("COMPLETE", inputs=[RAW], outputs=[TABLE], time="2025-03-01T08:05:00Z"),
        {
            "eventTime": "2025-03-01T09:00:00Z",
            "producer": PRODUCER,
            "schemaURL": DATASET_EVENT_URL,
            "dataset": ol_dataset("s3://raw-bucket", "orders/2025", documentation={"description": "late"}),
        },
    ]
    states = []
    for order in itertools.permutations(events):
        with new_catalog() as catalog:
            for event in order:  # one at a time, as separate requests would
                assert catalog_intake(catalog, resolver).take([event])[0].ok
            states.append(catalog_state(catalog))
    assert all(state == states[0] for state in states[1:])
    with new_catalog() as catalog:
        catalog_intake(catalog, resolver).take(events)
        (source,) = catalog.external_sources()
        assert source.state == "COMPLETE"
        assert catalog.asset("s3://raw-bucket/orders/2025").description == "late"


def test_a_job_event_records_static_lineage(catalog: Catalog, intake: Intake) -> None:
    event = {
        "eventTime": "2025-03-01T08:00:00Z",
        "producer": PRODUCER,
        "schemaURL": JOB_EVENT_URL,
        "job": {"namespace": "airflow", "name": "static_job"},
        "inputs": [RAW],
        "outputs": [TABLE],
    }
    assert take(intake, event)[0].status == "accepted"
    (source,) = catalog.external_sources()
    assert (source.source, source.run_id, source.state) == ("job:airflow/static_job", None, None)
    assert catalog.lineage("shop.public.orders", direction="upstream").edges[0].upstream == RAW_ID


RAW_ID = "s3://raw-bucket/orders/2025"


def test_a_run_id_in_capitals_is_the_same_run(catalog: Catalog, intake: Intake, converter: Converter) -> None:
    """Marquez reads a runId as a UUID, whatever its case: one run. The receiver kept a START in
    lower case and its COMPLETE in capitals as two runs (one RUNNING for ever)."""
    run_id = "0194a1b2-0000-7000-8000-00000000abcd"
    take(intake, ol_run_event("START", run_id=run_id, inputs=[RAW]))
    take(intake, ol_run_event("COMPLETE", run_id=run_id.upper(), outputs=[TABLE], time="2025-03-01T09:00:00Z"))
    (source,) = catalog.external_sources()
    assert source.state == "COMPLETE" and source.inputs and source.outputs
    runs = Runs(catalog, converter)
    for spelled in (run_id, run_id.upper()):
        found = runs.get(spelled)
        assert found is not None and found.state == "COMPLETE", spelled


def test_exporting_a_placeholder_gives_back_its_namespace_and_name(
    catalog: Catalog, intake: Intake, converter: Converter
) -> None:
    odd = ol_dataset("custom-system", "Some Name With Spaces")  # no naming rule parses it
    take(intake, ol_run_event(inputs=[RAW, odd], outputs=[TABLE]))
    for namespace, name in [
        ("s3://raw-bucket", "orders/2025"),
        ("postgres://db.example.com:5432", "shop.public.orders"),
        ("custom-system", "Some Name With Spaces"),
    ]:
        (asset_id,) = [a.id for a in catalog.list_assets() if a.metadata.get("olName") == name]
        dataset = converter.dataset(catalog.asset(asset_id))
        assert (dataset["namespace"], dataset["name"]) == (namespace, name)
    # a flow of ours reading the placeholders names them the same way in its events
    catalog.record_task_run(run("report", inputs=(decl("shop.public.orders"),), start=at(30)))
    events = list(iter_events(catalog, converter))
    names = {(d["namespace"], d["name"]) for e in events for d in e.get("inputs", [])}
    assert ("postgres://db.example.com:5432", "shop.public.orders") in names


def test_a_received_facet_the_spec_refuses_or_that_says_what_a_run_did_is_not_passed_on(
    catalog: Catalog, intake: Intake, converter: Converter
) -> None:
    """A producer's dataSource whose uri is no URI made every olbridge event naming the dataset
    fail the spec; its lifecycleStateChange (OVERWRITE) made every later olbridge run that only
    read it say it overwrote it. Neither is passed on; the producer's other facets are."""
    spark = ol_dataset(
        "file",
        "/data/spark_out",
        dataSource={"name": "file", "uri": "file"},
        lifecycleStateChange={"lifecycleStateChange": "OVERWRITE"},
        documentation={"description": "Spark's output"},
    )
    spark["facets"]["dataSource"]["_schemaURL"] = (
        "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet"
    )
    take(intake, ol_run_event(outputs=[spark]))
    (found,) = [a.id for a in catalog.list_assets() if a.metadata.get("olName") == "/data/spark_out"]
    placeholder = catalog.asset(found)
    assert {"dataSource", "lifecycleStateChange", "documentation"} <= set(placeholder.received_facets)
    catalog.record_task_run(run("report", inputs=(decl(placeholder.id),), start=at(30)))
    events = [e for e in iter_events(catalog, converter) if e.get("inputs")]
    assert events and all(validate_event(e) == [] for e in events), [validate_event(e) for e in events]
    facets = events[0]["inputs"][0]["facets"]
    assert "lifecycleStateChange" not in facets and facets["documentation"]["description"] == "Spark's output"
    assert facets["dataSource"].get("uri") != "file"  # olbridge's own


def test_what_a_producers_run_said_of_a_dataset_is_not_passed_on_in_olbridges_runs(
    catalog: Catalog, intake: Intake, resolver: Resolver, converter: Converter
) -> None:
    """Spark's output carries its run's columnLineage (from s3a://lake inputs), the Iceberg
    snapshot it wrote (version), and statistics and data-quality results of its read or write
    (facets the spec gives as input or output facets, here sent among the dataset facets). None
    is a statement about olbridge's run that later reads the dataset, so none is in its events;
    what the dataset is (documentation, schema, storage) is, as Spark sent it."""
    url = "https://openlineage.io/spec/facets/{}/{}.json#/$defs/{}"

    def facet(version: str, name: str, **fields: Any) -> dict[str, Any]:
        return {"_producer": PRODUCER, "_schemaURL": url.format(version, name, name), **fields}

    lake = [ol_dataset("s3a://lake", "raw/orders"), ol_dataset("s3a://lake", "raw/customers")]
    written = ol_dataset(
        "hdfs://namenode:8020",
        "/warehouse/x",
        documentation={"description": "Spark's output"},
        schema={"fields": [{"name": "id"}, {"name": "label"}]},
    )
    from_lake = [
        {"namespace": "s3a://lake", "name": "raw/orders", "field": "id"},
        {"namespace": "s3a://lake", "name": "raw/customers", "field": "name"},
    ]
    said = {
        "columnLineage": facet(
            "1-2-0",
            "ColumnLineageDatasetFacet",
            fields={"id": {"inputFields": from_lake[:1]}, "label": {"inputFields": from_lake[1:]}},
        ),
        "version": facet("1-0-1", "DatasetVersionDatasetFacet", datasetVersion="8021"),
        "outputStatistics": facet("1-0-2", "OutputStatisticsOutputDatasetFacet", rowCount=12),
        "inputStatistics": facet("1-0-0", "InputStatisticsInputDatasetFacet", rowCount=12),
        "dataQualityMetrics": facet("1-0-3", "DataQualityMetricsInputDatasetFacet", rowCount=12, columnMetrics={}),
        "dataQualityAssertions": facet(
            "1-1-0", "DataQualityAssertionsDatasetFacet", assertions=[{"assertion": "not_null", "success": True}]
        ),
        "storage": facet("1-0-1", "StorageDatasetFacet", storageLayer="iceberg", fileFormat="parquet"),
    }
    written["facets"].update(said)
    assert take(intake, ol_run_event(job=("spark", "app.write_x"), inputs=lake, outputs=[written]))[0].ok
    placeholder = catalog.asset(resolver.asset_for("hdfs://namenode:8020", "/warehouse/x").id)
    assert placeholder.origin is Origin.EXTERNAL and set(said) <= set(placeholder.received_facets)
    catalog.record_task_run(run("report", inputs=(decl(placeholder.id),), start=at(30)))
    events = [json.loads(line) for line in iter_lines(catalog, converter)]
    (start, _end) = [e for e in events if e["job"]["name"] == "flow.report"]
    (dataset,) = start["inputs"]
    assert (dataset["namespace"], dataset["name"]) == ("hdfs://namenode:8020", "/warehouse/x")
    facets = dataset["facets"]
    assert set(said) - {"storage"} == set(said) - set(facets), sorted(facets)
    assert facets["storage"] == said["storage"] and facets["documentation"]["description"] == "Spark's output"
    assert [f["name"] for f in facets["schema"]["fields"]] == ["id", "label"]
    assert all(validate_event(e) == [] for e in (start, _end))


def test_a_snowflake_table_declared_by_its_account_locator_is_dbt_ols_dataset(
    catalog: Catalog, intake: Intake, converter: Converter
) -> None:
    """``assets set ANALYTICS.MARTS.DIM_X --metadata system=snowflake --metadata account=xy12345``
    is named as dbt-ol and Airflow name the table (the locator with its default region and
    cloud), so their events of it are of this asset: it was ``snowflake://xy12345``, and dbt-ol's
    dataset collided with it and was kept apart under a hashed id."""
    metadata = {"system": "snowflake", "account": "xy12345"}
    catalog.set_asset(decl("ANALYTICS.MARTS.DIM_X", type="Table", metadata=metadata), now=at(0))
    (change,) = iter_events(catalog, converter)
    assert change["dataset"]["namespace"] == "snowflake://xy12345.us-west-1.aws"
    dbt_ol = ol_dataset("snowflake://xy12345.us-west-1.aws", "ANALYTICS.MARTS.DIM_X")
    (outcome,) = take(intake, ol_run_event(job=("dbt", "model.dim_x"), outputs=[dbt_ol]))
    assert (outcome.status, outcome.placeholders, outcome.warnings) == ("accepted", (), ())
    assert [a.id for a in catalog.list_assets()] == ["ANALYTICS.MARTS.DIM_X"]


def test_a_placeholder_is_exported_with_no_dataset_type_but_the_one_its_producer_gave(
    catalog: Catalog, intake: Intake, converter: Converter
) -> None:
    """External is olbridge's word for a dataset it knows only by name, not a dataset type (the
    spec's DatasetTypeDatasetFacet gives TABLE, VIEW, FILE, TOPIC, STREAM, MODEL, JOB_OUTPUT;
    EXTERNAL is a subType there): a placeholder no producer typed has no datasetType facet, and
    the symlink identifiers of its own and its producers' that came without a type are TABLE, as
    OpenLineage's integrations type an identifier naming a dataset in a catalog; one a producer
    typed goes out with the producer's type, and its identifiers with it."""
    hive = {"identifiers": [{"namespace": "hive://metastore", "name": "raw.events"}]}  # no type (W8)
    take(
        intake,
        ol_run_event(
            inputs=[
                ol_dataset("gs://landing", "events", symlinks=hive),
                ol_dataset("kafka://broker:9092", "payments", datasetType={"datasetType": "TOPIC"}, symlinks=hive),
            ]
        ),
    )
    read = ("s3a://raw/orders.csv", "gs://landing/events", "kafka://broker:9092/payments")
    catalog.record_task_run(run("report", inputs=tuple(decl(i) for i in read), start=at(30)))
    (start, _end) = [e for e in iter_events(catalog, converter) if e["job"]["name"] == "flow.report"]
    assert [d["facets"]["olbridge_asset"]["type"] for d in start["inputs"]] == ["External"] * 3
    types = [(d["facets"].get("datasetType") or {}).get("datasetType") for d in start["inputs"]]
    assert types == [None, None, "TOPIC"]
    symlinks = [{(i["namespace"], i["type"]) for i in d["facets"]["symlinks"]["identifiers"]} for d in start["inputs"]]
    # each named by its object or topic: olbridge's identifier gives its id
    assert symlinks == [
        {("olbridge", "TABLE")},
        {("olbridge", "TABLE"), ("hive://metastore", "TABLE")},
        {("olbridge", "TOPIC"), ("hive://metastore", "TOPIC")},
    ]
    assert validate_event(start) == []


def test_ingesting_olbridges_own_events_gives_back_the_same_assets(
    catalog: Catalog, intake: Intake, converter: Converter
) -> None:
    catalog.record_task_run(
        run(
            "load",
            inputs=(decl("s3://landing/orders.csv"),),
            outputs=(
                decl(
                    "analytics.marts.orders", type="Table", metadata={"system": "postgres", "host": "db", "port": 5432}
                ),
                decl("reports.orders_summary", type="File"),
                # named by its path (files.toml's file-by-path), which no rule names back: found by
                # the symlink olbridge gives it
                decl("reports.orders_by_day", type="File", metadata={"path": "out/orders_by_day.csv"}),
                # ... and by an absolute one, which local-file's rule names back as file:///...
                decl("reports.orders_all", type="File", metadata={"path": "/data/orders_all.csv"}),
                # named by its metadata (kafka://host:9092, the topic), which the rules name back as
                # another id: found by the symlink too
                decl("payments", type="Dataset", metadata={"system": "kafka", "host": "kafka-1", "topic": "payments"}),
            ),
        )
    )
    before = {a.id: a for a in catalog.list_assets()}
    events = list(iter_events(catalog, converter))
    shouted = copy.deepcopy(events)  # a producer that writes the same ids in capitals
    for event in shouted:
        event["run"]["runId"] = event["run"]["runId"].upper()
    assert [o.status for o in intake.take(shouted)] == ["duplicate", "duplicate"]
    outcomes = intake.take(events)
    # the run's START and COMPLETE: the catalog's own run, not an external run of the same id
    assert [o.status for o in outcomes] == ["duplicate", "duplicate"]
    assert [p for o in outcomes for p in o.placeholders] == []
    assert table_contents(catalog)["external_sources"] == []
    # ... the run of another olbridge (another run id): an external run as any other
    other = copy.deepcopy(events)
    for event in other:
        event["run"]["runId"] = "01950000-0000-7000-8000-000000000001"
    assert [o.status for o in intake.take(other)] == ["accepted", "accepted"]
    assert len(table_contents(catalog)["external_sources"]) == 1
    assert {a.id for a in catalog.list_assets()} == set(before)
    for asset_id, asset in before.items():
        if asset.origin is not Origin.EXTERNAL:
            assert catalog.asset(asset_id) == asset


def test_a_producer_naming_an_own_asset_as_the_rules_name_it_joins_the_lineage_whatever_its_id(
    catalog: Catalog, intake: Intake
) -> None:
    """Own assets whose ids the rules name back as other ids (an s3a:// id exported as s3://, a
    gcs:// one as gs://, a postgresql:// URI without its port, a folder with its slash): Spark's
    and Airflow's events, which carry no olbridge symlink, name them as olbridge exports them,
    and come back to them, with no placeholder: the lineage joins up."""
    ids = {
        "s3a://lake/raw/orders": ("s3://lake", "raw/orders"),
        "gcs://acme-raw/landing/orders": ("gs://acme-raw", "landing/orders"),
        "postgresql://warehouse.internal/shop.staging.orders": (
            "postgres://warehouse.internal:5432",
            "shop.staging.orders",
        ),
        "s3://lake/curated/orders/": ("s3://lake", "curated/orders"),
    }
    catalog.record_task_run(run("load", outputs=tuple(decl(i, type="Dataset") for i in ids)))
    # a Kafka topic declared by its metadata alone is named by it: no rule spells its id
    catalog.record_task_run(
        run(
            "topic",
            outputs=(decl("payments", type="Dataset", metadata={"system": "kafka", "host": "k", "topic": "p"}),),
        )
    )
    inputs = [ol_dataset(*name) for name in ids.values()] + [ol_dataset("kafka://k:9092", "p")]
    [outcome] = take(intake, ol_run_event(inputs=inputs, outputs=[TABLE]))
    assert outcome.status == "accepted" and outcome.placeholders == ("kafka://k:9092/p", "shop.public.orders")
    for asset_id in ids:
        graph = catalog.lineage(asset_id, direction="downstream")
        assert [e.downstream for e in graph.edges] == ["shop.public.orders"], asset_id
        assert catalog.asset(asset_id).origin is Origin.DECLARED  # still its own, not overwritten
    # a second dataset named as one of them, another spelling, binds nothing more to it
    [again] = take(intake, ol_run_event(inputs=[ol_dataset("s3://lake", "raw/orders/")], run_id=OTHER_RUN))
    assert again.placeholders == ("s3://lake/raw/orders/",)


def test_a_symlink_to_an_asset_named_otherwise_binds_nothing_to_it(
    catalog: Catalog, intake: Intake, resolver: Resolver
) -> None:
    """A dataset no rule names back comes to olbridge's asset that a symlink in olbridge's
    namespace names only where olbridge names that asset as the dataset is named: another
    producer's dataset saying it is ``reports.orders_by_day`` stays a placeholder of its own."""
    own = decl("reports.orders_by_day", type="File", metadata={"path": "out/orders_by_day.csv"})
    catalog.record_task_run(run("report", outputs=(own,)))
    link = {"namespace": resolver.default_namespace, "name": "reports.orders_by_day", "type": "FILE"}
    for index, name in enumerate(("elsewhere/orders_by_day.csv", "out/orders_by_day.csv")):
        event = ol_run_event(
            run_id=f"0194a1b2-0000-7000-8000-00000000010{index}",
            outputs=[ol_dataset("file", name, symlinks={"identifiers": [link]})],
        )
        (outcome,) = take(intake, event)
        assert outcome.status == "accepted"
        external = [u for u in catalog.usages_of("reports.orders_by_day") if isinstance(u, ExternalUsage)]
        if index == 0:
            assert len(outcome.placeholders) == 1 and outcome.placeholders[0] != "reports.orders_by_day"
            assert external == []
        else:
            assert outcome.placeholders == () and len(external) == 1


def test_two_datasets_never_merge_into_one_asset(catalog: Catalog, intake: Intake, converter: Converter) -> None:
    # a flow of ours owns 'shop.public.orders' on another host: an event naming the same table on
    # db.example.com must not land on it
    catalog.record_task_run(
        run(
            "load",
            outputs=(
                decl(
                    "shop.public.orders",
                    type="Table",
                    metadata={"system": "postgres", "host": "other-host", "port": 5432},
                ),
            ),
        )
    )
    (outcome,) = take(intake, ol_run_event(outputs=[TABLE]))
    assert outcome.status == "accepted"
    (placeholder,) = outcome.placeholders
    assert placeholder.startswith("ol:")
    assert any("already the dataset" in w for w in outcome.warnings)
    dataset = converter.dataset(catalog.asset(placeholder))
    assert (dataset["namespace"], dataset["name"]) == ("postgres://db.example.com:5432", "shop.public.orders")
    assert catalog.asset("shop.public.orders").metadata["host"] == "other-host"
    # the same dataset again lands on the same placeholder
    again = take(intake, ol_run_event(outputs=[TABLE], run_id="0194a1b2-0000-7000-8000-000000000002"))
    assert again[0].placeholders == ()
    assert again[0].warnings == ()


def test_marquez_compatible_by_default_strict_on_request() -> None:
    event = ol_run_event()
    del event["schemaURL"]
    event["eventTime"] = "2025-03-01T08:00:00"  # no offset: UTC, as Marquez reads it
    event["run"]["runId"] = "not-a-uuid"
    lenient, strict = judge(event), judge(event, strict=True)
    assert lenient.accepted
    assert {w.pointer for w in lenient.warnings} == {"", "/eventTime", "/run/runId"}
    assert not strict.accepted
    # Marquez's own refusals hold in both modes
    bad_namespace = ol_run_event(inputs=[ol_dataset("bad namespace!", "x")])
    assert not judge(bad_namespace).accepted
    assert not judge(bad_namespace, strict=True).accepted


def test_old_facet_versions_and_custom_facets_are_kept(catalog: Catalog, intake: Intake) -> None:
    event = ol_run_event(inputs=[RAW])
    event["run"]["facets"] = {
        "acme_cost": {"_producer": PRODUCER, "_schemaURL": "https://acme.example/cost.json", "dollars": 3},
        "nominalTime": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
            "nominalStartTime": "2025-03-01T08:00:00Z",
        },
    }
    assert judge(event, strict=True).accepted
    (outcome,) = take(intake, event)
    assert outcome.status == "accepted"
    ((body,),) = catalog._conn.execute("SELECT body FROM received_events").fetchall()
    assert '"acme_cost":{' in body and '"dollars":3' in body


def test_events_received_before_the_time_ordered_index_are_kept_and_still_known(
    tmp_path: Path, catalog: Catalog, intake: Intake, resolver: Resolver
) -> None:
    first, second = ol_run_event("START"), ol_run_event("COMPLETE", time="2025-03-01T09:00:00Z")
    assert intake.take([first])[0].status == "accepted"
    columns = "pk, digest, kind, event_type, event_time, source, producer, warnings, body"  # as 0006 has them
    [row] = catalog._conn.execute(f"SELECT {columns} FROM received_events").fetchall()
    path = tmp_path / "old.db"
    before = [name for name, _ in SQLITE_SCRIPTS].index("0006_received_in_time_order")
    with contextlib.closing(sqlite3.connect(path)) as conn:  # as the release before the index left it
        for script in [script for _, script in SQLITE_SCRIPTS[:before]]:
            conn.executescript(script)
        conn.execute(f"INSERT INTO received_events ({columns}) VALUES ({', '.join('?' * len(row))})", row)
        conn.execute(f"PRAGMA user_version = {before}")
        conn.commit()
    with Catalog(path) as migrated:
        assert migrated.schema_version == catalog_sql.SCHEMA_VERSION
        assert migrated._conn.execute(f"SELECT {columns} FROM received_events").fetchall() == [row]
        again = catalog_intake(migrated, resolver)
        assert [o.status for o in again.take([first, second, second])] == ["duplicate", "accepted", "duplicate"]
        assert migrated.count_received()["received_events"] == 2


def test_an_event_crosses_to_the_writer_process_whole(intake: Intake) -> None:
    event = ol_run_event(outputs=[ol_dataset("s3://b", "k", schema={"fields": [{"name": "id", "type": "INT"}]})])
    prepared = intake.prepare(event)
    assert not isinstance(prepared, Outcome)
    again = pickle.loads(pickle.dumps(prepared))
    assert again == prepared and hash(again) == hash(prepared)
    assert (again.time_text, again.source, again.rank, again.state_rank) == (
        prepared.time_text,
        prepared.source,
        prepared.rank,
        prepared.state_rank,
    )
    assert again.datasets[0].columns[0].type == "INT"


def test_the_same_dataset_read_as_input_and_as_output_keeps_its_direction(intake: Intake) -> None:
    dataset = ol_dataset("s3://b", "k", documentation={"description": "d"})
    read = intake.prepare(ol_run_event(inputs=[dataset]))
    written = intake.prepare(ol_run_event(outputs=[copy.deepcopy(dataset)]))
    assert not isinstance(read, Outcome) and not isinstance(written, Outcome)
    assert [d.direction for d in read.datasets] == ["input"]
    assert [d.direction for d in written.datasets] == ["output"]
    assert read.datasets[0].description == written.datasets[0].description == "d"


def test_a_placeholder_s_sightings_are_compared_in_the_catalog_s_one_time_form() -> None:
    """A placeholder's sightings are moved from its row as stored (PostgreSQL) by comparing times as
    text, in the one form the catalog writes them in (which sorts as the time does); a time in any
    other form is put in it first."""
    from bridge.catalog.external_rows import canonical_time
    from bridge.errors import ValidationError

    assert canonical_time("2026-01-31T12:00:00.000000Z", "first_seen") == "2026-01-31T12:00:00.000000Z"
    assert canonical_time("2026-01-31T12:00:00Z", "first_seen") == "2026-01-31T12:00:00.000000Z"
    assert canonical_time("2026-01-31T13:00:00.5+01:00", "first_seen") == "2026-01-31T12:00:00.500000Z"
    with pytest.raises(ValidationError, match="not an ISO 8601 time"):
        canonical_time("yesterday", "first_seen")


def _keyed_as_it_came(cur: Any, lower: str, given: str) -> None:
    """A run's row, events and facets under ``given``, as a catalog of version 33 kept a runId:
    as it came."""
    for table, column in (("external_sources", "source"), ("received_events", "source")):
        cur.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (given, lower))
    cur.execute("UPDATE external_facets SET owner = ? WHERE owner = ?", (given, lower))


def _stamped_33(catalog: Catalog, cur: Any) -> None:
    undo_kept_writers_gone(cur.execute)  # migration 0038's
    undo_alerts_told(cur.execute)  # migration 0037's
    undo_health_purged(cur.execute)  # migration 0035's
    cur.execute("UPDATE alembic_version SET version_num = '0033'")
    catalog.db.engine.stamp(cur, 33)


def _migrate_from_33(target: str) -> None:
    code, out, err = invoke(target, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 33, err


def test_a_catalogs_runs_received_in_capitals_before_are_moved_to_lower_case(
    catalog_target: str, resolver: Resolver, converter: Converter
) -> None:
    """A run received before its id was kept in lower case: migration 0034 moves its keys (its
    row, events and facets), so that its end, in either case, is the same run, found by either."""
    run_id = "0194A1B2-0000-7000-8000-00000000ABCD"
    started = ol_run_event("START", run_id=run_id, inputs=[RAW])
    started["run"]["facets"] = {"custom": {"_producer": PRODUCER, "_schemaURL": "https://x.test/S", "n": 1}}
    with Catalog(catalog_target) as catalog:
        assert catalog_intake(catalog, resolver).take([started])[0].ok
        lower, upper = f"run:{run_id.lower()}", f"run:{run_id}"
        with catalog.transaction() as cur:  # as a catalog of version 33 kept it: the id as it came
            _keyed_as_it_came(cur, lower, upper)
            _stamped_33(catalog, cur)
    _migrate_from_33(catalog_target)
    with Catalog(catalog_target) as catalog:
        conn = catalog._conn
        assert conn.execute("SELECT source FROM external_sources").fetchall() == [(lower,)]
        assert conn.execute("SELECT DISTINCT source FROM received_events").fetchall() == [(lower,)]
        assert conn.execute("SELECT owner FROM external_facets WHERE owner LIKE 'run:%'").fetchall() == [(lower,)]
        ended = ol_run_event("COMPLETE", run_id=run_id, outputs=[TABLE], time="2025-03-01T09:00:00Z")
        assert catalog_intake(catalog, resolver).take([ended])[0].ok
        (source,) = catalog.external_sources()
        assert source.state == "COMPLETE"
        found = Runs(catalog, converter).get(run_id)
        assert found is not None and found.state == "COMPLETE" and "custom" in found.run_facets


@pytest.mark.both_engines
def test_a_run_received_under_two_spellings_before_stays_split_through_migration_0034(
    catalog_target: str, resolver: Resolver, converter: Converter
) -> None:
    """A run received before in two cases, neither lower case, was two runs: migration 0034 moves
    neither (both would take the same key: the upgrade failed, and every command with it), nor
    the facets a run gone left (under two spellings, or under another spelling of a live run's
    id, whose facet of the same name moves with it); a run of one spelling still moves. Each of
    the two is found by its id as `runs list` shows it, with its own facets and events (`runs
    show` found none, or the other's)."""
    first, second, alone = (
        "0194A1B2-0000-7000-8000-0000000000CC",
        "0194a1B2-0000-7000-8000-0000000000Cc",
        "0194A1B2-0000-7000-8000-0000000000DD",
    )
    facet = {"custom": {"_producer": PRODUCER, "_schemaURL": "https://x.test/S", "n": 1}}
    events = [
        ol_run_event("START", run_id=run_id, inputs=[RAW])
        for run_id in (first, "0194a1b2-0000-7000-8000-0000000000ee", alone)
    ]
    for event in events:
        event["run"]["facets"] = facet
    with Catalog(catalog_target) as catalog:
        assert all(result.ok for result in catalog_intake(catalog, resolver).take(events))
        with catalog.transaction() as cur:  # as a catalog of version 33 kept them: each id as it came
            for was, now in (("0000000000cc", first), ("0000000000ee", second), ("0000000000dd", alone)):
                _keyed_as_it_came(cur, f"run:0194a1b2-0000-7000-8000-{was}", f"run:{now}")
            gone_runs = (  # two spellings of a run gone, and another spelling of the one alone
                "0194A1B2-0000-7000-8000-0000000000FF",
                "0194a1b2-0000-7000-8000-0000000000Ff",
                "0194a1b2-0000-7000-8000-0000000000Dd",
            )
            for gone in gone_runs:
                cur.execute(
                    "INSERT INTO external_facets (owner, facet_key, facet_rank, facet) "
                    "VALUES (?, 'custom', NULL, '{}')",
                    (f"run:{gone}",),
                )
            _stamped_33(catalog, cur)
    _migrate_from_33(catalog_target)
    with Catalog(catalog_target) as catalog:
        conn = catalog._conn
        sources = {row[0] for row in conn.execute("SELECT source FROM external_sources")}
        assert sources == {f"run:{first}", f"run:{second}", f"run:{alone.lower()}"}
        owners = {row[0] for row in conn.execute("SELECT owner FROM external_facets WHERE owner LIKE 'run:%'")}
        assert owners == sources | {f"run:{gone}" for gone in gone_runs}  # the run alone's facet moved
        runs = Runs(catalog, converter)
        for run_id in (first, second):
            found = runs.get(run_id)
            assert found is not None and found.source == f"run:{run_id}" and "custom" in found.run_facets, found
            assert [event.event_type for event in raw_events(catalog, run_id)] == ["START"]


def test_a_migration_the_server_refuses_is_an_error_not_a_traceback(postgres_url: str) -> None:
    """An upgrade whose statement PostgreSQL refuses (here a column gone that 0034 moves) is one
    line, ``Error: catalog ...: it is damaged ... (<the server's word>)``, as on SQLite."""
    with Catalog(postgres_url) as catalog, catalog.transaction() as cur:
        cur.execute("ALTER TABLE outbox RENAME COLUMN run_key TO gone")
        _stamped_33(catalog, cur)
    code, out, err = invoke(postgres_url, "migrate")
    assert (code, out) == (1, "") and "Traceback" not in err, err
    said = "it is damaged: a column of the catalog is missing"
    assert err.startswith("Error: catalog ") and said in err and 'column "run_key" does not exist' in err, err
    assert len(err.strip().splitlines()) == 1, err
