"""JSON text to values by one set of rules, wherever olbridge reads JSON from outside (the
receiver's bodies, the files ``import``, ``validate`` and ``record`` read): orjson's, which refuses
NaN and Infinity, lone surrogates and nesting deeper than 1,024, with integers read exactly
whatever their size. Pure."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# a run of 16 digits shows as 16 zeros once every digit is a zero and everything else a space
# (bytes.translate and a substring search: a few times faster than a regular expression here)
_DIGITS_ONLY = bytes(ord("0") if chr(i).isdigit() and i < 128 else ord(" ") for i in range(256))
_LONG_NUMBER = b"0" * 16


EXACT_DEPTH = 256  # nesting the standard library reads well within Python's recursion limit
DEPTH = 64  # the nesting of objects and arrays an event may have, unless told otherwise
MAX_DEPTH = 254  # the most that can be allowed: what orjson writes (events' canonical text)


def parse_json(body: bytes) -> Any:
    """UTF-8 JSON text to values, by one set of rules whatever the text holds: orjson's (no NaN
    or Infinity, no lone surrogates, nothing nested deeper than 1,024; a ``ValueError`` for text
    it refuses). Where the text holds a run of 16 or more digits, which orjson would read as a
    float (losing digits of an integer), the text orjson took is read again by the standard
    library for its exact integers: the whole of it, or each element of an array on its own when
    it nests deeper than :data:`EXACT_DEPTH` (those elements keep orjson's reading: nested that
    deep, no event is taken)."""
    value = orjson.loads(body)
    if _LONG_NUMBER not in body.translate(_DIGITS_ONLY):
        return value
    if nesting(value, EXACT_DEPTH) is None:
        return json.loads(body.decode("utf-8"))
    if isinstance(value, list):
        return [
            json.loads(piece.decode("utf-8")) if nesting(item, EXACT_DEPTH) is None else item
            for item, piece in zip(value, split_array(body), strict=True)
        ]
    return value


# a JSON string of text, whole, escapes included (the unrolled form: no backtracking per character)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# JSON text with its strings blanked out, to its brackets alone, each written [ or ]
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(i for i in range(256) if i not in b"[]{}")


def _bare(text: str) -> str:
    """JSON text with each string blanked out (``""``): what is left has brackets and commas only
    where they are JSON's, and is ASCII."""
    return _STRING.sub('""', text) if '"' in text else text


def values_past(text: str, limit: int) -> int | None:
    """The number of JSON values in ``text`` (valid JSON text: every object, array, string,
    number, ``true``, ``false`` and ``null``, the outermost one too; an object's keys are not
    values) when it is more than ``limit``, else None. Counted in the text, never walking a parsed
    value: by three ``str.count`` when that bounds it (the usual event), else with its strings
    blanked out, as each non-empty object or array holds one value more than its commas."""
    if 1 + text.count(",") + text.count("[") + text.count("{") <= limit:
        return None
    bare = _bare(text)
    containers = bare.count("[") + bare.count("{") - bare.count("[]") - bare.count("{}")
    count = 1 + bare.count(",") + containers
    return count if count > limit else None


def nested_past(text: str, limit: int) -> bool:
    """Whether valid JSON ``text`` nests objects and arrays deeper than ``limit``: its brackets
    alone, from which each pass takes the innermost pairs (a level) away; what is left after
    ``limit`` passes is deeper. Work in C over the text, at most ``limit`` passes of what is left."""
    if text.count("[") + text.count("{") <= limit:  # no deeper than it has brackets
        return False
    brackets = _bare(text).encode("ascii").translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def nesting(value: Any, limit: int) -> int | None:
    """The depth past ``limit`` that ``value`` nests objects and arrays to (``limit + 1``), or
    None when it nests no deeper than ``limit`` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


# what matters to the nesting of JSON text: strings (whole, escapes included) and brackets and commas
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[][{},]')
_JSON_SPACE = b" \t\r\n"


def split_array(body: bytes) -> list[bytes]:
    """The text of each element of a JSON array, as it is in ``body`` (valid JSON text holding
    an array: the caller parsed it), without the whitespace around it."""
    elements: list[bytes] = []
    depth = 0
    start = 0
    for match in _JSON_TOKENS.finditer(body):
        char = body[match.start()]
        if char == 0x22:  # a string: brackets and commas in it mean nothing
            continue
        if char in b"[{":
            depth += 1
            if depth == 1:
                start = match.end()
        elif char in b"]}":
            depth -= 1
            if depth == 0:
                piece = body[start : match.start()].strip(_JSON_SPACE)
                if piece or elements:
                    elements.append(piece)
                break
        elif depth == 1:  # a comma between two elements
            elements.append(body[start : match.start()].strip(_JSON_SPACE))
            start = match.end()
    return elements


def json_type(value: Any) -> str:
    """What a JSON value is, for a message: ``"null"``, ``"a boolean"``, ``"a number"``,
    ``"a string"``, ``"an array"``, ``"an object"`` (a value JSON has no word for: its type's name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
