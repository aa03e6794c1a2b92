"""Received data-quality assertions kept as checks when they arrive: they outlive their events
(retention), answer as of any time, and a catalog from before gets those of the events it kept
(migration 0017); a purged asset takes its rule and checks with it; a ``dbt test`` that reports
again what the asset last held, after another reporter's checks, counts. On both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.adapters.dbt import ingest_dbt
from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.delivery.history import iter_events
from bridge.mapping import Resolver
from bridge.model import Assertion
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run
from tests.test_dbt import NOT_NULL_TEST, copy_example, edit, result_of
from tests.test_engines import (
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
)
from tests.test_health import assertions_event, health, when

pytestmark = pytest.mark.both_engines

FAILING = "0194a1b2-0000-7000-8000-0000000000b1"
PASSING = "0194a1b2-0000-7000-8000-0000000000b2"


def retention(tmp_path: Path, target: str) -> dict[str, int]:
    """``olbridge retention`` with a 7-day window for received events (the tests' events are of 2025)."""
    config = tmp_path / "olbridge.toml"
    config.write_text(f'catalog = {json.dumps(target)}\n[retention]\nreceived_events = "7d"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(config), "retention", "--json"])
    assert result.exit_code == 0, result.output
    counts: dict[str, int] = json.loads(result.stdout)["counts"]
    return counts


def received(target: str) -> int:
    with Catalog(target) as catalog:
        return int(catalog._conn.execute("SELECT count(*) FROM received_events").fetchone()[0])


def test_a_received_failed_assertion_outlives_its_event(
    catalog_target: str, resolver: Resolver, tmp_path: Path
) -> None:
    with Catalog(catalog_target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([assertions_event(FAILING, 10, False)]))
        [asset_id] = [a.id for a in catalog.list_assets()]
    assert retention(tmp_path, catalog_target)["receivedEvents"] == 1
    assert received(catalog_target) == 0
    failed = ["check not_null on id failed (gx/orders_suite at 2025-03-01T08:10:00.000000Z)"]
    for args in ((), ("--as-of", when(30))):  # now, and as of then
        code, found = health(catalog_target, *args)
        assert (code, found[asset_id]["health"], found[asset_id]["reasons"]) == (1, "FAIL", failed), args
    # a later run passes it, and its event goes too: PASS from then on, FAIL before
    with Catalog(catalog_target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([assertions_event(PASSING, 70, True)]))
    assert retention(tmp_path, catalog_target)["receivedEvents"] == 1
    code, found = health(catalog_target)
    assert code == 0 and found[asset_id]["health"] == "PASS" and found[asset_id]["reasons"] == ["2 check(s) passed"]
    assert health(catalog_target, "--as-of", when(80))[1][asset_id]["health"] == "PASS"
    code, found = health(catalog_target, "--as-of", when(30))
    assert (code, found[asset_id]["reasons"]) == (1, failed)


def test_of_two_events_of_one_time_the_higher_ranked_one_s_assertions_count_whatever_their_order(
    catalog_targets: Any, resolver: Resolver
) -> None:
    """Two runs report on a dataset at the same time: the same checks are kept whichever comes first."""
    events = [assertions_event(FAILING, 10, False), assertions_event(PASSING, 10, True)]
    kept = []
    for order in (events, events[::-1]):
        target = catalog_targets()
        with Catalog(target) as catalog:
            for event in order:  # each in a group of its own
                assert all(o.ok for o in catalog_intake(catalog, resolver).take([event]))
            kept.append(catalog._conn.execute("SELECT asset_id, reported_at, assertions FROM asset_checks").fetchall())
    assert kept[0] == kept[1] and len(kept[0]) == 1


def test_a_dataset_event_s_assertions_count_with_its_producer_as_reporter(
    catalog_target: str, resolver: Resolver
) -> None:
    dataset = ol_dataset("postgres://db:5432", "shop.public.orders")
    dataset["facets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [{"assertion": "row_count", "success": False, "severity": "warn"}],
        }
    }
    event = {
        "eventTime": when(10),
        "producer": "https://github.com/example/producer/tree/1.0",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": dataset,
    }
    with Catalog(catalog_target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([event]))
        [asset_id] = [a.id for a in catalog.list_assets()]
    code, found = health(catalog_target)
    assert code == 0 and found[asset_id]["health"] == "WARN"
    assert found[asset_id]["reasons"] == [
        "check row_count failed (https://github.com/example/producer/tree/1.0 at 2025-03-01T08:10:00.000000Z)"
    ]


@pytest.mark.parametrize("severity", ["warn", "WARN", "Warn"])
def test_a_received_failed_assertion_of_severity_warn_in_any_case_warns(
    catalog_target: str, resolver: Resolver, severity: str
) -> None:
    """A producer's ``"WARN"`` FAILed the dataset where ``"warn"`` WARNed it."""
    event = assertions_event(FAILING, 10, False)
    event["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"][0]["severity"] = severity
    with Catalog(catalog_target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([event]))
        [asset_id] = [a.id for a in catalog.list_assets()]
    code, found = health(catalog_target)
    assert (code, found[asset_id]["health"]) == (0, "WARN")
    with Catalog(catalog_target) as catalog:  # kept as the producer spelled it
        [kept] = catalog._conn.execute("SELECT assertions FROM asset_checks").fetchone()
    assert json.loads(kept)[0]["severity"] == severity


def test_the_migration_keeps_the_assertions_of_the_events_already_stored(
    catalog_target: str, resolver: Resolver
) -> None:
    """A catalog of version 16 read received assertions from its events: upgraded, it has them as
    checks, the latest of each time as the receiver keeps them now."""
    with Catalog(catalog_target) as catalog:
        events = [assertions_event(FAILING, 10, False), assertions_event(PASSING, 70, True)]
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
        [asset_id] = [a.id for a in catalog.list_assets()]
        recorded = catalog._conn.execute("SELECT * FROM asset_checks ORDER BY reported_at").fetchall()
        assert len(recorded) == 2

        def back_to_16(cur: Any) -> None:  # as version 16 left it: nothing in asset_checks for them
            undo_kept_writers_gone(cur.execute)  # migration 0038's
            undo_alerts_told(cur.execute)  # migration 0037's
            undo_health_purged(cur.execute)  # migration 0035's
            undo_kept_edges(cur.execute)  # migration 0033's
            undo_alert_heads(cur.execute)  # migration 0032's
            undo_unwritten_outputs(cur.execute)  # migration 0029's
            undo_lineage_by_run(cur.execute)  # migration 0028's
            undo_uses_by_asset_in_time(cur.execute)  # migration 0027's
            undo_edges_by_whole_key(cur.execute)  # migration 0026's
            undo_own_facts_kept(cur.execute)  # migration 0025's
            undo_runs_partitioned(cur.execute, catalog.db.engine.name)  # migration 0022's
            undo_writes_kept(cur.execute)  # migration 0021's
            undo_asset_filters(cur.execute)  # migration 0020's
            undo_ui_reads(cur.execute, catalog.db.engine.name)  # migration 0019's
            cur.execute("DELETE FROM asset_checks")
            cur.execute("ALTER TABLE asset_checks DROP COLUMN check_rank")
            cur.execute("DROP INDEX task_runs_task")
            cur.execute("DROP TABLE asset_health")  # migration 0018's
            cur.execute("DROP TABLE health_marks")
            cur.execute("UPDATE alembic_version SET version_num = '0016'")
            catalog.db.engine.stamp(cur, 16)

        catalog.db.write(back_to_16)
    code, out, err = invoke(catalog_target, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 16, err
    with Catalog(catalog_target) as catalog:
        assert catalog._conn.execute("SELECT * FROM asset_checks ORDER BY reported_at").fetchall() == recorded
    code, found = health(catalog_target, "--as-of", when(30))
    assert code == 1 and found[asset_id]["health"] == "FAIL"
    assert health(catalog_target, "--as-of", when(80))[1][asset_id]["health"] == "PASS"


def test_a_dbt_test_repeating_the_last_build_s_result_counts_after_another_reporter_s(
    catalog_target: str, resolver: Resolver, tmp_path: Path
) -> None:
    """A build whose not_null fails (08:00), a suite passing the model (09:00), then ``dbt test``
    failing it as the build did (10:00): the model is FAIL again, though the test results leave
    the asset as the build left it (its assertions and metadata the same)."""
    project = copy_example(tmp_path)

    def build(results: dict[str, Any]) -> None:
        results["metadata"]["generated_at"] = "2026-12-01T08:00:00Z"
        result_of(results, NOT_NULL_TEST)["status"] = "fail"

    def tests_alone(results: dict[str, Any]) -> None:
        results["metadata"].update(generated_at="2026-12-01T10:00:00Z", invocation_id="dbt-test-at-ten")
        results["results"] = [r for r in results["results"] if r["unique_id"].startswith("test.")]

    edit(project, "run_results.json", build)
    model = dbt_dataset("dbt.main.my_first_dbt_model")
    suite = ol_run_event(run_id=PASSING, job=("gx", "orders_suite"), inputs=[model], time="2026-12-01T09:00:00Z")
    with Catalog(catalog_target) as catalog:
        ingest_dbt(catalog, project)
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([suite]))
        edit(project, "run_results.json", tests_alone)
        assert "dbt.main.my_first_dbt_model" in [a.id for a in ingest_dbt(catalog, project).updated]
    judged = {t: health(catalog_target, "--as-of", f"2026-12-01T{t}:30:00Z")[1] for t in ("08", "09", "10")}
    assert [judged[t]["dbt.main.my_first_dbt_model"]["health"] for t in judged] == ["FAIL", "PASS", "FAIL"]
    assert judged["10"]["dbt.main.my_first_dbt_model"]["reasons"] == [
        "check not_null_my_first_dbt_model_id on id failed (dbt import at 2026-12-01T10:00:00.000000Z)"
    ]


def dbt_dataset(name: str) -> dict[str, Any]:
    """The example project's relation as a received event names it, with a passing not_null on id."""
    dataset = ol_dataset("duckdb://dbt.duckdb", name)
    dataset["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [{"assertion": "not_null", "success": True, "column": "id"}],
        }
    }
    return dataset


def test_purging_an_asset_takes_its_freshness_rule_and_checks(catalog_target: str) -> None:
    checks = (Assertion("not_null", False, name="not_null_orders_id", column="id"),)
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(
            run(
                "build", outputs=(decl("mart.orders", type="Table", assertions=checks), decl("mart.keep", type="Table"))
            )
        )
    for asset_id in ("mart.orders", "mart.keep"):
        code, _out, err = invoke(catalog_target, "assets", "set", asset_id, "--freshness", "6h")
        assert code == 0, err

    def rows(table: str) -> list[str]:
        with Catalog(catalog_target) as catalog:
            return [r[0] for r in catalog._conn.execute(f"SELECT asset_id FROM {table} ORDER BY asset_id")]

    assert (rows("freshness_rules"), rows("asset_checks")) == (["mart.keep", "mart.orders"], ["mart.orders"])
    code, _out, err = invoke(catalog_target, "assets", "purge", "--id", "mart.orders")
    assert code == 0, err
    assert (rows("freshness_rules"), rows("asset_checks")) == (["mart.keep"], [])
    # an asset of that id made again starts with neither
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("build", execution="e2", outputs=(decl("mart.orders", type="Table"),), start=at(5)))
    code, out, err = invoke(catalog_target, "assets", "show", "mart.orders")
    assert code == 0 and json.loads(out)["freshness"] is None, err


@pytest.mark.parametrize(("state", "after"), [("SKIPPED", "PASS"), ("KILLED", "FAIL")])
def test_a_skipped_run_streamed_to_another_olbridge_fails_none_of_its_outputs(
    catalog_targets: Any, resolver: Resolver, state: str, after: str
) -> None:
    """A run olbridge recorded SKIPPED names its outputs in its events (so that Marquez keeps the
    job's edges), and says it was skipped: another olbridge taking them (a stream, export then
    import, an import from Marquez) reads none as written or failed by it, where a killed run's
    ABORT FAILs them as any received ABORT does."""
    source, target = catalog_targets(), catalog_targets()
    outputs = (decl("w.main.orders", type="Table"),)
    with Catalog(source) as catalog:
        catalog.record_task_run(run("load", inputs=(decl("w.raw.x"),), outputs=outputs))
        catalog.record_task_run(
            run("load", execution="e2", inputs=(decl("w.raw.x"),), outputs=outputs, state=state, start=at(5))
        )
        events = list(iter_events(catalog, Converter(resolver)))
    ended = [e for e in events if e.get("eventType") == "ABORT"]
    assert [d["name"] for e in ended for d in e["outputs"]] == ["w.main.orders"]  # named either way
    with Catalog(target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
        [found] = [h for h in catalog.health(at(60)) if h.asset_id.endswith("w.main.orders")]
    assert found.health.value == after, found.verdict.reasons
