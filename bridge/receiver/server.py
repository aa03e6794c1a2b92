"""``olbridge serve``: the receiver on uvicorn (httptools and uvloop), a production ASGI server.

A supervisor binds the socket and forks one writer process (the catalog's only writer, committing
groups of events) and ``workers`` HTTP workers, each an event loop that parses, judges and reads
events and hands the accepted ones to the writer, awaiting their results. They share the socket and the counters. A
process that dies is started again. On PostgreSQL as on SQLite each ``serve`` has its one
writer, and several ``serve`` processes, on several hosts, may share a PostgreSQL catalog: each
writer commits its own groups, side by side with the others'.

SIGTERM and Ctrl-C stop it cleanly: the port closes (new connections are refused), the workers
finish the requests in flight, then the writer commits what it holds and closes the catalog."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
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

import attrs
import uvicorn

from bridge.catalog.availability import Availability
from bridge.catalog.engines import open_engine
from bridge.config import NamedToken
from bridge.errors import BridgeError, ReceiverError, cannot_listen
from bridge.mapping.resolver import Resolver
from bridge.receiver.access_log import AccessLog
from bridge.receiver.app import ReceiverApp
from bridge.receiver.asgi import AsgiReceiver
from bridge.receiver.http_protocol import guarded
from bridge.receiver.intake import Intake, Limits
from bridge.receiver.metrics import HealthCounts, Metrics
from bridge.receiver.readiness import Readiness
from bridge.receiver.writer import CatalogWriter
from bridge.receiver.writer_process import RemoteWriter, listen, run_writer

WRITER = -1  # the writer process's slot among the supervisor's children
GC_YOUNG = 50_000  # allocations (net of frees) between two collections of the young generation


@attrs.frozen
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 5050
    token: str | None = None
    strict: bool = False
    durability: str = "full"
    limits: Limits = Limits()
    workers: int = 1
    forward: bool = False  # queue every accepted event in the outbox, as it came
    tokens: tuple[NamedToken, ...] = ()  # named tokens, each allowed its namespaces (instead of token)
    read_timeout: float = 60.0  # s a client has to send a request's head, and again its body
    first_byte_timeout: float = 10.0  # s a new connection has to send its first byte
    access_log: str | None = None  # "text" or "json": a line a request on stderr (None: no log)


KEEP_ALIVE = 75  # s an idle connection stays open (above the usual 60 s of load balancers)
GRACE = 30  # s the requests in flight have to finish once a worker is told to stop


_STOPS = {signal.SIGTERM, signal.SIGINT}  # what tells serve to stop
# s the writer has to stop once told to (it commits what it holds); past it, it is killed
WRITER_STOP = 30.0
RESTART_SOON, RESTART_MOST = 10.0, 30.0  # s: a writer that exits this soon failed; the longest wait to restart it


def run_worker(
    listener: socket.socket,
    catalog_path: str | Path,
    address: str,
    options: ServeOptions,
    metrics: Metrics,
    readiness: Readiness | None = None,
) -> None:
    """One HTTP worker until SIGTERM: uvicorn (httptools, uvloop) on the shared socket, the
    receiver's answers, the writer process reached at ``address``. On SIGTERM it stops taking
    connections, lets the requests in flight finish, then hands on what it holds."""
    writer = RemoteWriter(
        address,
        gather=open_engine(catalog_path).gather,
        down=readiness.writer_down if readiness is not None else None,
    )

    def not_ready() -> str | None:
        if not writer.alive:
            return "the writer is not running"
        return readiness.why() if readiness is not None else None

    intake = Intake(None, strict=options.strict, limits=options.limits, metrics=metrics)
    access_log = AccessLog(options.access_log) if options.access_log else None
    app = ReceiverApp(
        intake,
        token=options.token,
        tokens=options.tokens,
        forward=options.forward,
        ready=not_ready,
        access_log=access_log,
    )
    config = uvicorn.Config(
        AsgiReceiver(app, writer, body_timeout=options.read_timeout),
        # httptools, with a deadline for a request's head, and its bytes bounded
        http=guarded(
            options.read_timeout,
            first_byte_timeout=options.first_byte_timeout,
            max_connections=options.limits.max_connections,
            max_request_line=options.limits.max_request_line,
            max_header=options.limits.max_header,
            max_head=options.limits.max_headers,
            on_refused=app.refused_unread,
        ),
        loop="uvloop",
        lifespan="on",
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # the receiver reads no client address
        server_header=False,
        headers=[("server", "olbridge")],
        timeout_keep_alive=KEEP_ALIVE,
        timeout_graceful_shutdown=GRACE,
    )
    server = uvicorn.Server(config)
    # Until uvicorn takes SIGTERM as it starts, a SIGTERM (the supervisor stopping) is uvicorn's all
    # the same: it starts, sees it is to exit, and stops, rather than the signal being lost and the
    # worker serving on while the supervisor waits for it. Once done, uvicorn raises the signal that
    # stopped it again: it finds this handler, not the default.
    signal.signal(signal.SIGTERM, server.handle_exit)
    server.run(sockets=[listener])


def _follow(supervisor: int, every: float = 1.0) -> None:
    """Stop this process as SIGTERM would once its supervisor is gone (killed with SIGKILL, say),
    rather than serve or hold the catalog on as an orphan."""

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="olbridge-supervisor-watch", daemon=True).start()


def listen_on(host: str, port: int) -> socket.socket:
    """The listening socket, made before any process forks, so that a port in use or a host that
    does not resolve is one clear :class:`ReceiverError` from the command itself."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET  # an IPv6 address (::1, ::)
        return socket.create_server((host, port), family=family, backlog=1024)
    except OSError as exc:  # socket.gaierror too, which create_server re-raises as OSError
        raise cannot_listen(exc, host, port) from None


# files a worker holds besides its connections (a dozen and a half: its listening socket, the
# writer's, the catalog's files, its event loop's), with room to spare
FILES_BESIDE = 64


def allow_files(connections: int) -> None:
    """Let this process (and the workers it forks) open ``connections`` files and
    :data:`FILES_BESIDE` more, raising its soft limit toward the hard one when it is lower, so that
    a worker at its most connections still accepts, and closes what it must, rather than fail for
    want of a file descriptor; a :class:`ReceiverError` when the system does not allow as many."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + FILES_BESIDE
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    problem = None
    if hard != resource.RLIM_INFINITY and hard < needed:
        problem = f"this system lets a process open {hard} (ulimit -Hn)"
    else:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        except (OSError, ValueError) as exc:
            problem = f"the limit of {soft} (ulimit -n) cannot be raised: {exc}"
    if problem is not None:
        raise ReceiverError(
            f"--max-connections {connections} needs {needed} open files a worker, and {problem}: give fewer "
            "connections (--max-connections, [serve] max_connections), or raise the limit"
        )


def serve(
    catalog_path: str | Path,
    resolver: Resolver,
    options: ServeOptions = ServeOptions(),
    *,
    on_ready: Callable[[str], None] | None = None,
    say: Callable[[str], None] = lambda message: None,
    health: HealthCounts | None = None,
    others: Callable[[int, int, bool], None] = lambda pid, code, stopping: None,
) -> None:
    """Run the receiver until SIGTERM or SIGINT: a supervisor, one writer process and
    ``options.workers`` HTTP workers, each started again should it die. The supervisor reaps
    every child of the process: one of the caller's that exits is told to ``others`` (its pid, its
    exit code, and whether the receiver is stopping). On PostgreSQL too: one
    writer gathers the events of every worker of this process into its groups, which are larger
    (fewer rows written an event: a dataset the group names is written once) and never wait for a
    request thread's interpreter lock while holding the rows they lock; measured against a writer
    in each worker, 5,000 against 4,700 events/s in batches of 100 and 950 against 690 single
    events a second (benchmarks/scale.py, docs/benchmarks.md). Receivers of other hosts, and other
    ``serve`` processes, commit side by side with it.

    The workers share one listening socket (whichever is free first takes a new connection) and
    hand accepted events to the writer process, the catalog's one writer, over a Unix socket in a
    private temporary directory."""
    allow_files(options.limits.max_connections)
    listener = listen_on(options.host, options.port)
    listener.setblocking(False)
    host, port = listener.getsockname()[:2]
    private = tempfile.mkdtemp(prefix="olbridge-serve-")
    address = os.path.join(private, "writer.sock")
    writer_socket = listen(address)
    # shared memory, made before the processes fork
    metrics = Metrics([t.name for t in options.tokens], workers=options.workers, health=health)
    readiness = Readiness()  # what the writer sees, shared likewise
    failures = 0  # the writer's exits in a row, each soon after it started: it is started again later each time
    children: dict[int, int] = {}  # pid -> worker slot, or WRITER
    started: dict[int, float] = {}  # pid -> when it was started
    stopping = False
    writer_told: float | None = None  # when the writer was told to stop
    writer_killed = False

    def start(slot: int) -> bool:
        """Start a child in ``slot``, unless told to stop (False). A stop is held off from the
        look at ``stopping`` until the child is known: one that came between would close the port
        under a child about to start, and not tell it to stop."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            if stopping:
                return False
            pid = fork(slot)
            children[pid] = slot
            started[pid] = time.monotonic()
            return True
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)

    def writer_turn() -> None:
        """Once the workers are done, stop the writer (it commits what it holds)."""
        nonlocal writer_told
        if all(s == WRITER for s in children.values()):
            for writer_pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(writer_pid, signal.SIGTERM)
                    writer_told = writer_told or time.monotonic()

    def reap() -> tuple[int, int]:
        """The next child to exit (``os.wait``); once the writer was told to stop, one that has
        not within :data:`WRITER_STOP` seconds (blocked on a catalog that answers nothing, a
        server hung with its connection up) is killed, and said so: the workers answered its
        requests when they waited past their time (a retry of one whose group landed after all is
        answered duplicate)."""
        nonlocal writer_killed
        if writer_told is None or writer_killed:
            return os.wait()
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                return pid, status
            if time.monotonic() - writer_told > WRITER_STOP:
                for writer_pid, slot in children.items():
                    if slot == WRITER:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(writer_pid, signal.SIGKILL)
                say(f"the writer did not stop within {WRITER_STOP:g} s of being told to; killing it")
                writer_killed = True
                return os.wait()
            time.sleep(0.1)

    def fork(slot: int) -> int:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the supervisor's handler: ours come below
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor's turns Ctrl-C into SIGTERM
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
                _follow(supervisor)
                # a request's events are thousands of short-lived objects, freed by their counts
                # once it is answered: the young generation is collected only past what a batch
                # holds at once, that is for garbage in cycles (at 5,000 it was collected every
                # few hundred events of batches, walking the batch in hand: about 4% of a
                # worker's CPU and 7% of the writer's on PostgreSQL). The older ones, frozen below,
                # are never walked again.
                gc.set_threshold(GC_YOUNG, 20, 50)
                if slot == WRITER:
                    listener.close()
                    available = Availability(say)
                    run_writer(
                        writer_socket,
                        CatalogWriter(
                            catalog_path,
                            resolver,
                            durability=options.durability,
                            on_commit=metrics.commit,
                            availability=available,
                        ),
                        readiness,
                    )
                else:
                    writer_socket.close()
                    metrics.worker = slot  # its requests counted as its own
                    run_worker(listener, catalog_path, address, options, metrics, readiness)
                code = 0
            except BridgeError as exc:  # the catalog cannot be opened, say: no traceback for that
                said = f"the writer cannot start: {exc}"
                if slot != WRITER or readiness.why() != said:  # a writer failing again says it once
                    say(f"Error: {exc}")
                if slot == WRITER:
                    readiness.set(said, writer_down=True)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        return pid

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        # the port closes once the workers close theirs too: a connection made while they finish
        # is refused at once (the client, or the load balancer, tries another receiver, knowing
        # nothing was sent), not queued behind workers that will never take it and then reset
        listener.close()
        for pid, slot in list(children.items()):
            if slot != WRITER:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        writer_turn()  # no worker running (one dead and not yet replaced, say): at once

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
            shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
            on_ready(f"http://{shown}:{port}, {workers} and a writer")
        while children:
            try:
                pid, status = reap()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid not in children:  # the caller's (serve's health watch, its retention schedule)
                others(pid, os.waitstatus_to_exitcode(status), stopping)
                continue
            slot = children.pop(pid)
            began = started.pop(pid, 0.0)
            if not stopping:
                role = "the writer" if slot == WRITER else f"worker {pid}"
                code = os.waitstatus_to_exitcode(status)
                wait = 1.0
                if slot == WRITER:
                    # not ready until a new writer says so; one that keeps failing (a catalog it
                    # cannot open) is started again 1, 2, 4, ... 30 s later, said the first time and
                    # then every 30 s at most
                    failures = failures + 1 if time.monotonic() - began < RESTART_SOON else 1
                    wait = min(2.0 ** (failures - 1), RESTART_MOST)
                    why = readiness.why()
                    if why is None or not why.startswith("the writer cannot start"):
                        why = f"the writer exited ({code}); another is starting"
                    readiness.set(why, writer_down=True)
                if slot != WRITER or failures == 1 or wait >= RESTART_MOST or failures % 6 == 0:
                    again = f" ({failures} times in a row)" if slot == WRITER and failures > 1 else ""
                    say(f"{role} exited ({code}){again}; starting another in {wait:g} s")
                until = time.monotonic() + wait
                while not stopping and time.monotonic() < until:  # a stop meanwhile is not held up
                    time.sleep(0.1)
            if not start(slot):  # told to stop, maybe while it waited: the port is closed, nothing starts
                writer_turn()
        if writer_killed:
            raise ReceiverError(
                f"the writer did not stop within {WRITER_STOP:g} s: the catalog did not answer it (a server hung "
                "with its connections up?). What it held was answered 503 (a retry of an event it did commit is "
                "answered duplicate)"
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
        writer_socket.close()
        shutil.rmtree(private, ignore_errors=True)
