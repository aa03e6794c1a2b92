"""Declared column lineage: checked where it is declared, stored as edges, exported as the
``columnLineage`` facet (and through the outbox and backfill, which render the same events)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from bridge.catalog import AssetQuery, Catalog
from bridge.delivery.backfill import Backfill
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.history import iter_events, iter_lines
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import HttpSender
from bridge.delivery.worker import StreamWorker
from bridge.errors import ValidationError
from bridge.model import Column, ColumnLineage, format_time, parse_column_lineage
from bridge.openlineage.convert import Converter
from bridge.openlineage.serialize import dumps
from bridge.openlineage.validate import validate_event
from bridge.task_run_api import task_run
from bridge.task_run_json import parse_task_run, parse_task_run_lines
from tests.backend import Backend
from tests.conftest import at
from tests.helpers import decl, run, table_contents
from tests.marquez_columns import column_lineage_problems
from tests.test_cli import invoke

pytestmark = pytest.mark.both_engines

LINEAGE = {
    "fields": {
        "customer": [{"id": "shop.orders", "column": "customer_id"}],
        "total": [
            {"id": "shop.orders", "column": "amount", "transformation": "AGGREGATION"},
            {
                "id": "shop.rates",
                "column": "rate",
                "transformations": [{"type": "DIRECT", "subtype": "TRANSFORMATION"}],
            },
        ],
    },
    "dataset": [{"id": "shop.orders", "column": "status", "transformation": "FILTER"}],
}


def report_run(lineage: Any = LINEAGE, *, columns: tuple[str, ...] = ("customer", "total"), **fields: Any) -> Any:
    return run(
        "report",
        inputs=(decl("shop.orders"), decl("shop.rates", columns=[Column("rate", "DOUBLE")])),
        outputs=(
            decl(
                "reports.totals",
                type="File",
                columns=[Column(c) for c in columns],
                column_lineage=parse_column_lineage(lineage) if lineage is not None else None,
            ),
        ),
        **fields,
    )


def output_facet(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o["facets"]["columnLineage"] for o in events[-1]["outputs"])


def test_declared_column_lineage_is_exported_as_a_facet_marquez_reads(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    catalog.record_task_run(report_run())
    events = list(iter_events(catalog, converter))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        assert official(event) == []
        assert validate_event(event) == []
        assert column_lineage_problems(event) == []
    facet = output_facet(events)
    assert facet["_schemaURL"].endswith("/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet")
    total = facet["fields"]["total"]
    assert [(i["name"], i["field"], i.get("transformations")) for i in total["inputFields"]] == [
        ("shop.orders", "amount", [{"type": "DIRECT", "subtype": "AGGREGATION"}]),
        ("shop.rates", "rate", [{"type": "DIRECT", "subtype": "TRANSFORMATION"}]),
    ]
    assert (total["transformationType"], total["transformationDescription"]) == ("AGGREGATION", "aggregation")
    customer = facet["fields"]["customer"]
    assert "transformations" not in customer["inputFields"][0]  # declared without: none invented
    assert "transformationType" not in customer
    assert facet["dataset"] == [
        {
            "namespace": "olbridge",
            "name": "shop.orders",
            "field": "status",
            "transformations": [{"type": "INDIRECT", "subtype": "FILTER"}],
        }
    ]
    # the inputs' schema facets list the fields the lineage names, so that Marquez keeps it
    inputs = {d["name"]: d["facets"]["schema"]["fields"] for d in events[-1]["inputs"]}
    assert inputs == {
        "shop.orders": [{"name": "amount"}, {"name": "customer_id"}, {"name": "status"}],
        "shop.rates": [{"name": "rate", "type": "DOUBLE"}],
    }
    # the serialized export is the same events, byte for byte
    assert list(iter_lines(catalog, converter)) == [dumps(e) for e in events]


def test_stream_and_backfill_carry_the_facet_out(tmp_path: Path, converter: Converter) -> None:
    """A real loopback backend receives the same columnLineage facet from the streaming worker
    and from a backfill as the export gives."""
    with Catalog(tmp_path / "c.db") as catalog:
        catalog.record_task_run(report_run())
        exported = output_facet(list(iter_events(catalog, converter)))
        with Backend() as backend:
            sender = HttpSender(backend.url, batch=False)
            stats = StreamWorker(catalog, converter, Dispatcher(sender), sleep=lambda s: None).run(once=True)
            assert stats.delivered == 2
            streamed = output_facet([e for e in backend.accepted if e["eventType"] == "COMPLETE"])
        with Backend() as backend:
            dispatcher = Dispatcher(HttpSender(backend.url, batch=False))
            Backfill(catalog, converter, dispatcher, policy=RetryPolicy(base=0.001, cap=0.01), checkpoint="c").run()
            backfilled = output_facet([e for e in backend.accepted if e["eventType"] == "COMPLETE"])
    assert streamed == backfilled == exported
    assert set(exported["fields"]) == {"customer", "total"}


@pytest.mark.parametrize(
    ("lineage", "columns", "message"),
    [
        (
            {"fields": {"total": [{"id": "shop.elsewhere", "column": "x"}]}},
            ("total",),
            r"outputs\[0\]\.columnLineage\.fields\.total\[0\]\.id: column lineage of output 'reports\.totals' names "
            r"'shop\.elsewhere', which is not an input of this task run",
        ),
        (
            {"fields": {"average": [{"id": "shop.orders", "column": "amount"}]}},
            ("total",),
            r"outputs\[0\]\.columnLineage\.fields\.average: column 'average' is not in the schema of output "
            r"'reports\.totals' \(its columns: total\)",
        ),
        (
            {"dataset": [{"id": "shop.nowhere", "column": "x"}]},
            ("total",),
            r"columnLineage\.dataset\[0\]\.id: .* 'shop\.nowhere', which is not an input",
        ),
    ],
)
def test_bad_column_lineage_is_refused_with_where_it_is(
    catalog: Catalog, lineage: dict[str, Any], columns: tuple[str, ...], message: str
) -> None:
    before = table_contents(catalog)
    with pytest.raises(ValidationError, match=message):
        catalog.record_task_run(report_run(lineage, columns=columns))
    assert table_contents(catalog) == before


def test_an_output_without_declared_columns_is_checked_against_the_stored_ones(catalog: Catalog) -> None:
    catalog.record_task_run(report_run())  # reports.totals now has columns customer, total
    later = report_run({"fields": {"total": [{"id": "shop.orders", "column": "amount"}]}}, columns=(), execution="e2")
    assert catalog.record_task_run(later).status == "created"
    before = table_contents(catalog)
    wrong = report_run({"fields": {"tax": [{"id": "shop.orders", "column": "amount"}]}}, columns=(), execution="e3")
    with pytest.raises(ValidationError, match=r"task run 'e3\.report' of execution 'e3'\.outputs\[0\]\.columnLineage"):
        catalog.record_task_run(wrong)
    assert table_contents(catalog) == before


def test_column_lineage_on_an_input_is_refused() -> None:
    lineage = parse_column_lineage({"fields": {"a": [{"id": "x", "column": "b"}]}})
    with pytest.raises(ValidationError, match=r"inputs\[0\]\.columnLineage: column lineage belongs to an output"):
        from bridge.model import check_task_run

        check_task_run(run("t", inputs=(decl("x", column_lineage=lineage),)))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"fields": {"a": []}}, "fields.a: an output column's inputs are a non-empty list"),
        ({"fields": {"a": [{"id": "x"}]}}, r"fields\.a\[0\]: an input column needs 'id' and 'column'"),
        ({"fields": {"a": [{"id": "x y", "column": "b"}]}}, r"fields\.a\[0\]\.id: a name-form id"),
        ({"fields": {"a": [{"id": "x", "column": "b", "transformation": "COPY"}]}}, "unknown transformation 'COPY'"),
        (
            {"fields": {"a": [{"id": "x", "column": "b", "transformations": [{"type": "DIRECT", "subtype": "JOIN"}]}]}},
            "a DIRECT transformation's subtype is one of IDENTITY, TRANSFORMATION, AGGREGATION, not 'JOIN'",
        ),
        ({"fields": {"a": [{"id": "x", "column": "b", "how": 1}]}}, "unknown field"),
        ({"columns": {}}, "unknown field"),
        ({}, "names at least one input column"),
    ],
)
def test_a_malformed_column_lineage_says_what_and_where(value: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_column_lineage(value)


def record_line(**output: Any) -> str:
    return json.dumps(
        {
            "namespace": "company.data",
            "flowId": "f",
            "taskId": "t",
            "executionId": "e1",
            "taskRunId": "r1",
            "state": "SUCCESS",
            "startDate": "2025-01-01T00:00:00Z",
            "endDate": "2025-01-01T00:01:00Z",
            "inputs": [{"id": "shop.orders", "columns": ["amount"]}],
            "outputs": [{"id": "reports.totals", "type": "File", **output}],
        }
    )


def test_record_file_lines_carry_columns_and_column_lineage(catalog: Catalog) -> None:
    good = record_line(
        columns=[{"name": "total", "type": "DECIMAL"}],
        columnLineage={
            "fields": {"total": [{"id": "shop.orders", "column": "amount", "transformation": "AGGREGATION"}]}
        },
    )
    bad = record_line(
        columns=["total"], columnLineage={"fields": {"total": [{"id": "shop.other", "column": "amount"}]}}
    )
    with pytest.raises(ValidationError) as refused:
        parse_task_run_lines([good, bad], "runs.jsonl")
    assert "runs.jsonl:2: outputs[0].columnLineage.fields.total[0].id: column lineage of output" in str(refused.value)
    runs = parse_task_run_lines([good], "runs.jsonl")
    catalog.record_task_runs(runs)
    assert [(c.name, c.type) for c in catalog.asset("reports.totals").columns] == [("total", "DECIMAL")]
    edges = catalog.column_edges()
    assert [(e.edge.downstream_column, e.edge.upstream_id, e.edge.upstream_column) for e in edges] == [
        ("total", "shop.orders", "amount")
    ]


def test_olbridge_record_takes_column_lineage_in_an_output(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    output = {
        "id": "reports.totals",
        "type": "File",
        "columns": ["total"],
        "columnLineage": {"fields": {"total": [{"id": "shop.orders", "column": "amount"}]}},
    }
    common = [
        "record",
        "--namespace",
        "company.data",
        "--flow-id",
        "f",
        "--task-id",
        "t",
        "--start",
        "2025-01-01T00:00:00Z",
    ]
    code, _out, err = invoke(
        db, *common, "--execution-id", "e1", "--input", "shop.orders", "--output", json.dumps(output)
    )
    assert code == 0, err
    wrong = {**output, "columnLineage": {"fields": {"total": [{"id": "shop.other", "column": "amount"}]}}}
    code, out, err = invoke(
        db, *common, "--execution-id", "e2", "--input", "shop.orders", "--output", json.dumps(wrong)
    )
    assert code == 2 and out == ""  # the --output given is refused: a usage error
    assert err.startswith("Error: --output[0].columnLineage.fields.total[0].id: column lineage of output")
    assert "Traceback" not in err


def test_the_python_api_checks_column_lineage_where_it_is_declared(catalog: Catalog, converter: Converter) -> None:
    moments = iter([at(0), at(1)])
    with task_run(catalog, "company.data", "reports", "totals", clock=lambda: next(moments)) as recorder:
        recorder.reads("shop.orders", metadata={"system": "postgres"})
        with pytest.raises(ValidationError, match=r"'shop\.rates', which is not an input of this task run"):
            recorder.writes(
                "reports.totals",
                type="File",
                columns=["total"],
                column_lineage={"fields": {"total": [{"id": "shop.rates", "column": "rate"}]}},
            )
        recorder.writes(
            "reports.totals",
            type="File",
            columns=["total"],
            column_lineage={
                "fields": {"total": [{"id": "shop.orders", "column": "amount", "transformation": "AGGREGATION"}]}
            },
        )
    events = list(iter_events(catalog, converter))
    assert output_facet(events)["fields"]["total"]["inputFields"][0]["field"] == "amount"


def test_a_failed_run_writes_no_column_edges(catalog: Catalog) -> None:
    catalog.record_task_run(report_run(state="FAILED"))
    assert catalog.column_edges() == []


def test_purge_with_lineage_removes_column_edges(catalog: Catalog) -> None:
    catalog.record_task_run(report_run())
    assert catalog.column_edges()
    catalog.purge(AssetQuery(ids=("reports.totals",)), lineage=True)
    assert catalog.column_edges() == []


def test_a_run_recorded_before_column_lineage_existed_is_unchanged_when_recorded_again(catalog: Catalog) -> None:
    """A catalog written by an earlier olbridge holds the hash of a record that had no
    column_lineage field: recording the same run again must still find it unchanged."""
    recorded = report_run(None)

    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return format_time(value)
        raise TypeError(type(value).__name__)

    record = attrs.asdict(recorded, filter=lambda a, v: not (a.name in ("tenant_id", "flow_revision") and v is None))
    for side in ("inputs", "outputs"):
        for item in record[side]:
            del item["column_lineage"]
    earlier = hashlib.sha256(json.dumps(record, sort_keys=True, default=default).encode()).hexdigest()
    catalog.record_task_run(recorded)
    catalog._conn.execute("UPDATE task_runs SET record_hash = ?", (earlier,))
    assert catalog.record_task_run(recorded).status == "unchanged"


def test_a_record_with_column_lineage_round_trips_through_parse() -> None:
    lineage_json = {"fields": {"total": [{"id": "shop.orders", "column": "amount"}]}}
    parsed = parse_task_run(json.loads(record_line(columns=["total"], columnLineage=lineage_json)))
    lineage = parsed.outputs[0].column_lineage
    assert isinstance(lineage, ColumnLineage)
    assert [(c, [i.asset_id for i in inputs]) for c, inputs in lineage.fields] == [("total", ["shop.orders"])]
