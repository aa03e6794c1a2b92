"""Delivery throughput to a loopback OpenLineage endpoint, and a 1,000,000-run backfill.

1. The same events (``olbridge export`` of a generated history, serialized once beforehand) are
   delivered to a loopback backend by olbridge's sender (``POST /api/v1/lineage/batch``, and one
   event a request as Marquez needs, both with keep-alive and 4 requests in flight) and by
   openlineage-python's ``HttpTransport`` emitting them one by one, in one run.
2. ``olbridge backfill --url`` of a catalog with ``--runs`` task runs (1,000,000 by default) to
   the loopback backend with its batch endpoint: the whole CLI process timed, its peak RSS.
3. ``olbridge stream --once`` of a catalog's outbox (``--stream-runs`` task runs, 1,000 by
   default: twice as many events) to a backend of one event a request (Marquez's way) that
   answers each in ``--stream-delay`` seconds (0.003), from a SQLite catalog and from one on a
   PostgreSQL server started for it (durable: its commits synced, as in production; skipped
   where no server can start), ``--stream-repeat`` times each: the whole process timed.

The backend (``tests/backend.py``) runs in its own process, so it never shares an interpreter
with the sender being measured.

    .venv/bin/python benchmarks/delivery.py [--events 20000] [--runs 1000000]
                                            [--stream-runs 1000] [--stream-delay 0.003] [--stream-repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog  # noqa: E402
from bridge.delivery.dispatch import Dispatcher  # noqa: E402
from bridge.delivery.history import iter_lines  # noqa: E402
from bridge.delivery.senders import HttpSender  # noqa: E402
from bridge.mapping import Resolver  # noqa: E402
from bridge.model import AssetDeclaration, TaskRun, TaskRunKey, TaskState  # noqa: E402
from bridge.openlineage.convert import Converter  # noqa: E402
from tests.backend import free_port  # noqa: E402

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024


def task_runs(count: int) -> Iterator[TaskRun]:
    """A recurring history: 50 flows of 7 tasks, each run reads one of 200 tables and writes another."""
    for i in range(count):
        start = EPOCH + timedelta(seconds=i)
        yield TaskRun(
            key=TaskRunKey("company.data", f"flow_{i % 50}", f"task_{i % 7}", f"e{i}", f"e{i}.t"),
            state=TaskState.SUCCESS,
            started_at=start,
            ended_at=start + timedelta(seconds=30),
            inputs=(AssetDeclaration.create(f"warehouse.raw.t{i % 100}"),),
            outputs=(AssetDeclaration.create(f"warehouse.mart.t{i % 100}", type="Table"),),
        )


def fill(catalog: Catalog, count: int, chunk: int = 100_000) -> None:
    runs = task_runs(count)
    for _ in range(0, count, chunk):
        catalog.record_task_runs(next(runs) for _ in range(min(chunk, count - catalog.count_task_runs())))


class Server:
    """``python -m tests.backend`` in a child process."""

    def __init__(self, *, batch: bool, delay: float = 0.0) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "tests.backend", "--port", str(self.port), "--delay", str(delay)]
        command += ["--batch"] if batch else []
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.process.stdout.readline()  # "serving on ..."
        self.url = f"http://127.0.0.1:{self.port}"

    def accepted(self) -> int:
        return int(requests.get(f"{self.url}/stats", timeout=10).json()["accepted"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def rate(count: int, deliver: Callable[[str], object], *, batch: bool) -> float:
    """Events a second for ``deliver(url)`` to send ``count`` events to a fresh backend."""
    server = Server(batch=batch)
    try:
        began = time.perf_counter()
        deliver(server.url)
        elapsed = time.perf_counter() - began
        assert server.accepted() == count
    finally:
        server.stop()
    return count / elapsed


def olbridge_sends(lines: Sequence[str], *, batch: bool) -> Callable[[str], None]:
    def deliver(url: str) -> None:
        dispatcher = Dispatcher(HttpSender(url, batch=batch), concurrency=4, batch_size=200)
        # rounds of 800 events of different runs, as the worker and the backfill send them
        for start in range(0, len(lines), 800):
            assert all(o.ok for o in dispatcher.send(lines[start : start + 800]))
        dispatcher.close()

    return deliver


def openlineage_python_sends(lines: Sequence[str]) -> Callable[[str], None]:
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    events = [json.loads(line) for line in lines]

    def deliver(url: str) -> None:
        transport = HttpTransport(HttpConfig(url=url))
        for event in events:
            transport.emit(event)  # the same events, as dicts (emit takes a dict too)
        transport.close()

    return deliver


def stream_sends(db: Path) -> Callable[[str], None]:
    """``olbridge stream --once``: the whole CLI process, outbox to backend."""

    def deliver(url: str) -> None:
        olbridge = str(Path(sys.executable).parent / "olbridge")
        subprocess.run(
            [olbridge, "--catalog", str(db), "stream", "--url", url, "--once"], check=True, capture_output=True
        )

    return deliver


def delivery(events: int, folder: Path) -> None:
    db = folder / "stream.db"
    with Catalog(db) as catalog:
        fill(catalog, events // 2)
        lines = list(iter_lines(catalog, Converter(Resolver.load())))
    size = sum(len(line) for line in lines) / len(lines)
    print(f"delivery: {len(lines):,} events (mean {size:,.0f} bytes) to a loopback backend")
    reference = rate(len(lines), openlineage_python_sends(lines), batch=False)
    batch = rate(len(lines), olbridge_sends(lines, batch=True), batch=True)
    single = rate(len(lines), olbridge_sends(lines, batch=False), batch=False)
    streamed = rate(len(lines), stream_sends(db), batch=True)
    rows = [
        ("openlineage-python HttpTransport, one event a request", reference),
        ("olbridge, one event a request (Marquez), 4 in flight", single),
        ("olbridge, batch endpoint, 200 a request, 4 in flight", batch),
        ("olbridge stream --once from the outbox (whole process)", streamed),
    ]
    for label, value in rows:
        print(f"  {label:<56} {value:>9,.0f} events/s  {value / reference:5.1f}x")


class PeakRss:
    """A process's peak RSS, from the ``VmHWM`` of ``/proc/<pid>/status`` read every 0.1 s
    while it runs. (``wait4``'s ``ru_maxrss`` would not do: the child of a vfork starts with
    this benchmark's own memory, which holds a million-run catalog build.)"""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/status")
        self.kib = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.1):
            try:
                text = self.path.read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    self.kib = max(self.kib, int(line.split()[1]))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return self.kib / 1024


def backfill(runs: int, folder: Path) -> None:
    db = folder / "c.db"
    began = time.perf_counter()
    with Catalog(db) as catalog:
        fill(catalog, runs)
    built = time.perf_counter() - began
    print(
        f"backfill: {runs:,} task runs ({2 * runs:,} events), catalog built in {built:.0f}s, "
        f"{db.stat().st_size / MIB:,.0f} MiB"
    )
    server = Server(batch=True)
    try:
        olbridge = str(Path(sys.executable).parent / "olbridge")
        command = [olbridge, "--catalog", str(db), "backfill", "--url", server.url, "--json"]
        began = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        peak = PeakRss(child.pid)
        assert child.stdout is not None
        summary = json.loads(child.stdout.read())
        status = child.wait()
        elapsed = time.perf_counter() - began
        peak.stop()
        if status != 0:
            raise SystemExit(f"backfill failed with status {status}")
        delivered = server.accepted()
    finally:
        server.stop()
    assert delivered == summary["events"] == 2 * runs, (delivered, summary)
    print(
        f"  olbridge backfill --url (batch endpoint): {elapsed:.1f}s, {2 * runs / elapsed:,.0f} events/s, "
        f"{runs / elapsed:,.0f} task runs/s, peak RSS {peak.mib:,.0f} MiB"
    )


def stream_from(catalog: str, runs: int, delay: float) -> float:
    """Events a second of ``olbridge stream --once`` draining ``catalog`` (filled with ``runs``
    task runs here) to a backend of one event a request answering in ``delay`` seconds."""
    with Catalog(catalog) as opened:
        fill(opened, runs)
    server = Server(batch=False, delay=delay)
    try:
        olbridge = str(Path(sys.executable).parent / "olbridge")
        began = time.perf_counter()
        subprocess.run(
            [olbridge, "--catalog", catalog, "stream", "--once", "--url", server.url],
            check=True,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        elapsed = time.perf_counter() - began
        assert server.accepted() == 2 * runs, (server.accepted(), 2 * runs)
    finally:
        server.stop()
    return 2 * runs / elapsed


def stream(runs: int, delay: float, repeat: int, folder: Path) -> None:
    print(
        f"\nolbridge stream --once of {2 * runs:,} events to a backend of one event a request, "
        f"answering in {1000 * delay:g} ms (events/s, each run):"
    )
    rates = [stream_from(str(folder / f"stream-{n}.db"), runs, delay) for n in range(repeat)]
    print("  SQLite catalog:     " + ", ".join(f"{rate:,.0f}" for rate in rates))
    from tests.postgres import PostgresServer

    try:
        server = PostgresServer.start(durable=True)
    except Exception as exc:  # no server binaries here: said, not hidden
        print(f"  PostgreSQL catalog: skipped ({exc})", file=sys.stderr)
        return
    with server:
        rates = [stream_from(server.url(server.create_database()), runs, delay) for _ in range(repeat)]
    print("  PostgreSQL catalog: " + ", ".join(f"{rate:,.0f}" for rate in rates))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000, help="events for the delivery comparison")
    parser.add_argument("--runs", type=int, default=1_000_000, help="task runs for the backfill (0 skips it)")
    parser.add_argument(
        "--stream-runs", type=int, default=1_000, help="task runs whose events olbridge stream sends (0 skips it)"
    )
    parser.add_argument("--stream-delay", type=float, default=0.003, help="seconds the backend takes to answer")
    parser.add_argument("--stream-repeat", type=int, default=3, help="runs of olbridge stream from each engine")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores, load {load:.2f}, CPython {platform.python_version()}, {platform.machine()}")
    with tempfile.TemporaryDirectory() as folder:
        delivery(args.events, Path(folder))
        if args.runs:
            backfill(args.runs, Path(folder))
        if args.stream_runs:
            stream(args.stream_runs, args.stream_delay, args.stream_repeat, Path(folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
