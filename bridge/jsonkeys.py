"""The one style of keys in olbridge's JSON output: camelCase, as OpenLineage and Kestra name
their fields (``taskRunId``, ``eventTime``). Records whose attributes are snake_case in Python
(``oldest_pending``) give their JSON through :func:`camel_keys`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")


def camel(name: str) -> str:
    """``oldest_pending`` -> ``oldestPending``; a name without ``_`` is returned as it is."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(record: Mapping[str, V]) -> dict[str, V]:
    """The record with its keys in camelCase (the top level: nested values are left as they are)."""
    return {camel(key): value for key, value in record.items()}
