"""Many rows in one statement on PostgreSQL: an ``executemany`` of a shared INSERT or UPDATE sent
as one statement over a JSON array of the rows (``json_to_recordset``), not one a row.

Each row of an ``executemany`` costs a statement on the server and a Bind/Execute message built in
Python on the client; the whole group goes as one JSON text, which orjson writes in C. What it
saves the receiver's writer: ``benchmarks/scale.py --parts writer --writer-groups 8 300 --warm
2000`` (figures in docs/benchmarks.md).

The forms are made from the statements themselves, for the shapes the catalog writes with:

- ``INSERT INTO t [AS a] (c1, c2, ...) VALUES (%s, %s, ...) [ON CONFLICT ...]`` becomes
  ``INSERT INTO t [AS a] (c1, c2, ...) SELECT p0, p1, ... FROM json_to_recordset(%s::json) AS
  x(p0 type, ...) [ON CONFLICT ...]``;
- ``UPDATE t SET c1 = %s, ... WHERE k1 = %s AND ...`` becomes ``UPDATE t SET c1 = x.p0, ... FROM
  (SELECT * FROM json_to_recordset(%s::json) AS x(...) LIMIT %s) AS x WHERE t.k1 = x.pN AND
  ...``, the LIMIT the rows' count (the planner's estimate of them).

The column types come from the tables both engines share (:mod:`bridge.catalog.schema`). One
statement must not change a row twice (``ON CONFLICT DO UPDATE`` refuses to, an ``UPDATE ...
FROM`` would keep one of them), where ``executemany`` changes it once a row, in order: rows
that name a key again go to a later statement (a round), so each key's rows still apply in their
order and the rows' effect is the same. Any other shape, or a value JSON cannot carry as it is (a
float that is not finite, an integer past 64 bits, bytes), goes row by row as before.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

import attrs
import orjson
import sqlalchemy as sa

from bridge.catalog import schema

BULK_FROM = 3  # rows: fewer go as executemany (one or two Bind messages, no JSON to build)

_INSERT = re.compile(
    r"^\s*INSERT\s+INTO\s+(?P<table>\w+)(?P<alias>\s+AS\s+\w+)?\s*\((?P<columns>[^)]*)\)\s*"
    r"VALUES\s*\((?P<values>[^)]*)\)(?P<rest>.*)$",
    re.S | re.I,
)
_CONFLICT_UPDATE = re.compile(r"ON\s+CONFLICT\s*\((?P<key>[^)]*)\)\s*DO\s+UPDATE", re.S | re.I)
_UPDATE = re.compile(r"^\s*UPDATE\s+(?P<table>\w+)\s+SET\s+(?P<set>.*?)\s+WHERE\s+(?P<where>.*?)\s*$", re.S | re.I)
_ASSIGN = re.compile(r"^\s*(\w+)\s*=\s*%s\s*$")


@attrs.frozen
class BulkForm:
    """A statement's one-statement form: its SQL (one parameter, the rows as JSON, and a second,
    their count, when ``counted``), the keys of each row's object, the positions of the values
    that name the row changed (None: any row may repeat one) and those of the columns that take
    floats."""

    text: str
    keys: tuple[str, ...]
    key_positions: tuple[int, ...] | None
    float_positions: tuple[int, ...]
    counted: bool = False

    def statements(self, rows: Sequence[Sequence[Any]]) -> list[tuple[str, tuple[Any, ...]]] | None:
        """The statements (this one, with each round's rows) that do what ``executemany`` of the
        rows does, or None when a value cannot go as JSON as it is: JSON holds texts, integers
        and NULLs as the columns read them; a float only where the column takes one, and finite
        (orjson writes NaN as null)."""
        if set(map(len, rows)) - {len(self.keys)}:
            return None
        kinds = set(map(type, itertools.chain.from_iterable(rows)))  # in C: no Python step a value
        if not kinds <= _PLAIN and not self._floats_fit(rows):
            return None
        rounds: list[list[Sequence[Any]]] = [list(rows)]
        if self.key_positions is not None:
            rounds = []
            seen: dict[tuple[Any, ...], int] = {}
            for row in rows:
                key = tuple(row[at] for at in self.key_positions)
                turn = seen.get(key, 0)
                seen[key] = turn + 1
                if turn == len(rounds):
                    rounds.append([])
                rounds[turn].append(row)
        keys = itertools.repeat(self.keys)
        try:  # each row an object of its keys (the lengths are checked)
            texts = [orjson.dumps(list(map(dict, map(zip, keys, chunk)))).decode() for chunk in rounds]
        except orjson.JSONEncodeError:  # an integer past 64 bits
            return None
        if self.counted:
            return [(self.text, (text, len(chunk))) for text, chunk in zip(texts, rounds, strict=True)]
        return [(self.text, (text,)) for text in texts]

    def _floats_fit(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Whether every value but texts, integers and NULLs is a finite float of a column that
        takes floats."""
        floats = self.float_positions
        for row in rows:
            for at, value in enumerate(row):
                if value is None or type(value) is str or type(value) is int:
                    continue
                if type(value) is float and at in floats and math.isfinite(value):
                    continue
                return False
        return True


_PLAIN = {type(None), str, int}  # what JSON carries as any column reads it


def _sql_type(table: str, column: str) -> str | None:
    found = schema.metadata.tables.get(table)
    if found is None or column not in found.c:
        return None
    kind = found.c[column].type
    if isinstance(kind, sa.Integer):
        return "bigint"
    if isinstance(kind, sa.Float | sa.Double):
        return "double precision"
    if isinstance(kind, sa.String):
        return "text"
    return None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def _record(table: str, columns: Sequence[str]) -> tuple[str, tuple[str, ...], tuple[int, ...]] | None:
    """The ``AS x(p0 type, ...)`` of the rows, their keys and the float columns' positions."""
    types = [_sql_type(table, column) for column in columns]
    if any(kind is None for kind in types):
        return None
    keys = tuple(f"p{at}" for at in range(len(columns)))
    record = ", ".join(f"{key} {kind}" for key, kind in zip(keys, types, strict=True))
    floats = tuple(at for at, kind in enumerate(types) if kind == "double precision")
    return f"json_to_recordset(%s::json) AS x({record})", keys, floats


def bulk_form(statement: str) -> BulkForm | None:
    """The one-statement form of a PostgreSQL statement (``%s`` placeholders), or None for a
    shape it has none of."""
    insert = _INSERT.match(statement)
    if insert is not None:
        table, columns = insert["table"], _names(insert["columns"])
        if _names(insert["values"]) != ["%s"] * len(columns) or "%s" in insert["rest"]:
            return None
        made = _record(table, columns)
        if made is None:
            return None
        source, keys, floats = made
        conflict = _CONFLICT_UPDATE.search(insert["rest"])
        positions: tuple[int, ...] | None = None
        if conflict is not None:
            named = _names(conflict["key"])
            if not set(named) <= set(columns):
                return None
            positions = tuple(columns.index(name) for name in named)
        text = (
            f"INSERT INTO {table}{insert['alias'] or ''} ({', '.join(columns)}) "
            f"SELECT {', '.join(keys)} FROM {source}{insert['rest']}"
        )
        return BulkForm(text, keys, positions, floats)
    update = _UPDATE.match(statement)
    if update is not None:
        table = update["table"]
        assigned = [_ASSIGN.match(part) for part in update["set"].split(",")]
        conditions = [_ASSIGN.match(part) for part in re.split(r"\s+AND\s+", update["where"], flags=re.I)]
        if any(m is None for m in (*assigned, *conditions)):
            return None
        targets = [m[1] for m in assigned if m is not None]
        wheres = [m[1] for m in conditions if m is not None]
        if set(targets) & set(wheres):  # one row's change would move what a later row matches
            return None
        made = _record(table, [*targets, *wheres])
        if made is None:
            return None
        source, keys, floats = made
        sets = ", ".join(f"{column} = x.{key}" for column, key in zip(targets, keys, strict=False))
        matches = " AND ".join(
            f"{table}.{column} = x.{key}" for column, key in zip(wheres, keys[len(targets) :], strict=True)
        )
        positions = tuple(range(len(targets), len(keys)))
        # the rows joined to the table with their count as a LIMIT: the planner takes a function's
        # rows for 100 whatever it returns, and for a few rows on a small table chose to hash them
        # and read the whole table rather than find each by the key (an UPDATE is planned with
        # its parameters each time: a group of six bindings took 1.06 ms, now 0.18)
        limited = f"(SELECT * FROM {source} LIMIT %s) AS x"
        text = f"UPDATE {table} SET {sets} FROM {limited} WHERE {matches}"
        return BulkForm(text, keys, positions, floats, counted=True)
    return None


def copy_form(statement: str) -> str | None:
    """The ``COPY ... FROM STDIN`` that writes the rows of ``INSERT INTO t (c1, ...) VALUES (%s,
    ...) [ON CONFLICT DO NOTHING]`` when none of them is in the table yet; None for any other
    shape."""
    insert = _INSERT.match(statement)
    if (
        insert is None
        or insert["alias"]
        or not re.fullmatch(r"\s*(ON\s+CONFLICT\s+DO\s+NOTHING\s*)?", insert["rest"], re.I)
    ):
        return None
    columns = _names(insert["columns"])
    if _names(insert["values"]) != ["%s"] * len(columns):
        return None
    return f"COPY {insert['table']} ({', '.join(columns)}) FROM STDIN"


_FORMS: dict[str, BulkForm | None] = {}  # each PostgreSQL statement's form, made once


def bulk_statements(statement: str, rows: Sequence[Sequence[Any]]) -> list[tuple[str, tuple[Any, ...]]] | None:
    """The statements that write ``rows`` as ``executemany(statement, rows)`` would, in a few
    statements, or None where it should go row by row (few rows, a shape without a bulk form, a
    value JSON cannot carry)."""
    if len(rows) < BULK_FROM:
        return None
    if statement not in _FORMS:
        _FORMS[statement] = bulk_form(statement)
    form = _FORMS[statement]
    return form.statements(rows) if form is not None else None


__all__ = ["BULK_FROM", "BulkForm", "bulk_form", "bulk_statements", "copy_form"]
