"""The namespaces of a table that a token sees, read by an index that leads with them: where a page
that passes over rows a token does not see stops, it goes on from the first row of its own past
there, found by those namespaces' indexes, so that its next link names and dates nothing of
another namespace (:mod:`bridge.catalog.health_kept`, :mod:`bridge.catalog.browse`).

Each namespace is read by one probe of the index, a value at a time from the text before the
first wildcard of each of the token's patterns (a pattern with none is a namespace itself, read
by no probe): what it costs follows the namespaces that text begins, not the rows they hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from bridge.catalog.engine import Connection, Cursor

# above every character: the values that begin with a text lie in [text, text + TOP) (byte order
# on both engines, as bridge.catalog.browse's prefixes)
TOP = "\U0010ffff"
_WILDCARD = re.compile(r"[*?]")
# the first value of a column in a range, by an index that leads with it
_FIRST = "SELECT {column} FROM {table} WHERE {column} >= ? AND {column} < ? ORDER BY {column} LIMIT 1"
_NEXT = "SELECT {column} FROM {table} WHERE {column} > ? AND {column} < ? ORDER BY {column} LIMIT 1"


def namespaces_seen(
    conn: Connection | Cursor,
    table: str,
    column: str,
    patterns: Sequence[str],
    allows: Callable[[str], bool],
    *,
    prefix: str = "",
) -> list[str]:
    """The values of ``column`` (in ``table``, an index leading with it) whose namespace,
    ``prefix`` put before the value (olbridge's job namespaces: the flow's), ``allows`` lets
    through, sorted; read within the ranges ``patterns`` (a token's) may match. A pattern
    without a wildcard gives its value unread: one no row holds finds no row after."""
    first, after = (q.format(table=table, column=column) for q in (_FIRST, _NEXT))
    found: set[str] = set()
    for pattern in patterns:
        literal = _WILDCARD.split(pattern, maxsplit=1)[0]
        if literal == pattern:
            if pattern.startswith(prefix) and allows(pattern):
                found.add(pattern[len(prefix) :])
            continue
        if literal.startswith(prefix):
            low = literal[len(prefix) :]
        elif prefix.startswith(literal):  # the text is within the prefix: any value may match
            low = ""
        else:
            continue
        high = low + TOP
        row = conn.execute(first, (low, high)).fetchone()
        while row is not None:
            value = str(row[0])
            if allows(prefix + value):
                found.add(value)
            row = conn.execute(after, (value, high)).fetchone()
    return sorted(found)


def newest_of(conn: Connection | Cursor, statement: str, namespaces: Sequence[str], params: Sequence[Any]) -> Any:
    """The greatest row (by its columns in order) of ``statement``, asked once a namespace (its
    first parameter, then ``params``): the newest row past a place of any namespace seen; None:
    none of them has one."""
    rows = [conn.execute(statement, [namespace, *params]).fetchone() for namespace in namespaces]
    return max((tuple(row) for row in rows if row is not None), default=None)


__all__ = ["namespaces_seen", "newest_of"]
