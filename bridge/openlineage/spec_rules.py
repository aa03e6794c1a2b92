"""The OpenLineage 2-0-2 standard facets, as shapes the validator checks.

A small shape language (string, uri, date-time, uuid, integer, number, boolean, array, object,
enum) describes what each facet requires and what type each field has; the table lists every
standard facet with the schema file and version it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

# --- a small shape language -------------------------------------------------------------------


@attrs.frozen
class Shape:
    kind: str  # any, string, integer, number, boolean, array, object, enum
    fmt: str | None = None
    item: Shape | None = None
    required: tuple[tuple[str, Shape], ...] = ()
    optional: tuple[tuple[str, Shape], ...] = ()
    values: Shape | None = None
    choices: tuple[str, ...] = ()


ANY = Shape("any")
S = Shape("string")
URI = Shape("string", fmt="uri")
DATETIME = Shape("string", fmt="date-time")
UUID = Shape("string", fmt="uuid")
I = Shape("integer")
N = Shape("number")
B = Shape("boolean")


def A(item: Shape) -> Shape:
    return Shape("array", item=item)


def O(
    req: Mapping[str, Shape] | None = None, opt: Mapping[str, Shape] | None = None, values: Shape | None = None
) -> Shape:
    return Shape("object", required=tuple((req or {}).items()), optional=tuple((opt or {}).items()), values=values)


def E(*choices: str) -> Shape:
    return Shape("enum", choices=choices)


@attrs.frozen
class Facet:
    file: str
    version: str
    base: str  # DatasetFacet, InputDatasetFacet, OutputDatasetFacet, RunFacet, JobFacet
    shape: Shape


# a column lineage's input field (ColumnLineageDatasetFacet 1-2-0's InputField), and how it is used
_TRANSFORMATION = O(req={"type": S}, opt={"subtype": S, "description": S, "masking": B})
_INPUT_FIELD = O(req={"namespace": S, "name": S, "field": S}, opt={"transformations": A(_TRANSFORMATION)})

# The standard facets of the spec this release follows (facets/<version>/<file>.json#/$defs/<name>).
STANDARD_FACETS: dict[str, Facet] = {
    "OutputSubsetOutputDatasetFacet": Facet(
        "BaseSubsetDatasetFacet", "1-0-0", "OutputDatasetFacet", O(req={"outputCondition": O()})
    ),
    "InputSubsetInputDatasetFacet": Facet(
        "BaseSubsetDatasetFacet", "1-0-0", "InputDatasetFacet", O(req={"inputCondition": O()})
    ),
    "CatalogDatasetFacet": Facet(
        "CatalogDatasetFacet",
        "1-1-0",
        "DatasetFacet",
        O(
            req={"framework": S, "type": S, "name": S},
            opt={"metadataUri": S, "warehouseUri": S, "source": S, "catalogProperties": O(values=S)},
        ),
    ),
    "ColumnLineageDatasetFacet": Facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        "DatasetFacet",
        O(
            req={
                "fields": O(
                    values=O(
                        req={"inputFields": A(_INPUT_FIELD)},
                        opt={"transformationDescription": S, "transformationType": S},
                    )
                )
            },
            opt={"dataset": A(_INPUT_FIELD)},
        ),
    ),
    "DataQualityAssertionsDatasetFacet": Facet(
        "DataQualityAssertionsDatasetFacet",
        "1-1-0",
        "InputDatasetFacet",
        O(
            req={
                "assertions": A(
                    O(
                        req={"assertion": S, "success": B},
                        opt={
                            "column": S,
                            "severity": S,
                            "name": S,
                            "description": S,
                            "expected": S,
                            "actual": S,
                            "content": S,
                            "contentType": S,
                            "params": O(),
                        },
                    )
                )
            }
        ),
    ),
    "DataQualityMetricsDatasetFacet": Facet(
        "DataQualityMetricsDatasetFacet",
        "1-0-0",
        "DatasetFacet",
        O(
            req={
                "columnMetrics": O(
                    values=O(
                        opt={
                            "nullCount": I,
                            "distinctCount": I,
                            "sum": N,
                            "count": N,
                            "min": N,
                            "max": N,
                            "quantiles": O(),
                        }
                    )
                )
            },
            opt={"rowCount": I, "bytes": I, "fileCount": I, "lastUpdated": DATETIME},
        ),
    ),
    "DataQualityMetricsInputDatasetFacet": Facet(
        "DataQualityMetricsInputDatasetFacet",
        "1-0-3",
        "InputDatasetFacet",
        O(
            req={
                "columnMetrics": O(
                    values=O(
                        opt={
                            "nullCount": I,
                            "distinctCount": I,
                            "sum": N,
                            "count": N,
                            "min": N,
                            "max": N,
                            "quantiles": O(),
                        }
                    )
                )
            },
            opt={"rowCount": I, "bytes": I, "fileCount": I, "lastUpdated": DATETIME},
        ),
    ),
    "DatasetTypeDatasetFacet": Facet(
        "DatasetTypeDatasetFacet", "1-0-1", "DatasetFacet", O(req={"datasetType": S}, opt={"subType": S})
    ),
    "DatasetVersionDatasetFacet": Facet(
        "DatasetVersionDatasetFacet", "1-0-1", "DatasetFacet", O(req={"datasetVersion": S})
    ),
    "DatasourceDatasetFacet": Facet("DatasourceDatasetFacet", "1-0-1", "DatasetFacet", O(opt={"name": S, "uri": URI})),
    "DocumentationDatasetFacet": Facet(
        "DocumentationDatasetFacet", "1-1-0", "DatasetFacet", O(req={"description": S}, opt={"contentType": S})
    ),
    "DocumentationJobFacet": Facet(
        "DocumentationJobFacet", "1-1-0", "JobFacet", O(req={"description": S}, opt={"contentType": S})
    ),
    "EnvironmentVariablesRunFacet": Facet(
        "EnvironmentVariablesRunFacet",
        "1-0-0",
        "RunFacet",
        O(req={"environmentVariables": A(O(req={"name": S, "value": S}))}),
    ),
    "ErrorMessageRunFacet": Facet(
        "ErrorMessageRunFacet",
        "1-0-1",
        "RunFacet",
        O(req={"message": S, "programmingLanguage": S}, opt={"stackTrace": S}),
    ),
    "ExecutionParametersRunFacet": Facet(
        "ExecutionParametersRunFacet",
        "1-0-0",
        "RunFacet",
        O(opt={"parameters": A(O(req={"key": S}, opt={"name": S, "description": S, "value": S}))}),
    ),
    "ExternalQueryRunFacet": Facet(
        "ExternalQueryRunFacet", "1-0-2", "RunFacet", O(req={"externalQueryId": S, "source": S})
    ),
    "ExtractionErrorRunFacet": Facet(
        "ExtractionErrorRunFacet",
        "1-1-2",
        "RunFacet",
        O(
            req={
                "totalTasks": I,
                "failedTasks": I,
                "errors": A(O(req={"errorMessage": S}, opt={"stackTrace": S, "task": S, "taskNumber": I})),
            }
        ),
    ),
    "HierarchyDatasetFacet": Facet(
        "HierarchyDatasetFacet", "1-0-0", "DatasetFacet", O(req={"hierarchy": A(O(req={"type": S, "name": S}))})
    ),
    "InputStatisticsInputDatasetFacet": Facet(
        "InputStatisticsInputDatasetFacet",
        "1-0-0",
        "InputDatasetFacet",
        O(opt={"rowCount": I, "size": I, "fileCount": I}),
    ),
    "JobDependenciesRunFacet": Facet(
        "JobDependenciesRunFacet",
        "1-0-1",
        "RunFacet",
        O(
            opt={
                "upstream": A(
                    O(
                        req={"job": O(req={"namespace": ANY, "name": ANY})},
                        opt={
                            "run": O(req={"runId": ANY}),
                            "dependency_type": S,
                            "sequence_trigger_rule": S,
                            "status_trigger_rule": S,
                        },
                    )
                ),
                "downstream": A(
                    O(
                        req={"job": O(req={"namespace": ANY, "name": ANY})},
                        opt={
                            "run": O(req={"runId": ANY}),
                            "dependency_type": S,
                            "sequence_trigger_rule": S,
                            "status_trigger_rule": S,
                        },
                    )
                ),
                "trigger_rule": S,
            }
        ),
    ),
    "JobTypeJobFacet": Facet(
        "JobTypeJobFacet",
        "2-0-4",
        "JobFacet",
        O(
            req={"processingType": S, "integration": S},
            opt={
                "jobType": S,
                "emissionPattern": O(req={"eventTrigger": S, "eventContentMode": S}, opt={"windowDuration": I}),
            },
        ),
    ),
    "LifecycleStateChangeDatasetFacet": Facet(
        "LifecycleStateChangeDatasetFacet",
        "1-0-1",
        "DatasetFacet",
        O(
            req={"lifecycleStateChange": E("ALTER", "CREATE", "DROP", "OVERWRITE", "RENAME", "TRUNCATE")},
            opt={"previousIdentifier": O(req={"name": S, "namespace": S})},
        ),
    ),
    "LineageDatasetFacet": Facet(
        "LineageFacet",
        "1-0-0",
        "DatasetFacet",
        O(opt={"inputs": A(ANY), "fields": O(values=O(req={"inputs": A(ANY)}))}),
    ),
    "LineageJobFacet": Facet("LineageFacet", "1-0-0", "JobFacet", O(req={"entries": A(ANY)})),
    "NominalTimeRunFacet": Facet(
        "NominalTimeRunFacet",
        "1-0-1",
        "RunFacet",
        O(req={"nominalStartTime": DATETIME}, opt={"nominalEndTime": DATETIME}),
    ),
    "OutputStatisticsOutputDatasetFacet": Facet(
        "OutputStatisticsOutputDatasetFacet",
        "1-0-2",
        "OutputDatasetFacet",
        O(opt={"rowCount": I, "size": I, "fileCount": I}),
    ),
    "OwnershipDatasetFacet": Facet(
        "OwnershipDatasetFacet", "1-0-1", "DatasetFacet", O(opt={"owners": A(O(req={"name": S}, opt={"type": S}))})
    ),
    "OwnershipJobFacet": Facet(
        "OwnershipJobFacet", "1-0-1", "JobFacet", O(opt={"owners": A(O(req={"name": S}, opt={"type": S}))})
    ),
    "ParentRunFacet": Facet(
        "ParentRunFacet",
        "1-2-0",
        "RunFacet",
        O(
            req={
                "run": O(req={"runId": UUID}, opt={"facets": O()}),
                "job": O(req={"namespace": S, "name": S}, opt={"facets": O()}),
            },
            opt={
                "root": O(
                    req={
                        "run": O(req={"runId": UUID}, opt={"facets": O()}),
                        "job": O(req={"namespace": S, "name": S}, opt={"facets": O()}),
                    }
                )
            },
        ),
    ),
    "ProcessingEngineRunFacet": Facet(
        "ProcessingEngineRunFacet",
        "1-1-1",
        "RunFacet",
        O(req={"version": S}, opt={"name": S, "openlineageAdapterVersion": S}),
    ),
    "SQLJobFacet": Facet("SQLJobFacet", "1-1-0", "JobFacet", O(req={"query": S}, opt={"dialect": S})),
    "SchemaDatasetFacet": Facet(
        "SchemaDatasetFacet",
        "1-2-0",
        "DatasetFacet",
        O(
            opt={
                "fields": A(
                    O(req={"name": S}, opt={"type": S, "description": S, "ordinal_position": I, "fields": A(ANY)})
                )
            }
        ),
    ),
    "SourceCodeJobFacet": Facet("SourceCodeJobFacet", "1-0-1", "JobFacet", O(req={"language": S, "sourceCode": S})),
    "SourceCodeLocationJobFacet": Facet(
        "SourceCodeLocationJobFacet",
        "1-1-0",
        "JobFacet",
        O(
            req={"type": S, "url": URI},
            opt={"repoUrl": S, "path": S, "version": S, "tag": S, "branch": S, "pullRequestNumber": S},
        ),
    ),
    "StorageDatasetFacet": Facet(
        "StorageDatasetFacet", "1-0-1", "DatasetFacet", O(req={"storageLayer": S}, opt={"fileFormat": S})
    ),
    "SymlinksDatasetFacet": Facet(
        "SymlinksDatasetFacet",
        "1-0-1",
        "DatasetFacet",
        O(opt={"identifiers": A(O(req={"namespace": S, "name": S, "type": S}))}),
    ),
    "TagsDatasetFacet": Facet(
        "TagsDatasetFacet",
        "1-0-0",
        "DatasetFacet",
        O(opt={"tags": A(O(req={"key": S, "value": S}, opt={"source": S, "field": S}))}),
    ),
    "TagsJobFacet": Facet(
        "TagsJobFacet", "1-0-0", "JobFacet", O(opt={"tags": A(O(req={"key": S, "value": S}, opt={"source": S}))})
    ),
    "TagsRunFacet": Facet(
        "TagsRunFacet", "1-0-0", "RunFacet", O(opt={"tags": A(O(req={"key": S, "value": S}, opt={"source": S}))})
    ),
    "TestRunFacet": Facet(
        "TestRunFacet",
        "1-0-1",
        "RunFacet",
        O(
            req={
                "tests": A(
                    O(
                        req={"name": S, "status": S},
                        opt={
                            "severity": S,
                            "type": S,
                            "description": S,
                            "expected": S,
                            "actual": S,
                            "content": S,
                            "contentType": S,
                            "params": O(),
                        },
                    )
                )
            }
        ),
    ),
}
