"""olbridge: an OpenLineage bridge and exporter for data-asset catalogs.

The names below are imported on first use, so that ``import bridge.<module>`` (the Metaflow
helper inside every step, the CLI) does not pay for the conversion and openlineage-python.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bridge.version import __version__

if TYPE_CHECKING:
    from bridge.catalog import AssetQuery, Catalog, MetadataFilter
    from bridge.errors import BridgeError, ValidationError
    from bridge.mapping import Resolver
    from bridge.model import AssetDeclaration, FailureBehavior, TaskRun, TaskRunKey, TaskState, slugify
    from bridge.openlineage.convert import Converter, ConvertOptions
    from bridge.task_run_api import task_run

_EXPORTS = {
    "AssetDeclaration": "bridge.model",
    "AssetQuery": "bridge.catalog",
    "BridgeError": "bridge.errors",
    "Catalog": "bridge.catalog",
    "ConvertOptions": "bridge.openlineage.convert",
    "Converter": "bridge.openlineage.convert",
    "FailureBehavior": "bridge.model",
    "MetadataFilter": "bridge.catalog",
    "Resolver": "bridge.mapping",
    "TaskRun": "bridge.model",
    "TaskRunKey": "bridge.model",
    "TaskState": "bridge.model",
    "ValidationError": "bridge.errors",
    "slugify": "bridge.model",
    "task_run": "bridge.task_run_api",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
