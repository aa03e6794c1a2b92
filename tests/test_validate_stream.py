"""``validate`` on large files: read as a stream (an item as soon as it is whole, never the whole
file), the same values and places as the whole-file reader, progress on stderr, and the listing
of problems capped with a count of the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bridge.file_stream as file_stream
from bridge.cli import export as export_cli
from bridge.file_stream import stream_json_items
from bridge.files import read_json_items
from tests.helpers import invoke, ol_run_event

README = Path(__file__).parent.parent / "README.md"


def values(found: Any) -> list[tuple[str, Any]]:
    return [(where, str(item) if isinstance(item, Exception) else item) for where, item in found]


EVENT = {"eventType": "COMPLETE", "big": 1234567890123456, "text": "Zürich ☃ 日本", "n": -1.5e3, "ok": True}
FILES = {
    "array.json": json.dumps([EVENT, EVENT, {"k": [1, 2, {"z": None}]}], indent=1),
    "lines.ndjson": json.dumps(EVENT) + "\n\n{bad\n" + json.dumps(EVENT) + "\n",
    "one.json": json.dumps(EVENT, indent=2),
    "empty.json": "  []  \n",
    "nested.json": json.dumps([[[["deep"]]], {"a": {"b": ["c", 1.25e-7]}}]),
    "not-json.txt": "hello\nworld\n",
}


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
@pytest.mark.parametrize("name", sorted(FILES))
def test_the_stream_gives_what_the_whole_file_reader_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, chunk: int
) -> None:
    """Chunks of 1, 3 and 7 bytes cut numbers, literals, keys and UTF-8 characters in two."""
    monkeypatch.setattr(file_stream, "CHUNK", chunk)
    path = tmp_path / name
    path.write_text(FILES[name], encoding="utf-8")
    assert values(stream_json_items(path)) == values(read_json_items(path))


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ('[ {"a":1}, {"b": tru', ":1", "not valid JSON: Expecting value (column 18)"),
        ("[1,2] x", ":1", "not valid JSON: Extra data (column 7)"),
        ("[1,\n2\n,, 3]", ":3", "not valid JSON: Expecting value (column 2)"),
    ],
)
def test_an_array_that_breaks_off_gives_its_items_then_where_it_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str, message: str
) -> None:
    monkeypatch.setattr(file_stream, "CHUNK", 4)
    path = tmp_path / "broken.json"
    path.write_text(text)
    *items, (place, error) = values(stream_json_items(path))
    assert (place, error) == (f"{path}{where}", f"{path}{where}: {message}")
    whole = values(read_json_items(path))
    assert whole == [(place, error)]  # the whole-file reader gives the error alone, nothing streamed
    assert all(item[0].startswith(f"{path}[") for item in items)


def test_a_line_that_is_not_utf8_is_a_problem_of_that_line(tmp_path: Path) -> None:
    path = tmp_path / "mixed.ndjson"
    path.write_bytes(b'{"a": 1}\n\xff\xfe\n{"b": 2}\n')
    assert values(stream_json_items(path)) == [
        (f"{path}:1", {"a": 1}),
        (f"{path}:2", f"{path}:2: not UTF-8 text"),
        (f"{path}:3", {"b": 2}),
    ]


@pytest.mark.parametrize("kind", ["array", "lines"])
def test_the_first_event_comes_before_the_file_is_read_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Read as a stream: the first item is given once a chunk or a line holding it is read, not
    the whole file (which the whole-file reader holds at once)."""
    monkeypatch.setattr(file_stream, "CHUNK", 4096)
    events = [ol_run_event("COMPLETE") for _ in range(2000)]
    path = tmp_path / f"events.{kind}"
    path.write_text(json.dumps(events) if kind == "array" else "".join(json.dumps(e) + "\n" for e in events))
    size = path.stat().st_size
    read: list[int] = []
    stream = stream_json_items(path, read=read.append)
    next(stream)
    assert 0 < sum(read) <= 3 * 4096 < size // 50
    assert sum(1 for _ in stream) == 1999 and sum(read) == size


def test_validate_lists_the_first_problems_and_counts_the_rest(tmp_path: Path) -> None:
    """A file of prose, about a thousand lines that are not events (as the README once was), lists
    50 of them (it listed all)."""
    prose = tmp_path / "prose.md"
    prose.write_text("".join(f"line {n} of prose, not an event\n" for n in range(1000)), encoding="utf-8")
    code, out, _ = invoke(Path("unused.db"), "validate", str(prose), "--max-problems", "0", "--json")
    everything = json.loads(out)
    bad = everything["invalid"]
    assert code == 1 and bad > 500 and len(everything["problems"]) == bad and everything["eventsNotListed"] == 0
    code, out, err = invoke(Path("unused.db"), "validate", str(prose))
    listed = [line for problem in everything["problems"][:50] for line in problem["problems"]]
    assert code == 1 and len(out.splitlines()) == len(listed)
    assert out.splitlines()[0] == f"{prose}:1: not valid JSON: Expecting value (column 1)"
    assert f"... and {bad - 50:,} more event(s) with problems, not listed (--max-problems 0 lists all)" in err
    assert err.endswith("invalid\n") and f"{bad} invalid" in err
    code, out, _ = invoke(Path("unused.db"), "validate", str(prose), "--max-problems", "3", "--json")
    report = json.loads(out)
    assert (len(report["problems"]), report["eventsNotListed"], report["invalid"]) == (3, bad - 3, bad)


def test_validate_receiver_caps_its_listing_too(tmp_path: Path) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_text("not json\n" * 60)
    code, out, err = invoke(tmp_path / "unused.db", "validate", "--receiver", str(path))
    assert code == 1 and len(out.splitlines()) == 50 and "... and 10 more event(s)" in err


def test_a_large_file_shows_its_progress_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_cli, "PROGRESS_FROM", 1)  # the size from which a log shows progress
    path = tmp_path / "events.ndjson"
    path.write_text("".join(json.dumps(ol_run_event("COMPLETE")) + "\n" for _ in range(3)))
    code, _, err = invoke(tmp_path / "unused.db", "validate", str(path))
    size = path.stat().st_size
    assert code == 0, err
    assert err.splitlines()[0] == f"validating: 0/{size:,} bytes"
    assert err.splitlines()[1].startswith(f"validating: {size:,} bytes in 0:")
    assert err.splitlines()[-1] == "3 event(s), 3 valid, 0 invalid"
