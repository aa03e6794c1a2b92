"""The asset model: the records olbridge keeps and the rules they keep: ids, types, namespaces,
metadata, times, columns and their lineage, assets, task runs and their usages, declared jobs,
received OpenLineage events, and what an import did.

Every rule of the model lives here, as a validator that raises :class:`ValidationError` naming the
rule and the offending value. Records are frozen attrs classes; times are aware UTC datetimes.
One module a job, lowest first (each imports only those above it in this list):

- :mod:`~bridge.model.ids`: asset ids, namespaces, the parts of a task run's key;
- :mod:`~bridge.model.asset_types`: asset types, Kestra's type names and typed properties;
- :mod:`~bridge.model.metadata`: metadata and free text;
- :mod:`~bridge.model.times`: times, their text form, windows, the clock;
- :mod:`~bridge.model.pickling`: pickling records as tuples (the receiver's processes);
- :mod:`~bridge.model.columns`: an asset's columns;
- :mod:`~bridge.model.column_lineage`: column lineage, its records and rules;
- :mod:`~bridge.model.assets`: assets, declarations, statistics, asset changes;
- :mod:`~bridge.model.runs`: task runs, their states, keys and jobs, stored runs and usages;
- :mod:`~bridge.model.declared`: declared jobs and flows;
- :mod:`~bridge.model.received`: received OpenLineage events, the datasets they name, their
  column edges;
- :mod:`~bridge.model.imports`: the summary of an import;
- :mod:`~bridge.model.urls`: the web addresses olbridge sends to or reads from.

Import any of their names from here: ``from bridge.model import TaskRun, parse_time``.
"""

from __future__ import annotations

from bridge.model.asset_types import (
    EXTERNAL,
    KESTRA_TYPE_ALIASES,
    KESTRA_TYPED_PROPERTIES,
    SHORT_TYPES,
    normalize_type,
)
from bridge.model.assets import (
    DECLARATION_LATER_FIELDS,
    Assertion,
    Asset,
    AssetChange,
    AssetDeclaration,
    Identifier,
    Origin,
    Statistics,
)
from bridge.model.column_lineage import (
    DIRECT,
    DIRECT_SUBTYPES,
    INDIRECT,
    INDIRECT_SUBTYPES,
    SUBTYPE_TYPES,
    ColumnEdge,
    ColumnInput,
    ColumnLineage,
    Transformation,
    check_declared,
    missing_columns,
    parse_column_lineage,
    sorted_transformations,
    transformations_json,
)
from bridge.model.columns import (
    COLUMN_MAX,
    Column,
    column_name,
    parse_columns,
)
from bridge.model.declared import (
    DeclaredFlow,
    DeclaredJob,
    StoredDeclaredJob,
)
from bridge.model.ids import (
    ID_NAME_MAX,
    ID_URI_MAX,
    NAMESPACE_MAX,
    IdForm,
    check_id,
    check_key_part,
    check_namespace,
    id_form,
    is_uri_id,
    slugify,
)
from bridge.model.imports import (
    ImportSummary,
    Refusal,
)
from bridge.model.metadata import (
    METADATA_KEY_MAX,
    check_fields,
    check_metadata,
    check_text,
    merge_metadata,
    metadata_text,
)
from bridge.model.pickling import (
    pickles_as_tuple,
)
from bridge.model.received import (
    TERMINAL,
    DatasetName,
    IncomingEvent,
    ReceivedColumnEdge,
    SeenDataset,
)
from bridge.model.runs import (
    JOB_INFO_LATER_FIELDS,
    FailureBehavior,
    JobInfo,
    StoredTaskRun,
    StoredUsage,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_task_run,
    task_run_problems,
)
from bridge.model.times import (
    epoch_text,
    format_time,
    parse_time,
    parse_window,
    utcnow,
)

__all__ = [
    "COLUMN_MAX",
    "DECLARATION_LATER_FIELDS",
    "DIRECT",
    "DIRECT_SUBTYPES",
    "EXTERNAL",
    "ID_NAME_MAX",
    "ID_URI_MAX",
    "INDIRECT",
    "INDIRECT_SUBTYPES",
    "JOB_INFO_LATER_FIELDS",
    "KESTRA_TYPED_PROPERTIES",
    "KESTRA_TYPE_ALIASES",
    "METADATA_KEY_MAX",
    "NAMESPACE_MAX",
    "SHORT_TYPES",
    "SUBTYPE_TYPES",
    "TERMINAL",
    "Assertion",
    "Asset",
    "AssetChange",
    "AssetDeclaration",
    "Column",
    "ColumnEdge",
    "ColumnInput",
    "ColumnLineage",
    "DatasetName",
    "DeclaredFlow",
    "DeclaredJob",
    "FailureBehavior",
    "IdForm",
    "Identifier",
    "ImportSummary",
    "IncomingEvent",
    "JobInfo",
    "Origin",
    "ReceivedColumnEdge",
    "Refusal",
    "SeenDataset",
    "Statistics",
    "StoredDeclaredJob",
    "StoredTaskRun",
    "StoredUsage",
    "TaskRun",
    "TaskRunKey",
    "TaskState",
    "Transformation",
    "check_declared",
    "check_fields",
    "check_id",
    "check_key_part",
    "check_metadata",
    "check_namespace",
    "check_task_run",
    "check_text",
    "column_name",
    "epoch_text",
    "format_time",
    "id_form",
    "is_uri_id",
    "merge_metadata",
    "metadata_text",
    "missing_columns",
    "normalize_type",
    "parse_column_lineage",
    "parse_columns",
    "parse_time",
    "parse_window",
    "pickles_as_tuple",
    "slugify",
    "sorted_transformations",
    "task_run_problems",
    "transformations_json",
    "utcnow",
]
