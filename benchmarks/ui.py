"""The UI's server time per page on a large catalog (``olbridge ui``).

Builds a catalog of ``--assets`` assets and ``--runs`` task runs (each reading one asset and
writing the next: a lineage chain per run), plus a hub asset with ``--hub`` downstream
neighbours (read by every tenth run, and by a received job), and a tenth as many received runs
(one raw event each), written in bulk through the catalog's own connection; then asks the UI's
WSGI application for each page ``--repeat`` times, in process (the server time: no network, no
browser), and prints each page's p50 and p95.

Where: a temporary SQLite file (the default), a database on a PostgreSQL server started for the
run (``--engine postgresql``), a SQLite file that is kept (``--keep PATH``) or an empty PostgreSQL
database of yours (``--postgres URL``). Building and timing apart: build once with ``--keep`` or
``--postgres`` and ``--build-only``, then time that catalog, as often as wanted and on a quiet
machine, with ``--reuse`` (and the same ``--assets``, ``--runs`` and ``--hub``).

The issue's scale: ``--assets 1000000 --runs 2000000 --hub 100000`` (goal: p95 <= 200 ms a page,
<= 300 ms for the hub's Dependencies). A quick check that it works: ``--assets 20000 --runs 40000
--hub 2000``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bridge.catalog import Catalog
from bridge.catalog.sql import ASSET_COLUMNS
from bridge.mapping import Resolver
from bridge.model.received import run_day
from bridge.openlineage.convert import Converter
from bridge.web import UiApp

CHUNK = 20_000
PRODUCER = "https://example.com/spark-openlineage/1.0"
T0 = 1_735_689_600  # 2025-01-01T00:00:00Z


def moment(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(T0 + seconds))


def asset_id(i: int) -> str:
    if i % 2:
        return f"s3://bucket-{i % 50:02d}/area-{i // 50 % 100:02d}/file-{i:07d}.parquet"
    return f"db{i % 10}.schema{i // 10 % 50:02d}.table_{i:07d}"


def external_run(r: int) -> str:
    return f"0194a1b2-0000-7000-8000-{r:012d}"


def chunks(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def insert(catalog: Catalog, statement: str, rows: Iterator[tuple[Any, ...]]) -> None:
    for batch in chunks(rows):
        with catalog.transaction() as cur:
            cur.executemany(statement, batch)


def build(target: str, assets: int, runs: int, hub: int) -> None:
    with Catalog(target) as catalog:
        marks = ", ".join("?" * 12)

        def asset_rows() -> Iterator[tuple[Any, ...]]:
            for i in range(assets):
                namespace = None if i % 7 == 0 else f"team-{i % 20:02d}"
                meta = json.dumps({"tier": ("gold", "silver", "bronze")[i % 3]})
                kind = "File" if i % 2 else "Table"
                yield (
                    asset_id(i),
                    kind,
                    namespace,
                    None,
                    None,
                    meta,
                    "declared",
                    moment(i),
                    moment(i),
                    None,
                    None,
                    None,
                )
            yield (
                "hub.events",
                "Dataset",
                "team-00",
                None,
                None,
                "{}",
                "declared",
                moment(0),
                moment(0),
                None,
                None,
                None,
            )

        insert(catalog, f"INSERT INTO assets ({ASSET_COLUMNS}) VALUES ({marks})", asset_rows())
        executions = max(runs // 10, 1)
        insert(
            catalog,
            "INSERT INTO executions (flow_namespace, flow_id, execution_id, started_at) VALUES (?, ?, ?, ?)",
            ((f"team-{e % 20:02d}", f"flow{e % 100}", f"e{e}", moment(e * 10)) for e in range(executions)),
        )

        def run_rows() -> Iterator[tuple[Any, ...]]:
            for r in range(runs):
                e = r // 10
                yield (
                    r + 1,
                    f"team-{e % 20:02d}",
                    f"flow{e % 100}",
                    f"task{r % 10}",
                    f"e{e}",
                    f"e{e}.{r}",
                    "SUCCESS",
                    moment(r),
                    moment(r + 30),
                    "{}",
                    "[]",
                    None,
                    f"h{r}",
                )

        insert(
            catalog,
            "INSERT INTO task_runs (pk, flow_namespace, flow_id, task_id, execution_id, task_run_id, state, "
            "started_at, ended_at, job, warnings, error, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            run_rows(),
        )

        def usage_rows() -> Iterator[tuple[Any, ...]]:
            for r in range(runs):
                a = r % (assets - 1)
                yield (r + 1, "input", 0, asset_id(a), moment(r), None)
                yield (r + 1, "output", 0, asset_id(a + 1), moment(r + 30), None)

        insert(
            catalog,
            "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            usage_rows(),
        )
        insert(  # the hub is read by every tenth run too: an asset whose page lists its newest uses of many
            catalog,
            "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
            "VALUES (?, 'input', 1, 'hub.events', ?, NULL)",
            ((r + 1, moment(r)) for r in range(0, runs, 10)),
        )
        insert(
            catalog,
            "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            ((asset_id(r % (assets - 1)), asset_id(r % (assets - 1) + 1), r + 1) for r in range(runs)),
        )
        insert(
            catalog,
            "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (("hub.events", asset_id(n * (assets // max(hub, 1)) % assets), 1) for n in range(hub)),
        )
        received = max(runs // 10, 1)
        insert(
            catalog,
            "INSERT INTO external_sources (source, job_namespace, job_name, run_id, state, state_rank, started_at, "
            "ended_at, first_seen, last_seen, producer, inputs, outputs, warnings, run_day) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    f"run:{external_run(r)}",
                    f"spark-{r % 20:02d}",
                    f"job{r % 500}",
                    external_run(r),
                    "COMPLETE",
                    "3",
                    moment(r * 10),
                    moment(r * 10 + 60),
                    moment(r * 10),
                    moment(r * 10 + 60),
                    PRODUCER,
                    json.dumps([asset_id(r % assets)]),
                    json.dumps([asset_id((r + 7) % assets)]),
                    "[]",
                    run_day(f"run:{external_run(r)}"),
                )
                for r in range(received)
            ),
        )
        with catalog.transaction() as cur:  # ... and by a received job's runs
            cur.execute(
                "INSERT INTO external_usages (job_namespace, job_name, direction, asset_id) "
                "VALUES ('spark-00', 'job0', 'input', 'hub.events')"
            )
        insert(
            catalog,
            "INSERT INTO received_events (digest, kind, event_type, event_time, source, producer, warnings, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (f"d{r}", "RunEvent", "COMPLETE", moment(r * 10 + 60), f"run:{external_run(r)}", PRODUCER, "[]", "{}")
                for r in range(received)
            ),
        )
        with catalog.transaction() as cur:  # the planners' statistics, as a catalog in use has them
            cur.execute("ANALYZE")


def pages(assets: int, runs: int) -> dict[str, str]:
    mid = asset_id(assets // 2)
    quoted = mid.replace("/", "%2F").replace(":", "%3A")
    return {
        "assets": "/assets",
        "assets search": f"/assets?q=table_{assets // 3:07d}",
        "assets search common": "/assets?q=table",  # half of them, the first ids among them
        "assets search late": "/assets?q=parquet",  # half of them, none of the first ids
        "assets prefix": "/assets?prefix=s3://bucket-07/",
        "assets namespace+type": "/assets?namespace=team-03&type=Table",
        "assets metadata": "/assets?meta=tier%3Dgold",
        "asset overview": f"/assets/{quoted}",
        "asset dependencies": f"/assets/{quoted}?tab=dependencies&depth=3",
        "asset runs": f"/assets/{quoted}?tab=runs",
        "asset history": f"/assets/{quoted}?tab=history",
        "hub overview": "/assets/hub.events",
        "hub runs": "/assets/hub.events?tab=runs",
        "hub history": "/assets/hub.events?tab=history",
        "hub dependencies": "/assets/hub.events?tab=dependencies",
        "hub cluster list": "/neighbours?asset=hub.events&direction=down",
        "lineage slider": f"/lineage?asset={quoted}&depth=2",
        "hub lineage slider": "/lineage?asset=hub.events&depth=1",
        "runs": "/runs",
        "runs filtered": "/runs?namespace=team-03&state=COMPLETE",
        "runs received": "/runs?origin=external",
        "runs received namespace": "/runs?origin=external&namespace=spark-03",
        "received run": f"/runs/{external_run(max(runs // 10, 1) // 2)}",
        "status": "/status",
    }


def timed(app: UiApp, url: str) -> float:
    path, _, query = url.partition("?")
    status: list[str] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query, "wsgi.input": io.BytesIO()}
    start = time.perf_counter()
    b"".join(app(environ, lambda s, h: status.append(s)))
    elapsed = time.perf_counter() - start
    if not status[0].startswith("200"):
        raise SystemExit(f"{url}: {status[0]}")
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assets", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--hub", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=20)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--keep", metavar="PATH", help="build in this SQLite file (new), and keep it")
    where.add_argument("--postgres", metavar="URL", help="build in this empty PostgreSQL database")
    where.add_argument(
        "--engine",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="a temporary SQLite file, or a database on a PostgreSQL server started for the run (the default: sqlite)",
    )
    parser.add_argument("--reuse", action="store_true", help="time the catalog at --keep or --postgres, built before")
    parser.add_argument("--build-only", action="store_true", help="build (at --keep or --postgres), time nothing")
    args = parser.parse_args(argv)
    if (args.reuse or args.build_only) and not (args.keep or args.postgres):
        parser.error("--reuse and --build-only need --keep or --postgres")
    if args.reuse and args.build_only:
        parser.error("--reuse times a catalog, --build-only builds one: choose one")
    engine = "postgresql" if args.postgres or (args.engine == "postgresql" and not args.keep) else "sqlite"
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        target = args.postgres or args.keep or str(Path(tmp) / "ui.db")
        if not (args.keep or args.postgres) and args.engine == "postgresql":
            from tests.postgres import PostgresServer  # the tests' server (the dev extra): only for it

            server = stack.enter_context(PostgresServer.start())
            target = server.url(server.create_database())
        if args.reuse:
            with Catalog(target, create=False) as catalog:
                if catalog.get_asset("hub.events") is None or catalog.get_asset(asset_id(args.assets - 1)) is None:
                    raise SystemExit(f"Error: {target} was not built by this benchmark with --assets {args.assets}")
        else:
            if args.keep and Path(args.keep).exists():
                raise SystemExit(f"Error: {args.keep} exists: --reuse it, or name a new file")
            start = time.perf_counter()
            build(target, args.assets, args.runs, args.hub)
            took = time.perf_counter() - start
            print(f"built {args.assets:,} assets, {args.runs:,} runs, a hub of {args.hub:,} in {took:.1f} s")
            if args.build_only:
                return
        resolver = Resolver.load()
        app = UiApp(lambda: Catalog(target, create=False), Converter(resolver))
        print(f"{'page (' + engine + ')':<24} {'p50 ms':>8} {'p95 ms':>8}")
        for name, url in pages(args.assets, args.runs).items():
            times = sorted(timed(app, url) for _ in range(args.repeat))
            p50 = statistics.median(times) * 1000
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))] * 1000
            print(f"{name:<24} {p50:8.1f} {p95:8.1f}")


if __name__ == "__main__":
    main()
