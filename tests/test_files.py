"""The one reader of input files (bridge/files.py): JSON lines, JSON arrays and single values, and
its one error, which says ``file:line``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import InputFileError, ValidationError
from bridge.files import json_array, json_lines, json_values, read_json_items, read_text


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
