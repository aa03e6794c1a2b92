"""The asset catalog: one API, on SQLite (a file, embedded) or PostgreSQL (a shared database)."""

from bridge.catalog.columns import ColumnLineageEdge, ColumnLineageGraph, StoredColumnEdge
from bridge.catalog.positions import Position
from bridge.catalog.query import (
    AssetQuery,
    AssetUsages,
    ExternalSource,
    ExternalUsage,
    HistoryFilter,
    MetadataFilter,
    Operator,
    PurgeResult,
    RunUsage,
)
from bridge.catalog.store import (
    Catalog,
    CatalogSource,
    DeclareResult,
    IngestResult,
    LineageEdge,
    LineageGraph,
    RecordResult,
    opened,
)

__all__ = [
    "AssetQuery",
    "AssetUsages",
    "Catalog",
    "CatalogSource",
    "ColumnLineageEdge",
    "ColumnLineageGraph",
    "DeclareResult",
    "ExternalSource",
    "ExternalUsage",
    "HistoryFilter",
    "IngestResult",
    "LineageEdge",
    "LineageGraph",
    "MetadataFilter",
    "Operator",
    "Position",
    "PurgeResult",
    "RecordResult",
    "RunUsage",
    "StoredColumnEdge",
    "opened",
]
