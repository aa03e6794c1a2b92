"""``bridge.column_lineage``, where column lineage was before it joined the model: it is
:mod:`bridge.model.column_lineage` (and an asset's columns :mod:`bridge.model.columns`); import it
from :mod:`bridge.model`. Kept for the code that imports it."""

from __future__ import annotations

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
from bridge.model.columns import COLUMN_MAX, parse_columns

__all__ = [
    "COLUMN_MAX",
    "DIRECT",
    "DIRECT_SUBTYPES",
    "INDIRECT",
    "INDIRECT_SUBTYPES",
    "SUBTYPE_TYPES",
    "ColumnEdge",
    "ColumnInput",
    "ColumnLineage",
    "Transformation",
    "check_declared",
    "missing_columns",
    "parse_column_lineage",
    "parse_columns",
    "sorted_transformations",
    "transformations_json",
]
