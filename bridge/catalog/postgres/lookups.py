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


def pairs_param(params: Sequence[Any], width: int = 2) -> tuple[str] | None:
    """The tuples' parameters (a1, b1, a2, b2, ...) as the JSON array of :func:`pairs_form`, when
    every one is a text (the form compares texts); None otherwise."""
    if not all(isinstance(value, str) for value in params):
        return None
    return (orjson.dumps([params[at : at + width] for at in range(0, len(params), width)]).decode(),)


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
    if not all(isinstance(value, str) for value in params):
        return None
    return (orjson.dumps(list(params)).decode(),)


__all__ = ["list_form", "list_param", "pairs_form", "pairs_param", "probes_form"]
