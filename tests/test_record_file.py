"""``olbridge record --file`` on large files: progress while reading and recording (count, rate,
time left), warnings that name their run and line and stop at a limit saying how many more, and a
bad line that reports every problem it has at once."""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.cli.progress import Meter, duration, progress
from bridge.errors import ValidationError, ValidationProblems
from bridge.task_run_json import parse_task_run, parse_task_run_lines
from tests.helpers import invoke

BIN = Path(sys.executable).parent


def record(i: int, **overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "namespace": "company.data",
        "flowId": "orders",
        "taskId": "load",
        "executionId": f"e{i}",
        "taskRunId": f"r{i}",
        "state": "SUCCESS",
        "startDate": "2025-01-01T00:00:00Z",
        "endDate": "2025-01-01T00:01:00Z",
        "inputs": [{"id": "raw.orders"}],
        "outputs": [{"id": f"mart.orders_{i}", "type": "Table"}],
    }
    base.update(overrides)
    return base


def write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------------------------------------
# the progress helper


def test_the_meter_gives_count_rate_and_time_left() -> None:
    clock = Clock()
    meter = Meter(50_000, "task runs", clock)
    assert meter.describe() == "0/50,000 task runs"
    meter.done, clock.now = 12_000, 103.0
    assert meter.describe() == "12,000/50,000 task runs, 4,000/s, 0:10 left"  # 38,000 at 4,000/s
    meter.done, clock.now = 50_000, 112.5
    assert meter.finished() == "50,000 task runs in 0:12 (4,000/s)"
    unknown = Meter(None, "lines", clock)
    unknown.done, clock.now = 300, 115.5
    assert unknown.describe() == "300 lines, 100/s"  # no total: no time left
    assert [duration(s) for s in (0.4, 59, 61, 3725)] == ["0:00", "0:59", "1:01", "1:02:05"]


def test_on_a_terminal_the_bar_shows_count_rate_and_time_left() -> None:
    clock, screen = Clock(), Terminal()
    with progress("recording task runs", 4, "task runs", file=screen, clock=clock) as bar:
        for _ in range(2):
            clock.now += 1.0
            bar.advance()
        shown = screen.getvalue()
        assert "2/4 task runs, 1/s, 0:02 left" in shown
        assert "50%" in shown
        bar.advance(2)
    assert screen.getvalue().rstrip().endswith("recording task runs: 4 task runs in 0:02 (2/s)")


def test_in_a_log_a_line_every_few_seconds() -> None:
    clock, log = Clock(), io.StringIO()
    with progress("reading task runs", 1000, "lines", file=log, clock=clock, every=10.0) as bar:
        for _ in range(100):
            clock.now += 0.25
            bar.advance(10)  # 25 s in all: a line at 10 s and at 20 s
    assert log.getvalue().splitlines() == [
        "reading task runs: 0/1,000 lines",
        "reading task runs: 400/1,000 lines, 40/s, 0:15 left",
        "reading task runs: 800/1,000 lines, 40/s, 0:05 left",
        "reading task runs: 1,000 lines in 0:25 (40/s)",
    ]


def test_a_resumed_step_counts_from_where_it_was_and_its_rate_from_now() -> None:
    clock = Clock()
    meter = Meter(100, "events", clock, already=40)
    assert meter.describe() == "40/100 events"
    meter.done, clock.now = 60, 102.0
    assert meter.describe() == "60/100 events, 10/s, 0:04 left"  # 20 done now in 2 s, not 60
    log = io.StringIO()
    with progress("backfill", 100, "events", file=log, clock=clock, already=40) as bar:
        clock.now += 6.0
        bar.advance(60)
    assert log.getvalue().splitlines() == ["backfill: 40/100 events", "backfill: 100 events in 0:06 (10/s)"]


def test_a_step_resumed_past_the_total_counted_now_has_none() -> None:
    """A backfill resumed after retention deleted some of its history said "1,950/1,207 events"
    (what it sent before, of what is kept now): it counts on without a total."""
    clock, log = Clock(), io.StringIO()
    with progress("backfill", 1207, "events", file=log, clock=clock, already=1950) as bar:
        clock.now += 2.0
        bar.advance(20)
    assert log.getvalue().splitlines() == ["backfill: 1,950 events", "backfill: 1,970 events in 0:02 (10/s)"]
    # resumed below the total, then past it (800 of the 1,000 sent before are gone): no total from then on
    log = io.StringIO()
    with progress("backfill", 1200, "events", file=log, clock=clock, already=1000, every=1.0) as bar:
        clock.now += 2.0
        bar.advance(100)
        clock.now += 2.0
        bar.advance(900)
    assert log.getvalue().splitlines() == [
        "backfill: 1,000/1,200 events",
        "backfill: 1,100/1,200 events, 50/s, 0:02 left",
        "backfill: 2,000 events, 250/s",
        "backfill: 2,000 events in 0:04 (250/s)",
    ]


def test_a_total_learnt_on_the_way_is_shown_from_then_on() -> None:
    clock, log = Clock(), io.StringIO()
    with progress("importing", None, "events", file=log, clock=clock, every=1.0) as bar:
        clock.now += 1.0
        bar.advance(10)
        bar.expect(40)
        clock.now += 1.0
        bar.advance(10)
    assert log.getvalue().splitlines() == [
        "importing: 0 events",
        "importing: 10 events, 10/s",
        "importing: 20/40 events, 10/s, 0:02 left",
        "importing: 20 events in 0:02 (10/s)",
    ]
    clock, screen = Clock(), Terminal()
    with progress("importing", None, "events", file=screen, clock=clock) as shown:
        shown.expect(4)
        clock.now += 1.0
        shown.advance(2)
        assert "50%" in screen.getvalue() and "2/4 events" in screen.getvalue()
        shown.advance(2)


def test_a_failed_step_does_not_say_it_finished() -> None:
    log = io.StringIO()
    with pytest.raises(ValidationError), progress("reading task runs", 3, "lines", file=log) as bar:
        bar.advance()
        raise ValidationError("bad line")
    assert "in 0:" not in log.getvalue()


# ---------------------------------------------------------------------------------------------
# record --file


def test_record_file_shows_progress_while_reading_and_while_recording(tmp_path: Path) -> None:
    records = write(tmp_path / "runs.jsonl", [record(i) for i in range(30)])
    done = subprocess.run(
        [str(BIN / "olbridge"), "--catalog", str(tmp_path / "c.db"), "record", "--file", str(records)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 30
    lines = done.stderr.splitlines()
    assert "reading task runs: 0/30 lines" in lines
    assert "recording task runs: 0/30 task runs" in lines
    assert any(line.startswith("reading task runs: 30 lines in ") for line in lines)
    assert any(line.startswith("recording task runs: 30 task runs in ") for line in lines)
    assert "Traceback" not in done.stderr


def test_warnings_name_their_run_and_line_and_stop_at_a_limit_saying_how_many_more(tmp_path: Path) -> None:
    # 130 runs whose new output has no type: each run ends WARNING with one warning
    records = write(tmp_path / "runs.jsonl", [record(i, outputs=[{"id": f"out.x{i}"}]) for i in range(130)])
    code, out, err = invoke(tmp_path / "c.db", "record", "--file", str(records))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["warningCount"] == 130
    assert len(summary["warnings"]) == 100
    assert summary["warnings"][0] == (
        f"{records}:1: company.data/orders/e0/r0: "
        "asset write failed (WARN): output 'out.x0' is a new asset and has no type"
    )
    assert summary["warnings"][99].startswith(f"{records}:100: company.data/orders/e99/r99: ")
    said = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert said == [f"warning: {w}" for w in summary["warnings"]]
    assert err.splitlines()[-1] == "... and 30 more warnings"


def test_a_run_from_flags_is_named_in_its_warnings(tmp_path: Path) -> None:
    code, out, err = invoke(
        tmp_path / "c.db",
        "record",
        "--namespace", "ops", "--flow-id", "backup", "--task-id", "snap", "--execution-id", "e9",
        "--start", "2025-01-01T00:00:00Z", "--output", "snapshot.e9",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "ops/backup/e9/e9.snap: asset write failed (WARN): output 'snapshot.e9' is a new asset and has no type"
    ]
    assert "... and" not in err


def test_a_bad_line_reports_every_problem_at_once(tmp_path: Path) -> None:
    bad = record(
        1,
        namespace="Bad NS",
        flowId="",
        state="NOPE",
        startDate="yesterday",
        extra=1,
        outputs=[
            {"id": "bad id", "namespace": "X"},
            {"id": "ok.id", "type": "Table", "statistics": {"rowCount": -1, "size": "x"}},
        ],
    )
    records = write(tmp_path / "runs.jsonl", [record(0), bad, {"flowId": "f"}])
    code, out, err = invoke(tmp_path / "c.db", "record", "--file", str(records))
    assert code == 1 and out == ""
    assert "Error: 2 bad line(s); nothing was recorded" in err
    expected = [
        ":2: unknown field(s) extra",
        ":2: namespace: a namespace matches",
        ":2: flowId: must be a non-empty string",
        ":2: state: unknown task state 'NOPE'",
        ":2: startDate: not an ISO 8601 time: 'yesterday'",
        ":2: outputs[0].id: a name-form id",
        ":2: outputs[0].namespace: a namespace matches",
        ":2: outputs[1].statistics.rowCount: must be a non-negative integer",
        ":2: outputs[1].statistics.size: must be a non-negative integer",
        ":3: missing required field(s) namespace, taskId, executionId, taskRunId, state, startDate",
    ]
    for message in expected:
        assert f"  {records}{message}" in err, message
    assert "Traceback" not in err


def test_past_the_limit_the_bad_lines_are_counted_not_listed(tmp_path: Path) -> None:
    records = write(tmp_path / "runs.jsonl", [record(i, state="NOPE") for i in range(25)])
    code, _out, err = invoke(tmp_path / "c.db", "record", "--file", str(records))
    assert code == 1
    assert "Error: 25 bad line(s); nothing was recorded" in err
    assert f"{records}:20: state:" in err and f"{records}:21: state:" not in err
    assert "... and 5 more bad line(s)" in err


def test_parse_task_run_holds_every_problem_with_its_rule() -> None:
    with pytest.raises(ValidationProblems) as caught:
        parse_task_run(record(1, taskRunId=7, startDate="2025-01-01", failureBehavior="LOUD"), "line 4")
    assert [(p.where, p.rule) for p in caught.value.problems] == [
        ("line 4.taskRunId", "key.required"),
        ("line 4.startDate", "time.offset"),
        ("line 4.failureBehavior", "failureBehavior.unknown"),
    ]
    with pytest.raises(ValidationError) as one:  # a single problem is a plain ValidationError
        parse_task_run(record(1, state="NOPE"))
    assert not isinstance(one.value, ValidationProblems) and one.value.where == "state"


@pytest.mark.parametrize("key", [{"taskRunId": None}, {"executionId": ""}, {"namespace": "Bad NS"}])
def test_a_record_without_a_good_key_has_its_other_problems_said_too(key: dict[str, object]) -> None:
    """A key missing or bad is one problem of the record; its run's own rules (times, column
    lineage) are checked as well, all said at once (they were said once the key was fixed)."""
    lineage = {"fields": {"id": [{"id": "raw.nowhere", "column": "id"}]}}
    given = record(
        1,
        endDate="2024-12-31T00:00:00Z",
        outputs=[{"id": "mart.orders_1", "type": "Table", "columns": [{"name": "id"}], "columnLineage": lineage}],
        **key,
    )
    if key.get("taskRunId", "") is None:
        del given["taskRunId"]
    with pytest.raises(ValidationProblems) as found:
        parse_task_run(given)
    said = [p.where for p in found.value.problems]
    assert said[1:] == ["endDate", "outputs[0].columnLineage.fields.id[0].id"], said
    assert "stand-in" not in str(found.value)


def test_good_lines_parse_as_before() -> None:
    runs = parse_task_run_lines([json.dumps(record(i)) for i in range(3)], "runs.jsonl")
    assert [r.key.task_run_id for r in runs] == ["r0", "r1", "r2"]
    assert runs[0].outputs[0].type == "Table" and runs[0].inputs[0].id == "raw.orders"


def test_a_run_ending_before_it_starts_and_its_column_lineage_mistakes_are_said_at_once(tmp_path: Path) -> None:
    """The run's own rules (times, column lineage) are said with the record's other problems,
    and every column-lineage mistake of it, not the first one a run."""
    lineage = {
        "fields": {"id": [{"id": "raw.nowhere", "column": "id"}], "ghost": [{"id": "raw.orders", "column": "x"}]}
    }
    bad = record(
        1,
        endDate="2024-12-31T00:00:00Z",
        extra=1,
        outputs=[{"id": "mart.orders_1", "type": "Table", "columns": [{"name": "id"}], "columnLineage": lineage}],
    )
    records = write(tmp_path / "runs.jsonl", [record(0), bad])
    code, out, err = invoke(tmp_path / "c.db", "record", "--file", str(records))
    assert code == 1 and out == ""
    for message in [
        ":2: unknown field(s) extra",
        ":2: endDate: a task run cannot end before it starts",
        ":2: outputs[0].columnLineage.fields.id[0].id: column lineage of output 'mart.orders_1' names 'raw.nowhere'",
        ":2: outputs[0].columnLineage.fields.ghost: column 'ghost' is not in the schema",
    ]:
        assert f"  {records}{message}" in err, (message, err)


def test_recording_a_file_again_over_an_ended_run_names_its_line_and_records_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    first = write(tmp_path / "first.jsonl", [record(0), record(1)])
    assert invoke(db, "record", "--file", str(first))[0] == 0
    again = write(tmp_path / "again.jsonl", [record(5), record(0), record(1, state="FAILED")])
    code, out, err = invoke(db, "record", "--file", str(again))
    assert code == 1 and out == ""
    assert f"\nError: {again}:3: task run 'r1' of execution 'e1' already ended in SUCCESS" in err
    assert "nothing was recorded" in err
    code, out, _ = invoke(db, "runs", "list", "--json")
    assert sorted(view["taskRun"]["executionId"] for view in json.loads(out)) == ["e0", "e1"]  # no e5


def test_a_file_that_records_one_run_twice_names_the_second_line(tmp_path: Path) -> None:
    """A file whose line 3 records again, otherwise, the run line 1 recorded and ended: the error
    names line 3 (it named the first line that held the run, which was fine)."""
    db = tmp_path / "c.db"
    twice = write(tmp_path / "twice.jsonl", [record(1), record(5), record(1, state="FAILED")])
    code, out, err = invoke(db, "record", "--file", str(twice))
    assert code == 1 and out == ""
    assert f"\nError: {twice}:3: task run 'r1' of execution 'e1' already ended in SUCCESS" in err, err
    # a running run recorded again with another start: said of its line, as an ended one is
    running = write(tmp_path / "running.jsonl", [record(7, state="RUNNING", endDate=None, outputs=[])])
    assert invoke(db, "record", "--file", str(running))[0] == 0
    moved = write(tmp_path / "moved.jsonl", [record(8), record(7, startDate="2025-01-01T00:00:30Z")])
    code, out, err = invoke(db, "record", "--file", str(moved))
    assert code == 1 and out == "" and f"\nError: {moved}:2: task run 'r7' of execution 'e7' is recorded" in err, err
    assert "a run's start does not move" in err and "nothing was recorded" in err


def test_a_write_that_fails_past_the_files_size_limit_is_said_as_the_catalogs_error(tmp_path: Path) -> None:
    """A large write that the file system refuses midway (here a limit on the size of a file, as a
    full disk does) is rolled back by SQLite itself: that error is the one reported, as an
    ``Error:`` line (a ROLLBACK after it failed, "no transaction is active", and took its place as
    a traceback), and the catalog holds what it held before."""
    db = tmp_path / "c.db"
    assert invoke(db, "record", "--file", str(write(tmp_path / "one.jsonl", [record(0)])))[0] == 0
    many = write(tmp_path / "runs.jsonl", [record(i) for i in range(1, 3000)])
    limit = os.path.getsize(db) + 500_000  # the write-ahead log of the 2,999 runs goes past it

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [str(BIN / "olbridge"), "--catalog", str(db), "record", "--file", str(many)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert f"\nError: catalog {db}: a disk input/output error (SQLite: disk I/O error)\n" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    code, out, err = invoke(db, "assets", "list", "--json")
    assert code == 0, err
    assert sorted(a["id"] for a in json.loads(out)) == ["mart.orders_0", "raw.orders"]
