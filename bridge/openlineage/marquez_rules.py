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
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from bridge.jsontext import json_type

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
        read = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
    except ValueError:  # a month 13, an hour 25, an offset of 24 hours or more
        return False
    # Java's ZoneOffset goes to 18 hours either way; Python's to 23:59
    offset = read.utcoffset()
    return offset is None or abs(offset) <= timedelta(hours=18)


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


Path = tuple[str | int, ...]  # from the facet down: its key, then fields and indexes


def _pointer(base: str, path: Path) -> str:
    return base + "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path[1:])


def _label(path: Path) -> str:
    """``schema.fields[].name``: where a value sits in the facet's class."""
    return "".join(("[]" if isinstance(part, int) else ("." if i else "") + part) for i, part in enumerate(path))


def _walk(value: Any, bound: Bound, path: Path, found: list[tuple[Path, str]]) -> None:
    """Adds (path, message) of each thing Marquez refuses in ``value`` (present, not null) to
    ``found``. Builds no text unless something is refused: it runs for every typed facet."""
    kind = bound.kind
    if kind == "text" or kind == "uri":
        if isinstance(value, dict | list):
            found.append((path, f"Marquez reads {_label(path)} as text, not {json_type(value)}"))
        elif kind == "uri" and isinstance(value, str) and not java_uri(value):
            # (a number or boolean is read as its text, which is a URI)
            found.append((path, f"Marquez cannot read {_label(path)} as a URI: {value!r}"))
    elif kind == "time":
        if isinstance(value, bool | dict | list):
            found.append((path, f"Marquez reads {_label(path)} as a time, not {json_type(value)}"))
        elif isinstance(value, str) and not marquez_time(value):
            found.append((path, f"Marquez cannot read {_label(path)} as a time: {value!r}"))
    elif kind == "list":
        if not isinstance(value, list):
            found.append((path, f"Marquez reads {_label(path)} as an array, not {json_type(value)}"))
            return
        assert bound.item is not None
        for index, item in enumerate(value):
            _present(item, bound.item, (*path, index), found)
    elif not isinstance(value, dict):  # object, map
        found.append((path, f"Marquez reads {_label(path)} as an object, not {json_type(value)}"))
    elif kind == "map":
        assert bound.values is not None
        for key, item in value.items():
            _present(item, bound.values, (*path, key), found)
    else:
        for key, sub in bound.fields:
            item = value.get(key)
            if item is None:
                if sub.required:
                    why = f" ({sub.why})" if sub.why else ""
                    found.append((path, f"Marquez requires {_label((*path, key))}{why}"))
            elif sub.kind == "uri" and isinstance(item, str):  # _producer, _schemaURL: every facet has them
                if not java_uri(item):
                    found.append(((*path, key), f"Marquez cannot read {_label((*path, key))} as a URI: {item!r}"))
            elif sub.kind != "text" or isinstance(item, dict | list):  # (plain text: nothing to refuse)
                _walk(item, sub, (*path, key), found)


def _present(value: Any, bound: Bound, path: Path, found: list[tuple[Path, str]]) -> None:
    if value is None:
        if bound.required:
            why = f" ({bound.why})" if bound.why else ""
            found.append((path[:-1], f"Marquez requires {_label(path)}{why}"))
        return
    _walk(value, bound, path, found)


def typed_facet_problems(holder: str, key: str, facet: Any, pointer: str) -> list[tuple[str, str]]:
    """(pointer, message) of what Marquez refuses in the facet ``key`` (at ``pointer``) of a
    ``holder`` ("run", "job" or "dataset") facet map: nothing unless Marquez reads that facet
    into a class."""
    bound = MARQUEZ_FACETS[holder].get(key)
    if bound is None or facet is None:
        return []
    found: list[tuple[Path, str]] = []
    _walk(facet, bound, (key,), found)
    return [(_pointer(pointer, path), message) for path, message in found]


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
