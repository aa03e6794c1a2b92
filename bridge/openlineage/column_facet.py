"""The ``columnLineage`` facet of a run's outputs, from the run's stored column edges. Pure.

Marquez builds column lineage only when the output's ``schema`` facet lists the column and every
input field names an input dataset of the same run whose ``schema`` facet lists the field
(``marquez.md`` section 3); :func:`run_datasets` makes the run's datasets say so.

Besides the facet's per-input ``transformations``, each output column carries the deprecated
``transformationType`` / ``transformationDescription`` that Marquez 0.51 still reads:
``IDENTITY`` when every direct input is copied as it is, ``MASKED`` when one is masked,
``AGGREGATION`` or ``TRANSFORMATION`` otherwise, or the subtype of an indirect-only column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bridge.model import DIRECT, ColumnEdge, Transformation
from bridge.openlineage import facets as f

Dataset = dict[str, Any]


def _input_field(dataset: Mapping[str, Any], edge: ColumnEdge) -> dict[str, Any]:
    item: dict[str, Any] = {"namespace": dataset["namespace"], "name": dataset["name"], "field": edge.upstream_column}
    if edge.transformations:
        item["transformations"] = [t.to_json() for t in edge.transformations]
    return item


def deprecated_transformation(transformations: Sequence[Transformation]) -> tuple[str, str] | None:
    """(``transformationType``, ``transformationDescription``) of an output column, from the
    transformations of all its inputs; None when none is known."""
    if not transformations:
        return None
    direct = [t for t in transformations if t.type == DIRECT]
    if any(t.masking for t in transformations):
        kind = "MASKED"
    elif direct and all(t.subtype == "IDENTITY" for t in direct):
        kind = "IDENTITY"
    elif any(t.subtype == "AGGREGATION" for t in direct):
        kind = "AGGREGATION"
    elif direct:
        kind = "TRANSFORMATION"
    else:
        kind = transformations[0].subtype or transformations[0].type
    said = list(dict.fromkeys(t.description for t in (direct or transformations) if t.description))
    return kind, "; ".join(said) if said else kind.lower().replace("_", " ")


def column_lineage_facet(
    producer: str, edges: Iterable[ColumnEdge], inputs: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The facet of one output from its edges; ``inputs`` gives the input datasets by asset id
    (an edge from an asset that is not among them is left out: no input, no lineage)."""
    by_column: dict[str, list[ColumnEdge]] = {}
    whole: list[ColumnEdge] = []
    for edge in edges:
        if edge.upstream_id not in inputs:
            continue
        if edge.downstream_column is None:
            whole.append(edge)
        else:
            by_column.setdefault(edge.downstream_column, []).append(edge)

    def fields_of(items: list[ColumnEdge]) -> list[dict[str, Any]]:
        listed = [_input_field(inputs[e.upstream_id], e) for e in items]
        return sorted(listed, key=lambda i: (i["namespace"], i["name"], i["field"], str(i.get("transformations"))))

    fields: dict[str, Any] = {}
    for column in sorted(by_column):
        entry: dict[str, Any] = {"inputFields": fields_of(by_column[column])}
        said = deprecated_transformation([t for e in by_column[column] for t in e.transformations])
        if said is not None:
            entry["transformationType"], entry["transformationDescription"] = said
        fields[column] = entry
    facet = f.facet(producer, "columnLineage", fields=fields)
    if whole:
        facet["dataset"] = fields_of(whole)
    return facet


def _with_columns(dataset: Mapping[str, Any], columns: Iterable[str], producer: str) -> Dataset:
    """The dataset whose ``schema`` facet lists ``columns`` too (those missing appended in name
    order, without a type)."""
    facets = dict(dataset.get("facets") or {})
    schema = facets.get("schema")
    fields = list(schema["fields"]) if schema else []
    listed = {field["name"] for field in fields}
    missing = sorted({c for c in columns if c not in listed})
    if not missing:
        return dict(dataset)
    fields += [{"name": c} for c in missing]
    facets["schema"] = {**schema, "fields": fields} if schema else f.facet(producer, "schema", fields=fields)
    return {**dataset, "facets": facets}


def run_datasets(
    producer: str,
    edges: Sequence[ColumnEdge],
    inputs: Mapping[str, Mapping[str, Any]],
    outputs: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, Dataset], dict[str, Dataset]]:
    """The input and output datasets (by asset id) that a run's column edges change: each output
    with a ``columnLineage`` facet, and every dataset whose ``schema`` facet must list a column
    the edges name. Datasets the edges do not touch are not in the answer."""
    named_inputs: dict[str, list[str]] = {}
    by_output: dict[str, list[ColumnEdge]] = {}
    for edge in edges:
        if edge.downstream_id not in outputs or edge.upstream_id not in inputs:
            continue
        by_output.setdefault(edge.downstream_id, []).append(edge)
        named_inputs.setdefault(edge.upstream_id, []).append(edge.upstream_column)
    new_inputs = {i: _with_columns(inputs[i], columns, producer) for i, columns in named_inputs.items()}
    new_outputs: dict[str, Dataset] = {}
    for output_id, items in by_output.items():
        columns = [e.downstream_column for e in items if e.downstream_column is not None]
        dataset = _with_columns(outputs[output_id], columns, producer)
        facet = column_lineage_facet(producer, items, new_inputs)
        dataset["facets"] = {**dataset.get("facets", {}), "columnLineage": facet}
        new_outputs[output_id] = dataset
    return new_inputs, new_outputs
