"""Retention's ``pending_outbox`` on a large outbox: the dry run's count and the pass, both engines.

    python benchmarks/pending_outbox.py [--scale 100000] [--engines sqlite,postgresql] [--pause]

A catalog whose events no stream delivers, its outbox filled in bulk (queued long ago unless
said): an alert's ``--scale`` messages (one key), 100 assets' ``--scale`` changes, ``--scale / 2``
ended runs of two rows, ``--scale`` runs whose START is a dead letter (one row each: those go by
``dead_letters``), and one
received run of ``--scale / 5`` forwarded rows with one more queued now (it stays whole). Then,
with windows of 7 days for ``pending_outbox``, ``dead_letters`` and ``task_runs``: the dry run
(:func:`bridge.catalog.retention.count`) and the pass (:func:`bridge.catalog.retention.expire`,
batches of 1,000, without the command's 0.1 s pause between them unless ``--pause``), timed, and
the counts checked equal. PostgreSQL runs on a server started for it (tests/postgres.py).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog, retention  # noqa: E402
from bridge.catalog.retention import Windows  # noqa: E402
from bridge.model.times import epoch_text  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

OLD = "2025-01-01T00:00:00.000000Z"
WEEK = 7 * 86400.0
INSERT = "INSERT INTO outbox (kind, ref, run_key, queued_at, state, payload) VALUES (?, ?, ?, ?, ?, ?)"


def rows(scale: int, now: str) -> Iterator[tuple[object, ...]]:
    """The outbox's rows: (kind, ref, run key, queued at, state, payload)."""
    for n in range(scale):
        yield "alert", n, "alert:marts:mart.orders", OLD, "pending", "{}"
    for n in range(scale):
        yield "asset-change", n, f"asset:asset-{n % 100}", OLD, "pending", None
    for n in range(scale // 2):  # task run pks that are not in the catalog: ended, as far as the pass can tell
        yield "run-start", n, f"run:{n}", OLD, "pending", None
        yield "run-end", n, f"run:{n}", OLD, "pending", None
    for n in range(scale):
        yield "run-start", 10 * scale + n, f"run:{10 * scale + n}", OLD, "dead", None
    for n in range(scale // 5):
        yield "forward", n, "received:run:streaming", OLD, "pending", "{}"
    yield "forward", scale, "received:run:streaming", now, "pending", "{}"


def measure(target: str, scale: int, pause: bool) -> str:
    with Catalog(target) as catalog:
        now = time.time()
        with catalog.transaction() as cur:
            cur.executemany(INSERT, list(rows(scale, epoch_text(now))))
        total = int(catalog._conn.execute("SELECT count(*) FROM outbox").fetchone()[0])
        windows = Windows(pending_outbox=WEEK, dead_letters=WEEK, task_runs=WEEK)
        began = time.perf_counter()
        counted = retention.count(catalog.db, windows, now)
        counting = time.perf_counter() - began
        began = time.perf_counter()
        deleted = retention.expire(catalog.db, windows, now, pause=retention.PAUSE if pause else 0)
        passing = time.perf_counter() - began
        left = int(catalog._conn.execute("SELECT count(*) FROM outbox").fetchone()[0])
    if deleted != counted:
        raise AssertionError(f"the pass deleted {deleted}, the dry run counted {counted}")
    return (
        f"{total:,} rows waiting: the dry run {counting:.2f} s, the pass {passing:.2f} s "
        f"({deleted['pendingOutbox']:,} pendingOutbox, {deleted['deadLetters']:,} deadLetters; "
        f"{left:,} left; {'with' if pause else 'no'} pause between batches)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=100_000, help="rows of each kind (see above)")
    parser.add_argument("--engines", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--pause", action="store_true", help="the command's pause between batches")
    parser.add_argument("--postgres-url", help="an empty PostgreSQL database (default: a server started here)")
    args = parser.parse_args(argv)
    for engine in args.engines.split(","):
        with contextlib.ExitStack() as stack:
            if engine == "sqlite":
                target = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "catalog.db")
            elif args.postgres_url:
                target = args.postgres_url
            else:
                server = stack.enter_context(PostgresServer.start())
                target = server.url(server.create_database())
            print(f"{engine}: {measure(target, args.scale, args.pause)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
