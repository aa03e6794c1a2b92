"""Assets: the catalog's record of one, how a task run declares one, what a run wrote to one, its
data-quality tests, and a change made to one outside any run."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from bridge.errors import ValidationError
from bridge.model.asset_types import normalize_type
from bridge.model.column_lineage import ColumnLineage
from bridge.model.columns import Column
from bridge.model.ids import check_id, check_namespace
from bridge.model.metadata import check_metadata, check_text
from bridge.model.times import format_time


class Origin(enum.StrEnum):
    DECLARED = "declared"  # declared by a task run or set by a user
    AUTO = "auto"  # emitted by an adapter (dbt's enableAuto)
    EXTERNAL = "external"  # a placeholder: read by a flow, produced by none of ours


@attrs.frozen
class Assertion:
    """A data-quality test on an asset (a dbt test), as its last run reported it."""

    assertion: str
    success: bool
    name: str | None = None
    column: str | None = None
    severity: str | None = None


@attrs.frozen
class Identifier:
    """Another name of a dataset, as a producer's ``symlinks`` facet gives it."""

    namespace: str
    name: str
    type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "type": self.type}


@attrs.frozen
class Asset:
    id: str
    type: str
    namespace: str | None
    origin: Origin
    created_at: datetime
    updated_at: datetime
    display_name: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    deleted_at: datetime | None = None
    columns: tuple[Column, ...] = ()
    assertions: tuple[Assertion, ...] = ()
    # what producers said of an External placeholder, read beside it (never part of its record):
    # the latest of each dataset facet they sent, and every symlink identifier they gave
    received_facets: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    identifiers: tuple[Identifier, ...] = attrs.field(default=(), eq=False)

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def to_json(self) -> dict[str, Any]:
        """The record as ``assets list --json`` prints it."""
        out: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "namespace": self.namespace,
            "displayName": self.display_name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "origin": self.origin.value,
            "created": format_time(self.created_at),
            "updated": format_time(self.updated_at),
            "deleted": format_time(self.deleted_at) if self.deleted_at else None,
        }
        if self.columns:
            out["columns"] = [attrs.asdict(c) for c in self.columns]
        if self.identifiers:
            out["identifiers"] = [i.to_json() for i in self.identifiers]
        if self.received_facets:
            out["facets"] = dict(self.received_facets)
        return out


@attrs.frozen
class Statistics:
    """What a task run wrote to an output: row count, size in bytes, file count."""

    row_count: int | None = None
    size: int | None = None
    file_count: int | None = None

    def is_empty(self) -> bool:
        return self.row_count is None and self.size is None and self.file_count is None


@attrs.frozen
class AssetDeclaration:
    """An asset as a task run declares it: ``{id, type, namespace, displayName, description, metadata}``.

    For an input only the id is needed. An output without a type keeps the stored asset's type; a
    new output needs one.
    """

    id: str
    type: str | None = None
    namespace: str | None = None
    display_name: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    columns: tuple[Column, ...] = ()
    assertions: tuple[Assertion, ...] | None = None
    statistics: Statistics = Statistics()
    # an output's column lineage (bridge.model.column_lineage): its columns from the run's input columns
    column_lineage: ColumnLineage | None = None

    @classmethod
    def create(
        cls,
        id: str,
        type: str | None = None,
        namespace: str | None = None,
        display_name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        columns: Iterable[Column] = (),
        assertions: Iterable[Assertion] | None = None,
        statistics: Statistics | None = None,
        column_lineage: ColumnLineage | None = None,
    ) -> AssetDeclaration:
        """A declaration whose every field is checked (a column lineage is checked against the
        run's inputs when the run is, see :func:`check_task_run`)."""
        columns = tuple(columns)
        names = [c.name for c in columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ValidationError(f"column {duplicate!r} is listed twice", rule="columns.duplicate", where="columns")
        return cls(
            id=check_id(id),
            type=normalize_type(type) if type is not None else None,
            namespace=check_namespace(namespace),
            display_name=check_text(display_name, "displayName", 1000),
            description=check_text(description, "description"),
            metadata=check_metadata(metadata, allow_null=True),
            columns=columns,
            assertions=tuple(assertions) if assertions is not None else None,
            statistics=statistics or Statistics(),
            column_lineage=column_lineage,
        )


# AssetDeclaration fields added after catalogs were first written: left out of a run's record hash
# while unset, so a run recorded before them is still "unchanged" when recorded again.
DECLARATION_LATER_FIELDS = frozenset({"column_lineage"})


@attrs.frozen
class AssetChange:
    """A change to an asset outside any task run (a metadata-only update or a delete), with the
    asset as it was just after the change. It becomes a DatasetEvent."""

    seq: int
    kind: str  # "update" | "delete"
    changed_at: datetime
    asset: Asset
