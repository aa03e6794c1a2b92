"""The SQL statements of the catalog, for both engines: the fragments they share, and those of
the assets, their changes, task runs, column lineage, lineage and declared jobs; the receiver's
tables' are in :mod:`bridge.catalog.sql_received`, delivery's (the outbox, positions, workers) in
:mod:`bridge.catalog.sql_outbox`.

Written once, in SQLite's dialect with ``?`` placeholders, and run as they are on SQLite; the
PostgreSQL engine translates each once (:mod:`bridge.catalog.postgres.cursor`: placeholders, the
:data:`LOCK` comment, the few fragments that differ). Portable where it costs nothing: ``ON
CONFLICT DO NOTHING`` rather than ``INSERT OR IGNORE``, ``RETURNING`` rather than the last rowid,
typed ``CAST(? AS ...)`` where a placeholder alone has no type. The schema is in
:mod:`bridge.catalog.schema`, its migrations in ``migrations/versions``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bridge.catalog.engine import Connection, Cursor

# The schema's version, the number of the newest migration (migrations/versions), the same on
# both engines; a catalog with a higher one is refused.
SCHEMA_VERSION = 38

# PostgreSQL: the tables partitioned by day, each by range of its column (text whose first ten
# characters are a day): received events by their event time, received runs by the day of their
# run ids (bridge/catalog/postgres/partitions.py makes the days and drops them)
PARTITIONED = {"received_events": "event_time", "external_sources": "run_day"}
# and beside the days and the default, a partition of the rows with no day (run_day ''): received
# jobs and the runs whose ids tell no day, kept out of the default partition, which making a day's
# partition reads whole while it holds it (for the rows of that day to move) and ATTACH reads again
UNDATED = {"external_sources": ("", "1")}  # the bounds of the key '' alone (a day starts with a digit 2)


def undated_partition(name: str) -> str:
    """The statement that makes a table's partition of rows with no day (a table of :data:`UNDATED`)."""
    low, high = UNDATED[name]
    return (
        f"CREATE TABLE {name}_undated PARTITION OF {name} FOR VALUES FROM ('{low}') TO ('{high}')"
        f"{partition_storage(name)}"
    )


# tables whose rows are rewritten in place again and again (a placeholder's and a dataset's
# sightings at every group of the receiver, a run's state, a facet, a worker's heartbeat, an
# import's position): on PostgreSQL each of their pages keeps a fifth free, so that an update can
# stay on its page (a HOT update, which writes no index entry and leaves no dead one behind)
UPDATED_IN_PLACE = ("assets", "external_datasets", "external_sources", "external_facets", "stream_workers", "positions")
FILLFACTOR = 80


def partition_storage(name: str) -> str:
    """The storage parameters each partition of a table is made with (`` WITH (fillfactor = 80)``
    for the tables updated in place: a partitioned table has none of its own); '' when none."""
    return f" WITH (fillfactor = {FILLFACTOR})" if name in UPDATED_IN_PLACE else ""


# the keys that count up, by table: a copy that writes them as they were sets each engine's
# counter past the highest (Catalog.reset_keys)
COUNTED_KEYS = {
    "asset_changes": "seq",
    "declared_jobs": "pk",
    "health_marks": "seq",
    "outbox": "seq",
    "received_events": "pk",
    "task_runs": "pk",
}

# --- assets ---------------------------------------------------------------------------------

ASSET_COLUMNS = (
    "id, type, namespace, display_name, description, metadata, origin, created_at, updated_at, "
    "deleted_at, columns, assertions"
)
GET_ASSET = f"SELECT {ASSET_COLUMNS} FROM assets WHERE id = ?"
GET_ASSETS = f"SELECT {ASSET_COLUMNS} FROM assets WHERE id IN ({{values}})"  # in_chunks
# an engine whose writers run side by side (PostgreSQL) locks the rows a write transaction reads to
# write them: this comment becomes its FOR UPDATE (SQLite's write lock is the whole database)
LOCK = " /*FOR UPDATE*/"
# the same, for a reader that passes over the rows another transaction holds (a stream worker
# claiming outbox rows beside others): FOR UPDATE SKIP LOCKED where rows are locked, nothing on SQLite
SKIP_LOCKED = " /*FOR UPDATE SKIP LOCKED*/"
# the other fragments of SQLite's that PostgreSQL says its own way (bridge/catalog/postgres/cursor.py)
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"  # the database's clock, as olbridge writes times
EPOCH = "((julianday('now') - 2440587.5) * 86400.0)"  # the database's clock, seconds since the epoch
CHANGE_NAMESPACE = "json_extract(snapshot, '$.namespace')"  # an asset change's namespace
RETRY_INDEX = " INDEXED BY outbox_retrying"  # SQLite's planner needs telling
ALERTS_INDEX = " INDEXED BY outbox_alerts"  # likewise (it reads the pending rows' index, events and all)
# the assets whose id, received name or symlink may hold a text (the placeholder: its LIKE
# pattern, bridge.catalog.browse's, in which each letter of another case outside ASCII is a
# wildcard; the rows are checked again in Python), by the search of schema.search_statements:
# SQLite's FTS5 trigram table, whose index answers LIKE; PostgreSQL's view, ILIKE (pg_trgm's indexes)
SEARCH_TERM = "term LIKE ?"
# a token's namespace pattern, on a column: ``*`` and ``?`` wildcards, case-sensitive, "[" given
# as "[[]" (browse.Scope.clause); PostgreSQL says it with LIKE (postgres/cursor.py)
NAMESPACE_GLOB = " GLOB ?"
SEARCH_ASSETS = f"id IN (SELECT asset_id FROM asset_search WHERE {SEARCH_TERM})"
# how many of the search's terms hold a text, up to a number (read as they come, not all)
COUNT_SEARCH_TERMS = f"SELECT count(*) FROM (SELECT 1 FROM asset_search WHERE {SEARCH_TERM} LIMIT ?) t"
SEARCH_TERMS = f"SELECT asset_id, term FROM asset_search WHERE {SEARCH_TERM}"  # the terms, with their assets
GET_ASSET_TO_WRITE = GET_ASSET + LOCK
UPSERT_ASSET = f"""
    INSERT INTO assets ({ASSET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        type = excluded.type, namespace = excluded.namespace, display_name = excluded.display_name,
        description = excluded.description, metadata = excluded.metadata, origin = excluded.origin,
        updated_at = excluded.updated_at, deleted_at = excluded.deleted_at, columns = excluded.columns,
        assertions = excluded.assertions
"""
COUNT_ASSETS = "SELECT count(*) FROM assets"
# a placeholder's creation time is its first sighting, which an earlier event can move back; it
# never overwrites the catalog's own asset, should one of that id have been made meanwhile
UPSERT_PLACEHOLDER = (
    UPSERT_ASSET.replace(
        "updated_at = excluded.updated_at", "created_at = excluded.created_at, updated_at = excluded.updated_at"
    ).rstrip()
    + "\n    WHERE assets.origin = 'external'\n"
)


def select_assets(
    *,
    types: int = 0,
    namespace: bool = False,
    include_deleted: bool = False,
    ids: int = 0,
    updated_before: bool = False,
    after: bool = False,
    limit: bool = False,
) -> str:
    """A SELECT over assets with the given filters (placeholders in this order: ids, types,
    namespace, updated_before, after, limit), by id. A namespace filter never matches a Global
    asset (NULL); ``after`` takes the ids after one, ``limit`` so many at most."""
    where = []
    if ids:
        where.append(f"id IN ({', '.join('?' * ids)})")
    if types:
        where.append(f"type IN ({', '.join('?' * types)})")
    if namespace:
        where.append("namespace = ?")
    if updated_before:
        where.append("updated_at < ?")
    if after:
        where.append("id > ?")
    if not include_deleted:
        where.append("deleted_at IS NULL")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {ASSET_COLUMNS} FROM assets{clause} ORDER BY id" + (" LIMIT ?" if limit else "")


INTEGER_MOST = 2**63 - 1  # the most an integer of either engine holds (SQLite's, a bigint)
IN_AT_MOST = 400  # values one IN list names, at most (well under SQLite's limit of parameters)


def in_chunks(
    conn: Connection | Cursor,
    statement: str,
    values: Iterable[Any],
    before: Sequence[Any] = (),
    after: Sequence[Any] = (),
    *,
    mark: str = "?",
) -> Iterator[Any]:
    """The rows of ``statement`` for ``values`` (sorted), :data:`IN_AT_MOST` at a time: its
    ``{values}`` is the IN list's placeholders (each ``mark``: ``(?)`` for the rows of a
    ``VALUES``), ``before`` and ``after`` its other parameters."""
    ordered = sorted(values)
    for start in range(0, len(ordered), IN_AT_MOST):
        chunk = ordered[start : start + IN_AT_MOST]
        yield from conn.execute(statement.format(values=", ".join([mark] * len(chunk))), (*before, *chunk, *after))


def only(template: str, column: str) -> tuple[str, str]:
    """A statement over every row, and the same over the rows whose ``column`` is one of a few
    (``{values}``, for :func:`in_chunks`): ``{only}`` in ``template``, just after its WHERE,
    marks where the few are chosen."""
    return template.format(only=""), template.format(only=f"{column} IN ({{values}}) AND ")


def delete_in(table: str, count: int, *columns: str) -> str:
    """Delete the rows of ``table`` whose ``columns`` (any of them; default ``asset_id``) hold one
    of ``count`` values, given once for each column."""
    marks = ", ".join("?" * count)
    return f"DELETE FROM {table} WHERE " + " OR ".join(f"{c} IN ({marks})" for c in columns or ("asset_id",))


# --- changes --------------------------------------------------------------------------------

INSERT_CHANGE = "INSERT INTO asset_changes (asset_id, kind, changed_at, snapshot) VALUES (?, ?, ?, ?) RETURNING seq"


def where(*conditions: tuple[bool, str]) -> str:
    """`` WHERE a AND b`` of the conditions that apply (in order), or nothing."""
    kept = [text for applies, text in conditions if applies]
    return f" WHERE {' AND '.join(kept)}" if kept else ""


def select_changes(
    *, since: bool = False, until: bool = False, namespace: bool = False, asset: bool = False, after: bool = False
) -> str:
    """Asset changes in time order (placeholders: since, until, namespace, asset, then the
    (changed_at, seq) to read after)."""
    clause = _change_filters(since=since, until=until, namespace=namespace, asset=asset, after=after)
    return f"SELECT seq, kind, changed_at, snapshot FROM asset_changes{clause} ORDER BY changed_at, seq"


def count_changes(*, since: bool = False, until: bool = False, namespace: bool = False, asset: bool = False) -> str:
    """How many asset changes the filters select (placeholders as :func:`select_changes`')."""
    clause = _change_filters(since=since, until=until, namespace=namespace, asset=asset)
    return f"SELECT count(*) FROM asset_changes{clause}"


def _change_filters(
    *, since: bool = False, until: bool = False, namespace: bool = False, asset: bool = False, after: bool = False
) -> str:
    return where(
        (since, "changed_at >= ?"),
        (until, "changed_at < ?"),
        (namespace, f"{CHANGE_NAMESPACE} = ?"),
        (asset, "asset_id = ?"),
        (after, "(changed_at, seq) > (?, ?)"),
    )


GET_CHANGE = "SELECT seq, kind, changed_at, snapshot FROM asset_changes WHERE seq = ?"
# an asset's latest changes, newest first (by asset_changes_asset: only that asset's rows sorted)
LATEST_CHANGES = (
    "SELECT seq, kind, changed_at, snapshot FROM asset_changes WHERE asset_id = ? "
    "ORDER BY changed_at DESC, seq DESC LIMIT ?"
)


# --- task runs ------------------------------------------------------------------------------

INSERT_EXECUTION = (
    "INSERT INTO executions (flow_namespace, flow_id, execution_id, started_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
TASK_RUN_COLUMNS = (
    "t.pk, t.flow_namespace, t.flow_id, t.task_id, t.execution_id, t.task_run_id, t.state, t.started_at, "
    "t.ended_at, t.job, t.warnings, t.error, e.started_at"
)
_TASK_RUN_FROM = (
    "FROM task_runs t JOIN executions e ON e.flow_namespace = t.flow_namespace AND e.flow_id = t.flow_id "
    "AND e.execution_id = t.execution_id"
)
# read to be written: locked (writers side by side must not both end one run)
FIND_TASK_RUN = (
    "SELECT pk, task_id, state, record_hash, started_at, warnings FROM task_runs "
    "WHERE flow_namespace = ? AND flow_id = ? AND execution_id = ? AND task_run_id = ?" + LOCK
)
INSERT_TASK_RUN = """
    INSERT INTO task_runs (flow_namespace, flow_id, task_id, execution_id, task_run_id, state, started_at,
                           ended_at, job, warnings, error, record_hash)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk
"""
UPDATE_TASK_RUN = """
    UPDATE task_runs SET state = ?, started_at = ?, ended_at = ?, job = ?, warnings = ?, error = ?, record_hash = ?
    WHERE pk = ?
"""
DELETE_USAGES_OF_RUN = "DELETE FROM usages WHERE task_run_pk = ?"
DELETE_UNWRITTEN_OF_RUN = "DELETE FROM unwritten_outputs WHERE task_run_pk = ?"
INSERT_UNWRITTEN = "INSERT INTO unwritten_outputs (task_run_pk, asset_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
DELETE_LINEAGE_OF_RUN = "DELETE FROM lineage WHERE task_run_pk = ?"
INSERT_USAGE = (
    "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
INSERT_LINEAGE = "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
COUNT_TASK_RUNS = "SELECT count(*) FROM task_runs"


# the runs that read or wrote an asset, or were to write it and did not (their events name it as
# an output): the asset given once, its uses of either kind found through an index
_RUNS_NAMING_ASSET = """t.pk IN (
    WITH named(id) AS (SELECT CAST(? AS TEXT))
    SELECT u.task_run_pk FROM usages u JOIN named ON u.asset_id = named.id
    UNION ALL SELECT o.task_run_pk FROM unwritten_outputs o JOIN named ON o.asset_id = named.id)"""


def _task_run_filters(
    *, since: bool, until: bool, namespace: bool, flow: bool, asset: bool = False, after_pk: bool = False
) -> str:
    return where(
        (since, "t.started_at >= ?"),
        (until, "t.started_at < ?"),
        (namespace, "t.flow_namespace = ?"),
        (flow, "t.flow_id = ?"),
        (asset, _RUNS_NAMING_ASSET),
        (after_pk, "(t.started_at, t.pk) > (?, ?)"),
    )


def select_task_runs(
    *,
    since: bool = False,
    until: bool = False,
    namespace: bool = False,
    flow: bool = False,
    asset: bool = False,
    after_pk: bool = False,
) -> str:
    """Task runs in start order (placeholders: since, until, namespace, flow, asset, then the
    (started_at, pk) to page after)."""
    clause = _task_run_filters(since=since, until=until, namespace=namespace, flow=flow, asset=asset, after_pk=after_pk)
    return f"SELECT {TASK_RUN_COLUMNS} {_TASK_RUN_FROM}{clause} ORDER BY t.started_at, t.pk LIMIT ?"


def count_task_runs(
    *, since: bool = False, until: bool = False, namespace: bool = False, flow: bool = False, asset: bool = False
) -> str:
    """How many task runs the filters select, and how many of them have ended."""
    clause = _task_run_filters(since=since, until=until, namespace=namespace, flow=flow, asset=asset)
    return f"SELECT count(*), count(t.ended_at) FROM task_runs t{clause}"


def select_task_runs_by_pk(count: int) -> str:
    return f"SELECT {TASK_RUN_COLUMNS} {_TASK_RUN_FROM} WHERE t.pk IN ({', '.join('?' * count)})"


def select_usages_of_runs(count: int) -> str:
    return (
        "SELECT task_run_pk, asset_id, direction, position, statistics FROM usages "
        f"WHERE task_run_pk IN ({', '.join('?' * count)}) ORDER BY task_run_pk, direction, position"
    )


def select_unwritten_of_runs(count: int) -> str:
    """The outputs the runs of ``count`` keys were to write and did not."""
    return (
        "SELECT task_run_pk, asset_id FROM unwritten_outputs "
        f"WHERE task_run_pk IN ({', '.join('?' * count)}) ORDER BY task_run_pk, asset_id"
    )


USAGES_OF_ASSET = f"""
    SELECT u.direction, u.used_at, {TASK_RUN_COLUMNS}
    {_TASK_RUN_FROM} JOIN usages u ON u.task_run_pk = t.pk
    WHERE u.asset_id = ? ORDER BY u.used_at, t.pk
"""
# an asset's latest uses in one direction, newest first: the first rows of usages_asset read
# backwards (however many uses the asset has)
LATEST_USAGES_OF_ASSET = f"""
    SELECT u.direction, u.used_at, {TASK_RUN_COLUMNS}
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk
    JOIN executions e ON e.flow_namespace = t.flow_namespace AND e.flow_id = t.flow_id
                     AND e.execution_id = t.execution_id
    WHERE u.asset_id = ? AND u.direction = ? ORDER BY u.used_at DESC, u.task_run_pk DESC LIMIT ?
"""
# how many uses an asset has in each direction (counted in usages_asset)
COUNT_USAGES_OF_ASSET = "SELECT direction, count(*) FROM usages WHERE asset_id = ? GROUP BY direction"

# --- column lineage -------------------------------------------------------------------------

DELETE_COLUMN_LINEAGE_OF_RUN = "DELETE FROM column_lineage WHERE task_run_pk = ?"
INSERT_COLUMN_EDGE = """
    INSERT INTO column_lineage (downstream_id, downstream_column, upstream_id, upstream_column,
                                transformations, task_run_pk, source)
    VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""


COLUMN_EDGES_OF_RUNS = (  # of the runs in {values} (in_chunks)
    "SELECT task_run_pk, downstream_id, downstream_column, upstream_id, upstream_column, transformations "
    "FROM column_lineage WHERE task_run_pk IN ({values}) "
    "ORDER BY task_run_pk, downstream_id, downstream_column, upstream_id, upstream_column, transformations"
)


# the field edges (not the whole-output ones) reached from a column, to a depth; each edge with
# the run or received event that made it
_COLUMN_WALK = """
    WITH RECURSIVE walk (upstream_id, upstream_column, downstream_id, downstream_column, depth) AS (
        SELECT upstream_id, upstream_column, downstream_id, downstream_column, 1 FROM column_lineage
        WHERE {start} AND downstream_column <> ''
        UNION
        SELECT c.upstream_id, c.upstream_column, c.downstream_id, c.downstream_column, w.depth + 1
        FROM column_lineage c JOIN walk w ON {step}
        WHERE w.depth < ? AND c.downstream_column <> ''
    )
    SELECT w.upstream_id, w.upstream_column, w.downstream_id, w.downstream_column, min(w.depth)
    FROM walk w GROUP BY w.upstream_id, w.upstream_column, w.downstream_id, w.downstream_column
    ORDER BY min(w.depth), w.upstream_id, w.upstream_column, w.downstream_id, w.downstream_column
"""
COLUMNS_UPSTREAM = _COLUMN_WALK.format(
    start="downstream_id = ? AND downstream_column = ?",
    step="c.downstream_id = w.upstream_id AND c.downstream_column = w.upstream_column",
)
COLUMNS_DOWNSTREAM = _COLUMN_WALK.format(
    start="upstream_id = ? AND upstream_column = ?",
    step="c.upstream_id = w.downstream_id AND c.upstream_column = w.downstream_column",
)
COLUMN_EDGE_RUNS = """
    SELECT c.transformations, t.flow_namespace || '/' || t.flow_id || '.' || t.task_id
    FROM column_lineage c JOIN task_runs t ON t.pk = c.task_run_pk
    WHERE c.upstream_id = ? AND c.upstream_column = ? AND c.downstream_id = ? AND c.downstream_column = ?
    UNION
    SELECT c.transformations, coalesce(s.job_namespace || '/' || s.job_name, c.source) || ' (external)'
    FROM column_lineage c LEFT JOIN external_sources s ON s.source = c.source
    WHERE c.upstream_id = ? AND c.upstream_column = ? AND c.downstream_id = ? AND c.downstream_column = ?
      AND c.source IS NOT NULL
    ORDER BY 2, 1
"""
# the inputs that shape an asset's whole output (join keys, filters: downstream_column ''), which
# `lineage --column` does not walk and says so
WHOLE_OUTPUT_INPUTS = """
    SELECT count(*) FROM (
        SELECT DISTINCT upstream_id, upstream_column FROM column_lineage
        WHERE downstream_id = ? AND downstream_column = ''
    ) inputs
"""
COLUMN_IS_NAMED = """
    SELECT 1 FROM column_lineage WHERE (downstream_id = ? AND downstream_column = ?)
                                    OR (upstream_id = ? AND upstream_column = ?) LIMIT 1
"""

# --- lineage --------------------------------------------------------------------------------

# the edges reached from an asset, to a depth, each at the least depth it is reached at: upstream
# (from the asset, each edge's upstream end the next step) or downstream (the other way). Each
# step reads olbridge's lineage and the receiver's through their indexes, a recursive SELECT each
# (SQLite 3.34 and later): joined to the view of both, SQLite made the whole view a table and
# indexed it at every walk, a cost that grew with the lineage (17 ms a walk at 20,000 edges, about
# a second at a million: the health watch walks each asset whose health turned FAIL or WARN).
# PostgreSQL takes one recursive reference a step: it walks the view (:data:`WALKS_BY_VIEW`),
# whose branches it reads through their indexes.
_WALK_EACH_TABLE = """
    WITH RECURSIVE walk (upstream_id, downstream_id, depth) AS (
        SELECT upstream_id, downstream_id, 1 FROM all_lineage WHERE {start} = ?1
        UNION
        SELECT l.upstream_id, l.downstream_id, w.depth + 1
        FROM walk w JOIN lineage l ON l.{start} = w.{further}
        WHERE w.depth < ?2
        UNION
        SELECT e.upstream_id, e.downstream_id, w.depth + 1
        FROM walk w JOIN external_lineage e ON e.{start} = w.{further}
        WHERE w.depth < ?2
    )
    SELECT upstream_id, downstream_id, min(depth) FROM walk GROUP BY upstream_id, downstream_id
    ORDER BY min(depth), upstream_id, downstream_id
"""
_WALK = """
    WITH RECURSIVE walk (upstream_id, downstream_id, depth) AS (
        SELECT upstream_id, downstream_id, 1 FROM all_lineage WHERE {start} = ?
        UNION
        SELECT l.upstream_id, l.downstream_id, w.depth + 1
        FROM all_lineage l JOIN walk w ON l.{start} = w.{further}
        WHERE w.depth < ?
    )
    SELECT upstream_id, downstream_id, min(depth) FROM walk GROUP BY upstream_id, downstream_id
    ORDER BY min(depth), upstream_id, downstream_id
"""
_UPSTREAM = {"start": "downstream_id", "further": "upstream_id"}
_DOWNSTREAM = {"start": "upstream_id", "further": "downstream_id"}
if sqlite3.sqlite_version_info >= (3, 34):
    UPSTREAM, DOWNSTREAM = _WALK_EACH_TABLE.format(**_UPSTREAM), _WALK_EACH_TABLE.format(**_DOWNSTREAM)
else:  # one recursive SELECT a step: the view's
    UPSTREAM, DOWNSTREAM = _WALK.format(**_UPSTREAM), _WALK.format(**_DOWNSTREAM)
# how many assets are downstream of each of a few (to a depth, the walk's first parameter; their
# ids in {values}): one walk from all of them at once, each row carrying where it started (the
# health watch's count of the assets at risk below each asset turning FAIL or WARN: the walk goes
# through deleted assets, as health's does, but counts only those there are, and not the asset it
# started from, reached again through a cycle). It walks the edges health's at-risk walk does:
# olbridge's, the receiver's, and those retention kept of the runs it deleted (kept_edges)
_DOWNSTREAM_COUNTS = """
    WITH RECURSIVE walk (origin, node, depth, most) AS (
        SELECT upstream_id, downstream_id, 1, CAST(? AS INTEGER) FROM (
            SELECT upstream_id, downstream_id FROM all_lineage
            UNION ALL
            SELECT upstream_id, downstream_id FROM kept_edges
        ) e WHERE upstream_id IN ({{values}})
        UNION
        {steps}
    )
    SELECT origin, count(DISTINCT node) FROM walk
    WHERE node <> origin AND EXISTS (SELECT 1 FROM assets a WHERE a.id = walk.node AND a.deleted_at IS NULL)
    GROUP BY origin
"""
_COUNT_STEP = """SELECT w.origin, l.downstream_id, w.depth + 1, w.most
        FROM walk w JOIN {table} l ON l.upstream_id = w.node WHERE w.depth < w.most"""
# PostgreSQL's, a fragment of its cursor's: one recursive reference a step, to the edges of the
# three tables (their branches read through their indexes)
COUNT_STEP_BY_VIEW = _COUNT_STEP.format(
    table="""(
            SELECT upstream_id, downstream_id FROM all_lineage
            UNION ALL
            SELECT upstream_id, downstream_id FROM kept_edges
        )"""
)
COUNT_STEPS = (
    "\n        UNION\n        ".join(_COUNT_STEP.format(table=t) for t in ("lineage", "external_lineage", "kept_edges"))
    if sqlite3.sqlite_version_info >= (3, 34)
    else COUNT_STEP_BY_VIEW
)
DOWNSTREAM_COUNTS = _DOWNSTREAM_COUNTS.format(steps=COUNT_STEPS)
WALKS_BY_VIEW = {UPSTREAM: _WALK.format(**_UPSTREAM), DOWNSTREAM: _WALK.format(**_DOWNSTREAM)}


# lineage --as-of: the edges runs that had ended by a time made (the run that made each)
OWN_EDGES_ENDED_BY = """
    SELECT l.upstream_id, l.downstream_id, t.flow_namespace || '/' || t.flow_id || '.' || t.task_id
    FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ?
"""
# ... and the external runs that had ended by then, and the jobs JobEvents had declared
# ... and the received edges of runs retention deleted, kept since before then, of one job alone
# (of several, which one gave it first is not kept: lineage_steps._KEPT_SINCE)
KEPT_RECEIVED_EDGES_BY = """
    SELECT k.upstream_id, k.downstream_id, min(e.job_namespace), min(e.job_name) FROM kept_edges k
    JOIN external_lineage e ON e.upstream_id = k.upstream_id AND e.downstream_id = k.downstream_id
    WHERE k.since <= ?
    GROUP BY k.upstream_id, k.downstream_id HAVING count(*) = 1
"""
EXTERNAL_SOURCES_KNOWN_BY = """
    SELECT job_namespace, job_name, inputs, outputs FROM external_sources
    WHERE (run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?) OR (run_id IS NULL AND first_seen <= ?)
"""
EDGE_TASKS = """
    SELECT DISTINCT t.flow_namespace || '/' || t.flow_id || '.' || t.task_id
    FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE l.upstream_id = ? AND l.downstream_id = ?
    UNION
    SELECT DISTINCT e.job_namespace || '/' || e.job_name || ' (external)'
    FROM external_lineage e
    WHERE e.upstream_id = ? AND e.downstream_id = ?
    ORDER BY 1
"""


# --- declared jobs (a flow's static lineage) ------------------------------------------------

DECLARED_JOB_COLUMNS = "pk, flow_namespace, flow_id, task_id, declaration, declared_at"
DECLARED_JOBS_OF_FLOW = (  # read to be replaced: locked, so that two declares of a flow take turns
    "SELECT pk, task_id, declaration_hash FROM declared_jobs WHERE flow_namespace = ? AND flow_id = ? ORDER BY pk"
    + LOCK
)
INSERT_DECLARED_JOB = """
    INSERT INTO declared_jobs (flow_namespace, flow_id, task_id, declaration, declaration_hash, declared_at)
    VALUES (?, ?, ?, ?, ?, ?) RETURNING pk
"""
UPDATE_DECLARED_JOB = "UPDATE declared_jobs SET declaration = ?, declaration_hash = ?, declared_at = ? WHERE pk = ?"
DELETE_DECLARED_JOB = "DELETE FROM declared_jobs WHERE pk = ?"
GET_DECLARED_JOB = f"SELECT {DECLARED_JOB_COLUMNS} FROM declared_jobs WHERE pk = ?"
COUNT_DECLARED_JOBS = "SELECT count(*) FROM declared_jobs"


def select_declared_jobs(
    *, since: bool = False, until: bool = False, namespace: bool = False, flow: bool = False, after: bool = False
) -> str:
    """Declared jobs in the order they were first declared, by key (placeholders: since, until,
    namespace, flow, after). A job declared again keeps its key, so a reader that resumes after
    a key misses none and reads none twice."""
    clause = _declared_job_filters(since=since, until=until, namespace=namespace, flow=flow, after=after)
    return f"SELECT {DECLARED_JOB_COLUMNS} FROM declared_jobs{clause} ORDER BY pk"


def count_declared_jobs(
    *, since: bool = False, until: bool = False, namespace: bool = False, flow: bool = False
) -> str:
    """How many declared jobs the filters select (placeholders as :func:`select_declared_jobs`')."""
    clause = _declared_job_filters(since=since, until=until, namespace=namespace, flow=flow)
    return f"SELECT count(*) FROM declared_jobs{clause}"


def _declared_job_filters(
    *, since: bool = False, until: bool = False, namespace: bool = False, flow: bool = False, after: bool = False
) -> str:
    return where(
        (since, "declared_at >= ?"),
        (until, "declared_at < ?"),
        (namespace, "flow_namespace = ?"),
        (flow, "flow_id = ?"),
        (after, "pk > ?"),
    )
