"""What Marquez 0.51 binds, and so what it refuses: the classes it reads standard facets into,
its time parser and ``java.net.URI``'s syntax (``reference/marquez.md``, section 2).

Marquez reads a handful of facets into typed classes, whatever version their ``_schemaURL`` names;
a field those classes hold ``@NotNull`` that is missing is a 422 there, and a value the JSON
binding cannot turn into the field's type (an object where it reads text, a time it cannot parse,
a ``_producer`` that is not a URI) fails the request. Everything else in a facet (the JSON
schemas' formats and enums, extra or missing optional fields, numbers where a schema says string,
which the binding turns into text) is stored as it came. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs

# --- java.net.URI -------------------------------------------------------------------------------

_URI_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'();/?:@&=+$,[]%#")
_HEX = frozenset("0123456789abcdefABCDEF")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


@functools.lru_cache(maxsize=4096)  # producers and schema URLs recur in every event
def java_uri(value: str) -> bool:
    """Whether ``new java.net.URI(value)`` parses ``value``: a relative reference (``file``,
    ``bigquery``) does, a space, ``"<>\\^`{|}``, a control character, a ``%`` not followed by two hex
    digits, a second ``#`` or a bad scheme does not. Non-ASCII letters are legal, as in Java."""
    for index, char in enumerate(value):
        if char in _URI_LEGAL:
            if char == "%" and not (value[index + 1 : index + 2] in _HEX and value[index + 2 : index + 3] in _HEX):
                return False
        elif ord(char) < 0x80 or not char.isprintable() or char.isspace():
            return False
    if value.count("#") > 1:
        return False
    head = re.split(r"[/?#]", value, maxsplit=1)[0]
    if ":" in head:
        scheme, rest = value.split(":", 1)
        if not _SCHEME.fullmatch(scheme) or not rest:
            return False
    return True


# --- times --------------------------------------------------------------------------------------

# ISO_LOCAL_DATE_TIME (seconds and fraction optional), case-insensitive, then an optional offset
# read leniently (+HH, +HHMM, +HH:MM, +HH:MM:SS, Z): Marquez's FlexibleDateTimeDeserializer
_MARQUEZ_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?"
)


def marquez_time(value: str) -> bool:
    """Whether Marquez's time parser reads ``value`` (with no offset it takes the server's zone:
    UTC in its Docker image)."""
    if not _MARQUEZ_TIME.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
    except ValueError:  # a month 13, an hour 25, an offset past 18 hours
        return False
    return True


# --- the typed facets ---------------------------------------------------------------------------


@attrs.frozen
class Bound:
    """How Marquez binds one value: ``text`` (a string; a number or boolean becomes text),
    ``uri`` (text ``java.net.URI`` parses), ``time`` (its time parser, or an epoch number),
    ``list``, ``object`` (with ``fields``) or ``map`` (every value bound as ``values``)."""

    kind: str
    required: bool = False  # @NotNull: missing or null is a 422
    item: Bound | None = None
    fields: tuple[tuple[str, Bound], ...] = ()
    values: Bound | None = None
    why: str = ""  # when required for another reason than @NotNull


def _obj(required: bool = False, **fields: Bound) -> Bound:
    return Bound("object", required, fields=tuple(fields.items()))


TEXT, TEXT_REQUIRED = Bound("text"), Bound("text", True)
_BASE = {"_producer": Bound("uri", True), "_schemaURL": Bound("uri", True)}


def _facet(**fields: Bound) -> Bound:
    return _obj(True, **_BASE, **fields)


_LINK = {
    "run": _obj(True, runId=TEXT_REQUIRED),
    "job": _obj(True, namespace=TEXT_REQUIRED, name=TEXT_REQUIRED),
}

# Facet maps Marquez reads into classes: run.facets (RunFacet), job.facets (JobFacet) and a
# dataset's facets (DatasetFacets). inputFacets and outputFacets are plain maps there.
MARQUEZ_FACETS: dict[str, dict[str, Bound]] = {
    "run": {
        "nominalTime": _facet(nominalStartTime=Bound("time", True), nominalEndTime=Bound("time")),
        "parent": _facet(**_LINK),
        "parentRun": _facet(**_LINK),  # @JsonAlias of parent (older Airflow integrations)
    },
    "job": {
        "documentation": _facet(description=TEXT_REQUIRED),
        "sourceCodeLocation": _facet(type=TEXT, url=TEXT),
        "sql": _facet(query=TEXT_REQUIRED),
        "jobType": _facet(processingType=TEXT_REQUIRED, integration=TEXT_REQUIRED, jobType=TEXT_REQUIRED),
    },
    "dataset": {
        "documentation": _facet(description=TEXT_REQUIRED),
        "schema": _facet(fields=Bound("list", item=_obj(True, name=TEXT_REQUIRED, type=TEXT, description=TEXT))),
        "lifecycleStateChange": _facet(lifecycleStateChange=TEXT),
        # the source row's name is NOT NULL: a missing name is a 500 there
        "dataSource": _facet(name=Bound("text", True, why="its sources row's name is NOT NULL"), uri=TEXT),
        "columnLineage": _facet(
            fields=Bound(
                "map",
                values=_obj(
                    True,
                    inputFields=Bound(
                        "list",
                        True,
                        item=_obj(True, namespace=TEXT_REQUIRED, name=TEXT_REQUIRED, field=TEXT_REQUIRED),
                    ),
                    transformationDescription=TEXT,
                    transformationType=TEXT,
                ),
            )
        ),
        # a missing identifiers list is a NullPointerException there (500); an empty one is fine
        "symlinks": _facet(
            identifiers=Bound(
                "list",
                True,
                item=_obj(True, namespace=TEXT_REQUIRED, name=TEXT_REQUIRED, type=TEXT),
                why="without it Marquez fails with a NullPointerException",
            )
        ),
        "description": TEXT,  # DatasetFacets has a text field of that name
    },
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _ptr(base: str, key: str | int) -> str:
    return f"{base}/{str(key).replace('~', '~0').replace('/', '~1')}"


def check_bound(value: Any, bound: Bound, pointer: str, label: str) -> Iterator[tuple[str, str]]:
    """(pointer, message) of each thing Marquez refuses in ``value`` (present and not null)."""
    kind = bound.kind
    if kind in ("text", "uri"):
        if isinstance(value, dict | list):
            yield pointer, f"Marquez reads {label} as text, not {_json_type(value)}"
        elif kind == "uri" and isinstance(value, str) and not java_uri(value):
            # (a number or boolean is read as its text, which is a URI)
            yield pointer, f"Marquez cannot read {label} as a URI: {value!r}"
    elif kind == "time":
        if isinstance(value, bool | dict | list):
            yield pointer, f"Marquez reads {label} as a time, not {_json_type(value)}"
        elif isinstance(value, str) and not marquez_time(value):
            yield pointer, f"Marquez cannot read {label} as a time: {value!r}"
    elif kind == "list":
        if not isinstance(value, list):
            yield pointer, f"Marquez reads {label} as an array, not {_json_type(value)}"
            return
        assert bound.item is not None
        for index, item in enumerate(value):
            yield from _check_present(item, bound.item, _ptr(pointer, index), f"{label}[]", pointer)
    else:  # object, map
        if not isinstance(value, dict):
            yield pointer, f"Marquez reads {label} as an object, not {_json_type(value)}"
            return
        if kind == "map":
            assert bound.values is not None
            for key, item in value.items():
                yield from _check_present(item, bound.values, _ptr(pointer, key), f"{label}.{key}", pointer)
            return
        for key, sub in bound.fields:
            yield from _check_present(value.get(key), sub, _ptr(pointer, key), f"{label}.{key}", pointer)


def _check_present(value: Any, bound: Bound, pointer: str, label: str, parent: str) -> Iterator[tuple[str, str]]:
    if value is None:
        if bound.required:
            yield parent, f"Marquez requires {label}" + (f" ({bound.why})" if bound.why else "")
        return
    yield from check_bound(value, bound, pointer, label)


def typed_facet_problems(holder: str, key: str, facet: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """What Marquez refuses in the facet ``key`` of a ``holder`` ("run", "job" or "dataset") facet
    map: nothing unless Marquez reads that facet into a class."""
    bound = MARQUEZ_FACETS[holder].get(key)
    if bound is None or facet is None:
        return
    yield from check_bound(facet, bound, pointer, key)


def typed(holder: str, key: str) -> bool:
    return key in MARQUEZ_FACETS[holder]


def facet_holder(map_pointer: str) -> str | None:
    """Which of Marquez's facet classes a facet map (by its pointer) is read into, if any."""
    if map_pointer.endswith("/facets"):
        if map_pointer == "/run/facets":
            return "run"
        if map_pointer == "/job/facets":
            return "job"
        return "dataset"
    return None


def at(event: Mapping[str, Any], pointer: str) -> Any:
    """The value at a JSON pointer, or None."""
    value: Any = event
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value
