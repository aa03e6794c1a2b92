"""Received runs keyed by the day of their UUIDv7 run ids, and on PostgreSQL partitioned by it: each
run in its day's partition (any other in the default one), found again by every event of it
whenever it comes, expiry that drops a day of runs whole but never the latest run of a job (the
dry run's count the same), and the migration that gives the runs of an existing catalog their days.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.uuid import generate_new_uuid, generate_static_uuid

from bridge.catalog import Catalog, retention
from bridge.catalog.postgres import partitions
from bridge.catalog.retention import Windows
from bridge.catalog.runs import Runs
from bridge.mapping import Resolver
from bridge.model.received import NO_DAY, run_day
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake
from bridge.receiver.intake import Intake
from tests.helpers import JOB_EVENT_URL, PRODUCER, invoke, ol_dataset, ol_run_event
from tests.test_engines import (
    undo_alert_heads,
    undo_alerts_told,
    undo_edges_by_whole_key,
    undo_health_due,
    undo_health_purged,
    undo_kept_edges,
    undo_kept_writers_gone,
    undo_lineage_by_run,
    undo_own_facts_kept,
    undo_runs_partitioned,
    undo_unwritten_outputs,
    undo_uses_by_asset_in_time,
    undo_writers_by_task,
)
from tests.test_partitions import dry_and_real
from tests.test_receiver_columns import spark_event

DAY = 86400.0
NOW = datetime(2025, 6, 1, 6, tzinfo=UTC).timestamp()  # the window of 7 days starts 2025-05-25T06:00
WEEK = Windows(external_runs=7 * DAY, column_edges=True)
RAW = ol_dataset("s3://raw", "orders")


def v7(day: date, n: int, hour: int = 12) -> str:
    """The ``n``th UUIDv7 run id made at noon (or ``hour``) of a day, by openlineage-python."""
    return str(generate_static_uuid(datetime(day.year, day.month, day.day, hour, tzinfo=UTC), str(n).encode()))


def may(day: int) -> date:
    return date(2025, 5, day)


def at(day: int, hour: int = 12) -> str:
    return f"2025-05-{day:02d}T{hour:02d}:00:00Z"


def with_facet(event: dict[str, Any]) -> dict[str, Any]:
    """The event with a run facet (kept per run in external_facets)."""
    event["run"]["facets"] = {
        "acme_cost": {"_producer": PRODUCER, "_schemaURL": "https://acme.example/cost.json", "dollars": 3}
    }
    return event


def job_event(namespace: str, name: str, time: str) -> dict[str, Any]:
    return {
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": JOB_EVENT_URL,
        "job": {"namespace": namespace, "name": name},
        "inputs": [RAW],
        "outputs": [],
    }


def statuses(intake: Intake, events: list[dict[str, Any]]) -> list[str]:
    return [o.status for o in intake.take(events)]


def where(catalog: Catalog) -> dict[str, str]:
    """Each received run's (or job's) partition, by its source."""
    found = catalog._conn.execute("SELECT tableoid::regclass::text, source FROM external_sources").fetchall()
    return {str(source): str(table) for table, source in found}


def run_days(catalog: Catalog) -> dict[str, str]:
    return dict(catalog._conn.execute("SELECT source, run_day FROM external_sources").fetchall())


def run_partitions(catalog: Catalog) -> list[str]:
    return sorted(partitions.days(catalog._conn, partitions.RUNS).values())


# --- the day of a run id ---------------------------------------------------------------------


def test_a_run_day_is_the_utc_day_of_a_uuid7_run_id_and_nothing_else() -> None:
    """openlineage-python's run ids (UUIDv7) tell their day; any other id, a job, or a time out of
    reason tells none; the same source always the same day, whatever the clock."""
    for instant in (datetime(2025, 5, 20, 23, 59, 59, 999000, tzinfo=UTC), datetime(2031, 1, 1, tzinfo=UTC)):
        assert run_day(f"run:{generate_new_uuid(instant)}") == instant.date().isoformat()
    late_evening = datetime(2025, 5, 20, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # the 21st in UTC
    assert run_day(f"run:{generate_new_uuid(late_evening)}") == "2025-05-21"
    assert run_day(f"run:{str(generate_new_uuid(datetime(2025, 5, 20, tzinfo=UTC))).upper()}") == "2025-05-20"
    assert run_day(f"run:{uuid.uuid4()}") == NO_DAY
    assert run_day(f"run:{uuid.uuid1()}") == NO_DAY
    assert run_day("job:airflow/dag.task") == NO_DAY
    assert run_day(f"run:{generate_new_uuid(datetime(1999, 12, 31, 23, tzinfo=UTC))}") == NO_DAY
    assert run_day(f"run:{generate_new_uuid(datetime(2100, 1, 1, tzinfo=UTC))}") == NO_DAY
    assert run_day("run:ffffffff-ffff-7fff-bfff-ffffffffffff") == NO_DAY  # the year 10889
    assert run_day("run:0194a1b2-0000-7000-c000-000000000001") == NO_DAY  # not the RFC variant


# --- PostgreSQL: a partition a day ------------------------------------------------------------


@pytest.fixture
def catalog(postgres_url: str) -> Catalog:
    made = Catalog(postgres_url)
    partitions.ensure(made.db, NOW - 12 * DAY, ahead=14)  # 2025-05-20 to 2025-06-03
    return made


def test_runs_land_in_their_days_partition_and_every_event_of_a_run_finds_its_row(
    catalog: Catalog, resolver: Resolver
) -> None:
    intake = catalog_intake(catalog, resolver)
    old, other = v7(may(21), 1), str(uuid.uuid4())
    events = [
        ol_run_event("START", run_id=old, time=at(21)),
        ol_run_event("START", run_id=other, time=at(21)),
        job_event("airflow", "declared", at(21)),
    ]
    assert statuses(intake, events) == ["accepted"] * 3
    assert where(catalog) == {
        f"run:{old}": partitions.RUNS.day_name(may(21)),
        f"run:{other}": partitions.RUNS.undated,
        "job:airflow/declared": partitions.RUNS.undated,
    }
    # the run's end comes days later (an event of another time, into the day of its id), and a
    # copy of its start again: each finds the one row, which ends the run
    later = [ol_run_event("COMPLETE", run_id=old, time=at(30)), events[0], ol_run_event("COMPLETE", run_id=other)]
    assert statuses(intake, later) == ["accepted", "duplicate", "accepted"]
    found = {
        s: (state, last)
        for s, state, last in catalog._conn.execute("SELECT source, state, last_seen FROM external_sources")
    }
    assert {s: state for s, (state, _) in found.items()} == {
        "job:airflow/declared": None,
        f"run:{other}": "COMPLETE",
        f"run:{old}": "COMPLETE",
    }
    assert found[f"run:{old}"][1].startswith("2025-05-30")
    view = Runs(catalog, Converter(resolver)).get(old)  # the run's page: found by its source and day
    assert view is not None and view.state == "COMPLETE"


def test_a_run_whose_day_is_not_made_yet_is_moved_into_it_when_made(catalog: Catalog, resolver: Resolver) -> None:
    ahead = datetime.fromtimestamp(NOW + 30 * DAY, UTC).date()
    run_id = v7(ahead, 1)
    intake = catalog_intake(catalog, resolver)
    assert statuses(intake, [ol_run_event("START", run_id=run_id, time=at(31))]) == ["accepted"]
    assert where(catalog) == {f"run:{run_id}": partitions.RUNS.default}
    made = retention.prepare(catalog.db, NOW + 30 * DAY)
    assert partitions.RUNS.day_name(ahead) in made
    assert where(catalog) == {f"run:{run_id}": partitions.RUNS.day_name(ahead)}
    assert statuses(intake, [ol_run_event("COMPLETE", run_id=run_id, time=at(31, 13))]) == ["accepted"]
    assert catalog._conn.execute("SELECT count(*), max(state) FROM external_sources").fetchone() == (1, "COMPLETE")


def test_expiry_drops_a_day_of_runs_but_never_the_latest_run_of_a_job(catalog: Catalog, resolver: Resolver) -> None:
    """Job a ran on the 20th, 21st and 31st; job b on the 22nd only (its latest run, kept however
    old); spark on the 20th (with column lineage) and the 31st. The 20th and the 21st are dropped
    whole, with their runs' facets and column edges; the 22nd stays (its run is b's latest); a
    run of the default partition (no day in its id) goes in batches; the dry run counts it all."""
    intake = catalog_intake(catalog, resolver)
    plain = str(uuid.uuid4())
    events = [
        with_facet(ol_run_event(run_id=v7(may(20), 1), job=("old", "a"), inputs=[RAW], time=at(20))),
        with_facet(ol_run_event(run_id=v7(may(21), 2), job=("old", "a"), inputs=[RAW], time=at(21))),
        ol_run_event(run_id=plain, job=("old", "a"), inputs=[RAW], time=at(21, 13)),
        with_facet(ol_run_event(run_id=v7(may(22), 3), job=("old", "b"), inputs=[RAW], time=at(22))),
        ol_run_event(run_id=v7(may(31), 4), job=("old", "a"), inputs=[RAW], time=at(31)),
        {**spark_event(), "eventTime": at(20), "run": {"runId": v7(may(20), 5)}},
        ol_run_event(run_id=v7(may(31), 6), job=("spark", "orders_export"), time=at(31)),
    ]
    assert statuses(intake, events) == ["accepted"] * len(events)
    first = {**events[0], "eventType": "START"}  # its start, re-sent before the pass: recognised
    assert statuses(intake, [events[0]]) == ["duplicate"] and statuses(intake, [first]) == ["accepted"]
    edges = "SELECT count(*) FROM column_lineage WHERE substr(source, 1, 4) = 'run:'"
    assert catalog._conn.execute(edges).fetchone()[0] > 0
    counted = retention.count(catalog.db, WEEK, NOW)
    assert counted["externalRuns"] == 4  # a's three old runs and spark's old one; b's only run stays
    assert counted["columnEdges"] == catalog._conn.execute(edges).fetchone()[0]
    deleted = retention.expire(catalog.db, WEEK, NOW, pause=0, batch=1)
    assert deleted == counted
    days = run_partitions(catalog)
    assert partitions.RUNS.day_name(may(20)) not in days and partitions.RUNS.day_name(may(21)) not in days
    assert partitions.RUNS.day_name(may(22)) in days  # b's latest run holds it
    assert sorted(where(catalog)) == sorted(f"run:{v7(may(d), n)}" for d, n in ((22, 3), (31, 4), (31, 6)))
    facets = catalog._conn.execute("SELECT owner FROM external_facets WHERE substr(owner, 1, 4) = 'run:'").fetchall()
    assert facets == [(f"run:{v7(may(22), 3)}",)]
    assert catalog._conn.execute(edges).fetchone()[0] == 0
    assert retention.count(catalog.db, WEEK, NOW) == dict.fromkeys(retention.KINDS, 0)
    # b runs again: its old run is no longer its latest, and its day goes whole at the next pass
    assert statuses(intake, [ol_run_event(run_id=v7(may(31), 7), job=("old", "b"), time=at(31, 13))]) == ["accepted"]
    assert retention.expire(catalog.db, WEEK, NOW, pause=0)["externalRuns"] == 1
    assert partitions.RUNS.day_name(may(22)) not in run_partitions(catalog)
    # a run that went is a new run when an event of it comes again (into the default partition)
    again = ol_run_event("FAIL", run_id=v7(may(21), 2), job=("old", "a"), time=at(21, 14))
    assert statuses(intake, [again]) == ["accepted"]
    assert where(catalog)[f"run:{v7(may(21), 2)}"] == partitions.RUNS.default  # its day is gone


def test_a_dropped_day_of_runs_leaves_what_health_reads_of_them(catalog: Catalog, resolver: Resolver) -> None:
    """Job a wrote orders and customers on the 20th, then customers only on the 31st: the 20th is
    dropped whole, and orders, last written by its run, is as stale after as before (not UNKNOWN)."""
    from bridge.model.health import FreshnessRule, Match, Selector

    intake = catalog_intake(catalog, resolver)
    tables = [ol_dataset("postgres://db:5432", name) for name in ("shop.orders", "shop.customers")]
    events = [
        ol_run_event(run_id=v7(may(20), 1), job=("old", "a"), inputs=[RAW], outputs=tables, time=at(20)),
        ol_run_event(run_id=v7(may(31), 2), job=("old", "a"), inputs=[RAW], outputs=tables[1:], time=at(31)),
    ]
    assert statuses(intake, events) == ["accepted"] * 2
    daily = [Selector(Match(), FreshnessRule.create(max=timedelta(days=1)))]
    judged_at = datetime.fromtimestamp(NOW, UTC)
    before = {h.asset_id: h for h in catalog.health(judged_at, daily)}
    orders = before["postgres://db:5432/shop.orders"]
    assert orders.health.value == "FAIL" and orders.verdict.reasons[0].startswith("stale: last written 2025-05-20")
    assert retention.expire(catalog.db, WEEK, NOW, pause=0)["externalRuns"] == 1
    assert partitions.RUNS.day_name(may(20)) not in run_partitions(catalog)  # dropped whole
    assert {h.asset_id: h for h in catalog.health(judged_at, daily)} == before


def test_a_day_of_runs_a_writer_holds_is_left_to_the_batches(catalog: Catalog, resolver: Resolver) -> None:
    intake = catalog_intake(catalog, resolver)
    events = [ol_run_event(run_id=v7(may(d), d), job=("old", "a"), time=at(d)) for d in (20, 31)]
    assert statuses(intake, events) == ["accepted"] * 2
    writer = catalog.engine.connect()  # a receiver's writer, its transaction in flight
    try:
        writer.execute("BEGIN")
        writer.execute("SELECT count(*) FROM external_sources WHERE run_day = '2025-05-31'")
        assert retention.expire(catalog.db, WEEK, NOW, pause=0)["externalRuns"] == 1
        assert partitions.RUNS.day_name(may(20)) in run_partitions(catalog)  # not dropped: held
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    assert sorted(where(catalog)) == [f"run:{v7(may(31), 31)}"]


def test_the_command_counts_what_dropping_days_of_runs_deletes(
    catalog: Catalog, postgres_url: str, resolver: Resolver, tmp_path: Path
) -> None:
    now = time.time()
    old = [datetime.fromtimestamp(now - n * DAY, UTC).date() for n in (10, 9)]
    partitions.ensure(catalog.db, now - 10 * DAY, ahead=1)
    events = [
        ol_run_event(run_id=v7(day, n), time=f"{day.isoformat()}T12:00:00Z") for n, day in enumerate(old, start=1)
    ]
    today = datetime.fromtimestamp(now, UTC).date()
    events.append(ol_run_event(run_id=v7(today, 3, hour=0), time=f"{today.isoformat()}T00:00:00Z"))
    assert statuses(catalog_intake(catalog, resolver), events) == ["accepted"] * 3
    assert {where(catalog)[f"run:{v7(day, n)}"] for n, day in enumerate(old, start=1)} == {
        partitions.RUNS.day_name(day) for day in old
    }
    dry, real = dry_and_real(postgres_url, tmp_path, 'external_runs = "7d"')
    assert dry["externalRuns"] == real["externalRuns"] == 2
    assert not {partitions.RUNS.day_name(day) for day in old} & set(run_partitions(catalog))
    assert sorted(where(catalog)) == [f"run:{v7(today, 3, hour=0)}"]


# --- the migration, on both engines -------------------------------------------------------------


@pytest.mark.both_engines
def test_the_migration_gives_the_stored_runs_their_days(catalog_target: str, engine: str, resolver: Resolver) -> None:
    """Migration 0022 on a catalog of version 21 holding runs: each run keyed by its day (on
    PostgreSQL in its day's partition when recent), the rest as they were; an event of a stored
    run then finds it."""
    recent = datetime.fromtimestamp(time.time() - 3 * DAY, UTC)
    runs = [v7(recent.date(), 1), v7(date(2020, 1, 2), 2), str(uuid.uuid4())]
    started = recent.strftime("%Y-%m-%dT%H:%M:%SZ")
    events = [ol_run_event("START", run_id=r, time=started) for r in runs] + [job_event("a", "b", started)]
    with Catalog(catalog_target) as catalog:
        assert statuses(catalog_intake(catalog, resolver), events) == ["accepted"] * 4
        columns = "source, job_namespace, job_name, run_id, state, first_seen, last_seen, inputs, outputs"
        before = catalog._conn.execute(f"SELECT {columns} FROM external_sources ORDER BY source").fetchall()

        def back_to_21(cur: Any) -> None:
            undo_kept_writers_gone(cur.execute)  # migration 0038's
            undo_alerts_told(cur.execute)  # migration 0037's
            undo_health_purged(cur.execute)  # migration 0035's
            undo_kept_edges(cur.execute)  # migration 0033's
            undo_alert_heads(cur.execute)  # migration 0032's
            undo_writers_by_task(cur.execute)  # migration 0031's
            undo_unwritten_outputs(cur.execute)  # migration 0029's
            undo_lineage_by_run(cur.execute)  # migration 0028's
            undo_uses_by_asset_in_time(cur.execute)  # migration 0027's
            undo_edges_by_whole_key(cur.execute)  # migration 0026's
            undo_own_facts_kept(cur.execute)  # migration 0025's
            undo_health_due(cur.execute)  # migration 0024's
            undo_runs_partitioned(cur.execute, engine)
            cur.execute("UPDATE alembic_version SET version_num = '0021'")
            catalog.db.engine.stamp(cur, 21)

        catalog.db.write(back_to_21)
        assert "run_day" not in [c[0] for c in catalog._conn.execute("SELECT * FROM external_sources").description]
    code, out, err = invoke(catalog_target, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 21, err
    with Catalog(catalog_target) as catalog:
        assert catalog._conn.execute(f"SELECT {columns} FROM external_sources ORDER BY source").fetchall() == before
        assert run_days(catalog) == {
            f"run:{runs[0]}": recent.date().isoformat(),
            f"run:{runs[1]}": "2020-01-02",
            f"run:{runs[2]}": NO_DAY,
            "job:a/b": NO_DAY,
        }
        if engine == "postgresql":
            assert where(catalog) == {
                f"run:{runs[0]}": partitions.RUNS.day_name(recent.date()),
                f"run:{runs[1]}": partitions.RUNS.default,  # older than the days made
                f"run:{runs[2]}": partitions.RUNS.undated,
                "job:a/b": partitions.RUNS.undated,
            }
            today = datetime.now(UTC).date()
            assert partitions.RUNS.day_name(today + timedelta(days=partitions.AHEAD)) in run_partitions(catalog)
        ended = [ol_run_event("COMPLETE", run_id=r, time=started) for r in runs]
        assert statuses(catalog_intake(catalog, resolver), ended) == ["accepted"] * 3
        states = catalog._conn.execute("SELECT state FROM external_sources WHERE run_id IS NOT NULL").fetchall()
        assert states == [("COMPLETE",)] * 3
