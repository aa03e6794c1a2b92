"""Alerts and the health kept: the health watch judges marked assets and, on its schedule, every
asset (an injected clock), keeps the last health of each, and queues one alert per change in the
transaction that records it; ``olbridge stream`` sends each to its webhook (a loopback server
here) through the outbox: once, in order per asset, whatever the webhook does, across restarts,
and with two workers on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from bridge.catalog import AssetQuery, Catalog
from bridge.catalog.health_state import LEASE, TAKEOVER_PASS_AFTER, WatchSeen, counts, judge, kept
from bridge.catalog.outbox import ALERTS_ONLY_TARGET, DeliveryError
from bridge.catalog.retention import holds_lease, take_lease
from bridge.catalog.sql_outbox import OUTBOX_ALERT_HEADS, OUTBOX_NEXT_ALERT_RETRY
from bridge.config import parse_config
from bridge.delivery.alerts import AlertSenders
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.health_watch import LEASE_KIND, HealthWatch, WatchSettings
from bridge.delivery.holds import outbox_hold
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import HttpSender
from bridge.delivery.worker import StreamWorker
from bridge.errors import ConfigError
from bridge.mapping import Resolver
from bridge.model import format_time
from bridge.model.alerts import ALERT_IDS, AlertRule, Change, events_of, message
from bridge.model.health import FreshnessRule, Health, Match
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake
from tests.backend import Backend, free_port, wait_for
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run, serve_process
from tests.postgres import PostgresServer
from tests.test_health import assertions_event

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")
MICROSECOND = timedelta(microseconds=1)


def clock_at(minutes: float) -> float:
    return at(minutes).timestamp()


class Webhook:
    """A loopback webhook: ``answer(body)`` gives each request's status (or None: the connection
    is dropped unanswered); the bodies it answered 2xx are kept in order."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.answer: Callable[[dict[str, Any]], int] = lambda body: 200
        self.taken: list[dict[str, Any]] = []
        self.arrived = 0
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/T000"

    def start(self) -> Webhook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                with hook.lock:
                    hook.arrived += 1
                    status = hook.answer(body)
                    if 200 <= status < 300:
                        hook.taken.append(body)
                        hook.headers.append(dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def changes(self) -> list[tuple[str, str, str | None, str]]:
        with self.lock:
            return [(b["asset"]["id"], b["event"], b["oldHealth"], b["health"]) for b in self.taken]


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.stop()


def watched_by(catalog: Catalog, clock: Callable[[], float]) -> Catalog:
    """The catalog's writes see the watch's lease by the watch's clock (the tests' clock), read at
    every write (a lease its writes read before the watch took it would be trusted a while)."""
    catalog.watch_seen = WatchSeen(clock=clock, seen_for=0.0)
    return catalog


def rule(url: str, **fields: Any) -> AlertRule:
    return AlertRule(
        name=fields.get("name", "marts"),
        match=fields.get("match", Match(id_prefix="mart.")),
        on=frozenset(fields.get("on", ("FAIL", "WARN", "RECOVERED"))),
        webhook=url,
        headers=fields.get("headers", {}),
    )


def settings(*alerts: AlertRule, web_url: str | None = None) -> WatchSettings:
    return WatchSettings(alerts=alerts, every=3600.0, poll=0.01, web_url=web_url)


def write_mart(catalog: Catalog, asset_id: str, minutes: float, *, state: str = "SUCCESS", execution: str) -> None:
    """A run of build that writes ``asset_id`` (reading stg.orders), ending a minute after ``minutes``."""
    catalog.record_task_run(
        run(
            f"build-{asset_id}",
            execution=execution,
            inputs=(decl("stg.orders"),),
            outputs=(decl(asset_id, type="Table"),),
            state=state,
            start=at(minutes - 1),
        )
    )


def alerts_queued(catalog: Catalog) -> list[tuple[str, str, str | None, str]]:
    """The alert rows pending in the outbox, in queue order: (asset, event, old, new)."""
    rows = catalog.db.conn.execute("SELECT payload FROM outbox WHERE kind = 'alert' ORDER BY seq").fetchall()
    return [(m["asset"]["id"], m["event"], m["oldHealth"], m["health"]) for m in (json.loads(r[0]) for r in rows)]


# --- the pure parts --------------------------------------------------------------------------


def test_the_events_of_a_change() -> None:
    assert events_of(None, Health.FAIL, updated=False) == ["FAIL"]
    assert events_of(None, Health.PASS, updated=False) == []  # first judged: it was UNKNOWN
    assert events_of(Health.FAIL, Health.WARN, updated=False) == ["WARN"]
    assert events_of(Health.WARN, Health.PASS, updated=True) == ["RECOVERED", "UPDATED"]
    assert events_of(Health.FAIL, Health.UNKNOWN, updated=False) == ["RECOVERED"]
    assert events_of(Health.PASS, Health.UNKNOWN, updated=False) == []
    assert events_of(Health.PASS, Health.PASS, updated=True) == ["UPDATED"]


def test_the_message_shape() -> None:
    change = Change(
        "mart.orders",
        "Table",
        "team-a",
        Health.PASS,
        Health.FAIL,
        ("stale: last written 2025-03-01T08:00:00.000000Z, older than 6h",),
        2,
        "2025-03-01T14:30:00.000000Z",
    )
    sent = message("marts", "FAIL", change, "https://olbridge.example/ui/")
    assert sent["id"] == str(uuid.uuid5(ALERT_IDS, "marts\x00FAIL\x00mart.orders\x002025-03-01T14:30:00.000000Z"))
    assert message("marts", "FAIL", change, None)["id"] == sent["id"]  # the same change, the same id
    assert message("marts", "WARN", change, None)["id"] != sent["id"]
    assert sent == {
        "id": sent["id"],
        "alert": "marts",
        "event": "FAIL",
        "asset": {"id": "mart.orders", "type": "Table", "namespace": "team-a"},
        "oldHealth": "PASS",
        "health": "FAIL",
        "reasons": ["stale: last written 2025-03-01T08:00:00.000000Z, older than 6h"],
        "atRiskDownstream": 2,
        "link": "https://olbridge.example/ui/assets/mart.orders",
        "at": "2025-03-01T14:30:00.000000Z",
        "text": "[FAIL] mart.orders is FAIL (was PASS): stale: last written 2025-03-01T08:00:00.000000Z, older "
        "than 6h. 2 downstream asset(s) at risk. https://olbridge.example/ui/assets/mart.orders",
    }
    first = message("m", "UPDATED", Change("s3://b/k", "File", None, None, Health.PASS, (), 0, "t"), None)
    assert (first["oldHealth"], first["link"], first["text"]) == (
        None,
        None,
        "[UPDATED] s3://b/k was updated; it is PASS",
    )


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"on": ["FAIL"], "webhook": "http://h/x"}, "'name' must be letters"),
        ({"name": "a", "on": ["BROKEN"], "webhook": "http://h/x"}, "'on' must be a non-empty list of FAIL, WARN"),
        ({"name": "a", "on": [], "webhook": "http://h/x"}, "'on' must be a non-empty list"),
        ({"name": "a", "on": ["FAIL"], "webhook": "ftp://h/x"}, "'webhook' must be an http:// or https:// URL"),
        ({"name": "a", "on": ["FAIL"]}, "'webhook' must be an http:// or https:// URL"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "url": "x"}, "unknown key(s) url; known: headers"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "match": {"tier": "g"}}, "unknown key(s) tier"),
        # what the command line refuses (and matched nothing, said nowhere)
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "match": {"type": "Tabel"}}, "asset type 'Tabel'"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "match": {"namespace": "Team-A"}}, "'Team-A'"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "headers": {"X": 1}}, "'headers' must be a table"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "headers": {"X Y": "1"}}, "'headers' must be a table"),
        ({"name": "a", "on": ["FAIL"], "webhook": "http://h", "headers": {"X:": "1"}}, "'headers' must be a table"),
        (
            {"name": "a", "on": ["FAIL"], "webhook": "http://h", "updated_metadata": {"s": "fail"}},
            "'updated_metadata' goes with \"UPDATED\"",
        ),
    ],
)
def test_bad_alert_tables_are_config_errors(table: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"alerts": [table]}, "olbridge.toml", Path())
    assert "olbridge.toml: [[alerts]] #1" in str(raised.value) and says in str(raised.value)


def test_a_match_names_a_type_as_the_command_line_does() -> None:
    """A Kestra class name in a `match` is the type it names (`--type` takes it so): it matched no
    asset, whose type is kept by its short name."""
    config = parse_config(
        {"freshness": [{"match": {"type": "io.kestra.plugin.ee.assets.Table"}, "max": "1h"}]}, "olbridge.toml", Path()
    )
    (selector,) = config.freshness
    assert selector.match.type == "Table" and selector.match.matches("a.b", "Table", None, {})


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("Bearer s3cret\x00", "its value holds a control character (U+0000, character 14)"),
        ("Bearer\rs3cret", "its value holds a control character (U+000D, character 7)"),
        ("s3cret\x7f", "its value holds a control character (U+007F, character 7)"),
        ("s3cret\x1b[0m", "its value holds a control character (U+001B, character 7)"),
        (" s3cret", "its value begins or ends with a space or a tab"),
        ("s3cret\t", "its value begins or ends with a space or a tab"),
        ("s3cret\u0100", "its value holds U+0100 (character 7), which a header cannot carry"),
    ],
)
def test_a_header_value_http_refuses_is_refused_naming_the_alert_and_header(value: str, says: str) -> None:
    """An alert's header value is an HTTP field value (RFC 9110): a control character (a NUL
    too, which was sent as it was), a space at either end or a character past Latin-1 is refused
    when the config is read, naming the alert and the header, without the value (a secret)."""
    table = {"name": "marts", "on": ["FAIL"], "webhook": "http://h", "headers": {"X-Token": value}}
    with pytest.raises(ConfigError) as raised:
        parse_config({"alerts": [table]}, "olbridge.toml", Path())
    said = str(raised.value)
    assert said.startswith("olbridge.toml: [[alerts]] #1 (marts): header 'X-Token': " + says), said
    assert "s3cret" not in said


def test_a_header_value_http_takes_is_taken_as_it_is() -> None:
    headers = {"X-A": "a\tb c", "X-B": "café", "X-C": ""}
    table = {"name": "marts", "on": ["FAIL"], "webhook": "http://h", "headers": headers}
    assert parse_config({"alerts": [table]}, "olbridge.toml", Path()).alerts[0].headers == headers


def test_a_config_with_bad_alerts_stops_every_command_before_it_runs(tmp_path: Path) -> None:
    config = tmp_path / "olbridge.toml"
    config.write_text('[[alerts]]\nname = "a"\non = ["FAIL"]\nwebhook = "http://h"\n[[alerts]]\nname = "a"\n')
    code, _out, err = invoke(tmp_path / "c.db", "--config", str(config), "health")
    assert code == 1 and err.startswith("Error: ") and "the name 'a' is taken" in err and "Traceback" not in err
    assert not (tmp_path / "c.db").exists()
    config.write_text('[health]\nevery = "5m"\nweb = "x"\n')
    code, _out, err = invoke(tmp_path / "c.db", "--config", str(config), "health")
    assert code == 1 and "[health]: unknown setting(s) web; known: every, poll, web_url" in err


def test_a_good_alerts_table_and_health_table() -> None:
    config = parse_config(
        {
            "alerts": [
                {
                    "name": "gold",
                    "match": {"namespace": "team-a", "metadata": {"tier": "gold"}},
                    "on": ["fail", "UPDATED"],
                    "updated_metadata": {"dbtTestStatus": "fail"},
                    "webhook": "https://hooks.example/T000",
                    "headers": {"Authorization": "Bearer s3cret"},
                }
            ],
            "health": {"every": "10m", "web_url": "https://olbridge.example"},
        },
        "olbridge.toml",
        Path(),
    )
    [gold] = config.alerts
    assert gold.on == {"FAIL", "UPDATED"} and gold.updated_metadata == {"dbtTestStatus": "fail"}
    assert (config.health.every, config.health.poll, config.health.watch) == (600.0, 2.0, True)
    assert "s3cret" not in repr(gold)
    assert gold.wants("UPDATED", "x", "Table", "team-a", {"tier": "gold", "dbtTestStatus": "fail"})
    assert not gold.wants("UPDATED", "x", "Table", "team-a", {"tier": "gold", "dbtTestStatus": "pass"})
    assert gold.wants("FAIL", "x", "Table", "team-a", {"tier": "gold"})
    assert not gold.wants("FAIL", "x", "Table", "team-b", {"tier": "gold"})
    assert parse_config({}, "f", Path()).health.watch is False


# --- the watch -------------------------------------------------------------------------------


@pytest.mark.both_engines
def test_the_watch_keeps_health_and_queues_one_alert_per_change(catalog_target: str) -> None:
    """mart.orders written at 08:00 with 6h / warn 2h: PASS at 09:00 (judged first: no alert),
    WARN at 12:30, FAIL at 14:30, written at 15:00: RECOVERED at once (the write marked it);
    report.csv downstream counts as at risk. A second watch meanwhile holds no lease and queues
    nothing."""
    with Catalog(catalog_target) as catalog:
        write_mart(catalog, "mart.orders", 0, execution="e1")
        catalog.record_task_run(
            run("report", inputs=(decl("mart.orders"),), outputs=(decl("report.csv", type="File"),), start=at(1))
        )
    code, _out, err = invoke(
        catalog_target, "assets", "set", "mart.orders", "--freshness", "6h", "--freshness-warn", "2h"
    )
    assert code == 0, err
    now = [clock_at(60)]
    with Catalog(catalog_target) as catalog, Catalog(catalog_target) as other:
        day = 86400.0  # the lease's time to live: the clock jumps hours
        watch = HealthWatch(catalog, settings(rule("http://h/x"), web_url="http://ui"), clock=lambda: now[0], ttl=day)
        rival = HealthWatch(other, settings(rule("http://h/x")), clock=lambda: now[0], ttl=day)
        watched_by(catalog, lambda: now[0])
        first = watch.step()
        assert first is not None and first.judged == 3 and first.alerts == 0
        assert {k: v.health for k, v in kept(catalog.db.conn).items()} == {
            "mart.orders": Health.PASS,
            "report.csv": Health.PASS,  # its last run succeeded
            "stg.orders": Health.UNKNOWN,
        }
        assert watch.step() is not None and watch.step().changed == 0  # type: ignore[union-attr]
        for minutes in (270, 300, 390):
            now[0] = clock_at(minutes)
            assert rival.step() is None  # the lease is the first one's
            watch._last_every = None  # the schedule is due (every asset judged again)
            watch.step()
        assert alerts_queued(catalog) == [
            ("mart.orders", "WARN", "PASS", "WARN"),
            ("mart.orders", "FAIL", "WARN", "FAIL"),
        ]
        write_mart(catalog, "mart.orders", 420, execution="e2")
        now[0] = clock_at(425)
        done = watch.step()  # the marked ones only: the schedule is not due
        assert done is not None and done.judged == 2 and done.alerts == 1  # the mart and stg.orders (its input)
        assert alerts_queued(catalog)[-1] == ("mart.orders", "RECOVERED", "FAIL", "PASS")
        assert counts(catalog.db.conn) == {"FAIL": 0, "WARN": 0, "PASS": 2, "UNKNOWN": 1}
        payloads = [
            json.loads(r[0]) for r in catalog.db.conn.execute("SELECT payload FROM outbox WHERE kind = 'alert'")
        ]
        assert [p["atRiskDownstream"] for p in payloads] == [1, 1, 0]
        assert payloads[1]["link"] == "http://ui/assets/mart.orders"
        assert payloads[1]["reasons"] == ["stale: last written 2025-03-01T08:00:00.000000Z, older than 6h"]
        # the mark was cleared: nothing to judge until the next write
        assert watch.step().marks == 0  # type: ignore[union-attr]
        # the second watch takes over once the first lets the lease go, and finds nothing new
        watch.run_once()
        assert rival.step() is not None and len(alerts_queued(other)) == 3


@pytest.mark.both_engines
def test_a_watch_that_lost_its_lease_writes_nothing(catalog_target: str) -> None:
    """A watch stalled past its lease's time to live (taken over meanwhile) finishes its pass
    writing nothing: its write transaction finds the lease another's."""
    with Catalog(catalog_target) as catalog:
        write_mart(catalog, "mart.orders", 0, execution="e0")
        write_mart(catalog, "mart.orders", 5, state="FAILED", execution="e1")
    now = [clock_at(10)]
    with Catalog(catalog_target) as catalog, Catalog(catalog_target) as other:
        slow = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: now[0], ttl=30)
        fast = HealthWatch(other, settings(rule("http://h/x")), clock=lambda: now[0], ttl=30)
        assert take_lease(catalog.db, slow.holder, now[0], 30, kind=LEASE_KIND)
        now[0] += 1
        assert fast.step() is None  # held
        stalled = now[0]
        now[0] += 31  # the slow one stalls (its clock reads before, its fence after the takeover)
        assert fast.step() is not None and alerts_queued(other) == [("mart.orders", "FAIL", None, "FAIL")]
        write_mart(catalog, "mart.orders", 20, execution="e2")
        lost = judge(
            catalog.db,
            (),
            slow.settings.alerts,
            datetime.fromtimestamp(stalled, UTC),
            every=True,
            fence=lambda cur: holds_lease(cur, slow.holder, now[0], kind=LEASE_KIND),
        )
        assert lost.lost and lost.changed == 0
        assert alerts_queued(catalog) == [("mart.orders", "FAIL", None, "FAIL")]
        assert kept(catalog.db.conn)["mart.orders"].health is Health.FAIL
        assert slow.step() is None  # and its next look finds the lease another's


def test_a_pass_longer_than_the_lease_renews_it_as_it_writes_and_judges_every_asset_again(
    catalog_target: str,
) -> None:
    """A pass that judges for longer than the lease's time to live (a large catalog) still writes
    what it judged: each write renews the lease nobody took over, a lapse that writers may have
    read as no watch brings another pass over every asset, and the lease is then taken for three
    times the pass's length, so that the next pass does not lapse."""
    with Catalog(catalog_target) as catalog:
        write_mart(catalog, "mart.orders", 0, execution="e0")
        write_mart(catalog, "mart.orders", 5, state="FAILED", execution="e1")
    reads = iter(clock_at(10) + 40 * n for n in range(1000))  # every look at the clock, 40 s later
    with Catalog(catalog_target) as catalog:
        watch = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: next(reads), ttl=30)
        result = watch.step()
        assert result is not None and not result.lost
        assert alerts_queued(catalog) == [("mart.orders", "FAIL", None, "FAIL")]
        assert kept(catalog.db.conn)["mart.orders"].health is Health.FAIL
        assert watch.lease_ttl() >= 3 * 40  # the pass read the clock at least twice
        value = catalog.db.conn.execute("SELECT value FROM positions WHERE kind = ?", (LEASE_KIND,)).fetchone()[0]
        lease = json.loads(value)
        assert lease["holder"] == watch.holder and lease["until"] > clock_at(10) + 30  # renewed by the write
        assert watch._catch_up_at is not None  # every asset again, soon


@pytest.mark.both_engines
def test_received_events_and_set_rules_mark_their_assets_for_the_next_look(
    catalog_target: str, resolver: Resolver
) -> None:
    """The receiver's write marks the datasets its events name (no judging on the way in): the
    watch's next look, the schedule not due, judges them: the failed assertion FAILs the
    dataset, a later passing one RECOVERs it; a freshness rule set marks its asset likewise."""
    every = Match()  # every asset
    tell = AlertRule("all", every, frozenset({"FAIL", "WARN", "RECOVERED"}), "http://h/x")
    with Catalog(catalog_target) as catalog:
        watch = HealthWatch(catalog, settings(tell))  # the real clock: the command's writes read the lease by it
        assert watch.step() is not None  # every asset (none yet): the schedule is not due again for an hour
        intake = catalog_intake(catalog, resolver)
        assert intake.take([assertions_event("0194a1b2-0000-7000-8000-0000000000a1", 10, False)])[0].ok
        [dataset] = [a.id for a in catalog.list_assets()]
        assert catalog.db.conn.execute("SELECT asset_id FROM health_marks").fetchall() == [(dataset,)]
        marked = watch.step()
        assert marked is not None and (marked.marks, marked.judged, marked.alerts) == (1, 1, 1)
        assert alerts_queued(catalog) == [(dataset, "FAIL", None, "FAIL")]
        assert intake.take([assertions_event("0194a1b2-0000-7000-8000-0000000000a2", 70, True)])[0].ok
        watch.step()
        assert alerts_queued(catalog)[-1] == (dataset, "RECOVERED", "FAIL", "PASS")
        assert watch.step().marks == 0  # type: ignore[union-attr]
        code, _out, err = invoke(catalog_target, "assets", "set", dataset, "--freshness", "1h")
        assert code == 0, err
        looked = watch.step()  # (never written by a run: its checks judge it still)
        assert looked is not None and (looked.marks, looked.judged) == (1, 1)


def marks(catalog: Catalog) -> list[str]:
    """The assets marked for the health watch, a row each mark."""
    return sorted(row[0] for row in catalog.db.conn.execute("SELECT asset_id FROM health_marks").fetchall())


def received_run(
    n: int, event_type: str, minutes: float, *, inputs: bool = True, outputs: bool = True
) -> dict[str, Any]:
    """An event of received run ``n``, reading s3://raw/in and writing s3://wh/out (or naming neither)."""
    return ol_run_event(
        event_type,
        run_id=f"0194a1b2-0000-7000-8000-{n:012d}",
        job=("airflow", "load"),
        inputs=[ol_dataset("s3://raw", "in")] if inputs else [],
        outputs=[ol_dataset("s3://wh", "out")] if outputs else [],
        time=at(minutes).isoformat().replace("+00:00", "Z"),
    )


@pytest.mark.both_engines
def test_writes_mark_nothing_while_no_watch_is_live(catalog: Catalog, resolver: Resolver) -> None:
    """With no watch (no lease ever taken; then one whose holder stopped renewing it, killed say,
    past its end) a received group writing a dataset, a task run, an asset set and a freshness rule
    set write no mark; with the watch live, each does."""
    now = [clock_at(0)]
    watched_by(catalog, lambda: now[0])
    intake = catalog_intake(catalog, resolver)

    def write(n: int) -> None:
        assert intake.take([received_run(n, "COMPLETE", n)])[0].ok
        write_mart(catalog, "mart.a", n, execution=f"e{n}")
        catalog.set_asset(decl("mart.b", type="Table"), now=at(n))
        catalog.set_freshness("mart.b", None, now=at(n))

    write(1)
    assert marks(catalog) == []
    watch = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: now[0], ttl=30)
    assert watch.step() is not None
    write(2)
    assert set(marks(catalog)) == {"mart.a", "mart.b", "s3://wh/out", "stg.orders"}
    now[0] = clock_at(10)  # past the writes (one dated ahead of the watch's clock keeps its mark)
    assert watch.step().marks == 4  # type: ignore[union-attr]
    now[0] += 31  # the watch stopped renewing its lease: it lapsed
    write(3)
    assert marks(catalog) == []


@pytest.mark.both_engines
def test_a_failing_asset_deleted_is_told_as_recovered_once(catalog: Catalog) -> None:
    """An asset FAIL, then deleted: its alert's incident is closed by one RECOVERED, its health
    UNKNOWN with the reason that it was deleted (at the next look: the deletion marks it); a PASS
    asset deleted tells nothing, and neither does a pass over every asset later."""
    now = [clock_at(10)]
    watched_by(catalog, lambda: now[0])
    write_mart(catalog, "mart.bad", 0, execution="e0")
    write_mart(catalog, "mart.bad", 2, state="FAILED", execution="e1")
    write_mart(catalog, "mart.good", 0, execution="e2")
    watch = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: now[0], ttl=86400.0)
    watch.step()
    assert alerts_queued(catalog) == [("mart.bad", "FAIL", None, "FAIL")]
    now[0] = clock_at(20)
    catalog.delete_asset("mart.bad", now=at(20))
    catalog.delete_asset("mart.good", now=at(20))
    result = watch.step()
    assert result is not None and result.alerts == 1
    rows = catalog.db.conn.execute("SELECT payload FROM outbox WHERE kind = 'alert' ORDER BY seq").fetchall()
    told = json.loads(rows[-1][0])
    assert (told["asset"]["id"], told["event"], told["oldHealth"], told["health"]) == (
        "mart.bad",
        "RECOVERED",
        "FAIL",
        "UNKNOWN",
    )
    assert told["reasons"] == ["the asset was deleted"] and told["asset"]["type"] == "Table"
    assert told["text"] == "[RECOVERED] mart.bad is UNKNOWN (was FAIL): the asset was deleted"
    assert set(kept(catalog.db.conn)) == {"stg.orders"}  # both forgotten
    now[0] = clock_at(200)
    watch.run_once()  # a pass over every asset: nothing more
    assert len(alerts_queued(catalog)) == 2


@pytest.mark.both_engines
def test_a_failing_asset_purged_is_told_as_recovered_once(catalog_target: str) -> None:
    """As a deleted one: an asset FAIL, then purged, closes its alert's incident with one
    RECOVERED (at the next look: the purge marks it), matched by its rules as it was; one purged
    while no watch was live, at the next pass over every asset; a PASS asset purged tells nothing.
    A purge told nothing (the kept health went with the asset)."""
    now = [clock_at(10)]
    with Catalog(catalog_target) as catalog:
        watched_by(catalog, lambda: now[0])
        write_mart(catalog, "mart.bad", 0, execution="e0")
        write_mart(catalog, "mart.bad", 2, state="FAILED", execution="e1")
        write_mart(catalog, "mart.worse", 2, state="FAILED", execution="e2")
        write_mart(catalog, "mart.good", 0, execution="e3")
        watch = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: now[0], ttl=86400.0)
        watch.step()
        assert alerts_queued(catalog) == [("mart.bad", "FAIL", None, "FAIL"), ("mart.worse", "FAIL", None, "FAIL")]
        now[0] = clock_at(20)
        assert catalog.purge(AssetQuery.create(ids=("mart.bad", "mart.good"))).ids == ("mart.bad", "mart.good")
        result = watch.step()
        assert result is not None and result.alerts == 1
        rows = catalog.db.conn.execute("SELECT payload FROM outbox WHERE kind = 'alert' ORDER BY seq").fetchall()
        told = json.loads(rows[-1][0])
        assert (told["asset"], told["event"], told["oldHealth"], told["health"], told["reasons"]) == (
            {"id": "mart.bad", "type": "Table", "namespace": None},
            "RECOVERED",
            "FAIL",
            "UNKNOWN",
            ["the asset was deleted"],
        )
        # the command line's writes see no live watch (its clock is not the tests'): no mark
        code, _out, err = invoke(catalog_target, "assets", "purge", "--id", "mart.worse")
        assert code == 0, err
        # kept until its RECOVERED is told, a purged asset's row counts as no asset's health
        assert counts(catalog.db.conn)["FAIL"] == 0 and "mart.worse" in kept(catalog.db.conn)
        now[0] = clock_at(30)
        watch.run_once()  # a pass over every asset
        assert alerts_queued(catalog)[2:] == [
            ("mart.bad", "RECOVERED", "FAIL", "UNKNOWN"),
            ("mart.worse", "RECOVERED", "FAIL", "UNKNOWN"),
        ]
        assert set(kept(catalog.db.conn)) == {"stg.orders"}
        now[0] = clock_at(200)
        watch.run_once()  # nothing more
        assert len(alerts_queued(catalog)) == 4


@pytest.mark.both_engines
def test_recovered_goes_to_the_alerts_told_the_failure_whatever_they_match_now(catalog: Catalog) -> None:
    """An alert table that matched the asset when it failed (``tier = gold``), and no longer does
    (its metadata changed meanwhile), was told no RECOVERED: its incident stayed open for ever. It
    is told it, as those that take the asset now are (as before: a table may be on RECOVERED
    alone)."""
    now = [clock_at(10)]
    watched_by(catalog, lambda: now[0])
    gold = rule("http://h/gold", name="gold", match=Match(metadata={"tier": "gold"}))
    silver = rule("http://h/silver", name="silver", match=Match(metadata={"tier": "silver"}))
    catalog.set_asset(decl("mart.x", type="Table", metadata={"tier": "gold"}), now=at(0))
    write_mart(catalog, "mart.x", 1, state="FAILED", execution="e1")
    watch = HealthWatch(catalog, settings(gold, silver), clock=lambda: now[0], ttl=86400.0)
    watch.step()
    assert alerts_queued(catalog) == [("mart.x", "FAIL", None, "FAIL")]
    assert kept(catalog.db.conn)["mart.x"].told == ("gold",)
    now[0] = clock_at(20)
    catalog.set_asset(decl("mart.x", metadata={"tier": "silver"}), now=at(20))
    watch.step()
    write_mart(catalog, "mart.x", 21, execution="e2")
    now[0] = clock_at(30)
    watch.step()
    rows = catalog.db.conn.execute("SELECT run_key, payload FROM outbox WHERE kind = 'alert' ORDER BY seq").fetchall()
    told = [(key.split(":")[1], json.loads(body)["event"]) for key, body in rows]
    assert told == [("gold", "FAIL"), ("silver", "RECOVERED"), ("gold", "RECOVERED")], told
    assert kept(catalog.db.conn)["mart.x"].told == ()


@pytest.mark.both_engines
def test_a_failing_placeholder_taken_over_is_told_as_recovered_once(catalog: Catalog, resolver: Resolver) -> None:
    """A received placeholder FAIL (a failed check), then taken over by olbridge's own asset of
    the same dataset: its kept health went with it, unjudged, and its alert's incident stayed open
    for ever (the id is no asset's any more). It is closed by one RECOVERED saying what took it
    over, at the next look (the takeover marks it); the own asset's health is its own."""
    from tests.test_adopt import OWN, RECEIVED

    now = [clock_at(10)]
    watched_by(catalog, lambda: now[0])
    failed = ol_dataset("s3://lake", "raw/orders")
    failed["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [{"assertion": "not_null", "success": False}],
        }
    }
    event = ol_run_event(job=("gx", "suite"), inputs=[failed], time=format_time(at(1)))
    assert [o.ok for o in catalog_intake(catalog, resolver).take([event])] == [True]
    everyone = rule("http://h/x", match=Match())
    watch = HealthWatch(catalog, settings(everyone), clock=lambda: now[0], ttl=86400.0)
    watch.step()
    assert alerts_queued(catalog) == [(RECEIVED, "FAIL", None, "FAIL")]
    now[0] = clock_at(20)
    catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(20), execution="e9"))
    assert catalog.get_asset(RECEIVED) is None and catalog.get_asset(OWN) is not None  # taken over
    watch.step()
    told = alerts_queued(catalog)[1:]
    assert (RECEIVED, "RECOVERED", "FAIL", "UNKNOWN") in told and len([t for t in told if t[0] == RECEIVED]) == 1
    rows = catalog.db.conn.execute("SELECT payload FROM outbox WHERE kind = 'alert' ORDER BY seq").fetchall()
    closed = [m for m in (json.loads(r[0]) for r in rows) if m["asset"]["id"] == RECEIVED and m["event"] == "RECOVERED"]
    assert closed[0]["reasons"] == [f"taken over by {OWN}"]
    assert RECEIVED not in kept(catalog.db.conn)
    now[0] = clock_at(200)
    watch.run_once()  # a pass over every asset: nothing more of it
    assert len([t for t in alerts_queued(catalog) if t[0] == RECEIVED]) == 2


@pytest.mark.both_engines
def test_the_watch_judges_what_time_alone_changes_when_it_is_due_and_nothing_else(catalog: Catalog) -> None:
    """mart.orders written at 08:00 with 6h / warn 2h, mart.b with no rule: with no pass over every
    asset after the first, each look judges only what is due. Nothing until 12:00 (12:00 itself
    still fresh); mart.orders alone just after it (WARN), and just after 14:00 (FAIL); then
    nothing, FAIL holding until a write. A write makes it fresh again, and due at its new time."""
    write_mart(catalog, "mart.orders", 0, execution="e1")
    write_mart(catalog, "mart.b", 0, execution="e2")
    six_hours = FreshnessRule.create(max=timedelta(hours=6), warn=timedelta(hours=2))
    catalog.set_freshness("mart.orders", six_hours, now=at(0))
    now = [clock_at(60)]
    day = 86400.0
    watch = HealthWatch(
        catalog,
        WatchSettings(alerts=(rule("http://h/x"),), every=30 * day, poll=0.01),
        clock=lambda: now[0],
        ttl=30 * day,  # the clock jumps days
        catch_up=30 * day,
    )
    watched_by(catalog, lambda: now[0])
    first = watch.step()  # every asset, the lease taken
    assert first is not None and (first.judged, first.due, first.moved) == (3, 0, 3)
    assert {k: v.due_at for k, v in kept(catalog.db.conn).items()} == {
        "mart.b": None,
        "mart.orders": "2025-03-01T12:00:00.000001Z",
        "stg.orders": None,
    }
    for minutes, judged, alerts in ((239, 0, []), (240, 0, []), (240.001, 1, ["WARN"]), (361, 1, ["WARN", "FAIL"])):
        now[0] = clock_at(minutes)
        done = watch.step()
        assert done is not None and (done.judged, done.due, done.marks) == (judged, judged, 0), minutes
        assert [a[1] for a in alerts_queued(catalog)] == alerts, minutes
    now[0] = clock_at(3000)
    assert watch.step().judged == 0  # type: ignore[union-attr]
    assert kept(catalog.db.conn, ["mart.orders"])["mart.orders"].due_at is None
    write_mart(catalog, "mart.orders", 3000, execution="e3")
    assert watch.step().alerts == 1 and alerts_queued(catalog)[-1][1] == "RECOVERED"  # type: ignore[union-attr]
    # marked by the write: judged again five minutes on, then when its window warns
    assert kept(catalog.db.conn, ["mart.orders"])["mart.orders"].due_at == format_time(at(3005))
    now[0] = clock_at(3005)  # it and its input: their due times rewritten, their health as it was
    rechecked = watch.step()
    assert rechecked is not None and (rechecked.due, rechecked.changed, rechecked.moved) == (2, 2, 0)
    assert len(alerts_queued(catalog)) == 3
    assert kept(catalog.db.conn, ["mart.orders"])["mart.orders"].due_at == format_time(at(3240) + MICROSECOND)


def test_a_pass_goes_on_when_a_write_opens_a_new_connection(
    postgres: PostgresServer, catalog_template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a write transaction may open a new connection in place of the old one (none
    keeps its plans for long): a pass writing in batches reads what its next batch writes (the
    assets at risk below each FAIL) on the connection as it then is, not the closed one."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    with Catalog(url) as catalog:
        for n, asset_id in enumerate(("mart.a", "mart.b", "mart.c")):
            write_mart(catalog, asset_id, n, execution=f"e{n}")
            write_mart(catalog, asset_id, n + 10, state="FAILED", execution=f"f{n}")
        monkeypatch.setattr(catalog.db, "_replan_if_due", catalog.db._reconnect)  # a new one at each write
        done = judge(catalog.db, (), (rule("http://h/x"),), at(60), every=True, batch=1)
        assert (done.changed, done.alerts) == (4, 3) and len(alerts_queued(catalog)) == 3, done


def test_the_counts_are_published_when_a_health_changes_not_when_a_due_time_alone_does(catalog: Catalog) -> None:
    """/metrics hears the counts by health every 15 seconds, and at once after a look that changed
    an asset's health; a look that rewrote kept health for its due time alone (a write marked it,
    its health as it was) is no reason to count again."""
    published: list[dict[str, int]] = []
    now = [clock_at(60)]
    day = 86400.0
    watched_by(catalog, lambda: now[0])
    watch = HealthWatch(
        catalog,
        WatchSettings(every=30 * day, poll=0.01),
        clock=lambda: now[0],
        ttl=30 * day,
        catch_up=30 * day,
        publish=published.append,
    )
    write_mart(catalog, "mart.a", 0, execution="e1")

    def look(minutes: float) -> Any:
        now[0] = clock_at(minutes)
        result = watch.step()
        watch._publish(result)
        return result

    assert look(60).moved == 2 and len(published) == 1  # every asset, the first counts
    write_mart(catalog, "mart.a", 10, execution="e2")
    again = look(60.05)  # 3 seconds on
    assert (again.changed, again.moved) == (2, 0) and len(published) == 1  # kept rows rewritten alone
    write_mart(catalog, "mart.a", 20, state="FAILED", execution="e3")
    assert look(60.1).moved == 1 and published[-1]["FAIL"] == 1 and len(published) == 2


@pytest.mark.both_engines
def test_a_run_dated_ahead_of_the_watch_s_clock_counts_from_its_time(catalog: Catalog, resolver: Resolver) -> None:
    """A producer's clock two minutes fast: the run that writes a failed dataset again ends, by
    its events, after the look its write's mark brings (left out as of then: still FAIL). The
    asset is due again at its write's time (it was five minutes on, the marked asset's recheck),
    and that look finds the run: RECOVERED, once."""
    now = [clock_at(60)]
    watched_by(catalog, lambda: now[0])
    alert = AlertRule("all", Match(), frozenset({"FAIL", "RECOVERED"}), "http://h/x")
    watch = HealthWatch(catalog, settings(alert), clock=lambda: now[0], ttl=86400.0, catch_up=86400.0)
    assert watch.step() is not None  # every asset (none yet)
    intake = catalog_intake(catalog, resolver)
    assert all(o.ok for o in intake.take([received_run(1, "START", 10), received_run(1, "FAIL", 20)]))
    assert watch.step().alerts == 1  # type: ignore[union-attr]
    assert all(o.ok for o in intake.take([received_run(2, "START", 61), received_run(2, "COMPLETE", 62)]))
    now[0] = clock_at(60.5)
    marked = watch.step()
    assert marked is not None and (marked.marks, marked.alerts) == (1, 0)  # the run not ended as of now
    now[0] = clock_at(61.9)
    assert watch.step().judged == 0  # type: ignore[union-attr]
    now[0] = clock_at(62.1)  # past the output's write: judged again
    due = watch.step()
    assert due is not None and (due.due, due.alerts) == (1, 1)
    now[0] = clock_at(65)  # the input, marked when its placeholder was made at 60: judged again
    again = watch.step()
    assert again is not None and (again.due, again.alerts) == (1, 0)
    now[0] = clock_at(65.6)
    assert watch.step().judged == 0  # type: ignore[union-attr]
    assert alerts_queued(catalog) == [
        ("s3://wh/out", "FAIL", None, "FAIL"),  # first judged: no health before
        ("s3://wh/out", "RECOVERED", "FAIL", "PASS"),
    ]
    now[0] = clock_at(80)
    assert watch.step().judged == 0  # type: ignore[union-attr]


@pytest.mark.both_engines
def test_an_own_write_dated_ahead_is_judged_at_its_time_whatever_looks_come_between(catalog: Catalog) -> None:
    """A failed asset written again by a run whose end is 30 s ahead of the watch's clock: the
    look its mark brings leaves the write out (FAIL). A look that judged it again unmarked (a pass
    over every asset, 15 s on) dropped its recheck, and the asset stayed FAIL until the next pass
    over every asset, an hour on; and the mark's look told UPDATED, FAIL to FAIL, of the write
    it left out. It is judged again at the write's time: RECOVERED and UPDATED, to PASS, once."""
    now = [clock_at(60)]
    watched_by(catalog, lambda: now[0])
    tell = AlertRule("all", Match(), frozenset({"FAIL", "RECOVERED", "UPDATED"}), "http://h/x")
    watch = HealthWatch(catalog, settings(tell), clock=lambda: now[0], ttl=86400.0, catch_up=86400.0)
    watch.step()
    write_mart(catalog, "mart.m", 50, state="FAILED", execution="e1")
    now[0] = clock_at(52)
    watch.step()
    before = alerts_queued(catalog)
    assert ("mart.m", "FAIL", None, "FAIL") in before
    catalog.record_task_run(
        run("build-mart.m", execution="e2", outputs=(decl("mart.m", type="Table"),), start=at(59), end=at(60.5))
    )
    now[0] = clock_at(60)  # the run ends 30 s from now, by the watch's clock
    assert watch.step().marks == 1  # type: ignore[union-attr]
    now[0] = clock_at(60.25)
    judge(catalog.db, (), (tell,), at(60.25), every=True)  # a pass over every asset, unmarked
    assert alerts_queued(catalog) == before  # nothing told of the write yet
    assert kept(catalog._conn)["mart.m"].health is Health.FAIL
    now[0] = clock_at(60.6)
    due = watch.step()
    assert due is not None and due.due == 1
    assert kept(catalog._conn)["mart.m"].health is Health.PASS
    assert alerts_queued(catalog) == [
        *before,
        ("mart.m", "RECOVERED", "FAIL", "PASS"),
        ("mart.m", "UPDATED", "FAIL", "PASS"),
    ]


def test_a_write_dated_far_ahead_is_told_updated_at_once(catalog: Catalog) -> None:
    """A write dated further ahead than a marked asset's recheck (a clock hours off, local time
    written as UTC) is told UPDATED at the look its mark brings, as before: held until its time,
    it would be held for hours, or years."""
    now = [clock_at(60)]
    watched_by(catalog, lambda: now[0])
    tell = AlertRule("all", Match(), frozenset({"UPDATED"}), "http://h/x")
    watch = HealthWatch(catalog, settings(tell), clock=lambda: now[0], ttl=86400.0, catch_up=86400.0)
    catalog.set_asset(decl("mart.m", type="Table"), now=at(0))
    watch.step()
    catalog.set_asset(decl("mart.m", metadata={"k": "v"}), now=at(240))  # three hours ahead
    now[0] = clock_at(61)
    watch.step()
    assert alerts_queued(catalog) == [("mart.m", "UPDATED", "UNKNOWN", "UNKNOWN")]


@pytest.mark.both_engines
def test_a_received_group_marks_what_may_change_a_health_and_each_change_is_alerted_once(
    catalog: Catalog, resolver: Resolver
) -> None:
    """A watch live: a run's START marks what it writes, and what it only reads only when it
    makes or rebuilds its placeholder (new, or its facets changed: its metadata, which a selector
    may match); its FAIL, naming no dataset, marks every output the run wrote (its state is
    theirs); a dataset with assertions is marked, read or written. The watch's next look judges
    the marked ones and queues one alert a change, and the one after finds nothing left."""
    now = [clock_at(60)]
    watched_by(catalog, lambda: now[0])
    watch = HealthWatch(
        catalog,
        settings(AlertRule("all", Match(), frozenset({"FAIL", "RECOVERED"}), "http://h/x")),
        clock=lambda: now[0],
    )
    assert watch.step() is not None  # every asset (none yet)
    intake = catalog_intake(catalog, resolver)
    assert intake.take([received_run(1, "START", 1)])[0].ok
    assert marks(catalog) == ["s3://raw/in", "s3://wh/out"]  # the input's placeholder made
    assert watch.step().judged == 2 and alerts_queued(catalog) == []  # type: ignore[union-attr]
    assert intake.take([received_run(3, "START", 2, outputs=False)])[0].ok
    assert marks(catalog) == []  # the input read again as it was: not marked
    assert intake.take([received_run(1, "FAIL", 2, inputs=False, outputs=False)])[0].ok
    assert marks(catalog) == ["s3://wh/out"]
    failed = watch.step()
    assert failed is not None and (failed.marks, failed.alerts) == (1, 1)
    assert alerts_queued(catalog) == [("s3://wh/out", "FAIL", "UNKNOWN", "FAIL")]
    assert watch.step().marks == 0 and len(alerts_queued(catalog)) == 1  # type: ignore[union-attr]
    assert intake.take([assertions_event("0194a1b2-0000-7000-8000-0000000000a1", 10, False)])[0].ok
    assert marks(catalog) == ["shop.public.orders"]  # an input, with assertions
    assert watch.step().alerts == 1  # type: ignore[union-attr]
    assert alerts_queued(catalog)[-1] == ("shop.public.orders", "FAIL", None, "FAIL")
    assert intake.take([received_run(2, "COMPLETE", 30)])[0].ok  # a later run wrote it: it recovers
    assert watch.step().alerts == 1 and watch.step().alerts == 0  # type: ignore[union-attr]
    assert alerts_queued(catalog)[-1] == ("s3://wh/out", "RECOVERED", "FAIL", "PASS")


@pytest.mark.both_engines
def test_a_watch_taking_over_judges_every_asset_again_after_the_writers_have_seen_it(catalog: Catalog) -> None:
    """A writer trusts what it read of the lease for a few seconds: one that read it free just
    before a watch took it writes a failed run unmarked. The watch judges every asset as it takes
    over, and again once the writers have all seen it live: that pass finds the failure, and its
    alert is queued once."""
    now = [clock_at(10)]
    catalog.watch_seen = WatchSeen(clock=lambda: now[0])  # read again every SEEN_FOR seconds
    write_mart(catalog, "mart.a", 0, execution="e0")  # the lease read: free
    watch = HealthWatch(catalog, settings(rule("http://h/x")), clock=lambda: now[0])
    taken = now[0] = now[0] + 1
    assert watch.step().judged == 2  # type: ignore[union-attr]  # every asset, at once
    now[0] += 1
    write_mart(catalog, "mart.a", 2, state="FAILED", execution="e1")  # not seen live yet: no mark
    assert marks(catalog) == []
    now[0] += 1
    assert watch.step().judged == 0 and alerts_queued(catalog) == []  # type: ignore[union-attr]
    now[0] = taken + TAKEOVER_PASS_AFTER
    again = watch.step()
    assert again is not None and again.judged == 2 and alerts_queued(catalog) == [("mart.a", "FAIL", "PASS", "FAIL")]
    write_mart(catalog, "mart.a", 3, execution="e2")  # seen live by now: marked
    assert marks(catalog) == ["mart.a", "stg.orders"]
    now[0] += 1
    assert watch.step().judged == 2  # type: ignore[union-attr]  # the marked ones: the schedule is not due
    assert alerts_queued(catalog) == [("mart.a", "FAIL", "PASS", "FAIL"), ("mart.a", "RECOVERED", "FAIL", "PASS")]


def test_a_mark_committed_late_with_a_lower_key_is_not_cleared_unjudged(postgres_url: str) -> None:
    """On PostgreSQL a writer's mark may take its key before another's and commit after the watch
    read the marks: the watch then deletes none of that asset's marks (their count moved), and
    judges it again at its next look."""
    with Catalog(postgres_url) as catalog, Catalog(postgres_url) as late:
        write_mart(catalog, "mart.a", 0, execution="e0")
        inserted, commit, committed = threading.Event(), threading.Event(), threading.Event()

        def late_writer() -> None:
            def work(cur: Any) -> None:
                cur.execute("INSERT INTO health_marks (asset_id) VALUES ('mart.a')")  # the lower key
                inserted.set()
                assert commit.wait(30)

            late.db.write(work)
            committed.set()

        thread = threading.Thread(target=late_writer)
        thread.start()
        assert inserted.wait(30)
        catalog.db.write(lambda cur: cur.execute("INSERT INTO health_marks (asset_id) VALUES ('mart.a')"))

        def fence(cur: Any) -> bool:  # the marks read and judged; the late one commits now
            commit.set()
            return committed.wait(30)

        first = judge(catalog.db, (), (), at(5), every=False, fence=fence)
        thread.join(30)
        assert first.marks == 1 and marks(catalog) == ["mart.a", "mart.a"]
        again = judge(catalog.db, (), (), at(5), every=False)
        assert again.marks == 1 and marks(catalog) == []


def test_updated_alerts_follow_the_metadata_condition(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    updated = AlertRule("dbt", Match(), frozenset({"UPDATED"}), "http://h/x", {}, {"dbtTestStatus": "fail"})
    now = [clock_at(1)]
    with Catalog(db) as catalog:
        watched_by(catalog, lambda: now[0])
        catalog.set_asset(decl("mart.a", type="Table", metadata={"dbtTestStatus": "pass"}), now=at(0))
        watch = HealthWatch(catalog, settings(updated), clock=lambda: now[0])
        watch.step()
        catalog.set_asset(decl("mart.a", metadata={"dbtTestStatus": "fail"}), now=at(2))
        now[0] = clock_at(2.5)
        watch.step()
        catalog.set_asset(decl("mart.a", metadata={"dbtTestStatus": "pass"}), now=at(3))
        now[0] = clock_at(3.5)
        watch.step()
        assert alerts_queued(catalog) == [("mart.a", "UPDATED", "UNKNOWN", "UNKNOWN")]


@pytest.mark.both_engines
def test_a_first_write_while_a_watch_is_live_is_told_updated(catalog_target: str) -> None:
    """An asset new while a watch is live, or back from a delete, was written: UPDATED, as for a
    later write; the assets there before the watch began are judged for the first time by its
    first pass, and tell none."""
    now = [clock_at(1)]
    updated = AlertRule("all", Match(), frozenset({"UPDATED"}), "http://h/x", {})
    with Catalog(catalog_target) as catalog:
        watched_by(catalog, lambda: now[0])
        catalog.set_asset(decl("mart.old", type="Table"), now=at(0))
        watch = HealthWatch(catalog, settings(updated), clock=lambda: now[0], ttl=86400.0)
        watch.step()
        assert alerts_queued(catalog) == []
        now[0] = clock_at(2)
        catalog.set_asset(decl("mart.new", type="Table"), now=at(2))
        watch.step()
        assert alerts_queued(catalog) == [("mart.new", "UPDATED", None, "UNKNOWN")]
        now[0] = clock_at(3)
        catalog.delete_asset("mart.new", now=at(3))
        watch.step()
        now[0] = clock_at(4)
        catalog.set_asset(decl("mart.new", type="Table"), now=at(4))
        watch.step()
        assert alerts_queued(catalog)[1:] == [("mart.new", "UPDATED", None, "UNKNOWN")]
        now[0] = clock_at(200)
        watch.run_once()  # a pass over every asset: nothing more
        assert len(alerts_queued(catalog)) == 2


@pytest.mark.both_engines
def test_two_watches_whose_pass_outlasts_the_lease_do_not_take_it_from_each_other(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass over every asset that judges for longer than the lease (a million assets read for
    half a minute, against 30 s): the lease is renewed while it judges, so the other watch does
    not take it over mid-pass (and this one then take it back from that one's pass: no pass ever
    ended, no health kept, no alert)."""
    import bridge.catalog.health_state

    real = bridge.catalog.health_state.assess

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(2.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(bridge.catalog.health_state, "assess", slow)
    with Catalog(catalog_target) as catalog:
        write_mart(catalog, "mart.a", 0, execution="e0")
    stop = threading.Event()
    catalogs = [Catalog(catalog_target), Catalog(catalog_target)]
    watches = [HealthWatch(c, WatchSettings(poll=0.05), ttl=2.0, stop=stop) for c in catalogs]
    threads = [threading.Thread(target=w.run) for w in watches]
    for thread in threads:
        thread.start()
    # Read through a catalog of its own: a connection is not shared with a watch's thread.
    reader = Catalog(catalog_target)
    try:
        assert wait_for(lambda: set(kept(reader.db.conn)) == {"stg.orders", "mart.a"}, timeout=40)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        for c in [*catalogs, reader]:
            c.close()


def test_a_watch_started_while_its_catalog_cannot_be_opened_waits_for_it(tmp_path: Path) -> None:
    """The watch's thread (``stream``) or process (``serve``) opens the catalog on its own: one
    that cannot be opened as it starts (its server restarting) is said once and tried again each
    poll, and the watch runs once it can (it died with a traceback, for as long as its process ran)."""
    from bridge.delivery.health_watch import start_thread

    db = tmp_path / "c.db"
    said: list[str] = []
    stop = threading.Event()
    thread = start_thread(db, WatchSettings(poll=0.05), stop, said.append)
    try:
        assert wait_for(lambda: len(said) >= 1, timeout=10)
        assert said[0].startswith(f"Warning: health watch: no catalog at {db}") and thread.is_alive()
        Catalog(db).close()
        assert wait_for(lambda: "health watch: the catalog is back" in said, timeout=10)
        with Catalog(db) as catalog:

            def leased() -> bool:
                row = catalog.db.conn.execute(LEASE, (LEASE_KIND,)).fetchone()
                return row is not None and bool(json.loads(row[0]).get("holder"))

            assert wait_for(leased, timeout=10)
    finally:
        stop.set()
        thread.join(30)
    assert len([line for line in said if line.startswith("Warning")]) == 1


# --- delivery --------------------------------------------------------------------------------


def stream_worker(
    catalog: Catalog, backend_url: str, alerts: list[AlertRule], clock: Callable[[], float]
) -> StreamWorker:
    """A stream worker with a clock that moves on by ten minutes each reading (every retry is due)."""
    return StreamWorker(
        catalog,
        Converter(Resolver.load()),
        Dispatcher(HttpSender(backend_url), concurrency=1),
        policy=RetryPolicy(max_attempts=0),
        clock=clock,
        sleep=lambda seconds: None,
        alerts=AlertSenders(alerts, timeout=2.0),
    )


def test_alerts_to_a_webhook_down_then_flapping_then_up_go_once_each_in_order(tmp_path: Path) -> None:
    """Two marts flip between FAIL and PASS six times while the webhook is down (nothing listens),
    then answers 500 and 200 in turn, then 200: every change arrives once, in order per asset, and
    a worker started again (a restart) loses and repeats nothing."""
    db = tmp_path / "c.db"
    port = free_port()
    hook = Webhook(port)
    ticks = iter(range(10**6))
    clock = lambda: clock_at(10_000) + 600 * next(ticks)  # noqa: E731
    marts = ("mart.a", "mart.b")
    with Catalog(db) as catalog, Backend() as backend:
        alert = rule(hook.url, headers={"Authorization": "Bearer t0ken"})
        watch = HealthWatch(watched_by(catalog, lambda: clock_at(100)), settings(alert), clock=lambda: clock_at(100))
        for mart in marts:  # the marts exist (a failed run writes nothing) and are PASS
            write_mart(catalog, mart, -1, execution="first")
        watch.step()
        for n in range(6):
            for mart in marts:
                write_mart(catalog, mart, n, state="FAILED" if n % 2 == 0 else "SUCCESS", execution=f"e{n}")
            watch.step()
        flips = [("FAIL", "PASS", "FAIL"), ("RECOVERED", "FAIL", "PASS")] * 3
        expected = [(mart, *change) for mart in marts for change in flips]
        assert sorted(alerts_queued(catalog)) == sorted(expected)
        worker = stream_worker(catalog, backend.url, [alert], clock)
        tried = "SELECT count(*) FROM outbox WHERE kind = 'alert' AND attempts > 0"
        for _ in range(200):  # down: connection refused, the alerts stay pending (rounds of what is in flight)
            worker.step()
            if catalog._conn.execute(tried).fetchone()[0] >= len(marts):
                break
        assert catalog._conn.execute(tried).fetchone()[0] >= len(marts)  # each asset's first alert tried
        assert catalog.outbox.status().dead == 0 and hook.arrived == 0
        hook.start()
        flip = iter(range(10**6))
        hook.answer = lambda body: 500 if next(flip) % 2 == 0 else 200
        for _ in range(200):  # flapping: some go, some are retried
            worker.step()
            if len(hook.taken) >= 2:
                break
        assert 0 < len(hook.taken) < len(expected)
        worker = stream_worker(Catalog(db), backend.url, [alert], clock)  # started again
        hook.answer = lambda body: 200
        for _ in range(50):
            if not worker.step() and catalog.outbox.status().pending == 0:
                break
        assert catalog.outbox.status().pending == 0 and catalog.outbox.status().dead == 0
        worker.catalog.close()
    got = hook.changes()
    assert len(got) == len(expected) and sorted(got) == sorted(expected)  # once each
    for mart in marts:
        assert [g for g in got if g[0] == mart] == [e for e in expected if e[0] == mart]  # in order
    assert {h["Authorization"] for h in hook.headers} == {"Bearer t0ken"}
    assert all(h["Content-Type"] == "application/json" for h in hook.headers)


def test_a_once_run_gives_up_on_a_webhook_that_stays_down_and_a_run_that_goes_on_does_not(tmp_path: Path) -> None:
    """``stream --once`` must end: its retry budget counts a webhook that never answers (nothing
    listens), and the alert stays pending; a stream that runs on keeps retrying it (the backend's
    failures alone make it give up)."""
    db = tmp_path / "c.db"
    hook = Webhook(free_port())  # never started
    with Catalog(db) as catalog, Backend() as backend:
        alert = rule(hook.url)
        watch = HealthWatch(watched_by(catalog, lambda: clock_at(100)), settings(alert), clock=lambda: clock_at(100))
        write_mart(catalog, "mart.a", -1, execution="first")
        watch.step()
        write_mart(catalog, "mart.a", 0, state="FAILED", execution="e0")
        watch.step()
        assert [a[0] for a in alerts_queued(catalog)] == ["mart.a"]
        for once in (True, False):
            ticks = iter(range(10**6))
            worker = stream_worker(catalog, backend.url, [alert], lambda t=ticks: clock_at(10_000) + 600 * next(t))
            worker.give_up_after = 3600
            if once:
                worker.run(once=True)  # it returns: a hang is the test's timeout
                assert worker.gave_up is not None and worker.gave_up.last is not None
                assert worker.gave_up.last_was_alert  # the message names the webhooks, not the backend
            else:
                for _ in range(20):
                    worker.step()
                    assert not worker._out_of_budget(None)
            assert catalog.outbox.status().pending == 1 and catalog.outbox.status().dead == 0
        # the command says it gave up on the webhooks, not on the backend, which took everything
        config = config_file(tmp_path, hook)
        code, _out, err = invoke(
            db, "--config", str(config), "stream", "--once", "--url", backend.url, "--give-up-after", "1",
            "--backoff", "0.2",
        )  # fmt: skip
        error = err.strip().splitlines()[-1]
        assert code == 1 and error.startswith("Error: gave up on delivering alerts to their webhooks: "), err
        assert error.endswith("when the webhook is back") and f"to {backend.url}" not in error


def test_an_alert_whose_table_left_the_config_is_a_dead_letter(tmp_path: Path, webhook: Webhook) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog, Backend() as backend:
        write_mart(catalog, "mart.a", 0, execution="e0")
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
        HealthWatch(catalog, settings(rule(webhook.url, name="gone")), clock=lambda: clock_at(5)).step()
        worker = stream_worker(catalog, backend.url, [rule(webhook.url)], lambda: clock_at(5))
        worker.run(once=True)
        [dead] = catalog.outbox.items(dead=True)
        assert dead.kind == "alert" and dead.last_error == "no [[alerts]] table named 'gone' in the config"


def test_the_stream_says_an_alert_whose_table_left_the_config_may_be_why_it_went_dead(
    tmp_path: Path, webhook: Webhook
) -> None:
    """Its summary said an alert became a dead letter "refused by the alerts' webhooks, or out of
    --max-attempts": neither, here. It names the third cause."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        write_mart(catalog, "mart.a", 0, execution="e0")
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
        HealthWatch(catalog, settings(rule(webhook.url, name="gone")), clock=lambda: clock_at(5)).step()
    code, _out, err = invoke(db, "--config", str(config_file(tmp_path, webhook)), "stream", "--alerts-only", "--once")
    assert code == 1 and "1 alert(s) became dead letters" in err, err
    assert "its [[alerts]] table no longer in the config" in err


def fail_recover_fail(catalog: Catalog, alert: AlertRule) -> None:
    """mart.a FAIL, then RECOVERED, then FAIL again: three alerts of one asset queued for ``alert``."""
    watch = HealthWatch(watched_by(catalog, lambda: clock_at(100)), settings(alert), clock=lambda: clock_at(100))
    write_mart(catalog, "mart.a", 0, execution="e0")
    watch.step()
    for n, state in enumerate(("FAILED", "SUCCESS", "FAILED"), start=1):
        write_mart(catalog, "mart.a", n, state=state, execution=f"e{n}")
        watch.step()
    assert [a[1] for a in alerts_queued(catalog)] == ["FAIL", "RECOVERED", "FAIL"]


@pytest.mark.both_engines
@pytest.mark.parametrize("alerts_only", [True, False], ids=["alerts-only", "with-a-backend"])
def test_an_alert_refused_for_good_mutes_none_of_its_asset_s_later_alerts(
    catalog_target: str, webhook: Webhook, alerts_only: bool
) -> None:
    """The webhook refuses the first alert of an asset for good (410), then takes what comes: the
    refused one is a dead letter, and the asset's later alerts still go, one at a time, each once
    and in order, through the outbox's hold (the lease on SQLite, claims on PostgreSQL), whether
    the worker sends the alerts alone or the events too. They stayed queued behind it for ever."""
    answers = iter([410])
    webhook.answer = lambda body: next(answers, 200)
    webhook.start()
    alert = rule(webhook.url)
    with Catalog(catalog_target) as catalog, Backend() as backend:
        fail_recover_fail(catalog, alert)
        dispatcher = None if alerts_only else Dispatcher(HttpSender(backend.url), concurrency=1)
        worker = StreamWorker(
            catalog,
            Converter(Resolver.load()),
            dispatcher,
            policy=RetryPolicy(max_attempts=0),
            clock=lambda: clock_at(100),
            sleep=lambda seconds: None,
            alerts=AlertSenders([alert], timeout=2.0),
            lease=outbox_hold(catalog, ALERTS_ONLY_TARGET if alerts_only else backend.url),
        )
        stats = worker.run(once=True)
        assert stats.dead == 1
        # the dead FAIL is superseded once a later alert of its asset is delivered: sent again by
        # `outbox retry`, after the RECOVERED, it would reopen what the RECOVERED closed
        assert catalog.outbox.items(dead=True) == [] and alerts_queued(catalog) == []
        assert catalog.outbox.status().pending == (4 * 2 if alerts_only else 0)  # the runs' events
    assert webhook.arrived == 3
    assert webhook.changes() == [("mart.a", "RECOVERED", "FAIL", "PASS"), ("mart.a", "FAIL", "PASS", "FAIL")]


@pytest.mark.both_engines
def test_status_s_last_error_is_an_alert_s_when_its_webhook_failed_last(catalog_target: str, webhook: Webhook) -> None:
    """A webhook's failure is kept as the alerts' last one (named by the alert, its webhook never
    kept), beside the backend's: ``status`` shows the latest, which was only ever the backend's."""
    webhook.answer = lambda body: 410
    webhook.start()
    alert = rule(webhook.url)
    with Catalog(catalog_target) as catalog:
        fail_recover_fail(catalog, alert)
        older = DeliveryError("stream", "http://backend", "connection refused", None, "down", "2020-01-01T00:00:00Z")
        catalog.outbox.record_error(older)
        alerts_only_worker(catalog, alert, lambda: clock_at(100)).run(once=True)
        assert catalog.outbox.status().dead == 3 and catalog.outbox.errors()[1] == older
    code, out, _ = invoke(catalog_target, "status", "--json")
    error = json.loads(out)["lastError"]
    assert code == 0 and error == {
        "source": "alerts",
        "target": "marts",
        "failure": "refused",
        "status": 410,
        "detail": "ok",
        "at": format_time(at(100)),
    }
    code, out, _ = invoke(catalog_target, "status")
    assert code == 0 and f"last error: {error['at']} alert marts to its webhook: refused HTTP 410 ok\n" in out
    assert webhook.url not in out


@pytest.mark.both_engines
def test_a_worker_without_a_backend_sends_the_alerts_past_the_events_and_leaves_those_queued(
    catalog_target: str, webhook: Webhook
) -> None:
    """``stream --alerts-only``'s worker (no dispatcher) takes the alerts alone, though the runs'
    events were queued before them, through its hold on the outbox (the lease on SQLite, claims on
    PostgreSQL); a worker with a backend then delivers the events, and nothing twice."""
    webhook.start()
    alert = rule(webhook.url)
    with Catalog(catalog_target) as catalog, Backend() as backend:
        watch = HealthWatch(watched_by(catalog, lambda: clock_at(5)), settings(alert), clock=lambda: clock_at(5))
        write_mart(catalog, "mart.a", 0, execution="e0")
        watch.step()
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
        watch.step()
        events = catalog.outbox.status().pending - 1
        assert len(alerts_queued(catalog)) == 1 and events == 4  # two runs, START and end each
        worker = StreamWorker(
            catalog,
            Converter(Resolver.load()),
            None,
            clock=lambda: clock_at(5),
            sleep=lambda seconds: None,
            alerts=AlertSenders([alert], timeout=2.0),
            lease=outbox_hold(catalog, ALERTS_ONLY_TARGET),
        )
        stats = worker.run(once=True)
        assert webhook.changes() == [("mart.a", "FAIL", "PASS", "FAIL")]
        assert (stats.delivered, stats.dead, worker.gave_up) == (1, 0, None)
        assert catalog.outbox.status().pending == events and alerts_queued(catalog) == []
        assert {item.kind for item in catalog.outbox.items()} == {"run-start", "run-end"}
        assert worker.run(once=True).delivered == 1  # nothing more of its own to take
        stream_worker(catalog, backend.url, [alert], lambda: clock_at(5)).run(once=True)
        assert catalog.outbox.status().pending == 0 and backend.accepted_count == events
    assert len(webhook.taken) == 1


def alerts_only_worker(catalog: Catalog, alert: AlertRule, clock: Callable[[], float]) -> StreamWorker:
    """A worker of ``stream --alerts-only`` without a dispatcher, on ``clock``: read more than 1,000
    times, or a sleep more than 200, fails the test (a worker that would never end)."""
    readings, naps = iter(range(1000)), iter(range(200))

    def bounded() -> float:
        if next(readings, None) is None:
            raise AssertionError("the worker runs on and on")
        return clock()

    def nap(seconds: float) -> None:
        if next(naps, None) is None:
            raise AssertionError("the worker waits on and on")

    return StreamWorker(
        catalog,
        Converter(Resolver.load()),
        None,
        policy=RetryPolicy(max_attempts=0),
        clock=bounded,
        sleep=nap,
        alerts=AlertSenders([alert], timeout=2.0),
    )


def test_a_worker_of_alerts_alone_ends_past_events_waiting_for_a_retry_and_gives_up_on_its_webhooks(
    tmp_path: Path,
) -> None:
    """The retry it waits for is an alert's, never an event's (tried before by a stream to a
    backend that was down: a ``--once`` run waiting for it would never end); and its webhooks'
    failures count against --give-up-after, the only outcomes it has, with or without --once."""
    hook = Webhook(free_port())  # never started: nothing listens
    ticks = iter(range(10**6))
    clock = lambda: clock_at(10_000) + 600 * next(ticks)  # noqa: E731
    with Catalog(tmp_path / "c.db") as catalog:
        alert = rule(hook.url)
        watch = HealthWatch(watched_by(catalog, lambda: clock_at(5)), settings(alert), clock=lambda: clock_at(5))
        write_mart(catalog, "mart.a", 0, execution="e0")
        watch.step()
        stream_worker(catalog, f"http://127.0.0.1:{free_port()}", [alert], clock).step()  # the backend is down
        assert {i.kind for i in catalog.outbox.items() if i.attempts > 0} == {"run-start"}
        assert alerts_queued(catalog) == [] and catalog.outbox.next_retry_at(alerts_only=True) is None
        assert alerts_only_worker(catalog, alert, clock).run(once=True).attempts == 0  # nothing of its own
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
        watch.step()
        assert len(alerts_queued(catalog)) == 1
        for once in (True, False):
            worker = alerts_only_worker(catalog, alert, clock)
            worker.give_up_after = 3600
            worker.run(once=once)
            assert worker.gave_up is not None and worker.gave_up.last_was_alert, once
            assert worker.stats.delivered == 0 and catalog.outbox.alerts_pending() == 1


def test_the_alerts_are_found_through_their_own_index_on_sqlite(tmp_path: Path) -> None:
    """Past the events that wait (as many as the catalog records, where no backend takes them),
    not by reading every pending row at each look."""
    with Catalog(tmp_path / "c.db") as catalog:
        plan = " ".join(r[3] for r in catalog.db.conn.execute(f"EXPLAIN QUERY PLAN {OUTBOX_ALERT_HEADS}", (0, 50)))
        retry = " ".join(r[3] for r in catalog.db.conn.execute(f"EXPLAIN QUERY PLAN {OUTBOX_NEXT_ALERT_RETRY}"))
    assert "USING INDEX outbox_alerts" in plan and "outbox_state" not in plan, plan
    assert "outbox_retrying" in retry, retry


# --- real processes --------------------------------------------------------------------------


def config_file(tmp_path: Path, hook: Webhook, extra: str = "") -> Path:
    config = tmp_path / "olbridge.toml"
    config.write_text(
        f'[[alerts]]\nname = "marts"\nmatch = {{ id_prefix = "mart." }}\non = ["FAIL", "RECOVERED"]\n'
        f'webhook = "{hook.url}"\n[health]\nevery = "1h"\npoll = "1s"\n{extra}'
    )
    return config


def test_stream_alerts_only_needs_no_backend_and_says_what_it_cannot_do(tmp_path: Path, webhook: Webhook) -> None:
    """``olbridge stream --alerts-only --once``: the health judged, the alert delivered with no
    OpenLineage backend anywhere (no --url, no openlineage.yml), the events left queued and
    counted by ``status``; a --url with it, or no [[alerts]] to send, is an error saying so."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        write_mart(catalog, "mart.a", 0, execution="e0")
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
    webhook.start()
    config = config_file(tmp_path, webhook)
    code, out, err = invoke(db, "--config", str(config), "stream", "--alerts-only", "--once", "--json")
    assert code == 0, err
    assert f"streaming the alerts of {db} to the alerts' webhooks; health watch, 1 alert(s) (one pass)" in err
    assert "delivered 1 alert(s) in 1 round(s)" in err and json.loads(out)["delivered"] == 1
    assert webhook.changes() == [("mart.a", "FAIL", None, "FAIL")]
    code, out, err = invoke(db, "status", "--json")
    assert code == 0 and json.loads(out)["pending"] == 4, out
    code, _out, err = invoke(db, "--config", str(config), "stream", "--alerts-only", "--url", "http://127.0.0.1:9")
    assert code == 2 and "Error: --alerts-only sends nothing to an OpenLineage backend: leave out --url" in err
    code, _out, err = invoke(db, "--config", str(config), "stream", "--alerts-only", "--concurrency", "8")
    assert code == 2 and "leave out --concurrency" in err, err
    code, _out, err = invoke(db, "stream", "--alerts-only", "--once")
    assert code == 1 and err.strip().splitlines()[-1].startswith("Error: --alerts-only: no [[alerts]] tables"), err
    assert len(webhook.taken) == 1
    # a stream to a backend, on SQLite, is told that the worker holding the outbox sends alerts alone
    with Catalog(db) as catalog:
        hold = outbox_hold(catalog, ALERTS_ONLY_TARGET)
        assert hold.acquire(wait=False, stop=threading.Event(), sleep=lambda seconds: None)
        try:
            code, _out, err = invoke(db, "stream", "--once", "--url", "http://127.0.0.1:9")
        finally:
            hold.release()
    assert code == 1 and "is being delivered by another olbridge stream (pid " in err, err
    assert ", to the alerts' webhooks, last heartbeat " in err, err


def stopped(process: subprocess.Popen[str], timeout: float = 60) -> str:
    """A process's stderr once it has stopped: asked to (SIGTERM) where it still runs, and killed
    where it does not stop within ``timeout`` seconds, so that none outlives the test."""
    if process.poll() is None:
        process.terminate()
    try:
        return process.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        return f"{process.communicate(timeout=timeout)[1]}\n(killed: not stopped within {timeout:g} s of SIGTERM)"


def test_two_stream_workers_on_postgresql_send_each_alert_once(
    postgres_url: str, tmp_path: Path, webhook: Webhook
) -> None:
    """Forty marts, each FAIL then RECOVERED then FAIL (judged with the real clock, as the
    workers' own watch judges: it finds nothing more to say), sent by two ``olbridge stream``
    processes side by side, one of them stopped (SIGTERM) and started again on the way: 120
    alerts, each once, in order per asset; the first alert of ten of the marts is refused for
    good (410) and mutes none of their later ones."""
    marts = [f"mart.m{n:02d}" for n in range(40)]
    with Catalog(postgres_url) as catalog:
        watch = HealthWatch(catalog, settings(rule(webhook.url)))
        for n, state in enumerate(("SUCCESS", "FAILED", "SUCCESS", "FAILED")):
            for mart in marts:
                write_mart(catalog, mart, n, state=state, execution=f"e{n}")
            watch.run_once()
        assert len(alerts_queued(catalog)) == 120

    refusing = set(marts[::4])  # the marts whose first alert the webhook refuses for good

    def slowly(body: dict[str, Any]) -> int:
        time.sleep(0.02)  # a webhook taking its time: the workers overlap
        if body["asset"]["id"] in refusing:
            refusing.remove(body["asset"]["id"])
            return 410
        return 200

    webhook.answer = slowly
    webhook.start()
    config = config_file(tmp_path, webhook)
    with Backend() as backend, Catalog(postgres_url) as catalog:
        command = [OLBRIDGE, "--config", str(config), "--catalog", postgres_url, "stream", "--url", backend.url]

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen([*command, "--poll", "0.05"], stderr=subprocess.PIPE, text=True)

        workers = [start(), start()]
        errors: list[str] = []  # each stopped worker's stderr, in the order of workers
        try:
            assert wait_for(lambda: len(webhook.taken) >= 30, timeout=90)
            errors.append(stopped(workers[0]))  # it settles what it sent, and lets its claims go
            workers.append(start())  # and started again
            assert wait_for(lambda: len(webhook.taken) >= 110, timeout=90)
            assert wait_for(lambda: catalog.outbox.status().pending == 0, timeout=30)
            assert catalog.outbox.status().dead == 0  # each of the ten superseded by its mart's later alerts
        finally:  # every worker not stopped yet, even when the test failed
            errors += [stopped(worker) for worker in workers[len(errors) :]]
    assert [w.returncode for w in workers] == [0, 0, 0], errors
    assert all("Traceback" not in e for e in errors)
    got = webhook.changes()
    assert len(got) == 110 and webhook.arrived == 120 and not refusing
    for n, mart in enumerate(marts):
        assert [g[1] for g in got if g[0] == mart] == ["FAIL", "RECOVERED", "FAIL"][1 if n % 4 == 0 else 0 :]


def test_serve_keeps_the_health_and_metrics_count_assets_by_it(tmp_path: Path, webhook: Webhook) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        write_mart(catalog, "mart.a", 0, execution="e0")
        write_mart(catalog, "mart.a", 1, state="FAILED", execution="e1")
        write_mart(catalog, "mart.b", 0, execution="e1")
    config = config_file(tmp_path, webhook)
    with serve_process(db, env={**os.environ, "OLBRIDGE_CONFIG": str(config)}) as served:

        def by_health() -> dict[str, int]:
            text = requests.get(f"{served.url}/metrics", timeout=5).text
            return {
                line.split('"')[1]: int(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("olbridge_assets_by_health{")
            }

        assert wait_for(lambda: by_health() == {"FAIL": 1, "WARN": 0, "PASS": 1, "UNKNOWN": 1}, timeout=60)
    with Catalog(db) as catalog:
        assert alerts_queued(catalog) == [("mart.a", "FAIL", None, "FAIL")]
