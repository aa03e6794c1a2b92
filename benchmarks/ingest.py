"""Receiver ingest throughput and latency, measured with wrk (a load generator that is not the
bottleneck) against a real ``olbridge serve`` and a bare server on the same stack.

    python benchmarks/ingest.py [--seconds 10] [--connections 16] [--batch-size 100] [--repeat 3]

Each setup runs ``--repeat`` times, each on a new catalog; the table shows the run with the median
rate, and the rate of every run beside it. "writer CPU" and "workers CPU" are the microseconds of
CPU an event that the writer process and the HTTP workers (together) spent over the same window
(read from /proc; the bare server's one process counts as workers). "duplicates" are events the
server found it had already (each wrk thread sends its own slice of the bodies, so it is 0 unless a
thread runs out of bodies: raise --events then).

Needs ``wrk`` (Debian: ``apt-get install wrk``). Every event sent is distinct (no duplicates),
validated and committed before its answer; the accepted count is read back from the receiver's
metrics, so the figures are of events in the catalog, not of requests answered.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
PRODUCER = "https://github.com/example/producer/tree/1.0"
LUA = """
local counter = 0
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
function init(args)
  bodies = {}
  for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
  -- each thread its own slice of the bodies, so that no body is sent twice
  index = id * math.floor(#bodies / tonumber(os.getenv("THREADS")))
  headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer bench"}
end
function request()
  index = index % #bodies + 1
  return wrk.format("POST", os.getenv("ENDPOINT"), headers, bodies[index])
end
"""


def event(n: int) -> dict[str, Any]:
    """The events an Airflow or Spark integration sends: each run a START (its inputs) and then a
    COMPLETE (inputs, and outputs with schema and documentation facets). 280 jobs, each always on
    its own input and output, so datasets recur as they do in production."""
    run, complete = divmod(n, 2)
    job = run % 280
    when = 1_740_816_000 + run * 2 + complete
    out: dict[str, Any] = {
        "eventType": "COMPLETE" if complete else "START",
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{run % 1000:03d}Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=run, version=4))},
        "job": {"namespace": "airflow", "name": f"dag_{job // 7}.task_{job % 7}"},
        "inputs": [{"namespace": "s3://raw-data", "name": f"orders/part-{job:04d}.parquet"}],
    }
    if complete:
        out["outputs"] = [
            {
                "namespace": "postgres://warehouse:5432",
                "name": f"analytics.public.table_{job}",
                "facets": {
                    "documentation": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/DocumentationDatasetFacet.json#/$defs/DocumentationDatasetFacet",
                        "description": "A table of the warehouse",
                    },
                    "schema": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                        "fields": [{"name": "id", "type": "BIGINT"}, {"name": "amount", "type": "DECIMAL(12,2)"}],
                    },
                },
            }
        ]
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            requests.get(url, timeout=1)
            return
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still starting
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def stop(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM (unless it has ended), then SIGKILL after ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(server: int) -> dict[str, float]:
    """CPU time so far of the server's processes (Linux /proc): the writer (the supervisor's first
    child, started before the workers) and the HTTP workers together; a single-process server is
    all "workers"."""
    tick = os.sysconf("SC_CLK_TCK")

    def used(pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    try:
        children = sorted(int(p) for p in Path(f"/proc/{server}/task/{server}/children").read_text().split())
    except OSError:
        children = []
    if not children:
        return {"writer": 0.0, "workers": used(server)}
    return {"writer": used(children[0]), "workers": sum(used(pid) for pid in children[1:])}


def start_wrk(
    url: str, endpoint: str, bodies: Path, script: Path, args: argparse.Namespace, connections: int | None = None
) -> subprocess.Popen[str]:
    """wrk posting ``bodies`` to ``endpoint`` (``connections``: ``--connections`` unless given)."""
    return subprocess.Popen(
        [
            "wrk",
            f"-t{args.wrk_threads}",
            f"-c{connections or args.connections}",
            f"-d{args.seconds}s",
            "--timeout",
            "30s",
            "--latency",
            "-s",
            str(script),
            url,
        ],
        env={**os.environ, "BODIES": str(bodies), "ENDPOINT": endpoint, "THREADS": str(args.wrk_threads)},
        stdout=subprocess.PIPE,
        text=True,
    )


def wrk_figures(out: str) -> dict[str, float]:
    """wrk's own figures from its output: requests/s, the 50% and 99% latencies (ms), the non-2xx answers."""
    figures = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}  # type: ignore[union-attr]
    for label in ("50%", "99%"):
        value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
        figures[label] = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    figures["non2xx"] = float(errors.group(1)) if errors else 0.0
    return figures


def run_wrk(
    url: str, endpoint: str, bodies: Path, args: argparse.Namespace, script: Path, server: int
) -> dict[str, float]:
    """wrk's own figures, and the server's steady rate: events counted by the server between two
    samples taken once the load is running (wrk's Lua setup, which reads every body first, and its
    ramp-up are left out)."""
    process = start_wrk(url, endpoint, bodies, script, args)
    samples: list[tuple[float, int, dict[str, float]]] = []
    deadline = time.monotonic() + args.seconds + 120
    while process.poll() is None and time.monotonic() < deadline:
        samples.append((time.monotonic(), counted(url), cpu_seconds(server)))
        time.sleep(0.5)
    out, _ = process.communicate(timeout=60)
    figures = wrk_figures(out)
    moving = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    if len(moving) < 4:
        raise SystemExit(f"the server's count moved in only {len(moving)} samples: no steady rate to measure")
    # from a second into the load to the sample before the last one that moved (which ends mid-load)
    (t0, c0, cpu0), (t1, c1, cpu1) = samples[moving[1]], samples[moving[-1] - 1]
    figures["steady"] = (c1 - c0) / (t1 - t0)
    for part in ("writer", "workers"):  # CPU microseconds an event, over the same window
        figures[f"cpu_{part}"] = 1e6 * (cpu1[part] - cpu0[part]) / max(c1 - c0, 1)
    return figures


def metric(text: str, name: str) -> int:
    found = re.search(rf"^{re.escape(name)} (\d+)$", text, re.MULTILINE)
    return int(found.group(1)) if found else 0


ACCEPTED = 'olbridge_receiver_events_total{result="accepted"}'
METRICS_HEADERS = {"Authorization": "Bearer bench"}  # /metrics answers those who hold a token


def counted(*urls: str) -> int:
    """The events the servers have accepted so far (their metrics; one that does not answer
    counts 0)."""
    total = 0
    for url in urls:
        try:
            total += metric(requests.get(f"{url}/metrics", headers=METRICS_HEADERS, timeout=5).text, ACCEPTED)
        except requests.RequestException:
            pass
    return total


def accepted(url: str) -> tuple[int, int, int]:
    """Events accepted, events found to be duplicates, and the transactions that committed them."""
    text = requests.get(f"{url}/metrics", headers=METRICS_HEADERS, timeout=10).text
    return (
        metric(text, ACCEPTED),
        metric(text, 'olbridge_receiver_events_total{result="duplicate"}'),
        metric(text, "olbridge_receiver_commits_total"),
    )


def measure_olbridge(
    catalog: Path, endpoint: str, bodies: Path, durability: str, workers: int, args: argparse.Namespace, script: Path
) -> dict[str, float]:
    """One run of wrk against a fresh ``olbridge serve`` on a new catalog (deleted after)."""
    port = free_port()
    log = catalog.with_suffix(".log")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bridge",
            "--catalog",
            str(catalog),
            "serve",
            "--port",
            str(port),
            "--durability",
            durability,
            "--workers",
            str(workers),
            "--token",
            "bench",
            "--max-batch",
            str(max(args.batch_size, 1000)),
        ],
        stderr=log.open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz", server)
        time.sleep(2)  # every worker up and listening before the load starts
        figures = run_wrk(url, endpoint, bodies, args, script, server.pid)
        taken, duplicates, commits = accepted(url)
    finally:
        stop(server)
        for path in catalog.parent.glob(catalog.name + "*"):  # the catalog, its WAL and lock files
            path.unlink()
    if "starting another" in log.read_text():  # a process died mid-run: its figures are not of one server
        print(f"warning: a process of olbridge serve restarted during the run:\n{log.read_text()}", file=sys.stderr)
    figures["per_commit"] = taken / max(commits, 1)
    figures["duplicates"] = duplicates
    return figures


def measure_bare(endpoint: str, bodies: Path, args: argparse.Namespace, script: Path) -> dict[str, float]:
    port = free_port()
    bare = subprocess.Popen(
        [sys.executable, str(HERE / "bare_server.py"), str(port)],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, bare)
        return run_wrk(url, endpoint, bodies, args, script, bare.pid)
    finally:
        stop(bare)


def median(runs: list[dict[str, float]]) -> tuple[dict[str, float], list[float]]:
    """The run with the median steady rate, and every run's rate."""
    ordered = sorted(runs, key=lambda figures: figures["steady"])
    return ordered[(len(ordered) - 1) // 2], [figures["steady"] for figures in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--events", type=int, default=250_000, help="distinct events to prepare")
    parser.add_argument("--durability", nargs="+", default=["full", "normal"])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="olbridge serve --workers")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setup; the median is shown")
    parser.add_argument("--bare", action=argparse.BooleanOptionalAction, default=True, help="measure the bare server")
    parser.add_argument("--modes", nargs="+", choices=["single", "batch"], default=["single", "batch"])
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk); it is the load generator")
    work = Path(tempfile.mkdtemp(prefix="olbridge-ingest-"))
    try:
        measure_all(args, work)
    finally:
        shutil.rmtree(work)


def measure_all(args: argparse.Namespace, work: Path) -> None:
    script = work / "post.lua"
    script.write_text(LUA)
    singles, batches = work / "singles.txt", work / "batches.txt"
    events = [json.dumps(event(n), separators=(",", ":")) for n in range(args.events)]
    size = args.batch_size
    if "single" in args.modes:
        singles.write_text("\n".join(events) + "\n")
    if "batch" in args.modes:
        batches.write_text(
            "\n".join("[" + ",".join(events[i : i + size]) + "]" for i in range(0, len(events), size)) + "\n"
        )
    print(
        f"{args.events:,} distinct events, wrk -t{args.wrk_threads} -c{args.connections} -d{args.seconds}s, "
        f"batches of {size}",
        file=sys.stderr,
    )
    rows = []
    for mode, endpoint, bodies in (
        ("single", "/api/v1/lineage", singles),
        ("batch", "/api/v1/lineage/batch", batches),
    ):
        if mode not in args.modes:
            continue
        for durability, workers in [(d, w) for w in args.workers for d in args.durability]:
            runs = [
                measure_olbridge(
                    work / f"{mode}-{durability}-{workers}-{n}.db", endpoint, bodies, durability, workers, args, script
                )
                for n in range(args.repeat)
            ]
            rows.append((mode, f"olbridge {durability}, {workers}w", *median(runs)))
        if args.bare:
            runs = [measure_bare(endpoint, bodies, args, script) for _ in range(args.repeat)]
            rows.append((mode, "bare (parse + 201)", *median(runs)))
    print(
        f"{'mode':8} {'server':22} {'requests/s':>11} {'events/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}"
        f" {'duplicates':>10} {'events/commit':>14} {'writer CPU':>10} {'workers CPU':>11}  events/s of each run"
    )
    for mode, server_name, figures, every in rows:
        print(
            f"{mode:8} {server_name:22} {figures['rps']:>11,.0f} {figures['steady']:>10,.0f} {figures['50%']:>8.2f} "
            f"{figures['99%']:>8.2f} {figures['non2xx']:>8.0f} {figures.get('duplicates', 0):>10.0f} "
            f"{figures.get('per_commit', 0):>14.1f} "
            f"{figures.get('cpu_writer', 0):>10.1f} {figures.get('cpu_workers', 0):>11.1f}  "
            + " ".join(f"{rate:,.0f}" for rate in every)
        )
    bare = {mode: figures["steady"] for mode, name, figures, _ in rows if name.startswith("bare")}
    for mode, server_name, figures, _every in rows:
        if mode in bare and not server_name.startswith("bare"):
            print(f"{mode} events, {server_name}: {figures['steady'] / bare[mode]:.2f} of the bare server")


if __name__ == "__main__":
    main()
