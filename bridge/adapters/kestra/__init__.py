"""The Kestra adapter: AssetShipper's ``AssetLineage`` records as task runs, and flows' ``assets``
declarations as declared jobs (static lineage, exported as JobEvents)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from bridge.adapters.kestra.flows import parse_flow, read_flow_files
from bridge.adapters.kestra.lineage import INTEGRATION, read_lineage_files
from bridge.catalog import CatalogSource, DeclareResult, RecordResult, opened


def import_lineage(catalog: CatalogSource, paths: Sequence[Path]) -> list[RecordResult]:
    """Record every task run of the files, in one transaction: all of them, or none (the catalog
    opened once they are read). A task run Kestra restarted (its execution's restart keeps the
    task run's id) and that ends again is recorded as its next attempt, ``<taskRunId>:attempt-N``."""
    runs = read_lineage_files(paths)
    return opened(catalog).record_task_runs(runs, restarts=True)


def declare_flows(catalog: CatalogSource, paths: Sequence[Path], *, now: datetime) -> list[DeclareResult]:
    """Record the declared lineage of every flow file, in one transaction: all of them, or none
    (the catalog opened once they are read)."""
    flows = read_flow_files(paths)
    return opened(catalog).declare_flows(flows, now=now)


__all__ = ["INTEGRATION", "declare_flows", "import_lineage", "parse_flow", "read_flow_files", "read_lineage_files"]
