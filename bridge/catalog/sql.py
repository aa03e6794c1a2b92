"""Every SQL statement of the catalog, for both engines.

Written once, in SQLite's dialect with ``?`` placeholders, and run as they are on SQLite; the
PostgreSQL engine translates each once (:mod:`bridge.catalog.postgres`: placeholders, the
:data:`LOCK` comment, the few fragments that differ). Portable where it costs nothing: ``ON
CONFLICT DO NOTHING`` rather than ``INSERT OR IGNORE``, ``RETURNING`` rather than the last rowid,
typed ``CAST(? AS ...)`` where a placeholder alone has no type. The schema is in
:mod:`bridge.catalog.schema`, its migrations in ``migrations/versions``.
"""

from __future__ import annotations

# The schema's version, the number of the newest migration (migrations/versions), the same on
# both engines; a catalog with a higher one is refused.
SCHEMA_VERSION = 14

# the keys that count up, by table: a copy that writes them as they were sets each engine's
# counter past the highest (Catalog.reset_keys)
COUNTED_KEYS = {
    "asset_changes": "seq",
    "declared_jobs": "pk",
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
# an engine whose writers run side by side (PostgreSQL) locks the rows a write transaction reads to
# write them: this comment becomes its FOR UPDATE (SQLite's write lock is the whole database)
LOCK = " /*FOR UPDATE*/"
# the same, for a reader that passes over the rows another transaction holds (a stream worker
# claiming outbox rows beside others): FOR UPDATE SKIP LOCKED where rows are locked, nothing on SQLite
SKIP_LOCKED = " /*FOR UPDATE SKIP LOCKED*/"
# the other fragments of SQLite's that PostgreSQL says its own way (bridge/catalog/postgres/cursor.py)
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"  # the database's clock, as olbridge writes times
CHANGE_NAMESPACE = "json_extract(snapshot, '$.namespace')"  # an asset change's namespace
RETRY_INDEX = " INDEXED BY outbox_retrying"  # SQLite's planner needs telling
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
) -> str:
    """A SELECT over assets with the given filters (placeholders in this order: ids, types,
    namespace, updated_before). A namespace filter never matches a Global asset (NULL)."""
    where = []
    if ids:
        where.append(f"id IN ({', '.join('?' * ids)})")
    if types:
        where.append(f"type IN ({', '.join('?' * types)})")
    if namespace:
        where.append("namespace = ?")
    if updated_before:
        where.append("updated_at < ?")
    if not include_deleted:
        where.append("deleted_at IS NULL")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {ASSET_COLUMNS} FROM assets{clause} ORDER BY id"


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
    where = []
    if since:
        where.append("changed_at >= ?")
    if until:
        where.append("changed_at < ?")
    if namespace:
        where.append(f"{CHANGE_NAMESPACE} = ?")
    if asset:
        where.append("asset_id = ?")
    if after:
        where.append("(changed_at, seq) > (?, ?)")
    return f" WHERE {' AND '.join(where)}" if where else ""


GET_CHANGE = "SELECT seq, kind, changed_at, snapshot FROM asset_changes WHERE seq = ?"


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
    "SELECT pk, task_id, state, record_hash FROM task_runs "
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
DELETE_LINEAGE_OF_RUN = "DELETE FROM lineage WHERE task_run_pk = ?"
INSERT_USAGE = (
    "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
INSERT_LINEAGE = "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
COUNT_TASK_RUNS = "SELECT count(*) FROM task_runs"


def _task_run_filters(
    *, since: bool, until: bool, namespace: bool, flow: bool, asset: bool = False, after_pk: bool = False
) -> str:
    where = []
    if since:
        where.append("t.started_at >= ?")
    if until:
        where.append("t.started_at < ?")
    if namespace:
        where.append("t.flow_namespace = ?")
    if flow:
        where.append("t.flow_id = ?")
    if asset:
        where.append("t.pk IN (SELECT task_run_pk FROM usages WHERE asset_id = ?)")
    if after_pk:
        where.append("(t.started_at, t.pk) > (?, ?)")
    return f" WHERE {' AND '.join(where)}" if where else ""


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


USAGES_OF_ASSET = f"""
    SELECT u.direction, u.used_at, {TASK_RUN_COLUMNS}
    {_TASK_RUN_FROM} JOIN usages u ON u.task_run_pk = t.pk
    WHERE u.asset_id = ? ORDER BY u.used_at, t.pk
"""

# --- column lineage -------------------------------------------------------------------------

DELETE_COLUMN_LINEAGE_OF_RUN = "DELETE FROM column_lineage WHERE task_run_pk = ?"
INSERT_COLUMN_EDGE = """
    INSERT INTO column_lineage (downstream_id, downstream_column, upstream_id, upstream_column,
                                transformations, task_run_pk, source)
    VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""


def select_column_edges_of_runs(count: int) -> str:
    return (
        "SELECT task_run_pk, downstream_id, downstream_column, upstream_id, upstream_column, transformations "
        f"FROM column_lineage WHERE task_run_pk IN ({', '.join('?' * count)}) "
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

UPSTREAM = """
    WITH RECURSIVE walk (upstream_id, downstream_id, depth) AS (
        SELECT upstream_id, downstream_id, 1 FROM all_lineage WHERE downstream_id = ?
        UNION
        SELECT l.upstream_id, l.downstream_id, w.depth + 1
        FROM all_lineage l JOIN walk w ON l.downstream_id = w.upstream_id
        WHERE w.depth < ?
    )
    SELECT upstream_id, downstream_id, min(depth) FROM walk GROUP BY upstream_id, downstream_id
    ORDER BY min(depth), upstream_id, downstream_id
"""
DOWNSTREAM = """
    WITH RECURSIVE walk (upstream_id, downstream_id, depth) AS (
        SELECT upstream_id, downstream_id, 1 FROM all_lineage WHERE upstream_id = ?
        UNION
        SELECT l.upstream_id, l.downstream_id, w.depth + 1
        FROM all_lineage l JOIN walk w ON l.upstream_id = w.downstream_id
        WHERE w.depth < ?
    )
    SELECT upstream_id, downstream_id, min(depth) FROM walk GROUP BY upstream_id, downstream_id
    ORDER BY min(depth), upstream_id, downstream_id
"""
# lineage --as-of: the edges runs that had ended by a time made (the run that made each)
OWN_EDGES_ENDED_BY = """
    SELECT l.upstream_id, l.downstream_id, t.flow_namespace || '/' || t.flow_id || '.' || t.task_id
    FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ?
"""
# ... and the external runs that had ended by then, and the jobs JobEvents had declared
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


# --- external lineage (the receiver) ----------------------------------------------------------

INSERT_RECEIVED = """
    INSERT INTO received_events (digest, kind, event_type, event_time, source, producer, warnings, body, token)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
# serve --forward: the received event's text as it came, queued beside it (run_key, queued_at,
# payload, then the event's time and digest)
QUEUE_FORWARD = """
    INSERT INTO outbox (kind, ref, run_key, queued_at, payload)
    SELECT 'forward', pk, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT) FROM received_events
    WHERE event_time = ? AND digest = ?
"""
BINDING_OF_ASSET = "SELECT ol_namespace, ol_name FROM external_datasets WHERE asset_id = ?"
INSERT_BINDING = """
    INSERT INTO external_datasets (ol_namespace, ol_name, asset_id, first_seen, last_seen, seen_rank, facets_rank,
                                   facets_digest, all_facets_rank, all_facets_digest)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
UPDATE_BINDING = """
    UPDATE external_datasets SET first_seen = ?, last_seen = ?, seen_rank = ?, facets_rank = ?, facets_digest = ?,
                                 all_facets_rank = ?, all_facets_digest = ?
    WHERE ol_namespace = ? AND ol_name = ?
"""
# a placeholder whose facets did not change: only its sightings (and producer) move, in place;
# SQLite's alone (json_set): with writers side by side the receiver patches the row it read and
# locked (external._touched)
TOUCH_PLACEHOLDER = """
    UPDATE assets SET
        created_at = min(created_at, ?),
        updated_at = ?,
        metadata = json_set(metadata, '$.firstSeen', ?, '$.lastSeen', ?,
                            '$.producer', coalesce(?, json_extract(metadata, '$.producer')))
    WHERE id = ? AND origin = 'external'
"""
# the same, where writers run side by side: the row was read and locked, and the move worked out
# from it (external._touched)
MOVE_PLACEHOLDER = "UPDATE assets SET metadata = ?, created_at = ?, updated_at = ? WHERE id = ?"
UPSERT_SOURCE = """
    INSERT INTO external_sources AS s (source, job_namespace, job_name, run_id, parent_run_id, state, state_rank,
                                       started_at, ended_at, first_seen, last_seen, producer, inputs, outputs,
                                       job_rank, jobs, warnings)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (source) DO UPDATE SET
        parent_run_id = coalesce(s.parent_run_id, excluded.parent_run_id),
        state = CASE WHEN excluded.state_rank > s.state_rank THEN excluded.state ELSE s.state END,
        ended_at = CASE WHEN excluded.state_rank > s.state_rank THEN excluded.ended_at ELSE s.ended_at END,
        producer = CASE WHEN excluded.state_rank > s.state_rank THEN excluded.producer ELSE s.producer END,
        state_rank = max(s.state_rank, excluded.state_rank),
        started_at = min(coalesce(s.started_at, excluded.started_at), coalesce(excluded.started_at, s.started_at)),
        first_seen = min(s.first_seen, excluded.first_seen),
        last_seen = max(s.last_seen, excluded.last_seen),
        inputs = excluded.inputs,
        outputs = excluded.outputs,
        job_namespace = excluded.job_namespace,
        job_name = excluded.job_name,
        job_rank = excluded.job_rank,
        jobs = excluded.jobs,
        warnings = excluded.warnings
"""
# a dataset's facet rows, as the receiver's merge of them left them (facet_rank NULL: current)
FACET_ROWS_OF = "SELECT facet_key, facet_rank, facet FROM external_facets WHERE owner = ?"
PUT_FACET = """
    INSERT INTO external_facets (owner, facet_key, facet_rank, facet) VALUES (?, ?, ?, ?)
    ON CONFLICT (owner, facet_key) DO UPDATE SET facet_rank = excluded.facet_rank, facet = excluded.facet
"""
# the latest of each facet of a run or job: a facet of a lower-ranked event leaves the stored one alone
UPSERT_FACET = """
    INSERT INTO external_facets AS f (owner, facet_key, facet_rank, facet) VALUES (?, ?, ?, ?)
    ON CONFLICT (owner, facet_key) DO UPDATE SET facet_rank = excluded.facet_rank, facet = excluded.facet
    WHERE excluded.facet_rank > f.facet_rank
"""
UPSERT_IDENTIFIER = """
    INSERT INTO external_identifiers AS i (namespace, name, asset_id, type, id_rank) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (namespace, name, asset_id) DO UPDATE SET type = excluded.type, id_rank = excluded.id_rank
    WHERE excluded.id_rank > i.id_rank
"""
IDENTIFIERS_OF_ASSET = (
    "SELECT namespace, name, type FROM external_identifiers WHERE asset_id = ? ORDER BY namespace, name"
)
# the assets a dataset name stands for: its binding (olNamespace / olName) or a symlink identifier
ASSETS_NAMED = """
    SELECT asset_id FROM external_datasets WHERE ol_namespace = ? AND ol_name = ?
    UNION
    SELECT asset_id FROM external_identifiers WHERE namespace = ? AND name = ?
"""
EXTERNAL_RUN_COLUMNS = (
    "source, job_namespace, job_name, run_id, parent_run_id, state, started_at, ended_at, first_seen, last_seen, "
    "producer, inputs, outputs, jobs, warnings"
)


def select_external_runs(
    *,
    source: bool = False,
    job: bool = False,
    namespace: bool = False,
    state: bool = False,
    since: bool = False,
    until: bool = False,
) -> str:
    """External runs (not JobEvents' jobs) by start, the first event's time when no START came
    (placeholders: source, job name, job namespace, state, since, until)."""
    clause = where(
        (True, "run_id IS NOT NULL"),
        (source, "source = ?"),
        (job, "job_name = ?"),
        (namespace, "job_namespace = ?"),
        (state, "state = ?"),
        (since, "coalesce(started_at, first_seen) >= ?"),
        (until, "coalesce(started_at, first_seen) < ?"),
    )
    return (
        f"SELECT {EXTERNAL_RUN_COLUMNS} FROM external_sources{clause} ORDER BY coalesce(started_at, first_seen), source"
    )


def facets_of(count: int) -> str:
    """The kept facets of ``count`` owners ('run:<runId>', 'job:<namespace>/<name>', 'asset:<id>')."""
    return (
        f"SELECT owner, facet_key, facet FROM external_facets WHERE owner IN ({', '.join('?' * count)}) "
        "ORDER BY owner, facet_key"
    )


# a run or job new to the group's transaction, inserted before the merge: no row changed when
# another process inserted it first
CLAIM_SOURCE = """
    INSERT INTO external_sources (source, job_namespace, job_name, run_id, parent_run_id, state, state_rank,
                                  started_at, ended_at, first_seen, last_seen, producer, inputs, outputs,
                                  job_rank, jobs, warnings)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT DO NOTHING
"""
INSERT_EXTERNAL_USAGE = """
    INSERT INTO external_usages (job_namespace, job_name, direction, asset_id) VALUES (?, ?, ?, ?)
    ON CONFLICT DO NOTHING
"""
INSERT_EXTERNAL_EDGE = """
    INSERT INTO external_lineage (upstream_id, downstream_id, job_namespace, job_name) VALUES (?, ?, ?, ?)
    ON CONFLICT DO NOTHING
"""
SELECT_SOURCES = """
    SELECT source, job_namespace, job_name, run_id, parent_run_id, state, started_at, ended_at,
           first_seen, last_seen, producer, inputs, outputs
    FROM external_sources ORDER BY first_seen, source
"""
EXTERNAL_USAGES_OF_ASSET = """
    SELECT direction, job_namespace, job_name FROM external_usages
    WHERE asset_id = ? ORDER BY job_namespace, job_name, direction
"""
COUNT_TABLE = {
    name: f"SELECT count(*) FROM {name}"
    for name in ("received_events", "external_datasets", "external_sources", "external_usages", "external_lineage")
}


def received_digests(count: int) -> str:
    """Which of ``count`` (event time, digest) pairs were received already: point lookups."""
    pairs = " OR ".join("(event_time = ? AND digest = ?)" for _ in range(count))
    return f"SELECT digest FROM received_events WHERE {pairs}"


def bindings_of(count: int) -> str:
    # OR of point lookups: SQLite answers each from the primary key (a row-value IN over VALUES
    # would scan the table)
    pairs = " OR ".join("(ol_namespace = ? AND ol_name = ?)" for _ in range(count))
    return f"""
        SELECT ol_namespace, ol_name, asset_id, first_seen, last_seen, seen_rank, facets_rank, facets_digest,
               all_facets_rank, all_facets_digest
        FROM external_datasets WHERE {pairs}
    """


def locked_bindings_of(count: int) -> str:
    """:func:`bindings_of`, the rows locked in key order (writers side by side)."""
    return bindings_of(count) + " ORDER BY ol_namespace, ol_name" + LOCK


def usages_of_jobs(count: int) -> str:
    """The inputs and outputs recorded of ``count`` jobs (pairs of namespace and name)."""
    pairs = " OR ".join("(job_namespace = ? AND job_name = ?)" for _ in range(count))
    return f"SELECT job_namespace, job_name, direction, asset_id FROM external_usages WHERE {pairs}"


def edges_from(count: int) -> str:
    """The external edges from ``count`` assets (the primary key's prefix)."""
    return (
        "SELECT upstream_id, downstream_id, job_namespace, job_name FROM external_lineage "
        f"WHERE upstream_id IN ({', '.join('?' * count)})"
    )


def sources_of(count: int) -> str:
    """The runs and jobs a group merges into: their inputs and outputs, job, jobs and warnings."""
    return f"""
        SELECT source, inputs, outputs, job_namespace, job_name, job_rank, jobs, warnings
        FROM external_sources WHERE source IN ({", ".join("?" * count)})
    """


def locked_sources_of(count: int) -> str:
    return sources_of(count) + " ORDER BY source" + LOCK


def locked_assets(count: int) -> str:
    return f"SELECT {ASSET_COLUMNS} FROM assets WHERE id IN ({', '.join('?' * count)}) ORDER BY id" + LOCK


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


# --- outbox ---------------------------------------------------------------------------------

QUEUE_EVENT = f"INSERT INTO outbox (kind, ref, run_key, queued_at) VALUES (?, ?, ?, {NOW})"
OUTBOX_COLUMNS = "seq, kind, ref, run_key, queued_at, state, attempts, next_attempt_at, last_status, last_error"
# the due pending rows that are first of their run key (an earlier row of the key, pending or
# dead, holds the later ones back), in seq order (a run key's commit order: a writer queueing an
# event of a run holds that run's row locked until it commits)
OUTBOX_HEADS = f"""
    SELECT {OUTBOX_COLUMNS} FROM outbox o
    WHERE o.state = 'pending' AND o.next_attempt_at <= ?
      AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.run_key = o.run_key AND p.seq < o.seq)
    ORDER BY o.seq LIMIT ?
"""
# rows tried before and pending are first of their run key (only those are ever tried)
OUTBOX_NEXT_RETRY = f"SELECT min(next_attempt_at) FROM outbox{RETRY_INDEX} WHERE state = 'pending' AND attempts > 0"
OUTBOX_DELETE = "DELETE FROM outbox WHERE seq = ?"
OUTBOX_RETRY_LATER = (
    "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ? WHERE seq = ?"
)
OUTBOX_DEAD = "UPDATE outbox SET state = 'dead', attempts = ?, last_status = ?, last_error = ? WHERE seq = ?"
OUTBOX_REQUEUE_ALL = "UPDATE outbox SET state = 'pending', next_attempt_at = 0 WHERE state = 'dead'"
OUTBOX_COUNT_DELIVERED = """
    INSERT INTO outbox_delivery AS d (id, delivered, last_success_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET delivered = d.delivered + excluded.delivered,
        last_success_at = excluded.last_success_at
"""
OUTBOX_DELIVERY = "SELECT delivered, last_success_at FROM outbox_delivery WHERE id = 1"
OUTBOX_COUNT = "SELECT count(*) FROM outbox WHERE state = ?"
OUTBOX_OLDEST = "SELECT queued_at FROM outbox WHERE state = 'pending' ORDER BY seq LIMIT 1"


# --- outbox claims: several stream workers share one outbox (PostgreSQL) ----------------------
#
# A worker claims due head rows (no earlier row of their run key left) that nobody holds, or whose
# claim expired, or that it holds itself (a round that failed before settling them: its heartbeat
# keeps them from expiring, and its rounds run one at a time), skipping rows another worker is
# claiming at that moment; it renews its claims
# with its heartbeat, and settles only rows it still holds. Claim times are the database's clock,
# so that the hosts' clocks do not matter. These statements are PostgreSQL's only (SKIP LOCKED);
# on SQLite one worker holds the whole outbox (outbox_lease) and reads OUTBOX_HEADS.

DB_EPOCH = "CAST(extract(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)"
OUTBOX_CLAIM_HEADS = f"""
    WITH due AS (
        SELECT o.seq FROM outbox o
        WHERE o.state = 'pending' AND o.next_attempt_at <= ?
          AND (o.claimed_by IS NULL OR o.claimed_by = ? OR o.claim_expires < {DB_EPOCH})
          AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.run_key = o.run_key AND p.seq < o.seq)
        ORDER BY o.seq LIMIT ?
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE outbox SET claimed_by = ?, claim_expires = {DB_EPOCH} + ?
    FROM due WHERE outbox.seq = due.seq
    RETURNING {", ".join("outbox." + c for c in OUTBOX_COLUMNS.split(", "))}
"""
# a worker's claims, renewed (all of them, or those of the seqs given, which it still holds)
OUTBOX_RENEW_CLAIMS = f"UPDATE outbox SET claim_expires = {DB_EPOCH} + ? WHERE claimed_by = ?"
OUTBOX_CONFIRM_CLAIMS = f"""
    UPDATE outbox SET claim_expires = {DB_EPOCH} + ? WHERE claimed_by = ? AND seq = ANY(?) RETURNING seq
"""
OUTBOX_RELEASE_CLAIMS = "UPDATE outbox SET claimed_by = NULL, claim_expires = NULL WHERE claimed_by = ?"
OUTBOX_CLAIMS = "SELECT claimed_by, count(*) FROM outbox WHERE claimed_by IS NOT NULL GROUP BY claimed_by"
# settling a claimed row: only while the worker still holds it (one that lost it to another after
# a stall records nothing over the new holder's outcome)
OUTBOX_DELETE_CLAIMED = "DELETE FROM outbox WHERE seq = ? AND claimed_by = ?"
OUTBOX_RETRY_LATER_CLAIMED = """
    UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ?, claimed_by = NULL,
        claim_expires = NULL
    WHERE seq = ? AND claimed_by = ?
"""
OUTBOX_DEAD_CLAIMED = """
    UPDATE outbox SET state = 'dead', attempts = ?, last_status = ?, last_error = ?, claimed_by = NULL,
        claim_expires = NULL
    WHERE seq = ? AND claimed_by = ?
"""


def select_outbox(*, state: bool = False, seqs: int = 0) -> str:
    where = []
    if state:
        where.append("state = ?")
    if seqs:
        where.append(f"seq IN ({', '.join('?' * seqs)})")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {OUTBOX_COLUMNS} FROM outbox{clause} ORDER BY seq LIMIT ?"


def outbox_payloads(count: int) -> str:
    return f"SELECT seq, payload FROM outbox WHERE seq IN ({', '.join('?' * count)})"


def requeue_outbox(count: int) -> str:
    return (
        f"UPDATE outbox SET state = 'pending', next_attempt_at = 0 WHERE state = 'dead' "
        f"AND seq IN ({', '.join('?' * count)})"
    )


def held_outbox(count: int) -> str:
    """The rows of ``count`` seqs that a stream worker's live claim holds (PostgreSQL), locked: a
    worker claiming at the same moment passes over them."""
    return (
        f"SELECT seq, claimed_by FROM outbox WHERE seq IN ({', '.join('?' * count)}) AND claimed_by IS NOT NULL "
        f"AND claim_expires >= {DB_EPOCH} ORDER BY seq FOR UPDATE"
    )


def delete_outbox(count: int) -> str:
    return f"DELETE FROM outbox WHERE seq IN ({', '.join('?' * count)})"


# --- positions and a backfill's refused events ----------------------------------------------

GET_POSITION = "SELECT kind, name, value, updated_at FROM positions WHERE kind = ? AND name = ?"
LIST_POSITIONS = "SELECT kind, name, value, updated_at FROM positions WHERE kind = ? ORDER BY name"
LIST_ALL_POSITIONS = "SELECT kind, name, value, updated_at FROM positions ORDER BY kind, name"
SAVE_POSITION = """
    INSERT INTO positions (kind, name, value, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
"""
REFUSED_COLUMNS = "item_time, item_order, ref, event, status, error, refused_at"
SELECT_REFUSED = (
    f"SELECT {REFUSED_COLUMNS} FROM backfill_refused WHERE checkpoint = ? ORDER BY item_time, item_order, ref LIMIT ?"
)
COUNT_REFUSED = "SELECT checkpoint, count(*) FROM backfill_refused GROUP BY checkpoint"
SAVE_REFUSED = """
    INSERT INTO backfill_refused (checkpoint, item_time, item_order, ref, event, status, error, refused_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (checkpoint, item_order, ref) DO UPDATE SET item_time = excluded.item_time, event = excluded.event,
        status = excluded.status, error = excluded.error, refused_at = excluded.refused_at
"""
DELETE_REFUSED = "DELETE FROM backfill_refused WHERE checkpoint = ? AND item_order = ? AND ref = ?"
CLEAR_REFUSED = "DELETE FROM backfill_refused WHERE checkpoint = ?"

# --- delivery errors ------------------------------------------------------------------------

SAVE_DELIVERY_ERROR = """
    INSERT INTO delivery_errors (source, target, failure, status, detail, at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (source) DO UPDATE SET target = excluded.target, failure = excluded.failure,
        status = excluded.status, detail = excluded.detail, at = excluded.at
"""
SELECT_DELIVERY_ERRORS = "SELECT source, target, failure, status, detail, at FROM delivery_errors ORDER BY at DESC"

# --- stream workers and the outbox's lease ----------------------------------------------------

WORKER_COLUMNS = "w.id, w.host, w.pid, w.target, w.started_at, w.heartbeat_at"
REGISTER_WORKER = """
    INSERT INTO stream_workers (id, host, pid, target, started_at, heartbeat_at, space) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
"""
DELETE_WORKER = "DELETE FROM stream_workers WHERE id = ?"
DELETE_STALE_WORKERS = "DELETE FROM stream_workers WHERE heartbeat_at < ? AND id <> ?"
SELECT_WORKERS = f"""
    SELECT {WORKER_COLUMNS}, l.acquired_at, coalesce(c.claims, 0), w.space FROM stream_workers w
    LEFT JOIN outbox_lease l ON l.worker = w.id
    LEFT JOIN (SELECT claimed_by, count(*) AS claims FROM outbox WHERE claimed_by IS NOT NULL GROUP BY claimed_by) c
        ON c.claimed_by = w.id
    ORDER BY w.started_at, w.id
"""
# what reaping needs of the workers, at every heartbeat: no join, no count of claims
WORKER_PROCESSES = "SELECT id, space, pid FROM stream_workers"
SELECT_LEASE = f"""
    SELECT l.worker, l.acquired_at, {WORKER_COLUMNS}, w.space FROM outbox_lease l
    LEFT JOIN stream_workers w ON w.id = l.worker WHERE l.id = 1
"""
# from the holder given (the third value), or from nobody: one row changed when taken
TAKE_LEASE = """
    INSERT INTO outbox_lease (id, worker, acquired_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET worker = excluded.worker, acquired_at = excluded.acquired_at
    WHERE outbox_lease.worker = ?
"""
RELEASE_LEASE = "DELETE FROM outbox_lease WHERE id = 1 AND worker = ?"
LEASE_HOLDER = "SELECT worker FROM outbox_lease WHERE id = 1"
