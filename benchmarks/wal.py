"""The SQLite catalog's write-ahead log under a sustained load: the receiver's writer commits
groups of new events, one after the other, while a reader keeps reading (as /readyz, dashboards
and exports do), and the WAL's size is printed as it goes. Past its limit the writer's
checkpointer restarts and truncates the log, so it stays near that limit however long the load
lasts; before #30 it grew for as long as the load did, and stayed that size once idle.

    python benchmarks/wal.py --seconds 40 --limit-mib 64
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from bridge.mapping import Resolver
from bridge.model.received import IncomingEvent
from bridge.receiver.intake import Intake
from tests.group_writer import GroupWriter


def events(start: int, count: int) -> list[IncomingEvent]:
    """``count`` new events, each a run with an input and an output of its own."""
    intake = Intake(None)
    out = []
    for n in range(start, start + count):
        event = {
            "eventType": "COMPLETE",
            "eventTime": "2025-03-01T08:00:00Z",
            "producer": "https://example.com/bench",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": f"0194a1b2-0000-7000-8000-{n:012d}"},
            "job": {"namespace": "bench", "name": f"job{n % 100}"},
            "inputs": [{"namespace": "s3://bench", "name": f"in/{n}"}],
            "outputs": [{"namespace": "s3://bench", "name": f"out/{n}"}],
        }
        prepared = intake.prepare(event)
        assert isinstance(prepared, IncomingEvent), prepared
        out.append(prepared)
    return out


def run(
    path: Path, seconds: float, limit: int, every: float, group: int, say: bool = True, reader: bool = True
) -> list[int]:
    """Load the catalog at ``path`` for ``seconds``; the WAL's sizes, sampled every tenth of a second."""
    writer = GroupWriter(path, Resolver.load(), durability="normal", wal_limit=limit, checkpoint_every=every)
    wal = Path(f"{path}-wal")
    stop = threading.Event()
    sizes: list[int] = []

    def read() -> None:
        with sqlite3.connect(path, timeout=5) as conn:
            while not stop.is_set():
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM received_events").fetchone()
                time.sleep(0.02)
                conn.execute("COMMIT")

    def sample() -> None:
        start = time.monotonic()
        while not stop.wait(0.1):
            sizes.append(wal.stat().st_size if wal.exists() else 0)
            if say and len(sizes) % 10 == 0:
                print(f"{time.monotonic() - start:5.1f} s  WAL {sizes[-1] / 1024 / 1024:8.2f} MiB")

    threads = [threading.Thread(target=sample)] + ([threading.Thread(target=read)] if reader else [])
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    n = 0
    try:
        while time.monotonic() < deadline:
            writer.submit(events(n, group))
            n += group
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        writer.close()
    if say:
        closed = wal.stat().st_size if wal.exists() else 0
        print(f"{n} events; WAL at most {max(sizes) / 1024 / 1024:.2f} MiB, {closed} bytes once closed")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--limit-mib", type=float, default=64.0, help="the writer's WAL limit")
    parser.add_argument("--group", type=int, default=200, help="events a commit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        run(Path(folder) / "wal.db", args.seconds, int(args.limit_mib * 1024 * 1024), 1.0, args.group)


if __name__ == "__main__":
    main()
