"""Asset health at scale: the health of every asset of a catalog, with their freshness rules and
the at-risk flags through their lineage.

    python benchmarks/health.py [--assets 1000000] [--rules 100000] [--selectors 100] [--repeat 1]

A SQLite catalog (in a temporary folder) gets ``--assets`` assets in chains of ten (each written by
one task run, reading the asset before it: ``--assets`` runs, usages and lineage edges), every
tenth written long ago (stale), ``--rules`` of them with a freshness rule of their own (a 6-hour
window) and ``--selectors`` ``[[freshness]]`` selectors by namespace, type and id prefix. The rows
are written directly (the benchmark times the judging, not the recording). It prints the time
``Catalog.health`` takes as a whole (reading the facts, judging each asset, the at-risk walk)
and, apart, the judging and the walk alone on facts already read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.catalog import Catalog  # noqa: E402
from bridge.model import format_time  # noqa: E402
from bridge.model.health import (  # noqa: E402
    Facts,
    FreshnessRule,
    Health,
    Match,
    RuleBook,
    Selector,
    at_risk,
    evaluate,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAIN = 10
NAMESPACES = 50
WINDOW = '{"max": "6h", "source": "asset"}'


def fill(catalog: Catalog, assets: int, rules: int) -> None:
    recent, old = format_time(NOW - timedelta(hours=1)), format_time(NOW - timedelta(days=2))
    with catalog.transaction() as cur:
        rows = []
        for n in range(assets):
            namespace = f"team-{n % NAMESPACES}"
            rows.append((f"wh.s{n % 1000}.t{n}", "Table", namespace, "{}", "declared", old, recent, None, None))
        cur.executemany(
            "INSERT INTO assets (id, type, namespace, metadata, origin, created_at, updated_at, columns, assertions) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        cur.executemany(
            "INSERT INTO task_runs (pk, flow_namespace, flow_id, task_id, execution_id, task_run_id, state, "
            "started_at, ended_at, job, record_hash) VALUES (?, 'ns', 'flow', ?, 'e', ?, 'SUCCESS', ?, ?, '{}', '')",
            [(n + 1, f"t{n}", f"r{n}", old if n % CHAIN == 0 else recent, old if n % CHAIN == 0 else recent)
             for n in range(assets)],
        )  # fmt: skip
        cur.executemany(
            "INSERT INTO usages (task_run_pk, direction, position, asset_id, used_at) VALUES (?, 'output', 0, ?, ?)",
            [(n + 1, rows[n][0], rows[n][6]) for n in range(assets)],
        )
        cur.executemany(
            "INSERT INTO lineage (upstream_id, downstream_id, task_run_pk) VALUES (?, ?, ?)",
            [(rows[n - 1][0], rows[n][0], n + 1) for n in range(assets) if n % CHAIN],
        )
        step = max(assets // max(rules, 1), 1)
        cur.executemany(
            "INSERT INTO freshness_rules (asset_id, rule, set_at) VALUES (?, ?, ?)",
            [(rows[n][0], WINDOW, recent) for n in range(0, assets, step)][:rules],
        )


def selectors(count: int) -> list[Selector]:
    return [
        Selector(
            Match(namespace=f"team-{n % NAMESPACES}", type="Table" if n % 2 else None, id_prefix=f"wh.s{n}."),
            FreshnessRule.create(max=timedelta(hours=12 + n % 12), source=f"[[freshness]] #{n + 1}"),
        )
        for n in range(count)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", type=int, default=1_000_000)
    parser.add_argument("--rules", type=int, default=100_000)
    parser.add_argument("--selectors", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    book = selectors(args.selectors)
    with tempfile.TemporaryDirectory() as folder, Catalog(Path(folder) / "health.db") as catalog:
        started = time.perf_counter()
        fill(catalog, args.assets, args.rules)
        print(
            f"catalog of {args.assets:,} assets, {args.rules:,} rules filled in {time.perf_counter() - started:.1f} s"
        )
        for _ in range(args.repeat):
            started = time.perf_counter()
            found = catalog.health(NOW, book)
            took = time.perf_counter() - started
            counts = {h: sum(1 for f in found if f.health is h) for h in Health}
            risky = sum(1 for f in found if f.at_risk)
            print(
                f"Catalog.health: {len(found):,} assets in {took:.2f} s "
                f"({', '.join(f'{h.value} {n:,}' for h, n in counts.items())}; at risk {risky:,})"
            )
        # the judging and the walk alone, on facts already read
        rules = RuleBook(book)
        own = FreshnessRule.create(max=timedelta(hours=6))
        ids = [f.asset_id for f in found]
        writes = {i: NOW - timedelta(days=2 if n % CHAIN == 0 else 0, hours=1) for n, i in enumerate(ids)}
        downstream = {ids[n - 1]: [ids[n]] for n in range(len(ids)) if n % CHAIN}
        started = time.perf_counter()
        verdicts = [
            evaluate(
                Facts(i, last_write=writes[i]),
                rules.rule_for(i, "Table", f"team-{n % NAMESPACES}", {}, own if n % 10 == 0 else None),
                NOW,
            )
            for n, i in enumerate(ids)
        ]
        judged = time.perf_counter() - started
        started = time.perf_counter()
        before = at_risk({v.asset_id for v in verdicts if v.health in (Health.FAIL, Health.WARN)}, downstream)
        walked = time.perf_counter() - started
        print(f"judging alone: {judged:.2f} s; at-risk walk alone: {walked:.2f} s ({len(before):,} at risk)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
