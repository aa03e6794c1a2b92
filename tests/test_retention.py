"""Retention: what outlived its window goes, in batches; what current lineage needs stays; the dry
run counts what the real pass deletes; a re-sent event is recognised as long as it is kept; one
pass at a time across the catalog's processes; ``serve`` runs it on its schedule."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from bridge.catalog import Catalog, health, retention
from bridge.catalog.outbox import ALERTS_ONLY_TARGET
from bridge.catalog.retention import KINDS, Windows
from bridge.catalog.workers import StreamWorkerInfo
from bridge.cli import cli
from bridge.config import RetentionConfig, parse_config
from bridge.errors import ConfigError
from bridge.mapping import Resolver
from bridge.model import TaskState
from bridge.model.times import epoch_text
from bridge.receiver.imports import catalog_intake
from bridge.receiver.intake import Intake
from tests.helpers import ol_dataset, ol_run_event, serve_process
from tests.test_receiver_columns import spark_event

pytestmark = pytest.mark.both_engines

NOW = datetime(2025, 6, 1, tzinfo=UTC).timestamp()
OLD, RECENT = "2025-03-01T08:00:00Z", "2025-05-31T08:00:00Z"  # 92 days and a day before NOW
WEEK = 7 * 86400.0
ALL = Windows(
    received_events=WEEK,
    external_runs=WEEK,
    dead_letters=WEEK,
    delivery_errors=WEEK,
    delivered_outbox=WEEK,
    column_edges=True,
)
RAW, TABLE = ol_dataset("s3://raw", "orders"), ol_dataset("postgres://db:5432", "shop.public.orders", owner={})


def rid(n: int) -> str:
    return f"0194a1b2-0000-7000-8000-{n:012d}"


@pytest.fixture
def intake(catalog: Catalog, resolver: Resolver) -> Intake:
    return catalog_intake(catalog, resolver)


def build(catalog: Catalog, intake: Intake) -> None:
    """Job ``old.a``: two old runs (the second its latest); job ``old.b``: one old run, reading
    and writing placeholders nobody has named since; job ``spark``: an old run with column
    lineage and a recent one without; a dead letter and a pending outbox row, both old; an old
    delivery error."""
    events = [
        ol_run_event("START", run_id=rid(1), job=("old", "a"), inputs=[RAW], outputs=[TABLE], time=OLD),
        ol_run_event("COMPLETE", run_id=rid(1), job=("old", "a"), inputs=[RAW], outputs=[TABLE], time=OLD),
        ol_run_event("COMPLETE", run_id=rid(2), job=("old", "a"), inputs=[RAW], time="2025-03-02T08:00:00Z"),
        ol_run_event("COMPLETE", run_id=rid(3), job=("old", "b"), inputs=[RAW], outputs=[TABLE], time=OLD),
        {**spark_event(), "eventTime": OLD},
        ol_run_event("COMPLETE", run_id=rid(5), job=("spark", "orders_export"), time=RECENT),
    ]
    outcomes = intake.take(events)
    assert [o.status for o in outcomes] == ["accepted"] * len(events)
    with catalog.transaction() as cur:
        insert = "INSERT INTO outbox (kind, ref, run_key, queued_at, state) VALUES (?, ?, ?, ?, ?)"
        cur.execute(insert, ("run-start", 1, "run:1", "2025-03-01T00:00:00.000000Z", "pending"))
        cur.execute(insert, ("run-end", 2, "run:2", "2025-03-01T00:00:00.000000Z", "dead"))
        # a dead START its run's end waits behind: kept (deleted, the end would go out without it)
        cur.execute(insert, ("run-start", 7, "run:7", "2025-03-01T00:00:00.000000Z", "dead"))
        cur.execute(insert, ("run-end", 7, "run:7", "2025-03-01T00:00:00.000000Z", "pending"))
        cur.execute(
            "INSERT INTO delivery_errors (source, target, failure, status, detail, at) VALUES (?, ?, ?, ?, ?, ?)",
            ("stream", "http://backend", "timeout", None, "", "2025-03-01T00:00:00.000000Z"),
        )


def rows(catalog: Catalog, statement: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in catalog._conn.execute(statement).fetchall())


def expire(catalog: Catalog, windows: Windows = ALL, now: float = NOW, **options: Any) -> dict[str, int]:
    return retention.expire(catalog.db, windows, now, pause=0, **options)


def test_the_dry_run_counts_what_the_real_pass_deletes(catalog: Catalog, intake: Intake) -> None:
    build(catalog, intake)
    counted = retention.count(catalog.db, ALL, NOW)
    assert counted == {
        "receivedEvents": 5,  # all but the recent one
        "externalRuns": 2,  # old.a's first and spark's old run; old.a's and old.b's latest stay
        "columnEdges": 4,  # the old spark run's; it goes in the same pass
        "deadLetters": 1,
        "deliveryErrors": 1,
        "taskRuns": 0,  # kept: no window
        "deliveredOutbox": 0,  # the stream deletes them as it delivers them
        "pendingOutbox": 0,  # kept: no window
        "checks": 0,  # kept: no window
    }
    deleted = expire(catalog, batch=2)  # several batches of each kind
    assert deleted == counted
    assert set(deleted) == set(KINDS)
    assert retention.count(catalog.db, ALL, NOW) == dict.fromkeys(KINDS, 0)
    assert rows(catalog, "SELECT kind, state FROM outbox WHERE run_key = 'run:7'") == [
        ("run-end", "pending"),
        ("run-start", "dead"),
    ]


def checked(n: int, table: str, time: str, success: bool) -> dict[str, Any]:
    """A received run whose input ``table`` carries a data-quality assertion (recorded as a check)."""
    dataset = ol_dataset("postgres://db:5432", f"shop.public.{table}")
    dataset["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [{"assertion": "not_null", "success": success, "column": "id"}],
        }
    }
    return ol_run_event("COMPLETE", run_id=rid(n), job=("gx", f"{table}_suite"), inputs=[dataset], time=time)


def test_checks_go_but_each_assets_latest_stays_and_health_now_is_unchanged(catalog: Catalog, intake: Intake) -> None:
    """Checks reported before the window go; an asset's latest reported by now stays however old
    it is (``items``' only recent-enough answer), so no asset's health now changes; and so does its
    latest before the window (``orders``' of 2025-03-02), so that its health as of a time inside
    the window does not change either (it went, as a later check was reported by now, and
    ``orders`` was UNKNOWN as of the days between the window's start and its latest check)."""
    events = [
        checked(1, "orders", OLD, False),
        checked(2, "orders", "2025-03-02T08:00:00Z", True),
        checked(3, "orders", RECENT, False),
        checked(4, "items", OLD, True),
        checked(5, "items", "2025-03-02T08:00:00Z", False),  # items' latest: older than the window
    ]
    assert all(o.ok for o in intake.take(events))
    windows = Windows(checks=WEEK)
    checks = "SELECT asset_id, reported_at FROM asset_checks"
    reported = rows(catalog, checks)
    assert len(reported) == 5
    latest = {asset_id: max(t for a, t in reported if a == asset_id) for asset_id, _ in reported}

    def health_now(as_of: float = NOW) -> list[dict[str, Any]]:
        return [h.to_json() for h in health.assess(catalog._conn, [], datetime.fromtimestamp(as_of, UTC))]

    before = health_now()
    assert sorted(h["health"] for h in before) == ["FAIL", "FAIL"]  # orders' recent check, items' old one
    inside = NOW - 4 * 86400  # in the window, before orders' latest check
    before_inside = health_now(inside)
    assert [h["health"] for h in before_inside] == ["FAIL", "PASS"]  # items, orders (its check of 03-02)
    counted = retention.count(catalog.db, windows, NOW)
    assert counted == {**dict.fromkeys(KINDS, 0), "checks": 2}
    assert expire(catalog, windows, batch=1) == counted  # in batches
    assert rows(catalog, checks) == sorted([*latest.items(), ("shop.public.orders", "2025-03-02T08:00:00.000000Z")])
    assert health_now() == before
    assert health_now(inside) == before_inside
    assert retention.count(catalog.db, windows, NOW) == dict.fromkeys(KINDS, 0)
    assert retention.count(catalog.db, ALL, NOW)["checks"] == 0  # kept unless a window is given


def test_lineage_as_of_a_time_in_the_window_is_the_same_after_the_runs_go(
    catalog: Catalog, intake: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The received runs' edges outlive them (external_lineage, kept_edges): ``lineage`` now and
    health's at-risk walk kept them, but ``lineage --as-of`` (and the web view's time slider) dated
    a received edge by its runs alone, so that an edge whose runs went, or whose job's latest run
    no longer gives it, was gone as of every time, in the window too."""
    from bridge.catalog.lineage_steps import lineage_steps

    a, b, e, f = (ol_dataset("s3://x", name) for name in ("a", "b", "e", "f"))
    events = [
        ol_run_event("FAIL", run_id=rid(11), job=("x", "j1"), inputs=[a], outputs=[b], time=OLD),
        ol_run_event("COMPLETE", run_id=rid(12), job=("x", "j1"), inputs=[a], outputs=[b], time=RECENT),
        ol_run_event("COMPLETE", run_id=rid(13), job=("x", "j3"), inputs=[a], outputs=[e], time=OLD),
        ol_run_event("COMPLETE", run_id=rid(14), job=("x", "j3"), inputs=[a], outputs=[f], time=RECENT),
    ]
    assert all(o.ok for o in intake.take(events))
    inside = datetime.fromtimestamp(NOW - 4 * 86400, UTC)  # in the window, before the recent runs
    root = catalog.find_asset_id("s3://x/a", Resolver.load())
    assert root is not None

    def seen() -> tuple[Any, ...]:
        graph = catalog.lineage(root, direction="downstream", as_of=inside)
        steps = lineage_steps(catalog, root, direction="downstream")
        return (
            sorted((x.upstream, x.downstream, x.tasks) for x in graph.edges),
            sorted(steps.entered.items()),
        )

    before = seen()
    assert len(before[0]) == 2  # a -> b (j1's failed run), a -> e (j3's)
    assert expire(catalog, Windows(external_runs=WEEK))["externalRuns"] == 2
    assert seen() == before
    # and where the neighbourhood is past what is read through the indexes (every edge read)
    from bridge.catalog import lineage as lineage_module

    monkeypatch.setattr(lineage_module, "AS_OF_NODES_AT_MOST", 1)
    assert seen()[0] == before[0]


def test_what_current_lineage_needs_stays(catalog: Catalog, intake: Intake) -> None:
    """Placeholders old enough to expire, still bound to current jobs, their bindings and the
    datasets' latest facets, the last run of every job, and pending outbox rows all stay."""
    build(catalog, intake)
    kept = {
        "assets": "SELECT id, origin FROM assets",
        "bindings": "SELECT ol_namespace, ol_name, asset_id, last_seen FROM external_datasets",
        "usages": "SELECT * FROM external_usages",
        "lineage": "SELECT * FROM external_lineage",
        "facets": "SELECT owner, facet_key, facet FROM external_facets WHERE substr(owner, 1, 4) <> 'run:'",
    }
    before = {name: rows(catalog, statement) for name, statement in kept.items()}
    assert before["assets"] and before["usages"] and before["lineage"]
    assert max(r[3] for r in before["bindings"]) < "2025-05"  # old enough to expire
    expire(catalog)
    assert {name: rows(catalog, statement) for name, statement in kept.items()} == before
    runs = rows(catalog, "SELECT job_namespace, job_name, run_id FROM external_sources WHERE run_id IS NOT NULL")
    assert runs == [("old", "a", rid(2)), ("old", "b", rid(3)), ("spark", "orders_export", rid(5))]
    assert rows(catalog, "SELECT kind, state FROM outbox WHERE run_key <> 'run:7'") == [("run-start", "pending")]
    assert rows(catalog, "SELECT owner FROM external_facets WHERE owner = 'run:" + rid(1) + "'") == []


def test_a_re_sent_event_is_recognised_as_long_as_it_is_kept(catalog: Catalog, intake: Intake) -> None:
    """Inside the window a re-sent event is a duplicate; once its window is past and it went, the
    answer is the one any new event gets, and it is kept again."""
    old = ol_run_event(run_id=rid(7), job=("re", "sent"), inputs=[RAW], time=OLD)
    recent = ol_run_event(run_id=rid(8), job=("re", "sent"), inputs=[RAW], time=RECENT)
    first = [o.status for o in intake.take([old, recent])]
    assert first == ["accepted", "accepted"]
    assert [o.status for o in intake.take([old, recent])] == ["duplicate", "duplicate"]
    assert expire(catalog)["receivedEvents"] == 1
    assert [o.status for o in intake.take([old, recent])] == ["accepted", "duplicate"]
    assert len(rows(catalog, "SELECT pk FROM received_events")) == 2


def test_received_events_a_pending_forward_points_at_stay(catalog: Catalog, intake: Intake) -> None:
    intake.take([ol_run_event(run_id=rid(n), time=OLD) for n in (1, 2)])
    pks = [r[0] for r in rows(catalog, "SELECT pk FROM received_events")]
    with catalog.transaction() as cur:
        cur.execute(
            "INSERT INTO outbox (kind, ref, run_key, queued_at, payload) VALUES ('forward', ?, 'k', ?, '{}')",
            (pks[1], OLD),
        )
    assert retention.count(catalog.db, ALL, NOW)["receivedEvents"] == 1
    assert expire(catalog)["receivedEvents"] == 1
    assert [r[0] for r in rows(catalog, "SELECT pk FROM received_events")] == [pks[1]]


def test_task_runs_are_kept_unless_a_window_is_given(catalog: Catalog) -> None:
    from tests.conftest import at
    from tests.helpers import decl, run

    first = run("load", outputs=(decl("s3://b/old", type="Table"),), start=at(0), end=at(1), execution="e1")
    latest = run("load", outputs=(decl("s3://b/old", type="Table"),), start=at(10), end=at(11), execution="e2")
    catalog.record_each([first, latest])
    with catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox")  # delivered
    later = datetime.fromisoformat("2030-01-01T00:00:00+00:00").timestamp()
    assert expire(catalog, ALL, later)["taskRuns"] == 0
    with_runs = Windows(task_runs=WEEK)
    assert retention.count(catalog.db, with_runs, later)["taskRuns"] == 1
    assert expire(catalog, with_runs, later)["taskRuns"] == 1
    assert rows(catalog, "SELECT execution_id FROM task_runs") == [("e2",)]
    assert len(rows(catalog, "SELECT task_run_pk FROM usages")) == 1


def test_an_alerts_count_at_risk_walks_the_edges_of_deleted_runs_as_health_does(catalog: Catalog) -> None:
    """The edges of runs retention deleted are kept (kept_edges), and health's at-risk walk reads
    them; the health watch's count of the assets at risk below an asset turning FAIL (an alert's
    ``atRiskDownstream``, which counts what ``olbridge health`` shows at risk) did not: 0 where
    health showed 2."""
    from bridge.catalog import health_state
    from tests.conftest import at
    from tests.helpers import decl, run

    a, b, c, d = (decl(name, type="Table") for name in ("a", "b", "c", "d"))
    catalog.record_each(
        [
            run("t1", inputs=(a,), outputs=(b,), start=at(0), execution="e1"),  # a -> b, then deleted
            run("t2", inputs=(b,), outputs=(d,), start=at(0), execution="e1"),
            run("t1", inputs=(c,), outputs=(b,), start=at(10), execution="e2"),  # t1 reads c now
            run("t0", outputs=(a,), state="FAILED", start=at(12), execution="e3"),
        ]
    )
    with catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox")  # delivered
    later = datetime.fromisoformat("2030-01-01T00:00:00+00:00").timestamp()
    assert expire(catalog, Windows(task_runs=WEEK), later)["taskRuns"] == 1
    assert rows(catalog, "SELECT upstream_id, downstream_id FROM lineage WHERE upstream_id = 'a'") == []
    judged = health.assess(catalog._conn, [], datetime.fromtimestamp(later, UTC))
    at_risk = sorted(h.asset_id for h in judged if h.path and h.path[0] == "a")
    assert at_risk == ["b", "d"]
    assert health_state._downstream(catalog._conn, ["a"]) == {"a": len(at_risk)}


def test_events_nobody_delivered_go_by_whole_runs_and_free_the_task_runs_they_kept(catalog: Catalog) -> None:
    """``pending_outbox``: a catalog no stream delivers keeps every event queued, and with them
    every task run since the oldest. With a window, what was queued before it goes: a run's rows
    together, in one batch, its dead letter with them, once all are that old and the run has
    ended; an asset's changes and an alert's row by row; never a key whose first row a live claim
    holds; nothing while a stream to a backend is live. The task runs and received events they
    kept go by their own windows in the same pass; the dry run counts all."""
    from tests.conftest import at
    from tests.helpers import decl, run

    out = (decl("s3://b/daily", type="Table"),)
    runs = [run("load", outputs=out, start=at(10 * n), end=at(10 * n + 1), execution=f"e{n}") for n in range(6)]
    catalog.record_each(runs[:5])
    catalog.record_task_run(attrs.evolve(runs[5], state=TaskState.RUNNING, ended_at=None, outputs=()))  # e5 runs
    old, recent = "2025-01-01T00:00:00.000000Z", epoch_text(time.time())
    insert = "INSERT INTO outbox (kind, ref, run_key, queued_at, state, payload) VALUES (?, ?, ?, ?, ?, ?)"
    with catalog.transaction() as cur:
        cur.execute("UPDATE outbox SET queued_at = ?", (old,))
        pk = "(SELECT pk FROM task_runs WHERE execution_id = ?)"
        cur.execute(f"UPDATE outbox SET queued_at = ? WHERE kind = 'run-end' AND ref = {pk}", (recent, "e3"))
        cur.execute(f"UPDATE outbox SET state = 'dead' WHERE kind = 'run-start' AND ref = {pk}", ("e1",))
        cur.execute(  # (as of the pass, an hour on)
            f"UPDATE outbox SET claimed_by = 'w', claim_expires = ? WHERE kind = 'run-start' AND ref = {pk}",
            (time.time() + 3605, "e2"),
        )
        received = [("received:run:r1", old), ("received:run:r1", old), ("received:run:r2", old)]
        alerts = [("alert:a:x", old), ("alert:a:x", old), ("alert:a:x", recent)]
        for n, (key, when) in enumerate([*received, ("received:run:r2", recent), *alerts]):
            kind = "forward" if key.startswith("received") else "alert"
            cur.execute(insert, (kind, 10_000 + n, key, when, "pending", "{}"))
    waiting = "SELECT o.run_key, o.kind, o.queued_at FROM outbox o"
    before = rows(catalog, waiting)
    later = time.time() + 3600
    assert retention.count(catalog.db, Windows(task_runs=WEEK), later)["taskRuns"] == 0  # the events keep them
    every = Windows(task_runs=WEEK, pending_outbox=WEEK, dead_letters=WEEK)

    # a stream to a backend is live: nothing waiting goes (it delivers them when its backend is back)
    catalog.workers.beat(StreamWorkerInfo("w", "host", 1, "http://backend", "t", later), later)
    assert retention.count(catalog.db, every, later)["pendingOutbox"] == 0
    catalog.workers.release("w")
    catalog.workers.beat(StreamWorkerInfo("a", "host", 2, ALERTS_ONLY_TARGET, "t", later), later)  # alerts alone

    by_pk = dict(rows(catalog, "SELECT pk, execution_id FROM task_runs"))
    counted = retention.count(catalog.db, every, later)
    assert expire(catalog, every, later, batch=3) == counted
    left = rows(catalog, "SELECT run_key, kind FROM outbox")
    run_rows = [(by_pk[int(key[4:])], kind) for key, kind in left if key.startswith("run:")]
    assert sorted(run_rows) == [
        ("e2", "run-end"),  # a live claim holds its START: its end stays with it
        ("e2", "run-start"),
        ("e3", "run-end"),  # queued inside the window: its START stays with it
        ("e3", "run-start"),
        ("e5", "run-start"),  # still running: its end is to come
    ]  # e0's and e4's went whole, and e1's, its dead START with it
    assert ("received:run:r1", "forward") not in left and ("received:run:r2", "forward") in left
    assert [r for r in rows(catalog, waiting) if r[0] == "received:run:r2"] == [
        r for r in before if r[0] == "received:run:r2"
    ]  # a run with a recent row keeps all of its rows
    assert [r for r in rows(catalog, waiting) if r[0] == "alert:a:x"] == [("alert:a:x", "alert", recent)]
    assert counted["deadLetters"] == 0 and counted["taskRuns"] == 2  # e0 and e1; e2's rows keep the rest
    assert [e for _, e in rows(catalog, "SELECT pk, execution_id FROM task_runs")] == ["e2", "e3", "e4", "e5"]
    assert counted["pendingOutbox"] == len(before) - len(rows(catalog, waiting))
    assert retention.count(catalog.db, every, later) == dict.fromkeys(KINDS, 0)


def test_a_batch_of_waiting_events_takes_each_run_whole(catalog: Catalog) -> None:
    """Batches of one row: each takes the rest of its run with it, in its transaction, so that a
    stream between two batches never finds a run's end without its start."""
    from tests.conftest import at
    from tests.helpers import run

    catalog.record_each([run("load", start=at(10 * n), end=at(10 * n + 1), execution=f"e{n}") for n in range(3)])
    with catalog.transaction() as cur:
        cur.execute("UPDATE outbox SET queued_at = '2025-01-01T00:00:00.000000Z'")
    [kind] = [k for k in retention._kinds(Windows(pending_outbox=WEEK), time.time()) if k.name == "pendingOutbox"]
    keys = "SELECT run_key, count(*) FROM outbox GROUP BY run_key"
    assert [n for _, n in rows(catalog, keys)] == [2, 2, 2]
    batches = retention._batches(catalog.db, kind, 1)
    assert next(batches) == 2  # one row asked for, its run's two taken
    assert [n for _, n in rows(catalog, keys)] == [2, 2]
    assert list(batches) == [2, 2]


def test_the_dry_run_counts_the_task_runs_a_dead_letter_that_goes_kept(catalog: Catalog) -> None:
    """A dead letter of an old run keeps the task runs from its own on; the pass deletes it first,
    then those runs: the dry run counts them too."""
    from tests.conftest import at
    from tests.helpers import run

    catalog.record_each([run("load", start=at(10 * n), end=at(10 * n + 1), execution=f"e{n}") for n in range(3)])
    with catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox WHERE kind = 'run-end' OR ref <> (SELECT min(pk) FROM task_runs)")
        cur.execute("UPDATE outbox SET state = 'dead', queued_at = '2025-01-01T00:00:00.000000Z'")
    windows, later = Windows(task_runs=WEEK, dead_letters=WEEK), time.time() + 3600
    assert retention.count(catalog.db, Windows(task_runs=WEEK), later)["taskRuns"] == 0  # it keeps them
    counted = retention.count(catalog.db, windows, later)
    assert (counted["deadLetters"], counted["taskRuns"]) == (1, 2)  # e0 and e1; e2 is the latest
    assert expire(catalog, windows, later) == counted


def test_a_stream_that_stops_during_a_pass_frees_nothing_its_waiting_rows_kept(catalog: Catalog) -> None:
    """Whether a stream to a backend is live is decided once a pass: one that stops after the
    waiting rows were passed over (it was live) leaves them keeping their task runs."""
    from tests.conftest import at
    from tests.helpers import run

    catalog.record_each([run("load", start=at(10 * n), end=at(10 * n + 1), execution=f"e{n}") for n in range(3)])
    with catalog.transaction() as cur:
        cur.execute("UPDATE outbox SET queued_at = '2025-01-01T00:00:00.000000Z'")
        cur.execute(  # a dead letter that goes: a batch, after which the stream stops
            "INSERT INTO outbox (kind, ref, run_key, queued_at, state) "
            "VALUES ('asset-change', 1, 'asset:z', '2025-01-01T00:00:00.000000Z', 'dead')"
        )
    now = time.time()
    catalog.workers.beat(StreamWorkerInfo("w", "host", 1, "http://backend", "t", now), now)
    windows = Windows(pending_outbox=WEEK, task_runs=WEEK, dead_letters=WEEK)
    counted = retention.count(catalog.db, windows, now)
    assert (counted["pendingOutbox"], counted["deadLetters"], counted["taskRuns"]) == (0, 1, 0)
    stopped: list[str] = []

    def stop_the_stream() -> None:  # after the first batch of a kind: the stream stops, cleanly
        if not stopped:
            catalog.workers.release("w")
            stopped.append("w")

    assert retention.expire(catalog.db, windows, now, pause=0, between=stop_the_stream) == counted
    assert stopped and len(rows(catalog, "SELECT pk FROM task_runs")) == 3
    assert len(rows(catalog, "SELECT seq FROM outbox")) == 6


def test_a_batch_made_whole_counts_each_row_once(catalog: Catalog) -> None:
    """A run whose rows fall in two of a batch's chunks of keys and past its end: each row is
    taken (and counted) once."""
    old = "2025-01-01T00:00:00.000000Z"
    insert = "INSERT INTO outbox (kind, ref, run_key, queued_at, payload) VALUES (?, ?, ?, ?, '{}')"
    with catalog.transaction() as cur:
        for n in range(760):
            key = "received:run:r" if n in (0, 549, 759) else f"alert:a:{n}"
            cur.execute(insert, ("forward" if key.startswith("received") else "alert", n, key, old))
    windows = Windows(pending_outbox=WEEK)
    counted = retention.count(catalog.db, windows, time.time())
    assert counted["pendingOutbox"] == 760
    assert expire(catalog, windows, time.time(), batch=600) == counted
    assert rows(catalog, "SELECT seq FROM outbox") == []


def test_an_asset_s_changes_behind_a_dead_letter_stay_with_it(catalog: Catalog) -> None:
    """Row by row keys (an asset's changes) keep what waits behind a dead letter: the dead
    letters' rule keeps it while they wait, and they go out after it once it is retried."""
    old = "2025-01-01T00:00:00.000000Z"
    insert = "INSERT INTO outbox (kind, ref, run_key, queued_at, state) VALUES ('asset-change', ?, ?, ?, ?)"
    with catalog.transaction() as cur:
        for n, (key, state) in enumerate([("asset:a", "dead"), ("asset:a", "pending"), ("asset:b", "pending")]):
            cur.execute(insert, (n, key, old, state))
    windows = Windows(pending_outbox=WEEK, dead_letters=WEEK)
    counted = retention.count(catalog.db, windows, time.time())
    assert (counted["pendingOutbox"], counted["deadLetters"]) == (1, 0)  # asset:b's
    assert expire(catalog, windows, time.time()) == counted
    assert rows(catalog, "SELECT run_key, state FROM outbox") == [("asset:a", "dead"), ("asset:a", "pending")]


def test_an_asset_s_alerts_behind_a_dead_alert_go_and_so_does_the_dead_alert(catalog: Catalog) -> None:
    """A dead alert holds none of its asset's later alerts back (they are sent past it): those
    waiting go row by row, and the dead one goes with the dead letters, whatever waits after it;
    but nothing of a key whose first alert past its dead ones a live claim holds (a worker may be
    sending it)."""
    old = "2025-01-01T00:00:00.000000Z"
    insert = (
        "INSERT INTO outbox (kind, ref, run_key, queued_at, state, claimed_by, claim_expires, payload) "
        "VALUES ('alert', 0, ?, ?, ?, ?, ?, '{}')"
    )
    now = time.time()
    held = ("w", now + 3600)
    with catalog.transaction() as cur:
        for key, state, claim in [
            ("alert:a:x", "dead", (None, None)),
            ("alert:a:x", "pending", (None, None)),
            ("alert:a:x", "pending", (None, None)),
            ("alert:a:y", "dead", (None, None)),
            ("alert:a:y", "pending", held),
            ("alert:a:y", "pending", (None, None)),
        ]:
            cur.execute(insert, (key, old, state, *claim))
    windows = Windows(pending_outbox=WEEK, dead_letters=WEEK)
    counted = retention.count(catalog.db, windows, now)
    assert (counted["pendingOutbox"], counted["deadLetters"]) == (2, 2)  # x's waiting ones; both dead ones
    assert expire(catalog, windows, now) == counted
    assert rows(catalog, "SELECT run_key, state FROM outbox ORDER BY seq") == [("alert:a:y", "pending")] * 2


def test_a_stream_that_starts_during_a_pass_stops_the_waiting_rows_going(
    catalog: Catalog, catalog_target: str, tmp_path: Path
) -> None:
    """A stream to a backend that starts after a batch of waiting rows went: the next batch sees
    it and deletes nothing more (the stream sends the oldest runs first, whole); the command
    says why nothing waiting goes while one is live."""
    from tests.conftest import at
    from tests.helpers import run

    catalog.record_each([run("load", start=at(10 * n), end=at(10 * n + 1), execution=f"e{n}") for n in range(4)])
    with catalog.transaction() as cur:
        cur.execute("UPDATE outbox SET queued_at = '2025-01-01T00:00:00.000000Z'")
    now = time.time()

    def a_stream_starts() -> None:
        catalog.workers.beat(StreamWorkerInfo("w", "host", 1, "http://backend", "t", now), now)

    deleted = retention.expire(catalog.db, Windows(pending_outbox=WEEK), now, batch=2, pause=0, between=a_stream_starts)
    assert deleted["pendingOutbox"] == 2  # the first batch: one run, whole
    assert [n for _, n in rows(catalog, "SELECT run_key, count(*) FROM outbox GROUP BY run_key")] == [2, 2, 2]
    config = tmp_path / "olbridge.toml"
    config.write_text('[retention]\npending_outbox = "7d"\n')
    with Catalog(catalog_target) as other:  # (the command opens the catalog anew: not one in memory)
        other.workers.beat(StreamWorkerInfo("w", "host", 1, "http://backend", "t", now), now)
    result = CliRunner().invoke(cli, ["--catalog", catalog_target, "--config", str(config), "retention", "--dry-run"])
    assert result.exit_code == 0 and "Note: pending_outbox: a stream to a backend is live" in result.stderr


def test_a_run_s_dead_letter_alone_is_the_dead_letters_to_keep(catalog: Catalog) -> None:
    """A run whose end the backend refused after it took its start: the dead END is all that is
    left, and ``pending_outbox`` (rows still waiting) leaves it to ``dead_letters``."""
    from tests.conftest import at
    from tests.helpers import run

    catalog.record_each([run("load", start=at(0), end=at(1), execution="e0")])
    with catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox WHERE kind = 'run-start'")  # delivered
        cur.execute("UPDATE outbox SET state = 'dead', queued_at = '2025-01-01T00:00:00.000000Z'")
    assert retention.count(catalog.db, Windows(pending_outbox=WEEK), time.time())["pendingOutbox"] == 0
    both = retention.count(catalog.db, Windows(pending_outbox=WEEK, dead_letters=WEEK), time.time())
    assert (both["pendingOutbox"], both["deadLetters"]) == (0, 1)


def test_the_dead_start_of_a_run_still_running_stays_for_its_end(catalog: Catalog) -> None:
    """A START the backend refused, of an own run still running: no later event of its run is
    queued yet, but its end will be, and would go out without it; ``dead_letters`` keeps it
    until the run ends. A run still running since before the window is taken as abandoned (its
    worker killed): its dead START goes, else it would keep every task run recorded after it."""
    from tests.helpers import run

    now = time.time()
    started = datetime.fromtimestamp(now - 3600, UTC)  # an hour ago: inside the window
    running = run("load", start=started, end=started + timedelta(minutes=90), execution="e0")
    catalog.record_task_run(attrs.evolve(running, state=TaskState.RUNNING, ended_at=None, outputs=()))
    long_ago = datetime.fromtimestamp(now - 30 * 86400, UTC)  # a month ago: before the window
    abandoned = run("load", start=long_ago, execution="e1")
    catalog.record_task_run(attrs.evolve(abandoned, state=TaskState.RUNNING, ended_at=None, outputs=()))
    with catalog.transaction() as cur:
        cur.execute("UPDATE outbox SET state = 'dead', queued_at = '2025-01-01T00:00:00.000000Z'")
    dead = Windows(dead_letters=WEEK)
    assert retention.count(catalog.db, dead, now)["deadLetters"] == 1  # the abandoned run's
    assert expire(catalog, dead, now)["deadLetters"] == 1
    assert rows(catalog, "SELECT kind, state, ref FROM outbox") == [
        ("run-start", "dead", rows(catalog, "SELECT pk FROM task_runs WHERE execution_id = 'e0'")[0][0])
    ]
    catalog.record_task_run(running)  # it ends: its end waits behind the dead START
    assert [r[:2] for r in rows(catalog, "SELECT kind, state FROM outbox")] == [
        ("run-end", "pending"),
        ("run-start", "dead"),
    ]
    assert expire(catalog, dead, now)["deadLetters"] == 0


def test_the_dry_run_counts_every_kind_on_one_snapshot(catalog_target: str, resolver: Resolver) -> None:
    """A dry run beside a pass: each kind is counted as of one moment, however the pass deletes
    between two counts (here another connection deletes every column edge after the first kind
    is counted: the counts are still those of the catalog before)."""
    kinds = retention._kinds
    with Catalog(catalog_target) as catalog, Catalog(catalog_target) as other:
        build(catalog, catalog_intake(catalog, resolver))
        expected = retention.count(catalog.db, ALL, NOW)
        assert expected["columnEdges"] > 0 and expected["receivedEvents"] > 0

        def deleting_between(*args: Any, **kwargs: Any) -> Any:
            for n, kind in enumerate(kinds(*args, **kwargs)):
                yield kind
                if n == 0:  # a pass deletes meanwhile, and commits
                    with other.transaction() as cur:
                        cur.execute("DELETE FROM column_lineage")

        try:
            retention._kinds = deleting_between  # type: ignore[assignment]
            counted = retention.count(catalog.db, ALL, NOW)
        finally:
            retention._kinds = kinds  # type: ignore[assignment]
        assert counted == expected
        assert retention.count(catalog.db, ALL, NOW)["columnEdges"] == 0  # as of now, they are gone


def test_one_pass_at_a_time_across_processes(catalog: Catalog) -> None:
    assert retention.take_lease(catalog.db, "a", NOW, 60)
    assert not retention.take_lease(catalog.db, "b", NOW + 1, 60)
    assert retention.take_lease(catalog.db, "a", NOW + 30, 60)  # renewed
    assert not retention.take_lease(catalog.db, "b", NOW + 80, 60)
    assert retention.take_lease(catalog.db, "b", NOW + 91, 60)  # a's lapsed
    retention.release_lease(catalog.db, "a")  # not a's any more: nothing changes
    assert not retention.take_lease(catalog.db, "a", NOW + 92, 60)
    retention.release_lease(catalog.db, "b")
    assert retention.take_lease(catalog.db, "a", NOW + 93, 60)


# --- the config and the command --------------------------------------------------------------


def test_the_retention_table_is_validated() -> None:
    parsed = parse_config(
        {
            "retention": {
                "received_events": "7d",
                "dead_letters": "12h",
                "checks": "30d",
                "pending_outbox": "90d",
                "column_edges": True,
                "every": "15m",
            }
        },
        "olbridge.toml",
        Path(),
    ).retention
    assert parsed == RetentionConfig(
        received_events=WEEK,
        dead_letters=43200.0,
        checks=30 * 86400.0,
        pending_outbox=90 * 86400.0,
        column_edges=True,
        every=900.0,
    )
    assert retention.windows_of(attrs.asdict(parsed)).checks == 30 * 86400.0
    assert retention.windows_of(attrs.asdict(parsed)).pending_outbox == 90 * 86400.0
    for table, message in (
        ({"received": "7d"}, "unknown setting(s) received"),
        (
            {"received_events": "7 days"},
            "olbridge.toml: [retention]: 'received_events': '7 days' is no duration; write",
        ),
        ({"received_events": 7}, "'received_events': 7 is no duration"),
        ({"checks": "a month"}, "'checks': 'a month' is no duration"),
        ({"checks": "0s"}, "'checks' must be longer than nothing, not '0s'"),
        ({"column_edges": "yes"}, "true or false"),
        ({"every": "15m"}, "'every' is set but no window is"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config({"retention": table}, "olbridge.toml", Path())


def write_config(tmp_path: Path, catalog: str, retention_table: str) -> Path:
    config = tmp_path / "olbridge.toml"
    config.write_text(f"catalog = {json.dumps(catalog)}\n[retention]\n{retention_table}\n")
    return config


def test_the_command_prints_the_same_keys_for_both_modes(
    catalog_target: str, resolver: Resolver, tmp_path: Path
) -> None:
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(1), time="2001-01-01T00:00:00Z")])
    config = write_config(tmp_path, catalog_target, 'received_events = "7d"\ndead_letters = "30d"\nchecks = "30d"')
    runner = CliRunner()
    dry = runner.invoke(cli, ["--config", str(config), "retention", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    real = runner.invoke(cli, ["--config", str(config), "retention", "--json"])
    assert real.exit_code == 0, real.output
    dry_counts, real_counts = json.loads(dry.stdout), json.loads(real.stdout)
    assert dry_counts == {"dryRun": True, "counts": {**dict.fromkeys(KINDS, 0), "receivedEvents": 1}}
    assert real_counts == {**dry_counts, "dryRun": False}
    again = runner.invoke(cli, ["--config", str(config), "retention", "--dry-run", "--json"])
    assert json.loads(again.stdout)["counts"] == dict.fromkeys(KINDS, 0)


def test_the_command_without_windows_says_so(catalog_target: str, tmp_path: Path) -> None:
    Catalog(catalog_target).close()
    config = tmp_path / "olbridge.toml"
    config.write_text(f"catalog = {json.dumps(catalog_target)}\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "retention"])
    assert result.exit_code == 1
    assert "Error: the config has no [retention] windows" in result.output


def test_the_command_takes_the_lease_serve_s_schedule_takes(
    catalog_target: str, resolver: Resolver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``olbridge retention`` took no lease, so a pass by hand ran beside serve's scheduled one.
    It takes the same lease: held by another process, it deletes nothing and says whose it is;
    a lease that lapsed (its holder killed) is taken over; ``--dry-run`` needs none."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(1), time="2001-01-01T00:00:00Z")])
        assert retention.take_lease(catalog.db, "host-a:4242:0badcafe", time.time(), 300)
    config = write_config(tmp_path, catalog_target, 'received_events = "7d"')
    runner = CliRunner()
    refused = runner.invoke(cli, ["--config", str(config), "retention", "--json"])
    assert refused.exit_code == 1
    assert refused.stdout == ""
    assert refused.stderr.startswith("Error: another retention pass is running on this catalog (pid 4242 on host-a, ")
    dry = runner.invoke(cli, ["--config", str(config), "retention", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["counts"]["receivedEvents"] == 1  # nothing went
    assert "Note: a retention pass is running (pid 4242 on host-a, " in dry.stderr

    seen: list[retention.HeldLease | None] = []
    real_expire = retention.expire

    def expire_watched(db: Any, *args: Any, **kwargs: Any) -> dict[str, int]:
        seen.append(retention.lease_holder(db.conn, time.time()))
        return real_expire(db, *args, **kwargs)

    monkeypatch.setattr(retention, "expire", expire_watched)
    with Catalog(catalog_target) as catalog:  # host-a's pass was killed: its lease lapses
        retention.release_lease(catalog.db, "host-a:4242:0badcafe")
        assert retention.take_lease(catalog.db, "host-a:4242:0badcafe", time.time() - 1000, 300)
    done = runner.invoke(cli, ["--config", str(config), "retention", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["counts"]["receivedEvents"] == 1
    [held] = seen
    assert held is not None and held.holder.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    with Catalog(catalog_target) as catalog:
        assert retention.lease_holder(catalog.db.conn, time.time()) is None  # given back


def signalled_retention(config: Path, sig: str, after: int = 1) -> subprocess.CompletedProcess[str]:
    """``olbridge --config CONFIG retention --json`` in a process of its own that gets the signal
    ``sig`` (its name) after the ``after``-th step of its pass (the first: the expired partitions
    dropped, on PostgreSQL; then each batch deleted)."""
    probe = (
        "import signal, sys\n"
        "import bridge.catalog.retention as retention\n"
        "expire = retention.expire\n"
        "steps = []\n"
        "def signalled(db, *args, between, **kwargs):\n"
        "    def step():\n"
        "        between()\n"
        "        steps.append(1)\n"
        f"        if len(steps) == {after}:\n"
        f"            signal.raise_signal(signal.{sig})\n"
        "    return expire(db, *args, between=step, **kwargs)\n"
        "retention.expire = signalled\n"
        "from bridge.cli import main\n"
        f"sys.argv = ['olbridge', '--config', {str(config)!r}, 'retention', '--json']\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)


OLD_EVENTS = 2500  # three batches (received today: in no partition old enough to drop whole)


def old_events(catalog_target: str, resolver: Resolver, tmp_path: Path) -> Path:
    """A catalog holding OLD_EVENTS received events past a week's window, and its config."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(n), time=OLD) for n in range(OLD_EVENTS)])
    return write_config(tmp_path, catalog_target, 'received_events = "7d"')


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_a_pass_after_its_batch_and_gives_the_lease_back(
    catalog_target: str, resolver: Resolver, tmp_path: Path, sig: str
) -> None:
    """SIGTERM (or Ctrl-C) stops a pass between two batches: it says so, prints what it deleted,
    gives its lease back and exits 1, and the next pass deletes the rest. SIGTERM ended it at
    once (143) with the lease held: the next pass was refused for five minutes."""
    config = old_events(catalog_target, resolver, tmp_path)
    done = signalled_retention(config, sig, after=2)  # after the first batch
    assert done.returncode == 1, done.stderr
    assert f"{sig}: stopping after the batch in hand" in done.stderr
    assert "Error: the retention pass was stopped before its end; what it deleted is above" in done.stderr
    assert "Traceback" not in done.stderr
    first = json.loads(done.stdout)["counts"]["receivedEvents"]
    assert first == retention.BATCH
    with Catalog(catalog_target) as catalog:
        assert retention.lease_holder(catalog.db.conn, time.time()) is None
    again = CliRunner().invoke(cli, ["--config", str(config), "retention", "--json"])
    assert again.exit_code == 0, again.output
    assert first + json.loads(again.stdout)["counts"]["receivedEvents"] == OLD_EVENTS


def test_the_lease_of_a_pass_killed_on_this_host_is_taken_over_at_once(
    catalog_target: str, resolver: Resolver, tmp_path: Path
) -> None:
    """A pass killed (SIGKILL; a database lost, whose lease cannot be given back) left its lease
    held, and every pass for five minutes was refused, naming a pid that was gone on this same
    host. A lease whose holder is a process of this host that is gone is taken over; one of another
    host, or a live one of this host, still refuses."""
    config = old_events(catalog_target, resolver, tmp_path)
    killed = signalled_retention(config, "SIGKILL", after=2)
    assert killed.returncode == -signal.SIGKILL
    with Catalog(catalog_target) as catalog:  # its lease, held for five minutes more
        row = catalog.db.conn.execute("SELECT value FROM positions WHERE kind = 'retention'").fetchone()
        lease = json.loads(row[0])
        assert lease["holder"].startswith(f"{socket.gethostname()}:") and lease["until"] > time.time() + 200
    done = CliRunner().invoke(cli, ["--config", str(config), "retention", "--json"])
    assert done.exit_code == 0, done.output
    with Catalog(catalog_target) as catalog:
        assert rows(catalog, "SELECT pk FROM received_events") == []
        alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            for holder in (f"{socket.gethostname()}:{alive.pid}:0badcafe", "host-a:4242:0badcafe"):
                assert retention.take_lease(catalog.db, holder, time.time(), 300)
                assert not retention.take_lease(catalog.db, "another", time.time(), 300), holder
                retention.release_lease(catalog.db, holder)
        finally:
            alive.kill()
            alive.wait()
        # a lease that says nothing of its holder's process space (written before) lapses only
        gone = f"{socket.gethostname()}:{killed_pid()}:0badcafe"
        old = json.dumps({"holder": gone, "until": time.time() + 300})
        catalog.db.conn.execute("UPDATE positions SET value = ? WHERE kind = 'retention'", (old,))
        assert not retention.take_lease(catalog.db, "another", time.time(), 300)
        retention.release_lease(catalog.db, gone)
        assert retention.take_lease(catalog.db, gone, time.time(), 300)  # as that process took it
        assert retention.take_lease(catalog.db, "another", time.time(), 300)


def killed_pid() -> int:
    """The pid of a process of this host that has ended."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(ended.stdout)


def test_serve_runs_retention_on_its_schedule(catalog_target: str, resolver: Resolver, tmp_path: Path) -> None:
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(1), time="2001-01-01T00:00:00Z")])
    config = write_config(tmp_path, catalog_target, 'received_events = "7d"\nevery = "1s"')
    env = {**os.environ, "OLBRIDGE_CONFIG": str(config)}
    env.pop("OLBRIDGE_TOKEN", None)
    with serve_process(catalog_target, env=env) as served, Catalog(catalog_target) as catalog:
        left: Callable[[], int] = lambda: len(rows(catalog, "SELECT pk FROM received_events"))  # noqa: E731
        deadline = time.monotonic() + 60
        while left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left() == 0
        served.process.terminate()
        served.process.wait(timeout=30)
    assert "retention: deleted 1 receivedEvents" in served.stderr


def test_the_schedule_says_a_failing_pass_once_in_olbridge_s_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog away (a failover, a read-only standby): each receiver's schedule said the
    driver's text on every turn. Said once, as the writer says it, until a pass runs again."""
    import multiprocessing
    import sqlite3

    from bridge.cli import retention as retention_cli

    said: list[str] = []
    reader, writer = multiprocessing.Pipe(duplex=False)
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5  # SQLITE_BUSY
    turns = iter([locked, locked, locked, None, locked, locked, "stop"])

    def run_pass(*args: Any, **kwargs: Any) -> tuple[dict[str, int], dict[str, Any]] | None:
        turn = next(turns)
        if turn == "stop":
            writer.send_bytes(b"x")
            raise locked
        if isinstance(turn, Exception):
            raise turn
        return {"receivedEvents": 1}, {}

    path = tmp_path / "c.db"
    Catalog(path).close()
    monkeypatch.setattr(retention_cli, "run_pass", run_pass)
    monkeypatch.setattr(retention_cli, "say", said.append)
    monkeypatch.setattr(retention_cli.signal, "signal", lambda *args: None)
    retention_cli._schedule(path, RetentionConfig(received_events=1.0, every=0.001), reader, os.getppid())
    away, *rest = said
    assert rest == ["retention: deleted 1 receivedEvents", "retention: the scheduled passes run again", away], said
    assert away == (
        f"Warning: retention: catalog {path}: another process holds it locked; try again (SQLite: database is "
        "locked) (said once until a pass runs)"
    )


def test_serve_says_when_retention_windows_have_no_schedule(catalog_target: str, tmp_path: Path) -> None:
    """[retention] with windows and no `every`: serve ran no pass and said nothing of it, so
    whoever wrote the windows found nothing ever expired. A note says so; with `every`, none."""
    env = {k: v for k, v in os.environ.items() if k != "OLBRIDGE_TOKEN"}
    config = write_config(tmp_path, catalog_target, 'received_events = "7d"')
    with serve_process(catalog_target, env={**env, "OLBRIDGE_CONFIG": str(config)}) as served:
        pass
    assert "[retention] sets how long history is kept, but no `every`: serve runs no pass" in served.stderr
    config = write_config(tmp_path, catalog_target, 'received_events = "7d"\nevery = "1h"')
    with serve_process(catalog_target, env={**env, "OLBRIDGE_CONFIG": str(config)}) as served:
        pass
    assert "no `every`" not in served.stderr and "retention every 3600s" in served.stderr


def test_serve_with_its_schedules_stops_on_a_sigterm_to_its_group(catalog_target: str, tmp_path: Path) -> None:
    """systemd stops a service, and ``timeout`` a command, with a SIGTERM to every process of its
    group: the retention schedule's and the health watch's processes among them. Killed while
    they waited on the event that stops them, the receiver then waited forever in setting it;
    they leave the signal to the receiver, which stops them."""
    import signal
    import subprocess
    import sys

    from tests.backend import free_port

    config = write_config(tmp_path, catalog_target, 'received_events = "7d"\nevery = "1h"')
    config.write_text(config.read_text() + '\n[health]\nevery = "1h"\n')
    env = {**os.environ, "OLBRIDGE_CONFIG": str(config)}
    env.pop("OLBRIDGE_TOKEN", None)
    port = free_port()
    argv = [sys.executable, "-m", "bridge", "serve", "--port", str(port)]
    err = tmp_path / "serve.err"
    with err.open("w") as sink:
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=sink, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while "Ctrl-C stops" not in err.read_text():  # every process started
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        time.sleep(3)  # the spawned processes started, each waiting on its event
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(timeout=30) == 0, err.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert "Stopped." in err.read_text()


def test_serve_starts_a_killed_helper_again_and_still_stops(catalog_target: str, tmp_path: Path) -> None:
    """The health watch's process killed (SIGKILL, the out-of-memory killer) was not noticed: no
    watch, /metrics' counts frozen, nothing said; and serve, told to stop, waited for ever on the
    event the killed process had waited on. Each helper killed is started again, said on stderr,
    and serve stops within seconds of its SIGTERM."""
    from tests.backend import free_port
    from tests.postgres import children_of

    config = write_config(tmp_path, catalog_target, 'received_events = "7d"\nevery = "1h"')
    config.write_text(config.read_text() + '\n[health]\nevery = "1h"\n')
    env = {**os.environ, "OLBRIDGE_CONFIG": str(config)}
    env.pop("OLBRIDGE_TOKEN", None)
    argv = [sys.executable, "-m", "bridge", "serve", "--port", str(free_port())]
    err = tmp_path / "serve.err"

    def helpers() -> set[int]:  # the spawned helpers (not multiprocessing's resource tracker)
        found = set()
        for pid in children_of(process.pid):
            with contextlib.suppress(OSError):
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(pid)
        return found

    with err.open("w") as sink:
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 30
        while "Ctrl-C stops" not in err.read_text() or len(helpers()) < 2:
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        time.sleep(2)  # each waiting on its stop
        first = helpers()
        for pid in first:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len(helpers() - first) < 2:  # two new ones
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        said = err.read_text()
        assert "Warning: the health watch exited (-9); starting another" in said, said
        assert "Warning: the retention schedule exited (-9); starting another" in said, said
        time.sleep(2)
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, err.read_text()
        assert time.monotonic() - began < 15
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Stopped." in err.read_text() and "Traceback" not in err.read_text()


def test_a_row_a_writer_holds_is_left_for_the_next_pass(postgres_url: str, resolver: Resolver) -> None:
    """On PostgreSQL a pass never waits on a writer: the rows it holds are skipped (FOR UPDATE SKIP
    LOCKED) and go in the next pass. (SQLite has one writer at a time: a pass waits its turn.)"""
    catalog = Catalog(postgres_url)
    catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(n), time=OLD) for n in (1, 2, 3)])
    writer = catalog.engine.connect()  # another process's writer, in the middle of its transaction
    try:
        writer.execute("BEGIN")
        held = writer.execute("SELECT pk FROM received_events ORDER BY pk LIMIT 1 FOR UPDATE").fetchone()[0]
        assert expire(catalog, Windows(received_events=WEEK))["receivedEvents"] == 2
        assert [r[0] for r in rows(catalog, "SELECT pk FROM received_events")] == [held]
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    assert expire(catalog, Windows(received_events=WEEK))["receivedEvents"] == 1
    catalog.close()


def test_sqlite_gives_free_pages_back_where_the_catalog_allows_it(tmp_path: Path, resolver: Resolver) -> None:
    """A new SQLite catalog gives the pages a pass freed back to the file system; one made before
    (auto_vacuum off) keeps them for new rows, and the pass says so."""
    with Catalog(tmp_path / "new.db") as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(n), time=OLD) for n in range(300)])
        expire(catalog, Windows(received_events=WEEK))
        assert int(catalog.db.conn.execute("PRAGMA freelist_count").fetchone()[0]) > 0
        assert retention.reclaim(catalog.db) is None
        assert int(catalog.db.conn.execute("PRAGMA freelist_count").fetchone()[0]) == 0
        catalog.db.conn.execute("PRAGMA auto_vacuum = NONE")
        catalog.db.conn.execute("VACUUM")  # as a catalog made before
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(n), time=OLD) for n in range(300, 600)])
        expire(catalog, Windows(received_events=WEEK))
        note = retention.reclaim(catalog.db)
        assert note is not None and "free pages stay in the catalog's file" in note
        # what the note says to do gives them back, at this pass and the next (a VACUUM alone
        # kept the setting off, as the docs said it would not)
        assert "'PRAGMA auto_vacuum = INCREMENTAL; VACUUM'" in note
        catalog.db.conn.execute("VACUUM")
        assert int(catalog.db.conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 0
        catalog.db.conn.executescript("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")
        catalog_intake(catalog, resolver).take([ol_run_event(run_id=rid(n), time=OLD) for n in range(600, 900)])
        expire(catalog, Windows(received_events=WEEK))
        assert int(catalog.db.conn.execute("PRAGMA freelist_count").fetchone()[0]) > 0
        assert retention.reclaim(catalog.db) is None
        assert int(catalog.db.conn.execute("PRAGMA freelist_count").fetchone()[0]) == 0
