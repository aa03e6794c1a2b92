"""The receiver's limits on what a client sends, before any token is looked at: the request's
head counted in bytes as they arrive (a real ``olbridge serve`` on loopback, flooded), the
bodies a worker holds at once, and a fault of the receiver's answered in the JSON shape."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import requests

from bridge.cli.serve import chosen_limits
from bridge.config import parse_config
from bridge.errors import ConfigError
from bridge.model.received import IncomingEvent
from bridge.receiver.app import ReceiverApp, Request
from bridge.receiver.asgi import AsgiReceiver
from bridge.receiver.intake import Blocking, Intake, Limits, Read, Write
from bridge.receiver.writer_process import RemoteWriter
from tests.backend import wait_for
from tests.group_writer import GroupWriter
from tests.helpers import Served, invoke, ol_dataset, ol_run_event, serve_process
from tests.test_benchmarks import load
from tests.test_receiver_http import Client

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
