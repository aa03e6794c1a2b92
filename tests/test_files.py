"""The one reader of input files (bridge/files.py): JSON lines, JSON arrays and single values, and
its one error, which says ``file:line``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import InputFileError, ValidationError
from bridge.file_stream import stream_json_items
from bridge.files import json_array, json_lines, json_values, read_json_items, read_text
from tests.helpers import invoke


def test_an_input_file_error_says_file_and_line() -> None:
    error = InputFileError("not valid JSON: Expecting value (column 1)", "runs.jsonl", 3, rule="file.json")
    assert str(error) == "runs.jsonl:3: not valid JSON: Expecting value (column 1)"
    assert (error.path, error.line, error.where, error.rule) == ("runs.jsonl", 3, "runs.jsonl:3", "file.json")
    assert isinstance(error, ValidationError)  # `Error: ...` and exit 1 in the CLI, as every bad input
    assert str(InputFileError("file not found", "gone.json")) == "gone.json: file not found"
    assert error.at("inputs[0]") is error  # a place in a file does not nest under another


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as missing:
        read_text(tmp_path / "gone.json")
    assert (str(missing.value), missing.value.rule) == (f"{tmp_path / 'gone.json'}: file not found", "file")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputFileError) as not_text:
        read_text(binary)
    assert (str(not_text.value), not_text.value.rule) == (f"{binary}: not UTF-8 text", "file.text")
    with pytest.raises(InputFileError, match="cannot read it: Is a directory"):
        read_text(tmp_path)


def test_a_line_that_is_not_json_comes_in_its_place_and_the_rest_is_read() -> None:
    lines = ['{"a": 1}', "", "{oops", "  ", "[2]"]
    read = list(json_lines(lines, "runs.jsonl"))
    assert [number for number, _ in read] == [1, 3, 5]  # blank lines are skipped
    assert (read[0][1], read[2][1]) == ({"a": 1}, [2])
    bad = read[1][1]
    assert isinstance(bad, InputFileError)
    assert str(bad).startswith("runs.jsonl:3: not valid JSON: Expecting property name")
    assert (bad.line, bad.rule) == (3, "file.json")


def test_a_json_array_gives_each_item_with_the_line_it_starts_on() -> None:
    text = '[\n  {"a": 1},\n\n  {"b": [\n    2\n  ]},\n  3\n]\n'
    assert list(json_array(text, "a.json")) == [(2, {"a": 1}), (4, {"b": [2]}), (7, 3)]
    assert list(json_array("[]", "a.json")) == []
    assert list(json_values(text, "a.json")) == list(json_array(text, "a.json"))
    assert list(json_values('{"a": 1}\n{"b": 2}', "a.json")) == [(1, {"a": 1}), (2, {"b": 2})]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[\n  {"a": 1},\n  {"b": 2}\n  {"c": 3}\n]', 4, "Expecting ',' delimiter"),
        ('[\n  {"a": 1},\n]', 3, "Expecting value"),
        ('[\n  {"a": 1}\n', 3, "Expecting ',' delimiter"),
        ('[{"a": 1}]\n[2]', 2, "Extra data"),
    ],
)
def test_an_array_that_breaks_off_raises_where_it_does_after_the_items_before(
    text: str, line: int, message: str
) -> None:
    read: list[tuple[int, Any]] = []
    with pytest.raises(InputFileError) as caught:
        read.extend(json_array(text, "a.json"))
    assert read[0] == (1 if text.startswith("[{") else 2, {"a": 1})
    assert (caught.value.line, caught.value.rule) == (line, "file.json")
    assert str(caught.value).startswith(f"a.json:{line}: not valid JSON: {message}")


def test_read_json_items_says_where_each_value_is(tmp_path: Path) -> None:
    lines = tmp_path / "events.ndjson"
    lines.write_text('{"n": 1}\nnot json\n\n{"n": 2}\n')
    read = list(read_json_items(lines))
    assert [where for where, _ in read] == [f"{lines}:1", f"{lines}:2", f"{lines}:4"]
    assert isinstance(read[1][1], InputFileError) and read[1][1].where == f"{lines}:2"
    array = tmp_path / "events.json"
    array.write_text(json.dumps([{"n": 1}, {"n": 2}], indent=2))
    assert list(read_json_items(array)) == [(f"{array}[0]", {"n": 1}), (f"{array}[1]", {"n": 2})]
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"n": 1, "m": {"k": 2}}, indent=2))
    assert list(read_json_items(single)) == [(str(single), {"n": 1, "m": {"k": 2}})]


def test_an_array_that_is_not_valid_json_is_one_bad_item_and_none_of_its_items(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"n": 1},\n  {"n": 2}\n  {"n": 3}\n]\n')
    [(where, item)] = list(read_json_items(broken))
    assert where == f"{broken}:4" and isinstance(item, InputFileError)
    assert item.message.startswith("not valid JSON: Expecting ',' delimiter")


def test_a_file_that_cannot_be_read_raises_before_anything_is_given(tmp_path: Path) -> None:
    items = read_json_items(tmp_path / "gone.ndjson")
    with pytest.raises(InputFileError, match=r"gone\.ndjson: file not found"):
        next(items)


def _deep_event_line(depth: int, value: str = "1") -> str:
    event = {
        "eventType": "START",
        "eventTime": "2025-01-01T00:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "0194a1b2-0000-7000-8000-000000000001"},
        "job": {"namespace": "ns", "name": "job"},
        "inputs": [{"namespace": "s3://b", "name": "k", "facets": {"acme": "PLACE"}}],
    }
    return json.dumps(event).replace('"PLACE"', '{"x":' * depth + value + "}" * depth)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "not valid JSON"),
        ("[Infinity, 1234567890123456]", "not valid JSON"),
        ('"\\ud800"', "not valid JSON"),
        ('["\\udc00", 1234567890123456]', "not valid JSON"),
    ],
)
def test_files_are_read_by_the_receivers_rules(tmp_path: Path, value: str, message: str) -> None:
    """(#30) No NaN, Infinity or lone surrogate, as lines or in an array, whatever the numbers."""
    lines = tmp_path / "events.jsonl"
    lines.write_text(_deep_event_line(1, value) + "\n" + _deep_event_line(1) + "\n")
    items = list(read_json_items(lines))
    assert isinstance(items[0][1], InputFileError) and message in items[0][1].message
    assert isinstance(items[1][1], dict)
    array = tmp_path / "events.json"
    array.write_text("[\n" + _deep_event_line(1, value) + "\n]\n")
    ((_, item),) = list(read_json_items(array))
    assert isinstance(item, InputFileError) and message in item.message, item


def test_long_integers_are_read_exactly(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text("[" + _deep_event_line(1, str(2**70 + 1)) + "]")
    ((_, item),) = list(read_json_items(path))
    assert item["inputs"][0]["facets"]["acme"] == {"x": 2**70 + 1}


@pytest.mark.parametrize("shape", ["lines", "array", "streamed"])
def test_integers_of_up_to_max_digits_are_read_exactly_and_longer_ones_are_errors(tmp_path: Path, shape: str) -> None:
    """Integers of 309 digits or more were errors (orjson reads them as doubles, past their range),
    though docs/receiver.md said any was read exactly; one of more than 4,300 in a JSON array was
    a traceback (``int``'s limit): up to 1,000 digits they are read exactly, and past them each is
    an error that says where it is."""
    path = tmp_path / "events.json"
    lines = [_deep_event_line(1, "-" + "7" * 1_000), _deep_event_line(1, "8" * 5_000), _deep_event_line(1, "9" * 309)]
    text = "\n".join(lines) + "\n" if shape == "lines" else "[\n" + ",\n".join(lines) + "\n]\n"
    path.write_text(text)
    found = list(read_json_items(path)) if shape != "streamed" else list(stream_json_items(path))
    errors = [item for _, item in found if isinstance(item, InputFileError)]
    items = [item["inputs"][0]["facets"]["acme"]["x"] for _, item in found if not isinstance(item, InputFileError)]
    # an array is read whole (none of its items if one breaks the rules), or streamed up to the one that does
    expected = {"lines": [-int("7" * 1_000), int("9" * 309)], "array": [], "streamed": [-int("7" * 1_000)]}
    assert items == expected[shape] and len(errors) == 1
    assert "an integer of 5000 digits: at most 1000 are read" in str(errors[0])
    code, out, err = invoke(tmp_path / "c.db", "validate", str(path))
    assert code == 1 and "Traceback" not in out + err and "an integer of 5000 digits" in out + err


@pytest.mark.parametrize("shape", ["lines", "array"])
def test_a_deeply_nested_file_is_an_error_that_says_where_not_a_traceback(tmp_path: Path, shape: str) -> None:
    """(#30) ``import`` and ``validate`` of an event nested 1,000 deep printed a traceback."""
    line = _deep_event_line(1_000)
    path = tmp_path / "deep.json"
    path.write_text(line + "\n" if shape == "lines" else "[\n" + line + "\n]\n")
    code, out, err = invoke(tmp_path / "c.db", "validate", str(path))
    assert code == 1
    assert "Traceback" not in out + err
    assert f"{path}" in out + err and "deep" in out + err
    code, out, err = invoke(tmp_path / "c.db", "import", str(path))
    assert "Traceback" not in out + err
    assert "1 refused" in out + err


@pytest.mark.parametrize("text", ["", "\n\n", "  []  \n"])
def test_validate_of_a_file_with_no_event_says_so(tmp_path: Path, text: str) -> None:
    """It exited 1 with "0 event(s), 0 valid, 0 invalid" alone: not why."""
    path = tmp_path / "events.ndjson"
    path.write_text(text)
    code, out, err = invoke(tmp_path / "c.db", "validate", str(path))
    assert code == 1 and out == "" and err.rstrip().endswith(f"Error: {path}: it holds no event to check"), err


# characters str.splitlines ends a line at, which a JSON string holds as they are
LINE_ENDS_TO_PYTHON = "\u2028\u2029\u0085\x0c\x0b\x1c\x1d\x1e"


def test_a_json_line_ends_at_a_newline_only(tmp_path: Path) -> None:
    values = [{"description": f"a{c}b", "n": n} for n, c in enumerate(LINE_ENDS_TO_PYTHON)]
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values) + "\r\n" + json.dumps({"n": 99}) + "\r\n"
    path = tmp_path / "e.ndjson"
    path.write_text(text, encoding="utf-8")
    assert [v for _, v in json_values(text, "e.ndjson")] == [*values, {"n": 99}]
    read = list(read_json_items(path))
    assert read == [(f"{path}:{n + 1}", v) for n, v in enumerate(values)] + [(f"{path}:{len(values) + 2}", {"n": 99})]


def test_an_export_with_such_characters_is_imported_again(tmp_path: Path) -> None:
    """olbridge's own export holds them as they are (JSON need not escape them): ``import`` of it
    takes every event."""
    db, other, events = tmp_path / "c.db", tmp_path / "o.db", tmp_path / "e.ndjson"
    described = json.dumps({"id": "o.a", "type": "Table", "description": f"a{LINE_ENDS_TO_PYTHON}b"})
    flags = ["--namespace", "n", "--flow-id", "f", "--task-id", "t", "--execution-id", "e1"]
    assert invoke(db, "record", *flags, "--start", "2025-01-01T00:00:00Z", "--output", described)[0] == 0
    assert invoke(db, "export", "--output", str(events))[0] == 0
    assert "\u2028" in events.read_text(encoding="utf-8")
    code, _, err = invoke(other, "import", str(events))
    assert code == 0 and "2 accepted" in err, err
    code, out, _ = invoke(other, "assets", "show", "o.a")
    assert code == 0 and f"a{LINE_ENDS_TO_PYTHON}b" in json.loads(out)["description"]
