from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.catalog import Catalog
from bridge.delivery.history import iter_events, iter_lines
from bridge.mapping import Resolver
from bridge.model import Column, Statistics
from bridge.openlineage.convert import Converter, ConvertOptions, execution_run_id, task_run_id
from bridge.openlineage.run_ids import static_uuid
from bridge.openlineage.serialize import dumps
from bridge.openlineage.validate import validate_event
from tests import reference
from tests.conftest import at
from tests.helpers import decl, run

GOLDEN = Path(__file__).parent / "golden"
TEHRAN = timezone(timedelta(hours=3, minutes=30))  # times given with an offset: the id is of the instant
BEHIND = timezone(timedelta(hours=-11))


def build_catalog(catalog: Catalog) -> None:
    """A small history: a dbt-like table, a report read from it, a failed run, a killed one, a
    metadata change and a delete."""
    duck = {"system": "duckdb", "path": "w.duckdb", "database": "w", "schema": "main"}
    catalog.record_task_run(
        run(
            "load",
            inputs=(decl("w.raw.orders", metadata={**duck, "schema": "raw", "name": "orders"}),),
            outputs=(
                decl(
                    "w.main.orders",
                    type="Table",
                    description="Orders, cleaned.",
                    metadata={**duck, "name": "orders", "owner": "team:data", "tags": "pii, tier:gold"},
                    columns=(Column("id", "INTEGER", "key"), Column("amount", None, None)),
                    statistics=Statistics(row_count=10, size=2048),
                ),
            ),
        )
    )
    catalog.record_task_run(
        run(
            "report",
            inputs=(decl("w.main.orders"),),
            outputs=(decl("s3://reports/daily/orders.csv", type="File", namespace="company.data"),),
            start=at(5),
        )
    )
    catalog.record_task_run(run("broken", inputs=(decl("w.main.orders"),), state="FAILED", start=at(7), error="boom"))
    catalog.record_task_run(run("killed", state="KILLED", start=at(8)))
    catalog.record_task_run(run("running", inputs=(decl("w.main.orders"),), state="RUNNING", start=at(9)))
    catalog.set_asset(decl("w.main.orders", metadata={"owner": "team:finance"}), now=at(12))
    catalog.delete_asset("s3://reports/daily/orders.csv", now=at(13))


def export(catalog: Catalog, converter: Converter) -> str:
    return "".join(dumps(e) + "\n" for e in iter_events(catalog, converter))


def test_events_validate_against_the_official_schemas(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    build_catalog(catalog)
    events = list(iter_events(catalog, converter))
    assert events
    for event in events:
        assert official(event) == [], event
        assert validate_event(event) == []


def test_the_history_becomes_the_right_events(catalog: Catalog, converter: Converter) -> None:
    build_catalog(catalog)
    events = list(iter_events(catalog, converter))
    kinds = [(e.get("eventType") or e["schemaURL"].rsplit("/", 1)[1], e.get("job", {}).get("name")) for e in events]
    assert kinds == [
        ("START", "flow.load"),
        ("COMPLETE", "flow.load"),
        ("START", "flow.report"),
        ("COMPLETE", "flow.report"),
        ("START", "flow.broken"),
        ("FAIL", "flow.broken"),
        ("START", "flow.killed"),
        ("ABORT", "flow.killed"),
        ("START", "flow.running"),
        ("DatasetEvent", None),
        ("DatasetEvent", None),
    ]
    times = [e["eventTime"] for e in events]
    assert times == sorted(times)
    assert all(t.endswith("Z") for t in times)
    load_start, load_end = events[0], events[1]
    assert load_start["run"]["runId"] == load_end["run"]["runId"]
    assert load_start["run"]["facets"]["parent"]["job"] == {"namespace": "company.data", "name": "flow"}
    assert load_start["run"]["facets"]["parent"]["root"]["run"] == load_start["run"]["facets"]["parent"]["run"]
    out = load_end["outputs"][0]
    assert (out["namespace"], out["name"]) == ("duckdb://w.duckdb", "w.main.orders")
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 10
    # run events carry the asset as the catalog holds it now (its owner changed later)
    assert out["facets"]["ownership"]["owners"] == [{"name": "team:finance"}]
    assert [t["key"] for t in out["facets"]["tags"]["tags"]] == ["pii", "tier"]
    assert "symlinks" not in out["facets"]
    record = out["facets"]["olbridge_asset"]
    assert (record["id"], record["global"], record["origin"]) == ("w.main.orders", True, "declared")
    report = events[3]["outputs"][0]
    assert (report["namespace"], report["name"]) == ("s3://reports", "daily/orders.csv")
    assert report["facets"]["symlinks"]["identifiers"][0]["name"] == "s3://reports/daily/orders.csv"
    assert events[5]["run"]["facets"]["errorMessage"]["message"] == "boom"
    assert events[5]["outputs"] == []
    change, drop = events[-2], events[-1]
    assert change["dataset"]["facets"]["ownership"]["owners"] == [{"name": "team:finance"}]
    assert drop["dataset"]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    assert drop["schemaURL"].endswith("/DatasetEvent")


def test_a_failed_run_names_the_outputs_it_was_to_write(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    """A run that failed (or was killed) names the outputs it was to write, in its START (as
    dbt-ol names a failed model's table) and its end: Marquez makes a job's outputs of its run's
    datasets, and a failed run without them would drop the job's edges to its outputs until it
    next succeeds. The assets the catalog held when the run ended, a new one the run gave the type
    of made by it (dbt-ol names a model new to the build that failed): one deleted by then, or new
    without a type, is left out. The export path (lines) names them as the stream's (events) does."""
    catalog.record_task_run(
        run("load", outputs=(decl("w.main.orders", type="Table"), decl("w.main.gone", type="Table")))
    )
    catalog.delete_asset("w.main.gone", now=at(2))
    outputs = (decl("w.main.orders"), decl("w.main.made", type="Table"), decl("w.main.new"), decl("w.main.gone"))
    catalog.record_task_run(
        run("load", execution="e2", inputs=(decl("w.raw.x"),), outputs=outputs, state="FAILED", start=at(5))
    )
    catalog.record_task_run(run("load", execution="e3", outputs=outputs[:1], state="KILLED", start=at(9)))
    # what the catalog holds later changes nothing: the events are those the stream sent as the
    # runs ended (an asset made after a run is none of its, one deleted after it still is)
    catalog.record_task_run(run("other", outputs=(decl("w.main.new", type="Table"),), start=at(20)))
    catalog.delete_asset("w.main.orders", now=at(30))
    events = list(iter_events(catalog, converter))
    runs = [
        e
        for e in events
        if e.get("job", {}).get("name") == "flow.load" and e["run"]["runId"] != events[0]["run"]["runId"]
    ]
    assert [(e["eventType"], [d["name"] for d in e["outputs"]]) for e in runs] == [
        ("START", ["w.main.made", "w.main.orders"]),
        ("FAIL", ["w.main.made", "w.main.orders"]),
        ("START", ["w.main.orders"]),
        ("ABORT", ["w.main.orders"]),
    ]
    assert [d["name"] for d in runs[1]["inputs"]] == ["w.raw.x"]
    for event in runs:
        assert official(event) == [] and validate_event(event) == [], event
    assert [json.loads(line) for line in iter_lines(catalog, converter)] == events


def test_a_skipped_run_names_its_outputs_and_says_it_was_skipped(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    """A skipped run (dbt skips the models below a failed test) names the outputs it was to write,
    in its START and its ABORT, as a failed one does: Marquez makes a job's version, and so its
    edges, of the datasets of its latest run's events, and a skip naming none dropped the job's
    edges to its outputs until it next ran. Its ``olbridge_taskRun`` facet says SKIPPED (which a
    receiving olbridge reads: it wrote none and failed none); a killed run's says KILLED, where
    ABORT alone cannot tell the two apart."""
    outputs = (decl("w.main.orders", type="Table"),)
    catalog.record_task_run(run("load", inputs=(decl("w.raw.x"),), outputs=outputs))
    catalog.record_task_run(run("load", execution="e2", inputs=(decl("w.raw.x"),), outputs=outputs, state="SKIPPED"))
    catalog.record_task_run(run("load", execution="e3", inputs=(decl("w.raw.x"),), outputs=outputs, state="KILLED"))
    events = [e for e in iter_events(catalog, converter) if e.get("job", {}).get("name") == "flow.load"]
    by_run: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_run.setdefault(event["run"]["runId"], []).append(event)
    success, skipped, killed = by_run.values()

    def datasets(run_events: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        """What Marquez makes a job's version of: the datasets of every event of its run."""
        sides = ("inputs", "outputs")
        return {(side, d["namespace"], d["name"]) for e in run_events for side in sides for d in e[side]}

    assert [e["eventType"] for e in skipped] == ["START", "ABORT"]
    assert datasets(skipped) == datasets(killed) == datasets(success)  # the job's edges stay as they were
    assert [e["run"]["facets"]["olbridge_taskRun"]["state"] for e in [*skipped, *killed]] == ["SKIPPED"] * 2 + [
        "KILLED"
    ] * 2
    assert all("olbridge_taskRun" not in e["run"]["facets"] for e in success)
    for event in events:
        assert official(event) == [] and validate_event(event) == [], event
    assert [json.loads(line) for line in iter_lines(catalog, converter)] == list(iter_events(catalog, converter))


def test_exporting_twice_is_byte_identical(tmp_path: Path, resolver: Resolver) -> None:
    path = tmp_path / "c.db"
    with Catalog(path) as catalog:
        build_catalog(catalog)
    with Catalog(path) as catalog:
        first = export(catalog, Converter(resolver))
    with Catalog(path) as catalog:
        second = export(catalog, Converter(Resolver.load()))
    assert first == second
    assert len(first.splitlines()) == 11


def test_golden_events(catalog: Catalog, converter: Converter, golden: Callable[[Path, str], None]) -> None:
    build_catalog(catalog)
    golden(GOLDEN / "history.ndjson", export(catalog, converter))


def strip_empty(value: Any) -> Any:
    """Drop empty objects and arrays: openlineage-python's classes default ``facets`` to ``{}`` and
    ``fields`` to ``[]``, which Serde keeps and olbridge leaves out; they say nothing."""
    if isinstance(value, dict):
        out = {k: strip_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [strip_empty(v) for v in value]
    return value


def test_same_events_as_openlineage_python_classes_and_serde(catalog: Catalog, converter: Converter) -> None:
    build_catalog(catalog)
    compared = 0
    for stored in catalog.iter_task_runs():
        assets = {u.asset_id: catalog.asset(u.asset_id) for u in stored.usages}
        ours = json.loads(dumps(converter.task_run_events(stored, assets)))
        theirs = json.loads(json.dumps(reference.task_run_events(converter, stored, assets)))
        assert strip_empty(theirs) == strip_empty(ours)
        compared += len(ours)
    assert compared == 9


def test_run_ids_are_deterministic_and_time_ordered(catalog: Catalog, converter: Converter) -> None:
    build_catalog(catalog)
    ids = [e["run"]["runId"] for e in iter_events(catalog, converter) if e.get("eventType") == "START"]
    again = [
        e["run"]["runId"] for e in iter_events(catalog, Converter(Resolver.load())) if e.get("eventType") == "START"
    ]
    assert len(ids) == 5  # one START a run
    assert ids == again
    assert ids == sorted(ids)
    assert all(i[14] == "7" for i in ids)  # UUIDv7


@settings(max_examples=500, deadline=None, database=None)  # no example database: nothing written
@given(
    moment=st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from([UTC, TEHRAN, BEHIND])
    ),
    data=st.binary(max_size=80),
)
def test_run_ids_are_openlineage_pythons_static_uuids(moment: datetime, data: bytes) -> None:
    from openlineage.client.uuid import generate_static_uuid

    assert static_uuid(moment, data) == str(generate_static_uuid(moment, data))


def test_a_task_runs_ids_are_the_ones_openlineage_python_derives(catalog: Catalog) -> None:
    from openlineage.client.uuid import generate_static_uuid

    catalog.record_task_run(run())
    (stored,) = catalog.iter_task_runs()
    key = stored.key
    task_data = f"olbridge/task-run/{key.flow_namespace}/{key.flow_id}/{key.execution_id}/{key.task_run_id}"
    execution_data = f"olbridge/execution/{key.flow_namespace}/{key.flow_id}/{key.execution_id}"
    assert task_run_id(key, stored.started_at) == str(generate_static_uuid(stored.started_at, task_data.encode()))
    assert execution_run_id(key, stored.execution_started_at) == str(
        generate_static_uuid(stored.execution_started_at, execution_data.encode())
    )


def test_job_namespace_prefix_and_producer(catalog: Catalog, resolver: Resolver) -> None:
    catalog.record_task_run(run())
    converter = Converter(resolver, ConvertOptions(producer="https://example.com/p", job_namespace_prefix="kestra:"))
    event = next(iter_events(catalog, converter))
    assert event["job"]["namespace"] == "kestra:company.data"
    assert event["producer"] == "https://example.com/p"
    assert event["run"]["facets"]["parent"]["_producer"] == "https://example.com/p"


def test_serialized_export_is_the_same_as_dumps_of_the_events(catalog: Catalog, converter: Converter) -> None:
    from bridge.delivery.history import iter_lines

    build_catalog(catalog)
    lines = list(iter_lines(catalog, converter))
    assert len(lines) == 11  # five runs' START and end, a change and a delete
    assert lines == [dumps(e) for e in iter_events(catalog, Converter(Resolver.load()))]


def test_overlapping_runs_are_exported_in_event_time_order(catalog: Catalog, converter: Converter) -> None:
    catalog.record_task_run(run("long", start=at(0), end=at(10)))
    catalog.record_task_run(run("short", start=at(2), end=at(3)))
    catalog.set_asset(decl("a.b", type="Table"), now=at(5))
    order = [
        (e.get("eventType", "DatasetEvent"), e.get("job", {}).get("name")) for e in iter_events(catalog, converter)
    ]
    assert order == [
        ("START", "flow.long"),
        ("START", "flow.short"),
        ("COMPLETE", "flow.short"),
        ("DatasetEvent", None),
        ("COMPLETE", "flow.long"),
    ]
