"""``olbridge serve``: the receiver on waitress, a production WSGI server (pure Python, threads).

With ``workers`` > 1 a supervisor binds the socket and forks that many workers, each a waitress
server with its own group-commit writer; they share the socket, the counters, and a lock file
through which they take turns at the catalog. A worker that dies is started again.

SIGTERM and Ctrl-C stop it cleanly: the listening socket closes, requests in flight finish, the
writer commits what it holds, and the catalog closes."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sqlite3
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from bridge.mapping.resolver import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake, Limits
from bridge.receiver.metrics import Metrics
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
    workers: int = 1


class Receiver:
    """The writer, the WSGI app and the server, started and stopped together."""

    def __init__(
        self,
        catalog_path: str | Path,
        resolver: Resolver,
        options: ServeOptions = ServeOptions(),
        *,
        metrics: Metrics | None = None,
        sockets: list[socket.socket] | None = None,
        lock_file: Path | None = None,
    ) -> None:
        self.catalog_path = str(catalog_path)
        self.metrics = metrics if metrics is not None else Metrics()
        self.writer = GroupWriter(
            catalog_path, resolver, durability=options.durability, on_commit=self.metrics.commit, lock_file=lock_file
        )
        self.intake = Intake(self.writer.submit, strict=options.strict, limits=options.limits, metrics=self.metrics)
        self.app = ReceiverApp(self.intake, token=options.token, ready=self.not_ready)
        where: dict[str, Any] = {"sockets": sockets} if sockets else {"host": options.host, "port": options.port}
        self.server: BaseWSGIServer | MultiSocketServer = create_server(
            self.app,
            threads=options.threads,
            # waitress's own limit sits above the app's, so that the app answers 413 in JSON
            max_request_body_size=2 * options.limits.max_body + 1024 * 1024,
            clear_untrusted_proxy_headers=True,
            ident="olbridge",
            **where,
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


def _balance(server: Any, counts: Any, slot: int) -> None:
    """Make a worker's server accept only while it holds no more connections than the least busy
    worker (plus one), publishing its own count as it goes."""
    readable = server.readable
    base = len(server._map)  # the listening socket and the trigger

    def balanced_readable() -> bool:
        mine = len(server._map) - base
        counts[slot] = mine
        return bool(readable()) and mine <= min(counts) + 1

    server.readable = balanced_readable


# waitress warns of every queued request under load; the metrics tell that story
logging.getLogger("waitress.queue").setLevel(logging.ERROR)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(
    catalog_path: str | Path,
    resolver: Resolver,
    options: ServeOptions = ServeOptions(),
    *,
    on_ready: Callable[[str], None] | None = None,
    say: Callable[[str], None] = lambda message: None,
) -> None:
    """Run the receiver until SIGTERM or SIGINT: in this process, or in ``options.workers``
    forked workers under a supervisor."""
    if options.workers <= 1:
        Receiver(catalog_path, resolver, options).run(on_ready)
        return
    # one listening socket for all the workers; each takes a new connection only while it has no
    # more open than the least busy worker (hashing a few long-lived connections across
    # SO_REUSEPORT sockets can give one worker most of them)
    listener = socket.create_server((options.host, options.port), backlog=1024)
    listener.setblocking(False)
    host, port = listener.getsockname()[:2]
    open_connections = multiprocessing.get_context("fork").Array("q", options.workers)
    metrics = Metrics()  # shared memory, made before the workers fork
    lock_file = Path(f"{catalog_path}.receiver-lock")
    workers: dict[int, int] = {}
    stopping = False

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                worker = Receiver(
                    catalog_path, resolver, options, metrics=metrics, sockets=[listener], lock_file=lock_file
                )
                _balance(worker.server, open_connections, slot)
                worker.run()
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        workers[pid] = slot

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for slot in range(options.workers):
            start(slot)
        if on_ready is not None:
            on_ready(f"http://{host}:{port} ({options.workers} workers)")
        while workers:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            slot = workers.pop(pid, -1)
            if slot >= 0 and not stopping:
                say(f"worker {pid} exited ({os.waitstatus_to_exitcode(status)}); starting another")
                time.sleep(1)
                start(slot)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
