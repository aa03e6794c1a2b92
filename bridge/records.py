"""``bridge.records``, the first name of :mod:`bridge.task_run_json` (task runs as JSON records),
kept for the code that imports it."""

from __future__ import annotations

from bridge.files import json_array as json_array_items
from bridge.task_run_json import (
    CheckedRecords,
    accept_task_runs,
    check_task_run_records,
    check_task_run_text,
    parse_asset,
    parse_statistics,
    parse_task_run,
    parse_task_run_lines,
    parse_task_run_records,
    read_task_run_lines,
)

__all__ = [
    "CheckedRecords",
    "accept_task_runs",
    "check_task_run_records",
    "check_task_run_text",
    "json_array_items",
    "parse_asset",
    "parse_statistics",
    "parse_task_run",
    "parse_task_run_lines",
    "parse_task_run_records",
    "read_task_run_lines",
]
