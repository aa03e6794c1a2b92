"""Column-level lineage: which input columns each output column of a task run comes from, and how.

It is the model of OpenLineage's ``columnLineage`` dataset facet, with asset ids in place of
dataset names: for each column of an output, the input columns it is made of (``fields``), and
the input columns that shape the whole output, such as join keys and filters (``dataset``). Each
input column carries the transformations the facet defines:

- ``DIRECT`` (the value comes from the input): ``IDENTITY``, ``TRANSFORMATION``, ``AGGREGATION``;
- ``INDIRECT`` (the input decides which rows or values there are): ``JOIN``, ``GROUP_BY``,
  ``FILTER``, ``SORT``, ``WINDOW``, ``CONDITIONAL``;

with an optional description (the expression) and ``masking`` (a hash of the input, say).

A declared column lineage (``record``, ``record --file``, ``task_run``) is written with olbridge's
JSON field names::

    {"fields": {"total": [{"id": "shop.orders", "column": "amount", "transformation": "AGGREGATION"}]},
     "dataset": [{"id": "shop.orders", "column": "status", "transformation": "FILTER"}]}

where ``transformation`` names a subtype (its type follows) and ``transformations`` gives the
facet's full list instead. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from bridge.canonical import canonical
from bridge.errors import ValidationError, ValidationProblems
from bridge.model.columns import column_name
from bridge.model.ids import check_id
from bridge.model.metadata import check_fields

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"
DIRECT_SUBTYPES = ("IDENTITY", "TRANSFORMATION", "AGGREGATION")
INDIRECT_SUBTYPES = ("JOIN", "GROUP_BY", "FILTER", "SORT", "WINDOW", "CONDITIONAL")
SUBTYPE_TYPES = {**dict.fromkeys(DIRECT_SUBTYPES, DIRECT), **dict.fromkeys(INDIRECT_SUBTYPES, INDIRECT)}


@attrs.frozen
class Transformation:
    """How an input column makes an output column (or the whole output)."""

    type: str  # DIRECT | INDIRECT
    subtype: str | None = None
    description: str | None = None
    masking: bool = False

    @classmethod
    def of(cls, subtype: str, description: str | None = None, *, masking: bool = False) -> Transformation:
        """A transformation of a known subtype (its type follows from it)."""
        return cls(SUBTYPE_TYPES[subtype], subtype, description, masking)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.subtype is not None:
            out["subtype"] = self.subtype
        if self.description is not None:
            out["description"] = self.description
        if self.masking:
            out["masking"] = True
        return out

    def sort_key(self) -> tuple[str, str, str, bool]:
        return (self.type, self.subtype or "", self.description or "", self.masking)

    @classmethod
    def from_json(cls, value: Any) -> Transformation | None:
        """What a stored or received transformation says, or None when it is not one."""
        if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
            return None
        subtype, description = value.get("subtype"), value.get("description")
        return cls(
            type=value["type"],
            subtype=subtype if isinstance(subtype, str) else None,
            description=description if isinstance(description, str) else None,
            masking=value.get("masking") is True,
        )


@attrs.frozen
class ColumnInput:
    """An input column of a column lineage: the asset, its column and the transformations."""

    asset_id: str
    column: str
    transformations: tuple[Transformation, ...] = ()


@attrs.frozen
class ColumnLineage:
    """The column lineage of one output: ``fields`` as (output column, its inputs) in order, and
    ``dataset``, the inputs that shape the whole output."""

    fields: tuple[tuple[str, tuple[ColumnInput, ...]], ...] = ()
    dataset: tuple[ColumnInput, ...] = ()

    def is_empty(self) -> bool:
        return not self.fields and not self.dataset

    def inputs(self) -> Iterable[tuple[str, ColumnInput]]:
        """Every input with where it is (``fields.<column>[i]`` or ``dataset[i]``)."""
        for column, inputs in self.fields:
            for index, item in enumerate(inputs):
                yield f"fields.{column}[{index}]", item
        for index, item in enumerate(self.dataset):
            yield f"dataset[{index}]", item

    def edges(self, output_id: str) -> list[ColumnEdge]:
        """The edges this lineage makes into ``output_id`` (one an input column and output column)."""
        out = [
            ColumnEdge(output_id, column, i.asset_id, i.column, i.transformations)
            for column, inputs in self.fields
            for i in inputs
        ]
        out += [ColumnEdge(output_id, None, i.asset_id, i.column, i.transformations) for i in self.dataset]
        return out


@attrs.frozen
class ColumnEdge:
    """One column edge as the catalog keeps it: output asset and column (None: the whole output)
    from input asset and column."""

    downstream_id: str
    downstream_column: str | None
    upstream_id: str
    upstream_column: str
    transformations: tuple[Transformation, ...] = ()


def transformations_json(items: Sequence[Transformation]) -> str:
    """The stored text of a list of transformations: sorted, deduplicated, canonical JSON (as a
    received edge's are: the same edge from either side is stored the same)."""
    return canonical([t.to_json() for t in sorted_transformations(items)])


def sorted_transformations(items: Iterable[Transformation]) -> tuple[Transformation, ...]:
    """Transformations deduplicated, in one order."""
    return tuple(sorted(set(items), key=Transformation.sort_key))


# ---------------------------------------------------------------------------------------------
# declared column lineage (records, the CLI, the Python API)


def _transformation(value: Any, where: str) -> Transformation:
    if isinstance(value, Transformation):
        value = value.to_json()
    if isinstance(value, str):
        if value.upper() not in SUBTYPE_TYPES:
            raise ValidationError(
                f"unknown transformation {value!r}; one of {', '.join(SUBTYPE_TYPES)}",
                rule="columnLineage.transformation",
                value=value,
                where=where,
            )
        return Transformation.of(value.upper())
    if not isinstance(value, Mapping):
        raise ValidationError(
            "a transformation is an object {type, subtype, description, masking}",
            rule="columnLineage.transformation",
            where=where,
        )
    check_fields(value, {"type", "subtype", "description", "masking"}, "columnLineage.transformation", where)
    kind, subtype = value.get("type"), value.get("subtype")
    if kind not in (DIRECT, INDIRECT):
        raise ValidationError(
            f"a transformation's type is DIRECT or INDIRECT, not {kind!r}",
            rule="columnLineage.transformation",
            value=kind,
            where=f"{where}.type",
        )
    if subtype is not None and SUBTYPE_TYPES.get(subtype) != kind:
        known = DIRECT_SUBTYPES if kind == DIRECT else INDIRECT_SUBTYPES
        raise ValidationError(
            f"a {kind} transformation's subtype is one of {', '.join(known)}, not {subtype!r}",
            rule="columnLineage.transformation",
            value=subtype,
            where=f"{where}.subtype",
        )
    description = value.get("description")
    if description is not None and (not isinstance(description, str) or "\x00" in description):
        raise ValidationError(
            "a description is a string", rule="columnLineage.transformation", where=f"{where}.description"
        )
    masking = value.get("masking", False)
    if not isinstance(masking, bool):
        raise ValidationError("masking is true or false", rule="columnLineage.transformation", where=f"{where}.masking")
    return Transformation(kind, subtype, description, masking)


def _input(value: Any, where: str) -> ColumnInput:
    if isinstance(value, ColumnInput):
        value = {
            "id": value.asset_id,
            "column": value.column,
            "transformations": [t.to_json() for t in value.transformations],
        }
    if not isinstance(value, Mapping):
        raise ValidationError(
            "an input column is an object {id, column, transformation}", rule="columnLineage.input", where=where
        )
    check_fields(value, {"id", "column", "transformation", "transformations"}, "columnLineage.input", where)
    if "id" not in value or "column" not in value:
        raise ValidationError("an input column needs 'id' and 'column'", rule="columnLineage.input", where=where)
    asset_id = check_id(value["id"], f"{where}.id")
    column = column_name(value["column"], f"{where}.column")
    if "transformation" in value and "transformations" in value:
        raise ValidationError(
            "give 'transformation' (a subtype) or 'transformations' (a list), not both",
            rule="columnLineage.input",
            where=where,
        )
    items: list[Transformation] = []
    if value.get("transformation") is not None:
        items.append(_transformation(value["transformation"], f"{where}.transformation"))
    listed = value.get("transformations")
    if listed is not None:
        if not isinstance(listed, list | tuple):
            raise ValidationError(
                "'transformations' is a list", rule="columnLineage.input", where=f"{where}.transformations"
            )
        items += [_transformation(t, f"{where}.transformations[{i}]") for i, t in enumerate(listed)]
    return ColumnInput(asset_id, column, sorted_transformations(items))


def parse_column_lineage(value: Any, where: str = "columnLineage") -> ColumnLineage:
    """A declared column lineage, every field checked (see the module's documentation)."""
    if isinstance(value, ColumnLineage):
        return value
    if not isinstance(value, Mapping):
        raise ValidationError(
            "a column lineage is an object {fields: {column: [inputs]}, dataset: [inputs]}",
            rule="columnLineage.type",
            where=where,
        )
    check_fields(value, {"fields", "dataset"}, "columnLineage.type", where)
    fields = value.get("fields") or {}
    if not isinstance(fields, Mapping):
        raise ValidationError(
            "'fields' maps each output column to its input columns", rule="columnLineage.type", where=f"{where}.fields"
        )
    out: list[tuple[str, tuple[ColumnInput, ...]]] = []
    for column, inputs in fields.items():
        place = f"{where}.fields.{column}"
        column_name(column, place)
        if not isinstance(inputs, list | tuple) or not inputs:
            raise ValidationError(
                "an output column's inputs are a non-empty list", rule="columnLineage.input", where=place
            )
        out.append((column, tuple(_input(item, f"{place}[{i}]") for i, item in enumerate(inputs))))
    dataset = value.get("dataset") or []
    if not isinstance(dataset, list | tuple):
        raise ValidationError(
            "'dataset' is a list of input columns", rule="columnLineage.type", where=f"{where}.dataset"
        )
    lineage = ColumnLineage(
        fields=tuple(out), dataset=tuple(_input(item, f"{where}.dataset[{i}]") for i, item in enumerate(dataset))
    )
    if lineage.is_empty():
        raise ValidationError(
            "a column lineage names at least one input column", rule="columnLineage.empty", where=where
        )
    return lineage


def check_declared(
    lineage: ColumnLineage,
    *,
    output_id: str,
    output_columns: Sequence[str] | None,
    input_ids: Iterable[str],
    where: str,
) -> None:
    """Refuse a column lineage that names an asset that is not an input of the run, or (when the
    output's columns are known) an output column that is not among them: every such problem at
    once (:func:`declared_problems`)."""
    _raise_all(
        declared_problems(lineage, output_id=output_id, output_columns=output_columns, input_ids=input_ids, where=where)
    )


def declared_problems(
    lineage: ColumnLineage,
    *,
    output_id: str,
    output_columns: Sequence[str] | None,
    input_ids: Iterable[str],
    where: str,
) -> list[ValidationError]:
    """What :func:`check_declared` refuses, each problem its own error."""
    inputs = set(input_ids)
    problems = [
        ValidationError(
            f"column lineage of output {output_id!r} names {item.asset_id!r}, which is not an input of this "
            "task run (declare it among the inputs)",
            rule="columnLineage.input",
            value=item.asset_id,
            where=f"{where}.{place}.id",
        )
        for place, item in lineage.inputs()
        if item.asset_id not in inputs
    ]
    if output_columns is not None:
        problems += missing_column_problems(lineage, output_id, output_columns, where)
    return problems


def missing_columns(lineage: ColumnLineage, output_id: str, output_columns: Sequence[str], where: str) -> None:
    """Refuse a column lineage whose output columns are not all in ``output_columns`` (every one
    missing, at once)."""
    _raise_all(missing_column_problems(lineage, output_id, output_columns, where))


def missing_column_problems(
    lineage: ColumnLineage, output_id: str, output_columns: Sequence[str], where: str
) -> list[ValidationError]:
    """An error for each output column of the lineage that is not in ``output_columns``."""
    known = set(output_columns)
    listed = ", ".join(output_columns) if output_columns else "none"
    return [
        ValidationError(
            f"column {column!r} is not in the schema of output {output_id!r} (its columns: {listed}); "
            "declare it in the output's columns",
            rule="columnLineage.output",
            value=column,
            where=f"{where}.fields.{column}",
        )
        for column, _inputs in lineage.fields
        if column not in known
    ]


def _raise_all(problems: Sequence[ValidationError]) -> None:
    """The one problem, or all of them (:class:`ValidationProblems`); nothing when there is none."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValidationProblems(problems)
