"""The statements of the receiver's tables (received events, external datasets, runs and jobs,
their facets, identifiers, usages and edges), in the shared dialect of :mod:`bridge.catalog.sql`.
"""

from __future__ import annotations

from bridge.catalog.sql import ASSET_COLUMNS, LOCK, where

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
# the data-quality assertions an event gave a dataset, as a check of its asset at the event's time;
# of two events of one time, the higher-ranked one's (whatever the order they come in)
PUT_RECEIVED_CHECKS = """
    INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions, check_rank) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (asset_id, reported_at) DO UPDATE
    SET reporter = excluded.reporter, assertions = excluded.assertions, check_rank = excluded.check_rank
    WHERE asset_checks.check_rank IS NULL OR excluded.check_rank > asset_checks.check_rank
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
# a placeholder only seen again (its facets as they were): its sightings (and producer) move, in
# place; where one writer runs at a time (SQLite), from the binding as the group read it
TOUCH_PLACEHOLDER = """
    UPDATE assets SET
        created_at = min(created_at, ?),
        updated_at = ?,
        metadata = json_set(metadata, '$.firstSeen', ?, '$.lastSeen', ?,
                            '$.producer', coalesce(?, json_extract(metadata, '$.producer')))
    WHERE id = ? AND origin = 'external'
"""
# the same where writers run side by side (PostgreSQL), with nothing read or locked before: one
# statement over the group's datasets only seen again (a JSON array of objects: ns, name, first,
# last, seen_rank, producer and producer_member, the text of the placeholder's "producer" member
# as olbridge writes it, backslashes doubled for regexp_replace; both NULL when the group's latest
# event is not newer than the binding as read; then their count). The binding's sightings move by
# a least-of / greatest-of update where they move, under its row lock; its placeholder then takes
# the binding's sightings as they now stand (whichever writer moved them), and the group's
# producer only if the group's latest event is still the dataset's latest. A placeholder's
# metadata is the compact JSON olbridge writes, sorted, with a member each of firstSeen, lastSeen
# and producer: where every member's value is a scalar (nothing nested, so that a name is a
# member's only where it is followed by a colon), their values are replaced in its text, which
# stays byte for byte as olbridge would write it; else (an object or array inside) the members are
# set as JSON values (the same JSON, PostgreSQL's spacing). The rows are taken in the array's
# order (by dataset), as every writer takes them.
MOVE_SIGHTINGS = r"""
    WITH x AS (
        SELECT * FROM json_to_recordset(CAST(? AS json))
            AS x(ns text, name text, first text, last text, seen_rank text, producer text, producer_member text)
        LIMIT ?
    ), b AS (
        UPDATE external_datasets AS d SET
            first_seen = LEAST(d.first_seen, x.first),
            last_seen = GREATEST(d.last_seen, x.last),
            seen_rank = GREATEST(d.seen_rank, x.seen_rank)
        FROM x
        WHERE d.ol_namespace = x.ns AND d.ol_name = x.name
          AND (d.first_seen > x.first OR d.last_seen < x.last OR d.seen_rank < x.seen_rank)
        RETURNING d.asset_id, d.first_seen, d.last_seen,
                  CASE WHEN d.seen_rank = x.seen_rank THEN x.producer END AS producer,
                  CASE WHEN d.seen_rank = x.seen_rank THEN x.producer_member END AS producer_member
    )
    UPDATE assets AS a SET
        created_at = LEAST(a.created_at, b.first_seen),
        updated_at = b.last_seen,
        metadata = CASE
            WHEN EXISTS (
                SELECT 1 FROM jsonb_each(CAST(a.metadata AS jsonb)) AS m
                WHERE jsonb_typeof(m.value) IN ('object', 'array')
            ) THEN CAST(
                CAST(a.metadata AS jsonb)
                || jsonb_build_object('firstSeen', b.first_seen, 'lastSeen', b.last_seen)
                || CASE WHEN b.producer IS NULL THEN CAST('{}' AS jsonb)
                        ELSE jsonb_build_object('producer', b.producer) END
                AS text)
            ELSE regexp_replace(
                regexp_replace(
                    CASE WHEN b.producer_member IS NULL THEN a.metadata
                         ELSE regexp_replace(a.metadata, '"producer":"([^"\\]|\\.)*"', b.producer_member) END,
                    '"firstSeen":"[^"]*"', '"firstSeen":"' || b.first_seen || '"'),
                '"lastSeen":"[^"]*"', '"lastSeen":"' || b.last_seen || '"')
        END
    FROM b WHERE a.id = b.asset_id AND a.origin = 'external'
"""
UPSERT_SOURCE = """
    INSERT INTO external_sources AS s (source, job_namespace, job_name, run_id, parent_run_id, state, state_rank,
                                       started_at, ended_at, first_seen, last_seen, producer, inputs, outputs,
                                       job_rank, jobs, warnings, run_day)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (source, run_day) DO UPDATE SET
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
IDENTIFIERS_OF_ASSETS = (  # in_chunks
    "SELECT asset_id, namespace, name, type FROM external_identifiers WHERE asset_id IN ({values}) "
    "ORDER BY asset_id, namespace, name"
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
    newest: bool = False,
) -> str:
    """External runs (not JobEvents' jobs) by start, the first event's time when no START came
    (placeholders: source and its run day, job name, job namespace, state, since, until); with
    ``newest``, newest first (then by source), the first ``?`` of them."""
    clause = _external_runs_where(source, job, namespace, state, since, until)
    if newest:
        return (
            f"SELECT {EXTERNAL_RUN_COLUMNS} FROM external_sources{clause} "
            "ORDER BY coalesce(started_at, first_seen) DESC, source DESC LIMIT ?"
        )
    return (
        f"SELECT {EXTERNAL_RUN_COLUMNS} FROM external_sources{clause} ORDER BY coalesce(started_at, first_seen), source"
    )


def count_external_runs(
    *, job: bool = False, namespace: bool = False, state: bool = False, since: bool = False, until: bool = False
) -> str:
    """How many external runs :func:`select_external_runs` selects with the same filters."""
    return f"SELECT count(*) FROM external_sources{_external_runs_where(False, job, namespace, state, since, until)}"


def _external_runs_where(source: bool, job: bool, namespace: bool, state: bool, since: bool, until: bool) -> str:
    return where(
        (True, "run_id IS NOT NULL"),
        (source, "source = ? AND run_day = ?"),
        (job, "job_name = ?"),
        (namespace, "job_namespace = ?"),
        (state, "state = ?"),
        (since, "coalesce(started_at, first_seen) >= ?"),
        (until, "coalesce(started_at, first_seen) < ?"),
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
                                  job_rank, jobs, warnings, run_day)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
FIRST_EXTERNAL_USAGES_OF_ASSET = """
    SELECT direction, job_namespace, job_name FROM external_usages
    WHERE asset_id = ? ORDER BY job_namespace, job_name, direction LIMIT ?
"""
COUNT_EXTERNAL_USAGES_OF_ASSET = "SELECT direction, count(*) FROM external_usages WHERE asset_id = ? GROUP BY direction"
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
    """:func:`bindings_of`, the rows locked in key order (writers side by side: the bindings a
    group rewrites whole, its facets changed)."""
    return bindings_of(count) + " ORDER BY ol_namespace, ol_name" + LOCK


def usages_of(count: int) -> str:
    """Which of ``count`` job usages (job namespace, job name, direction, asset: the primary key)
    are stored, each by its key (not every usage of their jobs: a recurring job's, read group
    after group, grow with the datasets it ever named)."""
    usages = " OR ".join(
        "(job_namespace = ? AND job_name = ? AND direction = ? AND asset_id = ?)" for _ in range(count)
    )
    return f"SELECT job_namespace, job_name, direction, asset_id FROM external_usages WHERE {usages}"


def edges_of(count: int) -> str:
    """Which of ``count`` external edges (upstream, downstream, job namespace, job name: the
    primary key) are stored, each by its key (not every edge of their upstream assets, which on
    a popular dataset is every job's, growing as jobs come)."""
    edges = " OR ".join(
        "(upstream_id = ? AND downstream_id = ? AND job_namespace = ? AND job_name = ?)" for _ in range(count)
    )
    return f"SELECT upstream_id, downstream_id, job_namespace, job_name FROM external_lineage WHERE {edges}"


def sources_of(count: int) -> str:
    """The runs and jobs a group merges into: their inputs and outputs, job, jobs and warnings; of
    ``count`` pairs of a source and its run day (each found in its day's partition on PostgreSQL)."""
    pairs = " OR ".join("(source = ? AND run_day = ?)" for _ in range(count))
    return f"""
        SELECT source, inputs, outputs, job_namespace, job_name, job_rank, jobs, warnings
        FROM external_sources WHERE {pairs}
    """


def locked_sources_of(count: int) -> str:
    return sources_of(count) + " ORDER BY source" + LOCK


def locked_assets(count: int) -> str:
    return f"SELECT {ASSET_COLUMNS} FROM assets WHERE id IN ({', '.join('?' * count)}) ORDER BY id" + LOCK


def symlinked_bindings_of(count: int) -> str:
    """The bindings whose datasets' symlinks name one of ``count`` datasets (namespace, name),
    each row led by the dataset it names: the bound dataset another name stands for."""
    pairs = " OR ".join("(i.namespace = ? AND i.name = ?)" for _ in range(count))
    return f"""
        SELECT i.namespace, i.name, d.ol_namespace, d.ol_name, d.asset_id, d.first_seen, d.last_seen, d.seen_rank,
               d.facets_rank, d.facets_digest, d.all_facets_rank, d.all_facets_digest
        FROM external_identifiers AS i JOIN external_datasets AS d ON d.asset_id = i.asset_id WHERE {pairs}
    """
