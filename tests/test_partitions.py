"""Received events partitioned by day of their event time on PostgreSQL: the days ahead made by
olbridge itself, a default partition that takes any event no day holds, expiry that drops whole
days and deletes only the boundary in batches (the dry run's count the same), a drop the writers
hold back given up after its lock timeout, and the migration that partitions an existing catalog.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from bridge.catalog import Catalog, retention
from bridge.catalog.postgres import partitions
from bridge.catalog.retention import Windows
from bridge.mapping import Resolver
from bridge.model.times import epoch_text
from bridge.receiver.imports import catalog_intake
from bridge.receiver.intake import Intake
from tests.helpers import in_threads, invoke, ol_run_event, serve_process
from tests.postgres import PostgresServer
from tests.test_engines import (
    schema_read,
    undo_alert_heads,
    undo_alerts_told,
    undo_asset_filters,
    undo_edges_by_whole_key,
    undo_health_purged,
    undo_kept_edges,
    undo_kept_writers_gone,
    undo_lineage_by_run,
    undo_own_facts_kept,
    undo_runs_partitioned,
    undo_ui_reads,
    undo_unwritten_outputs,
    undo_uses_by_asset_in_time,
    undo_writes_kept,
    unpartition_received,
)

DAY = 86400.0
NOW = datetime(2025, 6, 1, 6, tzinfo=UTC).timestamp()  # the window of 7 days starts 2025-05-25T06:00
WEEK = Windows(received_events=7 * DAY)


def rid(n: int) -> str:
    return f"0194a1b2-0000-7000-8000-{n:012d}"


def at(day: int, hour: int = 12) -> str:
    """An event time in May 2025."""
    return f"2025-05-{day:02d}T{hour:02d}:00:00Z"


def where(catalog: Catalog) -> dict[str, str]:
    """Each received event's partition, by its run id."""
    found = catalog._conn.execute("SELECT tableoid::regclass::text, body FROM received_events").fetchall()
    return {json.loads(body)["run"]["runId"]: str(table) for table, body in found}


def days(catalog: Catalog) -> list[str]:
    return sorted(partitions.days(catalog._conn).values())


def statuses(intake: Intake, events: list[dict[str, Any]]) -> list[str]:
    return [o.status for o in intake.take(events)]


@pytest.fixture
def catalog(postgres_url: str) -> Catalog:
    return Catalog(postgres_url)


def test_a_new_catalog_has_the_days_ahead_and_a_default_that_takes_any_other_event(
    catalog: Catalog, resolver: Resolver
) -> None:
    today = datetime.now(UTC).date()
    assert days(catalog) == [partitions.day_name(today + timedelta(days=n)) for n in range(partitions.AHEAD + 1)]
    intake = catalog_intake(catalog, resolver)
    events = [
        ol_run_event(run_id=rid(1), time=f"{today.isoformat()}T00:00:00Z"),
        ol_run_event(run_id=rid(2), time="2001-01-01T00:00:00Z"),  # long before any day made
        ol_run_event(run_id=rid(3), time="2999-01-01T00:00:00Z"),  # long after
    ]
    assert statuses(intake, events) == ["accepted"] * 3
    assert where(catalog) == {
        rid(1): partitions.day_name(today),
        rid(2): partitions.DEFAULT,
        rid(3): partitions.DEFAULT,
    }
    assert statuses(intake, events) == ["duplicate"] * 3  # recognised in whichever partition


def test_expiry_drops_whole_days_and_deletes_only_the_boundary_in_batches(catalog: Catalog, resolver: Resolver) -> None:
    partitions.ensure(catalog.db, NOW - 12 * DAY, ahead=14)  # 2025-05-20 to 2025-06-03
    intake = catalog_intake(catalog, resolver)
    events = [ol_run_event(run_id=rid(d), time=at(d)) for d in range(20, 32)]  # one a day, at noon
    events += [ol_run_event(run_id=rid(100), time=at(25, 0))]  # the boundary day, before the window
    events += [ol_run_event(run_id=rid(200), time="2025-03-01T08:00:00Z")]  # the default partition
    assert statuses(intake, events) == ["accepted"] * len(events)
    counted = retention.count(catalog.db, WEEK, NOW)["receivedEvents"]
    assert counted == 7  # the 20th to the 24th, the 25th at midnight, the old one
    assert retention.expire(catalog.db, WEEK, NOW, pause=0, batch=1)["receivedEvents"] == counted
    assert partitions.day_name(datetime(2025, 5, 24).date()) not in days(catalog)  # dropped, not emptied
    assert days(catalog)[0] == partitions.day_name(datetime(2025, 5, 25).date())  # the boundary stays
    assert sorted(where(catalog)) == sorted(rid(d) for d in range(25, 32))
    assert retention.count(catalog.db, WEEK, NOW)["receivedEvents"] == 0
    # what went is a new event when re-sent (in the default partition now); what is kept, a duplicate
    assert statuses(intake, [events[0], events[5]]) == ["accepted", "duplicate"]
    assert where(catalog)[rid(20)] == partitions.DEFAULT


def test_a_drop_the_writers_hold_back_is_given_up_for_batches(catalog: Catalog, resolver: Resolver) -> None:
    """DETACH waits for the writers in flight at most its lock timeout, a few times; the rows of a
    day it could not drop go in batches, the same count, and the next pass drops the day."""
    partitions.ensure(catalog.db, NOW - 12 * DAY, ahead=14)
    intake = catalog_intake(catalog, resolver)
    assert statuses(intake, [ol_run_event(run_id=rid(d), time=at(d)) for d in (20, 21, 30)]) == ["accepted"] * 3
    writer = catalog.engine.connect()  # a receiver's writer, its transaction in flight
    try:
        writer.execute("BEGIN")
        writer.execute("SELECT count(*) FROM received_events WHERE event_time > '2025-05-29'")
        assert retention.count(catalog.db, WEEK, NOW)["receivedEvents"] == 2
        assert retention.expire(catalog.db, WEEK, NOW, pause=0)["receivedEvents"] == 2
        assert partitions.day_name(datetime(2025, 5, 20).date()) in days(catalog)  # not dropped: held
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    assert sorted(where(catalog)) == [rid(30)]
    assert retention.expire(catalog.db, WEEK, NOW, pause=0)["receivedEvents"] == 0
    assert partitions.day_name(datetime(2025, 5, 20).date()) not in days(catalog)  # empty, dropped now


def test_a_pending_forward_keeps_the_day_it_points_into(catalog: Catalog, resolver: Resolver) -> None:
    partitions.ensure(catalog.db, NOW - 12 * DAY, ahead=14)
    intake = catalog_intake(catalog, resolver)
    intake.take([ol_run_event(run_id=rid(d), time=at(d)) for d in (20, 21)])
    pk = catalog._conn.execute("SELECT pk FROM received_events WHERE event_time >= '2025-05-21'").fetchone()[0]
    with catalog.transaction() as cur:
        cur.execute(
            "INSERT INTO outbox (kind, ref, run_key, queued_at, payload) VALUES ('forward', ?, 'k', ?, '{}')",
            (pk, at(21)),
        )
    assert retention.count(catalog.db, WEEK, NOW)["receivedEvents"] == 1
    assert retention.expire(catalog.db, WEEK, NOW, pause=0)["receivedEvents"] == 1
    assert where(catalog) == {rid(21): partitions.day_name(datetime(2025, 5, 21).date())}


def test_an_event_ahead_of_the_days_made_is_moved_into_its_day_when_made(catalog: Catalog, resolver: Resolver) -> None:
    later = time.time() + 40 * DAY
    event = ol_run_event(run_id=rid(1), time=epoch_text(later))
    intake = catalog_intake(catalog, resolver)
    assert statuses(intake, [event]) == ["accepted"]
    assert where(catalog) == {rid(1): partitions.DEFAULT}
    made = retention.prepare(catalog.db, later)  # a pass 40 days on
    day = partitions.day_name(datetime.fromtimestamp(later, UTC).date())
    assert day in made and where(catalog) == {rid(1): day}
    assert statuses(intake, [event]) == ["duplicate"]


def test_the_migration_partitions_the_received_events_of_an_existing_catalog(
    postgres: PostgresServer, postgres_url: str, resolver: Resolver
) -> None:
    """Migration 0016 on a catalog of version 15: its events copied into the partitioned table,
    with their keys, and the table the same as a new catalog's."""
    today = datetime.now(UTC).date()
    recent = epoch_text(time.time() - 3 * DAY)
    events = [ol_run_event(run_id=rid(1), time=recent), ol_run_event(run_id=rid(2), time="2001-01-01T00:00:00Z")]
    with Catalog(postgres_url) as catalog:
        catalog_intake(catalog, resolver).take(events)
        before = catalog._conn.execute("SELECT pk, event_time, digest FROM received_events ORDER BY pk").fetchall()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as version 15 kept them
        undo_kept_writers_gone(conn.execute)  # migration 0038's
        undo_alerts_told(conn.execute)  # migration 0037's
        undo_health_purged(conn.execute)  # migration 0035's
        undo_kept_edges(conn.execute)  # migration 0033's
        undo_alert_heads(conn.execute)  # migration 0032's
        undo_unwritten_outputs(conn.execute)  # migration 0029's
        undo_lineage_by_run(conn.execute)  # migration 0028's
        undo_uses_by_asset_in_time(conn.execute)  # migration 0027's
        undo_edges_by_whole_key(conn.execute)  # migration 0026's
        undo_own_facts_kept(conn.execute)  # migration 0025's
        undo_runs_partitioned(conn.execute, "postgresql")  # migration 0022's
        undo_writes_kept(conn.execute)  # migration 0021's
        undo_asset_filters(conn.execute)  # migration 0020's
        undo_ui_reads(conn.execute, "postgresql")  # migration 0019's
        unpartition_received(conn)
        assert conn.execute("SELECT count(*) FROM pg_inherits").fetchone() == (0,)
        conn.execute("ALTER TABLE asset_checks DROP COLUMN check_rank")  # migration 0017's
        conn.execute("DROP INDEX task_runs_task")
        conn.execute("DROP TABLE asset_health, health_marks")  # migration 0018's
        conn.execute("UPDATE alembic_version SET version_num = '0015'")
    code, out, err = invoke(postgres_url, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 15, err
    with Catalog(postgres_url) as catalog:
        after = catalog._conn.execute("SELECT pk, event_time, digest FROM received_events ORDER BY pk").fetchall()
        assert after == before  # keys kept: a pending forward still points at its event
        three_days_ago = datetime.fromisoformat(recent.replace("Z", "+00:00")).date()
        assert where(catalog) == {rid(1): partitions.day_name(three_days_ago), rid(2): partitions.DEFAULT}
        assert partitions.day_name(today + timedelta(days=partitions.AHEAD)) in days(catalog)
        intake = catalog_intake(catalog, resolver)
        assert statuses(intake, [*events, ol_run_event(run_id=rid(3), time=recent)]) == [
            "duplicate",
            "duplicate",
            "accepted",
        ]
        newest = catalog._conn.execute("SELECT max(pk) FROM received_events").fetchone()[0]
        assert newest > before[-1][0]  # the key counts on past the copied ones
    assert table_as_made(postgres_url) == table_as_made(postgres.url(postgres.create_database()))


def table_as_made(url: str) -> dict[str, Any]:
    """The received events' table (columns, keys, indexes, checks) as SQLAlchemy reads it; a new
    catalog made at ``url`` when it is empty."""
    Catalog(url).close()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as connection:
            return dict(schema_read(connection)["received_events"])
    finally:
        engine.dispose()


def drop_days_ahead(catalog: Catalog) -> list[str]:
    """The partitions of today and the days ahead dropped, as on a catalog a week old; their names."""
    today = partitions.day_name(datetime.now(UTC).date())
    ahead = [name for name in days(catalog) if name >= today]
    with catalog.transaction() as cur:
        for name in ahead:
            cur.execute(f"DROP TABLE {name}")
    assert ahead and not [name for name in days(catalog) if name >= today]
    return ahead


def test_serve_makes_the_days_ahead_as_it_starts_and_its_writer_now_and_then(
    catalog: Catalog, postgres_url: str
) -> None:
    ahead = drop_days_ahead(catalog)
    with serve_process(postgres_url) as served:
        assert days(catalog)[-len(ahead) :] == ahead
        served.process.terminate()
        served.process.wait(timeout=30)
    drop_days_ahead(catalog)
    upkeep = catalog.engine.maintenance(catalog._conn, wal_limit=0, every=1.0)  # the writer's
    assert isinstance(upkeep, partitions.DayPartitions)
    upkeep.step(contextlib.nullcontext())
    upkeep.close()
    assert days(catalog)[-len(ahead) :] == ahead


def test_the_command_counts_what_dropping_the_days_past_the_window_deletes(
    catalog: Catalog, postgres_url: str, resolver: Resolver, tmp_path: Path
) -> None:
    """``olbridge retention --dry-run`` counts the rows of the days it will drop, and the real
    pass's counts are the same; the days are gone after it."""
    now = time.time()
    old_days = [datetime.fromtimestamp(now - n * DAY, UTC).date() for n in (10, 9)]
    partitions.ensure(catalog.db, now - 10 * DAY, ahead=1)
    events = [ol_run_event(run_id=rid(n), time=epoch_text(now - n * DAY)) for n in (10, 9, 1)]
    assert statuses(catalog_intake(catalog, resolver), events) == ["accepted"] * 3
    assert {where(catalog)[rid(n)] for n in (10, 9)} == {partitions.day_name(d) for d in old_days}
    dry, real = dry_and_real(postgres_url, tmp_path, 'received_events = "7d"')
    assert dry["receivedEvents"] == real["receivedEvents"] == 2
    assert not {partitions.day_name(d) for d in old_days} & set(days(catalog))
    assert sorted(where(catalog)) == [rid(1)]


def dry_and_real(url: str, tmp_path: Path, windows: str) -> tuple[dict[str, int], dict[str, int]]:
    """The counts of ``olbridge retention --dry-run``, then of the real pass, with ``windows``."""
    config = tmp_path / "olbridge.toml"
    config.write_text(f'catalog = "{url}"\n[retention]\n{windows}\n')
    found = []
    for dry in (["--dry-run"], []):
        code, out, err = invoke(url, "--config", str(config), "retention", *dry, "--json")
        assert code == 0, err
        found.append(json.loads(out)["counts"])
    return found[0], found[1]


def test_receivers_making_the_same_days_at_once_each_go_on(catalog: Catalog, postgres_url: str) -> None:
    """Several processes starting together (receivers, a pass) make the missing days side by
    side: each day is made once, and none of them fails for it."""
    ahead = drop_days_ahead(catalog)
    made: list[str] = []
    others = [Catalog(postgres_url) for _ in range(3)]
    try:
        in_threads(
            lambda other: made.extend(retention.prepare(other.db, time.time())), [(c,) for c in others], timeout=60
        )
    finally:
        for other in others:
            other.close()
    assert sorted(made) == ahead  # each made by one of them
    assert days(catalog)[-len(ahead) :] == ahead


def test_a_groups_lookups_read_only_the_days_of_its_events(
    catalog: Catalog, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's check of which events of a group were received, and its read of the runs it
    merges into, go to PostgreSQL as one lookup of a JSON array, which tells the planner nothing of
    the days the tuples are in: the lookup takes the days of the tuples' keys, so that only those
    days' partitions are planned and probed, not every day kept (a cost that grew with the
    window), and finds the same rows, each once; with the days, it is still one probe of the key a
    tuple, never a read of a whole partition."""
    from bridge.catalog import sql_received
    from bridge.catalog.postgres.lookups import DAYS_AT_MOST

    partitions.ensure(catalog.db, NOW - 20 * DAY, ahead=21)  # 2025-05-12 to 2025-06-02
    with catalog.transaction() as cur:
        cur.executemany(
            "INSERT INTO received_events (digest, kind, event_type, event_time, producer, warnings, body) "
            "VALUES (?, 'RunEvent', 'START', ?, 'p', '[]', '{}')",
            [(f"d{day}-{n}", at(day, n)) for day in range(12, 32) for n in range(3)]
            + [("old", "2001-01-01T00:00:00Z")],
        )
        cur.executemany(
            "INSERT INTO external_sources (source, job_namespace, job_name, state_rank, first_seen, last_seen, "
            "producer, inputs, outputs, warnings, run_day) "
            "VALUES (?, 'ns', 'j', '', 't', 't', 'p', '[]', '[]', '[]', ?)",
            [(f"s{day}", f"2025-05-{day:02d}") for day in range(12, 32)] + [(f"job{n}", "") for n in range(2000)],
        )
    sent: list[tuple[str, Any]] = []  # what the cursor sends the server
    send = psycopg.Cursor.execute
    monkeypatch.setattr(
        psycopg.Cursor, "execute", lambda cur, q, p=None, **kw: (sent.append((q, p)), send(cur, q, p, **kw))[1]
    )

    # a group of events of the 20th to the 22nd, some never received, and one long ago
    pairs = [(at(day, n), f"d{day}-{n}") for day in (20, 21, 22) for n in range(5)] + [("2001-01-01T00:00:00Z", "old")]
    pairs += [(at(21, 9), f"new{n}") for n in range(20)] + [pairs[0]] * 3  # more than 25 pairs: one lookup
    params = [part for pair in pairs for part in pair]
    cur = catalog._conn.cursor()
    found = [row[0] for row in cur.execute(sql_received.received_digests(len(pairs)), params)]
    assert sorted(found) == sorted({f"d{day}-{n}" for day in (20, 21, 22) for n in range(3)} | {"old"})
    sources = [(f"s{day}", f"2025-05-{day:02d}") for day in (14, 15)] + [("job7", ""), ("job8", "")]
    sources += [("s99", "2025-05-15")] * 30
    by_day = [part for pair in sources for part in pair]
    assert [row[0] for row in cur.execute(sql_received.sources_of(len(sources)), by_day)] == [
        "s14",
        "s15",
        "job7",
        "job8",
    ]
    with catalog.transaction() as locking:
        locked = locking.execute(sql_received.locked_sources_of(len(sources)), by_day).fetchall()
    assert [row[0] for row in locked] == ["job7", "job8", "s14", "s15"]  # as ORDER BY source has them

    # a group of one event: the same lookup, of its day alone (on the catalog's connection now: a
    # transaction a second after the first takes a new one, for new plans, and closes the one before)
    cur = catalog._conn.cursor()
    assert [row[0] for row in cur.execute(sql_received.received_digests(1), [at(21, 2), "d21-2"])] == ["d21-2"]

    # the plans of what was sent: the days of the tuples, and the default partition (the event
    # long ago) alone, each probed by its key
    sent = [(query, values) for query, values in sent if values is not None]  # not BEGIN, COMMIT
    assert len(sent) == 4
    plans = []
    monkeypatch.undo()
    plain = psycopg.connect(postgres_url, autocommit=True)
    tables = ("received_events", "external_sources", "external_sources", "received_events")
    for (query, values), table in zip(sent, tables, strict=True):
        plan = "\n".join(row[0] for row in plain.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {query}", values))
        plans.append(sorted(set(re.findall(rf"on ({table}_\w+)", plan))))
        assert "Nested Loop" in plan and "Seq Scan" not in plan and "Rows Removed" not in plan, plan
    assert plans[0] == ["received_events_default", *(f"received_events_p202505{d}" for d in (20, 21, 22))]
    assert (
        plans[1]
        == plans[2]
        == [
            "external_sources_p20250514",
            "external_sources_p20250515",
            "external_sources_undated",
        ]
    )
    assert plans[3] == ["received_events_p20250521"]
    plain.close()

    # a group of events of more days than a lookup names one by one: the range from the first to the last
    many = [(at(day, 1), f"d{day}-1") for day in range(14, 15 + DAYS_AT_MOST)] * 3
    params = [part for pair in many for part in pair]
    found = [row[0] for row in cur.execute(sql_received.received_digests(len(many)), params)]
    assert sorted(found) == sorted(f"d{day}-1" for day in range(14, 15 + DAYS_AT_MOST))
