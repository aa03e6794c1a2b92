"""What Marquez needs of a ``columnLineage`` facet to build column lineage from it (the reference's
marquez.md, section 3), checked against the event's own datasets."""

from __future__ import annotations

from typing import Any


def _schema_fields(dataset: dict[str, Any]) -> set[str] | None:
    schema = (dataset.get("facets") or {}).get("schema")
    if not isinstance(schema, dict):
        return None
    return {f["name"] for f in schema.get("fields") or [] if isinstance(f, dict)}


def column_lineage_problems(event: dict[str, Any]) -> list[str]:
    """Why Marquez would skip part of the event's column lineage: an output column its output's
    ``schema`` facet does not list, or an input field whose dataset is not an input of the event
    with a ``schema`` facet that lists the field. Empty when Marquez takes all of it."""
    inputs = {(d["namespace"], d["name"]): _schema_fields(d) for d in event.get("inputs") or []}
    problems = []
    for output in event.get("outputs") or []:
        facet = (output.get("facets") or {}).get("columnLineage")
        if facet is None:
            continue
        where = f"{output['name']}"
        listed = _schema_fields(output)
        for column, entry in facet["fields"].items():
            if listed is None or column not in listed:
                problems.append(f"{where}.{column}: not in the output's schema facet")
            if not entry.get("inputFields"):
                problems.append(f"{where}.{column}: no inputFields")
            for item in entry.get("inputFields") or []:
                name = (item["namespace"], item["name"])
                if name not in inputs:
                    problems.append(f"{where}.{column}: {item['name']} is not an input of the event")
                elif inputs[name] is None or item["field"] not in (inputs[name] or set()):
                    problems.append(f"{where}.{column}: {item['name']}.{item['field']} is not in its schema facet")
        for item in facet.get("dataset") or []:
            if (item["namespace"], item["name"]) not in inputs:
                problems.append(f"{where} (dataset): {item['name']} is not an input of the event")
    return problems
