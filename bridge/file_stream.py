"""Reading a file of JSON values as a stream, in memory that does not grow with the file: the
values of JSON lines, of one JSON array, or one JSON value, each with where it is, as
:func:`bridge.files.read_json_items` gives them (``file:line``, ``file[index]``, ``file``), for
``validate`` on files of any size.

A file of JSON lines is read a line at a time, each parsed as :func:`bridge.files.json_lines`
parses it (a line that is not UTF-8 or not JSON comes as its :class:`InputFileError`, and the
next lines are read). A JSON array is read in chunks, each item parsed as soon as it is whole,
so only the item being read is held; an array that breaks off gives its items up to there, then
the :class:`InputFileError` of where it breaks. A single value over several lines is read whole
(it is one event). ``read`` is told the bytes of each part read (for a progress meter).
"""

from __future__ import annotations

import codecs
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bridge.errors import InputFileError
from bridge.files import json_lines, loads, text_lines
from bridge.jsontext import extent_decoder, parse_json

CHUNK = 1 << 20  # bytes read at a time from a JSON array
# a parse that fails this close to the end of what has been read may only lack the rest of the
# item (a number, a literal or a key cut between two chunks): read on and try again
TAIL = 64


def _nothing(count: int) -> None:
    return None


def stream_json_items(path: Path | str, *, read: Callable[[int], None] = _nothing) -> Iterator[tuple[str, Any]]:
    """Every JSON value of a file with where it is, read as a stream (see the module). A file that
    cannot be opened raises its InputFileError before anything is given."""
    source = str(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115  # closed by the with below, after the checks
    except FileNotFoundError:
        raise InputFileError("file not found", source) from None
    except OSError as exc:
        raise InputFileError(f"cannot read it: {exc.strerror or exc}", source) from None
    with handle:
        if Path(path).is_dir():
            raise InputFileError("cannot read it: Is a directory", source)
        start = b""
        while not start.strip():  # to the first byte that is not blank, a chunk at a time
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            start += chunk
        lead = start.lstrip()
        blank = len(start) - len(lead)  # the blank bytes before the first value
        if lead.startswith(b"["):
            yield from _array_items(itertools.chain([start], iter(lambda: handle.read(CHUNK), b"")), source, read)
            return
        if not start.endswith(b"\n"):
            start += handle.readline()  # to the end of a line
        if lead.startswith(b"{") and not _one_value(io.BytesIO(start[blank:]).readline()):
            # one value over several lines (a pretty-printed event): read whole, as before
            rest = handle.read()
            read(len(start) + len(rest))
            yield from _whole(start + rest, source)
            return
        yield from _lines(itertools.chain(io.BytesIO(start), handle), source, read)


def _one_value(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):  # not JSON (nor UTF-8), or nested too deeply to tell
        return False
    return True


def _whole(data: bytes, source: str) -> Iterator[tuple[str, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError("not UTF-8 text", source, rule="file.text") from None
    try:
        whole = loads(text)  # the one set of rules (no NaN, no lone surrogates, a bounded depth)
    except json.JSONDecodeError:
        for number, item in json_lines(text_lines(text), source):  # JSON lines after all
            yield f"{source}:{number}", item
        return
    yield source, whole


def _lines(lines: Iterable[bytes], source: str, read: Callable[[int], None]) -> Iterator[tuple[str, Any]]:
    for number, raw in enumerate(lines, start=1):
        read(len(raw))
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield f"{source}:{number}", InputFileError("not UTF-8 text", source, number, rule="file.text")
            continue
        for _, item in json_lines((line,), source, first=number):
            yield f"{source}:{number}", item


class _Buffer:
    """The text of a file read in chunks, from where the parse is: what came before is let go."""

    def __init__(self, chunks: Iterable[bytes], source: str, read: Callable[[int], None]) -> None:
        self.chunks = iter(chunks)
        self.source = source
        self.read = read
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.position = 0
        self.lines_before = 0  # lines in the text let go
        self.column_before = 0  # characters of the current line let go, when it began before the text
        self.done = False

    def fill(self) -> bool:
        """Read one more chunk (False at the end of the file)."""
        if self.done:
            return False
        gone = self.text[: self.position]
        self.lines_before += gone.count("\n")
        self.column_before = len(gone) - gone.rindex("\n") - 1 if "\n" in gone else self.column_before + len(gone)
        self.text = self.text[self.position :]
        self.position = 0
        chunk = next(self.chunks, b"")
        self.read(len(chunk))
        try:
            self.text += self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise InputFileError("not UTF-8 text", self.source, self.line(len(self.text)), rule="file.text") from None
        self.done = not chunk
        return True

    def grow(self) -> bool:
        """Read on until the text from the parse's place has at least doubled (False at the end)."""
        wanted = 2 * max(len(self.text) - self.position, CHUNK)
        grew = False
        while len(self.text) - self.position < wanted and self.fill():
            grew = True
        return grew

    def next_char(self) -> str:
        """The next character that is not JSON whitespace, its place the position ("" at the end)."""
        while True:
            while self.position < len(self.text) and self.text[self.position] in " \t\r\n":
                self.position += 1
            if self.position < len(self.text):
                return self.text[self.position]
            if not self.fill():
                return ""

    def line(self, position: int) -> int:
        return self.lines_before + self.text.count("\n", 0, position) + 1

    def column(self, position: int) -> int:
        start = self.text.rfind("\n", 0, position)
        return position - start if start >= 0 else self.column_before + position + 1


def _array_items(chunks: Iterable[bytes], source: str, read: Callable[[int], None]) -> Iterator[tuple[str, Any]]:
    buffer = _Buffer(chunks, source, read)
    decoder = extent_decoder()
    index = 0
    try:
        buffer.next_char()  # the "[" found by the caller
        buffer.position += 1
        if buffer.next_char() == "]":
            buffer.position += 1
        else:
            while True:
                buffer.next_char()
                item, end = _decode(decoder, buffer)
                yield f"{source}[{index}]", item
                index += 1
                buffer.position = end
                following = buffer.next_char()
                if following not in ("]", ","):
                    raise json.JSONDecodeError("Expecting ',' delimiter", buffer.text, buffer.position)
                buffer.position += 1
                if following == "]":
                    break
        if buffer.next_char():
            raise json.JSONDecodeError("Extra data", buffer.text, buffer.position)
    except json.JSONDecodeError as exc:
        line = buffer.line(exc.pos)
        message = f"not valid JSON: {exc.msg} (column {buffer.column(exc.pos)})"
        yield f"{source}:{line}", InputFileError(message, source, line, rule="file.json")


def _decode(decoder: json.JSONDecoder, buffer: _Buffer) -> tuple[Any, int]:
    """The item at the buffer's position and where it ends, reading on while it is cut off."""
    while True:
        try:
            item, end = decoder.raw_decode(buffer.text, buffer.position)
        except RecursionError:
            raise json.JSONDecodeError("nested too deeply to read", buffer.text, buffer.position) from None
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(buffer.text) - TAIL or exc.msg.startswith("Unterminated string")
            if cut and buffer.grow():
                continue
            raise
        if end >= len(buffer.text) - TAIL and not buffer.done and buffer.grow():
            continue  # a number at the end may go on in the next chunk: parse it again whole
        try:  # read again by the one set of rules (no NaN, no lone surrogates, a bounded depth)
            item = parse_json(buffer.text[buffer.position : end].encode())
        except json.JSONDecodeError as exc:
            raise json.JSONDecodeError(exc.msg, buffer.text, buffer.position) from None
        return item, end


__all__ = ["CHUNK", "stream_json_items"]
