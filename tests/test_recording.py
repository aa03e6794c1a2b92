from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from bridge.catalog import Catalog
from bridge.errors import ValidationError
from bridge.model import TaskState
from bridge.task_run_api import task_run
from tests.conftest import at


def clock() -> Callable[[], datetime]:
    ticks = iter([at(0), at(1), at(2)])
    return lambda: next(ticks)


def test_a_block_that_ends_well_writes_its_outputs(catalog: Catalog) -> None:
    with task_run(
        catalog, "company.data", "reports", "export", execution_id="e1", task_run_id="r1", clock=clock()
    ) as run:
        run.reads("dbt.main.orders")
        run.writes("reports.orders", type="File", metadata={"path": "orders.csv"}, statistics={"row_count": 3})
        assert next(catalog.iter_task_runs()).state is TaskState.RUNNING  # recorded as started
    assert run.result is not None and run.result.state is TaskState.SUCCESS
    stored = next(catalog.iter_task_runs())
    assert (stored.started_at, stored.ended_at) == (at(0), at(1))
    assert [u.asset_id for u in stored.outputs] == ["reports.orders"]
    assert stored.outputs[0].statistics.row_count == 3
    assert catalog.asset("reports.orders").metadata == {"path": "orders.csv"}
    assert catalog.asset("dbt.main.orders").type == "External"


def test_a_failed_block_ends_failed_and_writes_no_output(catalog: Catalog) -> None:
    with (
        pytest.raises(RuntimeError, match="disk full"),
        task_run(catalog, "company.data", "reports", "export", clock=clock()) as run,
    ):
        run.reads("dbt.main.orders")
        run.writes("reports.orders", type="File")
        raise RuntimeError("disk full")
    stored = next(catalog.iter_task_runs())
    assert stored.state is TaskState.FAILED
    assert stored.error == "RuntimeError: disk full"
    assert stored.outputs == ()
    # made as the block's success would have made it, not written: the failed run FAILs it
    assert (stored.unwritten, catalog.asset("reports.orders").type) == (("reports.orders",), "File")
    assert catalog.usages_of("reports.orders") == []


def test_declarations_are_checked_when_made(catalog: Catalog) -> None:
    with (
        pytest.raises(ValidationError, match="name-form id"),
        task_run(catalog, "company.data", "reports", "export", clock=clock()) as run,
    ):
        run.writes("bad id", type="File")
    assert next(catalog.iter_task_runs()).state is TaskState.FAILED
    with task_run(catalog, "company.data", "reports", "other", clock=clock()) as run, pytest.raises(ValidationError):
        run.end("RUNNING")
