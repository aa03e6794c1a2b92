"""Health outlives retention: the runs retention deletes leave what health reads of them (an
asset's last write, its last run, the tasks that write it), so an asset last written before the
window answers as it did before the pass. On both engines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.mapping import Resolver
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run

pytestmark = pytest.mark.both_engines

DAY = 24 * 60
NS = "postgres://db:5432"


def retention(tmp_path: Path, target: str, **windows: str) -> dict[str, int]:
    config = tmp_path / "olbridge.toml"
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in windows.items())
    config.write_text(f"catalog = {json.dumps(target)}\n[retention]\n{lines}", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(config), "retention", "--json"])
    assert result.exit_code == 0, result.output
    counts: dict[str, int] = json.loads(result.stdout)["counts"]
    return counts


def health(target: str, as_of: str | None = None) -> dict[str, dict[str, Any]]:
    code, out, err = invoke(target, "health", "--json", *(("--as-of", as_of) if as_of else ()))
    assert code in (0, 1), err
    return {h["id"]: h for h in json.loads(out)}


def freshness(target: str, asset_id: str) -> None:
    code, _out, err = invoke(target, "assets", "set", asset_id, "--freshness", "1d")
    assert code == 0, err


def event(run_id: str, minutes: int, outputs: list[str], event_type: str = "COMPLETE") -> dict[str, Any]:
    return ol_run_event(
        event_type,
        run_id=run_id,
        job=("airflow", "dag.load"),
        inputs=[ol_dataset(NS, "raw.orders")],
        outputs=[ol_dataset(NS, name) for name in outputs],
        time=at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def test_a_received_run_s_writes_outlive_it(catalog_target: str, resolver: Resolver, tmp_path: Path) -> None:
    """The job wrote orders and customers once, then customers only: the first run, gone, was
    orders' last write and last run; orders stays stale (FAIL, the same reasons), not unknown."""
    with Catalog(catalog_target) as catalog:
        events = [
            event("0194a1b2-0000-7000-8000-0000000000c1", 0, ["shop.orders", "shop.customers"]),
            event("0194a1b2-0000-7000-8000-0000000000c2", 2 * DAY, ["shop.customers"]),
        ]
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
    orders = f"{NS}/shop.orders"
    freshness(catalog_target, orders)
    before = health(catalog_target)
    assert before[orders]["health"] == "FAIL" and before[orders]["reasons"][0].startswith("stale: last written")
    assert retention(tmp_path, catalog_target, external_runs="1d")["externalRuns"] == 1
    after = health(catalog_target)
    assert after == before
    with Catalog(catalog_target) as catalog:  # a later write of orders still wins
        assert all(
            o.ok
            for o in catalog_intake(catalog, resolver).take(
                [event("0194a1b2-0000-7000-8000-0000000000c3", 3 * DAY, ["shop.orders"], "FAIL")]
            )
        )
    failed = health(catalog_target)[orders]
    assert failed["health"] == "FAIL" and any("failed" in r for r in failed["reasons"]), failed


def test_an_own_run_s_writes_outlive_it(catalog_target: str, tmp_path: Path) -> None:
    """The task wrote orders, then customers, then failed: its first run, gone, made it a writer
    of orders, whose last run is still the task's failed one, and its last write the first run's."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", execution="e1", outputs=(decl("orders", type="Table"),), start=at(0)))
        catalog.record_task_run(run("load", execution="e2", outputs=(decl("customers", type="Table"),), start=at(DAY)))
        catalog.record_task_run(run("load", execution="e3", outputs=(decl("customers"),), start=at(2 * DAY)))
        catalog.record_task_run(
            run("load", execution="e4", outputs=(decl("customers"),), state="FAILED", start=at(3 * DAY), error="x")
        )
    freshness(catalog_target, "orders")
    with Catalog(catalog_target) as catalog, catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox")  # delivered
    before = health(catalog_target)
    assert before["orders"]["health"] == "FAIL"
    assert any("failed" in r for r in before["orders"]["reasons"]), before["orders"]
    assert retention(tmp_path, catalog_target, task_runs="1d")["taskRuns"] == 3
    assert health(catalog_target) == before


def test_health_as_of_a_moment_in_the_window_outlives_the_runs_retention_deletes(
    catalog_target: str, tmp_path: Path
) -> None:
    """The task wrote orders 12 and 10 days ago, failed 9 days ago, wrote it again 2 days ago. As
    of 5 days ago (inside a window of 7 days) orders' last run was the failure and its last write
    10 days back. Retention deleted the failure (a later run of the task existed) and the write
    (its task's latest write was the later one): as of then, orders lost its failed run and its
    last write. The failure stays (no later run of its task ended before the window), and the
    write's time is kept apart."""
    now = datetime.now(UTC).replace(microsecond=0)
    orders = (decl("orders", type="Table"),)
    with Catalog(catalog_target) as catalog:
        for execution, days, state in (("e1", 12, "SUCCESS"), ("e2", 10, "SUCCESS"), ("e3", 9, "FAILED")):
            catalog.record_task_run(
                run(
                    "load",
                    execution=execution,
                    outputs=orders,
                    state=state,
                    start=now - timedelta(days=days),
                    error="x" if state == "FAILED" else None,
                )
            )
        catalog.record_task_run(run("load", execution="e4", outputs=orders, start=now - timedelta(days=2)))
    freshness(catalog_target, "orders")
    with Catalog(catalog_target) as catalog, catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox")  # delivered
    then = (now - timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before, before_now = health(catalog_target, then), health(catalog_target)
    reasons = before["orders"]["reasons"]
    assert before["orders"]["health"] == "FAIL" and any("failed" in r for r in reasons), reasons
    assert any("last written" in r and str((now - timedelta(days=10)).date()) in r for r in reasons), reasons
    assert retention(tmp_path, catalog_target, task_runs="7d")["taskRuns"] == 2
    assert health(catalog_target, then) == before
    assert health(catalog_target) == before_now
    with Catalog(catalog_target) as catalog:  # judged from its own facts alone (assets show, a page)
        few = catalog.health_of_few(now - timedelta(days=5), [], ["orders"])
        assert few is not None and [f.to_json()["reasons"] for f in few] == [reasons]


def test_a_task_s_latest_ended_run_stays_while_a_later_one_runs(catalog_target: str, tmp_path: Path) -> None:
    """The task's run that wrote orders ended; a later one started and is still running (the
    latest by start, not by end): the ended one is health's last run of orders, and stays."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", execution="e1", outputs=(decl("orders", type="Table"),), start=at(0)))
        catalog.record_task_run(run("load", execution="e2", state="RUNNING", start=at(DAY)))
    with Catalog(catalog_target) as catalog, catalog.transaction() as cur:
        cur.execute("DELETE FROM outbox")  # delivered
    before = health(catalog_target)
    assert before["orders"]["reasons"][0].startswith("last run company.data/flow.load at"), before["orders"]
    assert retention(tmp_path, catalog_target, task_runs="1d")["taskRuns"] == 0
    assert health(catalog_target) == before


def test_a_run_named_under_two_jobs_is_judged_alike_alone_and_whole(catalog_target: str, resolver: Resolver) -> None:
    """A run whose events name two jobs (warned of) is the run of the first: what its second job's
    event wrote is judged alike, alone (assets show) and with the whole catalog (health)."""
    from bridge.catalog import health as health_queries

    run_id = "0194a1b2-0000-7000-8000-0000000000d1"
    start = ol_run_event(
        "START", run_id=run_id, job=("airflow", "dag.a"), outputs=[ol_dataset(NS, "shop.a")], time=at(0).isoformat()
    )
    end = ol_run_event(
        "COMPLETE", run_id=run_id, job=("airflow", "dag.b"), outputs=[ol_dataset(NS, "shop.b")], time=at(5).isoformat()
    )
    with Catalog(catalog_target) as catalog:
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([start, end]))
        judged_at = at(10)
        whole = {h.asset_id: h for h in health_queries.assess(catalog._conn, (), judged_at)}
        assert whole[f"{NS}/shop.b"].health.value == "PASS"
        for asset_id in whole:
            assert health_queries.assess(catalog._conn, (), judged_at, ids=[asset_id]) == [whole[asset_id]]


def test_an_assets_at_risk_flag_outlives_the_run_that_joined_it(
    catalog_target: str, resolver: Resolver, tmp_path: Path
) -> None:
    """A job read raw.orders and wrote shop.old once, then wrote shop.new; raw.orders FAILs. The
    first run, gone, held the only edge raw.orders -> shop.old, which `olbridge lineage` still
    shows: shop.old stays at risk (it was not, after the pass), as the whole catalog's pass and a
    look at the asset alone say."""
    with Catalog(catalog_target) as catalog:
        events = [
            event("0194a1b2-0000-7000-8000-0000000000d1", 0, ["shop.old"]),
            event("0194a1b2-0000-7000-8000-0000000000d2", 2 * DAY, ["shop.new"]),
            ol_run_event(
                "FAIL",
                run_id="0194a1b2-0000-7000-8000-0000000000d3",
                job=("airflow", "dag.check"),
                outputs=[ol_dataset(NS, "raw.orders")],
                time=at(3 * DAY).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ),
        ]
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
    old = f"{NS}/shop.old"
    before = health(catalog_target)
    assert before[old]["atRisk"] and before[f"{NS}/raw.orders"]["health"] == "FAIL"
    assert retention(tmp_path, catalog_target, external_runs="1d")["externalRuns"] == 1
    assert health(catalog_target) == before
    code, out, err = invoke(catalog_target, "assets", "show", old)
    assert code == 0 and json.loads(out)["atRisk"], (out, err)
    # as of a time before the run's end, the edge was not there yet
    code, out, _ = invoke(catalog_target, "health", "--json", "--as-of", at(-1).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert not [h for h in json.loads(out) if h["atRisk"]]


def test_an_own_run_s_lineage_outlives_it_for_the_at_risk_flag(catalog_target: str, tmp_path: Path) -> None:
    """raw's writer FAILs; then a task read raw and wrote mart (seeded before) once, then read
    other and wrote mart. The first run, gone (``task_runs``), held the only edge raw -> mart: mart stays at risk,
    in the whole catalog's pass and a look at the asset alone, and is not as of before that run
    ended."""
    table = {"type": "Table"}
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", execution="e0", outputs=(decl("raw", **table),), state="FAILED", error="x"))
        catalog.record_task_run(run("seed", execution="s0", outputs=(decl("mart", **table),)))
        catalog.record_task_run(
            run("build", execution="e1", inputs=(decl("raw"),), outputs=(decl("mart"),), start=at(DAY))
        )
        catalog.record_task_run(
            run("build", execution="e2", inputs=(decl("other", **table),), outputs=(decl("mart"),), start=at(2 * DAY))
        )
        with catalog.transaction() as cur:
            cur.execute("DELETE FROM outbox")  # delivered
    before = health(catalog_target)
    assert before["mart"]["atRisk"] and before["mart"]["pathToCause"] == ["raw", "mart"]
    assert before["raw"]["health"] == "FAIL"
    assert retention(tmp_path, catalog_target, task_runs="1d")["taskRuns"] == 1
    with Catalog(catalog_target) as catalog:
        assert catalog._conn.execute("SELECT count(*) FROM lineage WHERE upstream_id = 'raw'").fetchone()[0] == 0
    assert health(catalog_target) == before
    code, out, err = invoke(catalog_target, "assets", "show", "mart")
    assert code == 0 and json.loads(out)["atRisk"], (out, err)
    # as of a time before the first run's end (raw already FAIL), the edge was not there yet
    code, out, _ = invoke(catalog_target, "health", "--json", "--as-of", at(DAY).strftime("%Y-%m-%dT%H:%M:30Z"))
    then = {h["id"]: h for h in json.loads(out)}
    assert then["raw"]["health"] == "FAIL" and not then["mart"]["atRisk"]
