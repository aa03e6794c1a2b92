"""Column lineage from dbt's compiled SQL: openlineage-sql (as dbt-ol calls it, and with the
dialect named) against olbridge's reader (sqlglot in the adapter's dialect), model by model.

Builds the tests' dbt project (``tests/dbt_project``) with the real dbt in a temporary folder
(``dbt build``, then ``dbt docs generate`` for catalog.json), or reads one built already
(``--project DIR``), and compares each parser's column edges (output column ← relation column,
the facet's ``fields``, direct and indirect) with the edges each model really has, written out
below by hand. Times are the median of ``--repeat`` parses of each model, after one to warm up.

    .venv/bin/python benchmarks/column_lineage.py [--project DIR] [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.adapters.dbt.sql_lineage import query_lineage, relation_key  # noqa: E402

Edge = tuple[str, str, str]  # output column, input relation (its name), input column


def same(relation: str, *columns: str) -> set[Edge]:
    return {(c, relation, c) for c in columns}


# The column edges each model of tests/dbt_project has (the ephemeral stg_orders resolved to raw.orders).
TRUTH: dict[str, set[Edge]] = {
    "stg_customers": same("customers", "customer_id", "customer_name", "country_code", "updated_at"),
    "customers_snapshot": same("customers", "customer_id", "customer_name", "country_code", "updated_at"),
    "orders_enriched": same("orders", "order_id", "customer_id", "amount", "status", "order_date")
    | {("customer_name", "stg_customers", "customer_name"), ("country_name", "countries", "country_name")},
    "customer_summary": same("orders_enriched", "customer_id", "customer_name")
    | {("total_amount", "orders_enriched", "amount")},
    "fct_orders_incremental": same("orders_enriched", "order_id", "customer_id", "amount", "order_date"),
    "revenue_by_country": {
        ("country_name", "orders_enriched", "country_name"),
        ("revenue", "orders_enriched", "amount"),
    },
    "customer_orders": {
        ("customer_id", "orders_enriched", "customer_id"),
        ("profile", "orders_enriched", "customer_name"),
        ("profile", "orders_enriched", "country_name"),
        ("total", "orders_enriched", "amount"),
        ("total_cents", "orders_enriched", "amount"),
        ("amounts", "orders_enriched", "amount"),
        ("amounts", "orders_enriched", "order_date"),
        ("returns", "orders_enriched", "status"),
    },
    "customers_all": same("stg_customers", "customer_id", "customer_name", "country_code", "updated_at"),
}


def build(work: Path) -> Path:
    """The tests' dbt project built in ``work``: its folder, with target/catalog.json."""
    binary = Path(sys.executable).parent / "dbt"
    if not binary.is_file():
        sys.exit("dbt is not installed here (pip install -e '.[dbt]'), or give --project")
    project = work / "project"
    shutil.copytree(ROOT / "tests" / "dbt_project", project)
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    for args in (["build"], ["docs", "generate", "--target-path", "docs"]):
        done = subprocess.run(
            [str(binary), *args, "--project-dir", ".", "--profiles-dir", "."],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            sys.exit(f"dbt {' '.join(args)} failed:\n{done.stdout[-2000:]}")
    shutil.copy(project / "docs" / "catalog.json", project / "target" / "catalog.json")
    return project


def openlineage_sql(dialect: str | None) -> Callable[[str, dict[tuple[str, ...], list[str]]], set[Edge]]:
    from openlineage_sql import parse

    def edges(sql: str, relations: dict[tuple[str, ...], list[str]]) -> set[Edge]:
        parsed = parse([sql], dialect=dialect) if dialect else parse([sql])  # dbt-ol names no dialect
        return {
            (item.descendant.name, meta.origin.name, meta.name)
            for item in parsed.column_lineage
            for meta in item.lineage
            if meta.origin is not None
        }

    return edges


def olbridge(sql: str, relations: dict[tuple[str, ...], list[str]]) -> set[Edge]:
    found = query_lineage(sql, dialect="duckdb", relations=relations)
    return {(column, s.relation[-1], s.column) for column, sources in found.fields.items() for s in sources}


def measure(parser: Callable[[str, Any], set[Edge]], sql: str, relations: Any, repeat: int) -> tuple[set[Edge], float]:
    """The parser's edges (an exception is none) and its median time in milliseconds."""
    try:
        edges = parser(sql, relations)
    except Exception:
        edges = set()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            parser(sql, relations)
        except Exception:
            pass
        times.append(time.perf_counter() - start)
    return edges, statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, help="a built copy of tests/dbt_project (with target/catalog.json)")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = args.project or build(Path(tmp))
        manifest = json.loads((project / "target" / "manifest.json").read_text())
        catalog = json.loads((project / "target" / "catalog.json").read_text())
        relations = {
            relation_key(e["metadata"]["database"], e["metadata"]["schema"], e["metadata"]["name"]): [
                name for name, _c in sorted(e["columns"].items(), key=lambda item: item[1]["index"])
            ]
            for group in ("nodes", "sources")
            for e in catalog[group].values()
        }
        parsers = {
            "openlineage-sql (no dialect, as dbt-ol)": openlineage_sql(None),
            "openlineage-sql (duckdb)": openlineage_sql("duckdb"),
            "olbridge (sqlglot, duckdb)": olbridge,
        }
        olbridge("select 1 as x", relations)  # sqlglot's import and dialect set-up, once
        print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
        print("# right / wrong / missing column edges, and the median time to read the model's SQL")
        totals = {name: [0, 0, 0, 0.0] for name in parsers}
        print(f"{'model':<24}" + "".join(f"{name:>44}" for name in parsers))
        for node in sorted(manifest["nodes"].values(), key=lambda n: n["name"]):
            if node["name"] not in TRUTH:
                continue
            truth, cells = TRUTH[node["name"]], []
            for name, read in parsers.items():
                edges, ms = measure(read, node["compiled_code"], relations, args.repeat)
                right, wrong, missing = len(edges & truth), len(edges - truth), len(truth - edges)
                for i, value in enumerate((right, wrong, missing, ms)):
                    totals[name][i] += value
                cells.append(f"{right:>3} / {wrong} / {missing:<2}  {ms:8.3f} ms")
            print(f"{node['name']:<24}" + "".join(f"{cell:>44}" for cell in cells))
        cells = [f"{int(r):>3} / {int(w)} / {int(m):<2}  {ms:8.3f} ms" for r, w, m, ms in totals.values()]
        print(
            f"{'all ' + str(sum(len(t) for t in TRUTH.values())) + ' edges':<24}" + "".join(f"{c:>44}" for c in cells)
        )


if __name__ == "__main__":
    main()
