"""The dbt adapter, against real dbt (dbt-duckdb) and the real openlineage-dbt (``dbt-ol``)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.adapters.dbt import ingest_dbt
from bridge.adapters.dbt.ingest import connection_metadata
from bridge.catalog import Catalog
from bridge.delivery.history import iter_events
from bridge.demo import example_project
from bridge.errors import ArtifactError, ValidationError
from bridge.mapping import Resolver
from bridge.model import format_time, parse_time
from bridge.model.health import FreshnessRule
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from tests.conftest import at
from tests.helpers import invoke
from tests.marquez_columns import column_lineage_problems

PROJECT = Path(__file__).parent / "dbt_project"
BIN = Path(sys.executable).parent
NAMESPACE = "duckdb://warehouse.duckdb"
EPHEMERAL = (NAMESPACE, "warehouse.main.stg_orders")
SEED = (NAMESPACE, "warehouse.main.countries")
ColumnEdge = tuple[str, str, str, str, str, str]  # output namespace, name, field; input namespace, name, field
# the column edges dbt-ol gets wrong, each with the reason (also listed in docs/column-lineage.md)
DBT_OL_WRONG: dict[ColumnEdge, str] = {
    (
        NAMESPACE,
        "warehouse.main.customer_orders",
        "total_cents",
        NAMESPACE,
        "warehouse.main.orders_enriched",
        "total",
    ): (
        "dialect: DuckDB lets a SELECT use a column alias it made (total = sum(amount)); orders_enriched has no "
        "column total"
    ),
}


def column_edges(events: list[dict[str, Any]]) -> set[ColumnEdge]:
    """The field edges of the columnLineage facets of the events' outputs."""
    return {
        (o["namespace"], o["name"], column, i["namespace"], i["name"], i["field"])
        for e in events
        for o in e.get("outputs") or []
        for column, entry in ((o.get("facets") or {}).get("columnLineage") or {}).get("fields", {}).items()
        for i in entry["inputFields"]
    }


def facet_of(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    complete = [e for e in events if e.get("eventType") == "COMPLETE"]
    return next(o["facets"]["columnLineage"] for e in complete for o in e["outputs"] if o["name"] == name)


def relations(events: list[dict[str, Any]], key: str) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for e in events for d in e.get(key) or []}


@pytest.mark.dbt
def test_olbridge_names_every_relation_as_dbt_ol_does(
    dbt_ol: tuple[Path, list[dict[str, Any]]], official: Callable[[Any], list[str]]
) -> None:
    project, theirs = dbt_ol
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, namespace="analytics")
        assert len(summary.results) == 9  # 7 models (the ephemeral one is no relation), 1 seed, 1 snapshot
        ours = list(iter_events(catalog, Converter(Resolver.load())))
        for event in ours:
            assert official(event) == []
            assert validate_event(event) == []
        their_all = relations(theirs, "inputs") | relations(theirs, "outputs")
        our_all = relations(ours, "inputs") | relations(ours, "outputs")
        # every relation dbt-ol names, olbridge names the same way; the ephemeral model is no relation
        assert their_all - {EPHEMERAL} <= our_all
        assert EPHEMERAL in their_all
        assert EPHEMERAL not in our_all
        # every output dbt-ol reports is an output of olbridge's, with the same (namespace, name)
        assert relations(theirs, "outputs") <= relations(ours, "outputs")
        # seeds are inputs (dbt-ol leaves them out)
        assert SEED in relations(ours, "inputs")
        assert SEED not in relations(theirs, "inputs")
        by_job = {e["job"]["name"]: e for e in ours if e.get("eventType") == "COMPLETE"}
        enriched = by_job["olbridge_test.model.orders_enriched"]
        assert {(d["namespace"], d["name"]) for d in enriched["inputs"]} == {
            (NAMESPACE, "warehouse.main.stg_customers"),
            (NAMESPACE, "warehouse.raw.orders"),  # the ephemeral stg_orders, resolved to its parent
            SEED,
        }
        asset = catalog.asset("warehouse.main.orders_enriched")
        assert (asset.metadata["dbtTestStatus"], asset.metadata["dbtTestsFailed"]) == ("warn", 1)
        assert asset.metadata["dbtTestsTotal"] == 3
        assert catalog.asset("warehouse.main.stg_customers").metadata["dbtTestStatus"] == "pass"
        assert catalog.asset("warehouse.raw.customers").origin.value == "external"
        assert catalog.asset("warehouse.main.dim_customers").metadata["name"] == "dim_customers"
        assert catalog.get_asset("warehouse.main_marts.revenue_by_country") is not None
        assertions = enriched["outputs"][0]["facets"]["dataQualityAssertions"]["assertions"]
        assert {a["assertion"]: a["success"] for a in assertions} == {
            "accepted_values": False,
            "assert_no_negative_amounts": True,
            "unique": True,
        }
        # ingesting the same artifacts again changes nothing
        again = ingest_dbt(catalog, project, namespace="analytics")
        assert {r.status for r in again.results} == {"unchanged"}


@pytest.mark.dbt
def test_every_column_edge_dbt_ol_gets_right_is_in_olbridges_export(
    dbt_ol: tuple[Path, list[dict[str, Any]]], official: Callable[[Any], list[str]]
) -> None:
    project, theirs = dbt_ol
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, namespace="analytics")
        assert summary.to_json()["catalogJson"] is True
        assert summary.column_notes == ()
        ours = list(iter_events(catalog, Converter(Resolver.load())))
    for event in ours:
        assert official(event) == []
        assert validate_event(event) == []
        assert column_lineage_problems(event) == [], event["job"]["name"]
    their_edges, our_edges = column_edges(theirs), column_edges(ours)
    assert their_edges, "dbt-ol emitted no column lineage"
    # every edge dbt-ol emits is olbridge's too, with the same (namespace, name, field) on both ends,
    # except those it gets wrong
    assert their_edges - our_edges == set(DBT_OL_WRONG)
    # and where dbt-ol has none: SELECT * (expanded with catalog.json) and DuckDB's struct literal
    for edge in [
        (
            NAMESPACE,
            "warehouse.main.customers_all",
            "country_code",
            NAMESPACE,
            "warehouse.main.stg_customers",
            "country_code",
        ),
        (
            NAMESPACE,
            "warehouse.main.customer_orders",
            "profile",
            NAMESPACE,
            "warehouse.main.orders_enriched",
            "country_name",
        ),
        (
            NAMESPACE,
            "warehouse.main.customer_orders",
            "total_cents",
            NAMESPACE,
            "warehouse.main.orders_enriched",
            "amount",
        ),
    ]:
        assert edge in our_edges and edge not in their_edges, edge
    # Marquez drops most of dbt-ol's: outputs without schema facets, inputs that are not inputs of the run
    assert sum(len(column_lineage_problems(e)) for e in theirs) > 0


@pytest.mark.dbt
def test_column_lineage_has_the_transformations_and_resolves_ephemeral_models(
    dbt_ol: tuple[Path, list[dict[str, Any]]],
) -> None:
    project, _theirs = dbt_ol
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project, namespace="analytics")
        ours = list(iter_events(catalog, Converter(Resolver.load())))
        orders = facet_of(ours, "warehouse.main.customer_orders")

        def inputs(facet: dict[str, Any], column: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
            return {
                (i["name"], i["field"]): [(t["type"], t.get("subtype")) for t in i.get("transformations", [])]
                for i in facet["fields"][column]["inputFields"]
            }

        source = "warehouse.main.orders_enriched"
        assert inputs(orders, "customer_id") == {(source, "customer_id"): [("DIRECT", "IDENTITY")]}
        assert inputs(orders, "total") == {(source, "amount"): [("DIRECT", "AGGREGATION")]}
        assert inputs(orders, "returns") == {(source, "status"): [("INDIRECT", "FILTER")]}
        assert inputs(orders, "amounts") == {
            (source, "amount"): [("DIRECT", "AGGREGATION")],
            (source, "order_date"): [("INDIRECT", "SORT")],
        }
        assert orders["fields"]["total"]["transformationType"] == "AGGREGATION"
        assert orders["fields"]["customer_id"]["transformationType"] == "IDENTITY"
        assert {(i["field"], i["transformations"][0]["subtype"]) for i in orders["dataset"]} == {
            ("customer_id", "GROUP_BY"),
            ("customer_name", "GROUP_BY"),
            ("country_name", "GROUP_BY"),
        }
        # the ephemeral stg_orders is a CTE of the compiled SQL: its columns come from raw.orders
        enriched = facet_of(ours, "warehouse.main.orders_enriched")
        assert inputs(enriched, "amount") == {("warehouse.raw.orders", "amount"): [("DIRECT", "IDENTITY")]}
        assert {(i["name"], i["field"]) for i in enriched["dataset"]} == {
            ("warehouse.raw.orders", "customer_id"),
            ("warehouse.main.stg_customers", "customer_id"),
            ("warehouse.main.stg_customers", "country_code"),
            ("warehouse.main.countries", "country_code"),
        }
        # catalog.json's columns and types, on inputs and outputs
        assert [(c.name, c.type) for c in catalog.asset("warehouse.raw.orders").columns][:2] == [
            ("order_id", "INTEGER"),
            ("customer_id", "INTEGER"),
        ]
        snapshot = catalog.asset("warehouse.main.customers_snapshot")
        assert [c.name for c in snapshot.columns][-1] == "dbt_valid_to"


@pytest.mark.dbt
def test_without_catalog_json_columns_come_from_the_sql(
    dbt_ol: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(dbt_ol[0], project)
    (project / "target" / "catalog.json").unlink()
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, namespace="analytics")
        assert summary.to_json()["catalogJson"] is False
        ours = list(iter_events(catalog, Converter(Resolver.load())))
        for event in ours:
            assert validate_event(event) == []
            assert column_lineage_problems(event) == [], event["job"]["name"]
        # stg_customers lists its columns, so SELECT * from it expands without catalog.json
        star = facet_of(ours, "warehouse.main.customers_all")
        assert sorted(star["fields"]) == ["country_code", "customer_id", "customer_name", "updated_at"]
        assert [c.name for c in catalog.asset("warehouse.main.customer_orders").columns] == [
            "customer_id",
            "profile",
            "total",
            "total_cents",
            "amounts",
            "returns",
        ]
        # the snapshot's SELECT * reads a source whose columns only catalog.json knows: noted, not guessed
        assert any("customers_snapshot" in note for note in summary.column_notes)


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "example"
    shutil.copytree(example_project(), target)
    return target


def test_the_bundled_example_ingests(tmp_path: Path) -> None:
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, copy_example(tmp_path))
        ids = [a.id for a in catalog.list_assets()]
        assert ids == ["dbt.main.my_first_dbt_model", "dbt.main.my_second_dbt_model"]


def test_the_profile_is_rendered_as_dbt_renders_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dbt (and openlineage-dbt, whose names the datasets must meet) render a profile's values as
    Jinja: a filter after env_var, a target chosen by one; each dataset is named from the values
    rendered, never from the template's text."""
    project = copy_example(tmp_path)
    (project / "profiles.yml").write_text(
        "my_dbt_project:\n"
        "  target: \"{{ env_var('DBT_TARGET', 'prod') }}\"\n"
        "  outputs:\n"
        "    prod:\n"
        "      type: duckdb\n"
        "      path: \"{{ env_var('WAREHOUSE_PATH', 'dbt.duckdb') | trim }}\"\n"
        "      schema: main\n"
        "      threads: \"{{ env_var('DBT_THREADS', '4') | as_number }}\"\n"
    )
    monkeypatch.delenv("DBT_TARGET", raising=False)
    monkeypatch.setenv("WAREHOUSE_PATH", " dbt.duckdb \n")
    monkeypatch.delenv("DBT_THREADS", raising=False)
    resolver = Resolver.load()
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project, profiles_dir=project)
        asset = catalog.get_asset("dbt.main.my_first_dbt_model")
        assert asset is not None and asset.metadata["path"] == "dbt.duckdb", asset.metadata
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        assert named.namespace == "duckdb://dbt.duckdb"


@pytest.mark.parametrize(
    ("adapter", "connection", "noted"),
    [
        ("oracle", "host: ora\n      port: 1521\n      schema: main", True),
        ("vertica", "host: vt\n      port: 5433\n      schema: main", True),
        ("postgres", "host: pg\n      port: 5432\n      dbname: dbt\n      schema: main", False),
        ("spark", "method: thrift\n      host: sparkhost\n      port: 10000\n      schema: main", False),
    ],
)
def test_an_adapter_no_rule_names_is_said(tmp_path: Path, adapter: str, connection: str, noted: bool) -> None:
    """The tables of an adapter no naming rule takes (oracle, vertica) were named in the
    default namespace by their ids, silently: they join none of the datasets dbt-ol sends for the
    same tables. A note says so (in the summary's notes, which `dbt import` writes on stderr); none for
    postgres."""
    project = copy_example(tmp_path)
    edit(project, "manifest.json", lambda m: m["metadata"].update(adapter_type=adapter))
    (project / "profiles.yml").write_text(
        f"my_dbt_project:\n  target: prod\n  outputs:\n    prod:\n      type: {adapter}\n      {connection}\n"
    )
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, profiles_dir=project)
    said = [n for n in summary.notes if n.startswith("no naming rule takes the tables of the dbt adapter")]
    if not noted:
        assert said == []
        return
    assert said == [
        f"no naming rule takes the tables of the dbt adapter '{adapter}': they are named in namespace 'olbridge' by "
        "their ids (dbt.main.my_first_dbt_model is olbridge/dbt.main.my_first_dbt_model), so they will not join the "
        f"datasets dbt-ol and other integrations send for them; a [[rule]] of system '{adapter}' in a mappings file "
        "names them (docs/mappings.md)"
    ]


# the profiles of the adapters openlineage-dbt names by their connection beyond the warehouses
# named before (each as profiles.yml gives it: the keys dbt-ol reads)
ADAPTER_PROFILES = [
    ("spark", {"method": "thrift", "host": "sparkhost", "port": 10000, "schema": "main"}),
    ("spark", {"method": "thrift", "host": "sparkhost", "schema": "main"}),
    ("spark", {"method": "http", "host": "dbc-1.cloud.databricks.com", "schema": "main"}),
    ("spark", {"method": "odbc", "host": "dbc-1.cloud.databricks.com", "schema": "main"}),
    ("clickhouse", {"host": "ch", "port": 8123, "schema": "main"}),
    ("presto", {"host": "presto", "port": 8080, "schema": "main"}),
    ("watsonx_presto", {"host": "wx", "port": 8443, "schema": "main"}),
    ("dremio", {"software_host": "dremio", "port": 9047, "schema": "main"}),
    ("athena", {"region_name": "eu-west-1", "database": "awsdatacatalog", "schema": "main"}),
    ("glue", {"region": "eu-west-1", "account_id": "123456789012", "schema": "main"}),
    ("glue", {"region": "eu-west-1", "role_arn": "arn:aws:iam::123456789012:role/GlueRole", "schema": "main"}),
    ("fabric", {"server": "fab.datawarehouse.fabric.microsoft.com", "port": 1433, "schema": "main"}),
    ("fabric", {"server": "fab.datawarehouse.fabric.microsoft.com", "schema": "main"}),
]


@pytest.mark.parametrize("database", ["dbt", None])
@pytest.mark.parametrize(("adapter", "profile"), ADAPTER_PROFILES)
def test_an_adapter_s_tables_are_named_as_dbt_ol_names_them(
    tmp_path: Path, adapter: str, profile: dict[str, Any], database: str | None
) -> None:
    """The tables of a dbt project on Spark, ClickHouse, Presto, Dremio, Athena, Glue or Fabric
    were named in the default namespace by their ids, joining none of the datasets dbt-ol sends
    for them: they are named as openlineage-dbt's own code names them (its namespace from the
    profile, the name of the parts the table has: a table without a database, as on Spark, is
    schema.table), a dataset dbt-ol names is read back as the same asset, and no note is said."""
    from openlineage.common.provider.dbt.processor import Adapter, DbtArtifactProcessor

    project = copy_example(tmp_path)

    def manifest(m: dict[str, Any]) -> None:
        m["metadata"]["adapter_type"] = adapter
        for node in m["nodes"].values():
            node["database"] = database

    edit(project, "manifest.json", manifest)
    lines = "".join(f"      {key}: {value}\n" for key, value in profile.items())
    target = f"my_dbt_project:\n  target: prod\n  outputs:\n    prod:\n      type: {adapter}\n{lines}"
    (project / "profiles.yml").write_text(target)
    dbt_ol = DbtArtifactProcessor("producer", "namespace")
    dbt_ol.adapter_type = Adapter(adapter)
    resolver = Resolver.load()
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, profiles_dir=project)
        assets = catalog.list_assets()
    assert len(assets) == 2 and not [n for n in summary.notes if n.startswith("no naming rule")], summary.notes
    for asset in assets:
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        expected = (
            dbt_ol.extract_namespace(profile),
            dbt_ol._format_dataset_name(database, "main", asset.metadata["name"]),
        )
        assert (named.namespace, named.name) == expected, asset.metadata
        assert resolver.asset_for(*expected).id == asset.id


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("host: \"{{ env_var('PG_HOST') }}\"", r"profiles\.yml: the profile reads environment variable PG_HOST, which"),
        ("port: \"{{ env_var('PG_PORT', 'x') | as_number }}\"", r"cannot render my_dbt_project\.outputs\.prod\.port"),
        ("host: \"{{ var('host') }}\"", r"cannot render my_dbt_project\.outputs\.prod\.host .*'var' is undefined"),
        ("host: \"{{ env_var('PG_HOST'\"", r"cannot render my_dbt_project\.outputs\.prod\.host"),
        (
            "port: \"{{ env_var('DBT_ENV_SECRET_PORT') | as_number }}\"",
            r"could not convert string to float: '\*\*\*\*\*'$",
        ),
    ],
)
def test_a_profile_that_cannot_be_rendered_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str, message: str
) -> None:
    project = copy_example(tmp_path)
    (project / "profiles.yml").write_text(
        f"my_dbt_project:\n  target: prod\n  outputs:\n    prod:\n      type: postgres\n      {profile}\n"
    )
    monkeypatch.delenv("PG_HOST", raising=False)
    monkeypatch.setenv("DBT_ENV_SECRET_PORT", "s3cr3t-value")
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=message):
            ingest_dbt(catalog, project, profiles_dir=project)
        assert catalog.count_assets() == 0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda p: (p / "target" / "manifest.json").write_text("{not json"),
            r"manifest\.json: not valid JSON \(line 1",
        ),
        (lambda p: (p / "target" / "run_results.json").unlink(), r"run_results\.json: file not found"),
        (
            lambda p: (p / "target" / "manifest.json").write_text('{"metadata": {"dbt_schema_version": "x"}}'),
            "not a dbt manifest",
        ),
        (lambda p: (p / "target" / "manifest.json").write_text("[]"), "expected a JSON object"),
        (lambda p: (p / "profiles.yml").unlink(), r"profiles\.yml: file not found \(--profiles-dir\)"),
        (lambda p: (p / "profiles.yml").write_text("other: {}\n"), "no profile named 'my_dbt_project'"),
        (  # on one line: the file, the line, the reason (not YAML's own lines)
            lambda p: (p / "profiles.yml").write_text("a: 1\nb: \x00\n"),
            r"profiles\.yml:2: not valid YAML: unacceptable character #x0000: special characters are not allowed$",
        ),
        (
            lambda p: (p / "profiles.yml").write_text("a: [1\n"),
            r"profiles\.yml:2: not valid YAML: expected ',' or ']', but got '<stream end>'$",
        ),
        (lambda p: (p / "dbt_project.yml").write_text("name: x\n"), "needs a 'profile'"),
    ],
)
def test_corrupt_artifacts_are_refused_and_change_nothing(
    tmp_path: Path, damage: Callable[[Path], Any], message: str
) -> None:
    project = copy_example(tmp_path)
    damage(project)
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=message):
            ingest_dbt(catalog, project, profiles_dir=project)
        assert catalog.count_assets() == 0
        assert catalog.count_task_runs() == 0


def test_an_artifact_that_cannot_be_read_is_an_artifact_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = copy_example(tmp_path)
    read = Path.read_text

    def denied(self: Path, *args: Any, **kwargs: Any) -> str:
        if self.name == "run_results.json":  # as chmod 000 would, for a user other than root
            raise PermissionError(13, "Permission denied", str(self))
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=r"run_results\.json: cannot read it: Permission denied$"):
            ingest_dbt(catalog, project, profiles_dir=project)
        assert catalog.count_task_runs() == 0


def example_catalog_json(path: Path) -> None:
    def entry(name: str, columns: list[tuple[str, str]]) -> dict[str, Any]:
        return {
            "metadata": {"type": "BASE TABLE", "database": "dbt", "schema": "main", "name": name},
            "columns": {c: {"name": c, "type": t, "index": i + 1} for i, (c, t) in enumerate(columns)},
        }

    path.write_text(
        json.dumps(
            {
                "metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/catalog/v1.json"},
                "nodes": {
                    "model.my_dbt_project.my_first_dbt_model": entry(
                        "my_first_dbt_model", [("id", "INTEGER"), ("label", "VARCHAR")]
                    ),
                    "model.my_dbt_project.my_second_dbt_model": entry(
                        "my_second_dbt_model", [("id", "INTEGER"), ("label", "VARCHAR")]
                    ),
                },
                "sources": {},
            }
        )
    )


def test_the_bundled_example_has_column_lineage_from_its_sql(tmp_path: Path) -> None:
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, copy_example(tmp_path))
        assert summary.to_json()["catalogJson"] is False
        events = list(iter_events(catalog, Converter(Resolver.load())))
        facet = facet_of(events, "dbt.main.my_second_dbt_model")
        assert {c: [(i["name"], i["field"]) for i in e["inputFields"]] for c, e in facet["fields"].items()} == {
            "id": [("dbt.main.my_first_dbt_model", "id")],
            "label": [("dbt.main.my_first_dbt_model", "label")],
        }
        assert [(i["field"], i["transformations"]) for i in facet["dataset"]] == [
            ("id", [{"type": "INDIRECT", "subtype": "FILTER"}])
        ]
        # the model's columns are the ones its SQL selects, documented or not
        assert [c.name for c in catalog.asset("dbt.main.my_second_dbt_model").columns] == ["id", "label"]
        for event in events:
            assert column_lineage_problems(event) == []


def test_without_sqlglot_or_with_unreadable_sql_the_rest_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge.adapters.dbt import columns

    project = copy_example(tmp_path)
    with Catalog(":memory:") as catalog:
        monkeypatch.setattr(columns.sql_lineage, "available", lambda: False)
        summary = ingest_dbt(catalog, project)
        assert summary.column_notes == (
            "column lineage needs sqlglot, which is not installed (pip install 'sqlglot>=30.31,<31'); none was derived",
        )
        assert len(summary.results) == 2 and summary.to_json()["columnEdges"] == 0
    monkeypatch.undo()
    path = project / "target" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["nodes"]["model.my_dbt_project.my_second_dbt_model"]["compiled_code"] = "select from where ("
    path.write_text(json.dumps(manifest))
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project)
        assert len(summary.results) == 2
        (note,) = summary.column_notes
        assert note.startswith("model.my_dbt_project.my_second_dbt_model: its SQL could not be read as duckdb: ")
        assert catalog.column_edges() == []
    # SQL that reads, one of whose columns cannot be traced (an input's columns known only as far as
    # its documentation goes: no catalog.json) is said so, not "could not be read"
    manifest["nodes"]["model.my_dbt_project.my_second_dbt_model"]["compiled_code"] = (
        'select a.id, a.country from "dbt"."main"."my_first_dbt_model" a'
    )
    path.write_text(json.dumps(manifest))
    with Catalog(":memory:") as catalog:
        (note,) = ingest_dbt(catalog, project).column_notes
        assert note == (
            "model.my_dbt_project.my_second_dbt_model: a column of its SQL could not be traced to its inputs "
            "(Unknown column: country): its column lineage is left out; catalog.json gives its inputs' columns "
            "(dbt docs generate, --catalog-json)"
        )


def test_an_incremental_model_reading_itself_is_left_out_of_its_own_lineage(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    path = project / "target" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["nodes"]["model.my_dbt_project.my_second_dbt_model"]["compiled_code"] = (
        'select id, label from "dbt"."main"."my_first_dbt_model" '
        'where id > (select max(id) from "dbt"."main"."my_second_dbt_model")'
    )
    path.write_text(json.dumps(manifest))
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project)
        edges = {(e.edge.downstream_column, e.edge.upstream_id, e.edge.upstream_column) for e in catalog.column_edges()}
    first = "dbt.main.my_first_dbt_model"
    assert edges == {("id", first, "id"), ("label", first, "label"), (None, first, "id")}


def test_catalog_json_gives_columns_and_types_from_where_it_is_given(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    example_catalog_json(tmp_path / "elsewhere.json")
    db = tmp_path / "c.db"
    from bridge.cli import cli

    result = CliRunner().invoke(
        cli,
        [
            "--catalog",
            str(db),
            "dbt",
            "import",
            "--project-dir",
            str(project),
            "--catalog-json",
            str(tmp_path / "elsewhere.json"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["catalogJson"] is True
    with Catalog(db) as catalog:
        columns = catalog.asset("dbt.main.my_second_dbt_model").columns
        assert [(c.name, c.type, c.description) for c in columns] == [
            ("id", "INTEGER", "The primary key for this table"),
            ("label", "VARCHAR", None),
        ]
    (tmp_path / "elsewhere.json").write_text('{"metadata": {"dbt_schema_version": "x"}}')
    result = CliRunner().invoke(
        cli,
        [
            "--catalog",
            str(db),
            "dbt",
            "import",
            "--project-dir",
            str(project),
            "--catalog-json",
            str(tmp_path / "elsewhere.json"),
        ],
    )
    assert (
        result.exit_code == 1
        and "elsewhere.json: metadata.dbt_schema_version 'x' is not a dbt catalog" in result.stderr
    )
    result = CliRunner().invoke(
        cli,
        [
            "--catalog",
            str(db),
            "dbt",
            "import",
            "--project-dir",
            str(project),
            "--catalog-json",
            str(tmp_path / "no.json"),
        ],
    )
    assert result.exit_code == 1 and "no.json: file not found" in result.stderr


@pytest.mark.parametrize(
    ("which", "command"), [("generate", "docs generate"), ("show", "show"), ("run-operation", "run-operation")]
)
def test_run_results_of_a_command_that_runs_no_model_are_refused(tmp_path: Path, which: str, command: str) -> None:
    """`dbt show` says success of the model it previewed (it was recorded as a run that wrote it,
    which wrote nothing); `dbt run-operation`'s results were refused as another manifest's."""
    project = copy_example(tmp_path)
    path = project / "target" / "run_results.json"
    results = json.loads(path.read_text())
    results["args"]["which"] = which
    path.write_text(json.dumps(results))
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=rf"run_results\.json: written by `dbt {command}`, which runs no model"):
            ingest_dbt(catalog, project)
        assert catalog.count_task_runs() == 0


def test_a_manifest_rewritten_after_the_build_without_its_sql_is_refused(tmp_path: Path) -> None:
    """`dbt source freshness` (and ls, parse) after the build rewrites manifest.json without the
    compiled SQL: the build's runs were recorded without their column lineage, for good, without
    a word. Refused, naming both invocations; a manifest of another invocation with the SQL (`dbt
    compile` after the build) is read as before."""
    project = copy_example(tmp_path)
    with Catalog(":memory:") as catalog:
        expected = ingest_dbt(catalog, project).column_edges
    assert expected > 0
    edit(project, "manifest.json", lambda m: m["metadata"].update(invocation_id="another-one"))
    with Catalog(":memory:") as catalog:
        assert ingest_dbt(catalog, project).column_edges == expected  # compiled SQL there: as before
    edit(project, "manifest.json", lambda m: [n.pop("compiled_code", None) for n in m["nodes"].values()])
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=r"manifest\.json: written by another dbt command \(invocation "):
            ingest_dbt(catalog, project)
        assert catalog.count_task_runs() == 0


def test_a_result_with_an_unknown_status_is_refused(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    path = project / "target" / "run_results.json"
    results = json.loads(path.read_text())
    for result in results["results"]:
        if result["unique_id"].startswith("model."):
            result["status"] = "exploded"
    path.write_text(json.dumps(results))
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match="unknown status 'exploded'"):
            ingest_dbt(catalog, project)
        assert catalog.count_assets() == 0


FIRST, SECOND = "model.my_dbt_project.my_first_dbt_model", "model.my_dbt_project.my_second_dbt_model"
UNIQUE_TEST = "test.my_dbt_project.unique_my_first_dbt_model_id.16e066b321"
NOT_NULL_TEST = "test.my_dbt_project.not_null_my_first_dbt_model_id.5fb22c2710"


def edit(project: Path, name: str, change: Callable[[dict[str, Any]], Any]) -> None:
    path = project / "target" / name
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def result_of(results: dict[str, Any], unique_id: str) -> dict[str, Any]:
    return next(r for r in results["results"] if r["unique_id"] == unique_id)


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("manifest.json", lambda m: m["nodes"][SECOND].update(depends_on=["x"]), r"depends_on' must be a dict"),
        (
            "manifest.json",
            lambda m: m["nodes"][SECOND]["depends_on"].update(nodes=[{}]),
            r"depends_on\.nodes' must be a list of unique ids",
        ),
        ("manifest.json", lambda m: m["nodes"][FIRST].update(schema=5), r"\.schema' must be a str or null, found int"),
        ("manifest.json", lambda m: m["nodes"][FIRST].update(alias=["a"]), r"\.alias' must be a str or null"),
        ("manifest.json", lambda m: m["nodes"][UNIQUE_TEST].update(attached_node=[FIRST]), r"attached_node"),
        ("manifest.json", lambda m: m["nodes"][UNIQUE_TEST].update(test_metadata=[]), r"test_metadata' must be a dict"),
        (
            "manifest.json",
            lambda m: m["nodes"][FIRST].update(columns={"a": {"name": "a", "data_type": 5}}),
            r"columns\['a'\]\.data_type' must be a str",
        ),
        ("run_results.json", lambda r: r.update(args=["x"]), r"run_results\.args' must be a dict"),
        ("run_results.json", lambda r: result_of(r, FIRST).update(timing={"a": 1}), r"timing' must be a list"),
        ("run_results.json", lambda r: result_of(r, FIRST).update(timing=["execute"]), r"timing\[0\] must be an"),
        ("run_results.json", lambda r: result_of(r, FIRST).update(message={"x": 1}), r"message' must be a str"),
        (  # said where it is, once (it was said at a result without timing, whose time it is, twice over)
            "run_results.json",
            lambda r: r["metadata"].update(generated_at="yesterday"),
            r"^[^:]*run_results\.json: metadata\.generated_at: not an ISO 8601 time: 'yesterday'",
        ),
        (
            "run_results.json",
            lambda r: result_of(r, FIRST).update(timing=[{"name": "execute", "started_at": "soon"}]),
            r"^[^:]*run_results\.json: results\[0\]: not an ISO 8601 time: 'soon'",
        ),
        (
            "run_results.json",
            lambda r: r["results"].append(dict(result_of(r, FIRST))),
            r"results\[6\] is a second result of model\.my_dbt_project\.my_first_dbt_model \(results\[0\]\)",
        ),
        (
            "run_results.json",
            lambda r: r["results"].append({"unique_id": "weird", "status": "success"}),
            "",  # a result of no node is counted, not recorded
        ),
    ],
)
def test_artifacts_of_a_shape_dbt_never_writes_are_refused_naming_the_field(
    tmp_path: Path, name: str, change: Callable[[dict[str, Any]], Any], message: str
) -> None:
    project = copy_example(tmp_path)
    edit(project, name, change)
    with Catalog(":memory:") as catalog:
        if not message:
            assert ingest_dbt(catalog, project).skipped == 5  # four tests and the odd one
            return
        with pytest.raises(ArtifactError, match=message if message.startswith("^") else f"{name}: .*{message}"):
            ingest_dbt(catalog, project)
        assert catalog.count_assets() == 0 and catalog.count_task_runs() == 0


def test_a_node_named_without_dots_that_has_a_result_is_refused(tmp_path: Path) -> None:
    project = copy_example(tmp_path)

    def rename(document: dict[str, Any]) -> None:
        if "nodes" in document:
            document["nodes"]["weird"] = {**document["nodes"].pop(SECOND), "unique_id": "weird"}
        else:
            result_of(document, SECOND)["unique_id"] = "weird"

    edit(project, "manifest.json", rename)
    edit(project, "run_results.json", rename)
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=r"run_results\.json: results\[3\]: 'weird' is no unique id of dbt's"):
            ingest_dbt(catalog, project)
        assert catalog.count_task_runs() == 0


def test_test_results_count_as_dbt_reports_them(tmp_path: Path) -> None:
    """A test that hit its warn_if is a warning (dbt's "warn"), whatever its configured severity;
    a skipped one says nothing; a microbatch model's "partial success" is a run that warned."""
    project = copy_example(tmp_path)

    def results(document: dict[str, Any]) -> None:
        result_of(document, UNIQUE_TEST)["status"] = "warn"
        result_of(document, NOT_NULL_TEST)["status"] = "skipped"
        result_of(document, SECOND)["status"] = "partial success"

    edit(project, "run_results.json", results)
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project)
        first = catalog.get_asset("dbt.main.my_first_dbt_model")
        assert first is not None
        assert [(a.name, a.success, a.severity) for a in first.assertions] == [
            ("unique_my_first_dbt_model_id", False, "warn")
        ]
        assert (first.metadata["dbtTestStatus"], first.metadata["dbtTestsFailed"]) == ("warn", 1)
        [second] = [r for r in catalog.iter_task_runs() if r.key.task_run_id.endswith("my_second_dbt_model")]
        assert second.state.value == "WARNING"


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (
            {"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}, "results": []},
            "is not a dbt sources schema",
        ),
        (
            {
                "metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/sources/v3.json"},
                "results": [{"unique_id": "source.my_dbt_project.raw.orders"}],
            },
            r"results\[0\]\.status' must be a str, found nothing",
        ),
        (
            {
                "metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/sources/v3.json"},
                "results": [{"unique_id": "source.my_dbt_project.raw.orders", "status": "stale"}],
            },
            r"results\[0\]\.status' is 'stale', not one of pass, warn, error, runtime error",
        ),
    ],
)
def test_a_sources_json_dbt_never_writes_is_refused(tmp_path: Path, sources: dict[str, Any], message: str) -> None:
    project = copy_example(tmp_path)
    (project / "target" / "sources.json").write_text(json.dumps(sources))
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=rf"sources\.json: .*{message}"):
            ingest_dbt(catalog, project)
        assert catalog.count_task_runs() == 0


SOURCE = "source.my_dbt_project.raw.orders"  # dbt.raw.orders, read by the first model, as with_source adds it
FRESHNESS = {"error_after": {"count": 1, "period": "day"}, "warn_after": {"count": 12, "period": "hour"}}


def with_source(manifest: dict[str, Any], freshness: dict[str, Any] | None) -> None:
    """The example's manifest with a source ``raw.orders`` of this freshness, read by its first model."""
    manifest["sources"][SOURCE] = {
        "unique_id": SOURCE, "name": "orders", "source_name": "raw", "schema": "raw", "database": "dbt",
        "resource_type": "source", "freshness": freshness,
    }  # fmt: skip
    manifest["nodes"][FIRST]["depends_on"]["nodes"] = [SOURCE]


def test_a_source_s_freshness_taken_out_of_the_manifest_takes_its_rule_off(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    edit(project, "manifest.json", lambda m: with_source(m, FRESHNESS))
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project)
        rule = catalog.freshness_of("dbt.raw.orders")
        assert rule is not None and rule.source == "dbt"
        edit(project, "manifest.json", lambda m: with_source(m, None))
        ingest_dbt(catalog, project)
        assert catalog.freshness_of("dbt.raw.orders") is None
        # a rule set by hand is not dbt's to take off
        catalog.set_freshness("dbt.raw.orders", FreshnessRule.create(max=timedelta(hours=2)), now=at(0))
        ingest_dbt(catalog, project)
        assert catalog.freshness_of("dbt.raw.orders") is not None


@pytest.mark.both_engines
def test_a_rule_set_by_hand_on_a_source_is_not_replaced_by_its_dbt_freshness(
    tmp_path: Path, catalog_target: str
) -> None:
    """``assets set --freshness`` on a source whose manifest gives a freshness: the next imports
    keep it (an asset's own rule wins); taken off by hand, dbt's is the source's again."""
    project = copy_example(tmp_path)
    edit(project, "manifest.json", lambda m: with_source(m, FRESHNESS))

    def imported() -> dict[str, Any]:
        code, _out, err = invoke(catalog_target, "dbt", "import", "--project-dir", str(project))
        assert code == 0 and "freshness" not in err, err
        code, out, err = invoke(catalog_target, "assets", "show", "dbt.raw.orders")
        assert code == 0, err
        rule: dict[str, Any] = json.loads(out)["freshness"]
        return rule

    assert imported() == {"max": "1d", "warn": "12h", "source": "dbt"}
    code, _out, err = invoke(catalog_target, "assets", "set", "dbt.raw.orders", "--freshness", "2h")
    assert code == 0, err
    assert imported() == {"max": "2h", "source": "asset"}
    two_days = {**FRESHNESS, "error_after": {"count": 2, "period": "day"}}
    edit(project, "manifest.json", lambda m: with_source(m, two_days))
    assert imported() == {"max": "2h", "source": "asset"}  # nor by another of dbt's
    code, _out, err = invoke(catalog_target, "assets", "set", "dbt.raw.orders", "--no-freshness")
    assert code == 0, err
    assert imported() == {"max": "2d", "warn": "1d12h", "source": "dbt"}


@pytest.mark.parametrize("minutes", [-30, 30])
def test_a_source_s_freshness_check_is_dated_when_dbt_source_freshness_made_it(tmp_path: Path, minutes: int) -> None:
    """sources.json's verdicts were dated at the build's time (run_results.json's): a freshness
    check made after the build (``dbt build && dbt source freshness``) said it was there before
    it was made. It is dated when sources.json was written; one written before the build, with
    the build (an update is never dated before the asset's last)."""
    project = copy_example(tmp_path)
    edit(project, "manifest.json", lambda m: with_source(m, FRESHNESS))
    results = json.loads((project / "target" / "run_results.json").read_text())
    built = parse_time(results["metadata"]["generated_at"], "t")
    checked = built + timedelta(minutes=minutes)
    version = "https://schemas.getdbt.com/dbt/sources/v3.json"
    sources = {
        "metadata": {"dbt_schema_version": version, "generated_at": format_time(checked)},
        "results": [{"unique_id": SOURCE, "status": "error"}],
    }
    (project / "target" / "sources.json").write_text(json.dumps(sources))
    reported = max(checked, built)
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project)
        (health,) = catalog.health(selectors=(), as_of=reported + timedelta(seconds=1), ids=["dbt.raw.orders"])
        assert health.health.value == "FAIL" and f"(dbt import at {format_time(reported)})" in health.verdict.reasons[0]
        before = catalog.health(selectors=(), as_of=reported - timedelta(seconds=1), ids=["dbt.raw.orders"])
        assert not any("source_freshness" in reason for h in before for reason in h.verdict.reasons)


@pytest.mark.parametrize("count", [1_000_000, 1_000_000_000, 10**12])
def test_a_source_s_freshness_past_a_hundred_years_is_refused_not_stored(tmp_path: Path, count: int) -> None:
    """An ``error_after`` of a million days was stored as a rule that every later read refused:
    ``olbridge health`` (and the watch, and ``assets list``) failed for every asset; of a billion,
    the import failed with a traceback (a timedelta too large). It is refused at the import,
    which records nothing."""
    project = copy_example(tmp_path)
    source = "source.my_dbt_project.raw.orders"

    def with_source(manifest: dict[str, Any]) -> None:
        manifest["sources"][source] = {
            "unique_id": source, "name": "orders", "source_name": "raw", "schema": "raw", "database": "dbt",
            "resource_type": "source", "freshness": {"error_after": {"count": count, "period": "day"}},
        }  # fmt: skip

    edit(project, "manifest.json", with_source)
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=rf"freshness.error_after: {count} days is longer than 36500d"):
            ingest_dbt(catalog, project)
        assert catalog.count_task_runs() == 0 and catalog.freshness_of("dbt.raw.orders") is None
    with pytest.raises(ValidationError, match="lag 36501d is longer"):
        FreshnessRule.create(cron="0 9 * * *", lag=timedelta(days=36501))


def test_results_and_parents_the_manifest_does_not_have_are_said(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    edit(
        project,
        "run_results.json",
        lambda r: r["results"].append({"unique_id": "model.other.ghost", "status": "success"}),
    )
    edit(project, "manifest.json", lambda m: m["nodes"][SECOND]["depends_on"]["nodes"].append("model.other.gone"))
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project)
        assert summary.notes == (
            "1 result(s) name nodes the manifest does not have (first: model.other.ghost): left out",
            f"{SECOND} depends on model.other.gone, which the manifest does not have: not an input",
        )
    # run results of another project altogether: an error, nothing recorded
    other = copy_example(tmp_path / "other")
    edit(other, "run_results.json", lambda r: [x.update(unique_id=x["unique_id"] + "_elsewhere") for x in r["results"]])
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=r"run_results\.json: none of its 6 result\(s\) names a node of"):
            ingest_dbt(catalog, other)
        assert catalog.count_task_runs() == 0
    edit(other, "run_results.json", lambda r: r["metadata"].update(invocation_id=" "))
    with Catalog(":memory:") as catalog, pytest.raises(ArtifactError, match=r"'metadata\.invocation_id' is empty"):
        ingest_dbt(catalog, other)


def test_an_exposure_s_result_is_no_node_the_manifest_lacks(tmp_path: Path) -> None:
    """A build's results name its exposures (no-op), which the manifest keeps apart (exposures): each
    build said that a result named a node the manifest does not have."""
    project = copy_example(tmp_path)
    exposure = "exposure.my_dbt_project.weekly_dashboard"
    edit(project, "manifest.json", lambda m: m.setdefault("exposures", {}).update({exposure: {"name": "weekly"}}))
    edit(project, "run_results.json", lambda r: r["results"].append({"unique_id": exposure, "status": "no-op"}))
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project)
        assert not [note for note in summary.notes if "does not have" in note], summary.notes
        assert not [run for run in catalog.iter_task_runs() if "exposure" in run.key.task_id]


def test_unit_test_results_and_a_source_no_model_reads_are_no_trouble(tmp_path: Path) -> None:
    """dbt 1.8's unit tests are results of nodes kept in the manifest's unit_tests; a source whose
    name gives no asset id (BigQuery's events_*) that no model reads stops nothing."""
    project = copy_example(tmp_path)
    unit = "unit_test.my_dbt_project.my_first_dbt_model.keeps_ids"

    def manifest(document: dict[str, Any]) -> None:
        document["unit_tests"] = {unit: {"unique_id": unit, "name": "keeps_ids", "resource_type": "unit_test"}}
        document["sources"]["source.my_dbt_project.ga.events"] = {
            "unique_id": "source.my_dbt_project.ga.events", "name": "events_*", "identifier": "events_*",
            "source_name": "ga", "schema": "analytics 1", "database": "dbt", "resource_type": "source",
        }  # fmt: skip

    edit(project, "manifest.json", manifest)
    edit(project, "run_results.json", lambda r: r["results"].append({"unique_id": unit, "status": "pass"}))
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project)
        assert summary.notes == () and summary.skipped == 5 and len(summary.results) == 2
    # a `dbt test --select test_type:unit`: its results are all unit tests, no other project's
    edit(project, "run_results.json", lambda r: r.update(results=[{"unique_id": unit, "status": "pass"}]))
    with Catalog(":memory:") as catalog:
        assert ingest_dbt(catalog, project).results == ()


@pytest.mark.parametrize(
    "account",
    ["myorg-myaccount", "myorg-myaccount.privatelink", "xy12345", "xy12345.us-east-1", "xy12345.east-us-2.azure"],
)
def test_a_snowflake_account_is_named_as_dbt_ol_names_it(account: str) -> None:
    """The dataset namespace of a Snowflake profile's account, against openlineage-dbt's own
    normalization (an org-account with a suffix, ``.privatelink``, was kept whole: another
    namespace than dbt-ol's, and the lineage did not join)."""
    from openlineage.common.provider.snowflake import fix_account_name

    assert connection_metadata("snowflake", {"account": account}) == {"account": fix_account_name(account)}
