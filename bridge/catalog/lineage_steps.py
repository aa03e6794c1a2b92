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
made only is known at no moment and left out. Each own edge is a row of its index however many
runs made it, its moment the first write of its downstream end whose run made it; each received
job's runs are read the earliest first, as far as the edges asked of it need: what is read follows
the neighbourhood, and the history only as far as each edge's first run.

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
from typing import Protocol

import attrs

from bridge.catalog.engine import Connection
from bridge.model import format_time, parse_time
from bridge.model.received import run_day

UP, DOWN = "upstream", "downstream"


class _Catalog(Protocol):
    """A catalog, as read here: its connection (:class:`bridge.catalog.Catalog`'s, which the
    catalog's lineage reads through this module too)."""

    @property
    def _conn(self) -> Connection: ...


# a node's edges (in a walk's direction) made by olbridge's runs, each with the end of the earliest
# run that made it, a row an edge however many runs made it: its other ends one after the other
# through the lineage table's primary key (upstream) or lineage_downstream (downstream), at most
# so many; the end of the first write of the edge's downstream end (usages_asset, in time order:
# an output's use is at its run's end) whose run made the edge, read as far as that write (each
# write's run looked for among the edge's by a value, not an EXISTS: PostgreSQL made that a join
# from every run of the edge); an edge none of whose runs' writes is kept (its downstream end's
# usages purged, its lineage not), from its runs
_FIRST_OF_EDGE = """coalesce(
        (SELECT u.used_at FROM usages u
         WHERE u.asset_id = {down} AND u.direction = 'output' AND (
             SELECT 1 FROM lineage l
             WHERE l.upstream_id = {up} AND l.downstream_id = {down} AND l.task_run_pk = u.task_run_pk) = 1
         ORDER BY u.used_at, u.task_run_pk LIMIT 1),
        (SELECT min(t.ended_at) FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
         WHERE l.upstream_id = {up} AND l.downstream_id = {down} AND t.ended_at IS NOT NULL))"""
_OWN = """
    WITH RECURSIVE others (other, n) AS (
        SELECT (SELECT l.{other} FROM lineage l WHERE l.{this} = ? ORDER BY l.{other} LIMIT 1), 1
        UNION ALL
        SELECT (
            SELECT l.{other} FROM lineage l WHERE l.{this} = ? AND l.{other} > o.other ORDER BY l.{other} LIMIT 1
        ), o.n + 1
        FROM others o WHERE o.other IS NOT NULL AND o.n < ?
    )
    SELECT o.other, {first} FROM others o WHERE o.other IS NOT NULL
"""
# ... and by received jobs, whose runs say when (external_lineage's key, or its downstream index)
_EXTERNAL = "SELECT {other}, job_namespace, job_name FROM external_lineage WHERE {this} = ? ORDER BY 1, 2, 3 LIMIT ?"
# a job's runs that ended, the earliest first (by end, then source: external_sources_job), a page
# at a time, the next after a run; and its JobEvent's row (by its key)
_JOB_RUNS = """
    SELECT source, ended_at, inputs, outputs FROM external_sources
    WHERE job_namespace = ? AND job_name = ? AND {ended} AND run_id IS NOT NULL
    ORDER BY ended_at, source LIMIT ?
"""
_FIRST_RUNS = _JOB_RUNS.format(ended="ended_at IS NOT NULL")
_RUNS_AFTER = _JOB_RUNS.format(ended="(ended_at, source) > (?, ?)")
_JOB_ROW = (
    "SELECT first_seen, inputs, outputs FROM external_sources WHERE source = ? AND run_day = ? AND run_id IS NULL"
)
_STATEMENTS = {
    DOWN: (
        _OWN.format(this="upstream_id", other="downstream_id", first=_FIRST_OF_EDGE.format(up="?", down="o.other")),
        _EXTERNAL.format(this="upstream_id", other="downstream_id"),
    ),
    UP: (
        _OWN.format(this="downstream_id", other="upstream_id", first=_FIRST_OF_EDGE.format(up="o.other", down="?")),
        _EXTERNAL.format(this="downstream_id", other="upstream_id"),
    ),
}
# how many times each own statement's reads of the first writes name the node (its parameters:
# the node for the other ends' two reads, their count, then the node that many times)
_OWN_PARAMS = {DOWN: 2, UP: 3}

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
    catalog: _Catalog, root: str, *, direction: str = "both", depth: int = 2, max_nodes: int = 300
) -> LineageSteps:
    """The lineage of ``root`` to ``depth`` hops (``direction``: upstream, downstream or both)
    with the moment each edge entered it; at most ``max_nodes`` nodes read."""
    return steps_of(catalog._conn, _JobEdges(catalog._conn), root, direction, depth, max_nodes)


def edge_labels(conn: Connection, jobs: _JobEdges, edge: Edge, moment: str) -> set[str]:
    """What had made ``edge`` by ``moment``, as the as-of walk names it: olbridge's tasks whose
    runs that made it had ended (``<flow namespace>/<flow id>.<task id>``), and the received jobs
    one of whose runs that ended (or whose JobEvent, seen) gives it (``<namespace>/<name>
    (external)``)."""
    labels = {label for (label,) in conn.execute(_OWN_LABELS, (*edge, moment))}
    for job_ns, job_name in conn.execute(_JOBS_OF_EDGE, edge).fetchall():
        when = jobs.known(job_ns, job_name, edge)
        if when is not None and when <= moment:
            labels.add(f"{job_ns}/{job_name} (external)")
    return labels


_OWN_LABELS = """
    SELECT DISTINCT t.flow_namespace || '/' || t.flow_id || '.' || t.task_id
    FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE l.upstream_id = ? AND l.downstream_id = ? AND t.ended_at IS NOT NULL AND t.ended_at <= ?
"""
_JOBS_OF_EDGE = "SELECT job_namespace, job_name FROM external_lineage WHERE upstream_id = ? AND downstream_id = ?"


def steps_of(conn: Connection, jobs: _JobEdges, root: str, direction: str, depth: int, max_nodes: int) -> LineageSteps:
    """:func:`lineage_steps` on a connection, with the received jobs' edges read so far."""
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
    rows = conn.execute(own, [node, node, limit, *[node] * _OWN_PARAMS[walk]]).fetchall()
    cut = len(rows) >= limit
    found.update((other, when) for other, when in rows if when is not None)
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
    inputs to its outputs at the run's end, a JobEvent's at the job's first sighting. Each job's
    runs that ended are read the earliest first, as far as the edges asked of it need (to the
    first run that made each, or past its JobEvent's sighting), each read once."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.jobs: dict[tuple[str, str], _FirstKnown] = {}
        self.kept: dict[Edge, str | None] = {}  # each edge's kept since, read so far

    def known(self, job_namespace: str, job_name: str, edge: Edge) -> str | None:
        """When the job's ``edge`` was first known: by its runs (and JobEvent), or, where
        retention deleted the runs that first gave it, since when the catalog keeps it
        (``kept_edges``: the health's walk reads it too), the earlier; the latter only of an edge
        one job alone gives (the catalog keeps no job with it: of several, which one it was is
        not known, and none is dated before its own runs)."""
        key = (job_namespace, job_name)
        if key not in self.jobs:
            self.jobs[key] = _FirstKnown(self.conn, key)
        if edge not in self.kept:
            row = self.conn.execute(_KEPT_SINCE, edge).fetchone()
            self.kept[edge] = None if row is None else str(row[0])
        found = [when for when in (self.jobs[key].known(edge), self.kept[edge]) if when is not None]
        return min(found) if found else None


# since when the catalog keeps an edge of runs retention deleted (its key), where one received
# job alone gives the edge
_KEPT_SINCE = """
    SELECT k.since FROM kept_edges k WHERE k.upstream_id = ? AND k.downstream_id = ?
      AND (SELECT count(*) FROM external_lineage e
           WHERE e.upstream_id = k.upstream_id AND e.downstream_id = k.downstream_id) = 1
"""


class _FirstKnown:
    """One job's edges, with when each was first known, as far as its runs are read."""

    FIRST, MOST = 8, 1024  # runs a page reads: at first, and at most

    def __init__(self, conn: Connection, job: tuple[str, str]) -> None:
        self.conn, self.job = conn, job
        self.runs: dict[Edge, str] = {}  # each edge of the runs read, at the first one's end
        self.read = 0
        self.last: tuple[str, str] | None = None  # the last run read: (end, source)
        self.done = False
        self.lists: dict[str, list[str]] = {}  # each JSON list read, parsed once
        source = f"job:{job[0]}/{job[1]}"
        self.declared: dict[Edge, str] = {}  # its JobEvent's edges, at the job's first sighting
        row = conn.execute(_JOB_ROW, [source, run_day(source)]).fetchone()
        if row is not None:
            self._add(self.declared, row[0], row[1], row[2])

    def known(self, edge: Edge) -> str | None:
        declared = self.declared.get(edge)
        while (
            edge not in self.runs
            and not self.done
            and (declared is None or self.last is None or self.last[0] < declared)
        ):
            self._more()
        found = [when for when in (self.runs.get(edge), declared) if when is not None]
        return min(found) if found else None

    def _more(self) -> None:
        size = min(max(self.read, self.FIRST), self.MOST)
        if self.last is None:
            page = self.conn.execute(_FIRST_RUNS, [*self.job, size]).fetchall()
        else:
            page = self.conn.execute(_RUNS_AFTER, [*self.job, *self.last, size]).fetchall()
        self.done = len(page) < size
        self.read += len(page)
        for source, ended, inputs, outputs in page:
            self._add(self.runs, ended, inputs, outputs)
            self.last = (ended, source)

    def _add(self, into: dict[Edge, str], when: str, inputs: str, outputs: str) -> None:
        downs = self._list(outputs)
        for up in self._list(inputs):
            for down in downs:
                if up != down and (up, down) not in into:
                    into[up, down] = when

    def _list(self, text: str) -> list[str]:
        found = self.lists.get(text)
        if found is None:
            found = self.lists[text] = json.loads(text)
        return found


__all__ = ["JobEdges", "LineageSteps", "edge_labels", "lineage_steps", "steps_of"]

JobEdges = _JobEdges
