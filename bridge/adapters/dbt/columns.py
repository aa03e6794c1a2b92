"""The columns of a dbt project's relations and the column lineage of its models.

Columns come from ``catalog.json`` (``dbt docs generate``: every column with its type, as the
warehouse reports it) when it lists the relation, else from the manifest (the documented ones),
and for a model without either, from its own compiled SQL. Descriptions come from the manifest.

The column lineage of a model is read from its compiled SQL by :mod:`.sql_lineage` in the
adapter's dialect; every input column is resolved to the relation it really comes from (an
ephemeral model is a CTE of the compiled code, so its columns resolve to its parents'), and kept
only when that relation is an input of the model's run (a model that reads itself, as an
incremental one may, is left out of its own lineage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bridge.adapters.dbt import sql_lineage
from bridge.adapters.dbt.sql_lineage import Relation, UnreadableSql, UnresolvedColumns, query_lineage, relation_key
from bridge.model import Column, ColumnInput, ColumnLineage


def _manifest_columns(node: Mapping[str, Any]) -> list[Column]:
    columns = node.get("columns")
    if not isinstance(columns, dict):
        return []
    return [
        Column(
            name=str(c.get("name") or name), type=c.get("data_type") or None, description=c.get("description") or None
        )
        for name, c in columns.items()
        if isinstance(c, dict)
    ]


def _catalog_columns(entry: Mapping[str, Any], documented: Sequence[Column]) -> list[Column]:
    """A catalog entry's columns in their order, with the manifest's descriptions."""
    descriptions = {c.name.casefold(): c.description for c in documented}
    listed = sorted(
        ((name, c) for name, c in entry["columns"].items()),
        key=lambda item: (item[1].get("index") if isinstance(item[1].get("index"), int) else 0, item[0]),
    )
    out = []
    for name, column in listed:
        text = str(column.get("name") or name)
        kind = column.get("type")
        out.append(Column(text, str(kind) if kind else None, descriptions.get(text.casefold())))
    return out


class ProjectColumns:
    """The columns of every relation of a project, and the column lineage of its models."""

    def __init__(self, adapter: str, catalog: Mapping[str, Any] | None) -> None:
        self.dialect = sql_lineage.DIALECTS.get(adapter)
        self.adapter = adapter
        self.catalog = catalog
        self.columns: dict[str, list[Column]] = {}  # by unique id
        self.relations: dict[Relation, str] = {}  # relation -> unique id
        self.notes: list[str] = []
        self._warned = False

    def register(self, unique_id: str, node: Mapping[str, Any], table: str) -> None:
        """Know a relation (a model, seed, snapshot or source) and its columns."""
        if unique_id in self.columns:
            return
        self.relations[relation_key(node.get("database"), node.get("schema"), table)] = unique_id
        documented = _manifest_columns(node)
        group = "sources" if unique_id.startswith("source.") else "nodes"
        entry = (self.catalog or {}).get(group, {}).get(unique_id)
        self.columns[unique_id] = _catalog_columns(entry, documented) if entry else documented

    def in_catalog(self, unique_id: str) -> bool:
        group = "sources" if unique_id.startswith("source.") else "nodes"
        return unique_id in (self.catalog or {}).get(group, {})

    def column_names(self, unique_ids: set[str]) -> dict[Relation, list[str]]:
        """The columns of these relations (only those a query reads: a schema of the whole
        project would be read again for every model)."""
        return {r: [c.name for c in self.columns.get(u, [])] for r, u in self.relations.items() if u in unique_ids}

    def lineage(self, unique_id: str, sql: str, inputs: Mapping[str, str]) -> tuple[list[Column], ColumnLineage | None]:
        """The columns of a model's output and its column lineage from ``inputs`` (unique id ->
        asset id: the run's inputs, which are the relations its SQL reads, ephemeral models
        resolved); notes what it could not read."""
        columns = self.columns.get(unique_id, [])
        if not sql_lineage.available():
            if not self._warned:
                self.notes.append(
                    "column lineage needs sqlglot, which is not installed (pip install 'sqlglot>=30.31,<31'); "
                    "none was derived"
                )
                self._warned = True
            return columns, None
        try:
            found = query_lineage(sql, dialect=self.dialect, relations=self.column_names({unique_id, *inputs}))
        except UnresolvedColumns as exc:
            unknown = not all(self.in_catalog(u) for u in inputs)
            hint = "; catalog.json gives its inputs' columns (dbt docs generate, --catalog-json)" if unknown else ""
            self.notes.append(
                f"{unique_id}: a column of its SQL could not be traced to its inputs ({exc}): "
                f"its column lineage is left out{hint}"
            )
            return columns, None
        except UnreadableSql as exc:
            self.notes.append(f"{unique_id}: its SQL could not be read as {self.dialect or 'generic SQL'}: {exc}")
            return columns, None
        self.notes += [f"{unique_id}: {note}" for note in found.notes]
        if not self.in_catalog(unique_id):  # the columns the query gives, with what the manifest says
            documented = {c.name.casefold(): c for c in columns}
            given = [documented.get(name.casefold(), Column(name)) for name in found.columns]
            named = {c.name.casefold() for c in given}
            columns = given + [c for c in columns if c.name.casefold() not in named]
            self.columns[unique_id] = columns
        output_names = {c.name.casefold(): c.name for c in columns}
        by_relation = {r: u for r, u in self.relations.items() if u in inputs}

        def resolved(sources: Sequence[sql_lineage.Source]) -> tuple[ColumnInput, ...]:
            out = []
            for (relation, column), transformations in sql_lineage.transformations_by_input(sources).items():
                parent = by_relation.get(relation)
                if parent is None:  # not an input of the run (the model itself, a table dbt does not know)
                    continue
                names = {c.name.casefold(): c.name for c in self.columns.get(parent, [])}
                out.append(ColumnInput(inputs[parent], names.get(column.casefold(), column), transformations))
            return tuple(sorted(out, key=lambda i: (i.asset_id, i.column)))

        fields = []
        for name, sources in found.fields.items():
            items = resolved(sources)
            if items:
                fields.append((output_names.get(name.casefold(), name), items))
        dataset = resolved(found.dataset)
        lineage = ColumnLineage(tuple(fields), dataset)
        return columns, None if lineage.is_empty() else lineage


__all__ = ["ProjectColumns"]
