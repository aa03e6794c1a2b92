"""Kestra's ``AssetLineage`` records, as the AssetShipper's file exporter writes them in JSON.

One record is one task run: ``tenantId``, ``namespace``, ``flowId``, ``flowRevision``,
``executionId``, ``taskId``, ``taskRunId``, ``state``, ``startDate``, ``endDate``, ``inputs``,
``outputs`` (Kestra assets) and ``timestamp``. A file holds JSON lines or one JSON array. The
fields and their checks are those of :mod:`bridge.records` (``olbridge record --file`` reads the
same shape); the runs are recorded with the ``KESTRA`` integration, and keep the tenant and the
flow revision with their job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bridge.errors import ValidationError
from bridge.model import TaskRun
from bridge.records import parse_task_run_text

INTEGRATION = "KESTRA"
_ION_HINT = "Kestra's FileAssetExporter writes ION unless its format is JSON: set `format: JSON`"


def read_lineage_files(paths: Sequence[Path]) -> list[TaskRun]:
    """The task runs of every file. All are checked first: with any bad record, in any file, this
    raises one ValidationError naming each (file and line), and nothing is recorded."""
    runs: list[TaskRun] = []
    problems: list[str] = []
    for path in paths:
        if path.suffix.lower() == ".ion":
            problems.append(f"{path}: an ION file; {_ION_HINT}")
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8 text; {_ION_HINT}")
            continue
        except OSError as exc:
            problems.append(f"{path}: cannot read it: {exc.strerror or exc}")
            continue
        try:
            runs += parse_task_run_text(text, str(path), integration=INTEGRATION)
        except ValidationError as exc:
            problems.append(str(exc))
    if problems:
        text = "\n".join(problems)
        hint = f"\n({_ION_HINT}.)" if "not valid JSON" in text else ""
        if len(problems) == 1:
            raise ValidationError(text + hint, rule="kestra.lineage")
        raise ValidationError(
            f"{len(problems)} bad file(s); nothing was recorded:\n" + text + hint, rule="kestra.lineage"
        )
    return runs


__all__ = ["INTEGRATION", "read_lineage_files"]
