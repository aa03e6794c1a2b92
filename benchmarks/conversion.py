"""Conversion throughput: olbridge's dict-based converter against openlineage-python's classes + Serde.

Builds task runs in an in-memory catalog, reads them back once, then times turning the same stored
runs into serialized OpenLineage events both ways (catalog reads are not timed). Every pass starts
with a fresh converter and resolver, as one export does, so nothing is carried over between passes.
Two histories: a recurring one (2,000 runs over 100 tables, like daily jobs) and one in which every
run reads and writes tables no other run touches (the worst case for olbridge, which serializes
each asset version once per export). Each measurement is repeated and the best is kept.

    .venv/bin/python benchmarks/conversion.py [--runs 2000] [--tables 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog  # noqa: E402
from bridge.mapping import Resolver, Rule, load_rules  # noqa: E402
from bridge.model import Asset, AssetDeclaration, Column, StoredTaskRun, TaskRun, TaskRunKey, TaskState  # noqa: E402
from bridge.openlineage.convert import Converter  # noqa: E402
from tests.reference import task_run_events as ol_events  # noqa: E402

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
CHECKED_RUNS = 20


def duckdb_metadata(name: str) -> dict[str, str]:
    return {"system": "duckdb", "path": "w.duckdb", "database": "warehouse", "schema": "main", "name": name}


def make_run(i: int, tables: int) -> TaskRun:
    started = EPOCH + timedelta(seconds=i)
    source = f"src_{i % tables}"
    target = f"out_{i % tables}"
    return TaskRun(
        key=TaskRunKey.create("company.data", f"flow_{i % 50}", f"task_{i % 7}", f"exec-{i}", f"tr-{i}"),
        state=TaskState.SUCCESS,
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        inputs=(AssetDeclaration.create(f"warehouse.main.{source}", metadata=duckdb_metadata(source)),),
        outputs=(
            AssetDeclaration.create(
                f"warehouse.main.{target}",
                type="Table",
                description=f"Output table number {i % tables}",
                metadata={**duckdb_metadata(target), "owner": "team:data"},
                columns=(Column("id", "INTEGER", "pk"), Column("amount", "DOUBLE", None)),
            ),
        ),
    )


def load(count: int, tables: int) -> tuple[list[StoredTaskRun], dict[str, Asset]]:
    with Catalog(":memory:") as catalog:
        catalog.record_task_runs(make_run(i, tables) for i in range(count))
        stored = list(catalog.iter_task_runs())
        assets = {a.id: a for a in catalog.list_assets()}
    return stored, assets


def olbridge_pass(rules: Sequence[Rule], runs: Sequence[StoredTaskRun], assets: Mapping[str, Asset]) -> int:
    converter = Converter(Resolver(rules))
    events = 0
    for run in runs:
        events += len(converter.task_run_lines(run, assets))  # the export path: events as NDJSON lines
    return events


def reference_pass(rules: Sequence[Rule], runs: Sequence[StoredTaskRun], assets: Mapping[str, Asset]) -> int:
    converter = Converter(Resolver(rules))
    events = 0
    for run in runs:
        for event in ol_events(converter, run, assets):
            json.dumps(event, sort_keys=True)
            events += 1
    return events


def best_of(repeat: int, work: Callable[[], int]) -> tuple[float, int, list[float]]:
    """The best wall time of ``repeat`` calls, the event count, and every time."""
    times: list[float] = []
    events = 0
    for _ in range(repeat):
        start = time.perf_counter()
        events = work()
        times.append(time.perf_counter() - start)
    return min(times), events, times


def without_empty(value: Any) -> tuple[Any, int]:
    """``value`` without empty objects and arrays, and how many were dropped.

    openlineage-python's classes default ``facets``/``inputFacets`` to ``{}`` and a schema field's
    ``fields`` to ``[]``, and Serde keeps them; olbridge leaves them out. They carry nothing."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        dropped = 0
        for key, item in value.items():
            kept, n = without_empty(item)
            dropped += n
            if kept in ({}, []):
                dropped += 1
            else:
                out[key] = kept
        return out, dropped
    if isinstance(value, list):
        items = [without_empty(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def check_equal(converter: Converter, runs: Sequence[StoredTaskRun], assets: Mapping[str, Asset]) -> tuple[int, int]:
    """Compare both conversions' events for ``runs``; the number of events and of empty values dropped."""
    events = dropped = 0
    for run in runs:
        ours = [json.loads(line) for line in converter.task_run_lines(run, assets)]
        reference = [json.loads(json.dumps(d, sort_keys=True)) for d in ol_events(converter, run, assets)]
        theirs, n = without_empty(reference)
        if ours != theirs:
            raise AssertionError(f"events differ for task run {run.key}")
        events += len(ours)
        dropped += n
    return events, dropped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000, help="task runs to convert (default: 2000)")
    parser.add_argument("--tables", type=int, default=100, help="tables of the recurring history (default: 100)")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each kind; the best counts")
    args = parser.parse_args(argv)

    print(f"python: {platform.python_implementation()} {platform.python_version()}")
    processor = platform.processor() or "unknown"
    print(f"machine: {platform.machine()}, processor {processor}, {os.cpu_count()} CPUs, {platform.platform()}")

    rules = load_rules()
    for label, tables in (("recurring", args.tables), ("every table new", args.runs)):
        start = time.perf_counter()
        runs, assets = load(args.runs, tables)
        took = time.perf_counter() - start
        print(f"\n{label}: {len(runs)} task runs over {len(assets)} assets (built and read in {took:.2f} s, not timed)")
        compared, dropped = check_equal(Converter(Resolver(rules)), runs[:CHECKED_RUNS], assets)
        print(
            f"  outputs equal: yes ({compared} events of the first {min(CHECKED_RUNS, len(runs))} task runs; "
            f"{dropped} empty {{}}/[] defaults of openlineage-python left out of the comparison)"
        )
        ours_best, ours_events, ours_times = best_of(args.repeat, partial(olbridge_pass, rules, runs, assets))
        ref_best, ref_events, ref_times = best_of(args.repeat, partial(reference_pass, rules, runs, assets))
        ours_rate = ours_events / ours_best
        ref_rate = ref_events / ref_best
        shown = ", ".join
        print(
            f"  olbridge:           {ours_rate:>10,.0f} events/s  ({ours_events} events, best {ours_best:.3f} s; "
            f"passes {shown(f'{t:.3f}' for t in ours_times)} s)"
        )
        print(
            f"  openlineage-python: {ref_rate:>10,.0f} events/s  ({ref_events} events, best {ref_best:.3f} s; "
            f"passes {shown(f'{t:.3f}' for t in ref_times)} s)"
        )
        print(f"  ratio (olbridge / openlineage-python): {ours_rate / ref_rate:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
