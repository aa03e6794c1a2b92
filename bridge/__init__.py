"""olbridge: an OpenLineage bridge and exporter for data-asset catalogs."""

from bridge.catalog import AssetQuery, Catalog, MetadataFilter
from bridge.errors import BridgeError, ValidationError
from bridge.mapping import Resolver
from bridge.model import AssetDeclaration, FailureBehavior, TaskRun, TaskRunKey, TaskState, slugify
from bridge.openlineage.convert import Converter, ConvertOptions
from bridge.recording import task_run
from bridge.version import __version__

__all__ = [
    "AssetDeclaration",
    "AssetQuery",
    "BridgeError",
    "Catalog",
    "ConvertOptions",
    "Converter",
    "FailureBehavior",
    "MetadataFilter",
    "Resolver",
    "TaskRun",
    "TaskRunKey",
    "TaskState",
    "ValidationError",
    "__version__",
    "slugify",
    "task_run",
]
