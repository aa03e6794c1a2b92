"""``bridge.recording``, the first name of :mod:`bridge.task_run_api` (the ``task_run`` API), kept
for the code that imports it; ``from bridge import task_run`` is the documented way."""

from __future__ import annotations

from bridge.task_run_api import TaskRunRecorder, task_run

__all__ = ["TaskRunRecorder", "task_run"]
