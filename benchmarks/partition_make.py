"""Making a day's partition of received runs on PostgreSQL, with many runs that have no day.

    python benchmarks/partition_make.py [--runs 1000000] [--repeat 3] [--in-default] [--postgres-url URL]

Making a day's partition holds the table's default partition and reads it whole (the rows of the
day move out of it, and ATTACH reads it again), while the writers of the rows it holds wait.
Received runs whose ids tell no day (not UUIDv7) and jobs have the day '' and a partition of
their own (``external_sources_undated``), so the default partition holds only runs of days not
made yet. The benchmark fills a catalog (on a PostgreSQL server started for it, or in the empty
database of ``--postgres-url``) with ``--runs``
runs of no day (written in bulk), then times the making of ``--repeat`` days ahead
(:func:`bridge.catalog.postgres.partitions.make`), p50 and max; with ``--in-default`` the runs are
put in the default partition instead (as before they had their own), to compare.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bridge.catalog import Catalog  # noqa: E402
from bridge.catalog.postgres import partitions  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

FILL = """
    INSERT INTO {table} (source, job_namespace, job_name, run_id, state_rank, first_seen, last_seen, producer,
                         inputs, outputs, warnings, run_day)
    SELECT 'run:' || md5(i::text), 'ns', 'job' || (i %% 1000), md5(i::text), '', '2026-12-01T00:00:00.000000Z',
           '2026-12-01T00:00:00.000000Z', 'p', '[]', '["a"]', '[]', {day}
    FROM generate_series(1, %s) AS i
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000, help="received runs with no day")
    parser.add_argument("--repeat", type=int, default=3, help="days made, each timed")
    parser.add_argument("--in-default", action="store_true", help="the runs in the default partition, to compare")
    parser.add_argument("--postgres-url", help="an empty PostgreSQL database (default: a server started here)")
    args = parser.parse_args(argv)
    server = None if args.postgres_url else PostgresServer.start(durable=True)
    try:
        url = args.postgres_url or server.url(server.create_database())  # type: ignore[union-attr]
        Catalog(url).close()  # the schema, its days ahead
        table = partitions.RUNS.default if args.in_default else "external_sources"
        with psycopg.connect(url, autocommit=True) as conn:
            started = time.perf_counter()
            # a row put in the default partition directly keeps its day; through the table, '' goes
            # to the undated partition
            day = "'9'" if args.in_default else "''"  # '9': in no day's range, nor the undated one
            conn.execute(FILL.format(table=table, day=day).encode(), (args.runs,))
            conn.execute("ANALYZE external_sources")
            took = time.perf_counter() - started
            where = partitions.RUNS.default if args.in_default else partitions.RUNS.undated
            held = conn.execute(f"SELECT count(*) FROM {where}".encode()).fetchone()
            print(f"{held[0] if held else 0:,} runs with no day in {where}, written in {took:.1f} s")
        times = []
        with Catalog(url) as catalog:
            last = max(partitions.RUNS.days(catalog._conn))
            for n in range(1, args.repeat + 1):
                day_made = last + timedelta(days=n)
                started = time.perf_counter()
                assert catalog.db.write(functools.partial(partitions.make, day=day_made, table=partitions.RUNS))
                times.append(time.perf_counter() - started)
        print(
            f"making a day's partition of received runs: p50 {statistics.median(times) * 1000:.1f} ms, "
            f"max {max(times) * 1000:.1f} ms ({len(times)} days)"
        )
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
