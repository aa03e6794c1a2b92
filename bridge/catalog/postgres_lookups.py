"""The preloads' point lookups on PostgreSQL: an OR of pairs as one lookup of two arrays.

The receiver's writer reads what a group of events touches in a few statements, each an OR of
point lookups on a pair of columns (``(event_time = ? AND digest = ?) OR ...``: SQLite answers
each from the primary key, and a row-value ``IN`` over ``VALUES`` would scan its table). On
PostgreSQL a few hundred OR'd pairs cost the planner and the executor a condition each, about
4 ms for 256 pairs; the same pairs given as two arrays, ``(a, b) IN (SELECT * FROM unnest(...))``,
are one index probe each and one plan for any number of pairs. The PostgreSQL cursor runs the
shared statements that have this shape so (:func:`pairs_form`), with the same rows found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# (a = %s AND b = %s) OR (a = %s AND b = %s) ...
_PAIRS = re.compile(r"\((\w+) = %s AND (\w+) = %s\)(?: OR \(\1 = %s AND \2 = %s\))*")


def pairs_form(translated: str) -> str | None:
    """A translated statement whose only parameters are an OR of point lookups on a pair of text
    columns, as one lookup of the pairs given as two arrays; None: not such a statement."""
    found = _PAIRS.search(translated)
    if found is None or translated.count("%s") != found.group(0).count("%s"):
        return None
    first, second = found.group(1), found.group(2)
    lookup = f"({first}, {second}) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
    return translated[: found.start()] + lookup + translated[found.end() :]


def pair_columns(params: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The pairs' parameters (a1, b1, a2, b2, ...) as the two arrays of :func:`pairs_form`."""
    return list(params[0::2]), list(params[1::2])


__all__ = ["pair_columns", "pairs_form"]
