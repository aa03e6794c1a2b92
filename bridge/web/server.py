"""The UI's HTTP server: the standard library's WSGI server, a thread a request, each request
lent one of the application's open catalogs (read-only use; any number of ``ui`` processes may
run beside ``serve`` and ``stream`` on one catalog)."""

from __future__ import annotations

import signal
import socket
import socketserver
import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bridge.errors import cannot_listen
from bridge.web.app import UiApp


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def server_class(host: str) -> type[_Server]:
    """The server for an address: IPv6's for an IPv6 address (``::1``, ``::``)."""
    return _Server6 if ":" in host else _Server


class _QuietHandler(WSGIRequestHandler):
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
