"""The Kestra adapter: AssetShipper's AssetLineage records (``kestra import``) and flows' declared
assets (``kestra declare``), on the flows of the user's guides written out in tests/kestra/."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from bridge.adapters.kestra import declare_flows, import_lineage, parse_flow
from bridge.catalog import Catalog
from bridge.catalog import sql as catalog_sql
from bridge.catalog.migrations.legacy import SQLITE_SCRIPTS
from bridge.delivery.history import iter_events
from bridge.errors import CatalogError, NotFoundError, ValidationError
from bridge.mapping import Resolver
from bridge.model import JobInfo, TaskState
from bridge.model.health import Health
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from bridge.receiver.imports import catalog_intake
from tests.conftest import ROOT, at
from tests.helpers import invoke, ol_dataset, ol_run_event, snapshot

pytestmark = pytest.mark.both_engines

FIXTURES = Path(__file__).parent / "kestra"
LINEAGE = FIXTURES / "asset-lineage.ndjson"
GUIDE_FLOW = FIXTURES / "dbt_build_with_lineage.yml"
ALERT_FLOW = FIXTURES / "dbt_test_failure_alert.yml"
SNAPSHOT_FLOW = FIXTURES / "vm_snapshot.yml"
NESTED_FLOW = FIXTURES / "nested.yml"


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LINEAGE.read_text().splitlines()]


def write_lines(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


# --- kestra import ---------------------------------------------------------------------------


def test_import_records_one_task_run_per_lineage_record(catalog: Catalog) -> None:
    results = import_lineage(catalog, [LINEAGE])
    assert [r.status for r in results] == ["created"] * 6
    runs = {r.key.task_run_id: r for r in catalog.iter_task_runs()}
    assert len(runs) == 6
    report = runs["3aVq9nK2pR7sT1uW4xY6zB"]
    assert (report.key.flow_namespace, report.key.flow_id, report.key.task_id, report.key.execution_id) == (
        "company.data",
        "dbt_build_with_lineage",
        "export_report",
        "4wjtkzwVGBM9yKnjm3yv8r",
    )
    assert report.job == JobInfo(integration="KESTRA", tenant_id="main", flow_revision=2)
    assert [u.asset_id for u in report.inputs] == ["dbt.main.my_second_dbt_model"]
    assert [u.asset_id for u in report.outputs] == ["reports.second_model_report"]
    states = {r.key.task_id: r.state for r in runs.values()}
    assert states["snapshot"] is TaskState.WARNING
    assert states["load_accounts"] is TaskState.FAILED
    assert states["notify"] is TaskState.KILLED


def test_import_keeps_kestra_ids_types_namespaces_and_metadata(catalog: Catalog) -> None:
    import_lineage(catalog, [LINEAGE])
    second = catalog.asset("dbt.main.my_second_dbt_model")
    assert (second.type, second.namespace) == ("Table", None)  # a Global asset, as dbt emits it
    assert second.metadata == {"system": "duckdb", "database": "dbt", "schema": "main", "name": "my_second_dbt_model"}
    report = catalog.asset("reports.second_model_report")
    assert (report.type, report.namespace, report.display_name, report.description) == (
        "File",
        "company.data",
        "Second model report",
        "my_second_dbt_model as CSV",
    )
    assert report.metadata == {"owner": "analytics-team", "path": "second_model_report.csv"}
    snap = catalog.asset("snapshot.vm-web-prod-01.6hQ3kY1sV9bN2mX5cZ8aL4")
    assert (snap.type, snap.namespace, dict(snap.metadata)) == (
        "company.infra.Snapshot",
        "company.infra",
        {"sizeGb": 40, "vm": "vm-web-prod-01"},
    )
    assert catalog.asset("crm.accounts").type == "External"
    # a failed run writes no output: the new one it was to write is made (as Kestra keeps a new
    # asset whose task failed, of status failed), never written, and the run FAILs it
    accounts = catalog.asset("warehouse.sales.accounts")
    assert (accounts.type, accounts.metadata["system"]) == ("Table", "postgres")
    assert [u.direction for u in catalog.usages_of("warehouse.sales.accounts")] == []
    [failed] = [h for h in catalog.health(at(180)) if h.asset_id == "warehouse.sales.accounts"]
    assert failed.health is Health.FAIL


def test_import_reads_a_json_array_as_it_reads_json_lines(tmp_path: Path) -> None:
    array = tmp_path / "lineage.json"
    array.write_text(json.dumps(records(), indent=2))
    with Catalog(tmp_path / "a.db") as from_array, Catalog(tmp_path / "b.db") as from_lines:
        import_lineage(from_array, [array])
        import_lineage(from_lines, [LINEAGE])
        assert snapshot(from_array) == snapshot(from_lines)


def test_importing_the_same_records_again_changes_nothing(catalog: Catalog) -> None:
    import_lineage(catalog, [LINEAGE])
    before = snapshot(catalog)
    assert [r.status for r in import_lineage(catalog, [LINEAGE])] == ["unchanged"] * 6
    assert snapshot(catalog) == before


def test_imported_runs_become_valid_run_events(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    import_lineage(catalog, [LINEAGE])
    events = list(iter_events(catalog, converter))
    for event in events:
        assert official(event) == [], event
        assert validate_event(event) == []
    ends = {e["job"]["name"]: e["eventType"] for e in events if e["eventType"] != "START"}
    assert ends == {
        "dbt_build_with_lineage.dbt_build": "COMPLETE",
        "dbt_build_with_lineage.export_report": "COMPLETE",
        "vm_snapshot.snapshot": "COMPLETE",  # WARNING
        "crm_sync.load_accounts": "FAIL",
        "crm_sync.notify": "ABORT",  # KILLED
    }
    job = next(e["job"] for e in events if e["job"]["name"] == "vm_snapshot.snapshot")
    assert job["namespace"] == "company.infra"
    assert job["facets"]["jobType"]["integration"] == "KESTRA"
    assert {t["key"]: t["value"] for t in job["facets"]["tags"]["tags"]} == {
        "kestra.tenantId": "main",
        "kestra.flowRevision": "7",
    }


def documented_rule() -> str:
    """The naming rule docs/adapters.md gives for the dbt models Kestra records on DuckDB, which
    name no connection: it names them by the file their dbt profile names."""
    text = (ROOT / "docs" / "adapters.md").read_text()
    section = text[text.index("**dbt models from Kestra, and dbt-ol.**") :]
    start = section.index("```toml\n") + len("```toml\n")
    return section[start : section.index("```", start)]


def dataset_names(catalog: Catalog, converter: Converter) -> dict[str, tuple[str, str]]:
    """Each asset id of the catalog's run events, with the dataset (namespace, name) it is sent as."""
    return {
        d["facets"]["olbridge_asset"]["id"]: (d["namespace"], d["name"])
        for e in iter_events(catalog, converter)
        for d in (*e.get("inputs", ()), *e.get("outputs", ()))
    }


def test_a_dbt_model_names_dbt_ol_s_dataset_where_its_record_holds_enough(
    tmp_path: Path, new_catalog: Callable[[], Catalog], resolver: Resolver
) -> None:
    """A dbt model's Table, as Kestra's dbt plugin records it, holds no connection: dbt-ol's
    namespace for BigQuery is ``bigquery`` alone, so a BigQuery model names dbt-ol's dataset and
    dbt-ol's events join it; for DuckDB it is the profile's path (for the others a host and port,
    an account), which the record lacks: such a model keeps the default namespace and dbt-ol's
    event makes a placeholder of its own, unless the user's rule gives the path."""
    duck = records()[0]  # dbt.main.my_first_dbt_model, on DuckDB
    table = {"system": "bigquery", "database": "shop", "schema": "marts", "name": "orders"}
    big = {
        **duck,
        "flowId": "dbt_on_bigquery",
        "taskRunId": "5mX2nR8pQ4sT6uV8wY0zA1",
        "outputs": [{**duck["outputs"][0], "id": "shop.marts.orders", "metadata": table, **table}],
    }
    lineage = write_lines(tmp_path / "lineage.ndjson", [duck, big])
    rules = tmp_path / "rules.toml"
    rules.write_text(documented_rule())
    ruled = Resolver.load([rules])
    dbt_ol = ol_run_event(
        job=("dbt", "dbt.models"),
        outputs=[
            ol_dataset("bigquery", "shop.marts.orders"),
            ol_dataset("duckdb://dbt.duckdb", "dbt.main.my_first_dbt_model"),
        ],
    )
    for naming, duck_dataset, placeholders in (
        (resolver, ("olbridge", "dbt.main.my_first_dbt_model"), 1),
        (ruled, ("duckdb://dbt.duckdb", "dbt.main.my_first_dbt_model"), 0),
    ):
        catalog = new_catalog()
        import_lineage(catalog, [lineage])
        assert dataset_names(catalog, Converter(naming)) == {
            "dbt.main.my_first_dbt_model": duck_dataset,
            "shop.marts.orders": ("bigquery", "shop.marts.orders"),
        }
        [taken] = catalog_intake(catalog, naming).take([dbt_ol])
        assert len(taken.placeholders) == placeholders, taken  # the BigQuery model's joined either way


def test_a_run_recorded_before_tenant_and_revision_were_kept_hashes_as_before() -> None:
    """The record hash leaves out the JobInfo fields added later while they are unset, so a
    catalog written before them still sees a run recorded again as unchanged."""
    from bridge.catalog.writes import _record_hash
    from tests.helpers import decl, run

    recorded = run("t", inputs=(decl("raw.orders"),), outputs=(decl("marts.orders", type="Table"),))
    # the hash earlier releases stored for this run, before JobInfo had a tenant and a revision
    expected = "c71041c6eb3729d2a873be5bf31e1f3c3cbd95040fa6ff3ef2aba6bc39b98765"
    assert _record_hash(recorded) == expected
    assert _record_hash(attrs.evolve(recorded, job=JobInfo(flow_revision=2))) != expected


def _without(record: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != key}


BAD_RECORDS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str]] = {
    "unknown field": (lambda r: {**r, "attempt": 2}, "unknown field(s) attempt"),
    "missing taskRunId": (lambda r: _without(r, "taskRunId"), "missing required field(s) taskRunId"),
    "missing asset id": (lambda r: {**r, "inputs": [{"type": "File"}]}, "inputs[0]: an asset needs an 'id'"),
    "unknown asset field": (lambda r: {**r, "inputs": [{"id": "a", "colour": "red"}]}, "unknown field(s) colour"),
    "bad state": (lambda r: {**r, "state": "DONE"}, "unknown task state 'DONE'"),
    "bad revision": (lambda r: {**r, "flowRevision": "two"}, "flowRevision: a flow revision is a positive integer"),
    "ends before it starts": (
        lambda r: {**r, "endDate": "2025-03-01T08:01:00Z"},
        "endDate: a task run cannot end before it starts",
    ),
    "outputs of a run still going": (
        lambda r: {**r, "state": "RUNNING", "endDate": None},
        "outputs: outputs are written when a task run ends; state RUNNING has not ended",
    ),
    "typed property of another type": (
        lambda r: {**r, "outputs": [{**r["outputs"][0], "provider": "aws"}]},
        "unknown field(s) provider for an asset of type File",
    ),
    "typed property disagreeing with metadata": (
        lambda r: {**r, "outputs": [{**r["outputs"][0], "path": "other.csv"}]},
        "'path' is 'other.csv' but metadata.path is 'second_model_report.csv'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_a_bad_record_is_refused_with_its_file_and_line_and_nothing_is_recorded(
    case: str, tmp_path: Path, catalog: Catalog
) -> None:
    change, message = BAD_RECORDS[case]
    items = records()
    items[2] = change(items[2])
    path = write_lines(tmp_path / "lineage.ndjson", items)
    before = snapshot(catalog)
    with pytest.raises(ValidationError) as caught:
        import_lineage(catalog, [path])
    assert str(caught.value).startswith(f"1 bad lineage file(s); nothing was recorded:\n  {path}:3: ")
    assert message in str(caught.value) and "bad line(s)" not in str(caught.value)
    assert snapshot(catalog) == before


def test_a_bad_record_in_a_json_array_is_named_by_its_line(tmp_path: Path, catalog: Catalog) -> None:
    items = records()
    items[1] = _without(items[1], "startDate")
    path = tmp_path / "lineage.json"
    path.write_text(json.dumps(items, indent=2))
    starts = [number for number, text in enumerate(path.read_text().splitlines(), start=1) if text == "  {"]
    line = starts[1]  # where the second record starts
    with pytest.raises(ValidationError, match=rf"{path}:{line}: missing required field\(s\) startDate"):
        import_lineage(catalog, [path])
    assert catalog.count_task_runs() == 0


def test_a_json_array_that_is_not_json_is_named_by_its_line(tmp_path: Path, catalog: Catalog) -> None:
    path = tmp_path / "lineage.json"
    text = json.dumps(records()[:2], indent=2)
    path.write_text(text.replace("},\n  {", "}\n  {", 1))  # no comma between the records
    line = text.splitlines().index("  {", 2) + 1  # where the second record starts
    with pytest.raises(ValidationError) as caught:
        import_lineage(catalog, [path])
    assert str(caught.value).startswith(
        f"1 bad lineage file(s); nothing was recorded:\n  {path}:{line}: not valid JSON: Expecting ',' delimiter"
    )
    assert str(caught.value).count("nothing was recorded") == 1 and "format: JSON" in str(caught.value)
    assert catalog.count_task_runs() == 0


def test_one_bad_file_and_no_file_is_recorded(tmp_path: Path, catalog: Catalog) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{tenantId:"main",namespace:"company.data"}\n')  # Kestra's default, ION
    ion = tmp_path / "lineage.ion"
    ion.write_text("")
    with pytest.raises(ValidationError) as caught:
        import_lineage(catalog, [LINEAGE, bad, ion])
    text = str(caught.value)
    assert text.startswith(f"2 bad lineage file(s); nothing was recorded:\n  {bad}:1: not valid JSON")
    assert f"\n  {ion}: an ION file\n" in text
    assert text.count("format: JSON") == 1 and text.endswith("`format: JSON`.)")
    assert catalog.count_task_runs() == 0 and catalog.count_assets() == 0


def test_cli_import_prints_a_summary_and_json(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code, out, err = invoke(db, "kestra", "import", str(LINEAGE), "--json")
    assert code == 0, err
    assert json.loads(out)["taskRuns"] == 6
    assert "kestra: 6 task run(s) from 1 file(s): 6 created" in err
    code, out, err = invoke(db, "kestra", "import", str(LINEAGE))
    assert code == 0 and out == "" and "6 unchanged" in err


def test_cli_import_refusal_is_one_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "l.ndjson", [_without(records()[0], "flowId")])
    code, out, err = invoke(tmp_path / "c.db", "kestra", "import", str(path))
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and f"{path}:1: missing required field(s) flowId" in err


# --- kestra declare --------------------------------------------------------------------------


def test_the_guide_flow_declares_its_two_asset_tasks(catalog: Catalog) -> None:
    [result] = declare_flows(catalog, [GUIDE_FLOW], now=at(0))
    assert (result.namespace, result.flow_id, result.created) == (
        "company.data",
        "dbt_build_with_lineage",
        ("dbt_build", "export_report"),
    )
    jobs = {j.job.task_id: j for j in catalog.iter_declared_jobs()}
    assert sorted(jobs) == ["dbt_build", "export_report"]  # nested in the WorkingDirectory
    assert [catalog.declared_job(pk).job.task_id for pk in result.pks] == ["dbt_build", "export_report"]
    dbt = jobs["dbt_build"].job
    assert (dbt.enable_auto, dbt.inputs, dbt.outputs, dbt.task_type) == (
        True,
        (),
        (),
        "io.kestra.plugin.dbt.cli.DbtCLI",
    )
    report = jobs["export_report"].job
    assert not report.enable_auto
    assert [d.id for d in report.inputs] == ["dbt.main.my_second_dbt_model"]
    [output] = report.outputs
    assert (output.id, output.type, output.namespace, dict(output.metadata)) == (
        "reports.second_model_report",
        "File",
        "company.data",
        {"path": "second_model_report.csv", "owner": "analytics-team"},
    )
    assert catalog.count_assets() == 0  # a declaration is no write


def test_every_flowable_task_is_read_and_known_expressions_resolve() -> None:
    flow = parse_flow(NESTED_FLOW.read_text(), "nested.yml")
    outputs = {j.task_id: [d.id for d in j.outputs] for j in flow.jobs}
    assert outputs == {
        "in_parallel": ["out.parallel"],
        "when_true": ["out.then"],
        "when_false": ["out.else"],
        "case_a": ["out.case_a"],  # {{ task.id }}
        "case_default": ["out.default"],
        "dag_first": ["out.dag"],
        "deep": ["out.nested.deep"],  # {{ flow.id | upper | lower }}
        "on_error": ["out.errors"],
        "at_last": ["out.finally"],
        "flow_error": ["out.flow-errors"],
        "after": [],
    }
    dag = next(j for j in flow.jobs if j.task_id == "dag_first")
    assert dict(dag.outputs[0].metadata) == {"revision": "3"}  # {{ flow.revision }}
    assert flow.warnings == ()


def test_expressions_known_only_at_run_time_are_reported_not_guessed() -> None:
    flow = parse_flow(SNAPSHOT_FLOW.read_text(), "vm_snapshot.yml")
    [job] = flow.jobs
    assert [d.id for d in job.inputs] == ["vm-web-prod-01"]  # {{ vars.vm }}
    # the per-run snapshot is left out; the inventory stays, without the per-run metadata value
    [inventory] = job.outputs
    assert (inventory.id, inventory.type, inventory.namespace) == (
        "inventory.vm-web-prod-01.snapshots",
        "Dataset",
        "company.infra",
    )
    assert dict(inventory.metadata) == {"system": "s3", "vm": "vm-web-prod-01", "owner": "infra-team"}
    assert job.description == "Snapshot vm-web-prod-01 for flow vm_snapshot"
    first, second = flow.warnings
    assert first.startswith("vm_snapshot.yml:20: task 'snapshot', tasks[0].assets.outputs[0].id: {{ execution.id }}")
    assert "left out of the declared lineage" in first
    assert second.startswith("vm_snapshot.yml:23: task 'snapshot', tasks[0].assets.outputs[1].metadata.lastExecution")


def test_yaml_merge_keys_are_merged_as_kestra_merges_them() -> None:
    # `<<: *anchor` is YAML's merge, not a key given twice
    text = (
        "id: f\nnamespace: company.data\ntasks:\n  - id: load\n    type: x.Y\n    assets:\n"
        "      outputs:\n        - &table {id: a, type: Table}\n        - <<: *table\n          id: b\n"
    )
    [job] = parse_flow(text, "f.yml").jobs
    assert [(d.id, d.type) for d in job.outputs] == [("a", "Table"), ("b", "Table")]


def test_a_variable_made_of_known_expressions_is_known() -> None:
    text = (
        'id: sales\nnamespace: company.data\nvariables:\n  table: "{{ flow.id | upper }}_daily"\n'
        '  day: "{{ execution.startDate }}"\ntasks:\n  - id: load\n    type: x.Y\n    assets:\n'
        '      outputs:\n        - {id: "{{ vars.table }}", type: Table}\n'
        '        - {id: "sales.{{ vars.day }}", type: Table}\n'
    )
    flow = parse_flow(text, "f.yml")
    [job] = flow.jobs
    assert [d.id for d in job.outputs] == ["SALES_daily"]
    [warning] = flow.warnings  # a variable known only at run time still is
    assert warning.startswith("f.yml:12: task 'load', tasks[0].assets.outputs[1].id: {{ vars.day }}")


def test_a_flow_without_asset_blocks_declares_nothing_and_says_so(catalog: Catalog) -> None:
    [result] = declare_flows(catalog, [ALERT_FLOW], now=at(0))
    assert result.pks == () and "has no task with an 'assets' block" in result.warnings[0]
    assert catalog.count_declared_jobs() == 0


def test_declaring_a_flow_again_changes_nothing_and_a_change_replaces_it(tmp_path: Path, catalog: Catalog) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(GUIDE_FLOW.read_text())
    [first] = declare_flows(catalog, [flow], now=at(0))
    before = snapshot(catalog)
    [again] = declare_flows(catalog, [flow], now=at(10))
    assert (again.unchanged, again.pks, again.changed) == (("dbt_build", "export_report"), first.pks, False)
    assert snapshot(catalog) == before

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "same.yml").write_text(flow.read_text())
    [same] = declare_flows(catalog, [elsewhere / "same.yml"], now=at(15))
    assert not same.changed and snapshot(catalog) == before  # the file's name is no part of the flow

    text = GUIDE_FLOW.read_text().replace("owner: analytics-team", "owner: finance-team")
    text = text.replace("        assets:\n          enableAuto: true\n", "")
    flow.write_text(text)
    [changed] = declare_flows(catalog, [flow], now=at(20))
    assert (changed.updated, changed.removed, changed.created) == (("export_report",), ("dbt_build",), ())
    assert first.changed_pks == first.pks and again.changed_pks == () and changed.changed_pks == (first.pks[1],)
    [stored] = list(catalog.iter_declared_jobs())
    assert stored.pk == first.pks[1] and stored.declared_at == at(20)  # the same key, declared anew
    assert stored.job.outputs[0].metadata["owner"] == "finance-team"


BAD_FLOWS: dict[str, tuple[str, str]] = {
    "bad yaml": ("id: f\nnamespace: company.data\ntasks:\n  - id: [unclosed\n", "f.yml:5: not valid YAML"),
    "not a mapping": ("- id: f\n", "f.yml: a flow is a YAML mapping"),
    "a NUL": (  # one line, not YAML's own two ('\n  in "<unicode string>", position 21')
        "id: f\nnamespace: company.data\x00\ntasks: []\n",
        "f.yml:2: not valid YAML: unacceptable character #x0000: special characters are not allowed",
    ),
    "a key twice": (  # YAML would keep the second outputs and drop the first without a word
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n"
        "      outputs:\n        - {id: first, type: Table}\n      outputs:\n        - {id: second, type: Table}\n",
        "f.yml:9: not valid YAML: the key 'outputs' is given twice",
    ),
    "no tasks": ("id: f\nnamespace: company.data\n", "f.yml:1: a flow needs 'tasks'"),
    "bad namespace": ("id: f\nnamespace: Company\ntasks: []\n", "f.yml:1: namespace: a namespace matches"),
    "task without type": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    tasks:\n      - id: b\n",
        "f.yml:7: tasks[0].tasks[0]: a task needs 'type'",
    ),
    "duplicate task id": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n  - id: a\n    type: x.Y\n",
        "f.yml:6: tasks[1]: task id 'a' is used twice (first on line 4)",
    ),
    "unknown assets key": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n      input: []\n",
        "f.yml:7: tasks[0].assets: unknown key(s) input in 'assets'",
    ),
    "unknown input key": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n"
        "      inputs:\n        - id: raw\n          type: Table\n",
        "f.yml:8: task 'a', tasks[0].assets.inputs[0]: unknown key(s) type in an input",
    ),
    "output without type": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n"
        "      outputs:\n        - id: out\n",
        "f.yml:8: task 'a', tasks[0].assets.outputs[0]: an output needs 'type'",
    ),
    "unknown output key": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n"
        "      outputs:\n        - {id: out, type: Table, colour: red}\n",
        "f.yml:8: task 'a', tasks[0].assets.outputs[0]: unknown field(s) colour",
    ),
    "bad asset id": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n"
        "      outputs:\n        - {id: 'a/b', type: Table}\n",
        "f.yml:8: task 'a', tasks[0].assets.outputs[0].id: a name-form id has only letters",
    ),
    "bad enableAuto": (
        "id: f\nnamespace: company.data\ntasks:\n  - id: a\n    type: x.Y\n    assets:\n      enableAuto: maybe\n",
        "f.yml:7: task 'a', tasks[0].assets.enableAuto: 'enableAuto' is true or false, not 'maybe'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FLOWS))
def test_a_bad_flow_is_refused_with_its_file_and_line_and_nothing_is_recorded(
    case: str, tmp_path: Path, catalog: Catalog
) -> None:
    text, message = BAD_FLOWS[case]
    bad = tmp_path / "f.yml"
    bad.write_text(text)
    before = snapshot(catalog)
    with pytest.raises(ValidationError) as caught:
        declare_flows(catalog, [GUIDE_FLOW, bad], now=at(0))
    assert "1 bad flow file(s); nothing was recorded" in str(caught.value)
    assert message.replace("f.yml", str(bad)) in str(caught.value)
    assert snapshot(catalog) == before


def test_a_flow_yaml_refuses_is_said_on_one_line(tmp_path: Path) -> None:
    """``kestra declare`` of a flow YAML refuses (a NUL character): the file, the line and the
    reason on one line, under the one that says nothing was recorded."""
    bad = tmp_path / "f.yml"
    bad.write_text("id: f\nnamespace: company.data\x00\ntasks: []\n")
    code, out, err = invoke(tmp_path / "c.db", "kestra", "declare", str(bad))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "Error: 1 bad flow file(s); nothing was recorded:",
        f"  {bad}:2: not valid YAML: unacceptable character #x0000: special characters are not allowed",
    ]


def test_the_same_flow_twice_in_one_call_is_refused(tmp_path: Path, catalog: Catalog) -> None:
    copy = tmp_path / "copy.yml"
    copy.write_text(GUIDE_FLOW.read_text())
    with pytest.raises(ValidationError, match=r"flow company\.data\.dbt_build_with_lineage is also in"):
        declare_flows(catalog, [GUIDE_FLOW, copy], now=at(0))
    assert catalog.count_declared_jobs() == 0


def test_declared_jobs_export_first_as_valid_job_events_named_as_their_runs(
    catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    import_lineage(catalog, [LINEAGE])
    declare_flows(catalog, [GUIDE_FLOW, SNAPSHOT_FLOW, NESTED_FLOW], now=at(60 * 24))
    events = list(iter_events(catalog, converter))
    kinds = [e["schemaURL"].rsplit("/", 1)[1] for e in events]
    declared = catalog.count_declared_jobs()
    assert kinds[:declared] == ["JobEvent"] * declared
    assert "JobEvent" not in kinds[declared:]
    for event in events:
        assert official(event) == [], event
        assert validate_event(event) == []
    job_events = {e["job"]["name"]: e for e in events[:declared]}
    run_jobs = {(e["job"]["namespace"], e["job"]["name"]) for e in events[declared:] if "run" in e}
    report = job_events["dbt_build_with_lineage.export_report"]
    assert ("company.data", "dbt_build_with_lineage.export_report") in run_jobs
    assert report["job"]["namespace"] == "company.data"
    assert report["job"]["facets"]["jobType"] == {
        **report["job"]["facets"]["jobType"],
        "integration": "KESTRA",
        "jobType": "TASK",
    }
    # a declared asset the catalog holds is the catalog's record, as in the run events
    [second] = report["inputs"]
    run_input = next(
        e["inputs"][0] for e in events[declared:] if e["job"]["name"] == "dbt_build_with_lineage.export_report"
    )
    assert second == run_input
    snapshot_job = job_events["vm_snapshot.snapshot"]
    assert snapshot_job["job"]["facets"]["documentation"]["description"].startswith("Snapshot vm-web-prod-01")
    assert [d["facets"]["datasetType"]["datasetType"] for d in snapshot_job["outputs"]] == ["DATASET"]


def test_job_events_are_the_same_on_every_export(catalog: Catalog, converter: Converter) -> None:
    declare_flows(catalog, [GUIDE_FLOW, NESTED_FLOW], now=at(0))
    first = list(iter_events(catalog, converter))
    assert len(first) == catalog.count_declared_jobs() == 13  # a JobEvent a declared job, none left out
    assert list(iter_events(catalog, converter)) == first


def test_cli_declare_then_export(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code, out, err = invoke(db, "kestra", "declare", str(GUIDE_FLOW), str(SNAPSHOT_FLOW), "--json")
    assert code == 0, err
    flows = json.loads(out)["flows"]
    assert [(f["flowId"], f["created"]) for f in flows] == [
        ("dbt_build_with_lineage", ["dbt_build", "export_report"]),
        ("vm_snapshot", ["snapshot"]),
    ]
    assert "warning: " in err and "{{ execution.id }}" in err
    code, out, err = invoke(db, "export", "--flow", "vm_snapshot")
    assert code == 0, err
    [event] = [json.loads(line) for line in out.splitlines()]
    assert event["job"]["name"] == "vm_snapshot.snapshot" and "run" not in event


def test_a_catalog_from_before_declared_jobs_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = [name for name, _ in SQLITE_SCRIPTS].index("0004_declared_jobs")
    with sqlite3.connect(path) as conn:  # a catalog as the release before declared jobs left it
        for script in [script for _, script in SQLITE_SCRIPTS[:before]]:
            conn.executescript(script)
        conn.execute(f"PRAGMA user_version = {before}")
    with Catalog(path) as catalog:
        assert catalog.schema_version == catalog_sql.SCHEMA_VERSION
        declare_flows(catalog, [GUIDE_FLOW], now=at(0))
        assert catalog.count_declared_jobs() == 2


def test_a_declared_job_is_found_by_its_key(catalog: Catalog) -> None:
    [result] = declare_flows(catalog, [GUIDE_FLOW], now=at(0))
    assert catalog.declared_job(result.pks[1]).job.task_id == "export_report"
    with pytest.raises(NotFoundError, match="no declared job with key 999"):
        catalog.declared_job(999)


def test_a_record_the_catalog_refuses_leaves_the_whole_import_out(tmp_path: Path, catalog: Catalog) -> None:
    import_lineage(catalog, [LINEAGE])
    before = snapshot(catalog)
    fresh = {**records()[0], "taskRunId": "new-task-run", "executionId": "another-execution"}
    moved = {**records()[2], "taskId": "another_task"}  # that task run is another task's
    path = write_lines(tmp_path / "more.ndjson", [fresh, moved])
    with pytest.raises(ValidationError, match="is recorded for task"):
        import_lineage(catalog, [path])
    assert snapshot(catalog) == before


def test_a_task_run_kestra_restarted_is_recorded_as_its_next_attempt(tmp_path: Path, catalog: Catalog) -> None:
    """Kestra's restart of an execution keeps its execution's and its task runs' ids: the task run
    that failed ends again, and its import refused the whole file ("a task run ends once"), the
    other runs in it left out and the asset left FAIL. The second ending is the run's attempt 2
    (as Metaflow's retries are named), said in a warning; imported again, nothing changes."""
    failed = records()[4]
    assert (failed["taskId"], failed["state"]) == ("load_accounts", "FAILED")
    import_lineage(catalog, [write_lines(tmp_path / "first.ndjson", [failed])])
    again = {**failed, "state": "SUCCESS", "endDate": "2025-03-01T10:20:30Z", "timestamp": "2025-03-01T10:20:31Z"}
    day = write_lines(tmp_path / "day.ndjson", [*records()[:4], again])
    results = import_lineage(catalog, [day])
    assert [r.status for r in results] == ["created"] * 5
    assert results[4].warnings[0] == (
        f"task run {failed['taskRunId']!r} of execution {failed['executionId']!r} ended again (restarted): "
        f"recorded as its attempt 2, '{failed['taskRunId']}:attempt-2'"
    )
    ids = sorted(r.key.task_run_id for r in catalog.iter_task_runs() if r.key.task_id == "load_accounts")
    assert ids == [failed["taskRunId"], f"{failed['taskRunId']}:attempt-2"]
    (output,) = [o["id"] for o in failed["outputs"]]
    (judged,) = catalog.health(datetime(2025, 3, 1, 11, tzinfo=UTC), ids=[output])
    assert judged.health is Health.PASS, judged  # its last attempt's
    again_results = import_lineage(catalog, [day])
    assert [r.status for r in again_results] == ["unchanged"] * 5 and not again_results[4].warnings
    # an ending one of its attempts holds, whatever else of the record differs: no attempt more
    revised = {**failed, "flowRevision": 2}
    (result,) = import_lineage(catalog, [write_lines(tmp_path / "revised.ndjson", [revised])])
    assert (result.status, result.warnings) == ("unchanged", ())
    third = {**again, "state": "FAILED", "endDate": "2025-03-01T11:00:00Z"}
    (result,) = import_lineage(catalog, [write_lines(tmp_path / "third.ndjson", [third])])
    assert result.status == "created" and "recorded as its attempt 3" in result.warnings[0]
    # a run not ended is no attempt: its start moved is refused, as for any run
    running = {**records()[0], "taskRunId": "running-run", "state": "RUNNING", "endDate": None, "outputs": []}
    import_lineage(catalog, [write_lines(tmp_path / "running.ndjson", [running])])
    moved = {**running, "state": "SUCCESS", "startDate": "2025-03-01T07:00:00Z", "endDate": "2025-03-01T12:00:00Z"}
    with pytest.raises(CatalogError, match="a run's start does not move"):
        import_lineage(catalog, [write_lines(tmp_path / "moved.ndjson", [moved])])
