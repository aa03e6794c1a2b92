"""An asset's columns: their record, the rule of a column name, and the columns a task run or a
record declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from bridge.errors import ValidationError
from bridge.model.metadata import check_fields, check_text
from bridge.model.pickling import pickles_as_tuple

COLUMN_MAX = 255  # Marquez keeps field names in VARCHAR(255)


@pickles_as_tuple
@attrs.frozen
class Column:
    name: str
    type: str | None = None
    description: str | None = None


def column_name(value: Any, where: str) -> str:
    """A column's name: a non-empty string of at most :data:`COLUMN_MAX` characters, without NUL."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("a column name is a non-empty string", rule="columnLineage.column", where=where)
    if len(value) > COLUMN_MAX or "\x00" in value:
        raise ValidationError(
            f"a column name has at most {COLUMN_MAX} characters and no NUL", rule="columnLineage.column", where=where
        )
    return value


def parse_columns(value: Any, where: str = "columns") -> tuple[Column, ...]:
    """An asset's declared columns: a list of names or of ``{name, type, description}``."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValidationError(
            "columns are a list of names or of {name, type, description}", rule="columns.type", where=where
        )
    out = []
    for index, item in enumerate(value):
        place = f"{where}[{index}]"
        if isinstance(item, Column):
            out.append(item)
            continue
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping):
            raise ValidationError(
                "a column is a name or an object {name, type, description}", rule="columns.type", where=place
            )
        check_fields(item, {"name", "type", "description"}, "columns.field", place)
        name = column_name(item.get("name"), f"{place}.name")
        kind = check_text(item.get("type"), f"{place}.type", 1000)
        description = check_text(item.get("description"), f"{place}.description")
        out.append(Column(name, kind or None, description or None))
    return tuple(out)
