"""Deadlines and bounds for slow clients: a request's head and body must come within ``serve
--read-timeout``, a new connection's first byte within ``--first-byte-timeout``, a connection idle
after an answer is closed after the keep-alive timeout, and a worker holds at most
``--max-connections``. A real ``olbridge serve`` on loopback, and the HTTP protocol on a loopback
server of its own (for the idle connection, whose deadline is the keep-alive timeout, too long to
wait for in the real server, and the bounds, made small)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from click.testing import CliRunner
from uvicorn.config import Config
from uvicorn.server import ServerState

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.cli.serve import chosen_limits
from bridge.config import parse_config
from bridge.errors import ReceiverError
from bridge.receiver.http_protocol import guarded
from bridge.receiver.intake import Limits
from bridge.receiver.server import allow_files
from tests.backend import wait_for
from tests.helpers import Served, ol_run_event, serve_process

TIMEOUT = 1.0  # s: serve --read-timeout in these tests


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_process(tmp_path / "deadlines.db", "--read-timeout", str(TIMEOUT)) as server:
        yield server


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)
    return sock


def _read_until_closed(sock: socket.socket, bound: float = 10.0) -> tuple[bytes, float]:
    """What the server sends until it closes the connection, and the seconds that took (the
    test fails past ``bound``)."""
    start = time.monotonic()
    got = b""
    sock.settimeout(bound)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return got, time.monotonic() - start
        got += chunk
        assert time.monotonic() - start < bound, "the server kept the connection open"


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def test_a_request_head_that_stalls_is_cut_off(served: Served) -> None:
    with _connect(served.url) as sock:
        sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\n")  # and no more
        got, took = _read_until_closed(sock)
    assert got == b""
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 5


def test_a_body_that_stalls_is_answered_408_and_nothing_is_kept(served: Served, tmp_path: Path) -> None:
    body = json.dumps(ol_run_event()).encode()
    with _connect(served.url) as sock:
        sock.sendall(_head("/api/v1/lineage", len(body)) + body[:20])  # the rest never comes
        got, took = _read_until_closed(sock)
    status, _, rest = got.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "request_timeout" and error["retriable"] is True
    assert "20 bytes came" in error["message"]
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 5
    metrics = requests.get(f"{served.url}/metrics", timeout=10).text
    assert 'olbridge_receiver_requests_total{route="/api/v1/lineage",status="408"} 1' in metrics
    with Catalog(tmp_path / "deadlines.db") as catalog:
        assert catalog.count_received()["received_events"] == 0


def test_a_body_that_trickles_past_the_deadline_is_cut_off(served: Served) -> None:
    body = json.dumps(ol_run_event()).encode()
    with _connect(served.url) as sock:
        sock.sendall(_head("/api/v1/lineage", len(body)))
        start = time.monotonic()
        for at in range(0, 12):  # a byte every 0.2 s: each comes well within the deadline, all of them not
            try:
                sock.sendall(body[at : at + 1])
            except OSError:
                break
            time.sleep(0.2)
        got, _ = _read_until_closed(sock)
        took = time.monotonic() - start
    assert got.startswith(b"HTTP/1.1 408 ")
    assert took < TIMEOUT + 5


def test_a_request_in_pieces_within_the_deadline_is_taken(served: Served, tmp_path: Path) -> None:
    body = json.dumps(ol_run_event()).encode()
    with _connect(served.url) as sock:
        head = _head("/api/v1/lineage", len(body))
        sock.sendall(head[:30])
        time.sleep(TIMEOUT / 3)
        sock.sendall(head[30:] + body[:50])
        time.sleep(TIMEOUT / 3)
        sock.sendall(body[50:])
        sock.settimeout(10)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201 ")
    with Catalog(tmp_path / "deadlines.db") as catalog:
        assert catalog.count_received()["received_events"] == 1


def _chunked_head(path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_cut_short_by_the_client_going_away_is_not_kept(tmp_path: Path, framing: str) -> None:
    """A client that said Content-Length: N + 1000, sent the N bytes of an event and closed the
    connection had the event committed and a 201 logged (what came was taken for the body), and so
    had one that closed a chunked body before its last chunk. A body that did not come whole is
    dropped, and counted and logged as 499 (the client went away), not as an answer it never got."""
    body = json.dumps(ol_run_event()).encode()
    if framing == "chunked":
        sent = _chunked_head("/api/v1/lineage") + b"%x\r\n%s\r\n" % (len(body), body)  # no last chunk
    else:
        sent = _head("/api/v1/lineage", len(body) + 1000) + body
    with serve_process(tmp_path / "cut.db", "--access-log") as served:
        with _connect(served.url) as sock:
            sock.sendall(sent)
        line = 'olbridge_receiver_requests_total{route="/api/v1/lineage",status="499"} 1'
        assert wait_for(lambda: line in requests.get(f"{served.url}/metrics", timeout=10).text, timeout=10)
        counted = [n for n in requests.get(f"{served.url}/metrics", timeout=10).text.splitlines() if "lineage" in n]
        assert counted == [line]
    assert " POST /api/v1/lineage 499 events=0 " in served.stderr
    with Catalog(tmp_path / "cut.db") as catalog:
        assert catalog.count_received()["received_events"] == 0


def test_the_read_timeout_is_checked() -> None:
    result = CliRunner().invoke(cli, ["serve", "--read-timeout", "0"])
    assert result.exit_code == 2
    assert "--read-timeout" in result.output and "0.1" in result.output


@contextlib.contextmanager
def _protocol_on_loopback(*, keep_alive: float = 0.5, **guards: Any) -> Iterator[tuple[int, list[float]]]:
    """The guarded protocol alone on a loopback port (keep-alive 0.5 s, head 5 s, and ``guards``
    for :func:`guarded`), on an event loop of its own; the times at which it closed a connection."""
    loop = asyncio.new_event_loop()

    async def app(scope: Any, receive: Any, send: Any) -> None:  # answers at once, reads no body
        if scope["path"] == "/slow":  # longer than the keep-alive timeout
            await asyncio.sleep(1.0)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    config = Config(app=app, timeout_keep_alive=keep_alive)
    config.load()
    state = ServerState()
    protocol = guarded(5.0, **guards)
    closed: list[float] = []

    class Watched(protocol):  # type: ignore[valid-type, misc]
        def connection_lost(self, exc: Exception | None) -> None:
            closed.append(time.monotonic())
            super().connection_lost(exc)

    server = loop.run_until_complete(
        loop.create_server(lambda: Watched(config=config, server_state=state, app_state={}), "127.0.0.1", 0)
    )
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, closed
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


@pytest.fixture
def protocol_server() -> Iterator[tuple[int, list[float]]]:
    with _protocol_on_loopback(first_byte_timeout=0.5) as server:
        yield server


def test_a_new_connection_that_sends_nothing_is_closed_after_the_first_byte_timeout() -> None:
    """A new connection that sent nothing was kept for the keep-alive timeout (75 s): twenty
    thousand of them held every file descriptor of a worker."""
    with _protocol_on_loopback(keep_alive=5.0, first_byte_timeout=0.3) as (port, closed):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            got, took = _read_until_closed(sock)
        assert got == b""
        assert 0.1 <= took < 3  # the first byte's 0.3 s, not the keep-alive's 5 s nor the head's 5 s
        assert wait_for(lambda: len(closed) == 1)


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closed ``sock`` (what it sent before is read and dropped)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset
        pass
    return True


def test_past_max_connections_the_one_idle_longest_is_closed() -> None:
    """Connections past --max-connections close the one that has waited longest without a
    request in hand (sending nothing, or half a head), not the new one nor one being answered."""
    with _protocol_on_loopback(keep_alive=30.0, first_byte_timeout=30.0, max_connections=3) as (port, _):
        oldest = socket.create_connection(("127.0.0.1", port), timeout=10)
        half = socket.create_connection(("127.0.0.1", port), timeout=10)
        half.sendall(b"GET / HTTP/1.1\r\n")  # half a head: no request in hand yet
        time.sleep(0.2)
        answered = socket.create_connection(("127.0.0.1", port), timeout=10)
        answered.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")  # in hand for a second
        time.sleep(0.2)
        with oldest, half, answered, socket.create_connection(("127.0.0.1", port), timeout=10) as new:
            assert _closed(oldest, 5)
            new.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert new.recv(65536).startswith(b"HTTP/1.1 200 ")
            assert answered.recv(65536).startswith(b"HTTP/1.1 200 ")
            assert not _closed(half, 0.2)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as newer:
                assert _closed(half, 5)  # the one waiting longest now (the others were answered since)
                newer.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert newer.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_past_max_connections_each_with_a_request_a_new_one_is_answered_503() -> None:
    with _protocol_on_loopback(max_connections=2) as (port, _):
        busy = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
        for sock in busy:
            sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as refused:
            got, _ = _read_until_closed(refused)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in head.lower()
        error = json.loads(body)["error"]
        assert (error["code"], error["retriable"]) == ("busy", True)
        assert error["message"] == "this worker holds its most connections (2), each with a request: retry"
        for sock in busy:
            with sock:
                assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(
    "request_, then",
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\r\n"),  # a blank line after the answer, as RFC 9112 allows
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", b"x"),  # a body answered unread
    ],
)
def test_bytes_that_begin_no_request_after_an_answer_hold_the_connection_no_longer_than_keep_alive(
    protocol_server: tuple[int, list[float]], request_: bytes, then: bytes
) -> None:
    port, closed = protocol_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        start = time.monotonic()
        sock.settimeout(0.1)
        while time.monotonic() - start < 5:  # a byte every 0.1 s: each within the keep-alive timeout
            try:
                sock.sendall(then)
                if sock.recv(65536) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        took = time.monotonic() - start
    assert took < 3, "the connection stayed open"  # the keep-alive timeout (0.5 s), not for good
    assert len(closed) == 1


def test_a_pipelined_request_is_not_cut_off_by_the_keep_alive_timeout_of_the_one_before(
    protocol_server: tuple[int, list[float]],
) -> None:
    port, _ = protocol_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while got.count(b"HTTP/1.1 200 ") < 2:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    assert got.count(b"HTTP/1.1 200 ") == 2, got  # the second answered, 1 s after the first


def test_idle_connections_past_max_connections_leave_other_clients_served(tmp_path: Path) -> None:
    """Three clients holding 20,000 connections that sent nothing took every file descriptor of
    the worker, each for 75 s, and new clients were refused: past --max-connections the one idle
    longest is closed, and one that sends nothing is closed after --first-byte-timeout."""
    options = ("--max-connections", "20", "--first-byte-timeout", "1")
    with serve_process(tmp_path / "connections.db", *options) as served:
        idle = [_connect(served.url) for _ in range(100)]
        try:
            for n in range(5):
                event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}")
                assert requests.post(f"{served.url}/api/v1/lineage", json=event, timeout=10).status_code == 201
            assert requests.get(f"{served.url}/healthz", timeout=10).status_code == 200
            start = time.monotonic()
            assert all(_closed(sock, 5) for sock in idle)  # closed to make room, or after their first second
            assert time.monotonic() - start < 5
        finally:
            for sock in idle:
                sock.close()


def test_the_connection_bounds_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(cli, ["serve", "--first-byte-timeout", "0"])
    assert result.exit_code == 2 and "--first-byte-timeout" in result.output
    config = parse_config({"serve": {"max_connections": 300}}, "olbridge.toml", tmp_path)
    assert chosen_limits({}, config.serve.limits).max_connections == 300
    assert Limits().max_connections == 1_000
    raised: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "setrlimit", lambda kind, limits: raised.append(limits))
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (1024, 4096))
    allow_files(1_000)  # 1,064 files: the soft limit raised toward the hard one
    assert raised == [(1_064, 4096)]
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (1024, 1024))
    with pytest.raises(ReceiverError) as refused:
        allow_files(1_000)
    assert str(refused.value) == (
        "--max-connections 1000 needs 1064 open files a worker, and this system lets a process open 1024 "
        "(ulimit -Hn): give fewer connections (--max-connections, [serve] max_connections), or raise the limit"
    )
