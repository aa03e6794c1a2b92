"""``olbridge serve --forward``: every accepted event is queued in the outbox in the transaction
that records it, as it came (the body's bytes), and ``olbridge stream`` delivers it with the
retries, batching, per-run order and dead letters of olbridge's own events."""

from __future__ import annotations

import gzip
import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from bridge.catalog import Catalog
from bridge.catalog.outbox import FORWARD
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import HttpSender
from bridge.delivery.worker import StreamWorker
from bridge.jsontext import split_array
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake
from tests.backend import ACCEPT, Backend, Reply, free_port, wait_for
from tests.group_writer import GroupWriter
from tests.helpers import DATASET_EVENT_URL, PRODUCER, ol_dataset, ol_run_event, table_contents
from tests.test_receiver_http import TOKEN, Client, token_server

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")
RUN = "0194a1b2-0000-7000-8000-000000000001"

# an event as a producer may write it: spaces, its own key order, escapes, a number with a fraction
ODD = (
    (
        '{ "run": {"runId": "RUN", "facets": {"acme": {"_producer": "PRODUCER", "_schemaURL": "https://acme.example/f.json",'
        ' "ratio": 1.50, "label": "caf\\u00e9 \\"quoted\\" [x], {y}"}}},\n'
        '  "job": {"name": "dag.task", "namespace": "airflow"}, "eventType": "START",'
        ' "eventTime": "2025-03-01T08:00:00Z", "producer": "PRODUCER",'
        ' "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",'
        ' "inputs": [ {"namespace": "s3://b", "name": "k"} ] }\n'
    )
    .replace("RUN", RUN)
    .replace("PRODUCER", PRODUCER)
)


pytestmark = pytest.mark.both_engines


def forwarding(writer: GroupWriter, *, forward: bool = True) -> Client:
    return Client(ReceiverApp(Intake(writer.submit), token=TOKEN, forward=forward))


def queued(path: str) -> list[tuple[Any, ...]]:
    with Catalog(path) as catalog:
        rows: list[tuple[Any, ...]] = catalog._conn.execute(
            "SELECT o.kind, o.run_key, o.payload, r.digest FROM outbox o JOIN received_events r ON r.pk = o.ref "
            "ORDER BY o.seq"
        ).fetchall()
        return [tuple(row) for row in rows]


def test_an_accepted_event_is_queued_as_it_came(writer: GroupWriter, catalog_path: str) -> None:
    client = forwarding(writer)
    status, _, body = client.request("POST", "/api/v1/lineage", ODD.encode())
    assert (status, body["status"]) == (201, "accepted")
    ((kind, run_key, payload, _digest),) = queued(catalog_path)
    assert (kind, run_key) == (FORWARD, f"received:run:{RUN}")
    assert payload == ODD  # the body's text, byte for byte: not the event as olbridge reads it
    # the same event written another way is the same event: a duplicate, not forwarded twice
    status, _, body = client.post("/api/v1/lineage", json.loads(ODD))
    assert (status, body["status"]) == (201, "duplicate")
    assert len(queued(catalog_path)) == 1


def test_a_gzipped_body_is_forwarded_as_it_was_before_compression(writer: GroupWriter, catalog_path: str) -> None:
    status, _, _ = forwarding(writer).request(
        "POST", "/api/v1/lineage", gzip.compress(ODD.encode()), {"Content-Encoding": "gzip"}
    )
    assert status == 201
    assert [row[2] for row in queued(catalog_path)] == [ODD]


def test_each_event_of_a_batch_is_queued_as_it_was_in_the_batch(writer: GroupWriter, catalog_path: str) -> None:
    complete = json.dumps(ol_run_event("COMPLETE", run_id=RUN), indent=2)
    refused = json.dumps({"eventTime": "2025-03-01T08:00:00Z", "producer": PRODUCER})  # no run, no job
    dataset = json.dumps(
        {
            "eventTime": "2025-03-01T09:00:00Z",
            "producer": PRODUCER,
            "schemaURL": DATASET_EVENT_URL,
            "dataset": ol_dataset("kafka://broker:9092", "orders"),
        },
        separators=(",", ":"),
    )
    body = f"[ {ODD.strip()},\n{complete} ,{refused},  {dataset}\n]"
    status, _, answer = forwarding(writer).request("POST", "/api/v1/lineage/batch", body.encode())
    assert status == 200
    assert answer["summary"]["successful"] == 3 and [f["index"] for f in answer["failed_events"]] == [2]
    rows = queued(catalog_path)
    assert [payload for _, _, payload, _ in rows] == [ODD.strip(), complete, dataset]  # in the order they came
    assert [key for _, key, _, _ in rows] == [
        f"received:run:{RUN}",
        f"received:run:{RUN}",
        "received:dataset:kafka://broker:9092/orders",
    ]


def test_an_event_with_a_key_repeated_is_refused_where_it_would_be_forwarded(
    writer: GroupWriter, catalog_path: str
) -> None:
    """(a review) A key repeated in an object: the receiver judged the last value (a token of
    ``alpha`` writing ``alpha``) and forwarded the text as it came, whose first value wrote
    ``beta``'s dataset, for a backend that reads the first. Where it would be forwarded, such an
    event is refused, nothing kept; without forwarding, the last value is the event's (as
    Marquez's reader takes it) and nothing else goes on."""
    event = ol_run_event("COMPLETE", run_id=RUN, outputs=[ol_dataset("s3://beta", "secret")])
    text = json.dumps(event)
    repeated = text[:-1] + ', "outputs": []}'  # outputs twice: the first names beta's dataset
    status, _, body = forwarding(writer).request("POST", "/api/v1/lineage", repeated.encode())
    assert (status, body["error"]["code"]) == (400, "invalid_event"), body
    assert "a key is repeated in an object" in body["error"]["message"], body
    assert queued(catalog_path) == []
    status, _, answer = forwarding(writer).request("POST", "/api/v1/lineage/batch", f"[{text}, {repeated}]".encode())
    assert (status, [f["index"] for f in answer["failed_events"]]) == (200, [1]), answer
    assert [payload for _, _, payload, _ in queued(catalog_path)] == [text]
    status, _, body = forwarding(writer, forward=False).request(
        "POST", "/api/v1/lineage", repeated.replace(RUN, RUN[:-1] + "9").encode()
    )
    assert (status, body["status"]) == (201, "accepted"), body
    # (a review of the check) laid out as a pretty printer lays it out, empty objects and arrays
    # with white space inside ("facets" : { }, "inputs" : [ ]): no key repeated, taken
    pretty = json.dumps(ol_run_event("COMPLETE", run_id=RUN[:-1] + "8", facets={}), indent=2)
    pretty = pretty.replace("{}", "{ }").replace("[]", "[\n  ]")
    assert "{ }" in pretty and "[\n  ]" in pretty
    status, _, body = forwarding(writer).request("POST", "/api/v1/lineage", pretty.encode())
    assert (status, body["status"]) == (201, "accepted"), body
    assert [p for _, _, p, _ in queued(catalog_path)][-1] == pretty


def test_the_batch_splitter_keeps_each_element_as_written() -> None:
    elements = [b'{"a":"x,]}\\"["}', b"[1, [2, {}]]", b'"s"', b"null", b"-1.50e3", '{"k":"é\\u00e9"}'.encode()]
    body = b"\n[ " + b" ,\n\t".join(elements) + b" ]\n"
    assert split_array(body) == elements
    assert split_array(b"[]") == [] and split_array(b" [ ] ") == []


def test_without_forward_nothing_is_queued(writer: GroupWriter, catalog_path: str) -> None:
    status, _, _ = forwarding(writer, forward=False).request("POST", "/api/v1/lineage", ODD.encode())
    assert status == 201
    with Catalog(catalog_path) as catalog:
        assert table_contents(catalog)["outbox"] == []
        assert catalog.count_received()["received_events"] == 1


def test_an_event_is_recorded_only_with_its_outbox_row(writer: GroupWriter, catalog_path: str) -> None:
    """The row is written in the transaction that records the event: when it cannot be, the
    event is not taken either (503: the producer sends it again) and nothing changed."""
    client = forwarding(writer)
    with Catalog(catalog_path) as other:
        before = table_contents(other)
        other._conn.execute("ALTER TABLE outbox RENAME TO outbox_away")
    status, _, body = client.request("POST", "/api/v1/lineage", ODD.encode())
    assert (status, body["error"]["code"]) == (503, "unavailable")
    with Catalog(catalog_path) as other:
        other._conn.execute("ALTER TABLE outbox_away RENAME TO outbox")
        assert table_contents(other) == before
    status, _, body = client.request("POST", "/api/v1/lineage", ODD.encode())  # the producer's retry
    assert (status, body["status"]) == (201, "accepted")
    assert [row[2] for row in queued(catalog_path)] == [ODD]


def test_the_stream_sends_forwarded_events_as_they_came_and_keeps_refused_ones_as_dead_letters(
    writer: GroupWriter, catalog_path: str, resolver: Resolver
) -> None:
    client = forwarding(writer)
    other = ol_run_event("START", run_id="0194a1b2-0000-7000-8000-000000000002")
    assert client.request("POST", "/api/v1/lineage", ODD.encode())[0] == 201
    assert client.post("/api/v1/lineage", other)[0] == 201
    refuse_other = lambda event, attempt: Reply(422) if event["run"]["runId"].endswith("2") else ACCEPT  # noqa: E731
    with Backend(refuse_other) as backend, Catalog(catalog_path) as catalog:
        dispatcher = Dispatcher(HttpSender(backend.url), concurrency=1)
        stats = StreamWorker(catalog, Converter(resolver), dispatcher, policy=RetryPolicy(base=0)).run(once=True)
        dispatcher.close()
        assert (stats.delivered, stats.dead) == (1, 1)
        assert backend.raw == [ODD.encode()]
        (dead,) = catalog.outbox.items(dead=True)
        assert (dead.kind, dead.last_status) == (FORWARD, 422)


# --- the real client, a real receiver and stream, a backend down, then flapping, then up ---------


def _outbox(path: str, query: str) -> Any:
    with Catalog(path) as catalog:
        return catalog._conn.execute(query).fetchone()[0]


def test_the_openlineage_client_through_serve_forward_and_stream_to_a_backend_down_then_flapping(
    catalog_target: str,
) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import (
        DatasetEvent,
        InputDataset,
        Job,
        JobEvent,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
        StaticDataset,
    )
    from openlineage.client.facet_v2 import schema_dataset
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    sent: list[str] = []

    class Recording(HttpTransport):
        """The client's HTTP transport, keeping the text of each event it sends."""

        def _prepare_request(self, event_str: str) -> tuple[bytes | str, dict[str, str]]:
            sent.append(event_str)
            return super()._prepare_request(event_str)

    catalog = catalog_target
    port = free_port()  # the backend's: nothing listens there yet
    with token_server(catalog, "--forward") as (url, _process):
        for compression in (None, "gzip"):
            config: dict[str, Any] = {"type": "http", "url": url, "auth": {"type": "api_key", "apiKey": TOKEN}}
            if compression:
                config["compression"] = compression
            client = OpenLineageClient(transport=Recording(HttpConfig.from_dict(config)))
            for n in range(3):
                run_id = f"0194a1b2-0000-7000-8000-{int(compression is not None):08d}{n:04d}"
                job = Job(namespace="spark_integration", name=f"etl.load_{n}")
                raw = InputDataset("s3://landing", f"orders/{n}.parquet")
                table = OutputDataset(
                    "postgres://warehouse:5432",
                    f"shop.public.orders_{n}",
                    facets={
                        "schema": schema_dataset.SchemaDatasetFacet(
                            fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="BIGINT")]
                        )
                    },
                )
                for state, minute in ((RunState.START, 0), (RunState.RUNNING, 1), (RunState.COMPLETE, 5)):
                    client.emit(
                        RunEvent(
                            eventType=state,
                            eventTime=f"2025-03-01T08:0{minute}:00Z",
                            run=Run(runId=run_id),
                            job=job,
                            inputs=[raw],
                            outputs=[table] if state == RunState.COMPLETE else [],
                            producer=PRODUCER,
                        )
                    )
        client.emit(
            DatasetEvent(
                eventTime="2025-03-01T09:00:00Z", producer=PRODUCER, dataset=StaticDataset("kafka://b:9092", "t")
            )
        )
        client.emit(
            JobEvent(
                eventTime="2025-03-01T09:00:00Z",
                producer=PRODUCER,
                job=Job(namespace="airflow", name="publish"),
                inputs=[InputDataset("postgres://warehouse:5432", "shop.public.orders_0")],
                outputs=[OutputDataset("kafka://b:9092", "t")],
            )
        )
        distinct = list(dict.fromkeys(sent))
        client.transport.emit(json.loads(distinct[0]))  # sent again: the receiver knows it
    assert len(distinct) == 20
    assert _outbox(catalog, "SELECT count(*) FROM outbox WHERE kind = 'forward'") == 20

    answers = itertools.count()

    def flapping(event: dict[str, Any], attempt: int) -> Reply:
        n = next(answers)
        if phase == "up" or n % 2 == 0:
            return ACCEPT
        return Reply((500, 502, 503)[n % 3], "busy")

    phase = "flapping"
    backend = Backend(flapping, port=port)
    command = [OLBRIDGE, "--catalog", catalog, "stream", "--url", backend.url, "--poll", "0.05"]
    stream = subprocess.Popen(
        [*command, "--backoff", "0.05", "--max-backoff", "0.3", "--concurrency", "2", "--batch-size", "4"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # down: nothing listens; the events are tried, and stay queued
        assert wait_for(lambda: _outbox(catalog, "SELECT max(attempts) FROM outbox") >= 2, timeout=60)
        assert _outbox(catalog, "SELECT count(*) FROM outbox WHERE state = 'pending'") == 20
        backend.start()  # flapping: 5xx and 201 in turn
        assert wait_for(lambda: backend.arrived - backend.accepted_count >= 6 and backend.accepted_count >= 3, 60)
        phase = "up"
        assert wait_for(lambda: _outbox(catalog, "SELECT count(*) FROM outbox") == 0, timeout=60)
        stream.send_signal(signal.SIGTERM)
        _, stderr = stream.communicate(timeout=30)
        assert stream.returncode == 0, stderr
        assert "HTTP 5xx" in stderr and "connection refused" in stderr  # each failure said
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait()
        backend.stop()
    expected = [json.loads(text) for text in distinct]
    counts = backend.counts(expected)
    assert (counts["delivered"], counts["duplicated"], counts["lost"], counts["unexpected"]) == (20, 0, 0, 0)
    assert sorted(backend.raw) == sorted(text.encode() for text in distinct)  # byte for byte as the client sent
    assert backend.out_of_order_runs() == []
    order = [(e["run"]["runId"], e["eventType"]) for e in backend.accepted if "run" in e]
    for run_id in {r for r, _ in order}:
        assert [t for r, t in order if r == run_id] == ["START", "RUNNING", "COMPLETE"]


def test_hand_formatted_gzipped_bodies_go_through_serve_forward_and_stream_byte_for_byte(catalog_target: str) -> None:
    """The real processes: ``serve --forward`` takes a gzipped single event and a gzipped batch,
    each written by hand (spaces, newlines, its own key order, ``\\u`` escapes, a fraction with
    a trailing zero: text no JSON library writes back), and ``stream --once`` delivers to a
    loopback backend the very bytes each event was written with, not the event as read."""
    complete = (
        (
            '{"eventType" :"COMPLETE",\t"producer":"PRODUCER", "eventTime": "2025-03-01T08:05:00.000+00:00",\n'
            '   "job": { "namespace": "airflow", "name": "dag.task" }, "run": {"runId": "RUN"},'
            ' "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",'
            ' "outputs": [{"name": "r\\u00e9sum\\u00e9s", "namespace": "s3://b"}]}'
        )
        .replace("RUN", RUN)
        .replace("PRODUCER", PRODUCER)
    )
    dataset = (
        (
            '{\n  "schemaURL" : "DATASET_URL",\n  "producer" : "PRODUCER",\n'
            '  "eventTime" : "2025-03-01T09:00:00Z",\n'
            '  "dataset" : { "name" : "orders\\/2025", "namespace" : "kafka://broker:9092" }\n}'
        )
        .replace("DATASET_URL", DATASET_EVENT_URL)
        .replace("PRODUCER", PRODUCER)
    )
    for text in (ODD, complete, dataset):  # none is what the standard library or orjson would write
        assert text.strip() not in (json.dumps(json.loads(text)), json.dumps(json.loads(text), separators=(",", ":")))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
    with token_server(catalog_target, "--forward") as (url, _process):
        single = requests.post(f"{url}/api/v1/lineage", data=gzip.compress(ODD.encode()), headers=headers, timeout=10)
        assert single.status_code == 201, single.text
        body = f"\n[ {complete} ,\n\t{dataset}\n]\n".encode()
        batch = requests.post(f"{url}/api/v1/lineage/batch", data=gzip.compress(body), headers=headers, timeout=10)
        assert batch.status_code == 200 and batch.json()["summary"]["successful"] == 2, batch.text
    with Backend() as backend:
        sent = subprocess.run(
            [OLBRIDGE, "--catalog", catalog_target, "stream", "--url", backend.url, "--once"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sent.returncode == 0, sent.stderr
        assert sorted(backend.raw) == sorted(text.encode() for text in (ODD, complete, dataset))
    assert _outbox(catalog_target, "SELECT count(*) FROM outbox") == 0
