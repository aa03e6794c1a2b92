"""``assets show``: an asset's latest uses (newest first, ``--usages N`` of them) with how many it
has and how many are left out, read a few rows whatever its history (``Catalog.latest_usages``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.catalog import Catalog, ExternalUsage, RunUsage, sql
from bridge.mapping import Resolver
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run

pytestmark = pytest.mark.both_engines

ORDERS = "s3://raw-bucket/orders/2025"


def history(catalog: Catalog, *, reads: int, writes: int, jobs: int) -> None:
    """``reads`` runs that read ORDERS and ``writes`` that write it, a minute apart and
    interleaved, and ``jobs`` received jobs that read it (every third writes it)."""
    orders = decl(ORDERS, type="File")
    for i in range(writes):
        catalog.record_task_run(run("load", execution=f"w{i}", start=at(2 * i), outputs=(orders,)))
    for i in range(reads):
        out = (decl("mart.report", type="Table"),)
        catalog.record_task_run(run("report", execution=f"r{i}", start=at(2 * i + 1), inputs=(orders,), outputs=out))
    dataset = [ol_dataset("s3://raw-bucket", "orders/2025")]
    events = [
        ol_run_event(
            run_id=f"0194a1b2-0000-7000-8000-{j:012d}",
            job=("spark", f"job{j:02d}"),
            **({"outputs": dataset} if j % 3 == 0 else {"inputs": dataset}),
        )
        for j in range(jobs)
    ]
    assert all(o.ok for o in catalog_intake(catalog, Resolver.load()).take(events))


def test_assets_show_lists_the_latest_uses_and_counts_them_all(catalog_path: str) -> None:
    with Catalog(catalog_path) as catalog:
        history(catalog, reads=40, writes=10, jobs=25)
        every = catalog.usages_of(ORDERS)
    own = [u.to_json() for u in reversed(every) if isinstance(u, RunUsage)]  # newest first
    jobs = [u.to_json() for u in every if isinstance(u, ExternalUsage)]
    assert len(own) == 50 and len(jobs) == 25

    code, out, err = invoke(catalog_path, "assets", "show", ORDERS)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["usages"] == own[:20] + jobs[:20]
    assert [u["time"] for u in shown["usages"][:20]] == sorted((u["time"] for u in own[:20]), reverse=True)
    assert shown["usageCounts"] == {"reads": 40, "writes": 10, "externalReads": 16, "externalWrites": 9}
    assert shown["usagesLeftOut"] == 30 + 5

    code, out, _ = invoke(catalog_path, "assets", "show", ORDERS, "--usages", "3")
    shown = json.loads(out)
    assert shown["usages"] == own[:3] + jobs[:3]
    assert shown["usagesLeftOut"] == 50 - 3 + 25 - 3
    code, out, _ = invoke(catalog_path, "assets", "show", ORDERS, "--usages", "0")
    assert json.loads(out)["usages"] == [] and json.loads(out)["usagesLeftOut"] == 75
    code, out, _ = invoke(catalog_path, "assets", "show", ORDERS, "--usages", "1000")
    assert json.loads(out)["usages"] == own + jobs and json.loads(out)["usagesLeftOut"] == 0
    code, _, err = invoke(catalog_path, "assets", "show", ORDERS, "--usages", "-1")
    assert code == 2 and "--usages" in err


def test_an_asset_no_one_used_shows_none(catalog: Catalog) -> None:
    catalog.set_asset(decl("mart.empty", type="Table"), now=at(0))
    found = catalog.latest_usages("mart.empty")
    assert found.to_json() == {
        "usages": [],
        "usageCounts": {"reads": 0, "writes": 0, "externalReads": 0, "externalWrites": 0},
        "usagesLeftOut": 0,
    }


def test_the_latest_uses_are_read_from_the_index_not_sorted(tmp_path: Path) -> None:
    """SQLite reads an asset's latest uses in a direction as the first rows of usages_asset read
    backwards: no sort of all its uses, however many (PostgreSQL has the same index)."""
    with Catalog(tmp_path / "c.db") as catalog:
        statement = f"EXPLAIN QUERY PLAN {sql.LATEST_USAGES_OF_ASSET}"
        plan = [str(row[-1]) for row in catalog._conn.execute(statement, ("a", "input", 20))]
    assert "usages_asset" in plan[0] and not any("TEMP B-TREE" in step for step in plan), plan
