"""The receiver's access log (``serve --access-log``): one line a request on stderr, once it is
answered, with its method, path, status, the events it carried, the name of the named token it
bore (never the token itself) and the time it took, from its head to its answer. As text::

    2026-03-01T08:00:00.123Z POST /api/v1/lineage 201 events=1 token=spark 3.2ms

or, with ``json``, one JSON object a line (``time``, ``method``, ``path``, ``status``, ``events``,
``token``, ``durationMs``). A path is the client's: in text its control characters, spaces and
backslashes are written escaped (``\\x1b``), so that a line can neither forge another nor drive a
terminal, and a long one is cut at 200 characters."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime

import attrs
import orjson

FORMATS = ("text", "json")
MAX_PATH = 200  # characters of a path a line shows


@attrs.define
class Seen:
    """What answering a request learned that its line tells: the named token it bore (None: no
    named token) and how many events it carried (0 until its body is read as JSON)."""

    token: str | None = None
    events: int = 0


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _escaped(text: str) -> str:
    """``text`` with every character that is not printable, a space or a backslash written as
    its escape, cut at :data:`MAX_PATH` characters."""
    cut = len(text) > MAX_PATH
    out = []
    for char in text[:MAX_PATH]:
        if char == "\\":
            out.append("\\\\")
        elif char.isprintable() and not char.isspace():
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out) + ("..." if cut else "")


@attrs.frozen
class AccessLog:
    """``AccessLog("text")`` or ``AccessLog("json")``: :meth:`log` writes a request's line with
    ``write`` (stderr by default)."""

    format: str = attrs.field(default="text", validator=attrs.validators.in_(FORMATS))
    write: Callable[[str], None] = _stderr
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def log(self, method: str, path: str, status: int, seen: Seen, seconds: float) -> None:
        self.write(self.line(method, path, status, seen, seconds))

    def line(self, method: str, path: str, status: int, seen: Seen, seconds: float) -> str:
        when = self.clock().astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        milliseconds = round(seconds * 1000, 1)
        if self.format == "json":
            record = {
                "time": when,
                "method": method,
                "path": path[:MAX_PATH].encode("utf-8", "backslashreplace").decode(),  # no lone surrogate
                "status": status,
                "events": seen.events,
                "token": seen.token,
                "durationMs": milliseconds,
            }
            return orjson.dumps(record).decode()
        token = seen.token if seen.token is not None else "-"
        return (
            f"{when} {_escaped(method)} {_escaped(path)} {status} events={seen.events} token={token} {milliseconds}ms"
        )
