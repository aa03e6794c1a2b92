"""The whole ``olbridge export`` process against openlineage-python's classes + Serde, in one run.

A catalog of ``--runs`` recorded task runs (20,000 by default: 40,000 events; each run reads one
of ``--tables`` tables and writes another, so the same tables recur run after run) is built
beforehand, not timed. Then, timed:

- ``olbridge --catalog <file> export --output <file>`` as a process of its own: Python's start-up,
  the imports, opening and reading the catalog, converting and writing the NDJSON file; wall time,
  and the process's peak RSS (its ``ru_maxrss``, read by a small launcher process that starts it,
  so that the figure is not this benchmark's own memory: see docs/benchmarks.md);
- openlineage-python's classes and ``Serde`` building and serializing the same events in this
  process (``tests/reference.py``, as ``benchmarks/conversion.py`` does), the task runs and their
  assets read from the catalog beforehand, not timed.

The events of the first task runs are checked equal both ways, and the export's event count.
The same export with filters that select nothing is timed too: the start-up alone.

    .venv/bin/python benchmarks/export.py [--runs 20000] [--tables 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.conversion import make_run, reference_pass, without_empty  # noqa: E402
from bridge.catalog import Catalog  # noqa: E402
from bridge.mapping import Resolver, load_rules  # noqa: E402
from bridge.model import Asset, StoredTaskRun  # noqa: E402
from bridge.openlineage.convert import Converter  # noqa: E402
from tests.reference import task_run_events as ol_events  # noqa: E402

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")
CHECKED_RUNS = 20
# starts the command given, waits for it, and prints its exit status, wall time and peak RSS (KiB)
LAUNCHER = """\
import resource, subprocess, sys, time
began = time.perf_counter()
status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
took = time.perf_counter() - began
print(status, took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def build(db: Path, runs: int, tables: int) -> None:
    with Catalog(db) as catalog:
        for start in range(0, runs, 10_000):  # a transaction each 10,000 runs
            catalog.record_task_runs(make_run(i, tables) for i in range(start, min(runs, start + 10_000)))


def export_process(db: Path, out: Path, *extra: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one ``olbridge export`` process."""
    command = [OLBRIDGE, "--catalog", str(db), "export", "--output", str(out), *extra]
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], capture_output=True, text=True, check=True)
    status, took, peak = done.stdout.split()
    if status != "0":
        raise SystemExit(f"olbridge export failed with status {status}")
    return float(took), int(peak)


def stored(db: Path) -> tuple[list[StoredTaskRun], dict[str, Asset]]:
    with Catalog(db) as catalog:
        return list(catalog.iter_task_runs()), {a.id: a for a in catalog.list_assets()}


def check_equal(out: Path, runs: Sequence[StoredTaskRun], assets: Mapping[str, Asset]) -> int:
    """The exported events of ``runs`` are openlineage-python's (but for the empty ``{}``/``[]``
    defaults its classes keep); how many were compared."""
    exported: dict[tuple[str, str], dict[str, Any]] = {}
    with out.open(encoding="utf-8") as lines:
        for line in lines:  # the first runs' events come first (in time order), with others between
            event = json.loads(line)
            exported[event["run"]["runId"], event["eventType"]] = event
            if len(exported) >= 8 * len(runs):
                break
    converter = Converter(Resolver(load_rules()))
    compared = 0
    for run in runs:
        for reference in ol_events(converter, run, assets):
            theirs, _ = without_empty(json.loads(json.dumps(reference, sort_keys=True)))
            ours = exported.get((theirs["run"]["runId"], theirs["eventType"]))
            if ours != theirs:
                raise AssertionError(f"the export's events differ from openlineage-python's for task run {run.key}")
            compared += 1
    return compared


def best(times: Sequence[float]) -> str:
    return f"best {min(times):.2f} s; each {', '.join(f'{t:.2f}' for t in times)} s"


def timed(work: Callable[[], int]) -> tuple[float, int]:
    began = time.perf_counter()
    count = work()
    return time.perf_counter() - began, count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20_000, help="task runs in the catalog (default: 20000)")
    parser.add_argument("--tables", type=int, default=100, help="tables the runs read and write (default: 100)")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each side; the best counts")
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}"
    )
    with tempfile.TemporaryDirectory() as folder:
        db, out = Path(folder) / "catalog.db", Path(folder) / "events.ndjson"
        began = time.perf_counter()
        build(db, args.runs, args.tables)
        runs, assets = stored(db)
        events = sum(2 if run.ended_at else 1 for run in runs)
        print(
            f"catalog: {len(runs):,} task runs over {len(assets):,} tables, {events:,} events, "
            f"{db.stat().st_size / 1024 / 1024:,.1f} MiB (built in {time.perf_counter() - began:.1f} s, not timed)"
        )

        nothing = [export_process(db, out, "--since", "2999-01-01") for _ in range(args.repeat)]
        # the two sides by turns, so that each pair saw the machine at about the same speed (its
        # speed moves by a third within an hour here: docs/benchmarks.md)
        exports: list[tuple[float, int]] = []
        references: list[tuple[float, int]] = []
        for _ in range(args.repeat):
            exports.append(export_process(db, out))
            references.append(timed(lambda: reference_pass(load_rules(), runs, assets)))
        written = sum(1 for _ in out.open(encoding="utf-8"))
        if written != events:
            raise AssertionError(f"the export wrote {written} events, not {events}")
        compared = check_equal(out, runs[:CHECKED_RUNS], assets)
        if any(count != events for _, count in references):
            raise AssertionError("openlineage-python built another number of events")

        export_best = min(took for took, _ in exports)
        reference_best = min(took for took, _ in references)
        ours, theirs = events / export_best, events / reference_best
        print(
            f"events equal: yes ({compared} events of the first {min(CHECKED_RUNS, len(runs))} task runs; "
            "openlineage-python's empty {}/[] defaults left out)"
        )
        print(
            f"start-up: olbridge export selecting nothing, the whole process: {best([t for t, _ in nothing])}, "
            f"peak RSS {max(p for _, p in nothing) / 1024:,.0f} MiB"
        )
        written_mib, peak_mib = out.stat().st_size / 1024 / 1024, max(p for _, p in exports) / 1024
        print(
            f"olbridge export, the whole process: {ours:>9,.0f} events/s  ({best([t for t, _ in exports])}; "
            f"{written_mib:,.1f} MiB written; peak RSS {peak_mib:,.0f} MiB)"
        )
        print(f"openlineage-python + Serde:         {theirs:>9,.0f} events/s  ({best([t for t, _ in references])})")
        print(f"ratio (olbridge export / openlineage-python): {ours / theirs:.1f}x")
        pairs = sorted(ref / took for (took, _), (ref, _) in zip(exports, references, strict=True))
        print(
            f"ratio of each pair, in the order measured: "
            f"{', '.join(f'{ref / took:.1f}x' for (took, _), (ref, _) in zip(exports, references, strict=True))}"
            f"; median {pairs[len(pairs) // 2]:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
