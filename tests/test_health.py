"""Asset health: freshness rules (a window, a cron deadline across a daylight-saving change, by
asset and by the config's selectors), checks (dbt's tests, received dataQualityAssertions), the
last run, and the at-risk flags downstream; as of any time, on both engines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.errors import ConfigError, ValidationError
from bridge.mapping import Resolver
from bridge.model import Assertion, format_time
from bridge.model.health import (
    Facts,
    FreshnessRule,
    Health,
    Judge,
    Match,
    Selector,
    Verdict,
    evaluate,
    next_change,
    parse_duration,
    paths_at_risk,
    rule_for,
)
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run
from tests.test_engines import (
    undo_alert_heads,
    undo_alerts_told,
    undo_health_purged,
    undo_kept_edges,
    undo_kept_writers_gone,
    undo_writers_by_task,
)

pytestmark = pytest.mark.both_engines


def when(minutes: float) -> str:
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


def window(max: str, warn: str | None = None) -> FreshnessRule:
    return FreshnessRule.create(max=parse_duration(max, "max"), warn=parse_duration(warn, "warn") if warn else None)


# --- the pure rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minutes", "expected"),
    [(60, Health.PASS), (239, Health.PASS), (270, Health.WARN), (360, Health.WARN), (390, Health.FAIL)],
)
def test_a_window_warns_its_warn_time_before_it_closes(minutes: int, expected: Health) -> None:
    """6h with a 2h warning: written at 08:00, PASS until 12:00, WARN until 14:00, FAIL after."""
    verdict = evaluate(Facts("a", last_write=at(0)), window("6h", "2h"), at(minutes))
    assert verdict.health is expected, verdict.reasons


PARIS_DAILY = FreshnessRule.create(cron="0 9 * * *", lag=timedelta(hours=1), timezone="Europe/Paris")


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=UTC)


def test_a_cron_deadline_follows_its_time_zone_across_a_daylight_saving_change() -> None:
    """09:00 in Paris is 08:00 UTC in winter and 07:00 UTC from 29 March 2026. Written each day at
    07:30 UTC: in winter that is 08:30 in Paris, inside the hour before the deadline; in summer it
    is 09:30, after it, so at 07:05 UTC on the 30th the day's deadline has passed unmet."""
    winter = PARIS_DAILY.evaluate(utc(2026, 3, 27, 7, 30), utc(2026, 3, 27, 8, 5))
    assert winter[0] is Health.PASS, winter
    assert PARIS_DAILY.last_tick(utc(2026, 3, 27, 8, 5)) == utc(2026, 3, 27, 8, 0)
    summer = PARIS_DAILY.evaluate(utc(2026, 3, 29, 7, 30), utc(2026, 3, 30, 7, 5))
    assert summer[0] is Health.FAIL and "2026-03-30T07:00:00" in summer[1], summer
    # the write at 07:30 UTC (09:30 in Paris) comes late, and meets the deadline until the next tick
    assert PARIS_DAILY.evaluate(utc(2026, 3, 30, 7, 30), utc(2026, 3, 30, 12, 0))[0] is Health.PASS
    # on the day of the change itself (a 23-hour day) the tick is 07:00 UTC already
    assert PARIS_DAILY.last_tick(utc(2026, 3, 29, 7, 30)) == utc(2026, 3, 29, 7, 0)
    # a write before the lag's window misses it
    assert PARIS_DAILY.evaluate(utc(2026, 3, 30, 5, 59), utc(2026, 3, 30, 7, 1))[0] is Health.FAIL


def judged(rule: FreshnessRule | None, written: datetime | None, as_of: datetime) -> Verdict:
    """The verdict of an asset last written at ``written`` by a run that succeeded, judged as
    the watch judges it (by :class:`Judge`)."""
    text = format_time(written) if written is not None else None
    return Judge(as_of).verdict("a", rule, text, ("SUCCESS", "flow.t") if written is not None else None)


@pytest.mark.parametrize(
    ("rule", "as_of", "changes"),
    [
        # written at T0 (08:00): fresh until 12:00, WARN until 14:00, FAIL from the microsecond after
        (window("6h", "2h"), at(60), at(240)),
        (window("6h", "2h"), at(240), at(240)),  # 12:00 itself is still fresh
        (window("6h", "2h"), at(241), at(360)),
        (window("6h", "2h"), at(360), at(360)),
        (window("6h", "2h"), at(361), None),  # FAIL until written again: time changes nothing
        (window("6h"), at(60), at(360)),  # no warning: fresh until it fails
        (None, at(60), None),  # no rule: only facts change it
    ],
)
def test_a_verdict_says_when_time_alone_changes_it(
    rule: FreshnessRule | None, as_of: datetime, changes: datetime | None
) -> None:
    """The first moment after a verdict at which time alone makes another one: the microsecond
    after a window's warning or end; the verdict just before it is the same, at it another."""
    verdict = judged(rule, at(0), as_of)
    found = next_change(verdict, as_of)
    if changes is None:
        assert found is None
        assert judged(rule, at(0), as_of + timedelta(days=30)) == verdict
        return
    assert found == changes + timedelta(microseconds=1)
    assert judged(rule, at(0), found - timedelta(microseconds=1)).reasons == verdict.reasons
    assert judged(rule, at(0), found).health is not verdict.health


def test_a_cron_verdict_changes_at_its_next_tick_across_a_daylight_saving_change() -> None:
    """A cron deadline's verdict names its latest tick: it changes at the next one, in the rule's
    time zone (09:00 in Paris: 08:00 UTC before 29 March 2026, 07:00 UTC from then), FAIL or not;
    an asset never written says UNKNOWN until it is."""
    written = utc(2026, 3, 27, 7, 30)
    verdict = judged(PARIS_DAILY, written, utc(2026, 3, 27, 8, 5))
    assert verdict.health is Health.PASS and next_change(verdict, utc(2026, 3, 27, 8, 5)) == utc(2026, 3, 28, 8, 0)
    late = judged(PARIS_DAILY, written, utc(2026, 3, 28, 23, 0))
    assert late.health is Health.FAIL and next_change(late, utc(2026, 3, 28, 23, 0)) == utc(2026, 3, 29, 7, 0)
    assert judged(PARIS_DAILY, written, utc(2026, 3, 29, 7, 0)).reasons != late.reasons
    assert next_change(judged(PARIS_DAILY, None, utc(2026, 3, 28, 23, 0)), utc(2026, 3, 28, 23, 0)) is None
    # when the clocks go back an hour repeats: 01:30 in New York on 1 November 2026 is 05:30 UTC
    # (its first occurrence, the tick) and 06:30 UTC; between them the day's tick has passed, and
    # the next is the 2nd's, at 06:30 UTC
    nightly = FreshnessRule.create(cron="30 1 * * *", timezone="America/New_York")
    for hour, minute in ((5, 30), (6, 10), (6, 30)):
        assert nightly.last_tick(utc(2026, 11, 1, hour, minute)) == utc(2026, 11, 1, 5, 30)
        verdict = judged(nightly, utc(2026, 11, 1, 5, 40), utc(2026, 11, 1, hour, minute))
        assert next_change(verdict, utc(2026, 11, 1, hour, minute)) == utc(2026, 11, 2, 6, 30)
    assert nightly.last_tick(utc(2026, 11, 1, 5, 29)) == utc(2026, 10, 31, 5, 30)
    # an hourly (or every-30-minutes) deadline ticks once in the repeated hour too, at its first
    # occurrence: 02:00 CEST on 26 October 2025 is 00:00 UTC, and the next tick is 03:00 CET at
    # 02:00 UTC (cronsim gave 02:00 CET, 01:00 UTC, as well: a write at 00:10 UTC FAILed at 01:05)
    hourly = FreshnessRule.create(cron="0 * * * *", timezone="Europe/Paris")
    assert hourly.next_tick(utc(2025, 10, 26, 0, 0)) == utc(2025, 10, 26, 2, 0)
    assert hourly.last_tick(utc(2025, 10, 26, 1, 30)) == utc(2025, 10, 26, 0, 0)
    assert hourly.evaluate(utc(2025, 10, 26, 0, 10), utc(2025, 10, 26, 1, 5))[0] is Health.PASS
    half = FreshnessRule.create(cron="*/30 * * * *", timezone="Europe/Paris")
    ticks = [utc(2025, 10, 25, 23, 30)]
    while ticks[-1] < utc(2025, 10, 26, 3, 0):
        ticks.append(half.next_tick(ticks[-1]))
    assert [t.strftime("%H:%M") for t in ticks] == ["23:30", "00:00", "00:30", "02:00", "02:30", "03:00"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "one of them"),
        ({"max": timedelta(hours=1), "cron": "0 9 * * *"}, "one of them"),
        ({"max": timedelta(hours=1), "warn": timedelta(hours=2)}, "shorter than max"),
        ({"cron": "0 25 * * *"}, "cron"),
        ({"cron": "0 9 * *"}, "five fields"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "time zone"),
        # the host's own zone, which each host (a watch, a laptop) would read as another
        ({"cron": "0 9 * * *", "timezone": "localtime"}, "this host's own"),
        ({"cron": "0 9 * * *", "timezone": "posixrules"}, "this host's own"),
        ({"cron": "0 9 * * *", "timezone": "Localtime"}, "this host's own"),  # as a folding file system reads it
        ({"cron": "0 9 * * *", "timezone": " "}, "timezone is empty"),
        ({"max": timedelta(hours=1), "timezone": "UTC"}, "cron deadline"),
    ],
)
def test_a_rule_is_checked(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FreshnessRule.create(**fields)


def test_a_rule_stored_with_the_host_s_zone_is_still_read_back() -> None:
    """A rule stored before the host's own zone was refused is read as it was stored: refused,
    every read of the catalog's health would fail."""
    rule = FreshnessRule.from_json({"cron": "0 9 * * *", "lag": "0s", "timezone": "localtime"})
    assert rule.timezone == "localtime"


def test_the_most_specific_selector_wins_and_the_asset_s_own_rule_beats_them() -> None:
    loose = Selector(Match(namespace="team-a"), window("24h"))
    typed = Selector(Match(namespace="team-a", type="Table"), window("12h"))
    gold = Selector(Match(namespace="team-a", metadata={"tier": "gold"}, id_prefix="warehouse."), window("1h"))
    selectors = [gold, typed, loose]
    assert rule_for("x", "File", "team-a", {}, None, selectors) is loose.rule
    assert rule_for("x", "Table", "team-a", {}, None, selectors) is typed.rule
    assert rule_for("warehouse.x", "Table", "team-a", {"tier": "gold"}, None, selectors) is gold.rule
    assert rule_for("warehouse.x", "Table", "team-b", {"tier": "gold"}, None, selectors) is None
    own = window("2h")
    assert rule_for("warehouse.x", "Table", "team-a", {"tier": "gold"}, own, selectors) is own


def test_checks_and_the_last_run_and_the_worst_of_them() -> None:
    failing = (Assertion("not_null", False, name="not_null_orders_id", column="id"), Assertion("unique", True))
    verdict = evaluate(Facts("a", last_write=at(0), checks=failing, checks_from="dbt"), window("6h"), at(10))
    assert verdict.health is Health.FAIL and verdict.reasons == ("check not_null_orders_id on id failed (dbt)",)
    warned = (Assertion("unique", False, severity="warn"),)
    assert evaluate(Facts("a", checks=warned), None, at(0)).health is Health.WARN
    failed_run = evaluate(Facts("a", last_write=at(0), last_run=("FAILED", "flow.t at 09:00")), window("6h"), at(70))
    assert failed_run.health is Health.FAIL and failed_run.reasons == ("last run flow.t at 09:00 failed",)
    assert evaluate(Facts("a"), None, at(0)).health is Health.UNKNOWN
    assert evaluate(Facts("a"), window("6h"), at(0)).health is Health.UNKNOWN  # never written


def test_at_risk_is_every_asset_downstream_with_the_shortest_path_to_a_cause() -> None:
    downstream = {"a": ["b"], "b": ["c", "d"], "c": ["e"], "x": ["e"], "e": ["a"]}  # a cycle a-b-c-e-a
    assert paths_at_risk({"a", "x"}, downstream) == {
        "b": ("a", "b"),
        "c": ("a", "b", "c"),
        "d": ("a", "b", "d"),
        "e": ("x", "e"),
        "a": ("x", "e", "a"),  # a bad asset may be at risk too
    }


# --- over the catalog, through the command line ----------------------------------------------


def health(path: str, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    code, out, err = invoke(path, "health", "--json", *args)
    assert code in (0, 1), err
    return code, {h["id"]: h for h in json.loads(out)}


@pytest.fixture
def chain(catalog_target: str) -> str:
    """stg.orders -(build, written at 08:00)-> mart.orders -(report)-> report.csv, the mart with
    --freshness 6h --freshness-warn 2h."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(
            run("build", inputs=(decl("stg.orders"),), outputs=(decl("mart.orders", type="Table"),), start=at(-1))
        )
        catalog.record_task_run(
            run("report", inputs=(decl("mart.orders"),), outputs=(decl("report.csv", type="File"),), start=at(1))
        )
    code, out, err = invoke(
        catalog_target, "assets", "set", "mart.orders", "--freshness", "6h", "--freshness-warn", "2h"
    )
    assert code == 0, err
    assert json.loads(out)["freshness"] == {"max": "6h", "warn": "2h", "source": "asset"}
    return catalog_target


def test_a_window_as_of_each_time_and_again_after_a_new_write(chain: str) -> None:
    expected = {60: ("PASS", 0), 270: ("WARN", 0), 390: ("FAIL", 1)}
    for minutes, (state, exit_code) in expected.items():
        code, found = health(chain, "--as-of", when(minutes))
        assert (found["mart.orders"]["health"], code) == (state, exit_code), found["mart.orders"]
        report = found["report.csv"]
        assert report["atRisk"] is (state != "PASS")
        if state != "PASS":
            assert report["pathToCause"] == ["mart.orders", "report.csv"] and report["cause"] == "mart.orders"
            assert report["health"] == "PASS"  # its own health is its own
    with Catalog(chain) as catalog:  # written again at 15:00
        catalog.record_task_run(
            run("build", execution="e2", inputs=(decl("stg.orders"),), outputs=(decl("mart.orders"),), start=at(419))
        )
    code, found = health(chain, "--as-of", when(430))
    assert (found["mart.orders"]["health"], code, found["report.csv"]["atRisk"]) == ("PASS", 0, False)
    for minutes, (state, _) in expected.items():  # the past answers as it did
        assert health(chain, "--as-of", when(minutes))[1]["mart.orders"]["health"] == state
    # --state keeps what it names; the exit status follows what is shown
    code, found = health(chain, "--as-of", when(390), "--state", "WARN,PASS")
    assert code == 0 and "mart.orders" not in found


def test_a_failed_run_fails_its_outputs_until_one_succeeds(chain: str) -> None:
    with Catalog(chain) as catalog:
        catalog.record_task_run(
            run("build", execution="e2", outputs=(decl("mart.orders"),), state="FAILED", start=at(59), error="boom")
        )
    code, found = health(chain, "--as-of", when(70))
    assert code == 1 and found["mart.orders"]["health"] == "FAIL"
    assert found["mart.orders"]["reasons"] == ["last run company.data/flow.build at 2025-03-01T09:00:00.000000Z failed"]
    assert health(chain, "--as-of", when(30))[1]["mart.orders"]["health"] == "PASS"  # before it


def test_a_failed_run_fails_an_output_its_task_never_wrote(chain: str) -> None:
    """A task that never wrote an asset (a new one taking it over, or one given a new output)
    whose run fails: the asset was to be written by that run, so it FAILs, as of the run's end and
    after, the whole catalog's pass and the asset's own alike; the task's first success writes it."""
    with Catalog(chain) as catalog:
        catalog.record_task_run(
            run(
                "rebuild", execution="e2", outputs=(decl("mart.orders"), decl("mart.new")), state="FAILED", start=at(59)
            )
        )
    reason = "last run company.data/flow.rebuild at 2025-03-01T09:00:00.000000Z failed"
    code, found = health(chain, "--as-of", when(70))
    assert code == 1 and found["mart.orders"]["health"] == "FAIL"
    assert reason in found["mart.orders"]["reasons"]
    assert "mart.new" not in found  # an asset no run ever wrote is none of the catalog's: nothing to judge
    assert found["report.csv"]["atRisk"] and found["report.csv"]["cause"] == "mart.orders"
    code, out, err = invoke(chain, "assets", "show", "mart.orders")
    assert json.loads(out)["health"] == "FAIL" and reason in json.loads(out)["reasons"], err
    assert health(chain, "--as-of", when(30))[1]["mart.orders"]["health"] == "PASS"  # before it ended
    with Catalog(chain) as catalog:
        catalog.record_task_run(run("rebuild", execution="e3", outputs=(decl("mart.orders"),), start=at(80)))
    assert health(chain, "--as-of", when(90))[1]["mart.orders"]["health"] == "PASS"
    assert health(chain, "--as-of", when(70))[1]["mart.orders"]["health"] == "FAIL"  # as of the failure, still


def test_a_new_output_whose_first_run_fails_is_made_and_fails(chain: str) -> None:
    """An output the catalog does not have, given with its type, whose run fails (a model new to
    a dbt build that failed its first run): the run makes it as its success would have, never
    written, and it FAILs, named by that run (as a received FAIL naming a new dataset makes it),
    the whole catalog's pass and the asset's own alike; as of before the run it was not there. The
    task's first success makes it PASS."""
    with Catalog(chain) as catalog:
        fresh = decl("mart.fresh", type="Table", metadata={"owner": "finance"})
        catalog.record_task_run(
            run("model", execution="e2", inputs=(decl("mart.orders"),), outputs=(fresh,), state="FAILED", start=at(59))
        )
    reason = "last run company.data/flow.model at 2025-03-01T09:00:00.000000Z failed"
    code, found = health(chain, "--as-of", when(70))
    assert code == 1 and (found["mart.fresh"]["health"], found["mart.fresh"]["reasons"]) == ("FAIL", [reason])
    assert "mart.fresh" not in health(chain, "--as-of", when(30))[1]
    code, out, err = invoke(chain, "assets", "show", "mart.fresh")
    shown = json.loads(out)
    assert (shown["type"], shown["metadata"], shown["health"], shown["reasons"]) == (
        "Table",
        {"owner": "finance"},
        "FAIL",
        [reason],
    ), err
    with Catalog(chain) as catalog:
        catalog.record_task_run(run("model", execution="e3", outputs=(fresh,), start=at(80)))
    assert health(chain, "--as-of", when(90))[1]["mart.fresh"]["health"] == "PASS"
    assert health(chain, "--as-of", when(70))[1]["mart.fresh"]["health"] == "FAIL"  # as of the failure, still


def test_a_skipped_run_of_another_task_leaves_a_failure_standing(chain: str) -> None:
    """A SKIPPED run says nothing of its outputs: a task that was skipped (a branch not taken that
    names the same output) does not become a writer whose run would hide another task's failure,
    though its events name that output (its task's later success elsewhere is no run of it)."""
    with Catalog(chain) as catalog:
        catalog.record_task_run(
            run("build", execution="e2", outputs=(decl("mart.orders"),), state="FAILED", start=at(59))
        )
        catalog.record_task_run(run("alt", execution="e1", outputs=(decl("mart.other", type="Table"),), start=at(60)))
        catalog.record_task_run(
            run("alt", execution="e2", outputs=(decl("mart.orders"),), state="SKIPPED", start=at(61))
        )
        catalog.record_task_run(run("alt", execution="e3", outputs=(decl("mart.other"),), start=at(63)))
    code, found = health(chain, "--as-of", when(70))
    assert code == 1 and found["mart.orders"]["health"] == "FAIL", found["mart.orders"]


def test_a_skip_neither_fails_nor_mends_an_asset(chain: str) -> None:
    """A task that failed, then was skipped (dbt skips the models below a failed test): its
    output stays FAIL, named by the failure, now and as of the skip; no RECOVERED comes of it. A
    success after mends it; a skip after that leaves it PASS. A migrated catalog whose kept latest
    run was a skip gets the task's latest run that was not."""
    out = (decl("mart.orders"),)
    with Catalog(chain) as catalog:
        catalog.record_task_run(run("build", execution="e2", outputs=out, state="FAILED", start=at(59)))
        catalog.record_task_run(run("build", execution="e3", outputs=out, state="SKIPPED", start=at(65)))
    failed = "last run company.data/flow.build at 2025-03-01T09:00:00.000000Z failed"
    for moment in (when(70), None):
        code, found = health(chain, *(("--as-of", moment) if moment else ()))
        assert code == 1 and failed in found["mart.orders"]["reasons"], found["mart.orders"]
    with Catalog(chain) as catalog:  # as a catalog of version 29 kept it: the skip as the latest run
        conn = catalog._conn
        [(pk,)] = conn.execute("SELECT pk FROM task_runs WHERE execution_id = 'e3'").fetchall()
        with catalog.transaction() as cur:
            cur.execute(
                "UPDATE latest_task_runs SET run_pk = ?, state = 'SKIPPED', ended_at = ? WHERE task_id = 'build'",
                (pk, "2025-03-01T09:06:00.000000Z"),
            )
            undo_kept_writers_gone(cur.execute)  # migration 0038's
            undo_alerts_told(cur.execute)  # migration 0037's
            undo_health_purged(cur.execute)  # migration 0035's
            undo_kept_edges(cur.execute)  # migration 0033's
            undo_alert_heads(cur.execute)  # migration 0032's
            undo_writers_by_task(cur.execute)  # migration 0031's
            cur.execute("UPDATE alembic_version SET version_num = '0029'")
            catalog.db.engine.stamp(cur, 29)
    code, out_json, err = invoke(chain, "migrate")
    assert code == 0 and json.loads(out_json)["upgradedFrom"] == 29, err
    with Catalog(chain) as catalog:
        assert catalog._conn.execute("SELECT state FROM latest_task_runs WHERE task_id = 'build'").fetchall() == [
            ("FAILED",)
        ]
    with Catalog(chain) as catalog:
        catalog.record_task_run(run("build", execution="e4", outputs=out, start=at(80)))
        catalog.record_task_run(run("build", execution="e5", outputs=out, state="SKIPPED", start=at(90)))
    code, found = health(chain, "--as-of", when(100))
    assert code == 0 and found["mart.orders"]["health"] == "PASS", found["mart.orders"]


def test_a_purge_with_usages_takes_what_failed_runs_were_to_write(chain: str) -> None:
    with Catalog(chain) as catalog:
        catalog.record_task_run(
            run("rebuild", execution="e2", outputs=(decl("mart.orders"),), state="FAILED", start=at(59))
        )
        assert catalog._conn.execute("SELECT count(*) FROM unwritten_outputs").fetchone()[0] == 1
    code, _, err = invoke(chain, "assets", "purge", "--id", "mart.orders", "--with-usages")
    assert code == 0, err
    with Catalog(chain) as catalog:
        assert catalog._conn.execute("SELECT count(*) FROM unwritten_outputs").fetchone()[0] == 0


@pytest.mark.parametrize(("state", "said"), [("KILLED", "was killed"), ("CANCELLED", "was cancelled")])
def test_a_run_ended_without_writing_fails_its_outputs_as_a_failed_one(chain: str, state: str, said: str) -> None:
    # a failure, then a run killed or cancelled (exported as ABORT, which FAILs a received dataset):
    # still FAIL, not a run that says nothing and leaves the asset to its freshness
    with Catalog(chain) as catalog:
        catalog.record_task_run(
            run("build", execution="e2", outputs=(decl("mart.orders"),), state="FAILED", start=at(59))
        )
        catalog.record_task_run(run("build", execution="e3", outputs=(decl("mart.orders"),), state=state, start=at(65)))
    code, found = health(chain, "--as-of", when(75))
    assert code == 1 and found["mart.orders"]["health"] == "FAIL"
    assert found["mart.orders"]["reasons"] == [
        f"last run company.data/flow.build at 2025-03-01T09:06:00.000000Z {said}"
    ]


def test_assets_show_and_list_carry_the_health(chain: str) -> None:
    code, out, err = invoke(chain, "assets", "show", "mart.orders")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["health"] == "FAIL"  # now, long after 2025
    assert shown["freshness"] == {"max": "6h", "warn": "2h", "source": "asset"}
    report = json.loads(invoke(chain, "assets", "show", "report.csv")[1])  # judged with what is upstream
    assert (report["health"], report["atRisk"], report["pathToCause"]) == ("PASS", True, ["mart.orders", "report.csv"])
    code, out, err = invoke(chain, "assets", "list", "--json", "--type", "File")
    assert [(a["id"], a["atRisk"]) for a in json.loads(out)] == [("report.csv", True)]
    code, out, err = invoke(chain, "assets", "list", "--json")
    listed = {a["id"]: a for a in json.loads(out)}
    assert listed["mart.orders"]["health"] == "FAIL" and listed["report.csv"]["atRisk"] is True
    code, out, err = invoke(chain, "assets", "list")
    assert "mart.orders\tTable\t(global)\tdeclared\tFAIL\t\t" in out.splitlines()


def test_config_selectors_and_which_rule_applies(chain: str, tmp_path: Path) -> None:
    config = tmp_path / "olbridge.toml"
    config.write_text(
        """
[[freshness]]
match = { type = "File" }
max = "1h"

[[freshness]]
match = { type = "File", id_prefix = "report." }
cron = "0 9 * * *"
lag = "2h"
timezone = "Europe/Paris"
""",
        encoding="utf-8",
    )
    code, out, err = invoke(chain, "--config", str(config), "health", "--json", "--as-of", when(30))
    found = {h["id"]: h for h in json.loads(out)}
    # report.csv was written at 08:02 UTC, 09:02 in Paris: after 07:00 in Paris, the deadline met
    assert found["report.csv"]["freshness"]["source"] == "[[freshness]] #2"
    assert found["report.csv"]["health"] == "PASS", found["report.csv"]
    code, out, err = invoke(chain, "--config", str(config), "assets", "show", "report.csv")
    assert json.loads(out)["freshness"]["source"] == "[[freshness]] #2"
    config.write_text('[[freshness]]\nmatch = { kind = "x" }\nmax = "1h"\n', encoding="utf-8")
    code, out, err = invoke(chain, "--config", str(config), "health")
    assert code == 1 and "unknown key(s) kind" in err and "Traceback" not in err


def test_bad_freshness_options_are_refused_and_change_nothing(chain: str) -> None:
    for args in (
        ["--freshness", "6 hours"],
        ["--freshness-warn", "2h"],
        ["--freshness-cron", "61 * * * *"],
        ["--freshness", "36501d"],  # past a hundred years: the moments it reaches would pass what a date holds
        ["--freshness-cron", "0 9 * * *", "--freshness-lag", "99999999999d"],
        ["--freshness", "0s"],
        ["--freshness-lag", "1h"],
    ):
        # a bad value (2), never the 1 that says an asset is FAIL
        code, _out, err = invoke(chain, "assets", "set", "mart.orders", *args)
        assert code == 2 and err.startswith("Error:"), (args, err)
    # each said of the option that gave the value (all were said of --freshness)
    for args, said in (
        (["--freshness-cron", "bad cron"], "Error: --freshness-cron: cron 'bad cron': five fields"),
        (["--freshness-cron", "0 9 * * *", "--freshness-timezone", "Nope/Zone"], "Error: --freshness-timezone: "),
        (["--freshness", "1h", "--freshness-warn", "2h"], "Error: --freshness-warn: warn must be"),
    ):
        code, _out, err = invoke(chain, "assets", "set", "mart.orders", *args)
        assert code == 2 and err.startswith(said), (args, err)
    code, _out, err = invoke(chain, "health", "--state", "FAIL,BAD")
    assert code == 2 and err == "Error: --state: unknown health 'BAD'; known: PASS, UNKNOWN, WARN, FAIL\n"
    assert json.loads(invoke(chain, "assets", "show", "mart.orders")[1])["freshness"]["max"] == "6h"
    code, _out, err = invoke(chain, "assets", "set", "mart.orders", "--no-freshness")
    assert code == 0 and json.loads(invoke(chain, "assets", "show", "mart.orders")[1])["freshness"] is None


def assertions_event(run_id: str, minutes: int, success: bool) -> dict[str, Any]:
    orders = ol_dataset("postgres://db:5432", "shop.public.orders")
    orders["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [
                {"assertion": "not_null", "success": success, "column": "id"},
                {"assertion": "unique", "success": True, "column": "id", "name": ""},  # an empty name: none
            ],
        }
    }
    return ol_run_event("COMPLETE", run_id=run_id, job=("gx", "orders_suite"), inputs=[orders], time=when(minutes))


def test_received_assertions_fail_a_dataset_until_a_later_run_passes(catalog_target: str, resolver: Resolver) -> None:
    with Catalog(catalog_target) as catalog:
        events = [
            assertions_event("0194a1b2-0000-7000-8000-0000000000a1", 10, False),
            assertions_event("0194a1b2-0000-7000-8000-0000000000a2", 70, True),
        ]
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
        [asset_id] = [a.id for a in catalog.list_assets()]
    code, found = health(catalog_target, "--as-of", when(30))
    assert code == 1 and found[asset_id]["health"] == "FAIL"
    assert found[asset_id]["reasons"] == [
        "check not_null on id failed (gx/orders_suite at 2025-03-01T08:10:00.000000Z)"
    ]
    code, found = health(catalog_target, "--as-of", when(80))
    assert code == 0 and found[asset_id]["health"] == "PASS"
    assert asset_id not in health(catalog_target, "--as-of", when(5))[1]  # first seen at 08:10


DURATION_FORM = "write a number and a unit (d, h, m, s) for each part, each unit once, the largest first, no spaces: "
DURATION_FORM += "6h, 90m, 1d12h, 30s"
MALFORMED = ["1h1h", "1m1d", "2h1d", "30s1m", " 6h", "6h ", "1d 12h"]


@pytest.mark.parametrize("text", MALFORMED)
def test_a_duration_takes_each_unit_once_the_largest_first_and_no_spaces(chain: str, text: str) -> None:
    """``--freshness 1h1h`` was stored as 2h, and ``1m1d`` and `` 6h`` were taken."""
    code, out, err = invoke(chain, "assets", "set", "mart.orders", "--freshness", text)
    assert (code, out, err) == (2, "", f"Error: --freshness: {text!r} is no duration; {DURATION_FORM}\n")
    assert json.loads(invoke(chain, "assets", "show", "mart.orders")[1])["freshness"]["max"] == "6h"


@pytest.mark.parametrize("text", MALFORMED)
def test_a_config_duration_of_no_such_form_is_said_where_it_is(text: str) -> None:
    from bridge.config import parse_config

    for config, where in (
        ({"freshness": [{"max": text}]}, "[[freshness]] #1: max"),
        ({"retention": {"received_events": text}}, "[retention]: 'received_events'"),
        ({"health": {"every": text}}, "[health]: 'every'"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_config(config, "olbridge.toml", Path())
        assert str(raised.value) == f"olbridge.toml: {where}: {text!r} is no duration; {DURATION_FORM}"


def test_a_duration_of_the_form_is_read() -> None:
    for text, seconds in (("0s", 0), ("90m", 5400), ("1d12h", 129600), ("2d3h4m5s", 183845), ("36500d", 3153600000)):
        assert parse_duration(text, "d") == timedelta(seconds=seconds)


def test_a_bad_config_table_is_a_config_error() -> None:
    from bridge.config import parse_freshness

    with pytest.raises(ConfigError, match="no duration"):
        parse_freshness([{"max": "soon"}], "f")
    with pytest.raises(ConfigError, match="unknown key"):
        parse_freshness([{"max": "1h", "maximum": "2h"}], "f")
    assert parse_freshness([{"match": {"metadata": {"tier": "gold"}}, "max": "1h"}], "f")[0].match.metadata == {
        "tier": "gold"
    }


def test_health_filters_and_its_bad_values(chain: str) -> None:
    with Catalog(chain) as catalog:  # another namespace, written now and then
        catalog.record_task_run(
            run("side", namespace="team-b", outputs=(decl("side.csv", type="File", namespace="b"),))
        )
    code, found = health(chain, "--as-of", when(390), "--at-risk")
    assert (code, sorted(found)) == (0, ["report.csv"])  # the FAIL asset itself is not at risk: not shown
    code, found = health(chain, "--as-of", when(390), "--namespace", "b")
    assert (code, sorted(found)) == (0, ["side.csv"])
    code, out, err = invoke(chain, "health", "--as-of", when(390))
    assert code == 1 and "mart.orders\tFAIL\tstale: last written 2025-03-01T08:00:00.000000Z" in out
    assert "report.csv\tPASS\tlast run company.data/flow.report" in out and "\tat risk from mart.orders" in out
    assert err.strip() == "4 asset(s), 1 FAIL, 1 at risk"
    for args, message, status in (
        (["--state", "BAD"], "unknown health 'BAD'", 2),  # a bad value (1 says an asset is FAIL)
        (["--as-of", "yesterday"], "--as-of", 2),  # a time that is no time: a bad value, as in every command
        (["--as-of", "9999-12-31T23:59:59Z"], "not between the years 1000 and 9000", 2),
        (["--namespace", "a b"], "namespace", 2),  # as --state's (it was 1, the FAIL code)
    ):
        code, out, err = invoke(chain, "health", *args)
        assert code == status and err.startswith("Error: ") and message in err and out == "", (args, err)


@pytest.mark.parametrize("states", ["", ",", " ", " , "])
def test_a_state_list_naming_no_health_is_a_bad_value(chain: str, states: str) -> None:
    """``--state ""`` showed nothing and exited 0 with a FAIL asset in the catalog."""
    code, out, err = invoke(chain, "health", "--as-of", when(390), "--state", states)
    assert (code, out) == (2, "")
    assert err == (
        f"Error: --state: {states!r} names no health; give one or more of PASS, UNKNOWN, WARN, FAIL, comma-separated\n"
    )


def test_a_run_s_checks_count_as_of_its_time(catalog_target: str) -> None:
    """The assertions a run reports on its output are kept with the run's time: as of each time,
    the checks of the latest run by then (a later passing run does not rewrite the past)."""
    failing = (Assertion("not_null", False, name="not_null_orders_id", column="id"),)
    passing = (Assertion("not_null", True, name="not_null_orders_id", column="id"),)
    with Catalog(catalog_target) as catalog:
        for execution, minutes, checks in (("e1", 0, failing), ("e2", 120, passing)):
            output = decl("mart.orders", type="Table", assertions=checks)
            catalog.record_task_run(run("build", execution=execution, outputs=(output,), start=at(minutes)))
    code, found = health(catalog_target, "--as-of", when(60))
    assert code == 1 and found["mart.orders"]["reasons"] == [
        "check not_null_orders_id on id failed (company.data/flow.build at 2025-03-01T08:01:00.000000Z)"
    ]
    code, found = health(catalog_target, "--as-of", when(180))
    assert code == 0 and found["mart.orders"]["health"] == "PASS"
    assert health(catalog_target, "--as-of", when(60))[1]["mart.orders"]["health"] == "FAIL"  # the past stays
