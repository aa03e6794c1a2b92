"""uvicorn's HTTP protocol (httptools) with deadlines for what uvicorn waits for without one.

uvicorn closes a connection left idle after a response (its keep-alive timeout), but waits without
end for a new connection's first request and for a request's head once its first bytes came: a
client that opens connections and sends nothing, or a few bytes of headers now and then, holds a
connection and its memory for as long as it likes, and enough of them hold every file descriptor
the worker has. Here a new connection that sends nothing is closed after ``first_byte_timeout``
seconds, one that after a response sends nothing that begins a request after the keep-alive
timeout (uvicorn's own timer stops at the first byte that comes); a request's head must be
complete within ``head_timeout`` seconds of its first byte, else the connection is closed. (The
body's deadline is the application's: :class:`bridge.receiver.asgi.AsgiReceiver` answers 408.)

A worker holds at most ``max_connections`` connections open. A connection past them closes the
one that has waited longest without a request in hand (one that has not sent a whole request
head since it was made, or since its last response: no request on it is lost, its client opens
another when it has one); when every one has a request in hand, the new one is answered 503
(``busy``, retriable) and closed. So a client holding thousands of idle connections takes
neither the worker's file descriptors nor others' turn.

A request's head is also bounded in bytes, counted as they arrive and before the parser holds
them (httptools joins a header's pieces as they come, and would hold a header of any size): past
``max_head`` bytes for the request line and headers together, or ``max_header`` for one header,
the answer is 431, past ``max_request_line`` for the request line 414, each in the receiver's
JSON error shape, and the connection closes. So is text that is not HTTP (400), which uvicorn
answered in plain text, a request of an HTTP version other than 1.0 and 1.1 (400; httptools
reads ``HTTP/2.0`` and a line without a version, HTTP/0.9's), a transfer coding other than
``chunked`` (501: the body would be read otherwise than it was sent), and an ``Expect`` other
than ``100-continue`` (417). A refusal that comes while a request before it on the connection is
being answered (pipelined bytes that are not HTTP after a request) waits for that answer, and
every one before it, to go first: the requests before it are answered as any others. A request
whose own body is framed wrongly (a chunk's size that is not hexadecimal, a chunk not ended by
CRLF) is answered 400 at once, not after the body's deadline: nothing of it is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bridge.receiver.app import RETRY_AFTER, error_body, reason
from bridge.receiver.intake import BODY_REFUSED

_END = b"\r\n\r\n"


class _Refused(Exception):
    """Raised in a parser callback: the request is refused (the protocol's ``refusal``)."""


class GuardedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with a deadline for a new connection's first byte and for a
    request's head, and a bound on a worker's connections (:func:`guarded` makes one with its
    deadlines and bounds, and the worker's idle connections of its own)."""

    head_timeout: float = 60.0
    first_byte_timeout: float = 10.0
    max_connections: int = 1_000
    # the worker's connections without a request in hand (no whole head since it was made, or
    # since its last response), the one that has waited longest first: those a connection past
    # max_connections may close
    idle: ClassVar[dict[GuardedProtocol, None]] = {}
    max_request_line: int = 8 * 1024
    max_header: int = 8 * 1024
    max_head: int = 32 * 1024
    # told of each request refused here (method, path, status; "-" where not read): the metrics'
    # and the access log's (staticmethod: a function, not a method of the protocol)
    on_refused: Callable[[str, str, int], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_head = True  # the bytes that come are a request's head (or what comes before one)
        self._head_bytes = 0
        self._tail = b""  # the last bytes of the head so far, for an end split between two reads
        self.refusal: tuple[int, str, str] | None = None
        self._unstarted: object | None = None  # a pipelined request refused before it started

    # --- bytes ------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            return
        if self._in_head:
            seen = self._head_bytes + len(data)
            if seen > self.max_head:
                window = self._tail + data
                end = window.find(_END)
                if end < 0 or self._head_bytes - len(self._tail) + end + len(_END) > self.max_head:
                    self._refuse(431, "headers_too_large", f"the request's head has more than {self.max_head} bytes")
                    return
            self._head_bytes = seen
            self._tail = (self._tail + data)[-3:]
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "bad_request", "this receiver upgrades no connection")
        except httptools.HttpParserError as exc:
            if self.refusal is not None:  # a callback raised _Refused, which the parser reports so
                self._answer()
            else:
                self._refuse(400, "bad_request", f"not an HTTP/1.1 request: {exc}")

    def _refuse(self, status: int, code: str, message: str) -> None:
        self.refusal = (status, code, message)
        self._answer()

    def _answer(self) -> None:
        """The refusal's answer, and the connection closed; while a request before it on the
        connection is being answered (or waits its turn), after those answers
        (:meth:`on_response_complete`): the two would mix, and the request answered first may
        have been committed, which its client must hear."""
        self._disarm()
        if self.transport.is_closing() or self.refusal is None:
            return
        status, code, message = self.refusal
        cycle = getattr(self, "cycle", None)
        told = self.on_refused
        if cycle is not None and not cycle.response_complete:
            queued = [entry for entry in self.pipeline if entry[0] is cycle]
            if queued and cycle.more_body:
                # the request whose body is refused waits behind requests being answered
                # (pipelined): it never starts, and the refusal follows their answers
                for entry in queued:
                    self.pipeline.remove(entry)
                self._unstarted = cycle
                return
            if self.pipeline or not (cycle.more_body and not cycle.response_started):
                return  # the answers in hand go first; the refusal follows them
            # the body of the request in hand is what is refused (a chunk framed wrongly): the
            # application, reading it, hears that it went away, and why (its answer is the same,
            # counted and logged by it, and goes nowhere); this one goes now
            cycle.scope[BODY_REFUSED] = message
            cycle.disconnected = True
            cycle.message_event.set()
            if cycle is not self._unstarted:
                told = None
        if told is not None:
            told(*self._read_so_far(), status)
        body = orjson.dumps(error_body(status, code, message))
        retry = f"retry-after: {RETRY_AFTER}\r\n" if status == 503 else ""
        head = (
            f"HTTP/1.1 {status} {reason(status)}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{retry}connection: close\r\nserver: olbridge\r\n\r\n"
        )
        self.transport.write(head.encode("latin-1") + body)
        self.transport.close()

    def _read_so_far(self) -> tuple[str, str]:
        """The refused request's method and target, as far as they were read ("-": not)."""
        try:
            method = self.parser.get_method().decode("latin-1")
        except Exception:  # httptools has read no method yet (text that is not HTTP)
            method = "-"
        url = getattr(self, "url", b"") or b""
        path = url.split(b"?", 1)[0].decode("latin-1")[:200] if url else "-"
        return method, path

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "bad_request", msg)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.max_request_line:
            self.refusal = (414, "uri_too_long", f"the request's target has more than {self.max_request_line} bytes")
            raise _Refused

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > self.max_header:
            self.refusal = (431, "headers_too_large", f"a header has more than {self.max_header} bytes")
            raise _Refused
        if not self._in_head:
            # a trailer field (after a chunked body's last chunk): counted as the head's bytes are,
            # and not kept (a request's headers are those of its head; uvicorn would add each to
            # them, however many came)
            self._head_bytes += len(name) + len(value)
            if self._head_bytes > self.max_head:
                self.refusal = (
                    431,
                    "headers_too_large",
                    f"the request's trailer fields have more than {self.max_head} bytes",
                )
                raise _Refused
            return
        super().on_header(name, value)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            return
        self._arm(self.first_byte_timeout)
        self.idle[self] = None

    def _make_room(self) -> bool:
        """Past ``max_connections``: close the connection idle longest, or else refuse this one
        (503); whether this one stays."""
        waited = next(iter(self.idle), None)
        if waited is not None:
            del self.idle[waited]
            waited._disarm()
            waited.transport.close()
            return True
        most = self.max_connections
        self._refuse(503, "busy", f"this worker holds its most connections ({most}), each with a request: retry")
        return False

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.head_timeout)

    def on_headers_complete(self) -> None:
        self._check_head()
        self.idle.pop(self, None)  # a request in hand
        self._disarm()
        self._in_head, self._head_bytes, self._tail = False, 0, b""
        super().on_headers_complete()

    def _check_head(self) -> None:
        """Refuse (:class:`_Refused`) what the head asks that this receiver does not do: an HTTP
        version other than 1.0 and 1.1, a transfer coding other than ``chunked`` (httptools reads
        the body as if it were plain: it would be read otherwise than it was sent), and an
        expectation other than ``100-continue`` (an empty ``Expect`` asks for nothing: a list of
        none, as HTTP reads an empty list header)."""
        version = self.parser.get_http_version()
        if version not in ("1.0", "1.1"):
            self.refusal = (400, "bad_request", f"not an HTTP/1.1 request: HTTP version {version!r}")
            raise _Refused
        for name, value in self.headers:
            if name == b"transfer-encoding":
                codings = [c.strip().lower() for c in value.decode("latin-1").split(",")]
                if codings != ["chunked"]:
                    self.refusal = (
                        501,
                        "unsupported_transfer_coding",
                        f"Transfer-Encoding {value.decode('latin-1')[:100]!r}: this receiver takes chunked alone "
                        "(Content-Encoding: gzip for a compressed body)",
                    )
                    raise _Refused
            elif name == b"expect" and value.strip() and value.strip().lower() != b"100-continue":
                said = value.decode("latin-1")[:100]
                self.refusal = (417, "expectation_failed", f"Expect {said!r}: this receiver meets 100-continue alone")
                raise _Refused

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._tail = True, 0, b""  # (trailer fields counted in _head_bytes)

    def on_response_complete(self) -> None:
        waiting = bool(self.pipeline)  # a pipelined request, which uvicorn starts now: not idle
        super().on_response_complete()
        if self.refusal is not None:  # refused behind requests answered first: after the last of them
            if not waiting:
                self._answer()
            return
        if not waiting and not self.transport.is_closing():
            # uvicorn's keep-alive timer goes at the first byte that comes after a response, and
            # comes back only with the next response: bytes that begin no request (the rest of a
            # body answered before it was read, blank lines) would hold the connection for good
            self._arm(self.timeout_keep_alive)
            self.idle[self] = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.idle.pop(self, None)
        super().connection_lost(exc)


def guarded(
    head_timeout: float,
    *,
    first_byte_timeout: float = 10.0,
    max_connections: int = 1_000,
    max_request_line: int = 8 * 1024,
    max_header: int = 8 * 1024,
    max_head: int = 32 * 1024,
    on_refused: Callable[[str, str, int], None] | None = None,
) -> type[GuardedProtocol]:
    """The protocol class for uvicorn's ``http`` setting, with ``head_timeout`` seconds for a
    request's head, ``first_byte_timeout`` for a new connection's first byte, at most
    ``max_connections`` open, and the head's limits in bytes; ``on_refused`` hears of each
    request it refuses. Each class keeps its own idle connections: one a worker."""
    limits = {"max_request_line": max_request_line, "max_header": max_header, "max_head": max_head}
    told = {"on_refused": staticmethod(on_refused)} if on_refused is not None else {}
    deadlines = {"head_timeout": head_timeout, "first_byte_timeout": first_byte_timeout}
    bounds = {"max_connections": max_connections, "idle": {}}
    return type("GuardedProtocol", (GuardedProtocol,), {**deadlines, **bounds, **limits, **told})
