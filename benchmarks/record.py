"""``olbridge record --file`` throughput: the real CLI, in a child process, on a fresh catalog.

Writes JSON lines in Kestra's AssetLineage shape to a temporary folder, runs
``olbridge --catalog <tmp>/c.db record --file <file>`` and times it end to end (process start,
parsing, checking and the one write transaction).

    .venv/bin/python benchmarks/record.py [--runs 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024


def kestra_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def lineage_record(i: int) -> dict[str, Any]:
    start = EPOCH + timedelta(seconds=i)
    return {
        "namespace": "company.data",
        "flowId": f"flow_{i % 50}",
        "taskId": f"task_{i % 7}",
        "executionId": f"exec-{i}",
        "taskRunId": f"tr-{i}",
        "state": "SUCCESS",
        "startDate": kestra_time(start),
        "endDate": kestra_time(start + timedelta(seconds=30)),
        "inputs": [{"id": f"raw.src_{i % 1000}"}],
        "outputs": [{"id": f"mart.out_{i % 5000}", "type": "Table", "metadata": {"env": "prod"}}],
    }


def write_lines(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            out.write(json.dumps(lineage_record(i), separators=(",", ":")))
            out.write("\n")


def olbridge_command() -> str:
    """The olbridge script of the virtualenv running this benchmark."""
    script = Path(sys.executable).parent / "olbridge"
    if not script.exists():
        raise SystemExit(f"no olbridge script next to {sys.executable}; install the project first")
    return str(script)


def file_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000, help="task runs in the file (default: 100000)")
    args = parser.parse_args(argv)

    print(f"python: {platform.python_implementation()} {platform.python_version()}")
    processor = platform.processor() or "unknown"
    print(f"machine: {platform.machine()}, processor {processor}, {os.cpu_count()} CPUs, {platform.platform()}")

    with tempfile.TemporaryDirectory(prefix="olbridge-bench-") as tmp:
        folder = Path(tmp)
        lines = folder / "runs.jsonl"
        catalog = folder / "c.db"
        write_lines(lines, args.runs)
        print(f"input: {args.runs} task runs, {file_size(lines) / MIB:.1f} MiB of JSON lines")

        command = [olbridge_command(), "--catalog", str(catalog), "record", "--file", str(lines)]
        print(f"command: {shlex.join(command)}")
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux

        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            print(f"olbridge exited with {done.returncode}")
            return 1
        summary = json.loads(done.stdout)
        catalog_bytes = file_size(catalog)
        wal_bytes = file_size(catalog.with_name(catalog.name + "-wal"))

    print(f"return code: {done.returncode}; summary taskRuns: {summary['taskRuns']}")
    print(f"records/second: {args.runs / seconds:,.0f}")
    print(f"seconds: {seconds:.2f}")
    print(f"catalog size: {catalog_bytes / MIB:.1f} MiB (+ {wal_bytes / MIB:.1f} MiB WAL left behind)")
    print(f"peak RSS of the child: {peak_rss / MIB:.1f} MiB")
    if summary["taskRuns"] != args.runs:
        print(f"expected {args.runs} task runs in the summary")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
