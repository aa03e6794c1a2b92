"""An asset's descriptive fields: its metadata (a flat map of scalars) and free text (display
names, descriptions)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from bridge.errors import ValidationError

METADATA_KEY_MAX = 255


def check_metadata(value: object, where: str = "metadata", *, allow_null: bool = False) -> dict[str, Any]:
    """A flat map of string keys to scalars. With ``allow_null`` (updates), null means 'remove the key'."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"metadata must be an object of keys to scalar values, not {type(value).__name__}",
            rule="metadata.type",
            value=value,
            where=where,
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > METADATA_KEY_MAX or "\x00" in key:
            raise ValidationError(
                f"metadata keys are non-empty strings of at most {METADATA_KEY_MAX} characters: {key!r}",
                rule="metadata.key",
                value=key,
                where=where,
            )
        if item is None:
            if not allow_null:
                raise ValidationError(
                    f"metadata key {key!r} is null; null only removes a key in an update",
                    rule="metadata.null",
                    value=item,
                    where=f"{where}.{key}",
                )
        elif isinstance(item, Mapping | list | tuple | set):
            raise ValidationError(
                f"metadata is flat: key {key!r} holds a {type(item).__name__}; keep values scalar "
                "(environment: prod, not labels: {environment: prod})",
                rule="metadata.nested",
                value=item,
                where=f"{where}.{key}",
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValidationError(
                f"metadata key {key!r} holds {item}, which JSON cannot carry",
                rule="metadata.number",
                value=item,
                where=f"{where}.{key}",
            )
        elif isinstance(item, str) and "\x00" in item:
            raise ValidationError(
                f"metadata key {key!r} holds a NUL character", rule="metadata.nul", value=item, where=f"{where}.{key}"
            )
        elif not isinstance(item, str | int | float | bool):
            raise ValidationError(
                f"metadata key {key!r} holds a {type(item).__name__}; values are strings, numbers or booleans",
                rule="metadata.scalar",
                value=item,
                where=f"{where}.{key}",
            )
        out[key] = item
    return out


def metadata_text(value: Any) -> str:
    """How a metadata value reads in filters and name templates: as a string (true/false for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def merge_metadata(stored: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge an update over stored metadata; a key sent with null is removed."""
    merged = dict(stored)
    for key, value in update.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return dict(sorted(merged.items()))


def check_fields(value: Mapping[str, Any], allowed: Collection[str], rule: str, where: str) -> None:
    """A ValidationError under ``rule`` naming the fields of an object that are not ``allowed``."""
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise ValidationError(
            f"unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}", rule=rule, where=where
        )


def check_text(value: object, where: str, max_length: int = 100_000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("must be a string", rule="text.type", value=value, where=where)
    if len(value) > max_length:
        raise ValidationError(f"has at most {max_length} characters", rule="text.length", value=value, where=where)
    if "\x00" in value:
        raise ValidationError("may not contain a NUL character", rule="text.nul", value=value, where=where)
    return value
