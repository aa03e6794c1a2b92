"""Helper processes (``bridge.delivery.helpers``): a helper the caller reaped is no child of
multiprocessing's any more, and stopping one waits for no reader."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

from bridge.delivery.helpers import Helper, StopLine


def waits(reader: Any, parent: int) -> None:
    """A helper that waits until told to stop (a minute at most)."""
    StopLine(reader).wait(60)


def test_a_helper_reaped_by_the_caller_is_no_child_of_multiprocessing_and_stops_at_once() -> None:
    """serve's supervisor reaps every child, a helper killed too; multiprocessing, not told, kept
    the process among its children (and would SIGTERM its pid, reused by then, as serve exits),
    and joining it never ended."""
    said: list[str] = []
    helper = Helper("test helper", waits, (), said.append)
    killed = helper.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    _, status = os.waitpid(killed, 0)  # as the supervisor reaps it
    helper.exited(os.waitstatus_to_exitcode(status))
    assert said == ["Warning: the test helper exited (-9); starting another"]
    children = {p.pid for p in multiprocessing.active_children()}
    assert killed not in children and helper.pid in children
    began = time.monotonic()
    helper.stop()
    assert time.monotonic() - began < 5 and not helper.process.is_alive()
    assert killed not in {p.pid for p in multiprocessing.active_children()}
