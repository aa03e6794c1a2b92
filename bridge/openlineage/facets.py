"""Facet builders: plain dicts with ``_producer`` and ``_schemaURL``, ready for JSON.

The ``_schemaURL`` of each standard facet is the versioned URL of the OpenLineage 2-0-2 facet
schemas (the same URLs openlineage-python's classes carry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bridge.model import EXTERNAL, Assertion, Column, Statistics, TaskState

SPEC = "https://openlineage.io/spec"
RUN_EVENT = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent"
DATASET_EVENT = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
JOB_EVENT = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/JobEvent"


def _facet_url(version: str, name: str) -> str:
    return f"{SPEC}/facets/{version}/{name}.json#/$defs/{name}"


SCHEMA_URLS = {
    "documentation": _facet_url("1-1-0", "DocumentationDatasetFacet"),
    "ownership": _facet_url("1-0-1", "OwnershipDatasetFacet"),
    "datasetType": _facet_url("1-0-1", "DatasetTypeDatasetFacet"),
    "dataSource": _facet_url("1-0-1", "DatasourceDatasetFacet"),
    "schema": _facet_url("1-2-0", "SchemaDatasetFacet"),
    "symlinks": _facet_url("1-0-1", "SymlinksDatasetFacet"),
    "tags": _facet_url("1-0-0", "TagsDatasetFacet"),
    "lifecycleStateChange": _facet_url("1-0-1", "LifecycleStateChangeDatasetFacet"),
    "dataQualityAssertions": _facet_url("1-1-0", "DataQualityAssertionsDatasetFacet"),
    "outputStatistics": _facet_url("1-0-2", "OutputStatisticsOutputDatasetFacet"),
    "columnLineage": _facet_url("1-2-0", "ColumnLineageDatasetFacet"),
    "parent": _facet_url("1-2-0", "ParentRunFacet"),
    "processing_engine": _facet_url("1-1-1", "ProcessingEngineRunFacet"),
    "errorMessage": _facet_url("1-0-1", "ErrorMessageRunFacet"),
    "jobType": _facet_url("2-0-4", "JobTypeJobFacet"),
    "sql": _facet_url("1-1-0", "SQLJobFacet"),
    "jobDocumentation": _facet_url("1-1-0", "DocumentationJobFacet"),
    "jobTags": _facet_url("1-0-0", "TagsJobFacet"),
}

# The custom facet that carries the catalog record; its schema ships in bridge/schemas/.
ASSET_FACET_KEY = "olbridge_asset"
ASSET_FACET_VERSION = "1-0-0"
ASSET_FACET_ID = f"https://olbridge.github.io/spec/facets/{ASSET_FACET_VERSION}/OlbridgeAssetDatasetFacet.json"
ASSET_FACET_URL = f"{ASSET_FACET_ID}#/$defs/OlbridgeAssetDatasetFacet"

# The custom run facet that says the state olbridge recorded where the event's type cannot (KILLED,
# CANCELLED and SKIPPED all end in ABORT, RETRIED in FAIL, WARNING in COMPLETE); its schema ships
# in bridge/schemas/. A receiving olbridge reads one thing of it: a SKIPPED run's outputs, which
# its events name so that Marquez keeps the job's edges to them, were not written, nor failed.
TASK_RUN_FACET_KEY = "olbridge_taskRun"
TASK_RUN_FACET_VERSION = "1-0-0"
TASK_RUN_FACET_ID = f"https://olbridge.github.io/spec/facets/{TASK_RUN_FACET_VERSION}/OlbridgeTaskRunRunFacet.json"
TASK_RUN_FACET_URL = f"{TASK_RUN_FACET_ID}#/$defs/OlbridgeTaskRunRunFacet"

# asset type -> datasetType. Not External: olbridge's word for a dataset it knows only by name,
# which says nothing of what the dataset is (the spec's DatasetTypeDatasetFacet gives TABLE, VIEW,
# FILE, TOPIC, STREAM, MODEL, JOB_OUTPUT as types, and EXTERNAL only as a subType, of a table
# stored outside its database): a placeholder's type is the one its producer gave, or none.
DATASET_TYPES = {
    "Table": "TABLE",
    "File": "FILE",
    "Dataset": "DATASET",
    "VM": "VM",
    "Model": "MODEL",
}
# The type of a symlink identifier where no dataset type says it (a placeholder no producer typed):
# the one OpenLineage's integrations give an identifier that names a dataset in a catalog (TABLE,
# against LOCATION, a path in storage; openlineage-java's DatasetIdentifier.SymlinkType), as
# olbridge's identifier does, and as Spark and dbt-ol type a metastore's or Glue's name.
SYMLINK_TABLE = "TABLE"


def facet(producer: str, key: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": SCHEMA_URLS[key], **fields}


def documentation(producer: str, description: str) -> dict[str, Any]:
    return facet(producer, "documentation", description=description)


def ownership(producer: str, owners: Sequence[str]) -> dict[str, Any]:
    return facet(producer, "ownership", owners=[{"name": o} for o in owners])


def dataset_kind(asset_type: str, materialized: str | None, received: str | None) -> str | None:
    """The ``datasetType`` of an asset: ``VIEW`` for a dbt view, else its type's; an External
    placeholder's is the one its producer gave (``received``), or None (no facet)."""
    if asset_type == EXTERNAL:
        return received
    if materialized == "view":
        return "VIEW"
    return DATASET_TYPES.get(asset_type) or asset_type.rsplit(".", 1)[-1].upper()


def dataset_type(producer: str, kind: str) -> dict[str, Any]:
    return facet(producer, "datasetType", datasetType=kind)


def data_source(producer: str, namespace: str) -> dict[str, Any]:
    if "://" in namespace:
        return facet(producer, "dataSource", name=namespace, uri=namespace)
    return facet(producer, "dataSource", name=namespace)


def _with_set(item: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``item`` and, after it, each of ``optional`` that is set (empty and None ones left out)."""
    return item | {key: value for key, value in optional.items() if value}


def schema(producer: str, columns: Sequence[Column]) -> dict[str, Any]:
    fields = [_with_set({"name": c.name}, type=c.type, description=c.description) for c in columns]
    return facet(producer, "schema", fields=fields)


def symlinks(producer: str, namespace: str, name: str, kind: str) -> dict[str, Any]:
    return facet(producer, "symlinks", identifiers=[{"namespace": namespace, "name": name, "type": kind}])


def symlinks_of(producer: str, identifiers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return facet(producer, "symlinks", identifiers=list(identifiers))


def tags(producer: str, text: str) -> dict[str, Any] | None:
    items = []
    for raw in text.split(","):
        tag = raw.strip()
        if not tag:
            continue
        key, sep, value = tag.partition(":")
        items.append({"key": key, "value": value if sep else "true", "source": "olbridge"})
    return facet(producer, "tags", tags=items) if items else None


def lifecycle_drop(producer: str) -> dict[str, Any]:
    return facet(producer, "lifecycleStateChange", lifecycleStateChange="DROP")


def assertions(producer: str, items: Sequence[Assertion]) -> dict[str, Any]:
    out = [
        _with_set({"assertion": a.assertion, "success": a.success}, name=a.name, column=a.column, severity=a.severity)
        for a in items
    ]
    return facet(producer, "dataQualityAssertions", assertions=out)


def output_statistics(producer: str, stats: Statistics) -> dict[str, Any]:
    fields = {}
    if stats.row_count is not None:
        fields["rowCount"] = stats.row_count
    if stats.size is not None:
        fields["size"] = stats.size
    if stats.file_count is not None:
        fields["fileCount"] = stats.file_count
    return facet(producer, "outputStatistics", **fields)


def asset_record(
    producer: str,
    *,
    asset_id: str,
    asset_type: str,
    namespace: str | None,
    display_name: str | None,
    metadata: Mapping[str, Any],
    origin: str,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "_producer": producer,
        "_schemaURL": ASSET_FACET_URL,
        "id": asset_id,
        "type": asset_type,
        "global": namespace is None,
        "metadata": dict(metadata),
        "origin": origin,
    }
    if namespace is not None:
        record["namespace"] = namespace
    if display_name is not None:
        record["displayName"] = display_name
    return record


def parent(producer: str, run_id: str, namespace: str, name: str) -> dict[str, Any]:
    ref = {"run": {"runId": run_id}, "job": {"namespace": namespace, "name": name}}
    return facet(
        producer, "parent", **ref, root={"run": {"runId": run_id}, "job": {"namespace": namespace, "name": name}}
    )


def processing_engine(producer: str, version: str) -> dict[str, Any]:
    return facet(producer, "processing_engine", version=version, name="olbridge", openlineageAdapterVersion=version)


def task_run(producer: str, state: str) -> dict[str, Any]:
    """The ``olbridge_taskRun`` facet: the state olbridge recorded of the run."""
    return {"_producer": producer, "_schemaURL": TASK_RUN_FACET_URL, "state": state}


def skipped(facets: Any) -> bool:
    """Whether a run's facets say olbridge recorded it SKIPPED (its outputs named, not written)."""
    found = facets.get(TASK_RUN_FACET_KEY) if isinstance(facets, dict) else None
    return isinstance(found, dict) and found.get("state") == TaskState.SKIPPED.value


def error_message(producer: str, message: str) -> dict[str, Any]:
    return facet(producer, "errorMessage", message=message, programmingLanguage="unknown")


def job_type(producer: str, integration: str, kind: str) -> dict[str, Any]:
    return facet(producer, "jobType", processingType="BATCH", integration=integration, jobType=kind)


def sql(producer: str, query: str) -> dict[str, Any]:
    return facet(producer, "sql", query=query)


def job_documentation(producer: str, description: str) -> dict[str, Any]:
    return facet(producer, "jobDocumentation", description=description)


def job_tags(producer: str, tags: Mapping[str, str], source: str) -> dict[str, Any]:
    items = [{"key": key, "value": value, "source": source} for key, value in tags.items()]
    return facet(producer, "jobTags", tags=items)
