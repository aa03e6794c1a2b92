"""The lineage around an asset as it grew: the moments its graph changed and the graph as of each
(``olbridge ui``'s time slider), the same graphs ``lineage --as-of`` walks, read from the asset's
neighbourhood only.

The as-of walk (:mod:`bridge.catalog.lineage`) reads every edge the catalog knew at a moment; done
for each moment of a slider, that is the whole catalog many times over. Here the neighbourhood is
read once, node by node from the asset, by the lineage tables' keys (``lineage``'s primary key and
``lineage_downstream``, ``external_lineage``'s and ``external_lineage_downstream``): each edge to
``depth`` hops with the moment the catalog first knew it, as the as-of walk counts it (the end of
the earliest olbridge run that made it; of the earliest external run whose inputs and outputs give
it, or the first sighting of a JobEvent's job that declares it). An edge that an unfinished run
made only is known at no moment and left out.

An edge is in the graph as of a moment when it was known by then and its upstream end (walking
downstream; its downstream end walking upstream) was reached by then in fewer than ``depth``
hops over edges known by then. The moment it enters is therefore the latest of its own and of the
earliest way to reach it: a walk of ``depth`` rounds over the neighbourhood finds it for every
edge. The moments the graph changed are those entries, and the graph as of any moment is the
edges that entered by then. The neighbourhood stops at ``max_nodes`` nodes; a graph cut short
says so (``truncated``), and may then lack what the as-of walk would have reached.
"""

from __future__ import annotations

import json
from datetime import datetime

import attrs

from bridge.catalog.engine import Connection
from bridge.catalog.store import Catalog
from bridge.model import format_time, parse_time

UP, DOWN = "upstream", "downstream"

# a node's edges (in a walk's direction) made by olbridge's runs, with the end of the earliest run
# that ended: by the lineage table's primary key (upstream) or lineage_downstream (downstream)
_OWN = """
    SELECT l.{other}, min(t.ended_at) FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE l.{this} = ? AND t.ended_at IS NOT NULL GROUP BY l.{other} ORDER BY l.{other} LIMIT ?
"""
# ... and by received jobs, whose runs say when (external_lineage's key, or its downstream index)
_EXTERNAL = "SELECT {other}, job_namespace, job_name FROM external_lineage WHERE {this} = ? ORDER BY 1, 2, 3 LIMIT ?"
# a job's runs and JobEvents, by external_sources_job
_JOB_SOURCES = """
    SELECT run_id, ended_at, first_seen, inputs, outputs FROM external_sources
    WHERE job_namespace = ? AND job_name = ?
"""
_STATEMENTS = {
    walk: (
        _OWN.format(this=this, other=other),
        _EXTERNAL.format(this=this, other=other),
    )
    for walk, this, other in ((DOWN, "upstream_id", "downstream_id"), (UP, "downstream_id", "upstream_id"))
}

Edge = tuple[str, str]  # (upstream, downstream)


@attrs.frozen
class LineageSteps:
    """The neighbourhood of ``root`` with the moment each edge entered its graph."""

    root: str
    entered: dict[Edge, str]  # each edge, and when it entered the graph (the catalog's time text)
    truncated: bool  # the neighbourhood reached max_nodes: not all of it was read

    def moments(self, limit: int = 200) -> list[datetime]:
        """The moments the graph changed (the latest ``limit``), in time order."""
        return [parse_time(t, "catalog") for t in sorted(set(self.entered.values()))[-limit:]]

    def edges_at(self, moment: datetime | None) -> list[Edge]:
        """The graph's edges as of ``moment`` (None: none), in (upstream, downstream) order."""
        if moment is None:
            return []
        text = format_time(moment)
        return sorted(edge for edge, when in self.entered.items() if when <= text)


def lineage_steps(
    catalog: Catalog, root: str, *, direction: str = "both", depth: int = 2, max_nodes: int = 300
) -> LineageSteps:
    """The lineage of ``root`` to ``depth`` hops (``direction``: upstream, downstream or both)
    with the moment each edge entered it; at most ``max_nodes`` nodes read."""
    conn = catalog._conn
    jobs = _JobEdges(conn)
    seen: set[str] = {root}
    truncated = False
    entered: dict[Edge, str] = {}
    for walk in (UP, DOWN):
        if direction not in (walk, "both"):
            continue
        known: dict[Edge, str] = {}  # (from, to) in the walk's direction: when first known
        frontier, reached = [root], {root}
        for _ in range(depth):
            following: list[str] = []
            for node in frontier:
                edges, cut = _edges_of(conn, jobs, node, walk, max_nodes + 1)
                truncated |= cut
                for other, when in edges.items():
                    if other not in seen and len(seen) >= max_nodes:
                        truncated = True
                        continue
                    seen.add(other)
                    known[(node, other)] = when
                    if other not in reached:
                        reached.add(other)
                        following.append(other)
            frontier = following
        for (a, b), when in _entries(root, known, depth).items():
            edge = (b, a) if walk == UP else (a, b)
            if edge not in entered or when < entered[edge]:
                entered[edge] = when
    return LineageSteps(root, entered, truncated)


def _entries(root: str, known: dict[Edge, str], depth: int) -> dict[Edge, str]:
    """When each edge (walk-oriented, with the moment it was first known) entered the walk from
    ``root``: the later of that moment and the earliest at which its start was reached in fewer
    than ``depth`` hops over edges known by then."""
    by_start: dict[str, list[tuple[str, str]]] = {}
    for (a, b), when in known.items():
        by_start.setdefault(a, []).append((b, when))
    reach: dict[str, str] = {root: ""}  # "" sorts before every time: the root is there from the start
    for _ in range(depth - 1):
        following = dict(reach)
        for a, since in reach.items():
            for b, when in by_start.get(a, ()):
                at = max(since, when)
                if b not in following or at < following[b]:
                    following[b] = at
        reach = following
    return {(a, b): max(reach[a], when) for (a, b), when in known.items() if a in reach}


def _edges_of(conn: Connection, jobs: _JobEdges, node: str, walk: str, limit: int) -> tuple[dict[str, str], bool]:
    """A node's neighbours in a walk's direction, each with when its edge was first known (at
    most ``limit`` of each kind), and whether some were left unread."""
    own, external = _STATEMENTS[walk]
    found: dict[str, str] = {}
    rows = conn.execute(own, [node, limit]).fetchall()
    cut = len(rows) >= limit
    found.update(rows)
    rows = conn.execute(external, [node, limit]).fetchall()
    cut |= len(rows) >= limit
    for other, job_ns, job_name in rows:
        edge = (node, other) if walk == DOWN else (other, node)
        when = jobs.known(job_ns, job_name, edge)
        if when is not None and (other not in found or when < found[other]):
            found[other] = when
    return found, cut


class _JobEdges:
    """When each received job's edges were first known, as the as-of walk counts it: a run's
    inputs to its outputs at the run's end, a JobEvent's at the job's first sighting (each job's
    runs read once)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.jobs: dict[tuple[str, str], dict[Edge, str]] = {}

    def known(self, job_namespace: str, job_name: str, edge: Edge) -> str | None:
        key = (job_namespace, job_name)
        if key not in self.jobs:
            self.jobs[key] = self._read(*key)
        return self.jobs[key].get(edge)

    def _read(self, job_namespace: str, job_name: str) -> dict[Edge, str]:
        out: dict[Edge, str] = {}
        for run_id, ended, first_seen, inputs, outputs in self.conn.execute(
            _JOB_SOURCES, [job_namespace, job_name]
        ).fetchall():
            when = first_seen if run_id is None else ended
            if when is None:
                continue
            for up in json.loads(inputs):
                for down in json.loads(outputs):
                    if up != down and ((up, down) not in out or when < out[up, down]):
                        out[up, down] = when
        return out


__all__ = ["LineageSteps", "lineage_steps"]
