"""Deadlines for slow clients: a request's head and body must come within ``serve --read-timeout``,
a connection that sends nothing is closed after the keep-alive timeout. A real ``olbridge serve``
on loopback, and the HTTP protocol on a loopback server of its own (for the idle connection,
whose deadline is the keep-alive timeout, too long to wait for in the real server)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from uvicorn.config import Config
from uvicorn.server import ServerState

from bridge.catalog import Catalog
from bridge.receiver.http_protocol import guarded
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


def test_the_read_timeout_is_checked() -> None:
    from click.testing import CliRunner

    from bridge.cli import cli

    result = CliRunner().invoke(cli, ["serve", "--read-timeout", "0"])
    assert result.exit_code == 2
    assert "--read-timeout" in result.output and "0.1" in result.output


@pytest.fixture
def protocol_server() -> Iterator[tuple[int, list[float]]]:
    """The guarded protocol alone on a loopback port (keep-alive 0.5 s, head 5 s), on an event
    loop of its own; the times at which it closed a connection."""
    loop = asyncio.new_event_loop()

    async def app(scope: Any, receive: Any, send: Any) -> None:  # answers at once, reads no body
        if scope["path"] == "/slow":  # longer than the keep-alive timeout
            await asyncio.sleep(1.0)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    config = Config(app=app, timeout_keep_alive=0.5)
    config.load()
    state = ServerState()
    protocol = guarded(5.0)
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


def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive_timeout(
    protocol_server: tuple[int, list[float]],
) -> None:
    port, closed = protocol_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        got, took = _read_until_closed(sock)
    assert got == b""
    assert 0.45 <= took < 4  # the keep-alive timeout (0.5 s), not the head's 5 s
    assert len(closed) == 1


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
