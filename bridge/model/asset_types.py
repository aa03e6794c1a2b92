"""Asset types: the short names, Kestra's class names for them, the properties Kestra's typed
assets carry, and custom dotted types."""

from __future__ import annotations

import re

from bridge.errors import ValidationError

SHORT_TYPES = ("Table", "File", "Dataset", "VM", "Model", "External")
EXTERNAL = "External"
KESTRA_TYPE_ALIASES = {
    "io.kestra.plugin.ee.assets.Table": "Table",
    "io.kestra.plugin.ee.assets.File": "File",
    "io.kestra.plugin.ee.assets.Dataset": "Dataset",
    "io.kestra.plugin.ee.assets.VM": "VM",
    "io.kestra.plugin.ee.assets.Model": "Model",
    "io.kestra.core.models.assets.External": "External",
    "io.kestra.plugin.ee.assets.External": "External",
    # the class names of Kestra's core, which its serialized assets carry
    "io.kestra.core.models.assets.Table": "Table",
    "io.kestra.core.models.assets.File": "File",
    "io.kestra.core.models.assets.Dataset": "Dataset",
    "io.kestra.core.models.assets.VM": "VM",
}
# Kestra's typed assets mirror some metadata keys as properties of their own (a Table's
# ``system: duckdb`` is its ``metadata.system``).
KESTRA_TYPED_PROPERTIES = {
    "Table": ("system", "database", "schema", "name"),
    "File": ("system", "path"),
    "Dataset": ("system", "location", "format"),
    "VM": ("provider", "region", "state"),
}
_CUSTOM_TYPE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_TYPE_MAX = 255


def normalize_type(value: object, where: str = "type") -> str:
    """The canonical type: a short name, a Kestra class name's short name, or a custom dotted type."""
    if not isinstance(value, str) or not value:
        raise ValidationError(
            "an asset type must be a non-empty string", rule="type.required", value=value, where=where
        )
    if value in SHORT_TYPES:
        return value
    if value in KESTRA_TYPE_ALIASES:
        return KESTRA_TYPE_ALIASES[value]
    for short in SHORT_TYPES:
        if value.lower() == short.lower():
            raise ValidationError(
                f"unknown asset type {value!r}; types are case-sensitive, did you mean {short!r}?",
                rule="type.case",
                value=value,
                where=where,
            )
    if len(value) <= _TYPE_MAX and _CUSTOM_TYPE_RE.fullmatch(value):
        return value
    raise ValidationError(
        f"unknown asset type {value!r}: use one of {', '.join(SHORT_TYPES)}, a Kestra class name such as "
        "io.kestra.plugin.ee.assets.Table, or a custom dotted type such as company.infra.Snapshot",
        rule="type.unknown",
        value=value,
        where=where,
    )
