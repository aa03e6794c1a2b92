"""``prefect import`` throughput: the real import path on a fresh catalog file, with the events API
answered in process (pages of 50 events, as a Prefect server gives them) so that the figure is the
adapter's and the catalog's, not a server's.

Every task run references one upstream asset and materializes one (3 events for 1 task run in 2 of
3 runs, 1 event in the others); the task runs API answers 404, so times come from the events.

    .venv/bin/python benchmarks/prefect_import.py [--task-runs 20000]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from bridge.adapters.prefect import import_events
from bridge.adapters.prefect.client import PAGE_SIZE, PrefectClient
from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.model import format_time

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024
API = "http://prefect.bench/api"


def events_for(i: int) -> list[dict[str, Any]]:
    occurred = format_time(EPOCH + timedelta(seconds=i))
    related = [
        {"prefect.resource.id": f"prefect.flow-run.fr-{i // 10}", "prefect.resource.role": "flow-run"},
        {"prefect.resource.id": f"prefect.task-run.tr-{i}", "prefect.resource.role": "task-run",
         "prefect.resource.name": f"task_{i % 7}-0a1"},
        {"prefect.resource.id": f"prefect.flow.f-{i % 50}", "prefect.resource.role": "flow",
         "prefect.resource.name": f"flow_{i % 50}"},
    ]  # fmt: skip
    out = f"s3://lake/out/{i % 5000}.parquet"
    if i % 3 == 0:
        return [
            {"id": f"m-{i}", "occurred": occurred, "event": "prefect.asset.materialization.succeeded",
             "resource": {"prefect.resource.id": out}, "related": related, "payload": {"rows": i}},
        ]  # fmt: skip
    upstream = f"s3://lake/raw/{i % 1000}.csv"
    return [
        {"id": f"r-{i}", "occurred": occurred, "event": "prefect.asset.referenced",
         "resource": {"prefect.resource.id": upstream, "prefect.resource.name": "raw"}, "related": related},
        {"id": f"m-{i}", "occurred": occurred, "event": "prefect.asset.materialization.succeeded",
         "resource": {"prefect.resource.id": out},
         "related": [{"prefect.resource.id": upstream, "prefect.resource.role": "asset"}, *related],
         "payload": {"rows": i, "source": "api"}},
    ]  # fmt: skip


class FakeServer(requests.Session):
    """Answers the events API from a list of events, paged by offset tokens, and 404 for task runs."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__()
        self.events = events

    def _answer(self, status: int, body: Any) -> requests.Response:
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(body).encode()
        response._content_consumed = True  # type: ignore[attr-defined]  # a body read whole, as requests keeps one
        return response

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        url = str(url)
        if "/task_runs/" in url:
            return self._answer(404, {"detail": "not found"})
        offset = int(kwargs.get("params", {}).get("page-token", 0)) if url.endswith("/next") else 0
        chunk = self.events[offset : offset + PAGE_SIZE]
        after = offset + PAGE_SIZE
        token = f"{API}/events/filter/next?page-token={after}" if after < len(self.events) else None
        return self._answer(200, {"events": chunk, "total": len(self.events), "next_page": token})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-runs", type=int, default=20_000)
    args = parser.parse_args(argv)
    events = [e for i in range(args.task_runs) for e in events_for(i)]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "c.db"
        with Catalog(db) as catalog:
            client = PrefectClient(API, session=FakeServer(events))
            began = time.perf_counter()
            summary = import_events(catalog, client, Resolver.load(), settle=0)
            elapsed = time.perf_counter() - began
            assert len(summary.results) == args.task_runs, summary.to_json()
            size = db.stat().st_size
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(
        f"{len(events):,} events, {args.task_runs:,} task runs imported in {elapsed:.1f} s: "
        f"{len(events) / elapsed:,.0f} events/s, {args.task_runs / elapsed:,.0f} task runs/s; "
        f"catalog {size / MIB:.1f} MiB, peak RSS {rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
