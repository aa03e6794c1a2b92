"""Reading input files: the one reader of the files olbridge is given.

- :func:`read_text`: a file's UTF-8 text;
- :func:`json_lines`, :func:`json_array` and :func:`json_values` (either, by how the text
  starts): the JSON values of a text, each with the line it starts on (task-run records for
  ``record --file`` and ``kestra import``);
- :func:`read_json_items`: the JSON values of a file that holds JSON lines (the OpenLineage
  client's file transport), one JSON array or one JSON value, each with where it is
  (``file:line``, ``file[index]`` or ``file``), for ``import`` and ``validate``;
- :func:`read_files`: a set of files read all or nothing (Kestra's lineage and flow files);
- :func:`yaml_problem`: what a YAML file's error says, on one line.

Whatever cannot be read is an :class:`~bridge.errors.InputFileError` that says where
(``file:line: message``): raised when nothing past it can be read (a file that is missing or not
UTF-8, a JSON array that breaks off), and handed over in the place of a line that is not JSON,
so that the lines after it are still read.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

import attrs

from bridge.errors import InputFileError, ValidationError
from bridge.jsontext import extent_decoder, parse_json

T = TypeVar("T")
_SPACE = re.compile(r"[ \t\r\n]*")  # JSON's whitespace


def read_text(path: Path | str) -> str:
    """The file's UTF-8 text. An :class:`InputFileError` naming the file when it is missing (rule
    ``file``), not UTF-8 text (``file.text``) or cannot be read (``file``)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError("file not found", str(path)) from None
    except UnicodeDecodeError:
        raise InputFileError("not UTF-8 text", str(path), rule="file.text") from None
    except OSError as exc:
        raise InputFileError(f"cannot read it: {exc.strerror or exc}", str(path)) from None


def open_text(path: Path | str) -> IO[str]:
    """The file opened to read its UTF-8 text as it goes (``record --file``'s lines, which may
    be many): the caller closes it. The same :class:`InputFileError` as :func:`read_text` when it
    is missing or cannot be opened; text that is not UTF-8 raises ``UnicodeDecodeError`` as it is
    read."""
    try:
        return open(path, encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError("file not found", str(path)) from None
    except OSError as exc:
        raise InputFileError(f"cannot read it: {exc.strerror or exc}", str(path)) from None


def _skip_space(text: str, position: int) -> int:
    """The position of the first character at or after ``position`` that is not JSON whitespace."""
    space = _SPACE.match(text, position)
    return space.end() if space else position


def not_json(error: json.JSONDecodeError, source: str, line: int | None = None) -> InputFileError:
    """The :class:`InputFileError` (rule ``file.json``) of text that is not valid JSON, at
    ``line`` (the error's own line when not given)."""
    return InputFileError(
        f"not valid JSON: {error.msg} (column {error.colno})",
        source,
        error.lineno if line is None else line,
        rule="file.json",
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str) -> Any:
    """A JSON value by the one set of rules (:func:`bridge.jsontext.parse_json`); text that breaks
    them raises its ``json.JSONDecodeError``, in the standard library's words where it too
    refuses the text."""
    try:
        return parse_json(text.encode())
    except json.JSONDecodeError:
        try:
            json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as plain:
            raise plain from None
        except (ValueError, RecursionError):
            pass
        raise


def text_lines(text: str) -> list[str]:
    """The lines of a text, each ended by a newline (a carriage return before it is JSON's white
    space): not ``str.splitlines``, which ends a line at U+2028, U+0085 or a form feed too, all
    of which a JSON string may hold as they are."""
    lines = text.split("\n")
    return lines[:-1] if lines and not lines[-1] else lines


def json_lines(lines: Iterable[str], source: str, *, first: int = 1) -> Iterator[tuple[int, Any]]:
    """The JSON value of each line that is not blank, with its number (the first line's is
    ``first``); a line that is not JSON comes as its :class:`InputFileError` in place of the
    value, and the next lines are read."""
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        try:
            yield number, loads(line)
        except json.JSONDecodeError as exc:  # orjson's too: the one set of rules (no NaN, no lone surrogates)
            yield number, not_json(exc, source, number)


def json_array(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """The items of one JSON array, each with the line it starts on, parsed in one pass. Text that
    is not one JSON array raises the :class:`InputFileError` of the line where it breaks off,
    once the items before it have been given."""
    decoder = extent_decoder()
    position = _skip_space(text, 0)
    line, counted = 1, 0
    try:
        if not text.startswith("[", position):
            raise json.JSONDecodeError("Expecting '['", text, position)
        position = _skip_space(text, position + 1)
        if not text.startswith("]", position):
            while True:
                try:
                    _, end = decoder.raw_decode(text, position)  # where the item ends
                except RecursionError:
                    raise json.JSONDecodeError("nested too deeply to read", text, position) from None
                line, counted = line + text.count("\n", counted, position), position
                try:  # read by the one set of rules
                    item = parse_json(text[position:end].encode())
                except json.JSONDecodeError as exc:
                    raise json.JSONDecodeError(exc.msg, text, position + exc.pos) from None
                yield line, item
                position = _skip_space(text, end)
                if text.startswith("]", position):
                    break
                if not text.startswith(",", position):
                    raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
                position = _skip_space(text, position + 1)
        position = _skip_space(text, position + 1)
        if position < len(text):
            raise json.JSONDecodeError("Extra data", text, position)
    except json.JSONDecodeError as exc:
        raise not_json(exc, source) from None


def json_values(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """The values of one JSON array (:func:`json_array`) when the text starts one, else of JSON
    lines (:func:`json_lines`)."""
    if text.lstrip().startswith("["):
        return json_array(text, source)
    return json_lines(text_lines(text), source)


def read_json_items(path: Path | str) -> Iterator[tuple[str, Any]]:
    """Every JSON value of a file, each with where it is: JSON lines (``file:line``; a line that
    is not JSON comes as its :class:`InputFileError` and the next lines are read), one JSON array
    (``file[index]``; an array that is not valid JSON comes as one InputFileError, and none of
    its items) or one JSON value over several lines (``file``). A file that cannot be read
    raises its InputFileError before anything is given."""
    source = str(path)
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = [item for _, item in json_array(text, source)]
        except InputFileError as exc:
            yield exc.where, exc
            return
        for index, item in enumerate(items):
            yield f"{source}[{index}]", item
        return
    lines = text_lines(text)
    if stripped.startswith("{") and len([ln for ln in lines if ln.strip()]) > 1:
        try:
            whole = loads(text)
        except json.JSONDecodeError:
            pass  # JSON lines, one value a line
        else:
            yield source, whole
            return
    for number, item in json_lines(lines, source):
        yield f"{source}:{number}", item


@attrs.frozen
class FileResult(Generic[T]):
    """What one file holds, or its problems; ``hint`` says what may be wrong with a bad file."""

    items: Sequence[T] = ()
    problems: Sequence[str] = ()
    hint: str = ""


def read_files(paths: Sequence[Path], read: Callable[[Path], FileResult[T]], *, kind: str, rule: str) -> list[T]:
    """The items ``read`` finds in every file. All are checked first: with any problem (a
    ValidationError ``read`` raises is one) this raises one ValidationError,
    ``N bad <kind> file(s); nothing was recorded:`` and each problem on its own line, then each
    bad file's hint once."""
    items: list[T] = []
    problems: list[str] = []
    hints: list[str] = []
    bad = 0
    for path in paths:
        try:
            result = read(path)
        except ValidationError as exc:
            result = FileResult(problems=(str(exc),))
        if not result.problems:
            items += result.items
            continue
        bad += 1
        problems += result.problems
        if result.hint and result.hint not in hints:
            hints.append(result.hint)
    if problems:
        raise ValidationError(
            f"{bad} bad {kind} file(s); nothing was recorded:\n  "
            + "\n  ".join(problems)
            + "".join(f"\n({hint}.)" for hint in hints),
            rule=rule,
        )
    return items


def reading_problem(exc: ValueError | RecursionError) -> str:
    """What an error a parser of TOML, YAML or JSON raised while reading a value says, where it is
    not the parser's own (an integer past the digits Python converts, a value nested past its
    recursion), in olbridge's words, for a message that names the file; any other is raised again
    as it is (a fault)."""
    if isinstance(exc, RecursionError):
        return "a value is nested too deeply to read"
    if "integer string conversion" in str(exc):
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits: no value olbridge reads is that long"
    raise exc


def yaml_problem(exc: Exception, text: str | None = None) -> tuple[int | None, str]:
    """Where a PyYAML error is (its line, from 1; None where it says none) and what it says, on
    one line: its own text runs over several (a ``in "<unicode string>", position 5`` line, a
    ``while parsing ...`` context), which a one-line error cannot hold. ``text``: what was read,
    for the line of an error that gives a position in it (a character YAML does not allow)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    said = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if said is not None:  # a MarkedYAMLError
        return (mark.line + 1 if mark is not None else None), " ".join(str(said).split())
    character, position = getattr(exc, "character", None), getattr(exc, "position", None)
    if character is not None and isinstance(position, int):  # a ReaderError: a character at a place
        line = text.count("\n", 0, position) + 1 if text is not None else None
        reason = getattr(exc, "reason", "")
        if isinstance(character, bytes):  # (a stream of bytes: text is given here as text)
            return line, f"cannot decode byte #x{character[0]:02x}: {reason}"
        return line, f"unacceptable character #x{character:04x}: {reason}"
    return None, " ".join(str(exc).split())


__all__ = [
    "FileResult",
    "InputFileError",
    "json_array",
    "json_lines",
    "json_values",
    "not_json",
    "read_files",
    "read_json_items",
    "read_text",
    "reading_problem",
    "yaml_problem",
]
