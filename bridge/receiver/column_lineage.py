"""A received event's ``columnLineage`` facets, read into column edges (the
:class:`~bridge.model.received.ReceivedColumnEdge` records). Pure: no clock, no I/O.

Every input field of every output column (and of the facet's whole-output ``dataset`` list) is
one edge, kept with its ``transformations`` exactly as the producer gave them (canonical JSON);
an input field without them, under an output column that has the deprecated
``transformationType``, gets that one (``IDENTITY`` → DIRECT IDENTITY, ``MASKED`` → a masking
DIRECT TRANSFORMATION). None is dropped and none invented: an edge Marquez would skip is taken
all the same, with a warning kept with the event:

- an output column that the output's ``schema`` facet does not list (or an output without one);
- an input field whose dataset is not an input of the event.

An edge whose key the catalog cannot keep (a column's name past :data:`COLUMN_BYTES`, its
transformations past :data:`TRANSFORMATIONS_BYTES`) is left out, with a warning.

(Marquez also accepts an input dataset named in another event of the same run; the receiver
judges each event by its own datasets, so that its verdict does not depend on what came before.)
Facets are read from the outputs of RunEvents and JobEvents, the datasets with a run or job to
keep the edges under.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bridge.canonical import canonical
from bridge.model import SUBTYPE_TYPES
from bridge.model.received import DatasetName, ReceivedColumnEdge, store_namespace
from bridge.openlineage.validate import marquez_dataset
from bridge.receiver.policy import DATASET_BYTES, utf8_size


def _deprecated(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What an output column's deprecated ``transformationType`` says, as the new list."""
    kind = entry.get("transformationType")
    if not isinstance(kind, str) or not kind.strip():
        return []
    upper = kind.strip().upper()
    if upper == "MASKED":
        item: dict[str, Any] = {"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}
    elif upper in SUBTYPE_TYPES:
        item = {"type": SUBTYPE_TYPES[upper], "subtype": upper}
    elif upper in ("DIRECT", "INDIRECT"):
        item = {"type": upper}
    else:
        item = {"type": "DIRECT", "subtype": kind}
    description = entry.get("transformationDescription")
    if isinstance(description, str) and description:
        item["description"] = description
    return [item]


def _inputs(items: Any, fallback: list[dict[str, Any]]) -> Iterator[tuple[DatasetName, str, str]]:
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        namespace, name, field = item.get("namespace"), item.get("name"), item.get("field")
        if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(field, str)):
            continue
        given = item.get("transformations")
        transformations = given if isinstance(given, list) else fallback
        yield (store_namespace(namespace), name), field, canonical(transformations)


def _taken(source: DatasetName, where: str, warnings: dict[str, None]) -> bool:
    """Whether an input field's dataset is one a dataset of the event could be (Marquez's R8, R9:
    its namespace and name as an input's are checked); else its edge is left out, with a warning,
    rather than a dataset of that name made."""
    if marquez_dataset(*source):
        return True
    warnings[f"{where}: {source[0]!r} {source[1]!r} is no dataset Marquez takes: its edges are left out"] = None
    return False


# bytes (UTF-8) of a column's name and of an input field's transformations (their canonical JSON)
# that an edge keeps: the catalog keys an edge by both ends' columns and the transformations, in an
# index entry PostgreSQL bounds (about 2,700 bytes); an input dataset's as a dataset's own
COLUMN_BYTES = 255
TRANSFORMATIONS_BYTES = 512


def _fits(
    column: str, source: DatasetName, field: str, transformations: str, where: str, warnings: dict[str, None]
) -> bool:
    """Whether an edge's key is one the catalog keeps (:data:`COLUMN_BYTES`, ...); else it is left
    out, with a warning (the rest of the event is taken)."""
    past = (
        "a column's name is"
        if max(utf8_size(column), utf8_size(field)) > COLUMN_BYTES
        else "its transformations are"
        if utf8_size(transformations) > TRANSFORMATIONS_BYTES
        else "its input's namespace and name together are"
        if utf8_size(source[0]) + utf8_size(source[1]) > DATASET_BYTES
        else None
    )
    if past is None:
        return True
    limits = f"columns {COLUMN_BYTES}, transformations {TRANSFORMATIONS_BYTES}, an input {DATASET_BYTES:,}"
    warnings[f"{where}: an edge is left out: {past} longer than the catalog keeps ({limits} bytes)"] = None
    return False


def read_column_lineage(event: Mapping[str, Any]) -> tuple[tuple[ReceivedColumnEdge, ...], tuple[str, ...]]:
    """The column edges of an accepted RunEvent's or JobEvent's outputs, and the warnings."""
    outputs = event.get("outputs")
    if not isinstance(outputs, list):
        return (), ()
    inputs = {
        (store_namespace(d["namespace"]) if isinstance(d.get("namespace"), str) else None, d.get("name"))
        for d in event.get("inputs") or ()
        if isinstance(d, dict)
    }
    edges: dict[ReceivedColumnEdge, None] = {}
    warnings: dict[str, None] = {}
    for output in outputs:
        if not isinstance(output, dict) or not isinstance(output.get("facets"), dict):
            continue
        facet = output["facets"].get("columnLineage")
        if not isinstance(facet, dict):
            continue
        target = (store_namespace(output["namespace"]), output["name"])
        where = f"columnLineage of output {target[0]} {target[1]}"
        schema = output["facets"].get("schema")
        fields = schema.get("fields") if isinstance(schema, dict) else None
        listed = {f.get("name") for f in fields if isinstance(f, dict)} if isinstance(fields, list) else None
        given = facet.get("fields")
        columns: dict[str, Any] = given if isinstance(given, dict) else {}
        if columns and listed is None:
            warnings[f"{where}: the output has no schema facet, so Marquez skips its column lineage"] = None
        for column, entry in columns.items():
            if not isinstance(entry, dict):
                continue
            if not column:  # a column without a name: "" is where the whole output's edges are kept
                warnings[f'{where}: a column without a name ("") is left out'] = None
                continue
            if listed is not None and column not in listed:
                warnings[f"{where}: column {column!r} is not in the output's schema facet"] = None
            for source, field, transformations in _inputs(entry.get("inputFields"), _deprecated(entry)):
                if _taken(source, where, warnings) and _fits(column, source, field, transformations, where, warnings):
                    edges[ReceivedColumnEdge(target, column, source, field, transformations)] = None
        for source, field, transformations in _inputs(facet.get("dataset"), []):
            if _taken(source, where, warnings) and _fits("", source, field, transformations, where, warnings):
                edges[ReceivedColumnEdge(target, "", source, field, transformations)] = None
    for edge in edges:
        if edge.input not in inputs:
            warnings[
                f"columnLineage of output {edge.output[0]} {edge.output[1]}: {edge.input[0]} {edge.input[1]} "
                "is not an input of this event"
            ] = None
    return tuple(edges), tuple(warnings)
