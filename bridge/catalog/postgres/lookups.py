"""The preloads' point lookups on PostgreSQL: an OR of pairs, or a long ``IN`` list, as one lookup
of a JSON array.

The receiver's writer reads what a group of events touches in a few statements, each an OR of
point lookups on a pair of columns (``(event_time = ? AND digest = ?) OR ...``: SQLite answers
each from the primary key, and a row-value ``IN`` over ``VALUES`` would scan its table). On
PostgreSQL a few hundred OR'd pairs cost the planner and the executor a condition each; the same
pairs given as one JSON array, ``(a, b) IN (SELECT x->>0, x->>1
FROM jsonb_array_elements(...) x)``, are one index probe each and one plan for any number of
pairs. The PostgreSQL cursor runs the shared statements that have this shape so
(:func:`pairs_form`), with the same rows found. A long ``IN (?, ?, ...)`` list of texts goes the
same way (:func:`list_form`): a statement of hundreds of placeholders is one the driver cannot
cache and parses again each time. The values go as one
JSON text, which orjson writes in C, rather than as arrays the driver writes value by value in
Python.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from bridge.catalog.sql import PARTITIONED

# (a = %s AND b = %s) OR (a = %s AND b = %s) ... (two columns or more: an edge's whole key is four)
_ONE = re.compile(r"\((\w+ = %s(?: AND \w+ = %s)+)\)")


def pairs_form(translated: str) -> str | None:
    """A translated statement whose only parameters are an OR of point lookups on two text
    columns or more (pairs, or an edge's four), as one lookup of the tuples given as one JSON
    array; None: not such a statement."""
    first = _ONE.search(translated)
    if first is None:
        return None
    columns = [part.split(" = ")[0] for part in first.group(1).split(" AND ")]
    one = first.group(0)
    end = first.end()
    while translated.startswith(" OR " + one, end):
        end += len(" OR " + one)
    if translated.count("%s") != translated[first.start() : end].count("%s"):
        return None
    picked = ", ".join(f"x->>{at}" for at in range(len(columns)))
    lookup = f"({', '.join(columns)}) IN (SELECT {picked} FROM jsonb_array_elements(%s::jsonb) AS x)"
    return translated[: first.start()] + lookup + translated[end:]


_SELECT = re.compile(r"\s*SELECT ([\w, ]+) FROM (\w+) WHERE ")


def probes_form(translated: str) -> str | None:
    """A translated ``SELECT columns FROM table WHERE`` an OR of point lookups on a unique key of
    the table (its whole key: at most one row a tuple), as one probe of the key a tuple, the
    tuples given as one JSON array (:func:`pairs_param`); None: not such a statement.

    Unlike :func:`pairs_form`'s ``IN``, which the planner may answer by hashing the whole table
    (it takes the array for 100 rows, and a small table for cheaper to read whole: a cost a
    statement that grows with the table), a ``LATERAL`` subquery with a ``LIMIT`` is a nested
    loop: each tuple one look in an index, whatever the table's size."""
    head = _SELECT.match(translated)
    lookup = pairs_form(translated)
    if head is None or lookup is None or not lookup.endswith("AS x)") or "%s" in translated[: head.end()]:
        return None
    first = _ONE.match(translated, head.end())
    if first is None:
        return None
    columns = [part.split(" = ")[0] for part in first.group(1).split(" AND ")]
    probe = " AND ".join(f"{column} = x->>{at}" for at, column in enumerate(columns))
    return (
        f"SELECT k.* FROM jsonb_array_elements(%s::jsonb) AS x CROSS JOIN LATERAL "
        f"(SELECT {head.group(1)} FROM {head.group(2)} WHERE {probe} LIMIT 1) AS k"
    )


# the unique key of each partitioned table (a partitioned table's holds its partition key)
PARTITIONED_KEYS = {"received_events": ("event_time", "digest"), "external_sources": ("source", "run_day")}
_HEAD = re.compile(r"\s*SELECT ([\w,\s]+?)\s+FROM (\w+) WHERE ")
_LOCKED = re.compile(r"\s+ORDER BY (\w+(?:, \w+)*) FOR UPDATE")  # columns alone: ascending
_DAYS = "{days}"  # where a lookup by day takes its days' ranges
DAYS_AT_MOST = 8  # days a lookup names one by one; more: the range from the first to the last


def by_day_form(translated: str) -> tuple[str, str, int] | None:
    """A translated ``SELECT columns FROM table WHERE`` an OR of point lookups on the unique key of a
    partitioned table (:data:`PARTITIONED_KEYS`, by day: :data:`bridge.catalog.sql.PARTITIONED`),
    maybe then ``ORDER BY ... FOR UPDATE``, as :func:`probes_form`'s probe of the key a tuple,
    that takes the days of the tuples' keys too (:func:`days_of`); with the partition key, and
    its place in a tuple. None: not such a statement.

    The tuples come from a JSON array, which tells the planner nothing of the partitions they are
    in: without the days it plans every partition of the table, and probes every one for each
    tuple, a cost that grew with the days kept (received events' by event time, runs' by run
    day); with them, the lookup planned for its values at each call, only those days'
    partitions are. A probe, not an ``IN``: with the days in an ``IN``, the planner took them
    for a condition to read the table by, and read the whole partition of the undated runs (as
    all of them have the day ''). Locked, each row is locked as it is probed, in the order of the
    tuples (sorted, as the shared statement's ORDER BY locks them)."""
    head = _HEAD.match(translated)
    if head is None or head.group(2) not in PARTITIONED_KEYS or "%s" in translated[: head.end()]:
        return None
    if head.group(1).split()[0].upper() == "DISTINCT":  # across all rows, not a probe's
        return None
    table = head.group(2)
    first = _ONE.match(translated, head.end())
    if first is None:
        return None
    columns = [part.split(" = ")[0] for part in first.group(1).split(" AND ")]
    if sorted(columns) != sorted(PARTITIONED_KEYS[table]):
        return None
    one, end = first.group(0), first.end()
    while translated.startswith(" OR " + one, end):
        end += len(" OR " + one)
    locked = _LOCKED.fullmatch(translated, end)
    if translated[end:].strip() and locked is None:
        return None
    selected = ", ".join(part.strip() for part in head.group(1).split(","))
    probe = " AND ".join(f"{column} = x->>{at}" for at, column in enumerate(columns))
    order = ", ".join(f"k.{column.strip()}" for column in locked.group(1).split(",")) if locked else ""
    key = PARTITIONED[table]
    text = (
        f"SELECT k.* FROM jsonb_array_elements(%s::jsonb) AS x CROSS JOIN LATERAL "
        f"(SELECT {selected} FROM {table} WHERE {probe} AND ({_DAYS}) LIMIT 1{' FOR UPDATE' if locked else ''}) AS k"
        + (f" ORDER BY {order}" if locked else "")
    )
    return text, key, columns.index(key)


def days_of(lookup: str, key: str, params: Sequence[Any], width: int, at: int) -> tuple[str, tuple[str, ...]]:
    """A :func:`by_day_form` lookup of the tuples of ``params`` (``width`` a tuple, the partition key
    ``key`` the ``at``-th), and the parameters of its days: a range of the keys of each day (their
    first ten characters: a day, or a run day), each the least to the greatest key of the
    tuples of that day, OR'd; more than :data:`DAYS_AT_MOST` days, one range, from the least
    key to the greatest."""
    values = params[at::width]  # texts (pairs_param)
    days = sorted({value[:10] for value in values})
    if len(days) == 1 or len(days) > DAYS_AT_MOST:
        ranges = [(min(values), max(values))]
    else:
        by_day: dict[str, list[str]] = {day: [] for day in days}
        for value in values:
            by_day[value[:10]].append(value)
        ranges = [(min(keys), max(keys)) for keys in by_day.values()]
    condition = " OR ".join(f"{key} BETWEEN %s AND %s" for _ in ranges)
    return lookup.replace(_DAYS, condition), tuple(bound for pair in ranges for bound in pair)


def pairs_param(params: Sequence[Any], width: int = 2) -> tuple[str] | None:
    """The tuples' parameters (a1, b1, a2, b2, ...) as the JSON array of :func:`pairs_form`, when
    every one is a text (the form compares texts); None otherwise."""
    if not _texts(params):
        return None
    # each tuple once, in their order (a group's chunks are padded with repeats): a probe of each
    # would find its row as many times
    tuples = dict.fromkeys(zip(*[iter(params)] * width, strict=True))
    return (orjson.dumps(list(tuples)).decode(),)


_TEXT = {str}


def _texts(params: Sequence[Any]) -> bool:
    """Whether every one of ``params`` is a text (their types read in C first: thousands a group)."""
    return set(map(type, params)) <= _TEXT or all(isinstance(value, str) for value in params)


# a IN (%s, %s, ...)
_LIST = re.compile(r"(\w+) IN \(%s(?:, %s)*\)")


def list_form(translated: str) -> str | None:
    """A translated statement whose only parameters are one ``IN`` list, as one lookup of the
    values given as a JSON array of texts; None: not such a statement."""
    found = _LIST.search(translated)
    if found is None or translated.count("%s") != found.group(0).count("%s"):
        return None
    lookup = f"{found.group(1)} IN (SELECT jsonb_array_elements_text(%s::jsonb))"
    return translated[: found.start()] + lookup + translated[found.end() :]


def list_param(params: Sequence[Any]) -> tuple[str] | None:
    """The values as the JSON array of :func:`list_form`, when every one is a text (the form
    compares texts); None otherwise."""
    if not _texts(params):
        return None
    return (orjson.dumps(list(params)).decode(),)


__all__ = ["by_day_form", "days_of", "list_form", "list_param", "pairs_form", "pairs_param", "probes_form"]
