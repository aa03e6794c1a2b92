"""``olbridge assets show`` on an asset with a long history: the whole command's time, peak memory
and output, for histories of several sizes, so that what grows with the history shows.

    python benchmarks/asset_show.py [--usages 1000 10000 100000] [--jobs 200] [--job-runs 10]
                                    [--repeat 3] [--keep DIR]

For each ``--usages`` count a catalog is built in which ``hub.events`` has that many uses by
olbridge's task runs: a tenth written by a ``load`` task, the rest read by an ``extract`` task
of a hundred flows (each writing the flow's ``stage.s<N>``); and ``--jobs`` received jobs, each
of ``--job-runs`` runs, read it (every tenth job writes it). The rows are written directly, in
bulk (the benchmark times the command, not the recording), then ANALYZE. Then ``olbridge
assets show hub.events`` is run ``--repeat`` times as a process of its own: its wall time (the
median), its peak RSS (the largest) and the size of the JSON it prints.

``--keep DIR`` keeps the catalogs there (``asset-show-<usages>.db``), and a later run with the
same ``--keep`` times them without building them again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.health import insert  # noqa: E402
from bridge.catalog import Catalog  # noqa: E402
from bridge.catalog.sql import ASSET_COLUMNS  # noqa: E402
from bridge.model.received import run_day  # noqa: E402

HUB = "hub.events"
PRODUCER = "https://example.com/spark"
FLOWS = 100
T0 = 1_735_689_600  # 2025-01-01T00:00:00Z


def moment(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(T0 + seconds))


def build(target: str, usages: int, jobs: int, job_runs: int) -> None:
    """The catalog: ``hub.events`` used ``usages`` times by olbridge's runs and by ``jobs``
    received jobs (see the module's docstring)."""
    with Catalog(target) as catalog:
        marks = ", ".join("?" * 12)
        ids = [HUB, *(f"stage.s{f}" for f in range(FLOWS))]
        insert(
            catalog,
            f"INSERT INTO assets ({ASSET_COLUMNS}) VALUES ({marks})",
            ((i, "Table", "shop", None, None, "{}", "declared", moment(0), moment(0), None, None, None) for i in ids),
        )
        executions = (usages + FLOWS - 1) // FLOWS
        insert(
            catalog,
            "INSERT INTO executions (flow_namespace, flow_id, execution_id, started_at) VALUES (?, ?, ?, ?)",
            (("shop", f"flow{f}", f"e{e}", moment(e * 3600)) for e in range(executions) for f in range(FLOWS)),
        )

        def run(r: int) -> tuple[str, str, int]:
            """A run's flow, task and start (seconds): a day's runs an hour apart, flow by flow."""
            return f"flow{r % FLOWS}", "load" if r % 10 == 0 else "extract", (r // FLOWS) * 3600 + r % FLOWS

        def task_run(r: int) -> tuple[Any, ...]:
            flow, task, s = run(r)
            key = ("shop", flow, task, f"e{r // FLOWS}", f"r{r}")
            return (r + 1, *key, "SUCCESS", moment(s), moment(s + 30), "{}", "[]", None, f"h{r}")

        insert(
            catalog,
            "INSERT INTO task_runs (pk, flow_namespace, flow_id, task_id, execution_id, task_run_id, state, "
            "started_at, ended_at, job, warnings, error, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (task_run(r) for r in range(usages)),
        )

        def usage_rows() -> Iterator[tuple[Any, ...]]:
            for r in range(usages):
                _, task, s = run(r)
                if task == "load":
                    yield (r + 1, "output", 0, HUB, moment(s + 30), '{"rowCount": 1000}')
                else:
                    yield (r + 1, "input", 0, HUB, moment(s), None)
                    yield (r + 1, "output", 0, f"stage.s{r % FLOWS}", moment(s + 30), None)

        insert(
            catalog,
            "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at, statistics) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            usage_rows(),
        )
        insert(
            catalog,
            "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?)",
            ((HUB, f"stage.s{r % FLOWS}", r + 1) for r in range(usages) if r % 10),
        )
        insert(
            catalog,
            "INSERT INTO external_usages (job_namespace, job_name, direction, asset_id) VALUES (?, ?, ?, ?)",
            (("spark", f"job{j:03d}", "output" if j % 10 == 0 else "input", HUB) for j in range(jobs)),
        )

        def source(j: int, n: int) -> tuple[Any, ...]:
            run_id = f"0194a1b2-0000-7000-8000-{j * job_runs + n:012d}"
            hub, out = json.dumps([HUB]), json.dumps([f"lake.job{j:03d}"])
            inputs, outputs = ("[]", hub) if j % 10 == 0 else (hub, out)
            times = (moment(n * 86_400 + j), moment(n * 86_400 + j + 60)) * 2  # started, ended, first, last seen
            job = ("spark", f"job{j:03d}", run_id, "COMPLETE", "3")
            return (f"run:{run_id}", *job, *times, PRODUCER, inputs, outputs, "[]", run_day(f"run:{run_id}"))

        insert(
            catalog,
            "INSERT INTO external_sources (source, job_namespace, job_name, run_id, state, state_rank, started_at, "
            "ended_at, first_seen, last_seen, producer, inputs, outputs, warnings, run_day) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (source(j, n) for j in range(jobs) for n in range(job_runs)),
        )
        with catalog.transaction() as cur:  # the planner's statistics, as a catalog in use has them
            cur.execute("ANALYZE")


def show(target: str) -> tuple[float, int, int]:
    """``olbridge assets show hub.events`` as a process: its wall time (s), peak RSS (KiB) and the
    bytes it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "bridge", "--catalog", target, "assets", "show", HUB]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own peak RSS
        took = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            err.seek(0)
            raise SystemExit(f"assets show exited {process.returncode}: {err.read().decode()}")
        size = out.tell()
        out.seek(0)
        if json.load(out)["id"] != HUB:
            raise SystemExit("assets show printed another asset")
    return took, usage.ru_maxrss, size


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--usages", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--job-runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="keep the catalogs in this folder (and time them there later)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"{'uses of ' + HUB:>18} {'built s':>8} {'p50 s':>7} {'peak RSS MiB':>13} {'output KiB':>11}")
        for usages in args.usages:
            target = folder / f"asset-show-{usages}.db"
            built = "kept"
            if not target.exists():
                start = time.perf_counter()
                build(str(target), usages, args.jobs, args.job_runs)
                built = f"{time.perf_counter() - start:.1f}"
            runs = [show(str(target)) for _ in range(args.repeat)]
            took = statistics.median(t for t, _, _ in runs)
            rss = max(r for _, r, _ in runs) / 1024
            size = max(s for _, _, s in runs) / 1024
            print(f"{usages:>18,} {built:>8} {took:7.2f} {rss:13.1f} {size:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
