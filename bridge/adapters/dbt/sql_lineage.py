"""Column lineage of one SQL query, read by sqlglot in the dialect of the warehouse that runs it.

Given a query (a dbt model's compiled code) and the columns of the relations it reads, it tells
for each output column the relation columns it is made of and how, with the transformations of
OpenLineage's ``columnLineage`` facet:

- in the output column's own expression: ``IDENTITY`` (the column as it is), ``TRANSFORMATION``
  (an expression of it), ``AGGREGATION`` (inside an aggregate), all ``DIRECT``; ``CONDITIONAL``
  (in a ``CASE`` / ``IF`` condition), ``FILTER`` (an aggregate's ``FILTER (WHERE ...)``),
  ``SORT`` (an aggregate's ``ORDER BY``) and ``WINDOW`` (a window's ``PARTITION BY`` / ``ORDER
  BY``), all ``INDIRECT``; a hash function marks its input ``masking``;
- through CTEs, derived tables, unions and scalar subqueries down to the relations (a dbt
  ephemeral model is a CTE of the compiled code, so it resolves to its own parents);

and the relation columns that shape the whole output (``dataset``): ``JOIN`` keys, ``FILTER``
(``WHERE``, ``HAVING``, ``QUALIFY``), ``GROUP_BY`` and ``SORT`` of every query level that feeds
it. ``SELECT *`` is expanded with the relations' known columns; a star over a relation whose
columns are unknown is reported and left out.

sqlglot is imported on first use (it is in the ``dbt`` extra); :func:`available` tells whether it
is installed.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from bridge.model import DIRECT, INDIRECT, Transformation, sorted_transformations

# sqlglot logs what it cannot do on its own logger (``Cannot convert untyped key-value
# definitions``), which reached stderr as bare lines beside olbridge's own: what the column
# lineage could not read is said in its notes (set once; sqlglot itself is imported when used)
logging.getLogger("sqlglot").setLevel(logging.ERROR)

if TYPE_CHECKING:
    from sqlglot import exp
    from sqlglot.optimizer.scope import Scope

Relation = tuple[str, ...]  # (database, schema, name) of a relation, case-folded

# dbt adapter type -> sqlglot dialect (the adapters whose SQL sqlglot reads)
# the dialects whose warehouse keeps a column's name as the query wrote it, and matches it whatever
# its case (sqlglot reads them case-insensitively, and its qualify writes every name in small
# letters): a model's columns are named as written there (`CustomerId`, as DuckDB's catalog.json and
# dbt-ol name it); the others keep sqlglot's reading (PostgreSQL's small letters, Snowflake's capitals)
KEEPS_CASE = frozenset({"duckdb", "bigquery", "databricks", "spark", "tsql"})

DIALECTS = {
    "athena": "athena",
    "bigquery": "bigquery",
    "clickhouse": "clickhouse",
    "databricks": "databricks",
    "doris": "doris",
    "dremio": "dremio",
    "duckdb": "duckdb",
    "exasol": "exasol",
    "fabric": "fabric",
    "glue": "spark",
    "hive": "hive",
    "materialize": "materialize",
    "mysql": "mysql",
    "oracle": "oracle",
    "postgres": "postgres",
    "redshift": "redshift",
    "risingwave": "risingwave",
    "singlestore": "singlestore",
    "snowflake": "snowflake",
    "spark": "spark",
    "sqlite": "sqlite",
    "sqlserver": "tsql",
    "starrocks": "starrocks",
    "synapse": "tsql",
    "teradata": "teradata",
    "trino": "trino",
    "presto": "presto",
}
_DESCRIPTION_MAX = 250
_DIRECT_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}


class UnreadableSql(Exception):
    """The query could not be read (a parse error, or not one query); the message says why."""


# sqlglot's words for a column it cannot trace to a relation whose columns it knows
_UNRESOLVED = re.compile(r"^(Unknown column: |Column '.*' could not be resolved|Cannot resolve '.*' due to missing)")


class UnresolvedColumns(UnreadableSql):
    """The query was read, but a column of it could not be traced to the relation it comes from
    (a column named without its table in a join, where the relations' columns are not known)."""


@attrs.frozen
class Source:
    """A relation column an output column (or the whole output) depends on, and how."""

    relation: Relation
    column: str
    transformation: Transformation


@attrs.frozen
class QueryLineage:
    columns: tuple[str, ...]  # the output's columns, in order, as the query names them
    fields: Mapping[str, tuple[Source, ...]]  # output column -> its sources
    dataset: tuple[Source, ...]  # the sources that shape the whole output
    notes: tuple[str, ...] = ()  # what could not be followed


def available() -> bool:
    """Whether sqlglot is installed."""
    return importlib.util.find_spec("sqlglot") is not None


def relation_key(*parts: str | None) -> Relation:
    return tuple(p.casefold() for p in parts if p)


def _schema(relations: Mapping[Relation, Sequence[str]]) -> dict[str, Any]:
    """sqlglot's nested schema {database: {schema: {table: {column: type}}}}; every relation at
    the same depth (the shortest), types unknown (only names matter here)."""
    depth = min((len(r) for r in relations), default=3)
    nested: dict[str, Any] = {}
    for relation, columns in relations.items():
        if not columns:
            continue
        level = nested
        for part in relation[-depth:-1]:
            level = level.setdefault(part, {})
        level[relation[-1]] = {c: "UNKNOWN" for c in columns}
    return nested


class _Walker:
    """Follows output columns down a qualified query's scopes to the relations."""

    def __init__(self, dialect: str | None, relations: Sequence[Relation]) -> None:
        from sqlglot import exp

        self.dialect = dialect
        self.relations = relations
        self.memo: dict[tuple[int, str], list[Source]] = {}
        self.notes: list[str] = []
        self.hashes: tuple[type[exp.Expr], ...] = tuple(
            getattr(exp, name)
            for name in ("MD5", "MD5Digest", "SHA", "SHA2", "SHA1Digest", "SHA2Digest")
            if hasattr(exp, name)
        )

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # --- relations ---------------------------------------------------------------------------

    def relation(self, table: exp.Table) -> Relation:
        """The known relation a table reference names (matched on its trailing parts), else its
        own parts."""
        parts = relation_key(table.catalog, table.db, table.name)
        matches = [r for r in self.relations if r[-len(parts) :] == parts]
        return matches[0] if len(matches) == 1 else parts

    # --- one output column ---------------------------------------------------------------------

    def projection_sources(self, scope: Scope, name: str | None, index: int | None = None) -> list[Source]:
        """The sources of a scope's output column (by name, or by position for a union's branch)."""
        key = (id(scope), name if name is not None else f"#{index}")
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = []  # a recursive CTE reads itself: stop there
        from sqlglot import exp

        expression = scope.expression
        found: list[Source] = []
        if isinstance(expression, exp.Subquery) and scope.subquery_scopes:
            found = self.projection_sources(scope.subquery_scopes[0], name, index)
        elif isinstance(expression, exp.SetOperation):
            names = expression.named_selects
            position = names.index(name) if name in names else index
            if position is None:
                self.note(f"no column {name!r} in {expression.sql(dialect=self.dialect)[:80]}")
            else:
                for branch in scope.set_operation_scopes:
                    found += self.projection_sources(branch, None, position)
        elif isinstance(expression, exp.Select):
            selects = expression.selects
            projection = next((s for s in selects if s.alias_or_name == name), None)
            if projection is None and index is not None and index < len(selects):
                projection = selects[index]
            if projection is None:
                self.note(f"no column {name!r} in a query level")
            else:
                found = self.expression_sources(scope, projection)
        self.memo[key] = found
        return found

    def expression_sources(self, scope: Scope, projection: exp.Expr) -> list[Source]:
        """The sources of one projection of a SELECT: each column in it, classified, and followed
        into the scope it comes from."""
        from sqlglot import exp
        from sqlglot.optimizer.scope import find_all_in_scope

        body = projection.this if isinstance(projection, exp.Alias) else projection
        found: list[Source] = []
        for column in find_all_in_scope(body, exp.Column):
            here = self.classify(column, body)
            found += self.column_sources(scope, column, here)
        # scalar subqueries in the projection: their one column, as a transformation of it
        subqueries = {id(s.expression): s for s in scope.subquery_scopes}
        for query in find_all_in_scope(body, exp.Select, exp.SetOperation):
            inner = subqueries.get(id(query))
            if inner is None or not query.named_selects:
                continue
            here = self.classify(query, body)
            found += [
                attrs.evolve(s, transformation=compose(here, s.transformation))
                for s in self.projection_sources(inner, query.named_selects[0])
            ]
        return found

    def column_sources(self, scope: Scope, column: exp.Column, here: Transformation) -> list[Source]:
        """Where a column of a scope comes from: a relation, or a column of an inner scope."""
        from sqlglot.expressions import Table
        from sqlglot.optimizer.scope import Scope

        source = scope.sources.get(column.table)
        if source is None and not column.table:
            named = [s for n, s in scope.sources.items() if n]
            source = named[0] if len(named) == 1 else None
        outer = scope.parent
        while source is None and column.table and outer is not None:  # a correlated subquery's column
            source, scope, outer = outer.sources.get(column.table), outer, outer.parent
        if source is None:
            self.note(f"column {column.sql(dialect=self.dialect)} has no known source")
            return []
        if isinstance(source, Scope):
            return [
                attrs.evolve(s, transformation=compose(here, s.transformation))
                for s in self.projection_sources(source, column.name)
            ]
        if isinstance(source, Table):
            return [Source(self.relation(source), column.name, here)]
        return []

    def classify(self, node: exp.Expr, root: exp.Expr) -> Transformation:
        """How the value at ``node`` reaches the projection ``root`` it is part of."""
        from sqlglot import exp

        aggregated = masked = False
        child, parent = node, node.parent
        while child is not root and parent is not None:
            key = child.arg_key
            if isinstance(parent, exp.If) and key == "this":
                return Transformation.of("CONDITIONAL")
            if isinstance(parent, exp.Case) and key == "this":
                return Transformation.of("CONDITIONAL")
            if isinstance(parent, exp.Filter) and key == "expression":
                return Transformation.of("FILTER")
            if isinstance(parent, exp.Window) and key in ("partition_by", "order"):
                return Transformation.of("WINDOW")
            if isinstance(parent, exp.Order) and key == "expressions":
                if isinstance(parent.parent, exp.Window):
                    return Transformation.of("WINDOW")
                if not isinstance(parent.parent, exp.Select):  # an aggregate's ORDER BY
                    return Transformation.of("SORT")
            if isinstance(parent, exp.AggFunc):
                aggregated = True
            if self.hashes and isinstance(parent, self.hashes):
                masked = True
            child, parent = parent, parent.parent
        if node is root and isinstance(node, exp.Column):
            return Transformation.of("IDENTITY")
        description = root.sql(dialect=self.dialect)
        if len(description) > _DESCRIPTION_MAX:
            description = description[: _DESCRIPTION_MAX - 3] + "..."
        subtype = "AGGREGATION" if aggregated else "TRANSFORMATION"
        return Transformation.of(subtype, description, masking=masked)

    # --- the whole output ----------------------------------------------------------------------

    def clause_sources(self, scope: Scope) -> Iterator[Source]:
        """The sources of one SELECT's joins, filters, grouping and sorting."""
        from sqlglot import exp

        select = scope.expression
        if not isinstance(select, exp.Select):
            return
        clauses: list[tuple[str, exp.Expr | None]] = [
            ("FILTER", select.args.get("where")),
            ("FILTER", select.args.get("having")),
            ("FILTER", select.args.get("qualify")),
            ("SORT", select.args.get("order")),
        ]
        for join in select.args.get("joins") or []:
            clauses.append(("JOIN", join.args.get("on")))
        group = select.args.get("group")
        if group is not None:
            if group.args.get("all"):  # GROUP BY ALL: every projection without an aggregate
                for projection in select.selects:
                    if projection.find(exp.AggFunc) is None:
                        clauses.append(("GROUP_BY", projection))
            else:
                clauses.append(("GROUP_BY", group))
        from sqlglot.optimizer.scope import find_all_in_scope

        subqueries = {id(s.expression): s for s in scope.subquery_scopes}
        # an output column named in ORDER BY (by its alias, or its place: `order by 2`), which
        # qualify leaves unqualified: the columns it is made of, not a column of the relation
        aliases = {p.alias for p in select.selects if isinstance(p, exp.Alias)}
        for subtype, clause in clauses:
            if clause is None:
                continue
            kind = Transformation.of(subtype)
            for column in find_all_in_scope(clause, exp.Column):
                if subtype == "SORT" and not column.table and column.name in aliases:
                    found_all = self.projection_sources(scope, column.name)
                else:
                    found_all = self.column_sources(scope, column, kind)
                for found in found_all:
                    yield attrs.evolve(found, transformation=_indirect(kind, found.transformation))
            for query in find_all_in_scope(clause, exp.Select, exp.SetOperation):
                inner = subqueries.get(id(query))
                if inner is not None and query.named_selects:
                    for found in self.projection_sources(inner, query.named_selects[0]):
                        yield attrs.evolve(found, transformation=_indirect(kind, found.transformation))


def compose(outer: Transformation, inner: Transformation) -> Transformation:
    """The transformation of an input column through two query levels (``outer`` of ``inner``):
    an indirect step makes it indirect; else the stronger of identity < transformation <
    aggregation, masked if either is."""
    if outer.type == INDIRECT:
        return outer
    if inner.type == INDIRECT:
        return inner
    stronger = max((outer, inner), key=lambda t: _DIRECT_RANK.get(t.subtype or "", 1))
    description = outer.description if outer.subtype != "IDENTITY" else inner.description
    return Transformation(DIRECT, stronger.subtype, description, outer.masking or inner.masking)


def _indirect(clause: Transformation, inner: Transformation) -> Transformation:
    """A column used in a clause of the whole query is that clause's kind, whatever it went
    through below."""
    return clause if inner.type == DIRECT else inner


def query_lineage(sql: str, *, dialect: str | None, relations: Mapping[Relation, Sequence[str]]) -> QueryLineage:
    """The column lineage of one query. ``relations`` gives the known relations' columns (for
    ``SELECT *``, unqualified columns and matching table references); raises
    :class:`UnreadableSql` when the query cannot be read."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import OptimizeError, SqlglotError
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.scope import build_scope

    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as exc:
        raise UnreadableSql(_first_line(str(exc))) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise UnreadableSql(f"expected one query, found {len(statements)} statement(s)")
    # the output columns as the query writes them, before qualify rewrites their names
    written = _written_names(statements[0], relations) if dialect in KEEPS_CASE else {}
    try:
        tree = qualify(
            statements[0],
            dialect=dialect,
            schema=_schema(relations),
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        root = build_scope(tree)
        if root is None:
            raise UnreadableSql("the query has no scope to read")
        walker = _Walker(dialect, list(relations))
        query = root.expression
        if isinstance(query, exp.Query) and any(isinstance(s, exp.Star) for s in query.selects):
            walker.note("SELECT * over a relation whose columns are unknown (run dbt docs generate for catalog.json)")
        read = tuple(name for name in query.named_selects if name != "*") if isinstance(query, exp.Query) else ()
        kept = tuple(written.get(name.casefold(), name) for name in read)  # as the warehouse keeps them
        columns = kept
        fields = {}
        for name, as_read in zip(kept, read, strict=True):
            fields[name] = _merged(walker.projection_sources(root, as_read))
        dataset = [s for scope in root.traverse() for s in walker.clause_sources(scope)]
    except UnreadableSql:
        raise
    except OptimizeError as exc:
        if _UNRESOLVED.search(str(exc)):  # read, but a column not found in what is known of the relations
            raise UnresolvedColumns(_first_line(str(exc))) from None
        raise UnreadableSql(_first_line(str(exc))) from None
    except SqlglotError as exc:
        raise UnreadableSql(_first_line(str(exc))) from None
    except Exception as exc:  # the parser on any SQL: a failure of it costs the lineage, never the ingest
        raise UnreadableSql(f"{type(exc).__name__}: {_first_line(str(exc))}") from None
    return QueryLineage(columns, fields, _merged(dataset), tuple(walker.notes))


def _written_names(query: exp.Query, relations: Mapping[Relation, Sequence[str]]) -> dict[str, str]:
    """Each name a query's output may have, as written (by its name without case): the query's
    own projections first, then those of its CTEs and subqueries (a star over them), then the
    columns of the relations it reads (a star over them), the first of each."""
    from sqlglot import exp

    found: dict[str, str] = {}
    selects = [query, *(s for s in query.find_all(exp.Select) if s is not query)]
    for select in selects:
        for name in select.named_selects:
            if name != "*":
                found.setdefault(name.casefold(), name)
    read = {table.name.casefold() for table in query.find_all(exp.Table)}
    for relation, names in relations.items():
        if relation and relation[-1].casefold() in read:
            for name in names:
                found.setdefault(name.casefold(), name)
    return found


def _merged(sources: Sequence[Source]) -> tuple[Source, ...]:
    """Each (relation, column, transformation) once, in a stable order."""
    unique = {(s.relation, s.column, s.transformation) for s in sources}
    ordered = sorted(unique, key=lambda u: (u[0], u[1], u[2].sort_key()))
    return tuple(Source(r, c, t) for r, c, t in ordered)


def transformations_by_input(sources: Sequence[Source]) -> dict[tuple[Relation, str], tuple[Transformation, ...]]:
    """The sources grouped by relation column, with all their transformations."""
    grouped: dict[tuple[Relation, str], list[Transformation]] = {}
    for s in sources:
        grouped.setdefault((s.relation, s.column), []).append(s.transformation)
    return {key: sorted_transformations(items) for key, items in grouped.items()}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unreadable SQL"
