"""The catalog's column lineage: the edges of olbridge's task runs and of received events, read
for the conversion and walked for ``lineage --column``.

An edge is an output asset's column from an input asset's column, with its transformations and
the run that made it; the whole-output edges (OpenLineage's ``dataset`` list: join keys, filters)
have no output column and are kept and exported, not walked: the graph counts them, for
``lineage --column`` to say so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from bridge.catalog import sql
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.rows import asset_from_row
from bridge.errors import NotFoundError, ValidationError
from bridge.model import Asset
from bridge.model.column_lineage import ColumnEdge, Transformation, sorted_transformations


@attrs.frozen
class StoredColumnEdge:
    """A column edge as stored, with the run that made it: one of olbridge's task runs
    (``task_run_pk``) or a received run or job (``source``)."""

    edge: ColumnEdge
    task_run_pk: int | None
    source: str | None


@attrs.frozen
class ColumnLineageEdge:
    upstream: str
    upstream_column: str
    downstream: str
    downstream_column: str
    depth: int
    transformations: tuple[Transformation, ...]  # of every run that made the edge
    # "<flow namespace>/<flow id>.<task id>" of olbridge's runs, "<job namespace>/<job name> (external)"
    tasks: tuple[str, ...]


@attrs.frozen
class ColumnLineageGraph:
    root: str
    column: str
    direction: str
    depth: int
    edges: tuple[ColumnLineageEdge, ...]
    assets: tuple[Asset, ...]
    # each asset of the graph whose whole output inputs shape (join keys, filters; OpenLineage's
    # ``dataset``), with how many input columns do: edges kept and exported, not walked here
    whole_output: tuple[tuple[str, int], ...] = ()


def read_transformations(text: str) -> tuple[Transformation, ...]:
    """The transformations of a stored edge (entries that are not one are left out)."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        return ()
    if not isinstance(items, list):
        return ()
    return tuple(t for t in (Transformation.from_json(i) for i in items) if t is not None)


def _edge(down: str, down_column: str, up: str, up_column: str, transformations: str) -> ColumnEdge:
    return ColumnEdge(down, down_column or None, up, up_column, read_transformations(transformations))


def edges_of_runs(conn: Connection | Cursor, pks: Sequence[int]) -> dict[int, list[ColumnEdge]]:
    """The column edges of olbridge's task runs, by task run."""
    out: dict[int, list[ColumnEdge]] = {}
    for pk, *row in sql.in_chunks(conn, sql.COLUMN_EDGES_OF_RUNS, pks):
        out.setdefault(pk, []).append(_edge(*row))
    return out


def edges_of(conn: Connection, *, source: str | None, task_run_pk: int | None) -> list[StoredColumnEdge]:
    statement = (
        "SELECT downstream_id, downstream_column, upstream_id, upstream_column, transformations, task_run_pk, source "
        "FROM column_lineage WHERE (CAST(? AS TEXT) IS NULL OR source = ?) "
        "AND (CAST(? AS INTEGER) IS NULL OR task_run_pk = ?) "
        "ORDER BY downstream_id, downstream_column, upstream_id, upstream_column, transformations"
    )
    return [
        StoredColumnEdge(_edge(*row[:5]), row[5], row[6])
        for row in conn.execute(statement, (source, source, task_run_pk, task_run_pk))
    ]


def column_lineage(conn: Connection, asset: Asset, column: str, *, direction: str, depth: int) -> ColumnLineageGraph:
    if direction not in ("upstream", "downstream", "both"):
        raise ValidationError(f"unknown direction {direction!r}", rule="lineage.direction", value=direction)
    if depth < 1:
        raise ValidationError("depth is at least 1", rule="lineage.depth", value=depth)
    named = conn.execute(sql.COLUMN_IS_NAMED, (asset.id, column, asset.id, column)).fetchone() is not None
    if not named and column not in {c.name for c in asset.columns}:
        known = ", ".join(c.name for c in asset.columns) or "none known"
        raise NotFoundError(f"asset {asset.id!r} has no column {column!r} (its columns: {known})")
    found: list[tuple[str, str, str, str, int]] = []
    if direction in ("upstream", "both"):
        found += conn.execute(sql.COLUMNS_UPSTREAM, (asset.id, column, depth)).fetchall()
    if direction in ("downstream", "both"):
        found += conn.execute(sql.COLUMNS_DOWNSTREAM, (asset.id, column, depth)).fetchall()
    edges = []
    for up, up_column, down, down_column, level in found:
        made = conn.execute(sql.COLUMN_EDGE_RUNS, (up, up_column, down, down_column) * 2).fetchall()
        transformations = sorted_transformations(t for text, _task in made for t in read_transformations(text))
        tasks = tuple(dict.fromkeys(task for _text, task in made))
        edges.append(ColumnLineageEdge(up, up_column, down, down_column, level, transformations, tasks))
    ids = dict.fromkeys([asset.id, *(e.upstream for e in edges), *(e.downstream for e in edges)])
    assets = [asset]
    for asset_id in list(ids)[1:]:
        row = conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()
        if row is not None:
            assets.append(asset_from_row(row))
    shaped = [(a.id, int(conn.execute(sql.WHOLE_OUTPUT_INPUTS, (a.id,)).fetchone()[0])) for a in assets]
    whole_output = tuple((asset_id, count) for asset_id, count in shaped if count)
    return ColumnLineageGraph(asset.id, column, direction, depth, tuple(edges), tuple(assets), whole_output)
