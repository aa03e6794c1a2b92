"""The dbt adapter, against real dbt (dbt-duckdb) and the real openlineage-dbt (``dbt-ol``)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.adapters.dbt import ingest_dbt
from bridge.catalog import Catalog
from bridge.demo import example_project
from bridge.errors import ArtifactError
from bridge.export import iter_events
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event

PROJECT = Path(__file__).parent / "dbt_project"
BIN = Path(sys.executable).parent
NAMESPACE = "duckdb://warehouse.duckdb"
EPHEMERAL = (NAMESPACE, "warehouse.main.stg_orders")
SEED = (NAMESPACE, "warehouse.main.countries")


def relations(events: list[dict[str, Any]], key: str) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for e in events for d in e.get(key) or []}


@pytest.mark.dbt
def test_olbridge_names_every_relation_as_dbt_ol_does(
    dbt_ol: tuple[Path, list[dict[str, Any]]], official: Callable[[Any], list[str]]
) -> None:
    project, theirs = dbt_ol
    with Catalog(":memory:") as catalog:
        summary = ingest_dbt(catalog, project, namespace="analytics")
        assert len(summary.results) == 7  # 5 models (the ephemeral one is no relation), 1 seed, 1 snapshot
        ours = list(iter_events(catalog, Converter(Resolver.load())))
        for event in ours:
            assert official(event) == []
            assert validate_event(event) == []
        their_all = relations(theirs, "inputs") | relations(theirs, "outputs")
        our_all = relations(ours, "inputs") | relations(ours, "outputs")
        # every relation dbt-ol names, olbridge names the same way; the ephemeral model is no relation
        assert their_all - {EPHEMERAL} <= our_all
        assert EPHEMERAL in their_all
        assert EPHEMERAL not in our_all
        # every output dbt-ol reports is an output of olbridge's, with the same (namespace, name)
        assert relations(theirs, "outputs") <= relations(ours, "outputs")
        # seeds are inputs (dbt-ol leaves them out)
        assert SEED in relations(ours, "inputs")
        assert SEED not in relations(theirs, "inputs")
        by_job = {e["job"]["name"]: e for e in ours if e.get("eventType") == "COMPLETE"}
        enriched = by_job["olbridge_test.model.orders_enriched"]
        assert {(d["namespace"], d["name"]) for d in enriched["inputs"]} == {
            (NAMESPACE, "warehouse.main.stg_customers"),
            (NAMESPACE, "warehouse.raw.orders"),  # the ephemeral stg_orders, resolved to its parent
            SEED,
        }
        asset = catalog.asset("warehouse.main.orders_enriched")
        assert (asset.metadata["dbtTestStatus"], asset.metadata["dbtTestsFailed"]) == ("warn", 1)
        assert asset.metadata["dbtTestsTotal"] == 3
        assert catalog.asset("warehouse.main.stg_customers").metadata["dbtTestStatus"] == "pass"
        assert catalog.asset("warehouse.raw.customers").origin.value == "external"
        assert catalog.asset("warehouse.main.dim_customers").metadata["name"] == "dim_customers"
        assert catalog.get_asset("warehouse.main_marts.revenue_by_country") is not None
        assertions = enriched["outputs"][0]["facets"]["dataQualityAssertions"]["assertions"]
        assert {a["assertion"]: a["success"] for a in assertions} == {
            "accepted_values": False,
            "assert_no_negative_amounts": True,
            "unique": True,
        }
        # ingesting the same artifacts again changes nothing
        again = ingest_dbt(catalog, project, namespace="analytics")
        assert {r.status for r in again.results} == {"unchanged"}


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "example"
    shutil.copytree(example_project(), target)
    return target


def test_the_bundled_example_ingests(tmp_path: Path) -> None:
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, copy_example(tmp_path))
        ids = [a.id for a in catalog.list_assets()]
        assert ids == ["dbt.main.my_first_dbt_model", "dbt.main.my_second_dbt_model"]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda p: (p / "target" / "manifest.json").write_text("{not json"),
            r"manifest\.json: not valid JSON \(line 1",
        ),
        (lambda p: (p / "target" / "run_results.json").unlink(), r"run_results\.json: file not found"),
        (
            lambda p: (p / "target" / "manifest.json").write_text('{"metadata": {"dbt_schema_version": "x"}}'),
            "not a dbt manifest",
        ),
        (lambda p: (p / "target" / "manifest.json").write_text("[]"), "expected a JSON object"),
        (lambda p: (p / "profiles.yml").unlink(), "profiles.yml not found"),
        (lambda p: (p / "profiles.yml").write_text("other: {}\n"), "no profile named 'my_dbt_project'"),
        (lambda p: (p / "dbt_project.yml").write_text("name: x\n"), "needs a 'profile'"),
    ],
)
def test_corrupt_artifacts_are_refused_and_change_nothing(
    tmp_path: Path, damage: Callable[[Path], Any], message: str
) -> None:
    project = copy_example(tmp_path)
    damage(project)
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match=message):
            ingest_dbt(catalog, project, profiles_dir=project)
        assert catalog.count_assets() == 0
        assert catalog.count_task_runs() == 0


def test_a_result_with_an_unknown_status_is_refused(tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    path = project / "target" / "run_results.json"
    results = json.loads(path.read_text())
    for result in results["results"]:
        if result["unique_id"].startswith("model."):
            result["status"] = "exploded"
    path.write_text(json.dumps(results))
    with Catalog(":memory:") as catalog:
        with pytest.raises(ArtifactError, match="unknown status 'exploded'"):
            ingest_dbt(catalog, project)
        assert catalog.count_assets() == 0
