"""Soak: simulated days of received events with a retention window, on SQLite and PostgreSQL.

Each simulated day takes ``--events-per-day`` events (a START and a COMPLETE a run, their times
spread over the day, each run reading and writing datasets of a popular set) through the
receiver's intake in batches of ``--batch``; after each day a retention pass at that day's end
(``received_events`` and ``external_runs`` of ``--window`` days, column edges of gone runs) runs
in a thread of its own, on its own connection, while the next day's events come in, as ``serve``'s
schedule would. Printed a day: ingest throughput, p99 latency of a batch overall and while
retention ran, rows deleted, the catalog's bytes in use, and bytes a day of history kept (bytes in
use over the days the window holds). At the end, events inside the window are re-sent (all must
be duplicates) and events older than it (all must be taken as new).

On PostgreSQL received events are partitioned by day of their event time, received runs by the
day of their run ids (UUIDv7 made at each run's start, as the OpenLineage clients make them): the
soak makes the partitions of its first days as ``serve`` does at start-up, each pass makes those of the days
ahead and drops the days wholly past the window (deleting only the boundary day's rows in
batches), and a plain ``VACUUM`` of the other pruned tables follows each pass (what autovacuum
does on its own schedule, which a short run would not wait for); on SQLite freed pages are
reused as they are. At the end: ingest throughput on the last day against the first, the p99 of a
batch's latency over every stretch retention ran, and, on PostgreSQL, the day partitions left of
each table.

    python benchmarks/soak.py                                   # 30 days, a 7-day window, both engines
    python benchmarks/soak.py --days 10 --events-per-day 2000 --engines sqlite
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog, retention  # noqa: E402
from bridge.mapping import Resolver  # noqa: E402
from bridge.model.times import epoch_text  # noqa: E402
from bridge.openlineage.run_ids import static_uuid  # noqa: E402
from bridge.receiver.imports import catalog_intake  # noqa: E402

DAY = 86400.0
BASE = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
PRODUCER = "https://github.com/example/soak/tree/1.0"
RUN_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PRUNED = ("received_events", "external_sources", "external_facets", "column_lineage")


def day_events(day: int, count: int, datasets: int, jobs: int) -> list[dict[str, Any]]:
    """A day's events in time order: ``count // 2`` runs of ``jobs`` jobs, each reading one and
    writing another of ``datasets`` popular tables."""
    rng = random.Random(day)
    runs = max(count // 2, 1)
    events = []
    for n in range(runs):
        start = BASE + day * DAY + n * (DAY - 120) / runs
        run_id = static_uuid(datetime.fromtimestamp(start, UTC), f"{day}/{n}".encode())  # a UUIDv7, as clients make
        job = ("soak", f"job_{rng.randrange(jobs)}")
        read, write = rng.sample(range(datasets), 2)
        inputs = [{"namespace": "postgres://warehouse:5432", "name": f"shop.public.t{read}"}]
        outputs = [{"namespace": "postgres://warehouse:5432", "name": f"shop.public.t{write}"}]
        for event_type, at in (("START", start), ("COMPLETE", start + 60)):
            events.append(
                {
                    "eventType": event_type,
                    "eventTime": epoch_text(at),
                    "producer": PRODUCER,
                    "schemaURL": RUN_URL,
                    "run": {"runId": run_id},
                    "job": {"namespace": job[0], "name": job[1]},
                    "inputs": inputs,
                    "outputs": outputs,
                }
            )
    return events


def bytes_in_use(catalog: Catalog) -> int:
    conn = catalog.db.conn
    if catalog.dialect == "sqlite":
        pages, free, size = (
            int(conn.execute(f"PRAGMA {p}").fetchone()[0]) for p in ("page_count", "freelist_count", "page_size")
        )
        return (pages - free) * size
    return int(
        conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchone()[0]
    )


def partitions_of(catalog: Catalog, table: str) -> list[str]:
    """The day partitions of a table partitioned by day (PostgreSQL)."""
    found = catalog.db.conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        f"WHERE i.inhparent = to_regclass('{table}') AND c.relname <> '{table}_default'"
    ).fetchall()
    return sorted(str(name) for (name,) in found)


class Pass(threading.Thread):
    """A retention pass at ``now`` on a connection of its own, timed."""

    def __init__(self, target: str, windows: retention.Windows, now: float, pause: float) -> None:
        super().__init__(name="soak-retention", daemon=True)
        self.target, self.windows, self.now, self.pause = target, windows, now, pause
        self.started = self.ended = 0.0
        self.deleted: dict[str, int] = {}

    def run(self) -> None:
        with Catalog(self.target, create=False) as catalog:
            self.started = time.perf_counter()
            self.deleted = retention.expire(catalog.db, self.windows, self.now, pause=self.pause)
            self.ended = time.perf_counter()
            if catalog.dialect == "postgresql":
                for table in PRUNED:
                    catalog.db.conn.execute(f"VACUUM {table}")


def p99(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def soak(target: str, args: argparse.Namespace, resolver: Resolver) -> bool:
    """The days on one catalog, a line each; True when the re-sent events were answered rightly."""
    windows = retention.Windows(received_events=args.window * DAY, external_runs=args.window * DAY, column_edges=True)
    print(f"{'day':>4} {'events/s':>9} {'p99 ms':>7} {'p99 ms ret.':>11} {'deleted':>8} {'MB in use':>10}", end="")
    print(f" {'KB/day kept':>12}")
    kept: list[float] = []
    rates: list[float] = []
    while_retention: list[float] = []
    with Catalog(target) as catalog:
        retention.prepare(catalog.db, BASE)  # serve, started on the first day
        intake = catalog_intake(catalog, resolver)
        running: Pass | None = None
        for day in range(args.days):
            events = day_events(day, args.events_per_day, args.datasets, args.jobs)
            latencies: list[tuple[float, float]] = []
            began = time.perf_counter()
            for at in range(0, len(events), args.batch):
                t0 = time.perf_counter()
                outcomes = intake.take(events[at : at + args.batch])
                latencies.append((t0, time.perf_counter()))
                assert all(o.status == "accepted" for o in outcomes), [o for o in outcomes if o.status != "accepted"][
                    :1
                ]
            took = time.perf_counter() - began
            during: list[float] = []
            deleted = 0
            if running is not None:
                running.join()
                during = [b - a for a, b in latencies if a < running.ended and b > running.started]
                deleted = sum(running.deleted.values())
            rates.append(len(events) / took)
            while_retention += during
            size = bytes_in_use(catalog)
            per_day = size / min(day + 1, args.window + 1)
            if day >= args.window:
                kept.append(per_day)
            print(
                f"{day + 1:>4} {len(events) / took:>9,.0f} {p99([b - a for a, b in latencies]) * 1000:>7.1f} "
                f"{p99(during) * 1000:>11.1f} {deleted:>8,} {size / 1e6:>10.1f} {per_day / 1e3:>12.1f}"
            )
            running = Pass(target, windows, BASE + (day + 1) * DAY, args.pause)
            running.start()
        assert running is not None
        running.join()
        if len(kept) > 1:
            spread = (max(kept) - min(kept)) / statistics.mean(kept)
            print(f"bytes a day kept, days {args.window + 1}-{args.days}: spread {spread:.0%} of the mean")
        print(
            f"ingest day {args.days} against day 1: {rates[-1]:,.0f} / {rates[0]:,.0f} events/s "
            f"({rates[-1] / rates[0] - 1:+.0%}); p99 of a batch while retention ran: "
            f"{p99(while_retention) * 1000:.1f} ms ({len(while_retention)} batches)"
        )
        if catalog.dialect == "postgresql":
            for table, what in (("received_events", "received events"), ("external_sources", "received runs")):
                print(f"day partitions of {what} left: {len(partitions_of(catalog, table))}")
        last = args.days - 1
        inside = day_events(last, args.events_per_day, args.datasets, args.jobs)[:: max(args.events_per_day // 50, 1)]
        gone = day_events(0, args.events_per_day, args.datasets, args.jobs)[:: max(args.events_per_day // 50, 1)]
        again = [o.status for o in intake.take(inside)]
        old = [o.status for o in intake.take(gone)] if args.days > args.window + 1 else []
        ok = all(s == "duplicate" for s in again) and all(s == "accepted" for s in old)
        print(
            f"re-sent inside the window: {again.count('duplicate')}/{len(again)} recognised; "
            f"older than it: {old.count('accepted')}/{len(old)} taken as new"
        )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--window", type=int, default=7, help="days of received events and runs kept")
    parser.add_argument("--events-per-day", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--datasets", type=int, default=20, help="the popular set every run reads and writes")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pause", type=float, default=retention.PAUSE, help="seconds between retention's batches")
    parser.add_argument("--engines", nargs="+", choices=["sqlite", "postgresql"], default=["sqlite", "postgresql"])
    parser.add_argument("--postgres-url", help="an empty PostgreSQL database to use (default: a server started here)")
    args = parser.parse_args(argv)
    resolver = Resolver.load()
    ok = True
    with tempfile.TemporaryDirectory(prefix="olbridge-soak-") as folder:
        for engine in args.engines:
            print(f"--- {engine}: {args.days} days of {args.events_per_day:,} events, a {args.window}-day window")
            if engine == "sqlite":
                ok &= soak(str(Path(folder) / "soak.db"), args, resolver)
            elif args.postgres_url:
                ok &= soak(args.postgres_url, args, resolver)
            else:
                from tests.postgres import PostgresServer

                server = PostgresServer.start(durable=True)
                try:
                    ok &= soak(server.url(server.create_database("soak")), args, resolver)
                finally:
                    server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
