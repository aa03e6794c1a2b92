"""The UI's HTTP server: the standard library's WSGI server, a thread a request, each request
lent one of the application's open catalogs (read-only use; any number of ``ui`` processes may
run beside ``serve`` and ``stream`` on one catalog).

Bounded as a server on a network must be: a request (its head, and a login's form) must arrive
whole within :data:`READ_TIMEOUT` seconds of its connection, however its bytes trickle in, else
the connection is closed; at most :data:`MAX_CONNECTIONS` are served at once, and at most
:data:`PER_CLIENT` of them from one address; past either, a new one is answered ``503`` and closed
at once. So idle or trickling connections cannot hold a thread each without end, nor one client
take every slot."""

from __future__ import annotations

import io
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bridge.errors import cannot_listen
from bridge.web.app import UiApp

READ_TIMEOUT = 15.0  # s from a connection's start by which its request must have arrived whole
MAX_CONNECTIONS = 100  # connections served at once; past them, 503
PER_CLIENT = 50  # of them, from one address
_BUSY_TEXT = b"too many connections at once\n"
BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_BUSY_TEXT)).encode() + b"\r\n\r\n" + _BUSY_TEXT
)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_activate(self) -> None:
        super().server_activate()
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()  # connections served, by client address

    def _take(self, client: str) -> bool:
        with self._lock:
            if sum(self._held.values()) >= MAX_CONNECTIONS or self._held[client] >= PER_CLIENT:
                return False
            self._held[client] += 1
            return True

    def _give_back(self, client: str) -> None:
        with self._lock:
            self._held[client] -= 1
            if self._held[client] <= 0:
                del self._held[client]

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._take(str(client_address[0])):
            try:
                request.settimeout(1.0)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a connection past its deadline, or its client gone: nothing to say (the standard
        # library printed a traceback for each)
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._give_back(str(client_address[0]))


class _Server6(_Server):
    address_family = socket.AF_INET6


def server_class(host: str) -> type[_Server]:
    """The server for an address: IPv6's for an IPv6 address (``::1``, ``::``)."""
    return _Server6 if ":" in host else _Server


class _Deadline(io.RawIOBase):
    """A connection's bytes, each read of the socket waiting only for what is left of the
    request's time (:data:`READ_TIMEOUT` from the connection's start): a request trickling in a
    byte at a time ends at the deadline as a silent one does."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        super().__init__()
        self._connection, self._deadline = connection, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _Writer:
    """A connection's writer that gives each write the whole :data:`READ_TIMEOUT` again (a reply
    is not bound by what was left of its request's time)."""

    def __init__(self, writer: Any, connection: socket.socket, timeout: float) -> None:
        self._writer, self._connection, self._timeout = writer, connection, timeout

    def write(self, data: bytes) -> Any:
        self._connection.settimeout(self._timeout)
        return self._writer.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


class _QuietHandler(WSGIRequestHandler):
    timeout = READ_TIMEOUT  # the socket's, until the reader below takes it

    def setup(self) -> None:
        super().setup()
        limit = type(self).timeout
        self.rfile.close()  # the socket's own reader, unread: read through the deadline instead
        self.rfile = io.BufferedReader(_Deadline(self.connection, time.monotonic() + limit))
        self.wfile = _Writer(self.wfile, self.connection, limit)  # type: ignore[assignment]

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        # the request's target as sent, as gunicorn names it: PATH_INFO comes decoded, so that an
        # id's %2F is a slash there, and the address a login leads back to is made of this
        environ["RAW_URI"] = self.path
        return environ

    def log_message(self, format: str, *args: object) -> None:
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(app: UiApp, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve ``app`` on ``host:port`` until Ctrl-C or SIGTERM."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        made = make_server(host, port, app, server_class=server_class(host), handler_class=_QuietHandler)
    except OSError as exc:  # a port in use, a host that does not resolve: one Error line
        raise cannot_listen(exc, host, port) from None
    with made as server:
        bound_host, bound_port = str(server.server_address[0]), server.server_address[1]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        on_ready(f"http://{shown}:{bound_port}/")
        try:
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            app.close()


__all__ = ["serve"]
