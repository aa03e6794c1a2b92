"""The UI's HTTP server: the standard library's WSGI server, a thread a request, each request
lent one of the application's open catalogs (read-only use; any number of ``ui`` processes may
run beside ``serve`` and ``stream`` on one catalog).

Bounded as a server on a network must be: a connection that sends nothing for
:data:`READ_TIMEOUT` seconds (a request's head or a login's body promised and never sent) is
closed, and past :data:`MAX_CONNECTIONS` at once a new one is answered ``503`` and closed at
once, so that idle connections cannot hold a thread each without end."""

from __future__ import annotations

import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bridge.errors import cannot_listen
from bridge.web.app import UiApp

READ_TIMEOUT = 15.0  # s a connection may stay silent while a request is read
MAX_CONNECTIONS = 100  # connections served at once; past them, 503
BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: 28\r\n\r\ntoo many connections at once\n"
)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_activate(self) -> None:
        super().server_activate()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a connection silent past the read timeout, or its client gone: nothing to say (the
        # standard library printed a traceback for each)
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


def server_class(host: str) -> type[_Server]:
    """The server for an address: IPv6's for an IPv6 address (``::1``, ``::``)."""
    return _Server6 if ":" in host else _Server


class _QuietHandler(WSGIRequestHandler):
    timeout = READ_TIMEOUT  # the socket's: each read of a request waits at most this long

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
