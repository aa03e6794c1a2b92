"""The receiver over HTTP: the WSGI app called directly for every answer it gives, and a real
``olbridge serve`` fed by the real openlineage-python client."""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from bridge.canonical import canonical
from bridge.catalog import Catalog, ingest
from bridge.catalog.postgres.engine import PostgresEngine
from bridge.mapping import Resolver
from bridge.receiver.app import GZIP_MEMBERS, ReceiverApp
from bridge.receiver.intake import Intake, Limits
from bridge.receiver.metrics import Metrics
from bridge.receiver.outcome import Outcome
from tests.backend import free_port
from tests.group_writer import GroupWriter
from tests.helpers import (
    DATASET_EVENT_URL,
    PRODUCER,
    mutated,
    ol_dataset,
    ol_run_event,
    serve_process,
    table_contents,
)
from tests.postgres import PostgresServer

TOKEN = "s3cret-token"


class Client:
    """Calls a WSGI app in-process, as a server would, with ``token`` as its bearer (None: none)."""

    def __init__(self, app: ReceiverApp, token: str | None = TOKEN) -> None:
        self.app = app
        self.token = token

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json",
            "wsgi.input": io.BytesIO(body),
        }
        if self.token is not None:
            environ["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        for key, value in (headers or {}).items():
            name = key.upper().replace("-", "_")
            environ[name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{name}"] = value
        answer: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
            answer["status"] = int(status.split()[0])
            answer["headers"] = dict(response_headers)

        payload = b"".join(self.app(environ, start_response))
        is_json = answer["headers"].get("Content-Type") == "application/json"
        return answer["status"], answer["headers"], json.loads(payload) if is_json else payload.decode()

    def post(self, path: str, value: Any, **headers: str) -> tuple[int, dict[str, str], Any]:
        return self.request("POST", path, json.dumps(value).encode(), headers)


pytestmark = pytest.mark.both_engines


@pytest.fixture
def client(writer: GroupWriter) -> Client:
    limits = Limits(max_body=64 * 1024, max_decompressed=256 * 1024, max_batch=50, max_datasets=20)
    return Client(ReceiverApp(Intake(writer.submit, limits=limits), token=TOKEN, ready=lambda: None))


def contents(path: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    with Catalog(path) as catalog:
        return table_contents(catalog)


def test_one_event_is_created_as_marquez_answers(client: Client, catalog_path: str) -> None:
    status, _, body = client.post("/api/v1/lineage", ol_run_event(inputs=[ol_dataset("s3://b", "k")]))
    assert status == 201
    assert body["status"] == "accepted"
    assert body["placeholders"] == ["s3://b/k"]
    with Catalog(catalog_path) as catalog:
        assert catalog.asset("s3://b/k").origin.value == "external"
    again = client.post("/api/v1/lineage", ol_run_event(inputs=[ol_dataset("s3://b", "k")]))
    assert (again[0], again[2]["status"]) == (201, "duplicate")


def test_a_batch_answers_per_event(client: Client, catalog_path: str) -> None:
    good = ol_run_event(inputs=[ol_dataset("s3://b", "k")])
    bad = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000009")
    del bad["job"]
    dataset_event = {
        "eventTime": "2025-03-01T08:00:00Z",
        "producer": PRODUCER,
        "schemaURL": DATASET_EVENT_URL,
        "dataset": ol_dataset("kafka://broker:9092", "orders"),
    }
    status, _, body = client.post("/api/v1/lineage/batch", [good, bad, dataset_event])
    assert status == 200
    assert body["status"] == "partial_success"
    assert body["summary"] == {"received": 3, "successful": 2, "failed": 1, "retriable": 0, "non_retriable": 1}
    (failed,) = body["failed_events"]
    assert (failed["index"], failed["retriable"]) == (1, False)
    assert failed["problems"][0]["message"] == "'job' is required"
    all_good = client.post("/api/v1/lineage/batch", [dataset_event])
    assert (all_good[0], all_good[2]["status"]) == (200, "success")
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 2


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_time_marquez_reads_past_the_years_the_catalog_keeps_is_refused_and_the_rest_land(
    client: Client, catalog_path: str, moment: str
) -> None:
    """Year 10000 or year 0 once in UTC: Marquez stores it, the catalog (UTC times) cannot; a 400
    that says so, not a 500, and the batch's other events land."""
    far = {**ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000009"), "eventTime": moment}
    status, _, body = client.post("/api/v1/lineage", far)
    assert (status, body["error"]["code"], body["error"]["retriable"]) == (400, "invalid_event", False)
    assert body["error"]["problems"][0]["pointer"] == "/eventTime"
    assert "outside the years 1 to 9999 once in UTC" in body["error"]["message"]
    status, _, body = client.post("/api/v1/lineage/batch", [far, ol_run_event()])
    assert (status, body["summary"]["successful"], body["summary"]["failed"]) == (200, 1, 1)
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 1


def test_gzip_bodies_are_read(client: Client) -> None:
    body = gzip.compress(json.dumps(ol_run_event()).encode())
    status, _, answer = client.request("POST", "/api/v1/lineage", body, {"Content-Encoding": "gzip"})
    assert (status, answer["status"]) == (201, "accepted")


def test_the_bearer_token_is_required(client: Client) -> None:
    status, headers, body = client.post("/api/v1/lineage", ol_run_event(), Authorization="Bearer wrong")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert body["error"]["code"] == "unauthorized"
    assert client.request("POST", "/api/v1/lineage", b"{}", {"Authorization": ""})[0] == 401


def test_the_bearer_scheme_is_read_in_any_case(client: Client, catalog_path: str) -> None:
    """An authentication scheme is case-insensitive (RFC 9110): ``bearer <token>`` was refused 401."""
    for scheme in ("bearer", "BEARER", "bEaReR"):
        status, _, body = client.post("/api/v1/lineage", ol_run_event(), Authorization=f"{scheme} {TOKEN}")
        assert status == 201, (scheme, body)
    before = contents(catalog_path)
    for wrong in (f"bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, f"bearer{TOKEN}", "bearer"):
        other = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000002")
        status, _, body = client.post("/api/v1/lineage", other, Authorization=wrong)
        assert (status, body["error"]["code"]) == (401, "unauthorized"), wrong
    assert contents(catalog_path) == before


def _nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def _deep_event(depth: int) -> dict[str, Any]:
    event = ol_run_event()
    value: Any = 1
    for _ in range(depth):
        value = {"x": value}
    event["run"]["facets"] = {
        "acme_deep": {"_producer": PRODUCER, "_schemaURL": "https://acme.example/d.json", "v": value}
    }
    return event


def _deep_text(depth: int, number: str = "1") -> bytes:
    """An event whose run facet nests ``depth`` objects deep around ``number``, as text (the
    standard library's writer would not go that deep)."""
    text = _json(_deep_event(1)).decode().replace('{"x": 1}', '{"x":' * depth + number + "}" * depth)
    return text.encode()


def _facet_text(value: str) -> bytes:
    """An event with a run facet whose field ``v`` is ``value``, JSON text as it is."""
    text = _json(_deep_event(1)).decode().replace('{"x": 1}', value)
    return text.encode()


def _with(path: str, value: Any) -> dict[str, Any]:
    return mutated(ol_run_event(inputs=[ol_dataset("s3://b", "k")]), path, value)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# (name, body, headers, status, error code, JSON pointer of the first problem or None)
BAD_INPUTS: list[tuple[str, bytes, dict[str, str], int, str, str | None]] = [
    ("malformed JSON", b'{"eventTime": ', {}, 400, "bad_json", None),
    ("not JSON at all", b"hello", {}, 400, "bad_json", None),
    ("invalid UTF-8", b'{"producer": "\xff\xfe"}', {}, 400, "bad_utf8", None),
    (  # valid UTF-8 bytes too; the standard library, given bytes, read it as UTF-16 (16 digit bytes sent it there)
        "UTF-16 JSON",
        json.dumps(_with("job/name", "\u3030" * 8), ensure_ascii=False).encode("utf-16-le"),
        {},
        400,
        "bad_json",
        None,
    ),
    ("an array on the single endpoint", _json([ol_run_event()]), {}, 400, "batch_on_single", None),
    ("not an object", _json("event"), {}, 400, "invalid_event", ""),
    ("eventTime a number", _json(_with("eventTime", 5)), {}, 400, "invalid_event", "/eventTime"),
    ("eventTime a bare date", _json(_with("eventTime", "2025-03-01")), {}, 400, "invalid_event", "/eventTime"),
    ("eventTime not a date", _json(_with("eventTime", "yesterday")), {}, 400, "invalid_event", "/eventTime"),
    ("no producer", _json(_with("producer", KeyError)), {}, 400, "invalid_event", ""),
    ("no run", _json(_with("run", KeyError)), {}, 400, "invalid_event", ""),
    ("runId a number", _json(_with("run/runId", 42)), {}, 400, "invalid_event", "/run/runId"),
    ("no job name", _json(_with("job/name", KeyError)), {}, 400, "invalid_event", "/job"),
    ("inputs an object", _json(_with("inputs", {"a": 1})), {}, 400, "invalid_event", "/inputs"),
    ("dataset without name", _json(_with("inputs/0/name", KeyError)), {}, 400, "invalid_event", "/inputs/0"),
    (
        "namespace Marquez refuses",
        _json(_with("inputs/0/namespace", "s3 bucket?")),
        {},
        400,
        "invalid_event",
        "/inputs/0/namespace",
    ),
    ("job namespace too long", _json(_with("job/namespace", "n" * 1025)), {}, 400, "invalid_event", "/job/namespace"),
    # (a review) past what PostgreSQL's indexes keep: a 400 without a pointer naming an index and a
    # tuple there, a 201 on SQLite; both refuse them now, saying where
    ("job name past the keys", _json(_with("job/name", "j" * 2800)), {}, 400, "invalid_event", "/job/name"),
    (
        "job namespace and name past the keys",
        _json(_with("job", {"namespace": "n" * 1024, "name": "j" * 177})),
        {},
        400,
        "invalid_event",
        "/job/name",
    ),
    ("runId past the keys", _json(_with("run/runId", "r" * 256)), {}, 400, "invalid_event", "/run/runId"),
    (
        "dataset name past the keys",
        _json(_with("outputs", [ol_dataset("s3://b", "\u00e9" * 1_000)])),
        {},
        400,
        "invalid_event",
        "/outputs/0/name",
    ),
    (
        "symlink name past the keys",
        _json(
            _with(
                "inputs",
                [
                    ol_dataset(
                        "s3://b",
                        "k",
                        symlinks={"identifiers": [{"namespace": "hive://m", "name": "t" * 3000, "type": "TABLE"}]},
                    )
                ],
            )
        ),
        {},
        400,
        "invalid_event",
        "/inputs/0/facets/symlinks/identifiers/0/name",
    ),
    ("NUL in a name", _json(_with("job/name", "a\u0000b")), {}, 400, "invalid_event", "/job/name"),
    ("facet key too long", _json(_with("run/facets", {"k" * 256: {}})), {}, 400, "invalid_event", None),
    (
        "parent facet without run id",
        _json(
            _with(
                "run/facets",
                {
                    "parent": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
                        "run": {},
                        "job": {"namespace": "a", "name": "b"},
                    }
                },
            )
        ),
        {},
        400,
        "invalid_event",
        "/run/facets/parent/run",
    ),
    ("deep nesting", _json(_deep_event(80)), {}, 400, "invalid_event", ""),
    ("nesting too deep to parse", _nested(20_000), {}, 400, "too_deep", None),
    # (#30) nested deeper than the standard library writes, within what orjson reads: was a 500
    ("nesting 1,000 deep in a facet", _deep_text(1_000), {}, 400, "invalid_event", ""),
    ("nesting 1,000 deep, with 16 digits", _deep_text(1_000, "1234567890123456"), {}, 400, "invalid_event", ""),
    ("nesting 1,020 deep, with 16 digits", _deep_text(1_020, "1234567890123456"), {}, 400, "invalid_event", ""),
    ("NaN", _facet_text("NaN"), {}, 400, "bad_json", None),
    ("Infinity with 16 digits", _facet_text("[-Infinity, 1234567890123456]"), {}, 400, "bad_json", None),
    ("a lone surrogate", _facet_text('"\\ud800"'), {}, 400, "bad_json", None),
    ("a lone surrogate with 16 digits", _facet_text('["\\udc00", 1234567890123456]'), {}, 400, "bad_json", None),
    (
        "too many datasets",
        _json(_with("inputs", [ol_dataset("s3://b", f"k{i}") for i in range(21)])),
        {},
        400,
        "invalid_event",
        "",
    ),
    ("huge body", b" " * (64 * 1024 + 1), {}, 413, "body_too_large", None),
    (  # a WSGI server's input that ends short: the client went away (was taken for the whole body)
        "a body cut short",
        _json(ol_run_event()),
        {"Content-Length": str(len(_json(ol_run_event())) + 1000)},
        499,
        "client_closed",
        None,
    ),
    ("gzip bomb", gzip.compress(b" " * (10 * 1024 * 1024)), {"Content-Encoding": "gzip"}, 413, "body_too_large", None),
    ("broken gzip", b"\x1f\x8b\x08\x00garbage", {"Content-Encoding": "gzip"}, 400, "bad_gzip", None),
    ("unknown encoding", _json(ol_run_event()), {"Content-Encoding": "br"}, 415, "unsupported_encoding", None),
    ("not JSON content", _json(ol_run_event()), {"Content-Type": "text/plain"}, 415, "unsupported_media_type", None),
    (  # (a review) read as UTF-8 whatever the charset said: another text kept than the client meant
        "a Latin-1 charset",
        _json(_with("job/name", "\u00c3\u00a9")).decode().encode("latin-1"),
        {"Content-Type": "application/json; charset=iso-8859-1"},
        415,
        "unsupported_media_type",
        None,
    ),
    (
        "a UTF-16 charset",
        _json(ol_run_event()),
        {"Content-Type": 'application/json; Charset="UTF-16"'},
        415,
        "unsupported_media_type",
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "headers", "status", "code", "pointer"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_inputs_are_refused_with_a_clear_answer_and_change_nothing(
    client: Client,
    catalog_path: str,
    name: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
    pointer: str | None,
) -> None:
    before = contents(catalog_path)
    got, response_headers, answer = client.request("POST", "/api/v1/lineage", body, headers)
    assert got == status, answer
    assert response_headers["Content-Type"] == "application/json"
    error = answer["error"]
    assert (error["status"], error["code"], error["retriable"]) == (status, code, False)
    assert error["message"]
    if pointer is not None:
        assert error["problems"][0]["pointer"] == pointer, error
    assert contents(catalog_path) == before


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", 'Application/JSON;CHARSET="UTF-8"', "application/json; charset=us-ascii"],
)
def test_a_utf8_charset_is_taken(client: Client, catalog_path: str, content_type: str) -> None:
    """JSON is UTF-8 (RFC 8259): a charset that says so is taken, in any case, quoted or not."""
    got, _, answer = client.request("POST", "/api/v1/lineage", _json(ol_run_event()), {"Content-Type": content_type})
    assert got == 201, answer
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 1


def test_names_as_long_as_the_catalog_keys_are_taken_on_both_engines(client: Client, catalog_path: str) -> None:
    """At the bounds (a job's namespace and name 1,200 bytes together, a dataset's 2,000, a runId 255):
    taken on PostgreSQL as on SQLite, as a run, a job and a dataset (and a column edge whose
    transformations are past what an edge keeps: the event taken, that edge left out, said)."""
    namespace = "n" * 1024
    long_run = "r" * 255
    edge = {
        "fields": {
            "c": {
                "inputFields": [
                    {
                        "namespace": "s3://b",
                        "name": "k",
                        "field": "c",
                        "transformations": [{"type": "DIRECT", "description": "d" * 600}],
                    }
                ]
            },
            "e": {"inputFields": [{"namespace": "s3://b", "name": "k", "field": "e"}]},
        }
    }
    run = ol_run_event(
        run_id=long_run,
        job=(namespace, "j" * 176),
        inputs=[ol_dataset("s3://b", "k")],
        outputs=[
            ol_dataset(
                "s3://b",
                "o" * (2000 - 6),
                columnLineage=edge,
                symlinks={"identifiers": [{"namespace": "hive://m", "name": "t" * (2000 - 8), "type": "TABLE"}]},
            )
        ],
    )
    job = {
        **ol_run_event(job=(namespace, "k" * 176)),
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
    }
    del job["run"], job["eventType"]
    answers = [client.post("/api/v1/lineage", event) for event in (run, job)]
    assert [status for status, _, _ in answers] == [201, 201], answers
    assert [w for w in answers[0][2]["warnings"] if "left out" in w] == [
        "columnLineage of output s3://b " + "o" * 1994 + ": an edge is left out: its transformations are longer "
        "than the catalog keeps (columns 255, transformations 512, an input 2,000 bytes)"
    ]
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 2
        edges = catalog._conn.execute("SELECT downstream_column FROM column_lineage").fetchall()
        assert sorted(c for (c,) in edges) == ["e"], edges


def test_a_key_past_postgresql_s_index_entries_is_said_in_a_line() -> None:
    """An event whose key PostgreSQL's index refuses (class 54: an entry past about 2,700 bytes,
    which the receiver's bounds leave only to ids of many-byte characters) was refused with the
    server's text: an index's name, a tuple's place, a hint to hash the column. It says why in a
    line; another refusal keeps its first line, without the server's detail."""
    engine = PostgresEngine("postgresql://olbridge@localhost/catalog")
    limit = psycopg.errors.ProgramLimitExceeded(
        'index row size 2896 exceeds btree version 4 maximum 2704 for index "external_sources_job"\n'
        'DETAIL:  Index row references tuple (147,8) in relation "external_sources".\nHINT:  Consider a hash'
    )
    said = str(ingest._event_error(engine, limit))
    assert said == (
        "the catalog cannot store the event: a name or value in it is longer than the catalog's indexes keep "
        "(about 2,700 bytes an entry)"
    )
    check = psycopg.errors.CheckViolation('new row violates check constraint "x"\nDETAIL:  Failing row contains (...)')
    assert str(ingest._event_error(engine, check)) == (
        'the catalog cannot store the event: new row violates check constraint "x"'
    )


def test_an_event_nested_deep_in_a_batch_is_refused_alone(client: Client, catalog_path: str) -> None:
    """(#30) One event nested 1,000 deep in a batch was a 500 that took none of the good ones."""
    good = _json(ol_run_event(inputs=[ol_dataset("s3://b", "k")]))
    for deep in (_deep_text(1_000), _deep_text(1_000, "12345678901234567890123")):
        status, _, answer = client.request("POST", "/api/v1/lineage/batch", b"[" + good + b"," + deep + b"]")
        assert status == 200, answer
        assert [f["index"] for f in answer["failed_events"]] == [1]
        assert "deeper than" in answer["failed_events"][0]["reason"]
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 1


def test_long_integers_are_kept_exact_beside_a_deep_event(client: Client, catalog_path: str) -> None:
    """Integers past 64 bits are read exactly in every event that nests within the parser's depth."""
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000009")
    event["run"]["facets"] = {
        "acme": {"_producer": PRODUCER, "_schemaURL": "https://acme.example/d.json", "v": 2**70 + 1}
    }
    body = b"[" + _json(event) + b"," + _deep_text(300) + b"]"
    status, _, answer = client.request("POST", "/api/v1/lineage/batch", body)
    assert (status, answer["summary"]["successful"]) == (200, 1), answer
    assert str(2**70 + 1) in str(contents(catalog_path))


def test_integers_of_up_to_max_digits_are_kept_exact_and_longer_ones_refused_where_they_are(
    client: Client, catalog_path: str
) -> None:
    """Integers of 309 digits or more were refused (``bad_json: number is infinity when parsed as
    double``), though docs/receiver.md said integers of any size were read exactly: up to 1,000
    digits (what Jackson reads by default) they are; a longer one is refused, saying where."""
    numbers = [int("9" * 309), -int("7" * 1_000), 2**70 + 1]
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-00000000000c")
    event["run"]["facets"] = {
        "acme": {"_producer": PRODUCER, "_schemaURL": "https://acme.example/d.json", "v": numbers}
    }
    status, _, answer = client.post("/api/v1/lineage", event)
    assert status == 201, answer
    kept = str(contents(catalog_path))
    assert all(str(number) in kept for number in numbers)
    before = contents(catalog_path)
    event["run"]["facets"]["acme"]["v"] = [1, int("8" * 1_001)]
    body = _json(event)
    status, _, answer = client.request("POST", "/api/v1/lineage", body)
    at = body.index(b"8" * 1_001)
    assert (status, answer["error"]["code"]) == (400, "bad_json"), answer
    assert answer["error"]["message"] == (
        f"the body is not JSON: an integer of 1001 digits: at most 1000 are read: line 1 column {at + 1} (char {at})"
    )
    event["run"]["facets"]["acme"]["v"] = "HERE"
    for number in (b"1" + b"0" * 400 + b".5", b"1e" + b"0" * 400 + b"999"):  # floats past a double's range
        status, _, answer = client.request("POST", "/api/v1/lineage", _json(event).replace(b'"HERE"', number))
        assert (status, answer["error"]["code"]) == (400, "bad_json"), answer
        assert "number is infinity when parsed as double" in answer["error"]["message"]
    assert contents(catalog_path) == before


def test_a_body_refused_as_json_is_not_searched_for_long_integers_it_does_not_hold(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body orjson refuses is searched for a run of 309 digits or more (an integer it would read
    as a double past its range), by a pattern that takes seconds over tens of MB of anything: a
    gzipped body of 63 MiB of spaces (61 KB) held a worker's loop 3.7 s before its 400. The
    pattern runs only where a substring search over the digits finds such a run."""
    from bridge import jsontext

    pattern, searched = jsontext._PAST_DOUBLES, []

    class Watched:
        def search(self, body: bytes) -> object:
            searched.append(len(body))
            return pattern.search(body)

        def sub(self, *args: Any) -> bytes:
            return pattern.sub(*args)

    monkeypatch.setattr(jsontext, "_PAST_DOUBLES", Watched())
    status, _, answer = client.request(
        "POST", "/api/v1/lineage", gzip.compress(b" " * 200_000 + b"{"), {"Content-Encoding": "gzip"}
    )
    assert (status, answer["error"]["code"]) == (400, "bad_json") and searched == [], (answer, searched)
    status, _, answer = client.request("POST", "/api/v1/lineage", b"[" + b"9" * 309 + b", x]")
    assert (status, answer["error"]["code"]) == (400, "bad_json") and len(searched) == 1, (answer, searched)


def test_gzip_members_are_all_read(client: Client, catalog_path: str) -> None:
    """(#30) ``(gzip -c e1; gzip -c e2)`` is one body of both members, as gzip -d reads it; only
    the first was read, and the rest dropped without a word."""
    first = ol_run_event(inputs=[ol_dataset("s3://b", "k1")])
    second = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000009", inputs=[ol_dataset("s3://b", "k2")])
    body = gzip.compress(b"[" + _json(first) + b",") + gzip.compress(_json(second) + b"]")
    status, _, answer = client.request("POST", "/api/v1/lineage/batch", body, {"Content-Encoding": "gzip"})
    assert (status, answer["summary"]["successful"]) == (200, 2), answer
    # one event a member on the single endpoint: two JSON values, refused whole
    before = contents(catalog_path)
    third = ol_run_event(run_id="0194a1b2-0000-7000-8000-00000000000a")
    body = gzip.compress(_json(third)) + gzip.compress(
        _json(ol_run_event(run_id="0194a1b2-0000-7000-8000-00000000000b"))
    )
    status, _, answer = client.request("POST", "/api/v1/lineage", body, {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (400, "bad_json")
    # a second member past the limit, or broken: the whole body refused
    big = gzip.compress(_json(third)) + gzip.compress(b" " * (256 * 1024))
    status, _, answer = client.request("POST", "/api/v1/lineage", big, {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (413, "body_too_large")
    broken = gzip.compress(_json(third)) + gzip.compress(b" " * 100)[:-4]
    status, _, answer = client.request("POST", "/api/v1/lineage", broken, {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (400, "bad_gzip")
    assert contents(catalog_path) == before


def test_a_gzip_body_of_more_members_than_any_client_sends_is_refused(client: Client, catalog_path: str) -> None:
    """Each gzip member costs an inflater's start (a body of 800,000 empty ones held a worker for
    minutes): GZIP_MEMBERS are read, one more is refused whole, saying why."""
    text = _json(ol_run_event(inputs=[ol_dataset("s3://b", "k")]))
    cuts = [len(text) * n // GZIP_MEMBERS for n in range(GZIP_MEMBERS + 1)]
    members = b"".join(gzip.compress(text[a:b]) for a, b in itertools.pairwise(cuts))
    status, _, answer = client.request("POST", "/api/v1/lineage", members, {"Content-Encoding": "gzip"})
    assert (status, answer["status"]) == (201, "accepted"), answer
    before = contents(catalog_path)
    body = (
        gzip.compress(_json(ol_run_event(run_id="0194a1b2-0000-7000-8000-00000000ffff")))
        + gzip.compress(b"") * GZIP_MEMBERS
    )
    status, _, answer = client.request("POST", "/api/v1/lineage", body, {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (400, "bad_gzip")
    assert answer["error"]["message"] == (
        f"the gzip body has more than {GZIP_MEMBERS} members; this receiver reads at most {GZIP_MEMBERS}"
    )
    assert contents(catalog_path) == before


def test_batch_limits(client: Client) -> None:
    status, _, body = client.post("/api/v1/lineage/batch", [ol_run_event()] * 51)
    assert (status, body["error"]["code"]) == (413, "batch_too_large")
    status, _, body = client.post("/api/v1/lineage/batch", ol_run_event())
    assert (status, body["error"]["code"]) == (400, "batch_not_array")


def test_routes_health_readiness_and_metrics(client: Client) -> None:
    assert client.request("GET", "/healthz")[:3:2] == (200, {"status": "ok"})
    assert client.request("GET", "/readyz")[0] == 200
    status, headers, _ = client.request("GET", "/api/v1/lineage")
    assert (status, headers["Allow"]) == (405, "POST")
    assert client.request("GET", "/nowhere")[2]["error"]["code"] == "not_found"
    client.post("/api/v1/lineage", ol_run_event())
    client.post("/api/v1/lineage", ol_run_event())
    client.post("/api/v1/lineage", {"bad": True})
    text = client.request("GET", "/metrics")[2]
    assert 'olbridge_receiver_events_total{result="accepted"} 1' in text
    assert 'olbridge_receiver_events_total{result="duplicate"} 1' in text
    assert 'olbridge_receiver_events_total{result="refused"} 1' in text
    assert 'olbridge_receiver_requests_total{route="/api/v1/lineage",status="201"} 2' in text


def test_a_request_s_outcomes_counted_at_once_count_as_each_alone() -> None:
    """A batch's outcomes are tallied before they reach the shared counters: the counts (events by
    result, placeholders, events with warnings, a token's events by result) are those of counting
    each outcome alone."""
    outcomes = [
        Outcome("accepted", placeholders=("a", "b")),
        Outcome("accepted", warnings=("w1", "w2"), placeholders=("c",)),
        Outcome("duplicate"),
        Outcome("refused", warnings=("w",)),
        Outcome("unavailable"),
        Outcome("accepted"),
    ]
    together, alone = Metrics(["spark"]), Metrics(["spark"])
    together.count(outcomes, "spark")
    together.count(outcomes[:2])  # no token
    for outcome in outcomes:
        alone.count([outcome], "spark")
    for outcome in outcomes[:2]:
        alone.count([outcome])
    counted = together.snapshot()
    assert counted == alone.snapshot()
    assert counted["events"] == {"accepted": 5, "duplicate": 1, "refused": 1, "unavailable": 1}
    assert (counted["placeholders"], counted["eventsWithWarnings"]) == (6, 3)
    assert counted["eventsByToken"]["spark"] == {
        "accepted": 3,
        "duplicate": 1,
        "refused": 1,
        "unavailable": 1,
        "forbidden": 0,
    }


def test_a_catalog_that_cannot_commit_answers_503_and_keeps_nothing(tmp_path: Path, resolver: Resolver) -> None:
    catalog_path = tmp_path / "locked.db"
    writer = GroupWriter(catalog_path, resolver, timeout=5)
    writer.catalog._conn.execute("PRAGMA busy_timeout = 100")
    client = Client(ReceiverApp(Intake(writer.submit), token=TOKEN))
    blocker = sqlite3.connect(catalog_path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        status, headers, body = client.post("/api/v1/lineage", ol_run_event())
        assert (status, headers["Retry-After"], body["error"]["retriable"]) == (503, "1", True)
        status, _, body = client.post("/api/v1/lineage/batch", [ol_run_event()])
        assert (status, body["summary"]["retriable"]) == (503, 1)
        blocker.execute("ROLLBACK")
        assert client.post("/api/v1/lineage", ol_run_event())[0] == 201  # the retry lands
    finally:
        blocker.close()
        writer.close()
    assert client.post("/api/v1/lineage", ol_run_event())[0] == 503  # the writer has stopped


def test_a_connection_the_database_ended_answers_503_then_the_writer_connects_again(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver
) -> None:
    """A receiver on PostgreSQL outlives its connection (a failover, a restart, an idle timeout):
    the request in flight is answered 503 (retriable, nothing kept), the next one lands. (SQLite's
    connection is to a file: nothing ends it from outside.)"""
    import psycopg

    catalog_path = postgres.url(postgres.create_database(template=catalog_template))
    writer = GroupWriter(catalog_path, resolver, timeout=10)
    client = Client(ReceiverApp(Intake(writer.submit), token=TOKEN))
    try:
        assert client.post("/api/v1/lineage", ol_run_event(run_id=RUN_IDS[0]))[0] == 201
        with psycopg.connect(catalog_path, autocommit=True) as admin:  # the database ends the writer's session
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'olbridge'"
            ).fetchall()
        assert ended == [(True,)]
        status, headers, body = client.post("/api/v1/lineage", ol_run_event(run_id=RUN_IDS[1]))
        assert (status, headers["Retry-After"], body["error"]["retriable"]) == (503, "1", True)
        assert client.post("/api/v1/lineage", ol_run_event(run_id=RUN_IDS[1]))[0] == 201  # the retry lands
    finally:
        writer.close()
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 2


RUN_IDS = [f"0194a1b2-0000-7000-8000-{n:012d}" for n in range(100, 110)]


def _spec_events(spec_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "example_full_event.json", json.loads((spec_dir / "spec" / "tests" / "example_full_event.json").read_text())
    for path in sorted((spec_dir / "spec" / "tests").glob("*/*.json")):
        facets = json.loads(path.read_text())
        kind = path.parent.name
        event = ol_run_event(inputs=[ol_dataset("s3://b", "in")], outputs=[ol_dataset("s3://b", "out")])
        if kind.endswith("InputDatasetFacet"):
            event["inputs"][0]["inputFacets"] = facets
        elif kind.endswith("OutputDatasetFacet"):
            event["outputs"][0]["outputFacets"] = facets
        elif kind.endswith("DatasetFacet"):
            event["outputs"][0]["facets"] = facets
        elif kind.endswith("RunFacet"):
            event["run"]["facets"] = facets
        else:
            event["job"]["facets"] = facets
        yield f"{kind}/{path.name}", event


# five examples name their facet's schema without a '#/$defs/' fragment: checked by that URL, the
# file's root (a facet container) is applied to the facet, so that check (and only it) fails
UNFRAGMENTED = {
    "EnvironmentVariablesRunFacet/1.json",
    "JobTypeJobFacet/1.json",
    "JobTypeJobFacet/2.json",
    "JobTypeJobFacet/3.json",
    "SourceCodeJobFacet/1.json",
}
# and five name a definition no version of the schemas holds (one since renamed, one of the core
# schema of old): the check says so, rather than leave the facet unchecked
UNRESOLVED = {
    **{
        f"BaseSubsetDatasetFacet/{n}.json": "BaseSubsetDatasetFacet.json#/$defs/InputSubsetDatasetFacet"
        for n in range(1, 5)
    },
    "OutputStatisticsOutputDatasetFacet/1.json": "OpenLineage.json#/definitions/OutputStatisticsOutputDatasetFacet",
}


def test_the_specs_example_events_are_taken(
    spec_dir: Path, official: Callable[[Any], list[str]], client: Client, catalog_path: Path
) -> None:
    events = list(_spec_events(spec_dir))
    assert len(events) == 47  # the spec's full example and its 46 facet examples
    bodies = set()
    for name, event in events:
        bodies.add(canonical(event))
        problems = official(event)
        if name in UNFRAGMENTED:
            problems = [e for e in problems if ".facets." not in e]
        if name in UNRESOLVED:
            (problem,) = problems
            assert ": no schema https://openlineage.io/spec/" in problem and UNRESOLVED[name] in problem, problem
            problems = []
        assert problems == [], name
        status, _, body = client.post("/api/v1/lineage", event)
        assert status == 201, (name, body)
    with Catalog(catalog_path) as catalog:  # each distinct event kept once, none lost
        assert catalog.count_received()["received_events"] == len(bodies)


# --- a real server, the real client -------------------------------------------------------------


@contextlib.contextmanager
def running_server(catalog: Path | str, *options: str) -> Iterator[str]:
    """``olbridge serve`` as a subprocess on a free loopback port, stopped with SIGTERM."""
    with token_server(catalog, *options) as (url, _process):
        yield url


@contextlib.contextmanager
def token_server(
    catalog: Path | str, *options: str, token: str | None = TOKEN
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The same (:func:`tests.helpers.serve_process`) with the supervisor's process, ``token``
    its OLBRIDGE_TOKEN (None for none); it must end cleanly (or by SIGKILL, from the test)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OLBRIDGE_TOKEN", "OLBRIDGE_TOKEN_FILE")}
    with serve_process(catalog, *options, env={**env, "OLBRIDGE_TOKEN": token} if token else env) as served:
        yield served.url, served.process
    assert served.returncode in (0, -signal.SIGKILL), served.stderr


@pytest.fixture
def server(catalog_target: str) -> Iterator[tuple[str, str]]:
    with running_server(catalog_target) as url:
        yield url, catalog_target


def test_sigterm_answers_the_request_in_flight_and_refuses_new_connections_meanwhile(catalog_target: str) -> None:
    """A rolling restart: ``serve`` told to stop with a request in flight (its body still coming)
    answers that request, committed, before it exits; a connection made meanwhile is refused at
    once (the client or its load balancer tries another receiver, knowing nothing was sent), not
    taken into the port's queue and reset when the process ends."""
    first, event = (json.dumps(ol_run_event(run_id=run_id)).encode() for run_id in RUN_IDS[:2])

    def head(body: bytes) -> bytes:
        return (
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: olbridge\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )

    def answer_on(conn: socket.socket) -> bytes:
        """One whole response: its head, then as many bytes as its Content-Length says."""
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < length(answer):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer

    def length(answer: bytes) -> int:
        found = re.search(rb"(?im)^content-length: *(\d+)", answer.split(b"\r\n\r\n", 1)[0])
        return int(found.group(1)) if found else 0

    with (
        token_server(catalog_target, "--workers", "1") as (url, process),
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as slow,
    ):
        port = int(url.rsplit(":", 1)[1])
        slow.sendall(head(first) + first)  # one whole request first: the worker has taken this connection
        assert answer_on(slow).startswith(b"HTTP/1.1 201")
        slow.sendall(head(event) + event[:10])  # then a second one on it, its body still coming
        time.sleep(0.5)  # the worker has read its head: it is in flight
        process.send_signal(signal.SIGTERM)
        refused = False
        for _ in range(100):  # the port closes once the worker has stopped taking connections
            with socket.socket() as probe:
                probe.settimeout(5)
                try:
                    probe.connect(("127.0.0.1", port))
                except ConnectionRefusedError:
                    refused = True
                    break
            time.sleep(0.05)
        assert process.poll() is None, "serve did not wait for the request in flight"
        slow.sendall(event[10:])
        answer = answer_on(slow)
        process.wait(timeout=60)
    assert refused, "a new connection was taken while serve was stopping"
    assert answer.startswith(b"HTTP/1.1 201"), answer[:200]
    with Catalog(catalog_target) as catalog:
        assert catalog.count_received()["received_events"] == 2


def _writer_pid(supervisor: int, catalog: Path) -> int:
    """The supervisor's child that holds the catalog open: the writer process."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    for child in children:
        for fd in Path(f"/proc/{child}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == str(catalog):
                    return int(child)
    raise AssertionError(f"no child of {supervisor} holds {catalog} open")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the writer through /proc (Linux)")
def test_a_killed_writer_is_replaced_and_retried_events_land_once(tmp_path: Path) -> None:
    catalog = tmp_path / "writer.db"
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def send(n: int) -> int:
        event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", inputs=[ol_dataset("s3://b", f"k{n}")])
        for _ in range(50):  # as a client does: retry what is retriable, up to about 10 s
            status = requests.post(f"{url}/api/v1/lineage", json=event, headers=headers, timeout=30).status_code
            if status != 503:
                return status
            time.sleep(0.2)
        return status

    with token_server(catalog) as (url, process):
        assert send(0) == 201
        first = _writer_pid(process.pid, catalog)
        os.kill(first, signal.SIGKILL)
        assert [send(n) for n in range(1, 6)] == [201] * 5
        assert _writer_pid(process.pid, catalog) != first
        assert send(3) == 201  # sent again: a duplicate, taken and not counted twice
        metrics = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
        assert 'olbridge_receiver_events_total{result="accepted"} 6' in metrics
    with Catalog(catalog) as opened:
        assert opened.count_received()["received_events"] == 6


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the processes through /proc (Linux)")
@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_while_a_dead_worker_waits_to_be_replaced_stops_everything(tmp_path: Path, workers: int) -> None:
    """A worker dies, and serve is told to stop in the second before its replacement would start:
    no replacement starts (on the closed port, or serving on unstopped), every process ends (the
    writer too when no worker is left), and serve exits 0."""
    catalog = tmp_path / "replace.db"
    env = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}
    after: list[int] = []  # the children but the killed worker
    try:
        with serve_process(catalog, "--workers", str(workers), env=env) as served:
            process = served.process
            writer = _writer_pid(process.pid, catalog)
            children = [int(c) for c in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
            worker = next(child for child in children if child != writer)
            after = [child for child in children if child != worker]
            os.kill(worker, signal.SIGKILL)
            time.sleep(0.3)  # the supervisor has reaped it and waits a second before starting another
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                raise AssertionError("serve did not stop") from None
    finally:  # none outlives the test, even a failed one
        left = [child for child in after if _running(child)]
        for child in left:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(child, signal.SIGKILL)
    assert code == 0 and "Traceback" not in served.stderr, served.stderr
    assert not left, f"still running after serve stopped: {left}"


# uvicorn's Server.run, in the workers of the serve this starts: the first worker is sent SIGTERM
# just before uvicorn takes its signals (the supervisor stopping as the worker starts)
_EARLY_SIGTERM = """
import os, signal, sys, uvicorn
mark = sys.argv.pop(1)
run = uvicorn.Server.run
def early(self, sockets=None):
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        pass
    else:
        os.kill(os.getpid(), signal.SIGTERM)
    return run(self, sockets=sockets)
uvicorn.Server.run = early
sys.argv[0] = "olbridge"
from bridge.cli import main
main()
"""


def test_a_sigterm_before_uvicorn_takes_its_signals_stops_the_worker(tmp_path: Path) -> None:
    """A worker told to stop while it starts (before uvicorn has taken SIGTERM) stops, rather than
    serve on while its supervisor, stopping, waits for it forever."""
    port = free_port()
    catalog = tmp_path / "early.db"
    command = [sys.executable, "-c", _EARLY_SIGTERM, str(tmp_path / "signalled"), "--catalog", str(catalog)]
    env = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}
    with (tmp_path / "stderr").open("w+") as err:
        process = subprocess.Popen(
            [*command, "serve", "--port", str(port)], env=env, stdin=subprocess.DEVNULL, stderr=err, text=True
        )
        try:
            for _ in range(300):  # up to 30 s
                err.seek(0)
                if "exited (0); starting another" in err.read() or process.poll() is not None:
                    break
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        err.seek(0)
        said = err.read()
    assert (tmp_path / "signalled").exists(), said
    assert re.search(r"worker \d+ exited \(0\); starting another", said), said
    assert code == 0 and "Traceback" not in said, said


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has stopped; it waits for init to reap it


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the processes through /proc (Linux)")
def test_the_writer_and_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    with token_server(tmp_path / "orphans.db", "--workers", "2") as (_url, process):
        children = [int(c) for c in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
        assert len(children) == 3  # the writer and two workers
        process.kill()
        process.wait()
        for _ in range(150):  # up to 15 s; each child looks for its supervisor every second
            if not any(_running(child) for child in children):
                break
            time.sleep(0.1)
        left = [child for child in children if _running(child)]
        for child in left:
            os.kill(child, signal.SIGKILL)
        assert not left, f"still running after the supervisor was killed: {left}"


def test_workers_share_the_port_the_counts_and_the_catalog(catalog_target: str) -> None:
    catalog = catalog_target  # the workers' events go through the one writer process, on PostgreSQL too
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with running_server(catalog, "--workers", "2") as url:
        for n in range(12):  # a new connection each: the workers take them in turn
            event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", inputs=[ol_dataset("s3://b", f"k{n}")])
            assert requests.post(f"{url}/api/v1/lineage", json=event, headers=headers, timeout=10).status_code == 201
        batch = [ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}") for n in range(12, 20)]
        answer = requests.post(f"{url}/api/v1/lineage/batch", json=batch, headers=headers, timeout=10).json()
        assert answer["summary"]["successful"] == 8
        metrics = requests.get(f"{url}/metrics", headers=headers, timeout=10).text
        assert 'olbridge_receiver_events_total{result="accepted"} 20' in metrics
    with Catalog(catalog) as opened:
        assert opened.count_received()["received_events"] == 20
        assert len(opened.external_sources()) == 20


def _counted(text: str, metric: str) -> dict[str, int]:
    """A counter's values in Prometheus text, by the value of its (one) label."""
    found = re.findall(rf'^{metric}{{\w+="([^"]+)"}} (\d+)$', text, re.MULTILINE)
    return {label: int(value) for label, value in found}


def test_every_worker_serves_requests(catalog_target: str) -> None:
    """``serve --workers 3``: each worker takes connections and answers, as its own count in
    ``/metrics`` shows (``olbridge_receiver_worker_requests_total{worker="N"}``). Which worker
    takes a new connection is the kernel's choice, so requests come over fresh connections, a
    few at a time, until every worker has answered some (at most 600)."""
    workers = 3
    with running_server(catalog_target, "--workers", str(workers)) as url:

        def fresh(_: int) -> int:  # a connection of its own, closed after the answer
            return requests.get(f"{url}/healthz", headers={"Connection": "close"}, timeout=10).status_code

        behind_the_token = {"Connection": "close", "Authorization": f"Bearer {TOKEN}"}  # /metrics, as every route
        by_worker: dict[str, int] = {}
        with ThreadPoolExecutor(max_workers=6) as pool:
            for _ in range(50):
                assert set(pool.map(fresh, range(12))) == {200}
                metrics = requests.get(f"{url}/metrics", headers=behind_the_token, timeout=10).text
                by_worker = _counted(metrics, "olbridge_receiver_worker_requests_total")
                if len(by_worker) == workers and all(by_worker.values()):
                    break
        assert sorted(by_worker) == [str(n) for n in range(1, workers + 1)]
        assert all(by_worker.values()), f"a worker answered no request: {by_worker}"
        # every request counted once: by its route and status, and by the worker that answered it
        final = requests.get(f"{url}/metrics", headers=behind_the_token, timeout=10).text
        routes = re.findall(r"^olbridge_receiver_requests_total\{[^}]*\} (\d+)$", final, re.MULTILINE)
        assert sum(_counted(final, "olbridge_receiver_worker_requests_total").values()) == sum(map(int, routes))


def test_a_path_is_routed_as_sent_and_an_encoded_slash_is_no_separator(server: tuple[str, str]) -> None:
    """``POST /api/v1/lineage%2Fbatch`` reached the batch endpoint: requests were routed by their
    decoded path, where ``%2F`` is a slash. They are routed by the path as sent: no endpoint, 404,
    nothing kept."""
    url, catalog = server
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    response = requests.post(f"{url}/api/v1/lineage%2Fbatch", json=[ol_run_event()], headers=bearer, timeout=10)
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found"), response.text
    assert response.json()["error"]["message"].startswith("no endpoint /api/v1/lineage%2Fbatch;")
    with Catalog(catalog) as kept:
        assert kept.count_received()["received_events"] == 0
    # the query is no part of the path
    response = requests.post(f"{url}/api/v1/lineage?source=x", json=ol_run_event(), headers=bearer, timeout=10)
    assert response.status_code == 201, response.text
    metrics = requests.get(f"{url}/metrics", headers=bearer, timeout=10).text
    assert 'olbridge_receiver_requests_total{route="other",status="404"} 1' in metrics


def test_the_openlineage_client_sends_to_a_real_server(server: tuple[str, str]) -> None:
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
    from openlineage.client.facet_v2 import documentation_dataset, schema_dataset
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    url, catalog_path = server
    config = HttpConfig.from_dict(
        {"type": "http", "url": url, "auth": {"type": "api_key", "apiKey": TOKEN}, "compression": "gzip"}
    )
    client = OpenLineageClient(transport=HttpTransport(config))
    run_id = "0194a1b2-0000-7000-8000-0000000000aa"
    job = Job(namespace="spark_integration", name="etl.load_orders")
    raw = InputDataset("s3://landing", "orders/2025-03-01.parquet")
    table = OutputDataset(
        "postgres://warehouse:5432",
        "shop.public.orders",
        facets={
            "documentation": documentation_dataset.DocumentationDatasetFacet(description="Orders"),
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="BIGINT")]
            ),
        },
    )
    client.emit(
        RunEvent(
            eventType=RunState.START,
            eventTime="2025-03-01T08:00:00Z",
            run=Run(runId=run_id),
            job=job,
            inputs=[raw],
            producer=PRODUCER,
        )
    )
    client.emit(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2025-03-01T08:05:00Z",
            run=Run(runId=run_id),
            job=job,
            inputs=[raw],
            outputs=[table],
            producer=PRODUCER,
        )
    )
    client.emit(
        DatasetEvent(eventTime="2025-03-01T09:00:00Z", producer=PRODUCER, dataset=StaticDataset("kafka://b:9092", "t"))
    )
    client.emit(
        JobEvent(
            eventTime="2025-03-01T09:00:00Z",
            producer=PRODUCER,
            job=Job(namespace="airflow", name="publish"),
            inputs=[InputDataset("postgres://warehouse:5432", "shop.public.orders")],
            outputs=[OutputDataset("kafka://b:9092", "t")],
        )
    )
    with pytest.raises(requests.HTTPError):  # a wrong token is refused, and the client says so
        OpenLineageClient(
            transport=HttpTransport(
                HttpConfig.from_dict({"type": "http", "url": url, "auth": {"type": "api_key", "apiKey": "no"}})
            )
        ).emit(
            DatasetEvent(
                eventTime="2025-03-01T09:00:00Z", producer=PRODUCER, dataset=StaticDataset("kafka://b:9092", "u")
            )
        )
    metrics = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).text
    assert 'olbridge_receiver_events_total{result="accepted"} 4' in metrics
    with Catalog(catalog_path) as catalog:
        placeholders = {a.id: a for a in catalog.list_assets()}
        assert set(placeholders) == {"s3://landing/orders/2025-03-01.parquet", "shop.public.orders", "kafka://b:9092/t"}
        assert all(a.origin.value == "external" for a in placeholders.values())
        assert placeholders["shop.public.orders"].description == "Orders"
        sources = {s.source: s for s in catalog.external_sources()}
        assert sources[f"run:{run_id}"].state == "COMPLETE"
        assert sources["job:airflow/publish"].outputs == ("kafka://b:9092/t",)
        graph = catalog.lineage("s3://landing/orders/2025-03-01.parquet", direction="downstream")
        assert [(e.downstream, e.depth) for e in graph.edges] == [("shop.public.orders", 1), ("kafka://b:9092/t", 2)]


def test_the_default_takes_what_marquez_takes_and_strict_refuses_it(writer: GroupWriter, catalog_path: str) -> None:
    event = ol_run_event(inputs=[ol_dataset("s3://b", "k")])
    del event["schemaURL"]
    event["eventTime"] = "2025-03-01T08:00:00"  # no offset
    strict = Client(ReceiverApp(Intake(writer.submit, strict=True), token=TOKEN))
    before = contents(catalog_path)
    status, _, body = strict.post("/api/v1/lineage", event)
    assert (status, body["error"]["code"]) == (400, "invalid_event")
    assert {p["pointer"] for p in body["error"]["problems"]} == {"", "/eventTime"}
    assert contents(catalog_path) == before
    lenient = Client(ReceiverApp(Intake(writer.submit), token=TOKEN))
    status, _, body = lenient.post("/api/v1/lineage", event)
    assert (status, body["status"]) == (201, "accepted")
    assert any("schemaURL" in w for w in body["warnings"])
    assert any(w.startswith("/eventTime") for w in body["warnings"])
    with Catalog(catalog_path) as catalog:
        ((warnings,),) = catalog._conn.execute("SELECT warnings FROM received_events").fetchall()
        assert len(json.loads(warnings)) == 2  # kept with the event
        assert catalog.external_sources()[0].started is None
        assert catalog.external_sources()[0].first_seen == "2025-03-01T08:00:00.000000Z"  # read as UTC


def test_a_real_server_takes_json_nulls_where_marquez_does(server: tuple[str, str]) -> None:
    # Marquez binds null as the field unset and null-checks these: taken as missing, with a warning
    url, catalog_path = server
    text = (
        '{"eventType": null, "eventTime": "2025-03-01T08:00:00Z", "producer": "' + PRODUCER + '",'
        ' "schemaURL": null, "run": {"runId": "0194a1b2-0000-7000-8000-0000000000ab"},'
        ' "job": {"namespace": "airflow", "name": "nulls"}, "inputs": null,'
        ' "outputs": [{"namespace": "s3://b", "name": "out"}]}'
    )
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    answer = requests.post(f"{url}/api/v1/lineage", data=text.encode(), headers=headers, timeout=10)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["status"], body["placeholders"]) == ("accepted", ["s3://b/out"])
    assert sorted(w.split(":")[0] for w in body["warnings"]) == ["/eventType", "/inputs", "/schemaURL"]
    with_outputs_null = (
        text.replace('"nulls"', '"nulls2"')
        .replace("00ab", "00ac")
        .replace('[{"namespace": "s3://b", "name": "out"}]', "null")
    )
    answer = requests.post(f"{url}/api/v1/lineage", data=with_outputs_null.encode(), headers=headers, timeout=10)
    assert answer.status_code == 201, answer.text
    with Catalog(catalog_path) as catalog:
        assert catalog.count_received()["received_events"] == 2
        sources = {s.source: s for s in catalog.external_sources()}
        run = sources["run:0194a1b2-0000-7000-8000-0000000000ab"]
        assert (run.state, run.outputs) == (None, ("s3://b/out",))
