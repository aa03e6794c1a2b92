"""The lineage walks (``olbridge lineage``, the asset pages, the health watch's count of assets at
risk) find every edge within a depth at its least depth (and the watch's count of what is
downstream of each of many), over olbridge's lineage and the receiver's, on both engines; on
SQLite each step reads the two tables through their indexes, not the view of both made whole at
every walk."""

from __future__ import annotations

import random
from collections import deque

import pytest

from bridge.catalog import Catalog
from bridge.catalog import sql as catalog_sql
from bridge.mapping import Resolver
from tests.conftest import at
from tests.helpers import decl, run
from tests.test_health_some import IDS, build


def reference(edges: set[tuple[str, str]], start: str, depth: int, downstream: bool) -> list[tuple[str, str, int]]:
    """The walk worked out here: each edge at one more than the least number of steps from the
    start to its near end, within the depth, in the statements' order."""
    near, far = (0, 1) if downstream else (1, 0)
    steps = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in edges:
            if edge[near] == node and edge[far] not in steps:
                steps[edge[far]] = steps[node] + 1
                queue.append(edge[far])
    found = [(up, down, steps[(up, down)[near]] + 1) for up, down in edges if (up, down)[near] in steps]
    return sorted((f for f in found if f[2] <= depth), key=lambda f: (f[2], f[0], f[1]))


@pytest.mark.both_engines
@pytest.mark.parametrize("seed", range(3))
def test_the_walks_find_each_edge_at_its_least_depth(catalog: Catalog, resolver: Resolver, seed: int) -> None:
    build(catalog, resolver, random.Random(seed), expire=False)
    conn = catalog._conn
    own = {(u, d) for u, d in conn.execute("SELECT upstream_id, downstream_id FROM lineage")}
    received = {(u, d) for u, d in conn.execute("SELECT upstream_id, downstream_id FROM external_lineage")}
    assert own and received
    for start in IDS:
        for depth in (1, 2, 100):
            for statement, downstream in ((catalog_sql.DOWNSTREAM, True), (catalog_sql.UPSTREAM, False)):
                walked = [tuple(row) for row in conn.execute(statement, (start, depth))]
                assert walked == reference(own | received, start, depth, downstream), (start, depth, downstream)


@pytest.mark.both_engines
@pytest.mark.parametrize("seed", range(3))
def test_one_walk_counts_what_is_downstream_of_each_of_many(catalog: Catalog, resolver: Resolver, seed: int) -> None:
    """The health watch's count of the assets at risk below each asset of a batch, in one walk
    from them all, is what a walk from each finds (none: left out): the assets there are (a
    deleted one is walked through, not counted), never the asset it started from."""
    build(catalog, resolver, random.Random(seed), expire=False)
    conn = catalog._conn
    # a cycle back to one of them, and a deleted asset below another
    catalog.record_task_run(run("cycle", inputs=(decl(IDS[1]),), outputs=(decl(IDS[0]),)))
    catalog.record_task_run(
        run("gone", execution="e9", inputs=(decl(IDS[0]),), outputs=(decl("gone.x", type="Table"),))
    )
    catalog.delete_asset("gone.x", now=at(120))
    there = {asset_id for (asset_id,) in conn.execute("SELECT id FROM assets WHERE deleted_at IS NULL")}
    edges = {(u, d) for u, d in conn.execute("SELECT upstream_id, downstream_id FROM all_lineage")}
    assert ("gone.x" not in there) and any(down == "gone.x" for _, down in edges)
    for depth in (1, 2, 100):
        counted = dict(catalog_sql.in_chunks(conn, catalog_sql.DOWNSTREAM_COUNTS, IDS, before=(depth,)))
        walked = {
            start: len({down for _, down, _ in reference(edges, start, depth, True)} & there - {start}) for start in IDS
        }
        assert counted == {start: n for start, n in walked.items() if n}, depth


def test_on_sqlite_each_step_reads_the_tables_through_their_indexes(catalog: Catalog) -> None:
    assert catalog.db.engine.name == "sqlite"
    counts = catalog_sql.DOWNSTREAM_COUNTS.format(values="?, ?")
    for statement, params in (
        (catalog_sql.DOWNSTREAM, ("x", 3)),
        (catalog_sql.UPSTREAM, ("x", 3)),
        (counts, (3, "x", "y")),
    ):
        plan = [row[-1] for row in catalog._conn.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
        assert not any("MATERIALIZE" in step or "AUTOMATIC" in step for step in plan), plan
        # each step a search of each table by its index (the walks name them l and e; the count l)
        assert len([step for step in plan if step.startswith(("SEARCH l ", "SEARCH e "))]) >= 2, plan
