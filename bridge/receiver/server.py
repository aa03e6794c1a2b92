"""``olbridge serve``: the receiver on waitress, a production WSGI server (pure Python, threads).

SIGTERM and Ctrl-C stop it cleanly: the listening socket closes, requests in flight finish, the
writer commits what it holds, and the catalog closes."""

from __future__ import annotations

import signal
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from bridge.mapping.resolver import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake, Limits
from bridge.receiver.writer import GroupWriter


@attrs.frozen
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 5050
    token: str | None = None
    strict: bool = False
    threads: int = 8
    durability: str = "full"
    limits: Limits = Limits()


class Receiver:
    """The writer, the WSGI app and the server, started and stopped together."""

    def __init__(self, catalog_path: str | Path, resolver: Resolver, options: ServeOptions = ServeOptions()) -> None:
        self.catalog_path = str(catalog_path)
        self.writer = GroupWriter(catalog_path, resolver, durability=options.durability)
        self.intake = Intake(self.writer.submit, strict=options.strict, limits=options.limits)
        self.app = ReceiverApp(
            self.intake, token=options.token, ready=self.not_ready, commits=lambda: self.writer.groups
        )
        self.server: BaseWSGIServer | MultiSocketServer = create_server(
            self.app,
            host=options.host,
            port=options.port,
            threads=options.threads,
            # waitress's own limit sits above the app's, so that the app answers 413 in JSON
            max_request_body_size=2 * options.limits.max_body + 1024 * 1024,
            clear_untrusted_proxy_headers=True,
            ident="olbridge",
        )

    @property
    def url(self) -> str:
        server: Any = self.server
        return f"http://{server.effective_host}:{server.effective_port}"

    def not_ready(self) -> str | None:
        """None when the catalog can take events, else why not."""
        if not self.writer.alive:
            return "the writer is not running"
        try:
            with sqlite3.connect(f"file:{self.catalog_path}?mode=ro", uri=True, timeout=1) as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            return f"the catalog cannot be read: {exc}"
        return None

    def run(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve until SIGTERM or SIGINT."""
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        else:
            previous = None
        try:
            if on_ready is not None:
                on_ready(self.url)
            self.server.run()
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            self.close()

    def close(self) -> None:
        """Close the socket (waitress has let requests in flight finish), then commit what the
        writer holds and close the catalog."""
        try:
            self.server.close()
        except OSError:
            pass
        self.writer.close()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
