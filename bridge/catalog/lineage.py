"""An asset's lineage: the edges upstream and downstream of it, to a depth, now (the SQL walk of
:mod:`bridge.catalog.sql`) or as the catalog knew it at a moment (the edges of the runs that had
ended by then, walked here). :meth:`bridge.catalog.Catalog.lineage` gives them as a
:class:`LineageGraph`; column lineage is :mod:`bridge.catalog.columns`'."""

from __future__ import annotations

import json
from datetime import datetime

import attrs

from bridge.catalog import sql
from bridge.catalog.engine import Connection
from bridge.catalog.lineage_steps import JobEdges, edge_labels, steps_of
from bridge.model import Asset, format_time


@attrs.frozen
class LineageEdge:
    upstream: str
    downstream: str
    depth: int
    # "<flow namespace>/<flow id>.<task id>" of the runs that made the edge, and
    # "<job namespace>/<job name> (external)" of the external jobs
    tasks: tuple[str, ...]


@attrs.frozen
class LineageGraph:
    root: str
    direction: str
    depth: int
    edges: tuple[LineageEdge, ...]
    assets: tuple[Asset, ...]
    as_of: datetime | None = None  # the graph as the catalog knew it then (None: now)


def edges(conn: Connection, asset_id: str, direction: str, depth: int, as_of: datetime | None) -> list[LineageEdge]:
    """The edges ``direction`` ("upstream", "downstream" or "both") of an asset, to ``depth``;
    with ``as_of``, those known at that moment."""
    if as_of is not None:
        return _edges_as_of(conn, asset_id, direction, depth, format_time(as_of))
    found: list[tuple[str, str, int]] = []
    if direction in ("upstream", "both"):
        found += conn.execute(sql.UPSTREAM, (asset_id, depth)).fetchall()
    if direction in ("downstream", "both"):
        found += conn.execute(sql.DOWNSTREAM, (asset_id, depth)).fetchall()
    out = []
    for up, down, level in found:
        tasks = tuple(label for (label,) in conn.execute(sql.EDGE_TASKS, (up, down, up, down)))
        out.append(LineageEdge(up, down, level, tasks))
    return out


# nodes of an asset's neighbourhood read through the lineage's indexes for a walk as of a moment;
# past them, every edge the catalog knew then is read
AS_OF_NODES_AT_MOST = 5000


def _edges_as_of(conn: Connection, asset_id: str, direction: str, depth: int, moment: str) -> list[LineageEdge]:
    """The walk of :func:`edges` over the edges known at ``moment``: each edge once a direction,
    at the least depth it is reached, ordered as the SQL walk orders them. The edges are those of
    the asset's neighbourhood as it grew (:mod:`bridge.catalog.lineage_steps`, the web view's time
    slider: read through the lineage's indexes, what the walk needs), each named by what had made
    it by then; in a neighbourhood past :data:`AS_OF_NODES_AT_MOST` nodes, every edge the catalog
    knew then."""
    jobs = JobEdges(conn)
    steps = steps_of(conn, jobs, asset_id, direction, depth, AS_OF_NODES_AT_MOST)
    if steps.truncated:
        return _walk(asset_id, direction, depth, _edges_known_by(conn, moment))
    known = sorted(edge for edge, when in steps.entered.items() if when <= moment)
    return _walk(asset_id, direction, depth, {edge: edge_labels(conn, jobs, edge, moment) for edge in known})


def _edges_known_by(conn: Connection, moment: str) -> dict[tuple[str, str], set[str]]:
    """Every edge the catalog knew at ``moment``, with what had made it."""
    tasks: dict[tuple[str, str], set[str]] = {}
    for up, down, label in conn.execute(sql.OWN_EDGES_ENDED_BY, (moment,)):
        tasks.setdefault((up, down), set()).add(label)
    for job_ns, job_name, inputs, outputs in conn.execute(sql.EXTERNAL_SOURCES_KNOWN_BY, (moment, moment)):
        label = f"{job_ns}/{job_name} (external)"
        for up in json.loads(inputs):
            for down in json.loads(outputs):
                if up != down:
                    tasks.setdefault((up, down), set()).add(label)
    # the received edges whose runs retention deleted, known since they were first (kept_edges)
    for up, down, job_ns, job_name in conn.execute(sql.KEPT_RECEIVED_EDGES_BY, (moment,)):
        tasks.setdefault((up, down), set()).add(f"{job_ns}/{job_name} (external)")
    return tasks


def _walk(asset_id: str, direction: str, depth: int, tasks: dict[tuple[str, str], set[str]]) -> list[LineageEdge]:
    """The walk over ``tasks``'s edges from the asset, each edge with what made it."""
    found: list[LineageEdge] = []
    for walk in ("upstream", "downstream"):
        if direction not in (walk, "both"):
            continue
        step: dict[str, list[tuple[str, str]]] = {}
        for up, down in tasks:
            step.setdefault(down if walk == "upstream" else up, []).append((up, down))
        levels: dict[tuple[str, str], int] = {}
        frontier, level = [asset_id], 1
        while frontier and level <= depth:
            reached = []
            for node in frontier:
                for edge in step.get(node, ()):
                    if edge not in levels:
                        levels[edge] = level
                        reached.append(edge[0] if walk == "upstream" else edge[1])
            frontier, level = reached, level + 1
        ordered = sorted(levels.items(), key=lambda item: (item[1], item[0]))
        found += [LineageEdge(up, down, lvl, tuple(sorted(tasks[up, down]))) for (up, down), lvl in ordered]
    return found


__all__ = ["LineageEdge", "LineageGraph", "edges"]
