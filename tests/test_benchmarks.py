"""The benchmarks still run: each module under benchmarks/ imports, and the ones that need no load
generator, dbt or Metaflow run end to end at the tiniest sizes (their own checks included: the
engine-overhead variants must leave equal catalogs and read the same task runs). A refactor that
breaks a benchmark fails here, not on the day someone measures."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODULES = sorted(path.stem for path in BENCHMARKS.glob("*.py"))


def load(stem: str) -> ModuleType:
    """The benchmark module, imported from its file (as ``python benchmarks/<stem>.py`` runs it,
    under a name of its own; the benchmarks put their folder on the path for their siblings)."""
    name = f"olbridge_benchmark_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_is_listed() -> None:
    assert {"engine_overhead", "ingest", "scale", "conversion", "ingest_parts", "instructions"} <= set(MODULES)


@pytest.mark.parametrize("stem", MODULES)
def test_imports(stem: str) -> None:
    module = load(stem)
    if stem != "bare_server":  # an ASGI app the ingest benchmark serves; the others have a main
        assert callable(module.main)


def test_the_bare_server_parses_and_counts() -> None:
    """The ingest benchmark's baseline answers as the receiver does (201 for an event, 200 and a
    summary for a batch) and counts what it parsed, which the benchmark reads back."""
    import asyncio

    bare = load("bare_server")
    sent: list[dict[str, Any]] = []

    async def call(method: str, body: bytes) -> None:
        pieces = [
            {"type": "http.request", "body": body[:5], "more_body": True},
            {"type": "http.request", "body": body[5:]},
        ]

        async def receive() -> dict[str, Any]:
            return pieces.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await bare.app({"type": "http", "method": method}, receive, send)

    asyncio.run(call("POST", b'{"eventType": "START"}'))
    asyncio.run(call("POST", b'[{"a": 1}, {"b": 2}]'))
    asyncio.run(call("GET", b""))
    statuses = [m["status"] for m in sent if m["type"] == "http.response.start"]
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    assert statuses == [201, 200, 200]
    assert b'"received":2' in bodies[1]
    assert bodies[2] == b'olbridge_receiver_events_total{result="accepted"} 3\n'


def test_engine_overhead_runs(capsys: pytest.CaptureFixture[str]) -> None:
    load("engine_overhead").main(
        ["--events", "40", "--group", "8", "--small", "8", "--runs", "20", "--repeat", "1", "--read-repeat", "1"]
    )
    out = capsys.readouterr().out
    assert "40 events in groups of 8" in out
    assert "8 events in groups of 4" in out
    assert "sqlalchemy Core, once" in out
    assert "20 task runs in pages of 1,000" in out


def test_ingest_parts_runs(capsys: pytest.CaptureFixture[str]) -> None:
    load("ingest_parts").main(["--events", "40", "--group", "8"])
    out = capsys.readouterr().out
    assert "write lock held, groups of 8" in out
    assert "write lock held, groups of 4" in out
    assert "hand-over: unpickle" in out


def test_instructions_parts_run_and_read_callgrinds_report() -> None:
    """Each part the instruction count runs under callgrind runs as it is (measuring nothing), and
    the count is read from callgrind's report."""
    import gc

    instructions = load("instructions")
    before = gc.get_threshold()
    instructions.main(["--child", "worker", "--events", "16"])
    instructions.main(["--child", "writer", "--events", "16", "--counted", "4"])
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, 0), "the collector is left as it was"
    report = "==1== Events    : Ir\n==1== Collected : 1234567\n==1== \n==1== I   refs:      1,234,567\n"
    assert instructions.collected(report) == 1_234_567
    with pytest.raises(ValueError, match="Collected"):
        instructions.collected("==1== no report\n")


def test_conversion_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("conversion").main(["--runs", "20", "--tables", "4", "--repeat", "1"]) in (0, None)
    assert capsys.readouterr().out


def test_prefect_import_runs(capsys: pytest.CaptureFixture[str]) -> None:
    load("prefect_import").main(["--task-runs", "10"])
    assert "10 task runs imported" in capsys.readouterr().out


def test_making_a_day_of_runs_is_timed_with_the_runs_of_no_day_in_their_partition_or_the_default(
    capsys: pytest.CaptureFixture[str], postgres: Any
) -> None:
    for extra, where in (([], "external_sources_undated"), (["--in-default"], "external_sources_default")):
        url = postgres.url(postgres.create_database())
        assert load("partition_make").main(["--runs", "300", "--repeat", "2", "--postgres-url", url, *extra]) == 0
        out = capsys.readouterr().out
        assert f"300 runs with no day in {where}, written in " in out, out
        assert "making a day's partition of received runs: p50 " in out and "(2 days)" in out, out


def test_pending_outbox_runs_on_both_engines(capsys: pytest.CaptureFixture[str], postgres_url: str) -> None:
    """benchmarks/pending_outbox.py at its tiniest: every row waiting goes (the lone dead letters as
    such) but the received run with one row inside the window (11 rows), the dry run's counts
    checked equal to the pass's."""
    assert load("pending_outbox").main(["--scale", "50", "--postgres-url", postgres_url]) == 0
    out = capsys.readouterr().out
    for engine in ("sqlite", "postgresql"):
        assert re.search(rf"^{engine}: 211 rows waiting: the dry run [\d.]+ s, the pass [\d.]+ s ", out, re.M), out
    assert out.count("(150 pendingOutbox, 50 deadLetters; 11 left; no pause between batches)") == 2, out


def test_soak_runs_on_both_engines(capsys: pytest.CaptureFixture[str], postgres_url: str) -> None:
    """benchmarks/soak.py at its tiniest: the days printed, retention deleting from the day past
    the window, and the re-sent events answered rightly (its exit status says so)."""
    args = ["--days", "4", "--window", "1", "--events-per-day", "40", "--batch", "10", "--pause", "0", "--jobs", "2"]
    assert load("soak").main([*args, "--postgres-url", postgres_url]) == 0
    out = capsys.readouterr().out
    assert out.count("re-sent inside the window: 40/40 recognised; older than it: 40/40 taken as new") == 2
    days = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"], ["4"])]
    assert [int(d[4].replace(",", "")) for d in days] == [0, 0, 60, 60] * 2  # events and runs of a day
    assert out.count("ingest day 4 against day 1: ") == 2 and "while retention ran: " in out
    # on PostgreSQL, the day partitions of received events, and of received runs, left at the end
    for what in ("received events", "received runs"):
        assert len([line for line in out.splitlines() if line.startswith(f"day partitions of {what} left: ")]) == 1


def test_record_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("record").main(["--runs", "20"]) == 0
    assert "summary taskRuns: 20" in capsys.readouterr().out


def test_delivery_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("delivery").main(["--events", "20", "--runs", "0"]) == 0
    out = capsys.readouterr().out
    assert "delivery: 20 events" in out
    assert "olbridge stream --once from the outbox" in out


def test_scale_runs_its_parts_without_a_load_generator(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/scale.py's writer, stream and copy parts (the receivers' need wrk), on both
    engines, at the tiniest sizes: the copy's check and identical exports included."""
    args = ["--parts", "writer", "stream", "copy", "--writer-groups", "4", "--runs", "10", "--copy-runs", "20"]
    assert load("scale").main(args) == 0
    out = capsys.readouterr().out
    assert "engine      writer group" in out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith(("postgresql  ", "sqlite  "))] == [
        ["postgresql", "4"],
        ["sqlite", "4"],
        ["postgresql", "1"],
        ["postgresql", "2"],
        ["sqlite", "1"],
    ]
    assert "every table the same: True" in out and "every table the same: False" not in out
    assert "identical exports: True" in out


WRK_OUTPUT = """\
Running 10s test @ http://127.0.0.1:8080
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    10.20ms    3.00ms  40.00ms   80.00%
    Req/Sec   780.00     50.00     900.00     70.00%
  Latency Distribution
     50%   10.20ms
     75%   12.00ms
     90%   14.00ms
     99%  1.20s
  15580 requests in 10.00s, 1.20MB read
  Non-2xx or 3xx responses: 3
Requests/sec:   1558.00
Transfer/sec:    122.00KB
"""


def test_wrk_figures_read_wrks_output() -> None:
    """The parse both wrk benchmarks (ingest.py, scale.py) share: latencies in ms, whatever the unit."""
    figures = load("ingest").wrk_figures(WRK_OUTPUT)
    assert figures == {"rps": 1558.0, "50%": 10.2, "99%": 1200.0, "non2xx": 3.0}


@pytest.mark.parametrize("watch", [False, True])
def test_scale_tells_a_serve_processs_writer_from_its_workers(tmp_path: Path, watch: bool) -> None:
    """The receivers' CPU split (scale.py's writers' share): the writer found is the child that
    listens on the writer's Unix socket (which /proc/net/unix names), not one of the workers, nor,
    with a health watch, the watch's process or the resource tracker multiprocessing starts with
    it (children that hold no HTTP socket either)."""
    import os

    from tests.helpers import free_port, serve_process
    from tests.postgres import children_of

    scale = load("scale")
    env = dict(os.environ)
    if watch:
        config = tmp_path / "olbridge.toml"
        config.write_text('[health]\nevery = "5m"\n')
        env["OLBRIDGE_CONFIG"] = str(config)
    with serve_process(tmp_path / "catalog.db", "--workers", "2", env=env) as served:
        supervisor, port = served.process.pid, int(served.url.rsplit(":", 1)[1])
        children = children_of(supervisor)
        assert len(children) == (5 if watch else 3)  # a writer and two workers (the watch, the tracker)
        writer = scale.writer_of(supervisor, port)
        assert writer in children
        listening_unix = set()
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if (
                len(fields) == 8 and fields[7].endswith("writer.sock") and int(fields[3], 16) & 0x10000
            ):  # __SO_ACCEPTCON
                listening_unix.add(f"socket:[{fields[6]}]")
        for child in children:
            held = scale.held_by(child)  # a descriptor closed while they are read: left out
            assert bool(held & listening_unix) == (child == writer)
        assert scale.writer_of(supervisor, free_port()) is None  # a port nothing listens on


def test_scale_gives_each_process_whole_runs(tmp_path: Path) -> None:
    """The receivers' slices (scale.py, one a serve process): every event once, in its order, and
    each run's START and COMPLETE in the same slice and the same batch, as one process gets them;
    not every START to one process and every COMPLETE to the other."""
    import json

    scale = load("scale")
    events = [json.dumps(scale.popular_event(n, 20)) for n in range(400)]
    for parts in (1, 2, 3):
        paths = scale.bodies_for(events, "batch", 100, parts, tmp_path)
        slices = [[json.loads(line) for line in path.read_text().splitlines()] for path in paths]
        taken = [event for batches in slices for batch in batches for event in batch]
        assert sorted(json.dumps(event) for event in taken) == sorted(events)
        for batches in slices:
            flat = [event for batch in batches for event in batch]
            assert [e["eventTime"] for e in flat] == sorted(e["eventTime"] for e in flat)
            for batch in batches:
                runs = [event["run"]["runId"] for event in batch]
                assert [e["eventType"] for e in batch] == ["START", "COMPLETE"] * (len(batch) // 2)
                assert runs[0::2] == runs[1::2]
        assert all(slices)


def test_health_runs_and_keeps_its_catalog(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kept = tmp_path / "health.db"
    arguments = ["--assets", "200", "--rules", "20", "--selectors", "5", "--repeat", "1", "--keep", str(kept)]
    assert load("health").main(arguments) == 0
    out = capsys.readouterr().out
    assert "200 assets, 20 rules built" in out
    # every tenth stale (its chain at risk), and the one failing check (asset 5)
    assert "Catalog.health: 200 assets (PASS 179, UNKNOWN 0, WARN 0, FAIL 21; at risk 180)" in out, out
    assert "olbridge health --json: p50" in out and "200 asset(s), 21 FAIL, 180 at risk" in out
    # the watch: every kept health written, then nothing changed; the four assets the selectors
    # take (windows of 13 to 16 hours, written an hour before) are due a day on, and turn FAIL
    assert "first pass over every asset:" in out and "200 kept health written" in out, out
    assert "a pass over every asset again:" in out and ", 0 changed" in out
    assert "4 assets due at once, judged in 1 looks:" in out and "4 changed, 4 alerts queued" in out
    # the health page as the watch keeps it: the FAIL (and WARN) assets, 25 of them by then
    assert "as the watch keeps it: FAIL and WARN, the first page: p50" in out
    assert "(25 assets shown of 200 counted)" in out, out
    assert "olbridge health --json --namespace team-small: p50" in out and "0 asset(s), 0 FAIL" in out
    # at the size, the small namespace is 1,000 assets in whole chains that no selector takes
    bench = load("health")
    small = [n for n in range(bench.SMALL * 2) if bench.namespace_of(n) == bench.SMALL_NAMESPACE]
    assert len(small) == bench.SMALL and all(n % bench.CHAIN == 0 for n in small[:: bench.CHAIN])
    taken = {s.match.id_prefix for s in bench.selectors(100)}
    assert not any(bench.asset_id(n).startswith(prefix) for n in small for prefix in taken if prefix)
    assert load("health").main(arguments) == 0
    again = capsys.readouterr().out
    assert "kept from before: not built again" in again and "FAIL 21; at risk 180" in again


def test_asset_show_runs_and_keeps_its_catalogs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    arguments = ["--usages", "30", "50", "--jobs", "4", "--job-runs", "2", "--repeat", "1", "--keep", str(tmp_path)]
    assert load("asset_show").main(arguments) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ +30 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+$", out, re.MULTILINE), out
    assert (tmp_path / "asset-show-50.db").is_file()
    assert load("asset_show").main(arguments) == 0
    assert re.search(r"^ +50 +kept ", capsys.readouterr().out, re.MULTILINE)


def test_export_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("export").main(["--runs", "30", "--tables", "4", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "events equal: yes (40 events of the first 20 task runs" in out
    assert "ratio (olbridge export / openlineage-python)" in out
    assert re.search(r"ratio of each pair, in the order measured: [\d.]+x, [\d.]+x; median [\d.]+x", out), out


def test_scale_takes_one_and_two_receivers_by_turns(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """scale.py's ``--repeat``: the one-process and two-process rounds take turns (what drifts over a
    run falls on both alike), and each setup's median round is the one shown. The rounds stand in
    for the wrk runs (which need wrk and take minutes); the server is a real one."""
    scale = load("scale")
    rounds: list[int] = []

    def receiver(engine: Any, processes: int, mode: str, events: Any, args: Any, script: Any) -> dict[str, float]:
        rounds.append(processes)
        steady = 1000.0 * processes + 10 * len(rounds)  # each round of a setup faster than its last
        return dict.fromkeys(("50%", "99%", "non2xx", "duplicates", "group", "bytes", "wal"), 1.0) | {
            "steady": steady,
            "cpu_olbridge": 100.0,
            "cpu_writers": 30.0,
            "cpu_database": 40.0 + processes,
        }

    monkeypatch.setattr(scale, "receiver", receiver)
    monkeypatch.setattr(scale.shutil, "which", lambda name: f"/usr/bin/{name}")  # the rounds run no wrk
    args = ["--parts", "receivers", "--engines", "postgresql", "--modes", "batch", "--repeat", "3", "--events", "10"]
    assert scale.main(args) == 0
    assert rounds == [1, 2, 1, 2, 1, 2]
    out = capsys.readouterr().out
    one = next(line for line in out.splitlines() if "1 serve process " in line)
    two = next(line for line in out.splitlines() if "2 serve processes " in line)
    assert one.split()[-3:] == ["1,010", "1,030", "1,050"] and " 1,030 " in one  # median: the second round
    assert two.split()[-3:] == ["2,020", "2,040", "2,060"] and " 2,040 " in two
    assert "events/s 2,040 / 1,030 = 1.98x" in out
