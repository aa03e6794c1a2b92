"""The receiver's limits on what a client sends, before any token is looked at: the request's
head counted in bytes as they arrive (a real ``olbridge serve`` on loopback, flooded), the
bodies a worker holds at once, and a fault of the receiver's answered in the JSON shape."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import requests

from bridge.catalog import Catalog, IngestResult
from bridge.cli.serve import chosen_limits
from bridge.config import parse_config
from bridge.errors import ConfigError
from bridge.jsontext import values_past
from bridge.model.received import IncomingEvent
from bridge.receiver.app import BODY_VALUES, GZIP_MEMBERS, ReceiverApp, Request
from bridge.receiver.asgi import AsgiReceiver
from bridge.receiver.intake import Blocking, Intake, Limits, Read, Write, run_steps_async
from bridge.receiver.writer_process import RemoteWriter
from tests.backend import wait_for
from tests.group_writer import GroupWriter
from tests.helpers import Served, invoke, ol_dataset, ol_run_event, serve_process
from tests.test_benchmarks import load
from tests.test_receiver_http import TOKEN, Client, contents, token_server

FLOODERS = 4
FLOOD = 64 * 1024 * 1024  # bytes each flooding connection would send in one header


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_process(tmp_path / "limits.db") as server:
        yield server


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)


def _answer(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (a reset ends it too)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return got


def _error(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower()
    return status, json.loads(body)["error"]


def _flood(url: str, sent: list[int], answers: list[bytes]) -> None:
    """One header of FLOOD bytes, sent as fast as the server takes it; how much went, and what came back."""
    with _connect(url) as sock:
        sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
        chunk = b"a" * (256 * 1024)
        total = 0
        try:
            while total < FLOOD:
                sock.sendall(chunk)
                total += len(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        sent.append(total)
        answers.append(_answer(sock))


def test_normal_requests_are_served_while_connections_stream_huge_headers(served: Served) -> None:
    """(#30) Four connections each sending one header of hundreds of MB delayed every request by
    11 to 32 s and grew the workers by hundreds of MB: each is now cut off past the head's limit,
    with a 431, and the others are answered meanwhile (within the client's 10 s timeout)."""
    sent: list[int] = []
    answers: list[bytes] = []
    flooders = [threading.Thread(target=_flood, args=(served.url, sent, answers)) for _ in range(FLOODERS)]
    for thread in flooders:
        thread.start()
    statuses = []
    for n in range(20):
        event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}")
        statuses.append(requests.post(f"{served.url}/api/v1/lineage", json=event, timeout=10).status_code)
    for thread in flooders:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a flooding connection was never cut off"
    assert statuses == [201] * 20
    assert len(sent) == FLOODERS and all(total < FLOOD for total in sent), sent  # cut off, not read to the end
    for answer in answers:
        if answer:  # a reset may take the answer with it: closed is what matters
            status, error = _error(answer)
            assert (status, error["code"]) == (431, "headers_too_large")


@pytest.mark.parametrize(
    ("head", "status", "code"),
    [
        (b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9_000 + b"\r\n\r\n", 431, "headers_too_large"),
        (
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4_000) for i in range(9))
            + b"\r\n",
            431,
            "headers_too_large",
        ),
        (b"GET /" + b"a" * 9_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    ],
    ids=["one-header", "all-headers", "request-line", "not-http"],
)
def test_a_head_past_its_limits_is_refused_in_the_json_shape(
    served: Served, head: bytes, status: int, code: str
) -> None:
    with _connect(served.url) as sock:
        sock.sendall(head)
        answer = _answer(sock)
    assert _error(answer)[0] == status
    assert _error(answer)[1]["code"] == code
    assert requests.get(f"{served.url}/healthz", timeout=10).status_code == 200


def test_a_head_within_its_limits_is_served(served: Served) -> None:
    headers = {f"X-{i}": "a" * 3_000 for i in range(9)}  # 27 kB in all, each header within 8 kB
    response = requests.get(f"{served.url}/healthz", headers=headers, timeout=10)
    assert response.status_code == 200


def test_a_gzip_body_of_many_tiny_members_is_refused_at_once_and_others_are_served(served: Served) -> None:
    """A 16 MB body of empty gzip members, 800,000 of them, held the worker at 100% CPU for
    minutes (a new inflater for each member, and a copy of the rest of the body after it), its
    /healthz and SIGTERM unanswered. Past GZIP_MEMBERS members it is refused at once (within the
    client's 10 s), and the worker answers others."""
    empty = gzip.compress(b"")
    body = empty * (16 * 1024 * 1024 // len(empty))
    head = (
        "POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with _connect(served.url) as sock:
        sock.sendall(head.encode() + body)
        answer = _answer(sock)  # until the server closes the connection, or 10 s without a byte
    assert answer, "no answer within 10 s"
    status, error = _error(answer)
    assert (status, error["code"]) == (400, "bad_gzip")
    assert f"more than {GZIP_MEMBERS} members" in error["message"]
    assert requests.get(f"{served.url}/healthz", timeout=10).status_code == 200


def _head(length: int | None) -> bytes:
    """A POST's head with ``length`` as its Content-Length, or chunked (None)."""
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    head = f"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    return head.encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _one_answer(sock: socket.socket) -> bytes:
    """The answer the server sends on a connection it keeps open: its head and its body."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed without an answer: {got!r}"
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    found = re.search(rb"content-length: (\d+)", head.lower())
    assert found, head
    while len(body) < int(found[1]):
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_body_counts_in_flight_as_it_comes_not_as_its_content_length_claims(served: Served) -> None:
    """Eight connections each claiming a body of 16 MiB and sending one byte held the worker's
    whole budget (128 MiB) until their read timeout: every other producer was answered 503. The
    bytes that came count, not those claimed."""
    claimed = [_connect(served.url) for _ in range(8)]
    try:
        for sock in claimed:
            sock.sendall(_head(16 * 1024 * 1024) + b"[")
        time.sleep(0.5)  # their heads are read: the claims were held from here
        for n in range(3):
            event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}")
            response = requests.post(f"{served.url}/api/v1/lineage", json=event, timeout=10)
            assert response.status_code == 201, response.text
    finally:
        for sock in claimed:
            sock.close()


def test_a_chunked_body_counts_in_flight_as_it_comes(tmp_path: Path) -> None:
    """Twenty connections each sending 15 MB chunked (no Content-Length), never ending, grew a
    worker to 358 MB over a 128 MiB budget: a chunked body was not counted. Counted as it comes,
    the one whose bytes would pass the budget is answered 503 (retriable), and a small event
    that fits beside the others is taken."""
    with serve_process(tmp_path / "chunked.db", "--max-in-flight", str(1024 * 1024)) as server:
        first, second = _connect(server.url), _connect(server.url)
        with first, second:
            part = _chunk(b"[" + b" " * (700 * 1024))
            first.sendall(_head(None) + part)  # and never the end
            time.sleep(0.5)  # its bytes are read
            response = requests.post(f"{server.url}/api/v1/lineage", json=ol_run_event(), timeout=10)
            assert response.status_code == 201, response.text
            second.sendall(_head(None) + part)
            status, error = _error(_one_answer(second))
    assert (status, error["code"], error["retriable"]) == (503, "busy", True)


def test_a_header_the_receiver_reads_sent_twice_is_refused_naming_it(tmp_path: Path) -> None:
    """With two Content-Encoding or two Authorization headers the first silently won (where a
    proxy before the receiver may read the other): such a request is refused, 400 naming the
    header, and changes nothing."""
    event = json.dumps(ol_run_event()).encode()
    bearer = f"Authorization: Bearer {TOKEN}\r\n"
    cases = [  # (the header, the head's other lines, the body)
        ("Content-Encoding", bearer + "Content-Encoding: gzip\r\nContent-Encoding: identity\r\n", gzip.compress(event)),
        ("Authorization", bearer + "Authorization: Bearer wrong\r\n", event),
        ("Content-Type", bearer + "Content-Type: text/plain\r\n", event),
    ]
    with token_server(tmp_path / "twice.db") as (url, _):
        for name, lines, body in cases:
            head = (
                "POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n{lines}\r\n"
            )
            with _connect(url) as sock:
                sock.sendall(head.encode() + body)
                status, error = _error(_answer(sock))
            assert (status, error["code"]) == (400, "bad_request"), (name, error)
            assert error["message"] == f"the request has more than one {name} header: send it once"
    with Catalog(tmp_path / "twice.db") as catalog:
        assert catalog.count_received()["received_events"] == 0


def _steps_until_write(app: ReceiverApp, body: bytes) -> Any:
    steps = app.exchange(
        Request("POST", "/api/v1/lineage", "application/json", str(len(body)), authorization="Bearer t")
    )
    step = steps.send(None)
    while not isinstance(step, Write):
        step = steps.send(body if isinstance(step, Read) else step.call() if isinstance(step, Blocking) else None)
    return steps


def test_a_worker_holds_bodies_in_flight_up_to_its_limit(writer: GroupWriter) -> None:
    """A worker's requests together hold at most max_in_flight bytes of bodies: past them a 503
    (retriable), and the bytes come back once a request is answered."""
    body = json.dumps(ol_run_event()).encode()
    app = ReceiverApp(Intake(writer.submit, limits=Limits(max_in_flight=len(body) + 10)), token="t")
    first = _steps_until_write(app, body)  # holds its body, waiting for the writer
    status, headers, answer = Client(app, token="t").post(
        "/api/v1/lineage", ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000002")
    )
    assert (status, answer["error"]["code"], answer["error"]["retriable"], headers["Retry-After"]) == (
        503,
        "busy",
        True,
        "1",
    )
    first.close()  # answered (or gone): its bytes are let go
    status, _, _ = Client(app, token="t").post(
        "/api/v1/lineage", ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000002")
    )
    assert status == 201


def test_a_body_alone_has_its_turn_however_many_pieces_it_comes_in(writer: GroupWriter) -> None:
    """Counted piece by piece as it comes, a body past the budget is still taken when no other
    request holds one: its own pieces do not make it wait for itself."""
    body = json.dumps(ol_run_event()).encode()[:-1] + b" " * (256 * 1024) + b"}"
    app = ReceiverApp(Intake(writer.submit, limits=Limits(max_in_flight=64 * 1024)), token="t")
    status, _, answer = Client(app, token="t").request("POST", "/api/v1/lineage", body)
    assert (status, answer["status"]) == (201, "accepted"), answer


def test_a_fault_of_the_receiver_is_a_500_in_the_json_shape_counted_and_logged(
    writer: GroupWriter, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    intake = Intake(writer.submit)
    app = ReceiverApp(intake)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(intake, "prepare", broken)
    status, _, answer = Client(app, token=None).post("/api/v1/lineage", ol_run_event())
    assert (status, answer["error"]["code"]) == (500, "internal_error")
    assert "Traceback" in capsys.readouterr().err
    assert "olbridge_receiver_internal_errors_total 1" in app.metrics_text()


def test_limits_come_from_the_options_else_the_config(tmp_path: Path) -> None:
    config = parse_config({"serve": {"max_depth": 10, "max_gunzipped": 1000}}, "olbridge.toml", tmp_path)
    limits = chosen_limits({"max_depth": None, "max_body": 5}, config.serve.limits)
    assert (limits.max_depth, limits.max_decompressed, limits.max_body) == (10, 1000, 5)
    assert limits.max_batch == Limits().max_batch
    with pytest.raises(ConfigError, match="'max_depth' must be a whole number"):
        parse_config({"serve": {"max_depth": "deep"}}, "olbridge.toml", tmp_path)
    with pytest.raises(ConfigError, match="more than 254"):
        chosen_limits({}, {"max_depth": 300})
    code, _, err = invoke(tmp_path / "c.db", "serve", "--max-depth", "300")
    assert code == 2 and "300 is not in the range 1<=x<=254" in err


def test_an_event_past_max_depth_is_refused_by_serve(tmp_path: Path) -> None:
    with serve_process(tmp_path / "depth.db", "--max-depth", "3") as server:
        event = ol_run_event()
        event["run"]["facets"] = {
            "acme": {"_producer": "https://x.example", "_schemaURL": "https://x.example/f.json", "v": {"w": 1}}
        }
        response = requests.post(f"{server.url}/api/v1/lineage", json=event, timeout=10)
        assert response.status_code == 400
        assert "deeper than 3 levels" in response.json()["error"]["message"]


def test_the_wal_stays_bounded_under_a_sustained_load(tmp_path: Path) -> None:
    """(#30) Under a sustained load the WAL grew without bound (2 GB in 40 s), PASSIVE
    checkpoints never reaching its end; past its limit the checkpointer now restarts and truncates
    it, so it stays within the limit and what a commit or two add."""
    run = load("wal").run  # the benchmark's load, briefly and small

    limit = 1024 * 1024
    sizes = run(tmp_path / "wal.db", 3.0, limit, 1.0, 100, say=False, reader=False)
    shown = [round(s / 1024 / 1024, 1) for s in sizes]
    past = [n for n, size in enumerate(sizes) if size > limit]
    assert past, f"the load never took the WAL past its limit: {shown}"
    # past its limit the log is truncated (PASSIVE checkpoints alone never shrink the file) ...
    assert any(size <= limit for size in sizes[past[0] + 1 :]), shown
    # ... and never grows far beyond it: what the commits add between two checkpoints (a second:
    # up to 10 MiB on this machine when it runs fast, which it does by turns; unbounded, the log
    # grew by about 50 MiB a second, 2 GB in 40 s)
    assert max(sizes) <= limit + 24 * 1024 * 1024, shown


def test_a_huge_batch_is_written_in_slices_and_small_requests_go_between(catalog_path: str, resolver: Any) -> None:
    """(#30) One batch of 160,000 new datasets held the writer for 25 s while other producers
    waited: a request's events go in slices, each queued behind what came meanwhile, so a small
    request waits for one slice, not for the whole batch."""
    intake = Intake(None)

    def prepared(n: int, datasets: int) -> IncomingEvent:
        inputs = [ol_dataset("s3://b", f"in/{n}/{i}") for i in range(datasets)]
        event = intake.prepare(ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", inputs=inputs))
        assert isinstance(event, IncomingEvent), event
        return event

    huge = [prepared(n, 9) for n in range(40)]  # 10 apiece: 400 in all
    small = [prepared(1000, 1)]
    writer = GroupWriter(catalog_path, resolver)
    writer.slice_weight = 100
    groups: list[list[str]] = []
    started, queued = threading.Event(), threading.Event()
    write = writer.writer.write

    def logged(events: Sequence[IncomingEvent]) -> Any:
        groups.append([e.run_id or "" for e in events])
        if len(groups) == 1:
            started.set()
            assert queued.wait(10)
        return write(events)

    writer.writer.write = logged  # type: ignore[method-assign]
    answers: dict[str, Any] = {}
    big = threading.Thread(target=lambda: answers.update(huge=writer.submit(huge)))
    big.start()
    assert started.wait(10)
    little = threading.Thread(target=lambda: answers.update(small=writer.submit(small)))
    little.start()
    try:
        assert wait_for(lambda: writer._queue.qsize() >= 1, timeout=10), "the small request never waited in the queue"
    finally:  # the first group goes on, and the threads and the writer end, even when that failed
        queued.set()
        big.join(30)
        little.join(30)
        writer.close()
    assert [r.status for r in answers["huge"]] == ["accepted"] * 40
    assert [r.status for r in answers["small"]] == ["accepted"]
    assert all(len(group) <= 11 for group in groups), [len(g) for g in groups]  # 10 heavy events a slice, or one more
    where = next(i for i, group in enumerate(groups) if small[0].run_id in group)
    last_huge = max(i for i, group in enumerate(groups) if huge[-1].run_id in group)
    assert where < last_huge  # written between the batch's slices, not after them


def test_a_fault_outside_the_answer_is_a_500_in_the_json_shape_not_uvicorns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """uvicorn answered an exception of the application with its own plain-text 500."""

    class BrokenWriter:
        async def submit(self, events: Any) -> Any:
            raise RuntimeError("a bug in the writer's way")

    app = ReceiverApp(Intake(None))
    receiver = AsgiReceiver(app, cast(RemoteWriter, BrokenWriter()))
    body = json.dumps(ol_run_event()).encode()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST", "path": "/api/v1/lineage", "headers": headers}
    asyncio.run(receiver(scope, receive, send))
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"]["code"] == "internal_error"
    assert "RuntimeError: a bug in the writer's way" in capsys.readouterr().err
    assert "olbridge_receiver_internal_errors_total 1" in app.metrics_text()


def _values(value: Any) -> int:
    """The JSON values in a (small) value, itself and every one it holds."""
    if isinstance(value, dict):
        return 1 + sum(_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_values(v) for v in value)
    return 1


def _with_custom_facet(values: str) -> tuple[dict[str, Any], bytes]:
    """A run event whose custom run facet holds the JSON text ``values`` (in place of a string),
    and its body."""
    event = ol_run_event()
    event["run"]["facets"] = {
        "acme": {"_producer": "https://x.example", "_schemaURL": "https://x.example/f.json", "v": "HERE"}
    }
    return event, json.dumps(event).replace('"HERE"', values, 1).encode()


def test_an_event_of_more_values_than_max_values_is_refused_before_it_is_walked(
    writer: GroupWriter, catalog_path: str
) -> None:
    """An event of 6 million empty objects in a custom facet (18 KB gzipped) was taken after a
    worker's event loop had walked it for 9.8 s, and one of 30 million zeros was stored whole (60
    MB): past --max-values (a million by default) an event is refused, counted in its text."""
    app = ReceiverApp(Intake(writer.submit), token="t")
    event, body = _with_custom_facet("[" + ",".join(["{}"] * 1_100_000) + "]")
    before = contents(catalog_path)
    status, _, answer = Client(app, token="t").request(
        "POST", "/api/v1/lineage", gzip.compress(body), {"Content-Encoding": "gzip"}
    )
    message = f"the event has {_values(event) + 1_100_000} JSON values; this receiver takes at most 1000000"
    assert (status, answer["error"]["code"], answer["error"]["retriable"]) == (400, "invalid_event", False), answer
    assert answer["error"]["problems"] == [{"pointer": "", "message": message, "rule": "limit"}]
    assert contents(catalog_path) == before


@pytest.mark.parametrize("path", ["/api/v1/lineage", "/api/v1/lineage/batch"])
def test_a_body_of_more_values_than_events_hold_is_not_parsed(
    writer: GroupWriter, catalog_path: str, path: str
) -> None:
    """A body is parsed whole before any event's limits are read: 30 million zeros (58 KB
    gzipped) stalled a worker 2 s and took 1.2 GB before their 400. A body of more JSON values
    than BODY_VALUES events' --max-values is a 413 before it is parsed; a batch of events within
    their limits is taken."""
    limits = Limits(max_values=1_000)
    client = Client(ReceiverApp(Intake(writer.submit, limits=limits), token="t"), token="t")
    before = contents(catalog_path)
    zeros = "[" + ",".join(["0"] * (BODY_VALUES * 1_000)) + "]"
    body = (zeros if path.endswith("batch") else json.dumps({"eventType": "START", "x": json.loads(zeros)})).encode()
    status, _, answer = client.request("POST", path, gzip.compress(body), {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (413, "body_too_large"), answer
    assert "more than 4000 JSON values" in answer["error"]["message"]
    assert contents(catalog_path) == before
    events = [ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}") for n in range(150)]
    assert 1_000 < values_past(json.dumps(events), 0) < BODY_VALUES * 1_000  # type: ignore[operator]
    status, _, answer = client.post("/api/v1/lineage/batch", events)  # more values than one event's limit
    assert status == 200 and not answer.get("failed_events"), answer


def test_a_body_left_in_a_string_of_escaped_quotes_is_counted_once(writer: GroupWriter, catalog_path: str) -> None:
    """The count of a body's values blanked its strings by a pattern that, in a string left open
    by a run of escaped quotes, read the text again from each of them: 6 KB gzipped (a million
    ``\\"``) held a worker for hours, answering nobody else. Each string is read once: the body
    is answered 413 as any body of too many values; strings with escapes count as they did."""
    client = Client(ReceiverApp(Intake(writer.submit, limits=Limits(max_values=1_000)), token="t"), token="t")
    before = contents(catalog_path)
    body = gzip.compress(("," * BODY_VALUES * 1_000 + '"' + '\\"' * 1_000_000).encode())
    status, _, answer = client.request("POST", "/api/v1/lineage", body, {"Content-Encoding": "gzip"})
    assert (status, answer["error"]["code"]) == (413, "body_too_large"), answer
    assert contents(catalog_path) == before
    escaped = {"a": 'x\\"y', "b\\": [1, "\\\\", {"c": '\\"}'}], "d": "]}[{,"}
    # the object and its three values, the array's three, and the inner object's value
    assert values_past(json.dumps(escaped), 0) == 8


def test_max_values_counts_every_value_and_refuses_that_event_alone(writer: GroupWriter) -> None:
    event, _ = _with_custom_facet('"v"')
    size = _values(event)
    event["run"]["facets"]["acme"]["v"] = {"a": [1, "b,[{", None, True, {}, []], 'c\\"]': 1.5}  # 9 values for 1
    within = Client(ReceiverApp(Intake(writer.submit, limits=Limits(max_values=size + 8)), token="t"), token="t")
    past = Client(ReceiverApp(Intake(writer.submit, limits=Limits(max_values=size + 7)), token="t"), token="t")
    status, _, answer = past.post("/api/v1/lineage/batch", [ol_run_event(), event])
    assert status == 200 and [f["index"] for f in answer["failed_events"]] == [1], answer
    assert answer["failed_events"][0]["reason"] == (
        f"the event has {size + 8} JSON values; this receiver takes at most {size + 7}"
    )
    status, _, answer = within.post("/api/v1/lineage", event)
    assert status == 201, answer


def _lineage(*columns: int, dataset: int = 0) -> dict[str, Any]:
    """A columnLineage facet: an output column for each number, with that many input fields, and
    a ``dataset`` list of ``dataset`` more."""
    field = [{"namespace": "s3://b", "name": "in", "field": f"f{n}"} for n in range(max((*columns, dataset)))]
    return {
        "fields": {f"c{at}": {"inputFields": field[:count]} for at, count in enumerate(columns)},
        "dataset": field[:dataset],
    }


def test_column_edges_past_max_column_edges_are_refused_where_they_pass_it(
    writer: GroupWriter, catalog_path: str
) -> None:
    """An event of two datasets and 800,000 column edges held the writer 22.6 s (an event is
    written whole, however heavy) and was counted as two datasets: the input fields of an
    event's column lineage are bounded by --max-column-edges, the facet where they pass it named."""
    outputs = [
        ol_dataset("s3://b", "out1", columnLineage=_lineage(3, 3)),
        ol_dataset("s3://b", "out2", columnLineage=_lineage(4, dataset=1)),
    ]
    event = ol_run_event(inputs=[ol_dataset("s3://b", "in")], outputs=outputs)
    limits = Limits(max_column_edges=10)
    before = contents(catalog_path)
    status, _, answer = Client(ReceiverApp(Intake(writer.submit, limits=limits)), token=None).post(
        "/api/v1/lineage", event
    )
    message = "the event's column lineage has 11 input fields (column edges); this receiver takes at most 10"
    assert (status, answer["error"]["code"]) == (400, "invalid_event"), answer
    assert answer["error"]["problems"] == [
        {"pointer": "/outputs/1/facets/columnLineage", "message": message, "rule": "limit"}
    ]
    assert contents(catalog_path) == before
    limits = Limits(max_column_edges=11)
    status, _, answer = Client(ReceiverApp(Intake(writer.submit, limits=limits)), token=None).post(
        "/api/v1/lineage", event
    )
    assert status == 201, answer


def test_a_large_event_is_judged_off_the_event_loop() -> None:
    """A large event is judged and read on a thread (a Blocking step): the worker's event loop
    answers its other connections meanwhile, where it stalled for as long as the event took."""
    fields = [{"name": f"c{n}", "type": "int"} for n in range(100_000)]
    heavy = ol_run_event(outputs=[ol_dataset("s3://b", "wide", schema={"fields": fields})])
    intake = Intake(None)
    assert isinstance(next(intake.taking([heavy])), Blocking)
    assert isinstance(next(intake.taking([ol_run_event()])), Write)  # the usual event: judged at once

    async def taken() -> tuple[float, float]:
        ticks = [time.perf_counter()]
        done = asyncio.Event()

        async def tick() -> None:
            while not done.is_set():
                await asyncio.sleep(0.005)
                ticks.append(time.perf_counter())

        async def write(events: Sequence[IncomingEvent]) -> list[Any]:
            return [IngestResult("accepted")] * len(events)

        async def read(limit: int) -> bytes:
            return b""

        ticking = asyncio.create_task(tick())
        await asyncio.sleep(0)
        outcomes = await run_steps_async(intake.taking([heavy]), write=write, read=read)
        took = time.perf_counter() - ticks[0]
        done.set()
        await ticking
        assert [o.status for o in outcomes] == ["accepted"]
        return took, max(b - a for a, b in itertools.pairwise(ticks))

    # on the loop, one gap as long as the whole, every time; on a thread, a loaded machine may
    # still hold the loop back once (the thread's turns are the system's): three tries
    tries: list[tuple[float, float]] = []
    while len(tries) < 3 and not (tries and tries[-1][1] < tries[-1][0] / 2):
        tries.append(asyncio.run(taken()))
    assert tries[-1][1] < tries[-1][0] / 2, tries


def test_max_values_and_max_column_edges_are_options_and_serve_keys(tmp_path: Path) -> None:
    config = parse_config({"serve": {"max_values": 5000, "max_column_edges": 20}}, "olbridge.toml", tmp_path)
    limits = chosen_limits({"max_values": None, "max_column_edges": 30}, config.serve.limits)
    assert (limits.max_values, limits.max_column_edges) == (5000, 30)
    assert (Limits().max_values, Limits().max_column_edges) == (1_000_000, 50_000)
    with pytest.raises(ConfigError, match="'max_values' must be a whole number of at least 1, not 0"):
        parse_config({"serve": {"max_values": 0}}, "olbridge.toml", tmp_path)
    code, out, _ = invoke(tmp_path / "c.db", "serve", "--help")
    assert code == 0 and "--max-values" in out and "--max-column-edges" in out
    with serve_process(tmp_path / "values.db", "--max-values", "2000", "--max-column-edges", "10") as server:
        _, body = _with_custom_facet("[" + ",".join(["0"] * 2_000) + "]")
        response = requests.post(
            f"{server.url}/api/v1/lineage", data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert response.status_code == 400 and "at most 2000" in response.json()["error"]["message"]
        outputs = [ol_dataset("s3://b", "out", columnLineage=_lineage(6, 5))]
        response = requests.post(f"{server.url}/api/v1/lineage", json=ol_run_event(outputs=outputs), timeout=10)
        assert response.status_code == 400 and "at most 10" in response.json()["error"]["message"]


def _answers(got: bytes) -> list[tuple[int, bytes]]:
    """The answers, in order, in what a connection sent until it closed: (status, body) each."""
    found = []
    while got:
        head, _, rest = got.partition(b"\r\n\r\n")
        length = re.search(rb"content-length: (\d+)", head.lower())
        assert length, got
        found.append((int(head.split(b" ", 2)[1]), rest[: int(length[1])]))
        got = rest[int(length[1]) :]
    return found


@pytest.mark.parametrize(
    ("after", "status", "code"),
    [
        (b"GARBAGE\r\n\r\n", 400, "bad_request"),
        (b"GET /healthz HTTP/9.9\r\n\r\n", 400, "bad_request"),
        (b"GET /" + b"a" * 9_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
    ],
    ids=["not-http", "http-9.9", "long-target"],
)
def test_a_request_followed_by_what_is_refused_is_answered_first(
    tmp_path: Path, after: bytes, status: int, code: str
) -> None:
    """A request and, in the same bytes, one that is refused (text that is not HTTP, a target
    past its limit): the first is committed and its client heard nothing (the connection closed
    without its 201, where only a retry, answered `duplicate`, would tell it); now its answer
    comes, then the refusal, then the connection closes."""
    event = json.dumps(ol_run_event()).encode()
    head = (
        "POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(event)}\r\n\r\n"
    )
    with token_server(tmp_path / "after.db") as (url, _):
        with _connect(url) as sock:
            sock.sendall(head.encode() + event + after)
            answers = _answers(_answer(sock))
        assert [s for s, _ in answers] == [201, status], answers
        assert json.loads(answers[1][1])["error"]["code"] == code
    with Catalog(tmp_path / "after.db") as catalog:
        assert catalog.count_received()["received_events"] == 1


@pytest.mark.parametrize(
    ("line", "headers", "status", "code"),
    [
        ("POST /api/v1/lineage HTTP/2.0", "", 400, "bad_request"),
        ("POST /api/v1/lineage HTTP/0.9", "", 400, "bad_request"),
        ("POST /api/v1/lineage HTTP/1.1", "Transfer-Encoding: foo, chunked\r\n", 501, "unsupported_transfer_coding"),
        ("POST /api/v1/lineage HTTP/1.1", "Transfer-Encoding: gzip, chunked\r\n", 501, "unsupported_transfer_coding"),
        ("POST /api/v1/lineage HTTP/1.1", "Expect: 200-ok\r\n", 417, "expectation_failed"),
        ("POST /api/v1/lineage HTTP/1.1", "Expect: \r\n", 201, ""),
    ],
    ids=["http-2.0", "http-0.9", "te-foo", "te-gzip", "expect", "expect-nothing"],
)
def test_a_head_asking_what_the_receiver_does_not_do_is_refused_and_changes_nothing(
    tmp_path: Path, line: str, headers: str, status: int, code: str
) -> None:
    """An HTTP version other than 1.0 and 1.1, a transfer coding other than chunked (whose body
    was read as plain: a gzipped one refused as bad UTF-8, another taken as if it had none, as a
    proxy in front may not) and an expectation other than 100-continue were served: refused in
    the JSON shape, nothing taken."""
    event = json.dumps(ol_run_event()).encode()
    framing = f"Content-Length: {len(event)}\r\n" if "chunked" not in headers else ""
    body = event if framing else _chunk(event) + b"0\r\n\r\n"
    head = (
        f"{line}\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"{framing}{headers}\r\n"
    )
    with token_server(tmp_path / "head.db") as (url, _):
        with _connect(url) as sock:
            sock.sendall(head.encode() + body)
            answer = _one_answer(sock) if status == 201 else _answer(sock)
        if status == 201:  # an empty Expect asks for nothing (HTTP's empty list): taken
            assert answer.startswith(b"HTTP/1.1 201"), answer
        else:
            error_status, error = _error(answer)
            assert (error_status, error["code"]) == (status, code), error
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
    with Catalog(tmp_path / "head.db") as catalog:
        assert catalog.count_received()["received_events"] == (1 if status == 201 else 0)


def test_trailer_fields_are_counted_as_a_head_and_not_kept(tmp_path: Path) -> None:
    """Trailer fields after a chunked body's last chunk were counted nowhere and each kept among
    the request's headers: 60 MB of them grew a worker by 1.1 GB, then the event was taken. They
    count as a head does (431 past its 32 KiB, nothing taken); a few are taken (and not kept)."""
    event = json.dumps(ol_run_event()).encode()
    head = (
        "POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    with token_server(tmp_path / "trailers.db") as (url, _):
        with _connect(url) as sock:
            sock.sendall(head + _chunk(event) + b"0\r\n" + b"X-Pad: aaaa\r\n" * 4_000 + b"\r\n")
            error_status, error = _error(_answer(sock))
        assert (error_status, error["code"]) == (431, "headers_too_large"), error
        assert "trailer fields" in error["message"]
        with _connect(url) as sock:
            sock.sendall(head + _chunk(event) + b"0\r\nX-Checksum: abc\r\n\r\n")
            assert _one_answer(sock).startswith(b"HTTP/1.1 201"), "a few trailer fields are taken"
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
    with Catalog(tmp_path / "trailers.db") as catalog:
        assert catalog.count_received()["received_events"] == 1


@pytest.mark.parametrize(
    "broken",
    [b"zz\r\nabc\r\n0\r\n\r\n", b"-1\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXX0\r\n\r\n"],
    ids=["size-not-hex", "size-negative", "chunk-without-crlf"],
)
def test_a_body_framed_wrongly_is_refused_at_once_and_counted_once(tmp_path: Path, broken: bytes) -> None:
    """A chunked body whose framing was not HTTP/1.1's (a chunk's size not hexadecimal, a chunk
    not ended by CRLF) waited for the body's deadline (60 s) and was answered 408, retriable:
    the client told to send again what is malformed, the cause misnamed. It is answered 400 at
    once, counted once as that; nothing of it is kept, even where a whole event came before the
    broken chunk."""
    event = json.dumps(ol_run_event()).encode()
    head = (
        "POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    with token_server(tmp_path / "framed.db") as (url, _):
        with _connect(url) as sock:  # its timeout (10 s) comes well before the body's deadline
            sock.sendall(head.encode() + _chunk(event) + broken)
            status, error = _error(_answer(sock))
        assert (status, error["code"], error["retriable"]) == (400, "bad_request", False), error
        assert "not an HTTP/1.1 request" in error["message"], error
        metrics = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
        line = r'^olbridge_receiver_requests_total\{route="([^"]+)",status="(\d+)"\} (\d+)$'
        counted = re.findall(line, metrics, re.M)
        assert [(status, n) for route, status, n in counted if route == "/api/v1/lineage"] == [("400", "1")], counted
    with Catalog(tmp_path / "framed.db") as catalog:
        assert catalog.count_received()["received_events"] == 0


@pytest.mark.parametrize("before", [1, 2])
def test_a_pipelined_body_framed_wrongly_is_refused_after_the_requests_before_it(tmp_path: Path, before: int) -> None:
    """(a review of the fix above) Requests whole on the connection, then one whose chunked body
    is framed wrongly, in one write: the refusal went at once and closed the connection, the
    answers of the requests before it lost (their events kept: committed, unsaid), and uvicorn
    logged a traceback writing to the closed transport. Each request before it is answered, then
    the refusal, once; nothing of the refused one is kept."""
    events = [json.dumps(ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}")).encode() for n in range(before)]
    common = f"Host: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer {TOKEN}\r\n"
    whole = b"".join(
        f"POST /api/v1/lineage HTTP/1.1\r\n{common}Content-Length: {len(e)}\r\n\r\n".encode() + e for e in events
    )
    broken = f"POST /api/v1/lineage HTTP/1.1\r\n{common}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
    env = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}
    with serve_process(tmp_path / "piped.db", env=env) as served, _connect(served.url) as sock:
        sock.sendall(whole + broken.encode())
        answers = _answers(_answer(sock))
    assert [status for status, _ in answers] == [201] * before + [400], answers
    assert json.loads(answers[-1][1])["error"]["code"] == "bad_request"
    assert "Traceback" not in served.stderr and "Exception in ASGI application" not in served.stderr, served.stderr
    with Catalog(tmp_path / "piped.db") as catalog:
        assert catalog.count_received()["received_events"] == before
