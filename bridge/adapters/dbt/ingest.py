"""dbt as an asset front end (Kestra's ``enableAuto`` for dbt).

Every model, seed and snapshot that ran becomes a task run writing a Global ``Table`` asset with id
``<database>.<schema>.<alias>``; its parents (models, seeds, snapshots, sources) are its inputs.
Columns come from ``catalog.json`` when present, and each model's column lineage from its compiled
SQL (:mod:`bridge.adapters.dbt.columns`).
Sources become External placeholders unless a flow produces them. Test results become
``dbtTestStatus`` / ``dbtTestsTotal`` / ``dbtTestsFailed`` metadata and data-quality assertions.

Two places where olbridge differs from openlineage-dbt on purpose: seeds (and snapshots) are inputs
of the models that select from them, and an ephemeral model, which is no relation, is resolved to
its own parents instead of being listed as an input dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from bridge.adapters.dbt.artifacts import DbtArtifacts
from bridge.adapters.dbt.columns import ProjectColumns
from bridge.adapters.dbt.freshness import freshness_checks, source_rules
from bridge.errors import ArtifactError, ValidationError
from bridge.mapping.filters import snowflake_account
from bridge.model import (
    Assertion,
    AssetDeclaration,
    ColumnLineage,
    JobInfo,
    Origin,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_id,
    parse_time,
)
from bridge.model.health import FreshnessRule

RELATION_TYPES = ("model", "seed", "snapshot")
# a relation's result; "partial success" (dbt 1.9's microbatch model, some batches failed) wrote
# the relation in part, a run that ended in a warning
_STATE = {
    "success": TaskState.SUCCESS,
    "error": TaskState.FAILED,
    "skipped": TaskState.SKIPPED,
    "partial success": TaskState.WARNING,
}
# a test's result as dbt reports it: passed, or failed at the severity dbt reached ("warn": its
# warn_if, whatever its configured severity; "fail", "error": its severity); a skipped test (its
# model failed) says nothing and is left out
_TEST_FAILED = {"fail": None, "error": None, "warn": "warn"}
_JOB_TYPES = {"model": "MODEL", "seed": "SEED", "snapshot": "SNAPSHOT"}


@attrs.frozen
class DbtIngest:
    """What a dbt target folder says, as catalog records."""

    task_runs: tuple[TaskRun, ...]
    test_updates: tuple[AssetDeclaration, ...]  # test results for relations that did not run now
    skipped: tuple[str, ...]  # run results that are not relations (tests, hooks), counted for the summary
    column_notes: tuple[str, ...] = ()  # what the column lineage could not read
    notes: tuple[str, ...] = ()  # what the artifacts name that the manifest does not have: left out
    # the freshness rules of sources (their manifest's warn_after / error_after), by asset id
    freshness_rules: tuple[tuple[str, FreshnessRule], ...] = ()
    # the sources that have none (a rule dbt import set on one before is taken off)
    unruled_sources: tuple[str, ...] = ()
    # the asset ids of the sources sources.json judged (reported when it was written, where later)
    freshness_checked: tuple[str, ...] = ()


def connection_metadata(adapter: str, connection: Mapping[str, Any]) -> dict[str, Any]:
    """The connection details the naming rules need, from a profile target."""
    if adapter == "duckdb":
        return {"path": str(connection["path"])} if connection.get("path") else {}
    if adapter == "snowflake" and connection.get("account"):
        return {"account": snowflake_account(str(connection["account"]))}
    if adapter in ("sqlserver", "fabric"):
        return {k: str(connection[s]) for k, s in (("host", "server"), ("port", "port")) if connection.get(s)}
    if adapter == "dremio":
        return {k: str(connection[s]) for k, s in (("host", "software_host"), ("port", "port")) if connection.get(s)}
    if adapter == "athena":
        return {"region": str(connection["region_name"])} if connection.get("region_name") else {}
    if adapter == "glue":
        return _glue(connection)
    found = {k: str(connection[k]) for k in ("host", "port") if connection.get(k) not in (None, "")}
    if adapter == "spark" and "port" not in found and connection.get("method") in SPARK_PORTS:
        found["port"] = SPARK_PORTS[connection["method"]]  # dbt-ol's, by the connection method
    return found


# the port openlineage-dbt names a Spark connection by when its profile gives none
SPARK_PORTS = {"thrift": "10001", "http": "443", "odbc": "443"}


def _glue(connection: Mapping[str, Any]) -> dict[str, Any]:
    """A Glue profile's region and account, as openlineage-dbt names them: the account its
    ``account_id``, else the one of its ``role_arn`` (``arn:aws:iam::ACCOUNT:role/...``)."""
    region, account, role = connection.get("region"), connection.get("account_id"), connection.get("role_arn")
    if not account and isinstance(role, str) and len(role.split(":")) > 4:
        account = role.split(":")[4]
    return {"region": str(region), "account": str(account)} if region and account else {}


def _relation_id(node: Mapping[str, Any], table: str, where: str) -> str:
    parts = [p for p in (node.get("database"), node.get("schema"), table) if p]
    try:
        return check_id(".".join(str(p) for p in parts))
    except ValidationError as exc:
        raise ArtifactError(f"{where}: relation {'.'.join(map(str, parts))!r} gives no valid asset id: {exc}") from None


class _Project:
    def __init__(self, artifacts: DbtArtifacts) -> None:
        self.artifacts = artifacts
        self.nodes: Mapping[str, Any] = artifacts.manifest["nodes"]
        self.sources: Mapping[str, Any] = artifacts.manifest["sources"]
        self.base_metadata = {
            "system": artifacts.adapter_type,
            **connection_metadata(artifacts.adapter_type, artifacts.connection),
        }
        self.where = str(artifacts.manifest_path)
        self.notes: dict[str, None] = {}  # said once each, in order
        self.columns = ProjectColumns(artifacts.adapter_type, artifacts.catalog)

    def is_relation(self, unique_id: str) -> bool:
        node = self.nodes.get(unique_id)
        if node is None or node["resource_type"] not in RELATION_TYPES:
            return False
        return _config(node).get("materialized") != "ephemeral"

    def relation(self, unique_id: str) -> tuple[Mapping[str, Any], str, str]:
        """(node, relation name, kind) of a model, seed, snapshot or source; its columns known."""
        if unique_id in self.sources:
            node = self.sources[unique_id]
            table, kind = node.get("identifier") or node["name"], "source"
        else:
            node = self.nodes[unique_id]
            table, kind = node.get("alias") or node["name"], node["resource_type"]
        self.columns.register(unique_id, node, table)
        return node, table, kind

    def asset_id_or_none(self, unique_id: str) -> str | None:
        """:meth:`asset_id`, or None for a relation whose name gives no valid asset id (a source
        no model reads, such as BigQuery's ``events_*``, stops nothing)."""
        try:
            return self.asset_id(unique_id)
        except ArtifactError:
            return None

    def asset_id(self, unique_id: str) -> str:
        node, table, _kind = self.relation(unique_id)
        return _relation_id(node, table, f"{self.where}: {unique_id}")

    def declaration(
        self,
        unique_id: str,
        *,
        output: bool,
        tests: Mapping[str, list[Assertion]],
        column_lineage: ColumnLineage | None = None,
    ) -> AssetDeclaration:
        node, table, kind = self.relation(unique_id)
        asset_id = _relation_id(node, table, f"{self.where}: {unique_id}")
        metadata: dict[str, Any] = {
            **self.base_metadata,
            "database": node.get("database"),
            "schema": node.get("schema"),
            "name": table,
        }
        if kind != "source":
            metadata["materialized"] = _config(node).get("materialized", kind)
            metadata["dbtUniqueId"] = unique_id
        metadata = {k: v for k, v in metadata.items() if v is not None}
        assertions = tests.get(unique_id)
        if assertions is not None:
            failed = sum(1 for a in assertions if not a.success)
            status = "pass"
            if any(not a.success and a.severity != "warn" for a in assertions):
                status = "fail"
            elif failed:
                status = "warn"
            metadata.update(dbtTestStatus=status, dbtTestsTotal=len(assertions), dbtTestsFailed=failed)
        return AssetDeclaration.create(
            id=asset_id,
            type="Table" if output else None,
            description=node.get("description") or None,
            metadata=metadata,
            columns=self.columns.columns[unique_id],
            assertions=assertions,
            column_lineage=column_lineage,
        )

    def parents(self, unique_id: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """The relations a node reads: models, seeds, snapshots and sources; an ephemeral parent
        is replaced by its own parents."""
        node = self.nodes[unique_id]
        out: list[str] = []
        for parent in _parents_of(node):
            if parent in seen:
                continue
            if parent not in self.sources and parent not in self.nodes:
                self.notes[f"{unique_id} depends on {parent}, which the manifest does not have: not an input"] = None
            elif parent in self.sources:
                out.append(parent)
            elif parent in self.nodes and self.nodes[parent]["resource_type"] in RELATION_TYPES:
                if self.is_relation(parent):
                    out.append(parent)
                else:
                    out += self.parents(parent, seen | {unique_id})
        return list(dict.fromkeys(out))


def _parents_of(node: Mapping[str, Any]) -> list[str]:
    """The unique ids a node depends on (``depends_on.nodes``; either may be null)."""
    return list((node.get("depends_on") or {}).get("nodes") or ())


def _config(node: Mapping[str, Any]) -> Mapping[str, Any]:
    config = node.get("config")
    return config if isinstance(config, dict) else {}


def _test_results(project: _Project) -> dict[str, list[Assertion]]:
    """Assertions by the unique id of the relation (or source) each test is attached to."""
    results = {r["unique_id"]: r for r in project.artifacts.run_results["results"]}
    out: dict[str, list[Assertion]] = {}
    for unique_id, result in results.items():
        node = project.nodes.get(unique_id)
        status = result["status"]
        if node is None or node["resource_type"] != "test" or (status != "pass" and status not in _TEST_FAILED):
            continue
        attached = node.get("attached_node") or next(
            (n for n in _parents_of(node) if n in project.sources or n in project.nodes), None
        )
        if attached is None:
            continue
        meta = node.get("test_metadata") or {}
        kwargs = meta.get("kwargs") or {}
        out.setdefault(attached, []).append(
            Assertion(
                assertion=meta.get("name") or node["name"],
                success=status == "pass",
                name=node["name"],
                column=_text(kwargs.get("column_name")) or node.get("column_name") or None,
                severity=_TEST_FAILED.get(status) or str(_config(node).get("severity", "error")).lower(),
            )
        )
    for assertions in out.values():
        assertions.sort(key=lambda a: (a.name or "", a.assertion))
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _timing(result: Mapping[str, Any], fallback: str, where: str) -> tuple[Any, Any]:
    execute = next((t for t in result.get("timing") or [] if t.get("name") == "execute"), None)
    start = (execute or {}).get("started_at") or fallback
    end = (execute or {}).get("completed_at") or start
    try:
        return parse_time(start, where, assume_utc=True), parse_time(end, where, assume_utc=True)
    except ValidationError as exc:  # it says where already
        raise ArtifactError(str(exc)) from None


def dbt_task_runs(artifacts: DbtArtifacts, *, namespace: str = "dbt", flow_id: str | None = None) -> DbtIngest:
    """The catalog records of one dbt invocation."""
    project = _Project(artifacts)
    metadata = artifacts.run_results["metadata"]
    invocation = metadata["invocation_id"]
    generated = metadata["generated_at"]
    tests = _test_results(project)
    checked: list[str] = []
    if artifacts.sources is not None:
        for unique_id, checks in freshness_checks(artifacts.sources, artifacts.manifest).items():
            checked.append(project.asset_id(unique_id))
            tests.setdefault(unique_id, []).extend(checks)
    flow = flow_id or artifacts.project_name
    runs: list[TaskRun] = []
    ran: set[str] = set()
    skipped: list[str] = []
    where = str(artifacts.run_results_path)
    results = artifacts.run_results["results"]
    # dbt 1.8's unit tests are results too, of nodes the manifest keeps apart (unit_tests), and so
    # are exposures, saved queries, metrics and semantic models (no-op results of a build): known,
    # recorded as no run
    known = set(project.nodes.keys() | project.sources.keys())
    for section in ("unit_tests", "exposures", "saved_queries", "metrics", "semantic_models"):
        kept = artifacts.manifest.get(section)
        known |= kept.keys() if isinstance(kept, dict) else set()
    unknown = [r["unique_id"] for r in results if r["unique_id"] not in known]
    if unknown and len(unknown) == len(results):
        raise ArtifactError(
            f"{where}: none of its {len(results)} result(s) names a node of {project.where} (first: {unknown[0]}): "
            "the run results of another project, or of another manifest"
        )
    if unknown:
        project.notes[
            f"{len(unknown)} result(s) name nodes the manifest does not have (first: {unknown[0]}): left out"
        ] = None
    for index, result in enumerate(results):
        unique_id = result["unique_id"]
        if not project.is_relation(unique_id):
            skipped.append(unique_id)
            continue
        node = project.nodes[unique_id]
        state = _STATE.get(result["status"])
        if state is None:
            raise ArtifactError(f"{where}: results[{index}] ({unique_id}) has unknown status {result['status']!r}")
        started, ended = _timing(result, generated, f"{where}: results[{index}]")
        # the job is <flow>.<resource type>.<name>; the package stays in it for a node of another package
        parts = unique_id.split(".", 2)
        if len(parts) != 3:
            raise ArtifactError(
                f"{where}: results[{index}]: {unique_id!r} is no unique id of dbt's (type.package.name)"
            )
        kind, package, name = parts
        task_id = f"{kind}.{name}" if package == artifacts.project_name else unique_id

        key = TaskRunKey.create(namespace, flow, task_id, invocation, unique_id)
        parents = project.parents(unique_id)
        inputs = tuple(project.declaration(p, output=False, tests={}) for p in parents)
        lineage = None
        sql = node.get("compiled_code")
        if state.writes_outputs and isinstance(sql, str) and sql.strip() and node.get("language", "sql") == "sql":
            project.relation(unique_id)
            by_parent = {p: project.asset_id(p) for p in parents}
            _columns, lineage = project.columns.lineage(unique_id, sql, by_parent)
        output = project.declaration(unique_id, output=True, tests=tests, column_lineage=lineage)
        runs.append(
            TaskRun(
                key=key,
                state=state,
                started_at=started,
                ended_at=ended,
                inputs=inputs,
                outputs=(output,),
                job=JobInfo(
                    integration="DBT",
                    job_type=_JOB_TYPES[node["resource_type"]],
                    sql=node.get("compiled_code") or None,
                    description=node.get("description") or None,
                ),
                origin=Origin.AUTO,
                error=result.get("message") if state is TaskState.FAILED else None,
            )
        )
        ran.add(unique_id)
    updates = tuple(
        project.declaration(unique_id, output=True, tests=tests)
        for unique_id in sorted(tests)
        if unique_id not in ran and (project.is_relation(unique_id) or unique_id in project.sources)
    )
    runs.sort(key=lambda r: (r.started_at, r.key.task_run_id))
    by_source = source_rules(artifacts.manifest, project.where)
    rules = tuple((project.asset_id(unique_id), rule) for unique_id, rule in by_source.items())
    unruled = tuple(
        asset_id
        for unique_id in sorted(project.sources)
        if unique_id not in by_source and (asset_id := project.asset_id_or_none(unique_id)) is not None
    )
    return DbtIngest(
        task_runs=tuple(runs),
        test_updates=updates,
        skipped=tuple(skipped),
        column_notes=tuple(project.columns.notes),
        notes=tuple(project.notes),
        freshness_rules=rules,
        unruled_sources=unruled,
        freshness_checked=tuple(checked),
    )
