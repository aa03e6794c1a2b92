"""The same conversion built with openlineage-python's own classes and ``Serde``.

olbridge emits plain dicts (:mod:`bridge.openlineage.convert`), which is much faster. This module
is the yardstick: a test (tests/test_convert.py) checks that both give the same events, and the
conversion benchmark (benchmarks/conversion.py) compares their speed. It serves only them, so it
lives here rather than in the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.facet_v2 import (
    DatasetFacet,
    RunFacet,
    data_quality_assertions_dataset,
    dataset_type_dataset,
    datasource_dataset,
    documentation_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    ownership_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
    symlinks_dataset,
    tags_dataset,
)
from openlineage.client.serde import Serde

from bridge.model import EXTERNAL, Asset, StoredTaskRun, format_time
from bridge.openlineage.convert import Converter, execution_run_id, task_run_id
from bridge.openlineage.facets import (
    ASSET_FACET_KEY,
    ASSET_FACET_URL,
    DATASET_TYPES,
    SYMLINK_TABLE,
    TASK_RUN_FACET_KEY,
    TASK_RUN_FACET_URL,
)
from bridge.version import __version__


@attr.define
class OlbridgeAssetDatasetFacet(DatasetFacet):
    id: str = attr.field()
    type: str = attr.field()
    metadata: dict[str, Any] = attr.field()
    origin: str = attr.field()
    global_: bool = attr.field(default=True)
    namespace: str | None = attr.field(default=None)
    displayName: str | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return ASSET_FACET_URL


@attr.define
class OlbridgeTaskRunRunFacet(RunFacet):
    state: str = attr.field()

    @staticmethod
    def _get_schema() -> str:
        return TASK_RUN_FACET_URL


def _dataset_facets(converter: Converter, asset: Asset) -> tuple[str, str, dict[str, Any]]:
    producer = converter.options.producer
    named = converter.resolver.dataset_for(asset.id, asset.type, asset.metadata)
    meta = asset.metadata
    if asset.type == EXTERNAL:  # a placeholder: the type its producer gave, if any
        kind = str(meta["datasetType"]) if meta.get("datasetType") else None
    elif meta.get("materialized") == "view":
        kind = "VIEW"
    else:
        kind = DATASET_TYPES.get(asset.type, asset.type.rsplit(".", 1)[-1].upper())
    facets: dict[str, Any] = {}
    if kind is not None:
        facets["datasetType"] = dataset_type_dataset.DatasetTypeDatasetFacet(datasetType=kind, producer=producer)
    facets["dataSource"] = datasource_dataset.DatasourceDatasetFacet(
        name=named.namespace, uri=named.namespace if "://" in named.namespace else None, producer=producer
    )
    if asset.description:
        facets["documentation"] = documentation_dataset.DocumentationDatasetFacet(
            description=asset.description, producer=producer
        )
    if meta.get("owner"):
        owners = [o.strip() for o in str(meta["owner"]).split(",") if o.strip()]
        facets["ownership"] = ownership_dataset.OwnershipDatasetFacet(
            owners=[ownership_dataset.Owner(name=o) for o in owners], producer=producer
        )
    if asset.columns:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type, description=c.description)
                for c in asset.columns
            ],
            producer=producer,
        )
    if named.name != asset.id:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(
                    namespace=converter.resolver.default_namespace, name=asset.id, type=kind or SYMLINK_TABLE
                )
            ],
            producer=producer,
        )
    if meta.get("tags"):
        items = []
        for raw in str(meta["tags"]).split(","):
            if raw.strip():
                key, sep, value = raw.strip().partition(":")
                items.append(
                    tags_dataset.TagsDatasetFacetFields(key=key, value=value if sep else "true", source="olbridge")
                )
        if items:
            facets["tags"] = tags_dataset.TagsDatasetFacet(tags=items, producer=producer)
    if asset.assertions:
        facets["dataQualityAssertions"] = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[
                data_quality_assertions_dataset.Assertion(
                    assertion=a.assertion, success=a.success, column=a.column, severity=a.severity, name=a.name
                )
                for a in asset.assertions
            ],
            producer=producer,
        )
    facets[ASSET_FACET_KEY] = OlbridgeAssetDatasetFacet(
        id=asset.id,
        type=asset.type,
        metadata=dict(meta),
        origin=asset.origin.value,
        global_=asset.namespace is None,
        namespace=asset.namespace,
        displayName=asset.display_name,
        producer=producer,
    )
    return named.namespace, named.name, facets


def task_run_events(converter: Converter, run: StoredTaskRun, assets: Mapping[str, Asset]) -> list[dict[str, Any]]:
    """What :meth:`Converter.task_run_events` gives, built with openlineage-python and ``Serde``."""
    producer = converter.options.producer
    key = run.key
    namespace = converter.job_namespace(key)
    run_id = task_run_id(key, run.started_at)
    parent_id = execution_run_id(key, run.execution_started_at)
    ref_job = parent_run.Job(namespace=namespace, name=key.flow_id)
    run_facets: dict[str, Any] = {
        "parent": parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent_id),
            job=ref_job,
            root=parent_run.Root(
                run=parent_run.RootRun(runId=parent_id), job=parent_run.RootJob(namespace=namespace, name=key.flow_id)
            ),
            producer=producer,
        ),
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=__version__, name="olbridge", openlineageAdapterVersion=__version__, producer=producer
        ),
    }
    if run.ended_at is not None and run.state.value in ("WARNING", "RETRIED", "KILLED", "CANCELLED", "SKIPPED"):
        run_facets[TASK_RUN_FACET_KEY] = OlbridgeTaskRunRunFacet(state=run.state.value, producer=producer)
    job_facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration=run.job.integration, jobType=run.job.job_type, producer=producer
        )
    }
    if run.job.sql:
        job_facets["sql"] = sql_job.SQLJobFacet(query=run.job.sql, producer=producer)
    if run.job.description:
        job_facets["documentation"] = documentation_job.DocumentationJobFacet(
            description=run.job.description, producer=producer
        )
    inputs, outputs = [], []
    for usage in run.usages:
        asset = assets[usage.asset_id]
        ns, name, facets = _dataset_facets(converter, asset)
        if usage.direction == "input":
            inputs.append(InputDataset(namespace=ns, name=name, facets=facets))
        else:
            out_facets: dict[str, Any] | None = None
            if not usage.statistics.is_empty():
                s = usage.statistics
                out_facets = {
                    "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                        rowCount=s.row_count, size=s.size, fileCount=s.file_count, producer=producer
                    )
                }
            outputs.append(OutputDataset(namespace=ns, name=name, facets=facets, outputFacets=out_facets))
    job = Job(namespace=namespace, name=f"{key.flow_id}.{key.task_id}", facets=job_facets)
    events = [
        RunEvent(
            eventType="START",  # type: ignore[arg-type]
            eventTime=format_time(run.started_at),
            run=Run(runId=run_id, facets=run_facets),
            job=job,
            inputs=inputs,
            outputs=outputs,
            producer=producer,
        )
    ]
    end_type = run.state.run_event_type
    if run.ended_at is not None and end_type != "START":
        end_facets = dict(run_facets)
        if run.error and end_type == "FAIL":
            end_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=run.error, programmingLanguage="unknown", producer=producer
            )
        events.append(
            RunEvent(
                eventType=end_type,  # type: ignore[arg-type]
                eventTime=format_time(run.ended_at),
                run=Run(runId=run_id, facets=end_facets),
                job=job,
                inputs=inputs,
                outputs=outputs,
                producer=producer,
            )
        )
    return [_plain(Serde.to_dict(e)) for e in events]


def _plain(value: Any) -> Any:
    """Serde output with the custom facet's ``global_`` attribute under its JSON name."""
    if isinstance(value, dict):
        return {("global" if k == "global_" else k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
