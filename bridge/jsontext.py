"""JSON text to values by one set of rules, wherever olbridge reads JSON from outside (the
receiver's bodies, the files ``import``, ``validate`` and ``record`` read): orjson's, which refuses
NaN and Infinity, lone surrogates and nesting deeper than 1,024, with integers of up to
:data:`MAX_DIGITS` digits read exactly. Pure."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# a run of 16 digits shows as 16 zeros once every digit is a zero and everything else a space
# (bytes.translate and a substring search: a few times faster than a regular expression here)
_DIGITS_ONLY = bytes(ord("0") if chr(i).isdigit() and i < 128 else ord(" ") for i in range(256))
_LONG_NUMBER = b"0" * 16
# a run of digits that, as an integer, orjson reads as a double past its range, and refuses (one
# that goes on as a float's is past that range as a float too: refused all the same)
# (possessive, from the run's first digit: read once, whatever its length)
_PAST_DOUBLES = re.compile(rb"(?<![0-9])[0-9]{309,}+(?![.eE])")
_PAST_DOUBLES_RUN = b"0" * 309  # such a run, as _DIGITS_ONLY shows it

# the digits of an integer read exactly, at most: far past any a producer sends (OpenLineage's
# counts are 64-bit: 20 digits), and what Jackson (2.15 and later) reads of a number by default;
# within CPython's 4,300, and cheap (reading n digits takes time in n squared: 1,000 take 5 us, no
# more a byte than other JSON; 4,300 take 85 us)
MAX_DIGITS = 1_000
_TOO_LONG = b"0" * (MAX_DIGITS + 1)  # a run of more digits, as _DIGITS_ONLY shows it (in a string, it may be)

EXACT_DEPTH = 256  # nesting the standard library reads well within Python's recursion limit
DEPTH = 64  # the nesting of objects and arrays an event may have, unless told otherwise
MAX_DEPTH = 254  # the most that can be allowed: what orjson writes (events' canonical text)


def parse_json(body: bytes) -> Any:
    """UTF-8 JSON text to values, by one set of rules whatever the text holds: orjson's (no NaN
    or Infinity, no lone surrogates, nothing nested deeper than 1,024; a ``json.JSONDecodeError``
    for text it refuses). Where the text holds a run of 16 or more digits, which orjson would
    read as a float (losing digits of an integer) or refuse (309 digits or more: past a double's
    range), the text is read again by the standard library for its exact integers, of at most
    :data:`MAX_DIGITS` digits (a longer one is a ``json.JSONDecodeError`` saying where): the
    whole of it, or each element of an array on its own when it nests deeper than
    :data:`EXACT_DEPTH` (those elements keep orjson's reading: nested that deep, no event is
    taken)."""
    checks: dict[str, Any] = {}  # the standard library's reading checked where it may pass orjson's
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        # (the run looked for by translate and a substring search first: the pattern, though it
        # reads a run once, takes seconds over tens of MB of anything, on the receiver's loop)
        if _PAST_DOUBLES_RUN not in body.translate(_DIGITS_ONLY) or _PAST_DOUBLES.search(body) is None:
            raise
        # orjson's rules, but for such a run: checked on the text with each cut to its first four
        # digits (a \uXXXX escape's) and the rest blank, so that its errors say where in the body;
        # an exponent so cut may hide a float past a double's range, which the reading refuses
        value = orjson.loads(_PAST_DOUBLES.sub(lambda run: run[0][:4] + b" " * (len(run[0]) - 4), body))
        checks["parse_float"] = _float
    digits = body.translate(_DIGITS_ONLY)
    if not checks and _LONG_NUMBER not in digits:
        return value
    if _TOO_LONG in digits:  # checked by a Python call a number, two or three times slower: only then
        checks["parse_int"] = _integer
    if nesting(value, EXACT_DEPTH) is None:
        return _exact(body, body, checks)
    if isinstance(value, list):
        return [
            _exact(piece, body, checks) if nesting(item, EXACT_DEPTH) is None else item
            for item, piece in zip(value, split_array(body), strict=True)
        ]
    return value


def extent_decoder() -> json.JSONDecoder:
    """A decoder for where a JSON value in a text ends, whose reading :func:`parse_json` then
    makes: its integers are kept as their text, of any length (``int`` refuses one of more than
    4,300 digits with a ``ValueError`` that is no ``JSONDecodeError``)."""
    return json.JSONDecoder(parse_int=str)


class _TooLong(Exception):
    """An integer of more than :data:`MAX_DIGITS` digits (its text)."""


def _integer(text: str) -> int:
    if len(text) - text.startswith("-") > MAX_DIGITS:
        raise _TooLong(text)
    return int(text)


def _float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):  # orjson's rule: a number past a double's range
        raise _TooLong(text)
    return number


def _exact(piece: bytes, body: bytes, checks: dict[str, Any]) -> Any:
    """The value of ``piece`` of ``body`` by the standard library, its integers exact; a number
    past the rules (an integer past :data:`MAX_DIGITS` digits, a float past a double's range,
    where ``checks`` look for them) is a ``json.JSONDecodeError`` at its place in ``body``."""
    try:
        return json.loads(piece.decode("utf-8"), **checks)
    except _TooLong as exc:
        number = exc.args[0]
        text = body.decode("utf-8")
        found = re.search(r"(?:^|[\[:,])[ \t\r\n]*(" + re.escape(number) + r")(?![0-9.eE])", text)
        at = found.start(1) if found else 0
        digits = len(number) - number.startswith("-")
        if number.lstrip("-").isdigit():
            message = f"an integer of {digits} digits: at most {MAX_DIGITS} are read"
        else:
            message = "number is infinity when parsed as double"
        raise json.JSONDecodeError(message, text, at) from None


# a string once its escaped backslashes and quotes are taken out (:func:`_bare`): from a quote to
# the next, read once whatever the text holds (where a quote's escapes were read with it, a string
# left open by a run of escaped quotes was read again from each of them: time in its length squared)
_STRING = re.compile(r'"[^"]*"')
# JSON text with its strings blanked out, to its brackets alone, each written [ or ]
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(i for i in range(256) if i not in b"[]{}")


def _bare(text: str) -> str:
    """JSON text with each string blanked out (``""``): what is left has brackets and commas only
    where they are JSON's, and is ASCII."""
    if '"' not in text:
        return text
    return _STRING.sub('""', text.replace("\\\\", "").replace('\\"', ""))


def values_past(text: str, limit: int) -> int | None:
    """The number of JSON values in ``text`` (valid JSON text: every object, array, string,
    number, ``true``, ``false`` and ``null``, the outermost one too; an object's keys are not
    values) when it is more than ``limit``, else None. Counted in the text, never walking a parsed
    value: by three ``str.count`` when that bounds it (the usual event), else with its strings
    blanked out, as each non-empty object or array holds one value more than its commas."""
    if 1 + text.count(",") + text.count("[") + text.count("{") <= limit:
        return None
    count = value_count(text)
    return count if count > limit else None


_SPACE_RUN = re.compile(r"[ \t\r\n]+")


def value_count(text: str) -> int:
    """The number of JSON values in valid JSON ``text``, as :func:`values_past` counts them, an
    empty object or array with white space inside (``{ }``, a pretty printer's) counted as the
    one value it is: the same for any text of the same value, however it is laid out."""
    bare = _SPACE_RUN.sub("", _bare(text))
    containers = bare.count("[") + bare.count("{") - bare.count("[]") - bare.count("{}")
    return 1 + bare.count(",") + containers


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
