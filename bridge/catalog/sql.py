"""Every SQL statement of the catalog, and its schema as ordered migrations.

The schema version is SQLite's ``PRAGMA user_version``: migration N brings a catalog from version
N-1 to N. Migrations are never edited once released; a change is a new migration at the end.
"""

from __future__ import annotations

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE assets (
            id            TEXT PRIMARY KEY,
            type          TEXT NOT NULL,
            namespace     TEXT,                       -- NULL: a Global asset
            display_name  TEXT,
            description   TEXT,
            metadata      TEXT NOT NULL DEFAULT '{}', -- a flat JSON object
            origin        TEXT NOT NULL CHECK (origin IN ('declared', 'auto', 'external')),
            created_at    TEXT NOT NULL,
            updated_at    TEXT NOT NULL,
            deleted_at    TEXT,
            columns       TEXT,                       -- JSON list of {name, type, description}
            assertions    TEXT                        -- JSON list of data-quality assertions
        );
        CREATE INDEX assets_type ON assets (type);
        CREATE INDEX assets_namespace ON assets (namespace);

        CREATE TABLE executions (
            flow_namespace TEXT NOT NULL,
            flow_id        TEXT NOT NULL,
            execution_id   TEXT NOT NULL,
            started_at     TEXT NOT NULL,             -- the first task run's start, never changed
            PRIMARY KEY (flow_namespace, flow_id, execution_id)
        );

        CREATE TABLE task_runs (
            pk               INTEGER PRIMARY KEY,
            flow_namespace   TEXT NOT NULL,
            flow_id          TEXT NOT NULL,
            task_id          TEXT NOT NULL,
            execution_id     TEXT NOT NULL,
            task_run_id      TEXT NOT NULL,
            state            TEXT NOT NULL,
            started_at       TEXT NOT NULL,
            ended_at         TEXT,
            job              TEXT NOT NULL,           -- JSON: integration, job type, sql, description
            warnings         TEXT NOT NULL DEFAULT '[]',
            error            TEXT,
            record_hash      TEXT NOT NULL,
            UNIQUE (flow_namespace, flow_id, execution_id, task_run_id)
        );
        CREATE INDEX task_runs_started ON task_runs (started_at, pk);

        CREATE TABLE usages (
            task_run_pk INTEGER NOT NULL REFERENCES task_runs (pk),
            direction   TEXT NOT NULL CHECK (direction IN ('input', 'output')),
            position    INTEGER NOT NULL,
            asset_id    TEXT NOT NULL,
            used_at     TEXT NOT NULL,
            statistics  TEXT,
            PRIMARY KEY (task_run_pk, direction, asset_id)
        );
        CREATE INDEX usages_asset ON usages (asset_id);

        CREATE TABLE lineage (
            upstream_id   TEXT NOT NULL,
            downstream_id TEXT NOT NULL,
            task_run_pk   INTEGER NOT NULL REFERENCES task_runs (pk),
            PRIMARY KEY (upstream_id, downstream_id, task_run_pk)
        );
        CREATE INDEX lineage_downstream ON lineage (downstream_id);

        CREATE TABLE asset_changes (
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            asset_id   TEXT NOT NULL,
            kind       TEXT NOT NULL CHECK (kind IN ('update', 'delete')),
            changed_at TEXT NOT NULL,
            snapshot   TEXT NOT NULL                  -- the asset record just after the change
        );
        CREATE INDEX asset_changes_time ON asset_changes (changed_at, seq);
        CREATE INDEX asset_changes_asset ON asset_changes (asset_id);
        """,
    ),
    (
        "0002_external_lineage",
        """
        -- Every OpenLineage event the receiver accepted, once (digest of its canonical JSON).
        CREATE TABLE received_events (
            pk            INTEGER PRIMARY KEY,
            digest        TEXT NOT NULL UNIQUE,
            kind          TEXT NOT NULL CHECK (kind IN ('RunEvent', 'DatasetEvent', 'JobEvent')),
            event_type    TEXT,
            event_time    TEXT NOT NULL,
            source        TEXT,                       -- 'run:<runId>' or 'job:<namespace>/<name>'
            producer      TEXT NOT NULL,
            warnings      TEXT NOT NULL DEFAULT '[]',
            body          TEXT NOT NULL
        );

        -- Which OpenLineage dataset each asset id stands for: one dataset an id, one id a dataset.
        CREATE TABLE external_datasets (
            ol_namespace  TEXT NOT NULL,
            ol_name       TEXT NOT NULL,
            asset_id      TEXT NOT NULL UNIQUE,
            first_seen    TEXT NOT NULL,              -- event times, never the clock
            last_seen     TEXT NOT NULL,
            seen_rank     TEXT NOT NULL,              -- '<time>|<digest>' of the latest event naming it
            facets_rank   TEXT,                       -- the same, of the latest event describing it
            facets_digest TEXT,                       -- what that event's facets said, hashed
            PRIMARY KEY (ol_namespace, ol_name)
        ) WITHOUT ROWID;

        -- External runs and jobs (a JobEvent's job is a source without a run), with the asset ids
        -- of their inputs and outputs.
        CREATE TABLE external_sources (
            source        TEXT PRIMARY KEY,           -- 'run:<runId>' or 'job:<namespace>/<name>'
            job_namespace TEXT NOT NULL,
            job_name      TEXT NOT NULL,
            run_id        TEXT,
            parent_run_id TEXT,
            state         TEXT,                       -- the latest-ranked event type
            state_rank    TEXT,                       -- what decides the state, order-independent
            started_at    TEXT,
            ended_at      TEXT,
            first_seen    TEXT NOT NULL,
            last_seen     TEXT NOT NULL,
            producer      TEXT NOT NULL,
            inputs        TEXT NOT NULL DEFAULT '[]', -- JSON: sorted asset ids
            outputs       TEXT NOT NULL DEFAULT '[]'
        ) WITHOUT ROWID;

        -- What external jobs read and write, and the edges they make, once a job (not once a run).
        CREATE TABLE external_usages (
            job_namespace TEXT NOT NULL,
            job_name      TEXT NOT NULL,
            direction     TEXT NOT NULL CHECK (direction IN ('input', 'output')),
            asset_id      TEXT NOT NULL,
            PRIMARY KEY (job_namespace, job_name, direction, asset_id)
        ) WITHOUT ROWID;
        CREATE INDEX external_usages_asset ON external_usages (asset_id);

        CREATE TABLE external_lineage (
            upstream_id   TEXT NOT NULL,
            downstream_id TEXT NOT NULL,
            job_namespace TEXT NOT NULL,
            job_name      TEXT NOT NULL,
            PRIMARY KEY (upstream_id, downstream_id, job_namespace, job_name)
        ) WITHOUT ROWID;
        CREATE INDEX external_lineage_downstream ON external_lineage (downstream_id);

        -- Where an import from a Marquez instance got to, by its URL.
        CREATE TABLE import_positions (
            source        TEXT PRIMARY KEY,
            position      TEXT NOT NULL,
            updated_at    TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE VIEW all_lineage AS
            SELECT upstream_id, downstream_id FROM lineage
            UNION ALL
            SELECT upstream_id, downstream_id FROM external_lineage;
        """,
    ),
    (
        "0003_prefect_import_state",
        """
        -- where `prefect import` stopped reading a Prefect server's events, per API URL
        CREATE TABLE prefect_import_state (
            api_url        TEXT PRIMARY KEY,
            last_occurred  TEXT NOT NULL,         -- the newest event time read
            last_event_ids TEXT NOT NULL,         -- JSON list: the ids of the events read at that time
            events_read    INTEGER NOT NULL,      -- events read from this server, all imports together
            updated_at     TEXT NOT NULL
        );
        """,
    ),
    (
        "0004_declared_jobs",
        """
        CREATE TABLE declared_jobs (
            pk               INTEGER PRIMARY KEY,
            flow_namespace   TEXT NOT NULL,
            flow_id          TEXT NOT NULL,
            task_id          TEXT NOT NULL,
            declaration      TEXT NOT NULL,           -- JSON: task type, inputs, outputs, enableAuto, ...
            declaration_hash TEXT NOT NULL,
            declared_at      TEXT NOT NULL,           -- when this declaration was first recorded as it is
            UNIQUE (flow_namespace, flow_id, task_id)
        );
        CREATE INDEX declared_jobs_time ON declared_jobs (declared_at, pk);
        """,
    ),
    (
        "0005_outbox",
        """
        -- A reference outbox: each row points at the stored record whose event it stands for
        -- (task_runs.pk for run-start / run-end, asset_changes.seq for asset-change); the worker
        -- renders the event when it delivers it. Delivered rows are deleted.
        CREATE TABLE outbox (
            seq             INTEGER PRIMARY KEY AUTOINCREMENT,   -- commit order
            kind            TEXT NOT NULL,                       -- run-start | run-end | asset-change
            ref             INTEGER NOT NULL,
            run_key         TEXT NOT NULL,                       -- events of one key go out in seq order
            queued_at       TEXT NOT NULL,
            state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,             -- seconds since the epoch
            last_status     INTEGER,                             -- the backend's last HTTP status
            last_error      TEXT                                 -- its response body or the error (truncated)
        );
        CREATE INDEX outbox_state ON outbox (state, seq);
        CREATE INDEX outbox_run_key ON outbox (run_key, seq);
        CREATE INDEX outbox_retrying ON outbox (next_attempt_at) WHERE state = 'pending' AND attempts > 0;

        CREATE TABLE outbox_delivery (
            id              INTEGER PRIMARY KEY CHECK (id = 1),
            delivered       INTEGER NOT NULL,
            last_success_at TEXT NOT NULL
        );

        CREATE TABLE backfill_checkpoints (
            name       TEXT PRIMARY KEY,
            filters    TEXT NOT NULL,                            -- JSON of the filters it was made with
            position   TEXT NOT NULL,                            -- JSON [time, 0 change | 1 run, seq | pk]
            runs       INTEGER NOT NULL,
            events     INTEGER NOT NULL,
            updated_at TEXT NOT NULL
        );
        """,
    ),
    (
        "0006_received_in_time_order",
        """
        -- A received event is found by its time and digest (the same digest is the same event, so
        -- the same time): events come roughly in time order, so each group's new index entries
        -- share a few pages at the index's end, where a digest alone would scatter them over the
        -- whole index, one page written for each event.
        CREATE TABLE received_events_0006 (
            pk            INTEGER PRIMARY KEY,
            digest        TEXT NOT NULL,
            kind          TEXT NOT NULL CHECK (kind IN ('RunEvent', 'DatasetEvent', 'JobEvent')),
            event_type    TEXT,
            event_time    TEXT NOT NULL,
            source        TEXT,                       -- 'run:<runId>' or 'job:<namespace>/<name>'
            producer      TEXT NOT NULL,
            warnings      TEXT NOT NULL DEFAULT '[]',
            body          TEXT NOT NULL
        );
        INSERT INTO received_events_0006 SELECT pk, digest, kind, event_type, event_time, source, producer,
                                                warnings, body FROM received_events;
        DROP TABLE received_events;
        ALTER TABLE received_events_0006 RENAME TO received_events;
        CREATE UNIQUE INDEX received_events_time_digest ON received_events (event_time, digest);
        """,
    ),
    (
        "0007_delivery_bookkeeping",
        """
        -- The stream workers running on this catalog, each with its heartbeat. On SQLite one of them
        -- at a time holds the outbox's lease (outbox_lease) and delivers; the others wait for it.
        CREATE TABLE stream_workers (
            id           TEXT PRIMARY KEY,                   -- '<host>:<pid>:<random>'
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            target       TEXT NOT NULL,                      -- where it delivers
            started_at   TEXT NOT NULL,
            heartbeat_at REAL NOT NULL                       -- seconds since the epoch
        );
        CREATE TABLE outbox_lease (
            id          INTEGER PRIMARY KEY CHECK (id = 1),  -- the whole outbox: one holder at a time
            worker      TEXT NOT NULL,                       -- stream_workers.id; stale with its heartbeat
            acquired_at TEXT NOT NULL
        );

        -- The last delivery failure of the stream ('stream') and of each backfill ('backfill:<name>').
        CREATE TABLE delivery_errors (
            source  TEXT PRIMARY KEY,
            target  TEXT NOT NULL,
            failure TEXT NOT NULL,                           -- connection | timeout | HTTP 5xx | HTTP 429 | ...
            status  INTEGER,
            detail  TEXT NOT NULL,
            at      TEXT NOT NULL
        );

        -- Events a backfill's backend refused for good, kept until a backfill with --retry-refused
        -- delivers them (item_order: -1 declared job, 0 asset change, 1 task run; ref its pk or seq;
        -- event: the first one not delivered, 'start' / 'end' of a run or 'event').
        CREATE TABLE backfill_refused (
            checkpoint TEXT NOT NULL,
            item_time  TEXT NOT NULL,
            item_order INTEGER NOT NULL,
            ref        INTEGER NOT NULL,
            event      TEXT NOT NULL,
            status     INTEGER,
            error      TEXT NOT NULL,
            refused_at TEXT NOT NULL,
            PRIMARY KEY (checkpoint, item_order, ref)
        );

        -- Items past a checkpoint's position already delivered in part or whole (a window that
        -- stopped half way): JSON [[[time, order, ref], events settled], ...].
        ALTER TABLE backfill_checkpoints ADD COLUMN ahead TEXT NOT NULL DEFAULT '[]';
        """,
    ),
    (
        "0008_column_lineage",
        """
        -- Column lineage: an output asset's column from an input asset's column, with the
        -- transformations (JSON list, as OpenLineage's columnLineage facet gives them) and the run
        -- that made the edge: one of olbridge's task runs, or a received event's run or job.
        CREATE TABLE column_lineage (
            downstream_id     TEXT NOT NULL,
            downstream_column TEXT NOT NULL,          -- '': the whole output (the facet's `dataset`)
            upstream_id       TEXT NOT NULL,
            upstream_column   TEXT NOT NULL,
            transformations   TEXT NOT NULL DEFAULT '[]',
            task_run_pk       INTEGER REFERENCES task_runs (pk),
            source            TEXT,                   -- 'run:<runId>' or 'job:<namespace>/<name>'
            CHECK ((task_run_pk IS NULL) <> (source IS NULL))
        );
        CREATE UNIQUE INDEX column_lineage_edge ON column_lineage (
            downstream_id, downstream_column, upstream_id, upstream_column, transformations,
            coalesce(task_run_pk, 0), coalesce(source, '')
        );
        CREATE INDEX column_lineage_upstream ON column_lineage (upstream_id, upstream_column);
        CREATE INDEX column_lineage_run ON column_lineage (task_run_pk) WHERE task_run_pk IS NOT NULL;
        """,
    ),
    (
        "0009_received_kept_and_forwarded",
        """
        -- serve --forward: an accepted event's text as it came, queued in the outbox to go out as it
        -- is (kind 'forward', ref the received_events pk); other kinds leave it NULL.
        ALTER TABLE outbox ADD COLUMN payload TEXT;

        -- serve --tokens: the name of the token that brought the event (NULL: one shared token, or none).
        ALTER TABLE received_events ADD COLUMN token TEXT;

        -- The latest of each facet (custom ones too) of an external run ('run:<runId>'), job
        -- ('job:<namespace>/<name>') and dataset ('asset:<asset id>'), as the event had it.
        CREATE TABLE external_facets (
            owner       TEXT NOT NULL,
            facet_key   TEXT NOT NULL,
            facet_rank  TEXT,                         -- '<time>|<digest>' of its event: the highest wins;
                                                      -- NULL: a dataset's facet as its latest event with
                                                      -- facets has it (external_datasets.all_facets_rank)
            facet       TEXT NOT NULL,                -- its JSON (canonical)
            PRIMARY KEY (owner, facet_key)
        );
        -- the latest event that gave a dataset any facets, and all its facets hashed: an event
        -- that repeats them changes no facet row
        ALTER TABLE external_datasets ADD COLUMN all_facets_rank TEXT;
        ALTER TABLE external_datasets ADD COLUMN all_facets_digest TEXT;

        -- An external run's job is the one its earliest-ranked event names (job_rank); a run named
        -- under more than one job lists them all (jobs: JSON [[namespace, name], ...], sorted; NULL
        -- while there is one). warnings: the distinct warnings of its events (JSON list, sorted).
        ALTER TABLE external_sources ADD COLUMN job_rank TEXT;
        ALTER TABLE external_sources ADD COLUMN jobs TEXT;
        ALTER TABLE external_sources ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';

        -- A dataset's other names, as producers' symlinks facets give them: every one ever given,
        -- with the type the latest-ranked event naming it says. An asset is found by any of them.
        CREATE TABLE external_identifiers (
            namespace  TEXT NOT NULL,
            name       TEXT NOT NULL,
            asset_id   TEXT NOT NULL,
            type       TEXT,
            id_rank    TEXT NOT NULL,
            PRIMARY KEY (namespace, name, asset_id)
        );
        CREATE INDEX external_identifiers_asset ON external_identifiers (asset_id);
        """,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

PRAGMAS = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON")

# --- assets ---------------------------------------------------------------------------------

ASSET_COLUMNS = (
    "id, type, namespace, display_name, description, metadata, origin, created_at, updated_at, "
    "deleted_at, columns, assertions"
)
GET_ASSET = f"SELECT {ASSET_COLUMNS} FROM assets WHERE id = ?"
UPSERT_ASSET = f"""
    INSERT INTO assets ({ASSET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        type = excluded.type, namespace = excluded.namespace, display_name = excluded.display_name,
        description = excluded.description, metadata = excluded.metadata, origin = excluded.origin,
        updated_at = excluded.updated_at, deleted_at = excluded.deleted_at, columns = excluded.columns,
        assertions = excluded.assertions
"""
COUNT_ASSETS = "SELECT count(*) FROM assets"
# a placeholder's creation time is its first sighting, which an earlier event can move back
UPSERT_PLACEHOLDER = UPSERT_ASSET.replace(
    "updated_at = excluded.updated_at", "created_at = excluded.created_at, updated_at = excluded.updated_at"
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


def delete_assets(count: int) -> str:
    return f"DELETE FROM assets WHERE id IN ({', '.join('?' * count)})"


def delete_usages_of(count: int) -> str:
    return f"DELETE FROM usages WHERE asset_id IN ({', '.join('?' * count)})"


def delete_lineage_of(count: int) -> str:
    marks = ", ".join("?" * count)
    return f"DELETE FROM lineage WHERE upstream_id IN ({marks}) OR downstream_id IN ({marks})"


def delete_bindings_of(count: int) -> str:
    return f"DELETE FROM external_datasets WHERE asset_id IN ({', '.join('?' * count)})"


def delete_identifiers_of(count: int) -> str:
    return f"DELETE FROM external_identifiers WHERE asset_id IN ({', '.join('?' * count)})"


def delete_facets_of(count: int) -> str:
    """The kept facets of ``count`` owners ('asset:<id>', ...)."""
    return f"DELETE FROM external_facets WHERE owner IN ({', '.join('?' * count)})"


def delete_changes_of(count: int) -> str:
    return f"DELETE FROM asset_changes WHERE asset_id IN ({', '.join('?' * count)})"


# --- changes --------------------------------------------------------------------------------

INSERT_CHANGE = "INSERT INTO asset_changes (asset_id, kind, changed_at, snapshot) VALUES (?, ?, ?, ?)"


def where(*conditions: tuple[bool, str]) -> str:
    """`` WHERE a AND b`` of the conditions that apply (in order), or nothing."""
    kept = [text for applies, text in conditions if applies]
    return f" WHERE {' AND '.join(kept)}" if kept else ""


def select_changes(
    *, since: bool = False, until: bool = False, namespace: bool = False, asset: bool = False, after: bool = False
) -> str:
    """Asset changes in time order (placeholders: since, until, namespace, asset, then the
    (changed_at, seq) to read after)."""
    where = []
    if since:
        where.append("changed_at >= ?")
    if until:
        where.append("changed_at < ?")
    if namespace:
        where.append("json_extract(snapshot, '$.namespace') = ?")
    if asset:
        where.append("asset_id = ?")
    if after:
        where.append("(changed_at, seq) > (?, ?)")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT seq, kind, changed_at, snapshot FROM asset_changes{clause} ORDER BY changed_at, seq"


GET_CHANGE = "SELECT seq, kind, changed_at, snapshot FROM asset_changes WHERE seq = ?"


# --- task runs ------------------------------------------------------------------------------

INSERT_EXECUTION = (
    "INSERT OR IGNORE INTO executions (flow_namespace, flow_id, execution_id, started_at) VALUES (?, ?, ?, ?)"
)
TASK_RUN_COLUMNS = (
    "t.pk, t.flow_namespace, t.flow_id, t.task_id, t.execution_id, t.task_run_id, t.state, t.started_at, "
    "t.ended_at, t.job, t.warnings, t.error, e.started_at"
)
_TASK_RUN_FROM = (
    "FROM task_runs t JOIN executions e ON e.flow_namespace = t.flow_namespace AND e.flow_id = t.flow_id "
    "AND e.execution_id = t.execution_id"
)
FIND_TASK_RUN = (
    "SELECT pk, task_id, state, record_hash FROM task_runs "
    "WHERE flow_namespace = ? AND flow_id = ? AND execution_id = ? AND task_run_id = ?"
)
INSERT_TASK_RUN = """
    INSERT INTO task_runs (flow_namespace, flow_id, task_id, execution_id, task_run_id, state, started_at,
                           ended_at, job, warnings, error, record_hash)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
UPDATE_TASK_RUN = """
    UPDATE task_runs SET state = ?, started_at = ?, ended_at = ?, job = ?, warnings = ?, error = ?, record_hash = ?
    WHERE pk = ?
"""
DELETE_USAGES_OF_RUN = "DELETE FROM usages WHERE task_run_pk = ?"
DELETE_LINEAGE_OF_RUN = "DELETE FROM lineage WHERE task_run_pk = ?"
INSERT_USAGE = (
    "INSERT OR IGNORE INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_LINEAGE = "INSERT OR IGNORE INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?)"
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
    INSERT OR IGNORE INTO column_lineage (downstream_id, downstream_column, upstream_id, upstream_column,
                                          transformations, task_run_pk, source)
    VALUES (?, ?, ?, ?, ?, ?, ?)
"""


def select_column_edges_of_runs(count: int) -> str:
    return (
        "SELECT task_run_pk, downstream_id, downstream_column, upstream_id, upstream_column, transformations "
        f"FROM column_lineage WHERE task_run_pk IN ({', '.join('?' * count)}) "
        "ORDER BY task_run_pk, downstream_id, downstream_column, upstream_id, upstream_column, transformations"
    )


def delete_column_lineage_of(count: int) -> str:
    marks = ", ".join("?" * count)
    return f"DELETE FROM column_lineage WHERE upstream_id IN ({marks}) OR downstream_id IN ({marks})"


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
    INSERT OR IGNORE INTO received_events (digest, kind, event_type, event_time, source, producer, warnings, body,
                                           token)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
# serve --forward: the received event's text as it came, queued beside it (run_key, queued_at,
# payload, then the event's time and digest)
QUEUE_FORWARD = """
    INSERT INTO outbox (kind, ref, run_key, queued_at, payload)
    SELECT 'forward', pk, ?, ?, ? FROM received_events WHERE event_time = ? AND digest = ?
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
# a placeholder whose facets did not change: only its sightings (and producer) move, in place
TOUCH_PLACEHOLDER = """
    UPDATE assets SET
        created_at = min(created_at, ?),
        updated_at = ?,
        metadata = json_set(metadata, '$.firstSeen', ?, '$.lastSeen', ?,
                            '$.producer', coalesce(?, json_extract(metadata, '$.producer')))
    WHERE id = ? AND origin = 'external'
"""
UPSERT_SOURCE = """
    INSERT INTO external_sources (source, job_namespace, job_name, run_id, parent_run_id, state, state_rank,
                                  started_at, ended_at, first_seen, last_seen, producer, inputs, outputs,
                                  job_rank, jobs, warnings)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (source) DO UPDATE SET
        parent_run_id = coalesce(parent_run_id, excluded.parent_run_id),
        state = CASE WHEN excluded.state_rank > state_rank THEN excluded.state ELSE state END,
        ended_at = CASE WHEN excluded.state_rank > state_rank THEN excluded.ended_at ELSE ended_at END,
        producer = CASE WHEN excluded.state_rank > state_rank THEN excluded.producer ELSE producer END,
        state_rank = max(state_rank, excluded.state_rank),
        started_at = min(coalesce(started_at, excluded.started_at), coalesce(excluded.started_at, started_at)),
        first_seen = min(first_seen, excluded.first_seen),
        last_seen = max(last_seen, excluded.last_seen),
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
    INSERT INTO external_facets (owner, facet_key, facet_rank, facet) VALUES (?, ?, ?, ?)
    ON CONFLICT (owner, facet_key) DO UPDATE SET facet_rank = excluded.facet_rank, facet = excluded.facet
    WHERE excluded.facet_rank > external_facets.facet_rank
"""
UPSERT_IDENTIFIER = """
    INSERT INTO external_identifiers (namespace, name, asset_id, type, id_rank) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (namespace, name, asset_id) DO UPDATE SET type = excluded.type, id_rank = excluded.id_rank
    WHERE excluded.id_rank > external_identifiers.id_rank
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


INSERT_EXTERNAL_USAGE = """
    INSERT OR IGNORE INTO external_usages (job_namespace, job_name, direction, asset_id) VALUES (?, ?, ?, ?)
"""
INSERT_EXTERNAL_EDGE = """
    INSERT OR IGNORE INTO external_lineage (upstream_id, downstream_id, job_namespace, job_name) VALUES (?, ?, ?, ?)
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
GET_IMPORT_POSITION = "SELECT position FROM import_positions WHERE source = ?"
SET_IMPORT_POSITION = """
    INSERT INTO import_positions (source, position, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (source) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
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


def sources_of(count: int) -> str:
    return f"""
        SELECT source, inputs, outputs, job_namespace, job_name, job_rank, jobs, warnings
        FROM external_sources WHERE source IN ({", ".join("?" * count)})
    """


# --- prefect import state ---------------------------------------------------------------------

GET_PREFECT_STATE = (
    "SELECT last_occurred, last_event_ids, events_read, updated_at FROM prefect_import_state WHERE api_url = ?"
)
UPSERT_PREFECT_STATE = """
    INSERT INTO prefect_import_state (api_url, last_occurred, last_event_ids, events_read, updated_at)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (api_url) DO UPDATE SET
        last_occurred = excluded.last_occurred, last_event_ids = excluded.last_event_ids,
        events_read = excluded.events_read, updated_at = excluded.updated_at
"""

# --- declared jobs (a flow's static lineage) ------------------------------------------------

DECLARED_JOB_COLUMNS = "pk, flow_namespace, flow_id, task_id, declaration, declared_at"
DECLARED_JOBS_OF_FLOW = (
    "SELECT pk, task_id, declaration_hash FROM declared_jobs WHERE flow_namespace = ? AND flow_id = ? ORDER BY pk"
)
INSERT_DECLARED_JOB = """
    INSERT INTO declared_jobs (flow_namespace, flow_id, task_id, declaration, declaration_hash, declared_at)
    VALUES (?, ?, ?, ?, ?, ?)
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
    clause = where(
        (since, "declared_at >= ?"),
        (until, "declared_at < ?"),
        (namespace, "flow_namespace = ?"),
        (flow, "flow_id = ?"),
        (after, "pk > ?"),
    )
    return f"SELECT {DECLARED_JOB_COLUMNS} FROM declared_jobs{clause} ORDER BY pk"


# --- outbox ---------------------------------------------------------------------------------

QUEUE_EVENT = (
    "INSERT INTO outbox (kind, ref, run_key, queued_at) VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
)
OUTBOX_COLUMNS = "seq, kind, ref, run_key, queued_at, state, attempts, next_attempt_at, last_status, last_error"
# the due pending rows that are first of their run key (an earlier row of the key, pending or
# dead, holds the later ones back), in commit order
OUTBOX_HEADS = f"""
    SELECT {OUTBOX_COLUMNS} FROM outbox o
    WHERE o.state = 'pending' AND o.next_attempt_at <= ?
      AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.run_key = o.run_key AND p.seq < o.seq)
    ORDER BY o.seq LIMIT ?
"""
# rows tried before and pending are first of their run key (only those are ever tried)
OUTBOX_NEXT_RETRY = (
    "SELECT min(next_attempt_at) FROM outbox INDEXED BY outbox_retrying WHERE state = 'pending' AND attempts > 0"
)
OUTBOX_DELETE = "DELETE FROM outbox WHERE seq = ?"
OUTBOX_RETRY_LATER = (
    "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ? WHERE seq = ?"
)
OUTBOX_DEAD = "UPDATE outbox SET state = 'dead', attempts = ?, last_status = ?, last_error = ? WHERE seq = ?"
OUTBOX_REQUEUE_ALL = "UPDATE outbox SET state = 'pending', next_attempt_at = 0 WHERE state = 'dead'"
OUTBOX_COUNT_DELIVERED = """
    INSERT INTO outbox_delivery (id, delivered, last_success_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET delivered = delivered + excluded.delivered,
        last_success_at = excluded.last_success_at
"""
OUTBOX_DELIVERY = "SELECT delivered, last_success_at FROM outbox_delivery WHERE id = 1"
OUTBOX_COUNT = "SELECT count(*) FROM outbox WHERE state = ?"
OUTBOX_OLDEST = "SELECT queued_at FROM outbox WHERE state = 'pending' ORDER BY seq LIMIT 1"


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


def delete_outbox(count: int) -> str:
    return f"DELETE FROM outbox WHERE seq IN ({', '.join('?' * count)})"


# --- backfill checkpoints -------------------------------------------------------------------

CHECKPOINT_COLUMNS = "name, filters, position, runs, events, updated_at, ahead"
GET_CHECKPOINT = f"SELECT {CHECKPOINT_COLUMNS} FROM backfill_checkpoints WHERE name = ?"
LIST_CHECKPOINTS = f"SELECT {CHECKPOINT_COLUMNS} FROM backfill_checkpoints ORDER BY name"
SAVE_CHECKPOINT = """
    INSERT INTO backfill_checkpoints (name, filters, position, runs, events, updated_at, ahead)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET filters = excluded.filters, position = excluded.position, runs = excluded.runs,
        events = excluded.events, updated_at = excluded.updated_at, ahead = excluded.ahead
"""
DELETE_CHECKPOINT = "DELETE FROM backfill_checkpoints WHERE name = ?"
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
    INSERT INTO stream_workers (id, host, pid, target, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
"""
DELETE_WORKER = "DELETE FROM stream_workers WHERE id = ?"
DELETE_STALE_WORKERS = "DELETE FROM stream_workers WHERE heartbeat_at < ? AND id <> ?"
SELECT_WORKERS = f"""
    SELECT {WORKER_COLUMNS}, l.acquired_at FROM stream_workers w LEFT JOIN outbox_lease l ON l.worker = w.id
    ORDER BY w.started_at, w.id
"""
SELECT_LEASE = f"""
    SELECT l.worker, l.acquired_at, {WORKER_COLUMNS} FROM outbox_lease l
    LEFT JOIN stream_workers w ON w.id = l.worker WHERE l.id = 1
"""
TAKE_LEASE = """
    INSERT INTO outbox_lease (id, worker, acquired_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET worker = excluded.worker, acquired_at = excluded.acquired_at
"""
RELEASE_LEASE = "DELETE FROM outbox_lease WHERE id = 1 AND worker = ?"
LEASE_HOLDER = "SELECT worker FROM outbox_lease WHERE id = 1"
