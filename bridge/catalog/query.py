"""Asset queries: metadata filters (Kestra's ``metadataQuery``) and purge criteria."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.errors import ValidationError
from bridge.model import check_id, check_namespace, metadata_text, normalize_type


class Operator(enum.StrEnum):
    EQUAL_TO = "EQUAL_TO"
    NOT_EQUAL_TO = "NOT_EQUAL_TO"
    IS_ONE_OF = "IS_ONE_OF"
    IS_NOT_ONE_OF = "IS_NOT_ONE_OF"
    CONTAINS = "CONTAINS"


@attrs.frozen
class MetadataFilter:
    """``{field, type, value}``: IS_ONE_OF and IS_NOT_ONE_OF take a list (or a comma-separated string)."""

    field: str
    operator: Operator
    values: tuple[str, ...]

    @classmethod
    def create(cls, field: object, operator: object, value: object, where: str = "metadataQuery") -> MetadataFilter:
        if not isinstance(field, str) or not field:
            raise ValidationError("a metadata filter needs a field name", rule="query.field", value=field, where=where)
        try:
            op = Operator(str(operator).upper())
        except ValueError:
            raise ValidationError(
                f"unknown filter type {operator!r}; one of {', '.join(o.value for o in Operator)}",
                rule="query.type",
                value=operator,
                where=where,
            ) from None
        if isinstance(value, list | tuple):
            values = tuple(metadata_text(v) for v in value)
        elif value is None:
            raise ValidationError("a metadata filter needs a value", rule="query.value", value=value, where=where)
        elif op in (Operator.IS_ONE_OF, Operator.IS_NOT_ONE_OF) and isinstance(value, str):
            values = tuple(v.strip() for v in value.split(","))
        else:
            values = (metadata_text(value),)
        if op not in (Operator.IS_ONE_OF, Operator.IS_NOT_ONE_OF) and len(values) != 1:
            raise ValidationError(f"{op.value} takes one value", rule="query.value", value=value, where=where)
        return cls(field, op, values)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        present = self.field in metadata
        text = metadata_text(metadata[self.field]) if present else None
        if self.operator is Operator.EQUAL_TO:
            return text == self.values[0]
        if self.operator is Operator.NOT_EQUAL_TO:
            return text != self.values[0]
        if self.operator is Operator.IS_ONE_OF:
            return text in self.values
        if self.operator is Operator.IS_NOT_ONE_OF:
            return text not in self.values
        return text is not None and self.values[0] in text


@attrs.frozen
class AssetQuery:
    """Which assets to list. A namespace filter never matches a Global asset."""

    types: tuple[str, ...] = ()
    namespace: str | None = None
    metadata: tuple[MetadataFilter, ...] = ()
    ids: tuple[str, ...] = ()
    include_deleted: bool = False
    updated_before: datetime | None = None

    @classmethod
    def create(
        cls,
        *,
        types: Iterable[str] = (),
        namespace: str | None = None,
        metadata: Sequence[MetadataFilter] = (),
        ids: Iterable[str] = (),
        include_deleted: bool = False,
        updated_before: datetime | None = None,
    ) -> AssetQuery:
        return cls(
            types=tuple(dict.fromkeys(normalize_type(t) for t in types)),
            namespace=check_namespace(namespace),
            metadata=tuple(metadata),
            ids=tuple(dict.fromkeys(check_id(i) for i in ids)),
            include_deleted=include_deleted,
            updated_before=updated_before,
        )

    @property
    def is_empty(self) -> bool:
        return not (self.types or self.namespace or self.metadata or self.ids or self.updated_before)


@attrs.frozen
class PurgeResult:
    assets: int
    usages: int
    lineage: int
    ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"assets": self.assets, "usages": self.usages, "lineage": self.lineage, "ids": list(self.ids)}
