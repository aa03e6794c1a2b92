"""Reads whose cost follows what they answer, not the history the catalog keeps: a few assets'
health, judged now; the producers of a graph's assets; the lineage slider's steps. Each test adds
history (more runs of the same tasks and jobs, writing the same assets) and checks that the read
reads no more than before: on SQLite, the virtual machine's steps (a row read is some of them); on
PostgreSQL, the rows each statement's scans read (``EXPLAIN ANALYZE`` of the statements it ran,
with their parameters)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from bridge.catalog import Catalog, browse
from bridge.catalog import health as health_queries
from bridge.catalog.lineage_steps import lineage_steps
from bridge.catalog.postgres.cursor import SharedCursor
from bridge.mapping import Resolver
from bridge.model.health import FreshnessRule, Match, Selector
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import PRODUCER, decl, ol_dataset, ol_run_event, run

pytestmark = pytest.mark.both_engines

DAY = 24 * 60  # minutes
SELECTORS = (Selector(Match(type="Table"), FreshnessRule.create(max=timedelta(days=1))),)


def work(catalog: Catalog, read: Callable[[], object]) -> int:
    """What ``read`` costs the catalog, run once warm: SQLite's virtual machine steps, or the
    rows PostgreSQL's scans read (those returned, and those a filter threw away, each loop)."""
    if catalog.engine.name == "sqlite":
        read()
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
    # the planner's statistics, as autovacuum keeps them on a catalog in use, and each table read
    # through its indexes in their order where a statement can: the tables are a few pages, which
    # the planner would rather read whole (and sort), as it would not a catalog's
    catalog._conn.execute("ANALYZE")
    for plan in _INDEXES_FIRST:
        catalog._conn.execute(f"SET {plan} = off")
    try:
        read()
        with _statements() as ran:
            read()
        counted = [_rows_read(catalog, statement, params) for statement, params in ran]
    finally:
        for plan in _INDEXES_FIRST:
            catalog._conn.execute(f"RESET {plan}")
    return sum(counted)


_INDEXES_FIRST = ("enable_seqscan", "enable_bitmapscan", "enable_sort")


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


LAKE = "s3://lake"


def received_days(catalog: Catalog, resolver: Resolver, first: int, last: int, *, unended: bool = True) -> None:
    """A day's runs of two received jobs, each day from ``first`` to ``last``: ``load`` reads
    one and writes two, ``build`` two to three (its run failing on odd days), and (``unended``)
    each day a run of ``load`` that never ends writes four."""
    events = []
    for day in range(first, last):
        time = at(day * DAY).strftime("%Y-%m-%dT%H:%M:%SZ")
        runs = [
            ("load", ["one"], ["two"], "COMPLETE"),
            ("build", ["two"], ["three"], "FAIL" if day % 2 == 1 else "COMPLETE"),
            *([("load", ["one"], ["four"], "START")] if unended else []),
        ]
        for n, (job, inputs, outputs, event_type) in enumerate(runs):
            events.append(
                ol_run_event(
                    event_type,
                    run_id=f"0194a1b2-0000-7000-8000-{day * 10 + n:012d}",
                    job=("spark", job),
                    inputs=[ol_dataset(LAKE, name) for name in inputs],
                    outputs=[ol_dataset(LAKE, name) for name in outputs],
                    time=time,
                )
            )
    assert {o.status for o in catalog_intake(catalog, resolver).take(events)} == {"accepted"}


def test_a_received_asset_judged_now_reads_its_jobs_latest_runs_not_every_run(
    catalog: Catalog, resolver: Resolver
) -> None:
    """Its jobs' runs are read the latest first, as far as its latest run, its latest write and
    the edges into it (and those upstream of it) need: a month more of daily runs of those jobs
    reads nothing more (every run of each job was read, each with its inputs and outputs), and
    the answer is the one the whole catalog gives."""
    conn = catalog._conn
    wanted = f"{LAKE}/three"
    selectors = (Selector(Match(), FreshnessRule.create(max=timedelta(days=2))),)

    def judged() -> list[health_queries.AssetHealth]:
        return health_queries.assess(conn, selectors, now, ids=[wanted])

    received_days(catalog, resolver, 0, 10)  # more than a page of each job's runs
    now = at(10 * DAY)
    before = work(catalog, judged)
    received_days(catalog, resolver, 10, 40)
    now = at(40 * DAY)
    assert work(catalog, judged) <= before
    whole = health_queries.assess(conn, selectors, now)
    [found] = judged()
    assert [found] == [h for h in whole if h.asset_id == wanted]
    assert found.health.value == "FAIL" and "last run spark/build" in found.verdict.reasons[-1], found


def test_the_producers_of_a_graphs_assets_read_a_row_or_two_a_job_not_every_run(
    catalog: Catalog, resolver: Resolver
) -> None:
    """What last wrote each asset (the dependencies tab grouped by producer): each received job's
    latest run that ended and its JobEvent, and each asset's latest own write, read through
    their indexes; a month more of daily runs reads nothing more (every run of each job was
    joined to each asset it writes, every own write of each asset read)."""
    ids = [f"{LAKE}/two", f"{LAKE}/three", f"{LAKE}/four", "mart.y", "src.a"]

    def made() -> dict[str, str]:
        return browse.producers(catalog, ids, own="olbridge")

    received_days(catalog, resolver, 0, 10)
    own_days(catalog, 0, 10)
    before = work(catalog, made)
    received_days(catalog, resolver, 10, 40)
    own_days(catalog, 10, 40)
    assert work(catalog, made) <= before
    four = f"{LAKE}/four"  # written by runs that never ended alone: their job's producer
    assert made() == {f"{LAKE}/two": PRODUCER, f"{LAKE}/three": PRODUCER, four: PRODUCER, "mart.y": "olbridge"}


def test_the_lineage_sliders_steps_read_the_first_run_of_each_edge_not_every_run(
    catalog: Catalog, resolver: Resolver
) -> None:
    """When each edge around an asset was first known: an own edge from the first write of its
    downstream end whose run made it, a row an edge; a received job's edges from its runs the
    earliest first, as far as the first that made them. A month more of daily runs reads nothing
    more (every own edge was a row a run, every received run read), and the steps stay."""
    received_days(catalog, resolver, 0, 10, unended=False)
    own_days(catalog, 0, 10)
    roots = ("raw.x", f"{LAKE}/two")

    def steps() -> list[dict[tuple[str, str], str]]:
        return [lineage_steps(catalog, root, depth=2).entered for root in roots]

    first, before = steps(), work(catalog, steps)
    received_days(catalog, resolver, 10, 40, unended=False)
    own_days(catalog, 10, 40)
    assert work(catalog, steps) <= before
    assert steps() == first
    assert first[0][("src.a", "raw.x")] == "2025-03-01T08:01:00.000000Z"
    assert first[1][(f"{LAKE}/one", f"{LAKE}/two")] == "2025-03-01T08:00:00.000000Z"
