"""A small catalog for the UI's tests: two teams' namespaces and Global assets, lineage that grew
over three moments, a hub with more neighbours than a graph draws, an external run (with a
hostile job name, column lineage and a START that never came), and hostile text in metadata."""

from __future__ import annotations

from typing import Any

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.model import Assertion, Column
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import PRODUCER, decl, ol_dataset, ol_run_event, run

HOSTILE = "<script>alert(1)</script>"
EXTERNAL_RUN = "0194a1b2-0000-7000-8000-0000000000aa"
HUB_FANOUT = 30
TOKENS = """
[team-a]
token = "secret-a"
namespaces = ["team-a*"]

[team-b]
token = "secret-b"
namespaces = ["team-b*"]
"""


def _column_facet(fields: dict[str, Any]) -> dict[str, Any]:
    url = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
    return {"_producer": PRODUCER, "_schemaURL": url, "fields": fields}


def build(path: str, resolver: Resolver) -> None:
    with Catalog(path) as catalog:
        orders = decl(
            "raw.orders",
            type="Table",
            namespace="team-a.sales",
            description=f"orders {HOSTILE}",
            metadata={"owner": HOSTILE, "tier": "gold"},
            columns=[Column("id", "int"), Column("amount", "decimal")],
        )
        mart = decl(
            "mart.orders",
            type="Table",
            namespace="team-a.sales",
            metadata={"tier": "gold"},
            assertions=[Assertion("not_null", False, column="id"), Assertion("unique", True, column="id")],
        )
        report = decl("report.daily", type="File", namespace="team-a.sales", metadata={"tier": "silver"})
        shared = decl("shared.calendar", type="Table")  # Global
        people = decl("hr.people", type="Table", namespace="team-b.hr", metadata={"tier": "gold"})
        payroll = decl("hr.payroll", type="Table", namespace="team-b.hr")
        catalog.record_task_run(
            run("load", inputs=(orders, shared), outputs=(mart,), start=at(10), namespace="team-a.sales")
        )
        catalog.record_task_run(
            run("report", inputs=(mart,), outputs=(report,), start=at(60), namespace="team-a.sales")
        )
        catalog.record_task_run(run("pay", inputs=(people,), outputs=(payroll,), start=at(20), namespace="team-b.hr"))
        hub = decl("hub.events", type="Dataset", namespace="team-a.sales")
        fans = tuple(decl(f"hub.fan.f{i:03d}", type="Table", namespace="team-a.sales") for i in range(HUB_FANOUT))
        catalog.record_task_run(run("fanout", inputs=(hub,), outputs=fans, start=at(90), namespace="team-a.sales"))
        catalog.set_asset(
            decl("raw.orders", metadata={"tier": "platinum"}, namespace="team-a.sales", type="Table"), now=at(100)
        )
        event = ol_run_event(
            "COMPLETE",
            run_id=EXTERNAL_RUN,
            job=("team-a-spark", HOSTILE),
            inputs=[ol_dataset("postgres://db:5432", "shop.public.orders", schema={"fields": [{"name": "id"}]})],
            outputs=[
                {
                    **ol_dataset("s3://bucket", "exports/orders.parquet", schema={"fields": [{"name": "id"}]}),
                }
            ],
            time="2025-01-31T14:00:00Z",
        )
        event["outputs"][0]["facets"]["columnLineage"] = _column_facet(
            {"id": {"inputFields": [{"namespace": "postgres://db:5432", "name": "shop.public.orders", "field": "id"}]}}
        )
        outcomes = catalog_intake(catalog, resolver).take([event])
        assert [o.status for o in outcomes] == ["accepted"], outcomes
