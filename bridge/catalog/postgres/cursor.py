"""PostgreSQL's cursor: it takes the shared statements (SQLite's dialect, ``?`` placeholders) and
says them in PostgreSQL's, each translated once: ``?`` becomes ``%s``, and :data:`FRAGMENTS` and
:data:`STATEMENTS` say what PostgreSQL says otherwise. Many point lookups go as one lookup
(:mod:`bridge.catalog.postgres.lookups`), many rows as a few statements
(:mod:`bridge.catalog.postgres.bulk`), many new rows by ``COPY``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from bridge.catalog import sql as shared
from bridge.catalog import sql_received
from bridge.catalog.engine import Conflict
from bridge.catalog.postgres.bulk import bulk_statements, copy_form
from bridge.catalog.postgres.lookups import (
    by_day_form,
    days_of,
    list_form,
    list_param,
    pairs_form,
    pairs_param,
    probes_form,
)

# SQLite's fragments, and PostgreSQL's for them
FRAGMENTS: tuple[tuple[str, str], ...] = (
    (shared.LOCK, " FOR UPDATE"),
    (shared.SKIP_LOCKED, " FOR UPDATE SKIP LOCKED"),
    (shared.NOW, """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""),
    (shared.EPOCH, "CAST(extract(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)"),
    (shared.CHANGE_NAMESPACE, "(snapshot::jsonb ->> 'namespace')"),
    (shared.RETRY_INDEX, ""),  # PostgreSQL's planner finds the partial index itself
    (shared.ALERTS_INDEX, ""),  # and this one
    (shared.SEARCH_TERM, "term ILIKE ?"),
    # the GLOB pattern in LIKE's words (chr(63) is "?", which would be taken for a placeholder)
    (
        shared.NAMESPACE_GLOB,
        " LIKE replace(replace(replace(replace(replace(replace(?, '\\', '\\\\'), '%', '\\%'), '_', '\\_'),"
        " '*', '%'), chr(63), '_'), '[[]', '[') ESCAPE '\\'",
    ),
    (shared.COUNT_STEPS, shared.COUNT_STEP_BY_VIEW),  # one recursive reference a step
)

# whole statements PostgreSQL says otherwise: SQLite's min() and max() of two values are LEAST and
# GREATEST (the values here are never NULL where the two differ on NULLs)
STATEMENTS: dict[str, str] = {
    sql_received.UPSERT_SOURCE: sql_received.UPSERT_SOURCE.replace("= max(", "= GREATEST(").replace(
        "= min(", "= LEAST("
    ),
    **shared.WALKS_BY_VIEW,  # one recursive reference a step
}


# reads that go as one lookup at any size, a probe of the key a tuple (:func:`probes_form`): the
# receiver's check of which usages and edges of a group are stored already, each by its whole
# key. As an OR of up to 64 tuples, the server read the whole table and tested the OR on every
# row (a kept plan or one made for the values alike), a cost that grew with the table: 6 ms a
# group of 100 events on 20 popular tables, whatever the group's size (`benchmarks/scale.py
# --popular 20`); as an IN of the tuples as JSON, it hashed the whole table while it was small
# (4 ms a group of 400 events), or took another index of the key's columns and read every row
# of a popular dataset's, while the table's statistics were young
# ... and the lookups of a partitioned table's key (lookups.by_day_form), which as an OR of pairs
# were planned at every call (no kept plan prunes partitions) for every partition, 0.18 ms a
# group of 10 events with a new catalog's 8 partitions
ALWAYS_LOOKUP = frozenset(
    statement(width)
    for statement in (
        sql_received.usages_of,
        sql_received.edges_of,
        sql_received.received_digests,
        sql_received.sources_of,
        sql_received.locked_sources_of,
    )
    for width in (1, 4, 16, 64, 256)
)


def translate(statement: str, *, parameters: bool = True) -> str:
    """A shared statement (SQLite's dialect, ``?`` placeholders) in PostgreSQL's (``%s``); without
    ``parameters``, a statement that is sent as it is (no placeholder, no ``%`` to double)."""
    cache = _TRANSLATED if parameters else _TRANSLATED_PLAIN
    found = cache.get(statement)
    if found is None:
        text = STATEMENTS.get(statement, statement)
        for sqlite_text, postgres_text in FRAGMENTS:
            text = text.replace(sqlite_text, postgres_text)
        if parameters:
            text = text.replace("%", "%%").replace("?", "%s")
        cache[statement] = found = text
    return found


_TRANSLATED: dict[str, str] = {}
_TRANSLATED_PLAIN: dict[str, str] = {}


# each statement's lookup form (None: it has none), the width of its tuples (0: a list), and the
# partition key whose days the lookup takes, with its place in a tuple (None: none; lookups.by_day_form)
_LOOKUPS: dict[str, tuple[str | None, int, tuple[str, int] | None]] = {}
# up to this many parameters (of a group's chunks of 1, 4, 16, 64 or 256 keys, those of 16 pairs
# at most) the OR of index probes costs the least; above, the JSON array. The receiver's writer
# alone, CPU us an event of olbridge + PostgreSQL, in groups of 8 and 300 (`benchmarks/scale.py
# --parts writer --writer-groups 8 300 --warm 2000`, run with this constant at 128 and at 16):
# 186 + 275 and 65 + 73 with OR'd lookups up to 64 pairs, against 224 + 345 and 66 + 82 from 8
# pairs on. Not past 50: psycopg keeps the conversion of a query of up to 50 parameters and
# converts a longer one anew at every call, about 0.8 ms of Python for 64 pairs; at 50 against
# 128, groups of 64 and 100 took 77-81 and 73-77 us an event of olbridge's, not 118 and 89-105,
# and PostgreSQL's 161-192 and 140-160, not 222-237 and 190-195 (`--writer-groups 8 64 100 300`,
# twice each); groups of 8 the same
PAIRS_FROM = 50


class SharedCursor(psycopg.Cursor[Any]):
    """psycopg's cursor, taking the shared statements: each translated once (:func:`translate`)."""

    def execute(  # type: ignore[override]
        self,
        query: str,
        params: Sequence[Any] | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> SharedCursor:
        text = translate(query, parameters=params is not None)
        if params is not None and (
            len(params) > PAIRS_FROM or query in ALWAYS_LOOKUP
        ):  # many point lookups: one lookup
            if text not in _LOOKUPS:
                by_day = by_day_form(text)
                pairs = (probes_form(text) if query in ALWAYS_LOOKUP else None) or pairs_form(text)
                if by_day is not None:
                    _LOOKUPS[text] = (by_day[0], by_day[0].count("x->>"), by_day[1:])
                elif pairs is not None:
                    _LOOKUPS[text] = (pairs, pairs.count("x->>"), None)
                else:
                    _LOOKUPS[text] = (list_form(text), 0, None)
            lookup, width, key = _LOOKUPS[text]
            values: tuple[str, ...] | None = None
            if lookup is not None:
                values = pairs_param(params, width) if width else list_param(params)
            if lookup is not None and values is not None and key is not None:
                lookup, days = days_of(lookup, key[0], params, width, key[1])
                values = (*values, *days)
            if lookup is not None and values is not None:
                # planned for each call, never from a plan the server keeps: a kept plan is made
                # once, maybe while the table was small (a hash join over the whole table), and
                # kept as the table grows
                super().execute(lookup, values, prepare=False, binary=binary)
                return self
        super().execute(text, params, prepare=prepare, binary=binary)
        return self

    def executemany(  # type: ignore[override]
        self, query: str, params_seq: Iterable[Sequence[Any]], *, returning: bool = False
    ) -> None:
        super().executemany(translate(query), params_seq, returning=returning)

    def write_many(self, query: str, rows: Sequence[Sequence[Any]]) -> int:
        """``executemany`` of a shared statement, in a few statements where it has a bulk form
        (:mod:`bridge.catalog.postgres.bulk`); the count of rows written (outside a pipeline)."""
        return sum(max(each.rowcount, 0) for each in self.send_many(query, rows))

    def send_many(self, query: str, rows: Sequence[Sequence[Any]]) -> list[psycopg.Cursor[Any]]:
        """:meth:`write_many`'s statements, each on a cursor of its own, whose counts add up to
        the rows written once they are known (in a pipeline: once it is synced)."""
        text = translate(query)
        bulk = bulk_statements(text, rows)
        if bulk is None:
            each = self.connection.cursor()
            psycopg.Cursor.executemany(each, text, rows)  # its count: every row's, added up
            return [each]
        cursors = []
        for statement, params in bulk:
            each = self.connection.cursor()
            _execute_bulk(each, statement, params)
            cursors.append(each)
        return cursors

    def copy_rows(self, copy: str, rows: Sequence[Sequence[Any]]) -> None:
        """Rows streamed in by ``copy`` (a ``COPY ... FROM STDIN``) that the table holds none of
        yet, as the transaction read it: a duplicate key fails it, a :class:`Conflict` (another
        process wrote one meanwhile)."""
        try:
            with self.copy(copy) as stream:
                for row in rows:
                    stream.write_row(row)
        except psycopg.errors.UniqueViolation as exc:
            raise Conflict("another process wrote some of these rows meanwhile") from exc


def _execute_bulk(cur: psycopg.Cursor[Any], statement: str, params: tuple[Any, ...]) -> None:
    """One statement of a bulk form (:mod:`bridge.catalog.postgres.bulk`), already translated."""
    # an UPDATE joins its rows to the table: planned each time, as the lookups are
    psycopg.Cursor.execute(cur, statement, params, prepare=False if statement.startswith("UPDATE") else None)


# from this many rows, COPY costs the server less than an INSERT of them as JSON, which it parses
# and checks for a conflict row by row; below, the round trip COPY takes more costs more than that
COPY_FROM = 32
_COPIES: dict[str, str | None] = {}  # each statement's COPY form (None: it has none)


def copy_form_of(statement: str) -> str | None:
    """The ``COPY ... FROM STDIN`` form of a shared INSERT (None: it has none), made once each."""
    text = translate(statement)
    if text not in _COPIES:
        _COPIES[text] = copy_form(text)
    return _COPIES[text]


__all__ = ["COPY_FROM", "FRAGMENTS", "PAIRS_FROM", "STATEMENTS", "SharedCursor", "copy_form_of", "translate"]
