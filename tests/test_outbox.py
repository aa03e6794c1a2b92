"""The outbox: what catalog writes queue, in which order, and what the worker may send next."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge import Catalog, task_run
from bridge.catalog import sql_outbox
from bridge.catalog.outbox import (
    ALERT,
    ASSET_CHANGE,
    FORWARD,
    JOB,
    RUN_END,
    RUN_START,
    RUN_UPDATE,
    Dead,
    Delivered,
    RetryLater,
    queue_alerts,
)
from bridge.cli import cli
from bridge.delivery.history import iter_lines
from bridge.delivery.outbox_events import RENDERERS, render
from bridge.errors import ValidationError
from bridge.mapping import Resolver
from bridge.model.times import format_time, parse_time
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from tests.conftest import at
from tests.helpers import decl, invoke, run

pytestmark = pytest.mark.both_engines


def rows(catalog: Catalog) -> list[tuple[str, int]]:
    return [(item.kind, item.ref) for item in catalog.outbox.items(limit=10_000)]


def table(catalog: Catalog) -> list[tuple[Any, ...]]:
    return catalog._conn.execute("SELECT * FROM outbox ORDER BY seq").fetchall()


def test_a_finished_run_queues_its_start_then_its_end(catalog: Catalog) -> None:
    catalog.record_task_run(run("load", outputs=(decl("t.a", type="Table"),)))
    assert rows(catalog) == [(RUN_START, 1), (RUN_END, 1)]
    item = catalog.outbox.items()[0]
    assert item.state == "pending" and item.attempts == 0 and item.run_key == "run:1"
    assert item.queued_at.endswith("Z")


def test_a_run_recorded_again_unchanged_queues_nothing(catalog: Catalog) -> None:
    catalog.record_task_run(run("load"))
    before = table(catalog)
    assert catalog.record_task_run(run("load")).status == "unchanged"
    assert table(catalog) == before


def test_a_run_recorded_running_then_ended_queues_start_then_end(catalog: Catalog, resolver: Resolver) -> None:
    catalog.record_task_run(run("load", state="RUNNING"))
    assert rows(catalog) == [(RUN_START, 1)]
    catalog.record_task_run(run("load", inputs=(decl("raw.a"),), state="RUNNING"))  # new content, still running
    catalog.record_task_run(run("load", state="SUCCESS", end=at(3)))
    assert rows(catalog) == [(RUN_START, 1), (RUN_UPDATE, 1), (RUN_END, 1)]
    # one START a run: the update is a RUNNING event of the same run, valid as the spec has it
    rendered = render(catalog, Converter(resolver), catalog.outbox.items())
    events = [json.loads(rendered[item.seq] or "null") for item in catalog.outbox.items()]
    assert [e["eventType"] for e in events] == ["START", "RUNNING", "COMPLETE"]
    assert len({e["run"]["runId"] for e in events}) == 1
    for event in events:
        assert validate_event(event) == [], event


def test_asset_updates_and_deletes_queue_one_row_each(catalog: Catalog) -> None:
    catalog.set_asset(decl("reports.daily", type="File"), now=at(1))
    catalog.set_asset(decl("reports.daily", type="File"), now=at(2))  # no change: nothing queued
    catalog.set_asset(decl("reports.daily", metadata={"owner": "ops"}), now=at(3))
    catalog.delete_asset("reports.daily", now=at(4))
    catalog.delete_asset("reports.daily", now=at(5))  # already deleted: nothing queued
    assert [k for k, _ in rows(catalog)] == [ASSET_CHANGE] * 3
    assert {item.run_key for item in catalog.outbox.items()} == {"asset:reports.daily"}


def test_a_refused_input_queues_nothing(catalog: Catalog) -> None:
    catalog.record_task_run(run("load"))
    before = table(catalog)
    bad = run("other", outputs=(decl("t.b"),), state="RUNNING")  # outputs before the run ended
    with pytest.raises(ValidationError):
        catalog.record_task_runs([run("fine", execution="e2"), bad])
    with pytest.raises(ValidationError):
        catalog.set_asset(decl("new.asset"), now=at(1))  # a new asset needs a type
    assert table(catalog) == before


def test_the_python_api_fills_the_same_outbox(tmp_path: Path, catalog_target: str) -> None:
    path = catalog_target
    with Catalog(path) as catalog, task_run(catalog, "company.data", "reports", "export") as r:
        r.reads("dbt.main.model")
        r.writes("reports.second", type="File", namespace="company.data")
    with Catalog(path) as catalog:
        assert [k for k, _ in rows(catalog)] == [RUN_START, RUN_END]


def test_heads_hold_a_run_end_back_until_its_start_is_delivered(catalog: Catalog) -> None:
    catalog.record_task_runs([run("a", start=at(0)), run("b", start=at(1))])
    outbox = catalog.outbox
    heads = outbox.heads(now=0, limit=100)
    assert [(h.kind, h.ref) for h in heads] == [(RUN_START, 1), (RUN_START, 2)]
    outbox.settle([Delivered(heads[0].seq), RetryLater(heads[1].seq, 1, 50.0, 503, "busy")], success_at="t")
    assert [(h.kind, h.ref) for h in outbox.heads(now=0, limit=100)] == [(RUN_END, 1)]
    assert outbox.next_retry_at() == 50.0
    assert [(h.kind, h.ref) for h in outbox.heads(now=50, limit=100)] == [(RUN_END, 1), (RUN_START, 2)]


def test_a_dead_start_holds_its_end_until_retried_or_dropped(catalog: Catalog) -> None:
    catalog.record_task_run(run("a"))
    outbox = catalog.outbox
    start = outbox.heads(now=0, limit=10)[0]
    outbox.settle([Dead(start.seq, 1, 422, '{"errors":["job.name must not be null"]}')], success_at="t")
    assert outbox.heads(now=0, limit=10) == []
    assert outbox.next_retry_at() is None
    dead = outbox.items(dead=True)
    assert [(d.seq, d.last_status, d.last_error) for d in dead] == [
        (start.seq, 422, '{"errors":["job.name must not be null"]}')
    ]
    assert outbox.retry([start.seq]) == 1
    assert [h.seq for h in outbox.heads(now=0, limit=10)] == [start.seq]
    outbox.settle([Dead(start.seq, 2, 400, "")], success_at="t")
    assert outbox.drop([start.seq]) == 1
    assert [h.kind for h in outbox.heads(now=0, limit=10)] == [RUN_END]


def test_a_dead_alert_holds_none_of_its_asset_s_later_alerts_back(catalog: Catalog) -> None:
    """An alert its webhook refused for good is no run's START: the asset's next alert is the
    key's head past it (in order, one at a time), for every worker (heads, alerts alone) and
    their retries. Queued again, it is the head once more, before the alerts that wait."""
    with catalog.transaction() as cur:
        queue_alerts(cur, [("a", "x", "{}"), ("a", "x", "{}"), ("a", "x", "{}"), ("a", "y", "{}")])
    outbox = catalog.outbox
    first, _, _, other = outbox.items()
    outbox.settle([Dead(first.seq, 1, 410, "gone"), Delivered(other.seq)], success_at="t")
    for alerts_only in (False, True):
        assert [h.seq for h in outbox.heads(now=0, limit=10, alerts_only=alerts_only)] == [first.seq + 1]
    outbox.settle([RetryLater(first.seq + 1, 1, 50.0, 503, "busy")], success_at="t")
    assert outbox.heads(now=0, limit=10) == [] and outbox.next_retry_at(alerts_only=True) == 50.0
    assert outbox.retry([first.seq]) == 1
    assert [h.seq for h in outbox.heads(now=60, limit=10)] == [first.seq]
    assert outbox.next_retry_at() is None and outbox.next_retry_at(alerts_only=True) is None  # not a head now


def test_status_counts_depth_dead_letters_and_last_success(catalog: Catalog) -> None:
    catalog.record_task_runs([run("a"), run("b")])
    status = catalog.outbox.status()
    assert (status.pending, status.dead, status.delivered, status.last_success) == (4, 0, 0, None)
    assert status.oldest_pending == catalog.outbox.items()[0].queued  # as olbridge writes times
    assert status.oldest_pending == format_time(parse_time(status.oldest_pending, "oldest"))
    heads = catalog.outbox.heads(now=0, limit=10)
    catalog.outbox.settle([Delivered(heads[0].seq), Dead(heads[1].seq, 1, 400, "")], success_at="2026-01-01T00:00:00Z")
    status = catalog.outbox.status()
    assert (status.pending, status.dead, status.delivered) == (2, 1, 1)
    assert status.last_success == "2026-01-01T00:00:00Z"


def test_status_counts_the_rows_held_behind_a_dead_letter_never_an_alert(catalog_target: str) -> None:
    """``status`` counts the rows no stream sends until a dead letter of their key is retried or
    dropped (``held``): a dead START's end, not the alerts after a dead alert, which go."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs([run("a"), run("b")])
        with catalog.transaction() as cur:
            queue_alerts(cur, [("marts", "mart.a", "{}")] * 3)
        start, _, alert = catalog.outbox.heads(now=0, limit=10)
        assert (start.kind, alert.kind) == (RUN_START, ALERT)
        catalog.outbox.settle([Dead(start.seq, 1, 422, "bad"), Dead(alert.seq, 1, 410, "gone")], success_at="t")
        assert (catalog.outbox.status().pending, catalog.outbox.held()) == (5, 1)
        catalog.outbox.drop([start.seq])
        assert catalog.outbox.held() == 0
        [other] = [h for h in catalog.outbox.heads(now=0, limit=10) if h.kind == RUN_START]  # b's
        catalog.outbox.settle([Dead(other.seq, 1, 422, "bad")], success_at="t")
    code, out, _ = invoke(catalog_target, "status", "--json")
    assert code == 0 and (json.loads(out)["dead"], json.loads(out)["held"]) == (2, 1)
    code, out, _ = invoke(catalog_target, "status")
    assert code == 0 and "dead letters: 2\nheld behind a dead letter: 1\n" in out


def test_rendered_events_are_the_exported_ones(catalog: Catalog, converter: Converter) -> None:
    catalog.record_task_runs(
        [
            run("a", inputs=(decl("raw.x"),), outputs=(decl("t.a", type="Table", description="A table"),)),
            run("b", state="FAILED", error="boom", start=at(5)),
        ]
    )
    catalog.set_asset(decl("t.a", metadata={"owner": "ops"}), now=at(10))
    catalog.delete_asset("t.a", now=at(11))
    rendered = render(catalog, converter, catalog.outbox.items())
    assert sorted(v for v in rendered.values() if v) == sorted(iter_lines(catalog, converter))
    # every kind olbridge renders (a forwarded event and an alert are not rendered: they go out as queued)
    assert set(RENDERERS) == {RUN_START, RUN_END, RUN_UPDATE, ASSET_CHANGE, JOB, FORWARD, ALERT}


def test_a_purged_change_renders_as_gone(catalog: Catalog, converter: Converter) -> None:
    from bridge.catalog import AssetQuery

    catalog.set_asset(decl("reports.x", type="File"), now=at(1))
    catalog.purge(AssetQuery(ids=("reports.x",)))
    assert list(render(catalog, converter, catalog.outbox.items()).values()) == [None]


def test_cli_outbox_list_retry_drop_and_status(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("a"), run("b")])
        first = catalog.outbox.heads(now=0, limit=10)[0]
        catalog.outbox.settle([Dead(first.seq, 1, 422, '{"errors":["bad"]}')], success_at="t")
    runner = CliRunner()
    listed = runner.invoke(cli, ["--catalog", db, "outbox", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [r["kind"] for r in json.loads(listed.stdout)] == [RUN_START, RUN_END, RUN_START, RUN_END]
    dead = runner.invoke(cli, ["--catalog", db, "outbox", "list", "--dead"])
    header, row = dead.stdout.splitlines()
    assert header == "id\tkind\tref\tstate\tattempts\tqueued\tlastError"
    assert row.startswith(f"{first.seq}\trun-start\t1\tdead\t1\t") and row.endswith('\tHTTP 422 {"errors":["bad"]}')
    assert dead.stderr == "1 row(s)\n"
    cut = runner.invoke(cli, ["--catalog", db, "outbox", "list", "--limit", "2"])  # it said only "2 row(s)"
    assert len(cut.stdout.splitlines()) == 3 and cut.stderr == "2 row(s) of 4 (the first 2: --limit to see more)\n"
    status = runner.invoke(cli, ["--catalog", db, "status", "--json"])
    assert json.loads(status.stdout) | {"oldestPending": None} == {
        "pending": 3,
        "dead": 1,
        "held": 1,  # the dead START's end
        "oldestPending": None,
        "delivered": 0,
        "lastSuccess": None,
        "lastError": None,
        "workers": [],
        "backfills": [],
    }
    assert runner.invoke(cli, ["--catalog", db, "outbox", "retry"]).exit_code == 2  # ids or --all
    assert runner.invoke(cli, ["--catalog", db, "outbox", "retry", "--all"]).exit_code == 0
    assert json.loads(runner.invoke(cli, ["--catalog", db, "status", "--json"]).stdout)["dead"] == 0
    # retried, it counts its attempts anew (--max-attempts gives it as many again)
    (retried,) = [r for r in json.loads(runner.invoke(cli, ["--catalog", db, "outbox", "list", "--json"]).stdout)
                  if r["id"] == first.seq]  # fmt: skip
    assert retried["attempts"] == 0 and retried["state"] == "pending"
    dropped = runner.invoke(cli, ["--catalog", db, "outbox", "drop", str(first.seq)])
    assert dropped.exit_code == 0 and "dropped 1 row(s)" in dropped.output
    assert "pending: 3" in runner.invoke(cli, ["--catalog", db, "status"]).stdout


def test_cli_outbox_list_names_an_alert_s_asset(catalog_target: str) -> None:
    """An alert holds its message (its ``ref`` is 0): ``outbox list`` shows its run key, which
    names its alert and asset, where it showed ``0``; ``--json`` adds ``alert`` and ``asset``."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("a"))
        with catalog.transaction() as cur:
            queue_alerts(cur, [("marts", "mart.a:v2", "{}")])
        start, alert = catalog.outbox.heads(now=0, limit=10)
        catalog.outbox.settle([Dead(alert.seq, 1, 410, "gone")], success_at="t")
    code, out, _ = invoke(catalog_target, "outbox", "list")
    assert code == 0 and [line.split("\t")[:4] for line in out.splitlines()[1:]] == [
        [str(start.seq), RUN_START, "1", "pending"],
        [str(start.seq + 1), RUN_END, "1", "pending"],
        [str(alert.seq), ALERT, "alert:marts:mart.a:v2", "dead"],
    ]
    code, out, _ = invoke(catalog_target, "outbox", "list", "--dead", "--json")
    [row] = json.loads(out)
    assert code == 0 and (row["ref"], row["runKey"]) == (0, "alert:marts:mart.a:v2")
    assert (row["alert"], row["asset"]) == ("marts", "mart.a:v2")
    code, out, _ = invoke(catalog_target, "outbox", "list", "--json")
    assert [(r["alert"], r["asset"]) for r in json.loads(out)][:2] == [(None, None), (None, None)]


def test_cli_outbox_list_json_names_rows_by_the_id_retry_takes_with_times_as_iso_text(catalog_target: str) -> None:
    """``outbox list --json`` called the id ``seq`` (``retry`` and ``drop`` take an id, and the
    table's header says id) and gave ``nextAttemptAt`` in seconds since the epoch, where every other
    output gives times as ISO text."""
    db = catalog_target
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("a", start=at(0)), run("b", start=at(1))])
        start_a, start_b = catalog.outbox.heads(now=0, limit=10)
        retry_at = at(30).timestamp()
        catalog.outbox.settle(
            [Dead(start_a.seq, 1, 422, "bad"), RetryLater(start_b.seq, 2, retry_at, 503, "busy")], success_at="t"
        )
    runner = CliRunner()
    listed = runner.invoke(cli, ["--catalog", db, "outbox", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    items = {item["id"]: item for item in json.loads(listed.stdout)}
    assert all("seq" not in item for item in items.values())
    dead, waiting = items[start_a.seq], items[start_b.seq]
    assert (dead["state"], dead["nextAttemptAt"]) == ("dead", None)  # a dead letter waits for no retry
    assert (waiting["state"], waiting["attempts"]) == ("pending", 2)
    assert waiting["nextAttemptAt"] == "2025-03-01T08:30:00.000000Z"
    for item in items.values():  # as olbridge writes times (the database's clock wrote milliseconds)
        assert format_time(parse_time(item["queuedAt"], "queuedAt")) == item["queuedAt"]
        if item["id"] not in (start_a.seq, start_b.seq):
            assert item["nextAttemptAt"] is None  # never tried: due at once
    # the id listed is the one retry takes
    assert runner.invoke(cli, ["--catalog", db, "outbox", "retry", str(dead["id"])]).exit_code == 0


def test_status_says_a_worker_silent_past_its_hold_has_lapsed(tmp_path: Path) -> None:
    """A worker killed (or stalled) is listed until another looks: its line said "delivering"
    with a heartbeat older than its hold lasts, as if it were; it says that the hold lapsed."""
    import time

    from bridge.catalog.workers import StreamWorkerInfo

    db = str(tmp_path / "c.db")
    now = time.time()
    with Catalog(db) as catalog:
        for name, beat in (("quiet", now - 60), ("live", now)):
            catalog.workers.beat(StreamWorkerInfo(name, "host", 7, "http://b", "s", beat, None), beat)
    lines = [
        line for line in CliRunner().invoke(cli, ["--catalog", db, "status"]).stdout.splitlines() if "worker" in line
    ]
    assert len(lines) == 2
    assert sum(line.endswith("(its hold lapsed after 5s: gone or stalled)") for line in lines) == 1


@pytest.mark.parametrize(
    "command",
    [["stream"], ["backfill"], ["status"], ["outbox"], ["outbox", "list"], ["outbox", "retry"], ["outbox", "drop"]],
)
def test_delivery_commands_have_help(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.stdout


@pytest.mark.parametrize(
    ("statement", "params", "index"),
    [
        (sql_outbox.OUTBOX_HEADS, (0.0, 100), "outbox_state"),
        (sql_outbox.OUTBOX_HEADS, (0.0, 100), "outbox_run_key"),
        (sql_outbox.OUTBOX_COUNT, ("pending",), "outbox_state"),
        (sql_outbox.OUTBOX_OLDEST, (), "outbox_state"),
        (sql_outbox.OUTBOX_NEXT_RETRY, (), "outbox_retrying"),
        (sql_outbox.OUTBOX_HELD, (), "outbox_state"),
        (sql_outbox.OUTBOX_HELD, (), "outbox_run_key"),
    ],
)
def test_outbox_reads_use_indexes(catalog: Catalog, statement: str, params: tuple[Any, ...], index: str) -> None:
    """``olbridge status`` and the worker stay cheap however deep the outbox is."""
    if catalog.dialect == "sqlite":
        plan = " ".join(row[-1] for row in catalog._conn.execute(f"EXPLAIN QUERY PLAN {statement}", params))
        assert f"INDEX {index}" in plan, plan
        assert "SCAN" not in plan, plan
        return
    # PostgreSQL plans an empty table as it likes: told not to scan it, it must find an index
    catalog._conn.execute("SET enable_seqscan = off")
    plan = " ".join(row[0] for row in catalog._conn.execute(f"EXPLAIN {statement}", params))
    assert re.search(rf"(using|index scan on) {index}\b", plan.lower()) and "seq scan" not in plan.lower(), plan


def test_a_row_that_cannot_be_rendered_is_a_dead_letter_and_the_rest_go(catalog: Catalog, converter: Converter) -> None:
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.senders import DELIVERED, Outcome
    from bridge.delivery.worker import StreamWorker

    class Accept:
        target = "test"
        max_concurrency = 1

        def __init__(self) -> None:
            self.sent: list[str] = []

        def send(self, lines: list[str]) -> list[Outcome]:
            self.sent += lines
            return [DELIVERED] * len(lines)

        def close(self) -> None: ...

    catalog.record_task_run(run("a"))
    with catalog.transaction() as cur:  # a row queued by a newer olbridge
        cur.execute(sql_outbox.QUEUE_EVENT, ("lineage-facet", 1, "job:flow"))
    sender = Accept()
    stats = StreamWorker(catalog, converter, Dispatcher(sender)).run(once=True)
    assert (stats.delivered, stats.dead, len(sender.sent)) == (2, 1, 2)
    [dead] = catalog.outbox.items(dead=True)
    assert dead.kind == "lineage-facet" and "cannot render" in (dead.last_error or "")


def test_a_round_reads_its_runs_assets_in_a_few_statements_however_many(resolver: Resolver) -> None:
    """Rendering a stream's round reads the assets of its runs a few hundred a statement, not one
    an asset (on PostgreSQL each is a round trip: a round of 32 runs read some 170): a round of
    four times the runs, each with assets of its own, runs as many statements."""
    converter = Converter(resolver)

    def statements(runs: int) -> tuple[int, int]:
        with Catalog(":memory:") as catalog:
            catalog.record_task_runs(
                run(f"t{i}", inputs=(decl(f"raw.r{i}"),), outputs=(decl(f"mart.m{i}", type="Table"),))
                for i in range(runs)
            )
            items = catalog.outbox.items()
            ran: list[str] = []
            catalog._conn.set_trace_callback(ran.append)
            try:
                rendered = render(catalog, converter, items)
            finally:
                catalog._conn.set_trace_callback(None)
            assert len(rendered) == len(items) == 2 * runs and all(rendered.values())  # a START, an end
            return len(ran), sum("FROM assets" in text for text in ran)

    small, large = statements(8), statements(32)
    assert small == large and large[1] == 1, (small, large)
