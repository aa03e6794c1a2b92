"""The Kestra adapter: AssetShipper's ``AssetLineage`` records as task runs, and flows' ``assets``
declarations as declared jobs (static lineage, exported as JobEvents)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from bridge.adapters.kestra.flows import parse_flow, read_flow_files
from bridge.adapters.kestra.lineage import INTEGRATION, read_lineage_files
from bridge.catalog import Catalog, DeclareResult, RecordResult


def import_lineage(catalog: Catalog, paths: Sequence[Path]) -> list[RecordResult]:
    """Record every task run of the files, in one transaction: all of them, or none."""
    return catalog.record_task_runs(read_lineage_files(paths))


def declare_flows(catalog: Catalog, paths: Sequence[Path], *, now: datetime) -> list[DeclareResult]:
    """Record the declared lineage of every flow file, in one transaction: all of them, or none."""
    return catalog.declare_flows(read_flow_files(paths), now=now)


__all__ = ["INTEGRATION", "declare_flows", "import_lineage", "parse_flow", "read_flow_files", "read_lineage_files"]
