"""The Prefect 3 adapter: against a real Prefect server and flow (marker ``prefect``), and against
recorded answers of the events API (``responses``) for paging, resuming and bad servers."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import responses
import responses.matchers

from bridge.adapters.prefect import import_events, import_once
from bridge.adapters.prefect.client import PrefectClient, TaskRunInfo
from bridge.adapters.prefect.cursor import read_cursor
from bridge.adapters.prefect.events import asset_from_resource, parse_events, task_name
from bridge.adapters.prefect.imports import LOOKBACK
from bridge.catalog import Catalog
from bridge.delivery.history import iter_events
from bridge.errors import SourceError, ValidationError
from bridge.mapping import Resolver
from bridge.model import AssetDeclaration, TaskState, format_time, parse_time, utcnow
from bridge.openlineage.convert import Converter, execution_run_id
from bridge.openlineage.validate import validate_event
from tests.backend import free_port
from tests.conftest import T0, at
from tests.helpers import invoke, snapshot

pytestmark = pytest.mark.both_engines

BIN = Path(sys.executable).parent
API = "http://prefect.test/api"
FLOW_RUN = "dc1f969d-f3ef-41bd-b401-5708fd20cf1a"
FLOW = "69ce976a-cd91-42e7-9499-cc3a490abf21"


def prefect_tables(catalog: Catalog) -> tuple[object, ...]:
    return (*snapshot(catalog), catalog.positions())


# ---------------------------------------------------------------------------------------------
# events as the events API gives them (the shapes of a real server's answers)


def related(task_run: str, task_run_name: str, *assets: str, flow_run: str = FLOW_RUN) -> list[dict[str, str]]:
    return [
        *({"prefect.resource.id": a, "prefect.resource.role": "asset"} for a in assets),
        {"prefect.resource.id": f"prefect.flow-run.{flow_run}", "prefect.resource.role": "flow-run",
         "prefect.resource.name": "giga-groundhog"},
        {"prefect.resource.id": f"prefect.task-run.{task_run}", "prefect.resource.role": "task-run",
         "prefect.resource.name": task_run_name},
        {"prefect.resource.id": f"prefect.flow.{FLOW}", "prefect.resource.role": "flow",
         "prefect.resource.name": "orders-pipeline"},
    ]  # fmt: skip


def event(
    event_id: str,
    minutes: float,
    kind: str,
    key: str,
    task_run: str,
    *,
    name: str | None = None,
    upstream: tuple[str, ...] = (),
    payload: dict[str, Any] | None = None,
    resource: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "occurred": format_time(at(minutes)),
        "event": f"prefect.asset.{kind}",
        "resource": {"prefect.resource.id": key, **(resource or {})},
        "related": related(task_run, name or f"{task_run}-abc", *upstream),
        "payload": payload or {},
        "id": event_id,
        "follows": None,
        "received": format_time(at(minutes)),
    }


RAW = "s3://lake/raw/orders.csv"
CLEAN = "s3://lake/clean/orders.parquet"
CUSTOMERS = "postgres://db.internal:5432/shop.public.customers"
RAW_PROPS = {
    "prefect.resource.name": "Raw orders",
    "prefect.asset.description": "orders dump",
    "prefect.asset.url": "https://example.com/raw",
    "prefect.asset.owners": '["data-team", "ops"]',
}


def pipeline_events() -> list[dict[str, Any]]:
    """``extract`` materializes RAW; ``transform`` reads it (and CUSTOMERS, an asset_deps) and
    materializes CLEAN."""
    return [
        event("e1", 1, "materialization.succeeded", RAW, "t-extract", name="extract-51e", resource=RAW_PROPS,
              payload={"rows": 3, "source": "api"}),
        event("e2", 2, "referenced", RAW, "t-transform", name="transform-7d1", resource=RAW_PROPS),
        event("e3", 2, "referenced", CUSTOMERS, "t-transform", name="transform-7d1"),
        event("e4", 2.5, "materialization.succeeded", CLEAN, "t-transform", name="transform-7d1",
              upstream=(RAW, CUSTOMERS), payload={"rows": 3, "columns": ["id", "amount"]}),
    ]  # fmt: skip


def page(events: list[dict[str, Any]], total: int, token: str | None) -> dict[str, Any]:
    # the server builds next_page from its own base URL; the client must use only its token
    next_page = f"http://10.0.0.9:4200/api/events/filter/next?page-token={token}" if token else None
    return {"events": events, "total": total, "next_page": next_page}


def serve(rsps: responses.RequestsMock, pages: list[list[dict[str, Any]]]) -> None:
    total = sum(len(p) for p in pages)
    rsps.post(f"{API}/events/filter", json=page(pages[0], total, "tok1" if len(pages) > 1 else None))
    for number in range(1, len(pages)):
        token = f"tok{number + 1}" if number + 1 < len(pages) else None
        rsps.get(
            f"{API}/events/filter/next",
            json=page(pages[number], total, token),
            match=[responses.matchers.query_param_matcher({"page-token": f"tok{number}"})],
        )
    rsps.get(re.compile(rf"{API}/task_runs/.*"), status=404)


def task_run_requests() -> list[str]:
    """The task runs API requests made so far (under ``responses``)."""
    return [c.request.url for c in responses.calls if "/task_runs/" in (c.request.url or "")]


def clock(minutes: float) -> Callable[[], datetime]:
    return lambda: at(minutes)


# ---------------------------------------------------------------------------------------------
# mapping


def test_asset_properties_and_metadata_become_the_catalog_record() -> None:
    asset = asset_from_resource(
        {"prefect.resource.id": RAW, **RAW_PROPS}, {"rows": 3, "files": ["a", "b"], "gone": None}
    )
    assert asset.id == RAW
    assert asset.display_name == "Raw orders"
    assert asset.description == "orders dump"
    assert dict(asset.metadata) == {
        "rows": 3,
        "files": '["a","b"]',  # the catalog's metadata is flat: nested values are kept as JSON text
        "gone": None,  # a null removes the key, as in every metadata update
        "owner": "data-team, ops",
        "url": "https://example.com/raw",
    }


def test_task_names_come_from_task_run_names() -> None:
    info = TaskRunInfo("extract-51e", "51e71194-1bec-4dae-a3a5-db1f7fdce632", None, None)
    assert task_name("extract-51e", info) == "extract"
    assert task_name("my-task-0a1", None) == "my-task"  # the default suffix, without the API's help
    custom = TaskRunInfo("nightly load", "51e71194", None, None)
    assert task_name("nightly load", custom) == "nightly load"


@pytest.mark.parametrize(
    ("asset_id", "namespace", "name"),
    [
        ("s3://lake/raw/orders.csv", "s3://lake", "raw/orders.csv"),
        ("s3://bucket/dataset/2025-12-12/", "s3://bucket", "dataset/2025-12-12"),  # a folder: as Spark names it
        ("postgres://db.internal:5432/shop.public.customers", "postgres://db.internal:5432", "shop.public.customers"),
        ("postgresql://db.internal/shop.public.customers", "postgres://db.internal:5432", "shop.public.customers"),
        ("gcs://bucket/obj/x.parquet", "gs://bucket", "obj/x.parquet"),
        ("file:///data/report.csv", "file", "/data/report.csv"),
        ("dl://raw/gdrive/id1/file.pdf", "dl://raw", "gdrive/id1/file.pdf"),
    ],
)
def test_prefect_asset_keys_name_datasets_by_the_naming_rules(
    resolver: Resolver, asset_id: str, namespace: str, name: str
) -> None:
    named = resolver.dataset_for(asset_id, "File", {})
    assert (named.namespace, named.name) == (namespace, name)


def test_malformed_events_are_named_with_the_reason() -> None:
    no_task_run = event("bad1", 1, "materialization.succeeded", RAW, "t1")
    no_task_run["related"] = [r for r in no_task_run["related"] if r["prefect.resource.role"] != "task-run"]
    bad_key = event("bad2", 1, "materialization.succeeded", "s3://lake/a b.csv", "t1")
    bad_owners = event("bad3", 1, "referenced", RAW, "t1", resource={"prefect.asset.owners": "data-team"})
    bad_payload = event("bad4", 1, "materialization.succeeded", RAW, "t1")
    bad_payload["payload"] = ["rows", 3]
    # a task run's id goes into the path of a request to the server: one that would steer it is none
    steering = event("bad6", 1, "materialization.succeeded", RAW, "t1/../../admin?x=1#frag")
    events, problems = parse_events([no_task_run, bad_key, bad_owners, bad_payload, {"id": "bad5"}, steering])
    assert events == []
    text = "\n".join(map(str, problems))
    assert "event bad1: no related task-run resource" in text
    assert "event bad2: asset key 's3://lake/a b.csv' is not a valid asset id" in text
    assert "event bad3: resource['prefect.asset.owners'] must be a JSON list of strings" in text
    assert "event bad4: payload (the asset metadata) must be an object" in text
    assert "event bad5: event must be a non-empty string" in text
    assert "event bad6: related task-run has the id 'prefect.task-run.t1/../../admin?x=1#frag'" in text


# ---------------------------------------------------------------------------------------------
# the events API (responses)


@responses.activate
def test_import_reads_every_page_and_records_one_task_run_per_prefect_task_run(catalog: Catalog) -> None:
    events = pipeline_events()
    serve(responses.mock, [events[:2], events[2:3], events[3:]])
    summary = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert summary.read == 4
    first = json.loads(responses.calls[0].request.body or b"{}")
    assert first["filter"]["event"]["prefix"] == ["prefect.asset.materialization.", "prefect.asset.referenced"]
    assert first["filter"]["order"] == "ASC"
    assert first["filter"]["occurred"] == {
        "since": "1970-01-01T00:00:00.000000Z",
        "until": format_time(at(10) - timedelta(seconds=5)),
    }
    assert [c.request.url.split("?")[0] for c in responses.calls[1:3]] == [f"{API}/events/filter/next"] * 2

    runs = {r.key.task_id: r for r in catalog.iter_task_runs()}
    assert set(runs) == {"extract", "transform"}
    transform = runs["transform"]
    assert (transform.key.flow_namespace, transform.key.flow_id) == ("prefect", "orders-pipeline")
    assert (transform.key.execution_id, transform.key.task_run_id) == (FLOW_RUN, "t-transform")
    assert transform.state is TaskState.SUCCESS
    assert [u.asset_id for u in transform.inputs] == [RAW, CUSTOMERS]
    assert [u.asset_id for u in transform.outputs] == [CLEAN]
    assert (transform.started_at, transform.ended_at) == (at(2), at(2.5))  # no task run API: the events' times
    raw = catalog.asset(RAW)
    assert (raw.type, raw.display_name, raw.description) == ("File", "Raw orders", "orders dump")
    assert dict(raw.metadata) == {
        "owner": "data-team, ops",
        "url": "https://example.com/raw",
        "rows": 3,
        "source": "api",
    }
    assert dict(catalog.asset(CLEAN).metadata) == {"rows": 3, "columns": '["id","amount"]'}
    assert catalog.asset(CUSTOMERS).type == "External"  # an asset_deps no flow produces
    edges = {(e.upstream, e.downstream) for e in catalog.lineage(CLEAN, direction="upstream").edges}
    assert edges == {(RAW, CLEAN), (CUSTOMERS, CLEAN)}


@responses.activate
def test_the_task_runs_api_gives_the_task_name_and_times(catalog: Catalog) -> None:
    events = pipeline_events()[:1]
    responses.post(f"{API}/events/filter", json=page(events, 1, None))
    responses.get(
        f"{API}/task_runs/t-extract",
        json={"id": "t-extract", "name": "extract-51e", "dynamic_key": "51e71194-1bec", "flow_run_id": FLOW_RUN,
              "start_time": format_time(at(0.5)), "end_time": format_time(at(0.9))},
    )  # fmt: skip
    import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    (stored,) = catalog.iter_task_runs()
    assert (stored.key.task_id, stored.started_at, stored.ended_at) == ("extract", at(0.5), at(1))


@responses.activate
def test_an_import_resumes_after_the_last_event_it_read(catalog: Catalog) -> None:
    events = pipeline_events()
    serve(responses.mock, [events[:3]])
    first = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert first.cursor is not None and first.cursor.last_occurred == at(2)
    assert first.cursor.last_event_ids == ("e2", "e3")
    assert first.pending == ("t-transform",)  # references but no materialization yet: nothing recorded
    assert catalog.count_task_runs() == 1
    # the task runs API is asked only about task runs with a materialization
    assert task_run_requests() == [f"{API}/task_runs/t-extract"]

    responses.reset()
    # it reads again from LOOKBACK before the newest event read (for events that reached the
    # server late): the server gives those read again, which are skipped, then the new e4
    serve(responses.mock, [events])
    second = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(20))
    body = json.loads(responses.calls[0].request.body or b"{}")
    assert body["filter"]["occurred"]["since"] == format_time(at(2) - LOOKBACK)
    assert second.read == 1
    assert [r.status for r in second.results] == ["created"]
    assert {r.key.task_run_id for r in catalog.iter_task_runs()} == {"t-extract", "t-transform"}
    transform = next(r for r in catalog.iter_task_runs() if r.key.task_id == "transform")
    # the materialization names its upstream assets, so the inputs are all there
    assert [u.asset_id for u in transform.inputs] == [RAW, CUSTOMERS]
    cursor = read_cursor(catalog, API)
    assert cursor is not None and (cursor.last_occurred, cursor.last_event_ids, cursor.events_read) == (
        at(2.5),
        ("e4",),
        4,
    )

    responses.reset()
    serve(responses.mock, [[events[3]]])
    third = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(30))
    assert (third.read, third.results) == (0, ())


@responses.activate
def test_an_event_that_reaches_the_server_late_is_read_by_the_next_import(catalog: Catalog) -> None:
    """An import went on from the newest event it had read: an event that occurred before it but
    reached the server after the import (a worker's clock behind, a client that buffered it) was
    never read, and nothing said so. The next import reads again from LOOKBACK back of it, and
    takes what it had not read, once; what it read before it skips."""
    events = pipeline_events()
    serve(responses.mock, [events])
    first = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert first.read == 4 and catalog.count_task_runs() == 2
    late = event("e5", 2.2, "materialization.succeeded", "s3://lake/late/arrival.parquet", "t-load", name="load-1a2")
    responses.reset()
    serve(responses.mock, [[*events[:3], late, events[3]]])  # e5 occurred before e4, and reached it after
    second = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(20))
    assert second.read == 1 and [r.status for r in second.results] == ["created"]
    assert catalog.count_task_runs() == 3 and catalog.get_asset("s3://lake/late/arrival.parquet") is not None
    responses.reset()
    serve(responses.mock, [[*events[:3], late, events[3]]])
    third = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(30))
    assert (third.read, third.results) == (0, ())
    cursor = read_cursor(catalog, API)
    assert cursor is not None and cursor.recent is not None
    assert {event_id for event_id, _ in cursor.recent} == {"e1", "e2", "e3", "e4", "e5"}


@responses.activate
def test_after_an_upgrade_what_the_version_before_read_is_not_read_again(catalog: Catalog) -> None:
    """A position kept by a version before keeps no ids of the events it read before its newest:
    the imports after it read again from two minutes back (task runs cut by the window's start
    then said to be late), where it must not read before that position."""
    events = pipeline_events()
    serve(responses.mock, [events])
    assert import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10)).read == 4
    value = {k: v for k, v in read_cursor(catalog, API).to_json().items() if k != "recentEvents"}  # type: ignore[union-attr]
    with catalog.transaction() as cur:  # as a version before kept it
        cur.execute("UPDATE positions SET value = ? WHERE kind = 'prefect-import'", (json.dumps(value),))
    later = event("e5", 3.5, "materialization.succeeded", "s3://lake/x.parquet", "t-x", name="x-1")
    responses.reset()
    serve(responses.mock, [[events[3], later]])
    second = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(20))
    assert second.read == 1 and [r.status for r in second.results] == ["created"]
    responses.reset()
    serve(responses.mock, [[*events[1:], later]])  # from two minutes before e5: e2 to e5
    third = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(30))
    assert (third.read, third.results, third.late) == (0, (), ())


@responses.activate
def test_since_reads_again_and_nothing_changes(catalog: Catalog) -> None:
    serve(responses.mock, [pipeline_events()])
    import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    before = snapshot(catalog)
    again = import_events(catalog, PrefectClient(API), Resolver.load(), since=T0, clock=clock(10))
    assert [r.status for r in again.results] == ["unchanged", "unchanged"]
    assert snapshot(catalog) == before
    cursor = read_cursor(catalog, API)
    assert cursor is not None and (cursor.last_occurred, cursor.last_event_ids) == (at(2.5), ("e4",))


@responses.activate
def test_a_task_run_materializing_two_assets_has_two_outputs_and_stored_types_stay(catalog: Catalog) -> None:
    catalog.set_asset(AssetDeclaration.create(CLEAN, type="Table"), now=T0)  # another front end made it a Table
    extra = "s3://lake/clean/orders-by-day.parquet"
    events = [
        *pipeline_events(),
        event("e5", 2.5, "materialization.succeeded", extra, "t-transform", name="transform-7d1",
              upstream=(RAW, CUSTOMERS), payload={"partitions": 7}),
    ]  # fmt: skip
    serve(responses.mock, [events])
    import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    transform = next(r for r in catalog.iter_task_runs() if r.key.task_id == "transform")
    assert transform.state is TaskState.SUCCESS and transform.warnings == ()
    assert [u.asset_id for u in transform.outputs] == [CLEAN, extra]
    assert (catalog.asset(CLEAN).type, catalog.asset(extra).type) == ("Table", "File")
    assert dict(catalog.asset(extra).metadata) == {"partitions": 7}


@responses.activate
def test_late_events_of_an_ended_task_run_are_reported_not_applied(catalog: Catalog) -> None:
    events = pipeline_events()
    serve(responses.mock, [events])
    import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    before = snapshot(catalog)
    responses.reset()
    late = event("e5", 3, "materialization.succeeded", "s3://lake/clean/extra.parquet", "t-transform",
                 name="transform-7d1")  # fmt: skip
    serve(responses.mock, [[late]])
    summary = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(20))
    assert [x.task_run_id for x in summary.late] == ["t-transform"]
    assert "already ended" in summary.late[0].reason
    assert snapshot(catalog) == before
    assert summary.cursor is not None and summary.cursor.last_event_ids == ("e5",)


@responses.activate
def test_the_summary_has_the_shape_of_every_import(catalog: Catalog) -> None:
    """``read``, what a Prefect import counts, ``refused``, ``refusals`` and ``position``, as the
    summary of ``olbridge import`` (tests/test_imports.py)."""
    serve(responses.mock, [pipeline_events()])
    summary = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10)).to_json()
    keys = list(summary)
    assert keys[0] == "read" and keys[-3:] == ["refused", "refusals", "position"]
    assert (summary["read"], summary["refused"], summary["refusals"]) == (4, 0, [])
    assert summary["position"] == summary["cursor"]["lastOccurred"]  # where the next import starts


@responses.activate
def test_a_failed_materialization_ends_the_task_run_failed_without_outputs(catalog: Catalog) -> None:
    failing = [
        event("f1", 1, "referenced", RAW, "t-fail", name="publish-0a1"),
        event("f2", 1, "materialization.failed", "file:///exports/report.csv", "t-fail", name="publish-0a1",
              upstream=(RAW,)),
    ]  # fmt: skip
    serve(responses.mock, [failing])
    summary = import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    (stored,) = catalog.iter_task_runs()
    assert (stored.key.task_id, stored.state) == ("publish", TaskState.FAILED)
    assert [u.asset_id for u in stored.inputs] == [RAW] and stored.outputs == ()
    # the new output is made as its success would have made it (a File, by the naming rules), not
    # written: the failed run FAILs it
    assert stored.unwritten == ("file:///exports/report.csv",)
    assert catalog.asset("file:///exports/report.csv").type == "File"
    assert catalog.usages_of("file:///exports/report.csv") == []
    assert summary.to_json()["failed"] == 1


@responses.activate
def test_a_malformed_group_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    good = pipeline_events()
    two_flow_runs = event("m1", 3, "referenced", RAW, "t-load", name="load-aaa")
    other = event("m2", 3, "materialization.succeeded", CLEAN, "t-load", name="load-aaa")
    other["related"] = related("t-load", "load-aaa", flow_run="another-flow-run")
    serve(responses.mock, [[*good, two_flow_runs, other]])
    with Catalog(db) as catalog:
        before = prefect_tables(catalog)
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API, "--settle", "0")
    assert code == 1
    assert "Error: 1 malformed Prefect asset event(s) or task run(s); nothing was recorded" in err
    assert "task run t-load: its events name two flow runs" in err
    with Catalog(db) as catalog:
        assert prefect_tables(catalog) == before

    code, out, err = invoke(db, "prefect", "import", "--api-url", API, "--settle", "0", "--skip-malformed", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["taskRuns"], summary["refused"]) == (2, 1)
    [refusal] = summary["refusals"]
    assert refusal["where"] == "task run t-load" and "its events name two flow runs" in refusal["reason"]
    assert "malformed (skipped)" in err and "skipped: task run t-load: its events name two flow runs" in err


@responses.activate
def test_a_malformed_event_is_refused_before_any_task_run_is_asked_for(catalog: Catalog) -> None:
    bad = event("bad1", 3, "materialization.succeeded", "s3://lake/a b.csv", "t-load")
    serve(responses.mock, [[*pipeline_events(), bad]])
    with pytest.raises(ValidationError, match="event bad1: asset key"):
        import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert task_run_requests() == []
    assert catalog.count_task_runs() == 0 and read_cursor(catalog, API) is None


def test_an_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    db = tmp_path / "c.db"
    code, _out, err = invoke(db, "prefect", "import", "--api-url", f"http://127.0.0.1:{port}/api")
    assert code == 1
    assert f"Error: cannot reach the Prefect server at http://127.0.0.1:{port}/api: connection refused" in err
    with Catalog(db) as catalog:
        assert catalog.count_task_runs() == 0 and read_cursor(catalog, f"http://127.0.0.1:{port}/api") is None


@responses.activate
@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (  # naming the server, as docs/adapters.md says
            {"status": 500, "body": "Internal Server Error"},
            f"the Prefect server at {API} answered HTTP 500 to POST /events/filter: Internal",
        ),
        ({"status": 404, "body": "Not Found"}, "answered HTTP 404 to POST /events/filter: Not Found"),
        ({"status": 200, "body": "<html>Prefect UI</html>"}, "answer to POST /events/filter is not JSON"),
        ({"status": 200, "json": {"items": []}}, "answer to POST /events/filter has no 'events' list"),
    ],
    ids=["5xx", "404", "not-json", "not-an-event-page"],
)
def test_a_bad_answer_is_a_clear_error_and_changes_nothing(
    tmp_path: Path, answer: dict[str, Any], message: str
) -> None:
    responses.post(f"{API}/events/filter", **answer)
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        before = prefect_tables(catalog)
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API)
    assert code == 1 and message in err and err.startswith("Error: ")
    with Catalog(db) as catalog:
        assert prefect_tables(catalog) == before


@responses.activate
def test_a_404_from_an_address_without_its_api_path_says_where_the_api_is(tmp_path: Path) -> None:
    """The server's address alone (without /api, as its UI's address reads) answered a bare 404."""
    responses.post("http://prefect.test/events/filter", status=404, body="Not Found")
    code, _out, err = invoke(tmp_path / "c.db", "prefect", "import", "--api-url", "http://prefect.test")
    assert code == 1 and "answered HTTP 404 to POST /events/filter (a Prefect API URL ends in /api" in err
    # Prefect Cloud's API URL holds /api before its account and workspace: a 404 there is no such case
    cloud = "http://prefect.test/api/accounts/a1/workspaces/w1"
    responses.post(f"{cloud}/events/filter", status=404, body="Not Found")
    code, _out, err = invoke(tmp_path / "c.db", "prefect", "import", "--api-url", cloud)
    assert code == 1 and "answered HTTP 404 to POST /events/filter: Not Found" in err, err


@responses.activate
def test_a_failing_next_page_records_nothing(catalog: Catalog) -> None:
    events = pipeline_events()
    responses.post(f"{API}/events/filter", json=page(events[:2], 4, "tok1"))
    responses.get(f"{API}/events/filter/next", status=403)
    with pytest.raises(SourceError, match=r"HTTP 403 to GET /events/filter/next"):
        import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert catalog.count_task_runs() == 0 and read_cursor(catalog, API) is None


@responses.activate
def test_a_server_that_gives_a_page_token_again_is_an_error_not_an_endless_read(catalog: Catalog) -> None:
    events = pipeline_events()
    responses.post(f"{API}/events/filter", json=page(events[:1], 1_000_000, "tok1"))
    responses.get(f"{API}/events/filter/next", json=page(events[1:2], 1_000_000, "tok1"))  # the same, forever
    with pytest.raises(SourceError, match=r"gave a page token it gave before"):
        import_events(catalog, PrefectClient(API), Resolver.load(), clock=clock(10))
    assert len(responses.calls) == 2  # the first page, and the next that names itself again: no more
    assert catalog.count_task_runs() == 0 and read_cursor(catalog, API) is None


def test_the_timeout_bounds_an_answer_sent_a_byte_at_a_time() -> None:
    """requests' timeout bounds each wait for a byte; ``--timeout`` bounds the whole answer."""
    body = b'{"events": [], "total": 0, "next_page": null}'
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def drip() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body))
                for byte in body:  # a byte every 0.1 s: 4.6 s in all, each wait far within the timeout
                    try:
                        connection.sendall(bytes([byte]))
                    except OSError:
                        return  # the client gave up
                    time.sleep(0.1)

        sender = threading.Thread(target=drip, daemon=True)
        sender.start()
        began = time.monotonic()
        with pytest.raises(SourceError, match=r"did not answer POST /events/filter within 1 s"):
            PrefectClient(f"http://127.0.0.1:{port}/api", timeout=1).newest_events(at(0), at(10))
        assert time.monotonic() - began < 3
        sender.join(timeout=10)


@responses.activate
@pytest.mark.parametrize(
    ("args", "header"),
    [
        (["--api-key", "pnu_Secret1"], "Bearer pnu_Secret1"),  # Prefect Cloud
        (["--auth-string", "admin:pa55"], "Basic YWRtaW46cGE1NQ=="),  # a self-hosted server's auth_string
    ],
)
def test_a_server_that_asks_for_authentication_gets_it(
    tmp_path: Path, args: list[str], header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"  # a ~/.netrc entry for the host does not replace what was given
    netrc.write_text(f"machine {urlsplit(API).hostname} login someone password else\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    authorized = [responses.matchers.header_matcher({"Authorization": header})]
    responses.post(f"{API}/events/filter", json=page(pipeline_events(), 4, None), match=authorized)
    responses.get(re.compile(rf"{API}/task_runs/.*"), status=404, match=authorized)
    code, _out, err = invoke(tmp_path / "c.db", "prefect", "import", "--api-url", API, "--settle", "0", *args)
    assert code == 0, err
    assert all(c.request.headers["Authorization"] == header for c in responses.calls)


def test_authentication_is_one_kind_and_a_secret_is_printable(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    both = ["--api-key", "k", "--auth-string", "a:b"]
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API, *both)
    assert code == 2 and "do not go together" in err
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API, "--api-key", "pnu secret")
    assert code == 2 and "a secret is printable ASCII without spaces" in err and "pnu secret" not in err


def test_the_api_url_must_be_http() -> None:
    with pytest.raises(
        SourceError, match=r"must be an http:// or https:// URL, not .127\.0\.0\.1:4200/api.: no scheme \(begin it"
    ):
        PrefectClient("127.0.0.1:4200/api")


@responses.activate
def test_follow_polls_until_its_bound(tmp_path: Path) -> None:
    events = pipeline_events()
    serve(responses.mock, [events])
    db = tmp_path / "c.db"
    code, out, err = invoke(
        db, "prefect", "import", "--api-url", API, "--settle", "0", "--follow", "--interval", "0.1",
        "--max-polls", "3", "--json",
    )  # fmt: skip
    assert code == 0, err
    polls = [json.loads(line) for line in out.splitlines()]
    assert [p["created"] for p in polls] == [2, 0, 0]
    assert "stopped after 3 poll(s), 2 task run(s) recorded" in err


@responses.activate
def test_follow_rides_out_a_server_that_is_down_for_a_poll(tmp_path: Path) -> None:
    responses.post(f"{API}/events/filter", body=requests.ConnectionError("Connection refused"))
    responses.post(f"{API}/events/filter", json=page(pipeline_events(), 4, None))
    responses.get(re.compile(rf"{API}/task_runs/.*"), status=404)
    db = tmp_path / "c.db"
    code, out, err = invoke(
        db, "prefect", "import", "--api-url", API, "--settle", "0", "--follow", "--interval", "0.1",
        "--max-polls", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert f"warning: cannot reach the Prefect server at {API}: connection refused (trying again in 0.1 s)" in err
    assert [json.loads(line)["created"] for line in out.splitlines()] == [2]


@responses.activate
def test_follow_that_stops_on_a_failed_poll_is_no_success(tmp_path: Path) -> None:
    """Every poll failing (a server never up, a wrong address) ended with status 0."""
    responses.post(f"{API}/events/filter", body=requests.ConnectionError("Connection refused"))
    code, _out, err = invoke(
        tmp_path / "c.db", "prefect", "import", "--api-url", API, "--follow", "--interval", "0.1", "--max-polls", "2"
    )
    assert code == 1 and "stopped after 0 poll(s)" in err
    assert err.rstrip().endswith(
        f"Error: the last poll failed: cannot reach the Prefect server at {API}: connection refused"
    )


def test_bad_options_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API, "--namespace", "Bad NS")
    assert code == 2 and "--namespace: a namespace matches" in err  # a usage error
    code, _out, err = invoke(db, "prefect", "import", "--api-url", API, "--since", "yesterday")
    assert code == 2 and "not an ISO 8601 time: 'yesterday'" in err


# ---------------------------------------------------------------------------------------------
# a one-shot import right after a flow finished: its events are younger than --settle


class FilteringServer:
    """The events API as a server answers it: the occurred window, the prefixes, the order and the
    limit of each query (the events here fit one page)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def __call__(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        assert request.body is not None
        body = json.loads(request.body)
        query = body["filter"]
        since = parse_time(query["occurred"]["since"], "since")
        until = parse_time(query["occurred"]["until"], "until")
        chosen = [
            e
            for e in self.events
            if since <= parse_time(e["occurred"], "occurred") <= until
            and e["event"].startswith(tuple(query["event"]["prefix"]))
        ]
        chosen.sort(key=lambda e: e["occurred"], reverse=query.get("order") == "DESC")
        answer = {"events": chosen[: body.get("limit", 50)], "total": len(chosen), "next_page": None}
        return 200, {}, json.dumps(answer)


def serve_filtered(rsps: responses.RequestsMock, events: list[dict[str, Any]]) -> None:
    rsps.add_callback(
        responses.POST, f"{API}/events/filter", callback=FilteringServer(events), content_type="application/json"
    )
    rsps.get(re.compile(rf"{API}/task_runs/.*"), status=404)


class FakeTime:
    """A clock that a sleep moves on."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.slept: list[float] = []

    def clock(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


NOW = at(10)


def just_finished() -> list[dict[str, Any]]:
    """The pipeline's events, 4 s to 1 s before NOW."""
    events = pipeline_events()
    for e, seconds in zip(events, (4, 3, 3, 1), strict=True):
        e["occurred"] = e["received"] = format_time(NOW - timedelta(seconds=seconds))
    return events


@responses.activate
def test_events_younger_than_settle_are_not_read_by_a_plain_import(catalog: Catalog) -> None:
    serve_filtered(responses.mock, just_finished())
    summary = import_events(catalog, PrefectClient(API), Resolver.load(), settle=5, clock=lambda: NOW)
    assert (summary.read, summary.results) == (0, ())  # what `prefect import` said before: 0 event(s) read


@responses.activate
def test_a_one_shot_import_waits_out_the_settle_window_then_reads_the_flow(catalog: Catalog) -> None:
    serve_filtered(responses.mock, just_finished())
    fake, told = FakeTime(NOW), []
    summary = import_once(
        catalog,
        PrefectClient(API),
        Resolver.load(),
        settle=5,
        clock=fake.clock,
        sleep=fake.sleep,
        on_wait=lambda young, seconds: told.append((young.count, seconds)),
    )
    assert told == [(4, 4.0)] and fake.slept == [4.0]  # the newest, 1 s old, is 5 s old after 4 s
    assert (summary.read, len(summary.results), summary.left) == (4, 2, 0)
    assert summary.to_json()["leftForNextImport"] == 0


@responses.activate
@pytest.mark.parametrize(("wait", "settle"), [(False, 5.0), (True, 120.0)], ids=["no-wait", "settle-over-max-wait"])
def test_without_waiting_the_import_says_how_many_it_left(catalog: Catalog, wait: bool, settle: float) -> None:
    serve_filtered(responses.mock, just_finished())
    fake = FakeTime(NOW)
    summary = import_once(
        catalog, PrefectClient(API), Resolver.load(), settle=settle, wait=wait, clock=fake.clock, sleep=fake.sleep
    )
    assert fake.slept == []
    assert (summary.read, summary.left) == (0, 4)
    fake.now += timedelta(seconds=settle)  # the next import, once they have settled, reads them
    later = import_once(catalog, PrefectClient(API), Resolver.load(), settle=settle, clock=fake.clock, sleep=fake.sleep)
    assert (later.read, len(later.results), later.left) == (4, 2, 0) and fake.slept == []


@responses.activate
def test_prefect_import_says_it_waits_and_what_it_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_filtered(responses.mock, just_finished())
    fake = FakeTime(NOW)
    monkeypatch.setattr("bridge.cli.prefect.utcnow", fake.clock)
    monkeypatch.setattr("bridge.cli.prefect.sleep", fake.sleep)
    db = tmp_path / "c.db"
    code, out, err = invoke(db, "prefect", "import", "--api-url", API, "--no-wait", "--json")
    assert code == 0, err
    assert "0 event(s) read, 0 task run(s): 0 created, 0 unchanged, 0 failed; " in err
    assert "4 younger than --settle (5 s) left for the next import" in err
    assert json.loads(out)["leftForNextImport"] == 4

    code, out, err = invoke(db, "prefect", "import", "--api-url", API, "--json")
    assert code == 0, err
    assert (
        "waiting 4.0 s: 4 asset event(s) are younger than --settle (5 s), and a task run's events are read "
        "together (--no-wait leaves them for the next import)"
    ) in err
    assert "4 event(s) read, 2 task run(s): 2 created" in err and "left for the next import" not in err
    assert json.loads(out)["leftForNextImport"] == 0
    assert fake.slept == [4.0]


def test_no_wait_is_for_a_one_shot_import(tmp_path: Path) -> None:
    code, _out, err = invoke(tmp_path / "c.db", "prefect", "import", "--api-url", API, "--follow", "--no-wait")
    assert code == 2 and "--no-wait is for an import without --follow" in err


# ---------------------------------------------------------------------------------------------
# a real Prefect 3 server and flow

FLOW_SCRIPT = """
from prefect import flow
from prefect.assets import Asset, AssetProperties, add_asset_metadata, materialize

RAW = Asset(
    key="s3://olbridge-test/raw/orders.csv",
    properties=AssetProperties(
        name="Raw orders", description="The orders as the shop exports them", owners=["data-team"],
        url="https://example.com/raw-orders",
    ),
)
CLEAN = "s3://olbridge-test/clean/orders.parquet"
CUSTOMERS = "postgres://db.internal:5432/shop.public.customers"


@materialize(RAW)
def extract() -> list[int]:
    add_asset_metadata(RAW.key, {"rows": 3, "source": "shop-api"})
    return [1, 2, 3]


@materialize(CLEAN, asset_deps=[CUSTOMERS])
def transform(rows: list[int]) -> list[int]:
    add_asset_metadata(CLEAN, {"rows": len(rows), "format": "parquet"})
    return sorted(rows)


@materialize("file:///exports/orders-report.csv")
def publish(rows: list[int]) -> None:  # takes transform's result, so CLEAN is its upstream
    raise RuntimeError("the report share is read-only")


@flow(name="orders-pipeline")
def pipeline() -> str:
    from prefect.runtime import flow_run

    rows = extract()
    cleaned = transform(rows)
    try:
        publish(cleaned)
    except RuntimeError:
        pass
    return flow_run.id


if __name__ == "__main__":
    print("FLOW_RUN_ID", pipeline())
"""


def _prefect_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {
        **env,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "DO_NOT_TRACK": "1",
        **extra,
    }


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prefect 3 server on a free loopback port (SQLite in a temporary PREFECT_HOME),
    stopped by its pid at the end of the module."""
    if not (BIN / "prefect").is_file():
        pytest.skip("prefect is not installed (pip install -e '.[prefect]')")
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = (home / "server.log").open("w")
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=_prefect_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(240):  # at most about two minutes
            if server.poll() is not None:
                pytest.fail(
                    f"prefect server exited with {server.returncode}: {(home / 'server.log').read_text()[-2000:]}"
                )
            try:
                if requests.get(f"{api}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"prefect server did not become healthy: {(home / 'server.log').read_text()[-2000:]}")
        yield api
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()


def _run_flow(api: str, work: Path) -> str:
    script = work / "orders_flow.py"
    script.write_text(FLOW_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        env=_prefect_env(work / "client-home", PREFECT_API_URL=api),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("FLOW_RUN_ID"))


def _asset_events(api: str, flow_run_id: str) -> list[dict[str, Any]]:
    query = {
        "filter": {
            "event": {"prefix": ["prefect.asset."]},
            "related": {"id": [f"prefect.flow-run.{flow_run_id}"]},
            "order": "ASC",
        },
        "limit": 50,
    }
    answer = requests.post(f"{api}/events/filter", json=query, timeout=10)
    answer.raise_for_status()
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def _materialized_task_runs(api: str) -> set[str]:
    """The ids of the task runs whose materializations the server has (of every flow run)."""
    query = {"filter": {"event": {"prefix": ["prefect.asset.materialization."]}, "order": "ASC"}, "limit": 50}
    answer = requests.post(f"{api}/events/filter", json=query, timeout=10)
    answer.raise_for_status()
    body = answer.json()
    assert body["next_page"] is None, "more materializations than one page"
    return {
        r["prefect.resource.id"].removeprefix("prefect.task-run.")
        for e in body["events"]
        for r in e["related"]
        if r.get("prefect.resource.role") == "task-run"
    }


def _wait_for_events(api: str, flow_run_id: str, count: int) -> list[dict[str, Any]]:
    """The flow run's asset events once the server shows all of them (a bounded wait: the server
    stores events a moment after the client sends them)."""
    events: list[dict[str, Any]] = []
    for _ in range(120):
        events = _asset_events(api, flow_run_id)
        if len(events) >= count:
            return events
        time.sleep(0.5)
    pytest.fail(f"the server shows {len(events)} of the flow run's {count} asset events")


@pytest.fixture(scope="module")
def flow_run(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    flow_run_id = _run_flow(prefect_server, tmp_path_factory.mktemp("prefect-flow"))
    # extract: 1 materialization; transform: 2 references + 1 materialization; publish: 1 + 1 (failed)
    return flow_run_id, _wait_for_events(prefect_server, flow_run_id, 6)


@pytest.mark.prefect
def test_a_real_flow_is_imported_and_exported_as_valid_openlineage(
    prefect_server: str,
    flow_run: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
    official: Callable[[Any], list[str]],
) -> None:
    flow_run_id, events = flow_run
    assert {e["event"] for e in events} == {
        "prefect.asset.materialization.succeeded",
        "prefect.asset.materialization.failed",
        "prefect.asset.referenced",
    }
    db = tmp_path / "c.db"
    code, out, err = invoke(db, "prefect", "import", "--api-url", prefect_server, "--settle", "0", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["taskRuns"], summary["created"], summary["failed"]) == (3, 3, 1)
    assert summary["refusals"] == [] and summary["referencesOnly"] == []

    raw_id, clean_id = "s3://olbridge-test/raw/orders.csv", "s3://olbridge-test/clean/orders.parquet"
    customers = "postgres://db.internal:5432/shop.public.customers"
    with Catalog(db) as catalog:
        runs = {r.key.task_id: r for r in catalog.iter_task_runs()}
        assert set(runs) == {"extract", "transform", "publish"}
        for stored in runs.values():
            assert (stored.key.flow_namespace, stored.key.flow_id) == ("prefect", "orders-pipeline")
            assert stored.key.execution_id == flow_run_id
            assert stored.started_at <= stored.ended_at  # type: ignore[operator]
        assert [u.asset_id for u in runs["extract"].outputs] == [raw_id]
        assert {u.asset_id for u in runs["transform"].inputs} == {raw_id, customers}
        assert [u.asset_id for u in runs["transform"].outputs] == [clean_id]
        assert runs["publish"].state is TaskState.FAILED and runs["publish"].outputs == ()
        assert [u.asset_id for u in runs["publish"].inputs] == [clean_id]

        raw = catalog.asset(raw_id)
        assert (raw.type, raw.display_name) == ("File", "Raw orders")
        assert raw.description == "The orders as the shop exports them"
        assert dict(raw.metadata) == {
            "owner": "data-team",
            "url": "https://example.com/raw-orders",
            "rows": 3,
            "source": "shop-api",
        }
        assert dict(catalog.asset(clean_id).metadata) == {"rows": 3, "format": "parquet"}
        assert catalog.asset(customers).type == "External"
        # the failed materialization's new asset: made, never written (the failed run FAILs it)
        assert runs["publish"].unwritten == ("file:///exports/orders-report.csv",)
        assert catalog.usages_of("file:///exports/orders-report.csv") == []
        upstream = {(e.upstream, e.downstream) for e in catalog.lineage(clean_id, direction="upstream").edges}
        assert upstream == {(raw_id, clean_id), (customers, clean_id)}
        parent_id = execution_run_id(runs["transform"].key, runs["transform"].execution_started_at)

        exported = list(iter_events(catalog, Converter(Resolver.load())))
    assert len(exported) == 6  # START and an end for each task run
    for ol_event in exported:
        assert official(ol_event) == []
        assert validate_event(ol_event) == []
    by_job = {(e["job"]["name"], e["eventType"]): e for e in exported}
    transform_done = by_job[("orders-pipeline.transform", "COMPLETE")]
    assert transform_done["job"]["namespace"] == "prefect"
    # the flow run is the parent of all three task runs
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in exported} == {parent_id}
    assert {(d["namespace"], d["name"]) for d in transform_done["inputs"]} == {
        ("s3://olbridge-test", "raw/orders.csv"),
        ("postgres://db.internal:5432", "shop.public.customers"),
    }
    assert [(d["namespace"], d["name"]) for d in transform_done["outputs"]] == [
        ("s3://olbridge-test", "clean/orders.parquet")
    ]
    # the failed run names the output it was to write, as it names one the catalog held before
    failed_outputs = by_job[("orders-pipeline.publish", "FAIL")]["outputs"]
    assert [(d["namespace"], d["name"]) for d in failed_outputs] == [("file", "/exports/orders-report.csv")]

    # the next import starts after the last event read: nothing new, nothing changed
    code, out, err = invoke(db, "prefect", "import", "--api-url", prefect_server, "--settle", "0", "--json")
    assert code == 0, err
    assert (json.loads(out)["read"], json.loads(out)["taskRuns"]) == (0, 0)


@pytest.mark.prefect
def test_follow_picks_up_a_later_flow_run(
    prefect_server: str, flow_run: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    code, _out, err = invoke(db, "prefect", "import", "--api-url", prefect_server, "--settle", "0")
    assert code == 0, err
    second = _run_flow(prefect_server, tmp_path)
    _wait_for_events(prefect_server, second, 6)
    code, out, err = invoke(
        db, "prefect", "import", "--api-url", prefect_server, "--settle", "0", "--follow", "--interval", "0.2",
        "--max-polls", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    polls = [json.loads(line) for line in out.splitlines()]
    assert [p["created"] for p in polls] == [3, 0]
    with Catalog(db) as catalog:
        executions = {r.key.execution_id for r in catalog.iter_task_runs()}
    assert executions == {flow_run[0], second}


@pytest.mark.prefect
def test_follow_stops_cleanly_on_sigterm(
    prefect_server: str, flow_run: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    err_path = tmp_path / "stderr.txt"
    command = [str(BIN / "olbridge"), "--catalog", str(tmp_path / "c.db"), "prefect", "import"]
    command += ["--api-url", prefect_server, "--settle", "0", "--follow", "--interval", "0.2"]
    with err_path.open("w") as err:
        follower = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        try:
            for _ in range(120):  # until the first poll is done
                if "task run(s):" in err_path.read_text() or follower.poll() is not None:
                    break
                time.sleep(0.25)
            else:
                pytest.fail(f"the first poll did not finish in 30 s: {err_path.read_text()[-2000:]}")
            follower.send_signal(signal.SIGTERM)
            assert follower.wait(timeout=30) == 0
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.wait(timeout=30)
    text = err_path.read_text()
    assert "stopping after this poll (SIGTERM)" in text
    assert "stopped after" in text
    with Catalog(tmp_path / "c.db") as catalog:
        recorded = {r.key.task_run_id for r in catalog.iter_task_runs()}
    # the first poll read every event the server had: each task run that materialized an asset
    assert recorded == _materialized_task_runs(prefect_server)


@pytest.mark.prefect
def test_an_import_right_after_a_flow_finished_waits_for_its_events(
    prefect_server: str, flow_run: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    before = utcnow()
    second = _run_flow(prefect_server, tmp_path)
    _wait_for_events(prefect_server, second, 6)
    db = tmp_path / "c.db"
    # the flow's events are a few seconds old (more under load): younger than a 30 s settle window
    code, out, err = invoke(
        db, "prefect", "import", "--api-url", prefect_server, "--settle", "30", "--since", format_time(before), "--json"
    )
    assert code == 0, err
    assert "asset event(s) are younger than --settle (30 s)" in err
    summary = json.loads(out)
    assert (summary["read"], summary["taskRuns"], summary["leftForNextImport"]) == (6, 3, 0)
    with Catalog(db) as catalog:
        assert {r.key.execution_id for r in catalog.iter_task_runs()} == {second}
