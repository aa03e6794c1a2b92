"""Asset health at scale: the health of every asset of a catalog, with their freshness rules, their
checks and the at-risk flags through their lineage.

    python benchmarks/health.py [--assets 20000] [--rules N] [--selectors 100] [--repeat 3]
                                [--keep PATH_OR_URL] [--engine sqlite|postgresql] [--no-watch]

The catalog gets ``--assets`` assets in lineage chains of ten (each written by one task run that
reads the asset before it: as many runs, usages and lineage edges), every tenth written long ago
(stale, so its chain is at risk), ``--rules`` of them with a freshness rule of their own (a
6-hour window; default a tenth of the assets), every hundredth with checks (every thousandth
failing), and ``--selectors`` ``[[freshness]]`` selectors by namespace, type and id prefix. The
rows are written directly, in bulk (the benchmark times the judging, not the recording), with
what the writes keep of the runs made from them as a migration makes it, then ANALYZE. It
prints the p50 and max of ``--repeat`` calls of ``Catalog.health`` (``assess``: reading the
facts, judging each asset, the at-risk walk) and of ``olbridge health --json`` run as a command
(its start, the same, and writing the JSON; to /dev/null), and of the command with
``--namespace team-small`` (1,000 of the first 2,000 assets, whole chains, are that namespace's:
it judges them alone): in time, then in CPU time (of the process; of the command's process), which a
machine's other work changes less. Then the health of
a few assets, judged from their own facts (``--some``: how many at once, each count 20 times, the
assets chosen at random, each at the end of a chain of ten so that nine are upstream of it): what
``assets show`` (one), a page of ``assets list`` (50) and a health watch's pass over its marked
assets (1,000) ask for. Then the health watch's work (:func:`watch_passes`; ``--no-watch``: not):
its passes over every asset, its looks with nothing to judge, and those that judge the thousands
of assets whose freshness window ends at once, found by their due times.

``--keep`` builds the catalog there once (a SQLite file, or an empty PostgreSQL database's URL) and
times it; run again with the same ``--keep`` and it is timed without building it again. Without
it, a temporary SQLite file, or with ``--engine postgresql`` a database on a PostgreSQL server
started for the run (tests/postgres.py). The issue's scale: ``--assets 1000000 --rules 100000``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog, writes_kept  # noqa: E402
from bridge.catalog.browse import Scope  # noqa: E402
from bridge.catalog.health import assess  # noqa: E402
from bridge.catalog.health_state import BATCH, LEASE_KIND, judge, keep_passed  # noqa: E402
from bridge.catalog.retention import release_lease, take_lease  # noqa: E402
from bridge.model import format_time  # noqa: E402
from bridge.model.alerts import AlertRule  # noqa: E402
from bridge.model.health import FreshnessRule, Health, Match, Selector, format_duration  # noqa: E402
from bridge.web import pages  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAIN = 10
NAMESPACES = 50
CHUNK = 20_000
WINDOW = '{"max": "6h", "source": "asset"}'
SMALL, SMALL_NAMESPACE = 1000, "team-small"


def asset_id(n: int) -> str:
    return f"wh.s{n % 1000}.t{n}"


def namespace_of(n: int) -> str:
    """A team's namespace, by turns; :data:`SMALL` assets' a small one of their own, ``team-small``,
    which the command is timed on too: of the first 2,000 assets, those whose ids no selector
    takes (``wh.s500.`` to ``wh.s999.``, whole chains; selectors take ``wh.s0.`` on, one each)."""
    return SMALL_NAMESPACE if n < 2 * SMALL and n % 1000 >= SMALL // 2 else f"team-{n % NAMESPACES}"


def insert(catalog: Catalog, statement: str, rows: Iterator[tuple[Any, ...]]) -> None:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            with catalog.transaction() as cur:
                cur.executemany(statement, batch)
            batch = []
    if batch:
        with catalog.transaction() as cur:
            cur.executemany(statement, batch)


def fill(catalog: Catalog, assets: int, rules: int) -> None:
    recent, old = format_time(NOW - timedelta(hours=1)), format_time(NOW - timedelta(days=2))

    def written(n: int) -> str:
        return old if n % CHAIN == 0 else recent

    insert(
        catalog,
        "INSERT INTO assets (id, type, namespace, metadata, origin, created_at, updated_at, columns, assertions) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((asset_id(n), "Table", namespace_of(n), "{}", "declared", old, recent, None, None)
         for n in range(assets)),
    )  # fmt: skip
    insert(
        catalog,
        "INSERT INTO task_runs (pk, flow_namespace, flow_id, task_id, execution_id, task_run_id, state, "
        "started_at, ended_at, job, record_hash) VALUES (?, 'ns', 'flow', ?, 'e', ?, 'SUCCESS', ?, ?, '{}', '')",
        ((n + 1, f"t{n}", f"r{n}", written(n), written(n)) for n in range(assets)),
    )
    insert(
        catalog,
        "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at) VALUES (?, 'output', 0, ?, ?)",
        ((n + 1, asset_id(n), written(n)) for n in range(assets)),
    )
    insert(
        catalog,
        "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?)",
        ((asset_id(n - 1), asset_id(n), n + 1) for n in range(assets) if n % CHAIN),
    )
    step = max(assets // max(rules, 1), 1)
    insert(
        catalog,
        "INSERT INTO freshness_rules (asset_id, rule, set_at) VALUES (?, ?, ?)",
        ((asset_id(n), WINDOW, recent) for n in range(0, assets, step)[:rules]),
    )
    passed, failed = '[{"assertion": "unique", "success": true}]', '[{"assertion": "not_null", "success": false}]'
    insert(
        catalog,
        "INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions) VALUES (?, ?, 'dbt import', ?)",
        ((asset_id(n), written(n), failed if n % 1000 == 5 else passed) for n in range(5, assets, 100)),
    )
    with catalog.transaction() as cur:  # what the writes keep of the runs, made as a migration makes it
        cur.execute(writes_kept.FILL_LATEST_RUNS)
        cur.execute(writes_kept.FILL_WRITERS)
        cur.execute(writes_kept.FILL_UNWRITTEN_WRITERS)
    with catalog.transaction() as cur:  # the planners' statistics, as a catalog in use has them
        cur.execute("ANALYZE")


def selectors(count: int) -> list[Selector]:
    return [
        Selector(
            Match(namespace=f"team-{n % NAMESPACES}", type="Table" if n % 2 else None, id_prefix=f"wh.s{n}."),
            FreshnessRule.create(max=timedelta(hours=12 + n % 12), source=f"[[freshness]] #{n + 1}"),
        )
        for n in range(count)
    ]


def config_text(target: str, book: Sequence[Selector]) -> str:
    """The config of the command: the catalog, and the selectors as ``[[freshness]]`` tables."""
    lines = [f'catalog = "{target}"']
    for s in book:
        match = ", ".join(f'{key} = "{value}"' for key, value in attrs_of(s.match).items())
        assert s.rule.max is not None
        lines += ["", "[[freshness]]", f"match = {{ {match} }}", f'max = "{format_duration(s.rule.max)}"']
    return "\n".join(lines) + "\n"


def attrs_of(match: Match) -> dict[str, str]:
    found = {"namespace": match.namespace, "type": match.type, "id_prefix": match.id_prefix}
    return {key: value for key, value in found.items() if value is not None}


def summary(times: list[float], cpu: list[float]) -> str:
    return (
        f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s ({len(times)} runs); "
        f"CPU p50 {statistics.median(cpu):.2f} s, max {max(cpu):.2f} s"
    )


def some_health(catalog: Catalog, book: Sequence[Selector], some: int, paths: bool, rounds: int = 20) -> str:
    """The health of ``some`` assets at the ends of chains, chosen at random, ``rounds`` times."""
    held = int(catalog._conn.execute("SELECT count(*) FROM assets").fetchone()[0])
    chosen = random.Random(some)
    times, cpu = [], []
    for _ in range(rounds):
        ids = [asset_id(chosen.randrange(held // CHAIN) * CHAIN + CHAIN - 1) for _ in range(some)]
        started, used = time.perf_counter(), time.process_time()
        found = assess(catalog._conn, book, NOW, ids=ids, paths=paths)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        assert len(found) == len(set(ids))
    median, slowest = statistics.median(times) * 1000, max(times) * 1000
    return f"p50 {median:.1f} ms, max {slowest:.1f} ms; CPU p50 {statistics.median(cpu) * 1000:.1f} ms"


def watch_passes(catalog: Catalog, book: Sequence[Selector]) -> list[str]:
    """The health watch's work on the catalog (its kept health, marks and alerts cleared first):
    its first pass over every asset (every kept health written), a pass over every asset again
    (nothing changed: its ``[health] every``, by default hourly), looks with nothing due or marked
    (every ``poll``), and the looks that judge the assets due when freshness windows end for
    thousands at once (23 hours on: every selector's window, 12 to 23 hours, has ended for the
    assets written an hour before NOW), a batch a look, until none is left; an alert rule takes
    every change."""
    with catalog.transaction() as cur:
        for table in ("asset_health", "health_marks"):
            cur.execute(f"DELETE FROM {table}")
        cur.execute("DELETE FROM outbox WHERE kind = 'alert'")
    alerts = [AlertRule("all", Match(), frozenset({"FAIL", "WARN", "RECOVERED"}), "http://127.0.0.1:9/hook")]
    lines = []

    def timed(as_of: datetime, every: bool) -> tuple[float, float, Any]:
        started, used = time.perf_counter(), time.process_time()
        result = judge(catalog.db, book, alerts, as_of, every=every)
        return time.perf_counter() - started, time.process_time() - used, result

    took, cpu, first = timed(NOW, True)
    lines.append(f"first pass over every asset: {took:.1f} s (CPU {cpu:.1f} s), {first.changed:,} kept health written")
    took, cpu, again = timed(NOW + timedelta(minutes=1), True)
    lines.append(f"a pass over every asset again: {took:.1f} s (CPU {cpu:.1f} s), {again.changed:,} changed")
    idle = [timed(NOW + timedelta(minutes=2, seconds=n), False)[0] * 1000 for n in range(20)]
    lines.append(f"a look with nothing due or marked: p50 {statistics.median(idle):.1f} ms, max {max(idle):.1f} ms")
    later = NOW + timedelta(hours=23, seconds=1)
    counted = "SELECT count(*) FROM asset_health WHERE due_at <= ?"
    due = int(catalog._conn.execute(counted, (format_time(later),)).fetchone()[0])
    looks, changed, queued, spent, used = [], 0, 0, 0.0, 0.0
    while True:
        took, cpu, result = timed(later, False)
        looks.append(took * 1000)
        changed, queued, spent, used = changed + result.changed, queued + result.alerts, spent + took, used + cpu
        if result.due < BATCH:
            break
    lines.append(
        f"{due:,} assets due at once, judged in {len(looks)} looks: {spent:.2f} s (CPU {used:.2f} s), "
        f"p50 {statistics.median(looks):.0f} ms a look; {changed:,} changed, {queued:,} alerts queued"
    )
    return lines


def kept_pages(catalog: Catalog, book: Sequence[Selector], rounds: int = 5) -> list[str]:
    """The web view's health page of the whole catalog as the health watch keeps it (the catalog
    taken as past what a request judges whole, whatever its size; the kept health the watch's
    passes above left), a lease
    taken for the time as a live watch holds it: the FAIL and WARN page, a page of every state
    after an id, and a token's page (one team's namespace), ``rounds`` times each."""
    holder = "benchmark"
    if not take_lease(catalog.db, holder, time.time(), 600.0, kind=LEASE_KIND):
        return ["the health watch's lease is held by another process: not timed"]
    # as the watch's passes above made it: a pass over every asset by the lease's holder
    catalog.db.write(lambda cur: keep_passed(cur, holder, format_time(NOW)))
    lines = []
    bound = pages.HEALTH_PAGE_AT_MOST
    pages.HEALTH_PAGE_AT_MOST = 0  # a catalog of any size as past it (at 1,000,000, as it is)
    try:
        for label, query, scope in (
            ("FAIL and WARN, the first page", {}, None),
            ("every state, a page after an id", {"state": "FAIL,WARN,PASS,UNKNOWN", "after": "wh.s5"}, None),
            ("a token that sees team-7", {}, Scope(("team-7",))),
        ):
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                page = pages.health_page(catalog, query, scope, book)
                times.append(time.perf_counter() - started)
            if not page["kept"]:
                raise SystemExit("the health page did not read the kept health")
            lines.append(
                f"{label}: p50 {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
                f"({len(page['assets'])} assets shown of {sum(page['counts'].values()):,} counted)"
            )
    finally:
        pages.HEALTH_PAGE_AT_MOST = bound
        release_lease(catalog.db, holder, kind=LEASE_KIND)
    return lines


def children_cpu() -> float:
    """The CPU time (user and system) of the ended child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assets", type=int, default=20_000)
    parser.add_argument("--rules", type=int, help="assets with a rule of their own (default: a tenth)")
    parser.add_argument("--selectors", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="calls of Catalog.health, and runs of the command")
    parser.add_argument("--keep", help="build the catalog here once and keep it (a SQLite file or a PostgreSQL URL)")
    parser.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite", help="without --keep")
    parser.add_argument(
        "--some", default="1,50,1000", help="how many assets judged at once from their own facts, comma-separated"
    )
    parser.add_argument(
        "--no-watch", dest="watch", action="store_false", help="leave out the health watch's passes and looks"
    )
    args = parser.parse_args(argv)
    rules = args.rules if args.rules is not None else args.assets // 10
    book = selectors(args.selectors)
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        target = args.keep or str(Path(folder) / "health.db")
        if args.keep is None and args.engine == "postgresql":
            server = stack.enter_context(PostgresServer.start())
            target = server.url(server.create_database())
        with Catalog(target) as catalog:
            held = int(catalog._conn.execute("SELECT count(*) FROM assets").fetchone()[0])
            if held:
                print(f"catalog of {held:,} assets kept from before: not built again")
            else:
                started = time.perf_counter()
                fill(catalog, args.assets, rules)
                took = time.perf_counter() - started
                print(f"catalog of {args.assets:,} assets, {rules:,} rules built in {took:.1f} s")
            times, cpu = [], []
            for _ in range(args.repeat):
                started, used = time.perf_counter(), time.process_time()
                found = catalog.health(NOW, book)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - used)
            for some in (int(n) for n in args.some.split(",") if n):
                # a watch's pass judges without at-risk flags; assets show and list with them
                paths = some < 1000
                what = "with their at-risk flags" if paths else "without at-risk flags, as a watch's pass"
                print(f"health of {some:,} asset(s) {what}: {some_health(catalog, book, some, paths)}")
            if args.watch:
                for line in watch_passes(catalog, book):
                    print(f"health watch: {line}")
                for line in kept_pages(catalog, book):
                    print(f"the web view's health page, as the watch keeps it: {line}")
        counts = {h: sum(1 for f in found if f.health is h) for h in Health}
        risky = sum(1 for f in found if f.at_risk)
        print(
            f"Catalog.health: {len(found):,} assets "
            f"({', '.join(f'{h.value} {n:,}' for h, n in counts.items())}; at risk {risky:,}): {summary(times, cpu)}"
        )
        config = Path(folder) / "olbridge.toml"
        config.write_text(config_text(target, book), encoding="utf-8")
        command = [sys.executable, "-m", "bridge", "--config", str(config), "health", "--json", "--as-of"]
        times, cpu = [], []
        for _ in range(args.repeat):
            started, used = time.perf_counter(), children_cpu()
            done = subprocess.run([*command, format_time(NOW)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times.append(time.perf_counter() - started)
            cpu.append(children_cpu() - used)
            if done.returncode not in (0, 1):
                raise SystemExit(f"olbridge health failed: {done.stderr.decode(errors='replace')}")
        print(f"olbridge health --json: {summary(times, cpu)}; {done.stderr.decode(errors='replace').strip()}")
        times, cpu = [], []
        for _ in range(args.repeat):  # one namespace: its assets and those upstream, not the catalog
            started, used = time.perf_counter(), children_cpu()
            done = subprocess.run(
                [*command, format_time(NOW), "--namespace", SMALL_NAMESPACE],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            times.append(time.perf_counter() - started)
            cpu.append(children_cpu() - used)
            if done.returncode not in (0, 1):
                raise SystemExit(f"olbridge health failed: {done.stderr.decode(errors='replace')}")
        said = done.stderr.decode(errors="replace").strip()
        print(f"olbridge health --json --namespace {SMALL_NAMESPACE}: {summary(times, cpu)}; {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
