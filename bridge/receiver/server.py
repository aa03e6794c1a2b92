"""``olbridge serve``: the receiver on waitress, a production WSGI server (pure Python, threads).

A supervisor binds the socket and forks one writer process (the catalog's only writer, committing
groups of events) and ``workers`` HTTP workers, each a waitress server that parses, judges and
reads events and hands the accepted ones to the writer. They share the socket and the counters. A
process that dies is started again. On PostgreSQL as on SQLite each ``serve`` has its one
writer, and several ``serve`` processes, on several hosts, may share a PostgreSQL catalog: each
writer commits its own groups, side by side with the others'.

SIGTERM and Ctrl-C stop it cleanly: the workers close the listening socket and finish the
requests in flight, then the writer commits what it holds and closes the catalog."""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from bridge.catalog.store import unreadable
from bridge.config import NamedToken
from bridge.errors import BridgeError, ReceiverError
from bridge.mapping.resolver import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake, Limits
from bridge.receiver.metrics import Metrics
from bridge.receiver.writer import CatalogWriter, QueuedWriter
from bridge.receiver.writer_process import RemoteWriter, listen, run_writer

WRITER = -1  # the writer process's slot among the supervisor's children


@attrs.frozen
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 5050
    token: str | None = None
    strict: bool = False
    threads: int = 8
    durability: str = "full"
    limits: Limits = Limits()
    workers: int = 2
    forward: bool = False  # queue every accepted event in the outbox, as it came
    tokens: tuple[NamedToken, ...] = ()  # named tokens, each allowed its namespaces (instead of token)


class Receiver:
    """A writer (:class:`bridge.receiver.writer_process.RemoteWriter` in ``olbridge serve``), the
    WSGI app and the server, started and stopped together."""

    def __init__(
        self,
        catalog_path: str | Path,
        writer: QueuedWriter,
        options: ServeOptions = ServeOptions(),
        *,
        metrics: Metrics | None = None,
        sockets: list[socket.socket] | None = None,
    ) -> None:
        self.catalog_path = catalog_path
        self.metrics = metrics if metrics is not None else Metrics([t.name for t in options.tokens])
        self.writer = writer
        self.intake = Intake(self.writer.submit, strict=options.strict, limits=options.limits, metrics=self.metrics)
        self.app = ReceiverApp(
            self.intake, token=options.token, tokens=options.tokens, forward=options.forward, ready=self.not_ready
        )
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
        return unreadable(self.catalog_path)

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
        """Close the socket (waitress has let requests in flight finish), then hand over what the
        writer holds and stop it."""
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


def _follow(supervisor: int, every: float = 1.0) -> None:
    """Stop this process as SIGTERM would once its supervisor is gone (killed with SIGKILL, say),
    rather than serve or hold the catalog on as an orphan."""

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="olbridge-supervisor-watch", daemon=True).start()


# waitress warns of every queued request under load; the metrics tell that story
logging.getLogger("waitress.queue").setLevel(logging.ERROR)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


_BIND_REASONS = {
    errno.EADDRINUSE: "the address is in use (another server listens on it; choose another --port)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def listen_on(host: str, port: int) -> socket.socket:
    """The listening socket, made before any process forks, so that a port in use or a host that
    does not resolve is one clear :class:`ReceiverError` from the command itself."""
    try:
        return socket.create_server((host, port), backlog=1024)
    except OSError as exc:  # socket.gaierror too, which create_server re-raises as OSError
        code = exc.errno or 0
        if isinstance(exc, socket.gaierror) or code < 0:  # getaddrinfo's codes are negative
            reason = "the host does not resolve"
        else:
            reason = _BIND_REASONS.get(code) or (os.strerror(code) if code else str(exc))
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise ReceiverError(f"cannot listen on {where}: {reason}") from None


def serve(
    catalog_path: str | Path,
    resolver: Resolver,
    options: ServeOptions = ServeOptions(),
    *,
    on_ready: Callable[[str], None] | None = None,
    say: Callable[[str], None] = lambda message: None,
) -> None:
    """Run the receiver until SIGTERM or SIGINT: a supervisor, one writer process and
    ``options.workers`` HTTP workers, each started again should it die. On PostgreSQL too: one
    writer gathers the events of every worker of this process into its groups, which are larger
    (fewer rows written an event: a dataset the group names is written once) and never wait for a
    request thread's interpreter lock while holding the rows they lock; measured against a writer
    in each worker, 5,000 against 4,700 events/s in batches of 100 and 950 against 690 single
    events a second (benchmarks/scale.py, docs/benchmarks.md). Receivers of other hosts, and other
    ``serve`` processes, commit side by side with it.

    The workers share one listening socket; each takes a new connection only while it has no more
    open than the least busy worker (hashing a few long-lived connections across SO_REUSEPORT
    sockets can give one worker most of them). They hand accepted events to the writer process,
    the catalog's one writer, over a Unix socket in a private temporary directory."""
    listener = listen_on(options.host, options.port)
    listener.setblocking(False)
    host, port = listener.getsockname()[:2]
    private = tempfile.mkdtemp(prefix="olbridge-serve-")
    address = os.path.join(private, "writer.sock")
    writer_socket = listen(address)
    # no lock: each slot has one writer, and a stale read only delays an accept
    open_connections = multiprocessing.get_context("fork").RawArray("q", max(options.workers, 1))
    metrics = Metrics([t.name for t in options.tokens])  # shared memory, made before the processes fork
    children: dict[int, int] = {}  # pid -> worker slot, or WRITER
    stopping = False

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the supervisor's handler: ours come below
                _follow(supervisor)
                # every group of events makes thousands of short-lived objects: collect the young
                # generation less often (the older ones, frozen below, are never walked again)
                gc.set_threshold(5_000, 20, 50)
                if slot == WRITER:
                    listener.close()
                    run_writer(
                        writer_socket,
                        CatalogWriter(catalog_path, resolver, durability=options.durability, on_commit=metrics.commit),
                    )
                else:
                    writer_socket.close()
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    worker = Receiver(catalog_path, RemoteWriter(address), options, metrics=metrics, sockets=[listener])
                    _balance(worker.server, open_connections, slot)
                    worker.run()
                code = 0
            except BridgeError as exc:  # the catalog cannot be opened, say: no traceback for that
                say(f"Error: {exc}")
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        children[pid] = slot

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid, slot in list(children.items()):
            if slot != WRITER:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

    supervisor = os.getpid()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    # what the processes inherit (modules, naming rules) lives as long as they do: kept out of the
    # collector's walks, and out of copy-on-write page faults after the fork
    gc.freeze()
    try:
        start(WRITER)
        for slot in range(max(options.workers, 1)):
            start(slot)
        if on_ready is not None:
            workers = f"{options.workers} worker{'s' if options.workers != 1 else ''}"
            on_ready(f"http://{host}:{port}, {workers} and a writer")
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid not in children:
                continue
            slot = children.pop(pid)
            if stopping:
                if all(s == WRITER for s in children.values()):  # the workers are done: the writer's turn
                    for writer_pid in children:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(writer_pid, signal.SIGTERM)
                continue
            role = "the writer" if slot == WRITER else f"worker {pid}"
            say(f"{role} exited ({os.waitstatus_to_exitcode(status)}); starting another")
            time.sleep(1)
            start(slot)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
        writer_socket.close()
        shutil.rmtree(private, ignore_errors=True)
