"""Kestra's ``AssetLineage`` records, as the AssetShipper's file exporter writes them in JSON.

One record is one task run: ``tenantId``, ``namespace``, ``flowId``, ``flowRevision``,
``executionId``, ``taskId``, ``taskRunId``, ``state``, ``startDate``, ``endDate``, ``inputs``,
``outputs`` (Kestra assets) and ``timestamp``. A file holds JSON lines or one JSON array. The
fields and their checks are those of :mod:`bridge.task_run_json` (``olbridge record --file`` reads the
same shape); the runs are recorded with the ``KESTRA`` integration, and keep the tenant and the
flow revision with their job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bridge.errors import ValidationError
from bridge.files import FileResult, read_files, read_text
from bridge.model import TaskRun
from bridge.task_run_json import check_task_run_text

INTEGRATION = "KESTRA"
_NOT_JSON = {"file.text", "file.json"}  # the rules of a file that is not JSON text
_ION_HINT = "Kestra's FileAssetExporter writes ION unless its format is JSON: set `format: JSON`"


def _read(path: Path) -> FileResult[TaskRun]:
    if path.suffix.lower() == ".ion":
        return FileResult(problems=(f"{path}: an ION file",), hint=_ION_HINT)
    try:
        checked = check_task_run_text(read_text(path), str(path), integration=INTEGRATION)
    except ValidationError as exc:  # not UTF-8 text, or not one JSON array, or not read at all
        return FileResult(problems=(str(exc),), hint=_ION_HINT if exc.rule in _NOT_JSON else "")
    return FileResult(checked.runs, checked.problems, _ION_HINT if checked.not_json else "")


def read_lineage_files(paths: Sequence[Path]) -> list[TaskRun]:
    """The task runs of every file. All are checked first: with any bad record, in any file, this
    raises one ValidationError naming each (file and line), and nothing is recorded."""
    return read_files(paths, _read, kind="lineage", rule="kestra.lineage")


__all__ = ["INTEGRATION", "read_lineage_files"]
