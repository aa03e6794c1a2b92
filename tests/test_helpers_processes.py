"""Helper processes (``bridge.delivery.helpers``): a helper the caller reaped is no child of
multiprocessing's any more, and stopping one waits for no reader."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
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


def test_a_helper_reaped_as_another_is_started_again_is_started_again_too() -> None:
    """Both of serve's helpers killed at once: starting the first again, multiprocessing reaped the
    second (it reaps its dead children as it starts one), so that serve's wait never saw it, and it
    was never started again. A look at each after a restart finds it."""
    said: list[str] = []
    first, second = Helper("first", waits, (), said.append), Helper("second", waits, (), said.append)
    killed = [first.pid, second.pid]
    for pid in killed:
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not all(Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z") for pid in killed):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _, status = os.waitpid(killed[0], 0)  # the supervisor reaps the first alone
    first.exited(os.waitstatus_to_exitcode(status))  # which starts another: multiprocessing reaps the second
    second.check()
    assert said == [
        "Warning: the first exited (-9); starting another",
        "Warning: the second exited (-9); starting another",
    ]
    assert second.pid not in killed and second.process.is_alive()
    for helper in (first, second):
        helper.stop()
