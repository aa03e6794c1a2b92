"""Reads whose cost follows what they answer, not the history the catalog keeps: a few assets'
health, judged now. Each test adds history (more runs of the same tasks and jobs, writing the same
assets) and checks that the read reads no more than before: on SQLite, the virtual machine's
steps (a row read is some of them); on PostgreSQL, the rows each statement's scans read
(``EXPLAIN ANALYZE`` of the statements it ran, with their parameters)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog import health as health_queries
from bridge.catalog.postgres.cursor import SharedCursor
from bridge.model.health import FreshnessRule, Match, Selector
from tests.conftest import at
from tests.helpers import decl, run

pytestmark = pytest.mark.both_engines

DAY = 24 * 60  # minutes
SELECTORS = (Selector(Match(type="Table"), FreshnessRule.create(max=timedelta(days=1))),)


def work(catalog: Catalog, read: Callable[[], object]) -> int:
    """What ``read`` costs the catalog, run once warm: SQLite's virtual machine steps, or the
    rows PostgreSQL's scans read (those returned, and those a filter threw away, each loop)."""
    read()
    if catalog.engine.name == "sqlite":
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        catalog._conn.set_progress_handler(step, 1)
        try:
            read()
        finally:
            catalog._conn.set_progress_handler(None, 1)
        return steps[0]
    with _statements() as ran:
        read()
    return sum(_rows_read(catalog, statement, params) for statement, params in ran)


@contextlib.contextmanager
def _statements() -> Iterator[list[tuple[str, Any]]]:
    """The reads run on PostgreSQL meanwhile, each with its parameters."""
    ran: list[tuple[str, Any]] = []
    original = SharedCursor.execute

    def execute(self: SharedCursor, query: str, params: Any = None, **kwargs: Any) -> SharedCursor:
        if query.lstrip().upper().startswith(("SELECT", "WITH")):
            ran.append((query, params))
        return original(self, query, params, **kwargs)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(SharedCursor, "execute", execute)
        yield ran


def _rows_read(catalog: Catalog, statement: str, params: Any) -> int:
    [plan] = catalog._conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params).fetchone()
    found = 0
    nodes = [(json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", ()))
        if "Relation Name" in node:
            rows = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            found += round(rows * node["Actual Loops"])
    return found


def own_days(catalog: Catalog, first: int, last: int) -> None:
    """A day's runs of a chain of tasks, each day from ``first`` to ``last``: ``load`` reads
    src.a and src.b and writes raw.x, ``clean`` raw.x to mart.x, ``report`` mart.x to mart.y."""
    steps = (("load", ("src.a", "src.b"), "raw.x"), ("clean", ("raw.x",), "mart.x"), ("report", ("mart.x",), "mart.y"))
    for day in range(first, last):
        for n, (task, inputs, output) in enumerate(steps):
            start = at(day * DAY + n * 10)
            catalog.record_task_run(
                run(
                    task,
                    execution=f"d{day}",
                    inputs=tuple(decl(i) for i in inputs),
                    outputs=(decl(output, type="Table"),),
                    start=start,
                )
            )


def test_a_few_own_assets_judged_now_read_what_the_writes_keep_not_their_runs(catalog: Catalog) -> None:
    """Their writers and their tasks' latest runs as the writes keep them, and the edges into
    them a row an edge: a month more of daily runs reads nothing more (each edge was a row a run,
    each writer a row an output), and the answer is the one the whole catalog gives."""
    conn = catalog._conn

    def judged() -> list[health_queries.AssetHealth]:
        return health_queries.assess(conn, SELECTORS, now, ids=["mart.y"])

    own_days(catalog, 0, 3)
    now = at(3 * DAY)
    before = work(catalog, judged)
    own_days(catalog, 3, 33)
    now = at(33 * DAY)
    assert work(catalog, judged) <= before
    whole = health_queries.assess(conn, SELECTORS, now)
    assert judged() == [h for h in whole if h.asset_id == "mart.y"]
    assert judged()[0].health.value == "PASS"
