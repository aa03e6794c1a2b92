"""Asset health from the real dbt: a failing test and a source past its ``error_after`` (``dbt
source freshness``) give FAIL with their names as reasons, and the models downstream are at risk;
a new model that fails its first run is FAIL, as dbt-ol's events of the same build say; fixed and
run again, everything is PASS; ``olbridge stream --once`` after each import sends each change's
alert to a loopback webhook, once."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.backend import Backend
from tests.helpers import invoke, serve_process
from tests.test_alerts import Webhook

PROJECT = Path(__file__).parent / "dbt_project"
BIN = Path(sys.executable).parent
FAILING_TEST = "assert_every_order_is_completed"
FRESHNESS = """
        loaded_at_field: updated_at
        freshness:
          warn_after: {count: 12, period: hour}
          error_after: {count: 1, period: day}
"""


def dbt(project: Path, *args: str, program: str = "dbt", env: dict[str, str] | None = None) -> int:
    env = {
        **os.environ,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        **(env or {}),
    }
    done = subprocess.run(
        [str(BIN / program), *args, "--project-dir", ".", "--profiles-dir", "."],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode


def build_and_check_freshness(project: Path) -> None:
    """``dbt build`` then ``dbt source freshness`` (in a target folder of its own, whose
    sources.json is copied beside the build's artifacts)."""
    dbt(project, "build")
    dbt(project, "source", "freshness", "--target-path", "freshness")
    shutil.copy(project / "freshness" / "sources.json", project / "target" / "sources.json")


def healths(catalog: str) -> tuple[int, dict[str, dict[str, Any]]]:
    code, out, err = invoke(catalog, "health", "--json")
    assert code in (0, 1), err
    return code, {h["id"]: h for h in json.loads(out)}


def dbt_import(project: Path, catalog: str) -> tuple[int, dict[str, dict[str, Any]]]:
    code, _out, err = invoke(catalog, "dbt", "import", "--project-dir", str(project))
    assert code == 0, err
    return healths(catalog)


def stream_alerts(catalog: str, config: Path, backend: Backend) -> None:
    """``olbridge stream --once``: one pass of the health watch, then the outbox delivered."""
    code, _out, err = invoke(catalog, "--config", str(config), "stream", "--once", "--url", backend.url)
    assert code == 0, err


@pytest.fixture
def loopback() -> Iterator[tuple[Webhook, Backend]]:
    """A webhook and a backend on loopback, stopped after the test, even a failed one."""
    hook = Webhook().start()
    try:
        with Backend() as backend:
            yield hook, backend
    finally:
        hook.stop()


@pytest.mark.skipif(not (BIN / "dbt").is_file(), reason="dbt is not installed (pip install -e '.[dbt]')")
def test_a_failing_test_and_a_stale_source_fail_and_put_downstream_at_risk(
    tmp_path: Path, loopback: tuple[Webhook, Backend]
) -> None:
    """The project's own warn-severity test on orders_enriched (accepted_values on status: one
    order is 'lost') WARNs it throughout; the added test FAILs it while it is there."""
    project, catalog = tmp_path / "project", str(tmp_path / "olbridge.db")
    shutil.copytree(PROJECT, project)
    sources = project / "models" / "sources.yml"
    text = sources.read_text(encoding="utf-8")
    sources.write_text(
        text.replace("      - name: customers\n", "      - name: customers\n" + FRESHNESS), encoding="utf-8"
    )
    build_and_check_freshness(project)  # every model built; raw.customers last loaded in 2024
    dbt_import(project, catalog)
    hook, backend = loopback
    config = tmp_path / "olbridge.toml"
    config.write_text(f'[[alerts]]\nname = "all"\non = ["FAIL", "WARN", "RECOVERED"]\nwebhook = "{hook.url}"\n')
    stream_alerts(catalog, config, backend)
    failing = project / "tests" / f"{FAILING_TEST}.sql"
    failing.write_text(
        "select order_id from {{ ref('orders_enriched') }} where status <> 'completed'\n", encoding="utf-8"
    )
    build_and_check_freshness(project)  # the models downstream of orders_enriched are skipped now
    code, found = dbt_import(project, catalog)
    stream_alerts(catalog, config, backend)
    assert code == 1
    enriched, customers = found["warehouse.main.orders_enriched"], found["warehouse.raw.customers"]
    assert enriched["health"] == "FAIL", enriched
    [reason] = enriched["reasons"]
    assert reason.startswith(f"check {FAILING_TEST} failed (dbt/olbridge_test.model.orders_enriched at "), reason
    assert customers["health"] == "FAIL", customers
    [reason] = customers["reasons"]
    assert reason.startswith("check source_freshness of raw.customers failed (dbt import at "), reason
    assert customers["freshness"] == {"max": "1d", "warn": "12h", "source": "dbt"}
    downstream = found["warehouse.main.customer_orders"]
    assert downstream["atRisk"] is True and downstream["health"] != "FAIL", downstream
    assert downstream["pathToCause"][-2:] == ["warehouse.main.orders_enriched", "warehouse.main.customer_orders"]
    assert found["warehouse.main.stg_customers"]["pathToCause"] == [
        "warehouse.raw.customers",
        "warehouse.main.stg_customers",
    ]

    # fixed: the test removed, the source loaded now; built and checked again
    failing.unlink()
    project_file = project / "dbt_project.yml"
    loaded_now = re.sub(r"timestamp '2024-[^']*'", "now()::timestamp", project_file.read_text(encoding="utf-8"))
    project_file.write_text(loaded_now, encoding="utf-8")
    build_and_check_freshness(project)
    code, found = dbt_import(project, catalog)
    stream_alerts(catalog, config, backend)
    assert code == 0 and not [i for i, h in found.items() if h["health"] == "FAIL"]
    # one alert a change, each once: the source FAIL then RECOVERED; the model WARN (its own
    # warn-severity test), FAIL with the added test, and WARN again once it is gone
    told = hook.changes()
    assert [c[1:] for c in told if c[0] == "warehouse.raw.customers"] == [
        ("FAIL", None, "FAIL"),
        ("RECOVERED", "FAIL", "PASS"),
    ]
    assert [c[1:] for c in told if c[0] == "warehouse.main.orders_enriched"] == [
        ("WARN", None, "WARN"),
        ("FAIL", "WARN", "FAIL"),
        ("WARN", "FAIL", "WARN"),
    ]
    assert len(told) == len(set(json.dumps(b, sort_keys=True) for b in hook.taken))
    assert found["warehouse.raw.customers"]["health"] == "PASS"
    assert found["warehouse.main.stg_customers"]["atRisk"] is False
    warned = {i: h["reasons"] for i, h in found.items() if h["health"] == "WARN"}
    assert list(warned) == ["warehouse.main.orders_enriched"]
    [reason] = warned["warehouse.main.orders_enriched"]
    assert reason.startswith("check accepted_values_orders_enriched_status__completed__returned on status failed ("), (
        reason
    )


@pytest.mark.dbt
def test_dbt_ol_assertions_received_by_serve_set_the_health_of_their_datasets(
    dbt_ol: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """The real dbt-ol's events, posted to ``olbridge serve``: orders_enriched's failed
    accepted_values test (dataQualityAssertions on the model's dataset, severity warn as dbt-ol
    sends it) WARNs it, the models downstream are at risk, and stg_customers, whose tests
    passed, is PASS."""
    _project, events = dbt_ol
    catalog = str(tmp_path / "olbridge.db")
    token = "health-token"
    env = {k: v for k, v in os.environ.items() if k not in ("OLBRIDGE_TOKEN", "OLBRIDGE_TOKEN_FILE")}
    with serve_process(catalog, env={**env, "OLBRIDGE_TOKEN": token}) as served:
        answer = requests.post(
            f"{served.url}/api/v1/lineage/batch",
            json=events,
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert answer.status_code == 200 and answer.json()["summary"]["failed"] == 0, answer.text
    _code, found = healths(catalog)
    by_name = {i.rsplit(".", 1)[-1]: h for i, h in found.items()}
    enriched = by_name["orders_enriched"]
    assert enriched["health"] == "WARN", enriched
    # named as dbt import names it: the test's own name, which dbt-ol's assertion carries (two
    # accepted_values tests of a column told apart)
    said = "check accepted_values_orders_enriched_status__completed__returned on status failed (olbridge_test/"
    assert any(r.startswith(said) for r in enriched["reasons"]), enriched["reasons"]
    assert by_name["stg_customers"]["health"] == "PASS", by_name["stg_customers"]
    assert by_name["customer_orders"]["atRisk"] is True
    assert by_name["customer_orders"]["cause"] == enriched["id"]


@pytest.mark.dbt
@pytest.mark.skipif(not (BIN / "dbt-ol").is_file(), reason="dbt-ol is not installed (pip install -e '.[dbt]')")
def test_a_new_model_that_fails_its_first_run_is_fail_as_dbt_ol_s_events_say(
    tmp_path: Path, loopback: tuple[Webhook, Backend]
) -> None:
    """A model added to the project that fails the first time it runs (no relation of it ever
    built): ``dbt import`` makes its asset, the model's table, never written, FAIL with the failed
    run as the reason, where it used to make none (the run failed an asset the catalog did not
    hold); dbt-ol's events of the same build make its dataset FAIL too, and the failed run's
    events name that dataset as dbt-ol's do. Fixed and built again, it is PASS: alerted FAIL,
    then RECOVERED."""
    project, catalog, theirs = tmp_path / "project", str(tmp_path / "olbridge.db"), str(tmp_path / "dbt-ol.db")
    shutil.copytree(PROJECT, project)
    model = project / "models" / "broken_orders.sql"
    model.write_text("select order_id, no_such_column from {{ ref('orders_enriched') }}\n", encoding="utf-8")
    events, config = tmp_path / "events.jsonl", tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {events}\n  append: true\n")
    ol_env = {"OPENLINEAGE_CONFIG": str(config), "OPENLINEAGE_NAMESPACE": "olbridge_test"}
    assert dbt(project, "build", program="dbt-ol", env=ol_env) == 1  # the new model failed
    hook, backend = loopback
    alerts = tmp_path / "olbridge.toml"
    alerts.write_text(f'[[alerts]]\nname = "all"\non = ["FAIL", "RECOVERED"]\nwebhook = "{hook.url}"\n')
    code, found = dbt_import(project, catalog)
    stream_alerts(catalog, alerts, backend)
    broken = found["warehouse.main.broken_orders"]
    assert code == 1 and broken["health"] == "FAIL", broken
    [reason] = broken["reasons"]
    assert re.fullmatch(r"last run dbt/olbridge_test\.model\.broken_orders at \S+Z failed", reason), reason
    code, out, err = invoke(catalog, "assets", "show", "warehouse.main.broken_orders")
    shown = json.loads(out)
    assert (shown["type"], shown["origin"], shown["health"], shown["reasons"]) == ("Table", "auto", "FAIL", [reason])
    assert shown["metadata"]["dbtUniqueId"] == "model.olbridge_test.broken_orders"
    assert found["warehouse.main.orders_enriched"]["atRisk"] is False  # upstream of it: not at risk

    # the failed run's events name the model's dataset, as dbt-ol's START does
    dataset = ("duckdb://warehouse.duckdb", "warehouse.main.broken_orders")
    code, _out, err = invoke(catalog, "export", "--output", str(tmp_path / "ours.ndjson"))
    assert code == 0, err
    ours = [json.loads(line) for line in (tmp_path / "ours.ndjson").read_text().splitlines()]
    named = {
        e["eventType"]: [(o["namespace"], o["name"]) for o in e["outputs"]]
        for e in ours
        if e.get("job", {}).get("name") == "olbridge_test.model.broken_orders"
    }
    assert named == {"START": [dataset], "FAIL": [dataset]}
    told = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    assert dataset in {(o["namespace"], o["name"]) for e in told for o in e.get("outputs") or []}
    code, _out, err = invoke(theirs, "import", str(events))
    assert code == 0, err
    _code, received = healths(theirs)
    assert received["warehouse.main.broken_orders"]["health"] == "FAIL", received["warehouse.main.broken_orders"]

    model.write_text("select order_id from {{ ref('orders_enriched') }}\n", encoding="utf-8")
    assert dbt(project, "build") == 0
    code, found = dbt_import(project, catalog)
    stream_alerts(catalog, alerts, backend)
    assert found["warehouse.main.broken_orders"]["health"] == "PASS", found["warehouse.main.broken_orders"]
    assert [c[1:] for c in hook.changes() if c[0] == "warehouse.main.broken_orders"] == [
        ("FAIL", None, "FAIL"),
        ("RECOVERED", "FAIL", "PASS"),
    ]
