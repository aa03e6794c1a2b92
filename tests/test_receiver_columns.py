"""Column lineage that comes in: a received ``columnLineage`` facet stored edge by edge (a real
``olbridge serve`` too), taken with a warning where Marquez would skip it, and walked by
``lineage --column`` through olbridge's runs and external ones."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from bridge.adapters.dbt import ingest_dbt
from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.delivery.history import iter_events
from bridge.mapping import Resolver
from bridge.model import Column, parse_column_lineage
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake, import_files
from tests.helpers import PRODUCER, decl, ol_dataset, ol_run_event, run, table_contents
from tests.test_receiver_http import TOKEN, running_server

pytestmark = pytest.mark.both_engines

RUN = "0194a1b2-0000-7000-8000-0000000000c1"
COLUMN_URL = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"


def dataset(namespace: str, name: str, columns: list[str] | None = None, **facets: Any) -> dict[str, Any]:
    out = ol_dataset(namespace, name, **({"schema": {"fields": [{"name": c} for c in columns]}} if columns else {}))
    if facets:
        out.setdefault("facets", {}).update(
            {k: {"_producer": PRODUCER, "_schemaURL": COLUMN_URL, **v} for k, v in facets.items()}
        )
    return out


def field(namespace: str, name: str, column: str, *transformations: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": namespace, "name": name, "field": column}
    if transformations:
        out["transformations"] = list(transformations)
    return out


IDENTITY = {"type": "DIRECT", "subtype": "IDENTITY"}
JOIN = {"type": "INDIRECT", "subtype": "JOIN", "description": "o.id = c.id"}
PG = "postgres://db:5432"


def spark_event(event_type: str = "COMPLETE", **fields_override: Any) -> dict[str, Any]:
    """A Spark-like job reading two Postgres tables and writing a file, with column lineage."""
    lineage = {
        "fields": {
            "id": {"inputFields": [field(PG, "shop.public.orders", "id", IDENTITY)]},
            "label": {
                "inputFields": [field(PG, "shop.public.orders", "name"), field(PG, "shop.public.customers", "name")],
                "transformationType": "IDENTITY",
                "transformationDescription": "copied",
            },
        },
        "dataset": [field(PG, "shop.public.customers", "id", JOIN)],
        **fields_override,
    }
    return ol_run_event(
        event_type,
        run_id=RUN,
        job=("spark", "orders_export"),
        inputs=[
            dataset(PG, "shop.public.orders", ["id", "name"]),
            dataset(PG, "shop.public.customers", ["id", "name"]),
        ],
        outputs=[dataset("s3://exports", "orders.parquet", ["id", "label"], columnLineage=lineage)],
    )


def stored(catalog: Catalog) -> set[tuple[str, str | None, str, str, str]]:
    return {
        (
            e.edge.downstream_id,
            e.edge.downstream_column,
            e.edge.upstream_id,
            e.edge.upstream_column,
            json.dumps([t.to_json() for t in e.edge.transformations], sort_keys=True),
        )
        for e in catalog.column_edges(source=f"run:{RUN}")
    }


def take(catalog: Catalog, resolver: Resolver, *events: dict[str, Any]) -> list[Any]:
    return catalog_intake(catalog, resolver).take(list(events))


def test_a_received_facet_is_stored_edge_by_edge(catalog: Catalog, resolver: Resolver) -> None:
    (outcome,) = take(catalog, resolver, spark_event())
    assert (outcome.status, outcome.warnings) == ("accepted", ())
    out, orders, customers = "s3://exports/orders.parquet", "shop.public.orders", "shop.public.customers"
    copied = json.dumps([{"type": "DIRECT", "subtype": "IDENTITY", "description": "copied"}], sort_keys=True)
    assert stored(catalog) == {
        (out, "id", orders, "id", json.dumps([IDENTITY], sort_keys=True)),
        # no transformations of their own: the column's deprecated transformationType
        (out, "label", orders, "name", copied),
        (out, "label", customers, "name", copied),
        (out, None, customers, "id", json.dumps([JOIN], sort_keys=True)),
    }
    assert {a.id for a in catalog.list_assets()} == {out, orders, customers}


def test_column_lineage_marquez_would_skip_is_taken_with_a_warning(catalog: Catalog, resolver: Resolver) -> None:
    event = spark_event(
        fields={
            "id": {"inputFields": [field(PG, "shop.public.refunds", "order_id")]},  # not an input of the run
            "discount": {"inputFields": [field(PG, "shop.public.orders", "id")]},  # not in the output's schema
        }
    )
    (outcome,) = take(catalog, resolver, event)
    assert outcome.status == "accepted"
    assert set(outcome.warnings) == {
        "columnLineage of output s3://exports orders.parquet: column 'discount' is not in the output's schema facet",
        "columnLineage of output s3://exports orders.parquet: postgres://db:5432 shop.public.refunds is not an "
        "input of this event",
    }
    # nothing dropped: both edges are kept, and the dataset only the column lineage names is a placeholder
    assert {(e[1], e[2], e[3]) for e in stored(catalog)} == {
        ("id", "shop.public.refunds", "order_id"),
        ("discount", "shop.public.orders", "id"),
        (None, "shop.public.customers", "id"),
    }
    assert "shop.public.refunds" in outcome.placeholders
    assert catalog.asset("shop.public.refunds").origin.value == "external"
    kept = catalog._conn.execute("SELECT warnings FROM received_events").fetchone()[0]
    assert "not an input of this event" in kept


def test_an_input_field_the_spec_does_not_take_is_said_in_a_warning(catalog: Catalog, resolver: Resolver) -> None:
    """An input field whose `field` is no string, or whose `transformations` is no array of
    objects with a string `type`, was taken without a word (the edge left out, or its
    transformations kept as they came); validate said the event valid. Each is said, as W8 says a
    value of another type, with its place."""
    odd = [
        {"namespace": PG, "name": "shop.public.orders", "field": 5},
        {"namespace": PG, "name": "shop.public.orders", "field": "name", "transformations": "DIRECT"},
        {"namespace": PG, "name": "shop.public.customers", "field": "name", "transformations": [{"type": 5}]},
    ]
    (outcome,) = take(catalog, resolver, spark_event(fields={"label": {"inputFields": odd}}))
    at = "/outputs/0/facets/columnLineage/fields/label/inputFields"
    assert outcome.status == "accepted"
    assert {w for w in outcome.warnings if w.startswith(at)} == {
        f"{at}/0/field: must be a string, not a number",
        f"{at}/1/transformations: must be an array, not a string",
        f"{at}/2/transformations/0/type: must be a string, not a number",
    }, outcome.warnings


def test_a_column_without_a_name_is_left_out_with_a_warning(catalog: Catalog, resolver: Resolver) -> None:
    """A column named "" was kept as the whole output's dependency (where those are kept), its
    edge counted among the output's whole ones. It is left out, said."""
    (outcome,) = take(
        catalog, resolver, spark_event(fields={"": {"inputFields": [field(PG, "shop.public.orders", "id")]}})
    )
    assert outcome.status == "accepted"
    assert (
        'columnLineage of output s3://exports orders.parquet: a column without a name ("") is left out'
        in outcome.warnings
    ), outcome.warnings
    assert {(e[1], e[3]) for e in stored(catalog)} == {(None, "id")}  # the dataset's JOIN edge alone


ESCAPED = "esc\x1b[31m\n"


def test_an_input_field_of_no_dataset_marquez_takes_makes_no_dataset(catalog: Catalog, resolver: Resolver) -> None:
    """A namespace or name an input of the event could not have (R8, R9) made a placeholder when
    only the column lineage named it: its edges are left out, with a warning."""
    bad = [field("bad ns", "x", "a"), field("", "", "b"), field(ESCAPED, "y", "c"), field(PG, " ", "d")]
    event = spark_event(fields={"id": {"inputFields": [field(PG, "shop.public.orders", "id"), *bad]}})
    (outcome,) = take(catalog, resolver, event)
    assert outcome.status == "accepted"
    where = "columnLineage of output s3://exports orders.parquet"
    assert {w for w in outcome.warnings if "no dataset Marquez takes" in w} == {
        f"{where}: 'bad ns' 'x' is no dataset Marquez takes: its edges are left out",
        f"{where}: '' '' is no dataset Marquez takes: its edges are left out",
        f"{where}: {ESCAPED!r} 'y' is no dataset Marquez takes: its edges are left out",  # as its repr
        f"{where}: '{PG}' ' ' is no dataset Marquez takes: its edges are left out",
    }
    assert {(e[1], e[2]) for e in stored(catalog)} == {("id", "shop.public.orders"), (None, "shop.public.customers")}
    assert {a.id for a in catalog.list_assets()} == {
        "s3://exports/orders.parquet",
        "shop.public.orders",
        "shop.public.customers",
    }


def test_an_output_without_a_schema_facet_is_warned_about(catalog: Catalog, resolver: Resolver) -> None:
    event = spark_event()
    del event["outputs"][0]["facets"]["schema"]
    (outcome,) = take(catalog, resolver, event)
    assert outcome.warnings == (
        "columnLineage of output s3://exports orders.parquet: the output has no schema facet, so Marquez skips its "
        "column lineage",
    )
    assert len(stored(catalog)) == 4


def test_the_same_events_in_any_order_give_the_same_catalog(tmp_path: Path, resolver: Resolver) -> None:
    start = spark_event("START", fields={"id": {"inputFields": [field(PG, "shop.public.orders", "id")]}})
    complete = spark_event()
    results = []
    for order in itertools.permutations([start, complete, start]):
        with Catalog(":memory:") as catalog:
            for event in order:
                take(catalog, resolver, event)
            contents = table_contents(catalog)
            results.append((contents["column_lineage"], contents["external_datasets"], contents["assets"]))
    assert all(r == results[0] for r in results)
    assert len(results[0][0]) == 5  # START's id edge has no transformations: an edge of its own


def test_a_real_serve_stores_the_edges(tmp_path: Path) -> None:
    """Through the HTTP workers and the writer process, which the event reaches pickled."""
    db = tmp_path / "served.db"
    with running_server(db) as url:
        answer = requests.post(
            f"{url}/api/v1/lineage", json=spark_event(), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert answer.status_code == 201, answer.text
    with Catalog(db) as catalog:
        assert len(stored(catalog)) == 4


def record_totals(catalog: Catalog, fields: dict[str, Any]) -> None:
    """olbridge's run making reports.totals from shop.orders, with the column lineage ``fields``."""
    outputs = (
        decl(
            "reports.totals",
            type="File",
            columns=[Column("total")],
            column_lineage=parse_column_lineage({"fields": fields}),
        ),
    )
    catalog.record_task_run(run("totals", inputs=(decl("shop.orders", columns=[Column("amount")]),), outputs=outputs))


def own_and_external(catalog: Catalog, converter: Converter, resolver: Resolver) -> None:
    """shop.orders --(olbridge's run)--> reports.totals --(an external job)--> s3://exports/eur.csv"""
    record_totals(catalog, {"total": [{"id": "shop.orders", "column": "amount", "transformation": "AGGREGATION"}]})
    totals = converter.dataset(catalog.asset("reports.totals"))
    lineage = {
        "fields": {
            "total_eur": {
                "inputFields": [
                    field(totals["namespace"], totals["name"], "total", {"type": "DIRECT", "subtype": "TRANSFORMATION"})
                ]
            }
        }
    }
    event = ol_run_event(
        run_id=RUN,
        job=("airflow", "fx.convert"),
        inputs=[dataset(totals["namespace"], totals["name"], ["total"])],
        outputs=[dataset("s3://exports", "eur.csv", ["total_eur"], columnLineage=lineage)],
    )
    (outcome,) = take(catalog, resolver, event)
    assert outcome.warnings == ()


def test_lineage_column_walks_through_own_and_external_runs(
    tmp_path: Path, converter: Converter, resolver: Resolver
) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        own_and_external(catalog, converter, resolver)
        graph = catalog.column_lineage("s3://exports/eur.csv", "total_eur", direction="upstream")
        assert [(e.upstream, e.upstream_column, e.depth, e.tasks) for e in graph.edges] == [
            ("reports.totals", "total", 1, ("airflow/fx.convert (external)",)),
            ("shop.orders", "amount", 2, ("company.data/flow.totals",)),
        ]
        down = catalog.column_lineage("shop.orders", "amount", direction="downstream")
        assert [(e.downstream, e.downstream_column) for e in down.edges] == [
            ("reports.totals", "total"),
            ("s3://exports/eur.csv", "total_eur"),
        ]
        assert catalog.column_lineage("shop.orders", "amount", direction="downstream", depth=1).edges == down.edges[:1]

    def lineage(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--catalog", str(db), "lineage", *args])

    text = lineage("s3://exports/eur.csv", "--column", "total_eur", "--direction", "upstream")
    assert text.exit_code == 0, text.stderr
    assert text.stdout.splitlines() == [
        "s3://exports/eur.csv.total_eur",
        "  <- reports.totals.total  TRANSFORMATION  via airflow/fx.convert (external)",
        "    <- shop.orders.amount  AGGREGATION  via company.data/flow.totals",
    ]
    data = json.loads(lineage("shop.orders", "--column", "amount", "--format", "json").stdout)
    assert data["root"] == {"asset": "shop.orders", "column": "amount"}
    assert data["edges"][0] == {
        "upstream": {"asset": "shop.orders", "column": "amount"},
        "downstream": {"asset": "reports.totals", "column": "total"},
        "depth": 1,
        "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION"}],
        "tasks": ["company.data/flow.totals"],
    }
    mermaid = lineage("reports.totals", "--column", "total", "--format", "mermaid").stdout
    assert mermaid.startswith("graph LR\n") and mermaid.count("subgraph ") == 3
    assert '-->|"AGGREGATION"|' in mermaid and '-->|"TRANSFORMATION"|' in mermaid
    missing = lineage("reports.totals", "--column", "nope")
    assert missing.exit_code == 1
    assert missing.stderr == "Error: asset 'reports.totals' has no column 'nope' (its columns: total)\n"


def test_olbridges_own_events_come_back_to_the_same_column_edges(catalog: Catalog, converter: Converter) -> None:
    """Round trip: export olbridge's events, import them into another catalog."""
    own_and_external(catalog, converter, Resolver.load())
    own = {
        (e.edge.downstream_id, e.edge.downstream_column, e.edge.upstream_id, e.edge.upstream_column)
        for e in catalog.column_edges()
        if e.task_run_pk
    }
    events = list(iter_events(catalog, converter))
    with Catalog(":memory:") as other:
        outcomes = catalog_intake(other, Resolver.load()).take(events)
        assert {o.status for o in outcomes} == {"accepted"} and all(o.warnings == () for o in outcomes)
        back = {
            (e.edge.downstream_id, e.edge.downstream_column, e.edge.upstream_id, e.edge.upstream_column)
            for e in other.column_edges()
        }
    assert back == own


@pytest.mark.dbt
def test_dbt_ols_column_lineage_is_stored_edge_by_edge(
    dbt_ol: tuple[Path, list[dict[str, Any]]], tmp_path: Path, resolver: Resolver
) -> None:
    project, theirs = dbt_ol
    events = tmp_path / "dbt-ol.ndjson"
    events.write_text("\n".join(json.dumps(e) for e in theirs))
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project, namespace="analytics")
        summary = import_files([events], catalog_intake(catalog, resolver))
        assert summary.refused == [] and summary.accepted == len(theirs)
        for event in theirs:
            expected = {
                (
                    resolver.asset_for(o["namespace"], o["name"]).id,
                    column,
                    resolver.asset_for(i["namespace"], i["name"]).id,
                    i["field"],
                )
                for o in event.get("outputs") or []
                for column, entry in ((o.get("facets") or {}).get("columnLineage") or {}).get("fields", {}).items()
                for i in entry["inputFields"]
            }
            got = {
                (e.edge.downstream_id, e.edge.downstream_column, e.edge.upstream_id, e.edge.upstream_column)
                for e in catalog.column_edges(source=f"run:{event['run']['runId']}")
            }
            assert got == expected, event["job"]["name"]


def test_an_edge_from_either_side_is_stored_the_same_text_past_ascii_as_it_is(
    catalog: Catalog, converter: Converter
) -> None:
    """olbridge's own edge, and the same edge received (its events imported into another catalog),
    keep the same transformations text: canonical JSON, characters past ASCII not escaped."""
    how = {"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "montant × taux (€)"}
    record_totals(catalog, {"total": [{"id": "shop.orders", "column": "amount", "transformations": [how]}]})
    query = "SELECT transformations FROM column_lineage"
    (own,) = [text for (text,) in catalog._conn.execute(query)]
    with Catalog(":memory:") as other:
        catalog_intake(other, Resolver.load()).take(list(iter_events(catalog, converter)))
        (received,) = [text for (text,) in other._conn.execute(query)]
    assert own == received == json.dumps([how], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "× taux (€)" in own
