"""olbridge past one machine, in one run: the receiver on PostgreSQL with one and with two ``olbridge
serve`` processes, single events and batches of 100, ``olbridge stream`` with one and with two
workers, and the same on SQLite beside them (one process each: SQLite's topology).

    python benchmarks/scale.py [--seconds 10] [--connections 16] [--runs 20000] [--repeat 1] [--copy-runs 100000]
                               [--parts receivers writer stream copy] [--writer-groups 4 400 1600] [--warm 0]
                               [--popular 0] [--watch]

The receiver is loaded by ``wrk`` as ``benchmarks/ingest.py`` does (its events and Lua script: each
run a START and a COMPLETE, 280 jobs on their own tables, every event distinct), one wrk a server
process, each posting its own slice of the events, so that nothing is a duplicate (with ``--popular N``,
each run reads one and writes another of N popular tables instead, chosen at random: every group
names most of them; with ``--watch``, every server runs with a ``[health]`` table: a health
watch live, the receivers mark what their events write); events/s is the
servers' steady rate, counted by their metrics once the load runs; p50 / p99 are wrk's (the higher
of the wrk processes'); ev/commit is the events each commit of the servers' writers took, on
average (their metrics: the group a commit holds); CPU µs/event is that of olbridge's processes
(in brackets: its writers' share, the rest the HTTP workers') and of the database server's, over
the same window; after the table, for each engine and kind of request, two processes against
one: their events/s and CPU an event (olbridge's and the database's together). Every server
runs with its defaults (one HTTP worker, or ``--serve-workers``, and a writer). With
``--repeat N``, the one-process and two-process runs take turns, N of each, and the median of
each is shown; every PostgreSQL run starts from a checkpoint of the server. The writer
alone (``--parts writer``) takes the same events without HTTP in groups of ``--writer-groups``,
after ``--warm`` events taken untimed.
The stream workers drain a catalog of ``--runs`` task runs (two events each) to a loopback backend
(``tests/backend.py`` in its own process, with the batch endpoint), timed from their start until
the backend holds every event. Last, ``olbridge catalog copy`` of a SQLite catalog of
``--copy-runs`` task runs into PostgreSQL and back, each copy and its check timed, and the three
catalogs' exports compared byte for byte.

The PostgreSQL server is started here, in a temporary directory (``tests/postgres.py``), durable:
``fsync`` and ``synchronous_commit`` on, as SQLite's ``synchronous=FULL``. For each PostgreSQL run
it also prints what the catalog's database grew by and the WAL it wrote, per event: the figures
docs/scaling.md sizes a deployment from.

Needs ``wrk`` (Debian: ``apt-get install wrk``) and the PostgreSQL server binaries (the system's, or
the ``pgserver`` package's).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.delivery import Server as BackendServer  # noqa: E402
from benchmarks.delivery import fill  # noqa: E402
from benchmarks.ingest import (  # noqa: E402
    LUA,
    accepted,
    counted,
    event,
    free_port,
    start_wrk,
    stop,
    wait_ready,
    wrk_figures,
)
from bridge.catalog import Catalog  # noqa: E402
from bridge.receiver.server import GC_YOUNG  # noqa: E402
from tests.postgres import PostgresServer, children_of  # noqa: E402

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")


# --- the receiver --------------------------------------------------------------------------


def popular_event(n: int, datasets: int) -> dict[str, Any]:
    """:func:`event` ``n``, its run reading one and writing another of ``datasets`` popular tables
    (no facets), chosen at random: each group of events names most of them again."""
    out = event(n)
    read, write = random.Random(n // 2).sample(range(datasets), 2)
    out["inputs"] = [{"namespace": "postgres://warehouse:5432", "name": f"shop.public.t{read}"}]
    if "outputs" in out:
        out["outputs"] = [{"namespace": "postgres://warehouse:5432", "name": f"shop.public.t{write}"}]
    return out


def start_serve(
    catalog: str, log: Path, max_batch: int, workers: int = 2, config: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        OLBRIDGE,
        *(["--config", str(config)] if config is not None else []),
        "--catalog",
        catalog,
        "serve",
        "--port",
        str(port),
        "--token",
        "bench",
        "--workers",
        str(workers),
    ]
    process = subprocess.Popen(
        [*command, "--max-batch", str(max(max_batch, 1000))], stdin=subprocess.DEVNULL, stderr=log.open("a")
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(f"{url}/readyz", process)
    return process, url


TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds so far of a process and every process below it (Linux /proc), with what the
    ones that ended used (a database server's backends come and go with their connections)."""
    total, stack, seen = 0.0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(field) for field in fields[11:15]) / TICK  # utime, stime, cutime, cstime
            for task in Path(f"/proc/{pid}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return total


def listening_sockets(port: int) -> set[str]:
    """The socket inodes listening on TCP ``port`` (Linux /proc/net), as a process's open file
    descriptors name them (``socket:[inode]``)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                found.add(f"socket:[{fields[9]}]")
    return found


def writers_listening() -> set[str]:
    """The socket inodes listening on a Unix socket named ``writer.sock`` (Linux /proc/net/unix):
    each ``olbridge serve``'s writer's, where its HTTP workers hand it their events."""
    found = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) == 8 and fields[7].endswith("writer.sock") and int(fields[3], 16) & 0x10000:  # listening
            found.add(f"socket:[{fields[6]}]")
    return found


def writer_of(supervisor: int, port: int) -> int | None:
    """The writer process of the ``olbridge serve`` listening on ``port``: of its supervisor's
    children, the one that listens on its writer's socket (not an HTTP worker, which holds the
    port's socket, nor another child: a health watch's process, and the resource tracker
    multiprocessing starts with it); None when nothing listens on the port."""
    if not listening_sockets(port):
        return None
    writers = writers_listening()
    for child in children_of(supervisor):
        if held_by(child) & writers:
            return child
    return None


def held_by(pid: int) -> set[str]:
    """What a process's open file descriptors are (``socket:[inode]``, a path): one it closes
    while they are read is left out; none for a process gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    held = set()
    for fd in fds:
        try:
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed since the listing
            continue
    return held


def load(
    urls: Sequence[str],
    endpoint: str,
    slices: Sequence[Path],
    script: Path,
    args: argparse.Namespace,
    olbridge: Sequence[int],
    database: int | None,
    writers: Sequence[int] = (),
) -> Any:
    """wrk against each server at once, each with its own bodies; the servers' steady rate (their
    counts between samples taken once the load runs), wrk's latencies, and the CPU µs an event
    of olbridge's processes (``olbridge``: the serve processes, each with its workers and writer),
    of their writers (``writers``) and of the database server's (``database``), over the same
    window."""
    per = max(args.connections // len(urls), 1)
    loads = [start_wrk(url, endpoint, bodies, script, args, per) for url, bodies in zip(urls, slices, strict=True)]
    samples: list[tuple[float, int, float, float, float]] = []
    deadline = time.monotonic() + args.seconds + 120
    while any(p.poll() is None for p in loads) and time.monotonic() < deadline:
        ours = sum(tree_cpu(pid) for pid in olbridge)
        writing = sum(tree_cpu(pid) for pid in writers)
        theirs = tree_cpu(database) if database is not None else 0.0
        samples.append((time.monotonic(), counted(*urls), ours, writing, theirs))
        time.sleep(0.5)
    outs = [p.communicate(timeout=60)[0] for p in loads]
    moving = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    if len(moving) < 4:
        raise SystemExit(f"the servers' count moved in only {len(moving)} samples: no steady rate to measure")
    (t0, c0, o0, w0, d0), (t1, c1, o1, w1, d1) = samples[moving[1]], samples[moving[-1] - 1]
    each = [wrk_figures(out) for out in outs]
    events = max(c1 - c0, 1)
    return {
        "steady": (c1 - c0) / (t1 - t0),
        "50%": max(f["50%"] for f in each),
        "99%": max(f["99%"] for f in each),
        "non2xx": sum(f["non2xx"] for f in each),
        "cpu_olbridge": 1e6 * (o1 - o0) / events,
        "cpu_writers": 1e6 * (w1 - w0) / events if writers else float("nan"),
        "cpu_database": 1e6 * (d1 - d0) / events,
    }


def bodies_for(events: list[str], mode: str, size: int, parts: int, folder: Path) -> list[Path]:
    """The events split in ``parts`` disjoint slices (one a wrk process), as request bodies: each
    run's two events (a START and its COMPLETE, side by side in ``events``) in the same slice, so
    that every process takes the work one process takes, a share of it (split event by event,
    one process took every START and the other every COMPLETE, which then met its START's row
    in the catalog, never in its group: twice the runs' writes, an event, of one process's)."""
    paths = []
    for part in range(parts):
        mine = [body for n, body in enumerate(events) if n // 2 % parts == part]
        path = folder / f"{mode}-{parts}-{part}.txt"
        if mode == "single":
            path.write_text("\n".join(mine) + "\n")
        else:
            path.write_text(
                "\n".join("[" + ",".join(mine[i : i + size]) + "]" for i in range(0, len(mine), size)) + "\n"
            )
        paths.append(path)
    return paths


class Engine:
    """A fresh catalog for each run: a SQLite file, or a new database on the PostgreSQL server."""

    def __init__(self, name: str, folder: Path, server: PostgresServer | None) -> None:
        self.name = name
        self.folder = folder
        self.server = server
        self._n = 0

    def new(self) -> str:
        self._n += 1
        if self.server is None:
            return str(self.folder / f"c{self._n}.db")
        return self.server.url(self.server.create_database())

    def drop(self, catalog: str) -> None:
        if self.server is None:
            for path in self.folder.glob(Path(catalog).name + "*"):
                path.unlink()
        else:
            self.server.drop_database(catalog.rsplit("/", 1)[1])

    def checkpoint(self) -> None:
        """A checkpoint of the PostgreSQL server (nothing on SQLite): the pages the runs before left
        dirty written out, and the WAL's next checkpoint a whole ``max_wal_size`` away."""
        if self.server is not None:
            with self.server.connect() as conn:
                conn.execute("CHECKPOINT")

    def sizes(self, catalog: str) -> tuple[int, int]:
        """The database's size and the server's WAL position, in bytes (0, 0 on SQLite)."""
        if self.server is None:
            return 0, 0
        import psycopg

        with psycopg.connect(catalog) as conn:
            size, wal = conn.execute(
                "SELECT pg_database_size(current_database()), pg_current_wal_lsn() - '0/0'::pg_lsn"
            ).fetchone()  # type: ignore[misc]
        return int(size), int(wal)


def receiver(
    engine: Engine, processes: int, mode: str, events: list[str], args: argparse.Namespace, script: Path
) -> dict[str, float]:
    endpoint = "/api/v1/lineage" if mode == "single" else "/api/v1/lineage/batch"
    slices = bodies_for(events, mode, args.batch_size, processes, engine.folder)
    catalog = engine.new()
    subprocess.run([OLBRIDGE, "--catalog", catalog, "init"], check=True, capture_output=True)
    log = engine.folder / "serve.log"
    config = None
    if args.watch:  # each server's health watch (one holds the lease): its receiver marks what it writes
        config = engine.folder / "watch.toml"
        config.write_text('[health]\nevery = "5m"\npoll = "2s"\n')
    servers = [start_serve(catalog, log, args.batch_size, args.serve_workers, config) for _ in range(processes)]
    urls = [url for _, url in servers]
    try:
        time.sleep(2)  # every worker up before the load starts
        engine.checkpoint()  # each run starts with no other run's pages left to write
        size0, wal0 = engine.sizes(catalog)
        database = engine.server.pid if engine.server is not None else None
        found = [writer_of(process.pid, int(url.rsplit(":", 1)[1])) for process, url in servers]
        writers = [pid for pid in found if pid is not None] if None not in found else []
        figures: dict[str, float] = load(
            urls, endpoint, slices, script, args, [process.pid for process, _ in servers], database, writers
        )
        counts = [accepted(url) for url in urls]
        taken, duplicates, commits = (sum(column) for column in zip(*counts, strict=True))
        size1, wal1 = engine.sizes(catalog)
    finally:
        for process, _ in servers:
            stop(process, timeout=60)
        engine.drop(catalog)
    for path in slices:
        path.unlink()
    figures["duplicates"] = duplicates
    figures["group"] = taken / max(commits, 1)  # events a commit: the writers' groups, on average
    figures["bytes"] = (size1 - size0) / max(taken, 1)
    figures["wal"] = (wal1 - wal0) / max(taken, 1)
    return figures


# --- the stream workers ----------------------------------------------------------------------


def stream(engine: Engine, workers: int, runs: int) -> float:
    """Events a second: ``workers`` processes of ``olbridge stream`` draining a catalog of ``runs``
    task runs to a loopback backend, from their start until the backend holds every event."""
    catalog = engine.new()
    with Catalog(catalog) as opened:
        fill(opened, runs)
    backend = BackendServer(batch=True)
    expected = 2 * runs
    try:
        command = [OLBRIDGE, "--catalog", catalog, "stream", "--url", backend.url, "--poll", "0.05"]
        began = time.perf_counter()
        running = [
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)
        ]
        try:
            deadline = time.monotonic() + 1800
            while backend.accepted() < expected:
                if time.monotonic() > deadline or any(p.poll() is not None for p in running):
                    raise SystemExit(f"stream did not deliver {expected} events ({backend.accepted()} arrived)")
                time.sleep(0.05)
            elapsed = time.perf_counter() - began
        finally:
            for process in running:
                stop(process, timeout=60)
        assert backend.accepted() == expected, (backend.accepted(), expected)
    finally:
        backend.stop()
        engine.drop(catalog)
    return expected / elapsed


# --- the writer alone --------------------------------------------------------------------------


def writer_figures(
    folder: Path,
    server: PostgresServer | None,
    engines: Sequence[str],
    groups: Sequence[int] = (4, 400, 1_600),
    warm: int = 0,
) -> None:
    """The receiver's writer without HTTP: the benchmark's events, parsed and judged beforehand,
    taken by ``Catalog.ingest`` in groups of 4 (as single events give), 400 and 1,600 (or
    ``groups``), one group after another on a new catalog, after ``warm`` events taken untimed (the
    datasets then exist, as in a receiver that has run a while); events/s, and the CPU µs an
    event of this process and of the database server."""
    from benchmarks.engine_overhead import prepared_events
    from bridge.mapping import Resolver

    resolver = Resolver.load()
    counts = {group: max(2_000, min(20 * group, 16_000)) // group * group for group in groups}
    events, _ = prepared_events(warm + max(counts.values()), folder, resolver)
    warming, events = events[:warm], events[warm:]
    # the collector as in olbridge serve's writer: the young generation's threshold, and the
    # events prepared here (which serve's writer gets a group at a time) kept out of its walks
    gc.collect()
    gc.freeze()
    before = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, 20, 50)
    try:
        print(f"\n{'engine':11} {'writer group':>12} {'events/s':>9} {'CPU us/event: olbridge + database':>34}")
        for name in engines:
            engine = Engine(name, folder, server if name == "postgresql" else None)
            for group in groups:
                count = counts[group]
                catalog = engine.new()
                with Catalog(catalog) as opened:
                    if warming:
                        opened.ingest(warming, resolver)
                    database = server.pid if server is not None and name == "postgresql" else None
                    cpu, theirs, began = (
                        time.process_time(),
                        tree_cpu(database) if database else 0.0,
                        time.perf_counter(),
                    )
                    for start in range(0, count, group):
                        opened.ingest(events[start : start + group], resolver)
                    elapsed = time.perf_counter() - began
                    ours = time.process_time() - cpu
                    theirs = (tree_cpu(database) - theirs) if database else 0.0
                engine.drop(catalog)
                print(
                    f"{name:11} {group:>12,} {count / elapsed:>9,.0f} "
                    f"{1e6 * ours / count:>25,.0f} + {1e6 * theirs / count:>6,.0f}",
                    flush=True,
                )
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


# --- catalog copy ----------------------------------------------------------------------------


def copy_figures(folder: Path, server: PostgresServer, runs: int) -> None:
    """``olbridge catalog copy`` of a SQLite catalog of ``runs`` task runs into PostgreSQL and back:
    the copy and the check of each, and whether the three catalogs export the same bytes."""
    import hashlib
    import re

    source = folder / "copy-source.db"
    began = time.perf_counter()
    with Catalog(source) as catalog:
        fill(catalog, runs)
    print(f"\ncatalog copy: {runs:,} task runs, SQLite catalog built in {time.perf_counter() - began:.0f}s")
    database = server.create_database()
    postgres = server.url(database)
    back = folder / "copy-back.db"
    try:
        for label, src, dst in (
            ("SQLite -> PostgreSQL", str(source), postgres),
            ("PostgreSQL -> SQLite", postgres, str(back)),
        ):
            began = time.perf_counter()
            done = subprocess.run([OLBRIDGE, "catalog", "copy", src, dst, "--json"], capture_output=True, text=True)
            elapsed = time.perf_counter() - began
            if done.returncode != 0:
                raise SystemExit(f"catalog copy failed: {done.stderr}")
            report = json.loads(done.stdout)
            found = re.findall(r"^(copying|checking): [\d,]+ rows in ([\d:]+) \(([\d,]+)/s\)$", done.stderr, re.M)
            phases = {phase: took for phase, took, _ in found}
            rates = {phase: rate for phase, _, rate in found}
            print(
                f"  {label}: {report['rows']:,} rows in {len(report['tables'])} tables, {elapsed:.1f}s in all "
                f"(copy {phases.get('copying', '?')} at {rates.get('copying', '?')} rows/s, check "
                f"{phases.get('checking', '?')} at {rates.get('checking', '?')} rows/s), every table the same: "
                f"{report['same']}"
            )
        digests = {}
        for label, location in (("SQLite", str(source)), ("PostgreSQL", postgres), ("back in SQLite", str(back))):
            out = folder / "export.ndjson"
            began = time.perf_counter()
            subprocess.run(
                [OLBRIDGE, "--catalog", location, "export", "--output", str(out)], check=True, capture_output=True
            )
            elapsed = time.perf_counter() - began
            digests[label] = hashlib.sha256(out.read_bytes()).hexdigest()
            print(
                f"  export from {label}: {out.stat().st_size / 1024 / 1024:,.1f} MiB in {elapsed:.1f}s, "
                f"sha256 {digests[label][:16]}"
            )
            out.unlink()
        print(f"  identical exports: {len(set(digests.values())) == 1}")
    finally:
        server.drop_database(database)


# --- the run ---------------------------------------------------------------------------------


def two_against_one(rows: Sequence[tuple[str, str, str, dict[str, float], list[float]]]) -> None:
    """Two ``serve`` processes against one, each engine and kind of request measured with both:
    events/s, and CPU an event of olbridge's processes and the database's together."""
    by = {(name, mode, label.split()[0]): f for name, mode, label, f, _ in rows}
    for (name, mode, processes), two in by.items():
        one = by.get((name, mode, "1"))
        if processes != "2" or one is None:
            continue
        cpu_one = one["cpu_olbridge"] + one["cpu_database"]
        cpu_two = two["cpu_olbridge"] + two["cpu_database"]
        print(
            f"{name} {'single events' if mode == 'single' else 'batches'}, 2 serve processes against 1: "
            f"events/s {two['steady']:,.0f} / {one['steady']:,.0f} = {two['steady'] / one['steady']:.2f}x "
            f"(goal >= 1), CPU an event {cpu_two:,.0f} / {cpu_one:,.0f} us = {cpu_two / cpu_one:.2f}x "
            f"(goal <= 1.10; database alone {two['cpu_database']:,.0f} / {one['cpu_database']:,.0f} us)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10, help="wrk's duration, each run")
    parser.add_argument("--connections", type=int, default=16, help="wrk's connections, shared by the servers")
    parser.add_argument("--wrk-threads", type=int, default=1, help="threads of each wrk process")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--events", type=int, default=250_000, help="distinct events to prepare")
    parser.add_argument("--runs", type=int, default=20_000, help="task runs the stream workers deliver (0: skip)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each receiver setup; the median is shown")
    parser.add_argument("--engines", nargs="+", choices=["postgresql", "sqlite"], default=["postgresql", "sqlite"])
    parser.add_argument("--serve-workers", type=int, default=1, help="olbridge serve --workers (its default: 1)")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=["receivers", "writer", "stream", "copy"],
        default=["receivers", "writer", "stream", "copy"],
    )
    parser.add_argument("--modes", nargs="+", choices=["single", "batch"], default=["single", "batch"])
    parser.add_argument(
        "--writer-groups", type=int, nargs="+", default=[4, 400, 1_600], help="group sizes of the writer alone"
    )
    parser.add_argument("--warm", type=int, default=0, help="events the writer alone takes untimed first")
    parser.add_argument("--copy-runs", type=int, default=100_000, help="task runs for catalog copy (0: skip)")
    parser.add_argument(
        "--popular", type=int, default=0, help="the receivers' runs each read and write of N popular tables (0: off)"
    )
    parser.add_argument("--watch", action="store_true", help="the servers run a health watch ([health] in a config)")
    args = parser.parse_args(argv)
    if "receivers" in args.parts and shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk); it loads the receivers")
    print(
        f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start, "
        f"CPython {platform.python_version()}, {platform.machine()}"
    )
    folder = Path(tempfile.mkdtemp(prefix="olbridge-scale-"))
    server = PostgresServer.start(durable=True) if "postgresql" in args.engines else None
    try:
        if server is not None:
            print(f"PostgreSQL {server.version} (durable: fsync and synchronous_commit on)")
        script = folder / "post.lua"
        script.write_text(LUA)
        wanted = args.events if "receivers" in args.parts else 1
        made = (lambda n: popular_event(n, args.popular)) if args.popular >= 2 else event
        events = [json.dumps(made(n), separators=(",", ":")) for n in range(wanted)]
        mean = sum(len(e) for e in events) / len(events)
        print(
            f"receiver: {args.events:,} distinct events (mean {mean:,.0f} bytes), {args.connections} connections in "
            f"all, {args.seconds}s a run, batches of {args.batch_size}; stream: {args.runs:,} task runs"
            + (f"; every run reads and writes {args.popular} popular tables" if args.popular >= 2 else "")
        )
        rows: list[tuple[str, str, str, dict[str, float], list[float]]] = []
        for name in args.engines if "receivers" in args.parts else []:
            engine = Engine(name, folder, server if name == "postgresql" else None)
            for mode in args.modes:
                # one process and two by turns, so that what drifts over the runs (the server's files,
                # the machine's other work) falls on both alike
                counts = (1, 2) if name == "postgresql" else (1,)
                done: dict[int, list[dict[str, float]]] = {processes: [] for processes in counts}
                for _ in range(args.repeat):
                    for processes in counts:
                        found = receiver(engine, processes, mode, events, args, script)
                        done[processes].append(found)
                        rate = f"{found['steady']:,.0f} events/s"
                        print(f"  ... {name} {mode} {processes} process(es): {rate}", file=sys.stderr)
                for processes, runs in done.items():
                    runs.sort(key=lambda f: f["steady"])
                    label = f"{processes} serve process{'es' if processes > 1 else ''}"
                    rows.append((name, mode, label, runs[(len(runs) - 1) // 2], [f["steady"] for f in runs]))
        if rows:
            print()
            print(
                f"{'engine':11} {'requests':15} {'receivers':19} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
                f"{'non-2xx':>8} {'dup':>4} {'ev/commit':>9} {'DB B/event':>10} {'WAL B/event':>11} "
                f"{'CPU us/event (writers)':>24}  each run"
            )
        for name, mode, label, f, every in rows:
            print(
                f"{name:11} {'one event each' if mode == 'single' else 'batches of ' + str(args.batch_size):15} "
                f"{label:19} {f['steady']:>9,.0f} {f['50%']:>8.1f} {f['99%']:>8.1f} {f['non2xx']:>8.0f} "
                f"{f['duplicates']:>4.0f} {f['group']:>9,.1f} {f['bytes'] or 0:>10,.0f} {f['wal'] or 0:>11,.0f} "
                f"{f['cpu_olbridge']:>7,.0f} ({f['cpu_writers']:>5,.0f}) + {f['cpu_database']:>6,.0f}  "
                + " ".join(f"{rate:,.0f}" for rate in every)
            )
        two_against_one(rows)
        if "writer" in args.parts:
            writer_figures(folder, server, args.engines, args.writer_groups, args.warm)
        if args.runs and "stream" in args.parts:
            print()
            print(f"{'engine':11} {'stream workers':15} {'events/s':>9}")
            for name in args.engines:
                engine = Engine(name, folder, server if name == "postgresql" else None)
                for workers in (1, 2) if name == "postgresql" else (1,):
                    print(f"{name:11} {workers:<15} {stream(engine, workers, args.runs):>9,.0f}", flush=True)
        if args.copy_runs and server is not None and "copy" in args.parts:
            copy_figures(folder, server, args.copy_runs)
        print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
