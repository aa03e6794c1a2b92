"""What the Metaflow helper costs a step.

1. The recorder alone: tasks that each read two assets and write one (every call opens the
   catalog file and writes one transaction, as inside a step), on a fresh catalog file.
2. A real local Metaflow flow (start → train → end, local metadata and datastore) run with the
   helpers and without them, best of ``--repeat``: the difference is the helpers' cost, the
   Metaflow client's read of the task's outcome at exit included.

    .venv/bin/python benchmarks/metaflow_helper.py [--tasks 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bridge.adapters.metaflow.assets import make_scope, parse_definition
from bridge.adapters.metaflow.steps import StepContext, StepRecorder
from bridge.model import TaskState

CONFIG = 'name = "{name}"\nid = "{name}"\ndescription = "benchmark asset"\n[properties]\nowner = "bench"\n'

FLOW = """\
import os

from metaflow import FlowSpec, step

USE = os.environ.get("USE_OLBRIDGE") == "1"
if USE:
    from bridge.adapters.metaflow import get_data, register_data, register_model


class BenchFlow(FlowSpec):
    @step
    def start(self):
        self.orders = list(range(100))
        if USE:
            register_data("orders", "orders", annotations={"rows": 100})
        self.next(self.train)

    @step
    def train(self):
        orders = get_data("orders") if USE else self.orders
        self.mean = sum(orders) / len(orders)
        if USE:
            register_model("model", "mean", annotations={"mean": self.mean})
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    BenchFlow()
"""


def recorder_bench(folder: Path, tasks: int) -> None:
    definitions = [
        parse_definition(CONFIG.format(name=name), Path(f"{kind}/{name}/asset_config.toml"), kind.rstrip("s"))
        for kind, name in (("data", "a"), ("data", "b"), ("models", "m"))
    ]
    catalog = folder / "recorder.db"
    scope = make_scope("bench", "user.bench")
    start = time.perf_counter()
    for i in range(tasks):
        context = StepContext("BenchFlow", str(i), "train", "1", 0, scope, folder)
        step = StepRecorder(context, catalog, outcome=lambda _: (TaskState.SUCCESS, None))
        step.read(definitions[0])
        step.read(definitions[1])
        step.write(definitions[2], "model", {"run": i}, None)
        step.end()
    seconds = time.perf_counter() - start
    calls = tasks * 4
    print(f"recorder: {tasks} tasks (2 reads, 1 write, end) in {seconds:.2f} s")
    print(f"recorder: {tasks / seconds:,.0f} tasks/s, {seconds / calls * 1000:.2f} ms per call")


def run_flow(root: Path, use: bool, attempt: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METAFLOW_", "OLBRIDGE_"))}
    env.update(
        {
            "METAFLOW_HOME": str(root / "home"),
            "METAFLOW_DEFAULT_METADATA": "local",
            "METAFLOW_DEFAULT_DATASTORE": "local",
            "USER": "bench",
            "USERNAME": "bench",
            "OLBRIDGE_CATALOG": str(root / f"flow-{attempt}.db"),
            "USE_OLBRIDGE": "1" if use else "0",
        }
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "flow.py", "--no-pylint", "run"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"the flow failed ({done.returncode})")
    return seconds


def flow_bench(folder: Path, repeat: int) -> None:
    root = folder / "project"
    for kind, name in (("data", "orders"), ("models", "model")):
        (root / kind / name).mkdir(parents=True)
        (root / kind / name / "asset_config.toml").write_text(CONFIG.format(name=name), encoding="utf-8")
    (root / "flow.py").write_text(FLOW, encoding="utf-8")
    without = min(run_flow(root, False, i) for i in range(repeat))
    with_helpers = min(run_flow(root, True, i) for i in range(repeat))
    per_task = (with_helpers - without) / 2  # start and train use the helpers
    print(f"flow without helpers: {without:.2f} s (best of {repeat})")
    print(f"flow with helpers:    {with_helpers:.2f} s (best of {repeat})")
    print(f"cost per task that uses the helpers: {per_task * 1000:.0f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000, help="tasks for the recorder alone (default: 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the real flow each way (default: 3)")
    args = parser.parse_args(argv)
    print(f"python: {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="olbridge-bench-") as tmp:
        recorder_bench(Path(tmp), args.tasks)
        flow_bench(Path(tmp), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
