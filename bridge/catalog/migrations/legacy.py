"""The first eight migrations as they were released, SQLite's own SQL (numbered migrations, run
by olbridge itself, before the catalog had a second engine). Revisions 0001 to 0008 run them on
SQLite catalogs older than 0009; a PostgreSQL catalog begins at 0009 or later. Never edited."""

from __future__ import annotations

import sqlite3

from alembic import op

SQLITE_SCRIPTS: tuple[tuple[str, str], ...] = (
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
)


def statements(script: str) -> list[str]:
    """The statements of a script, one by one (a driver runs one at a time)."""
    found, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    assert not pending.strip(), f"an unfinished statement: {pending!r}"
    return found


def run_sqlite_script(name: str) -> None:
    """Run one of the released scripts, statement by statement, in the revision's transaction."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        raise RuntimeError(f"migration {name} is SQLite's: a {bind.dialect.name} catalog begins at 0009 or later")
    for statement in statements(dict(SQLITE_SCRIPTS)[name]):
        bind.exec_driver_sql(statement)
