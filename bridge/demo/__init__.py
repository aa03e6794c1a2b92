"""The demo: the bundled dbt example, a downstream Python task, an export and its validation.

It mirrors the user's guide "Track dbt Lineage Automatically": dbt builds ``my_first_dbt_model``
and ``my_second_dbt_model``; a Python task reads the second and writes a CSV report.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path

from bridge.adapters.dbt import ingest_dbt
from bridge.catalog import Catalog, HistoryFilter
from bridge.catalog.browse import AssetFilter, list_assets
from bridge.delivery.history import iter_lines
from bridge.delivery.sinks import NdjsonSink
from bridge.drawing.asset_graph import graph_text
from bridge.errors import BridgeError, ExportError
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from bridge.task_run_api import task_run
from bridge.version import PROJECT_URL

FIRST_MODEL = "dbt.main.my_first_dbt_model"
SECOND_MODEL = "dbt.main.my_second_dbt_model"
REPORT = "reports.second_model_report"
REPORT_TASK_RUN = "demo-export-report-1"


NAMESPACE, FLOW = "company.data", "dbt_build_with_lineage"


def _only_the_demos(catalog_path: Path) -> None:
    """Refuse to start afresh over a file that is not an earlier demo's catalog (the demo's
    assets and its flow's runs alone): ``--dir`` given a folder that holds someone's catalog."""
    if not catalog_path.exists() and not catalog_path.is_symlink():
        return
    theirs = f"{catalog_path} is not a catalog the demo made; give --dir a folder of its own"
    if not catalog_path.is_file():
        raise ExportError(theirs)
    try:  # a few rows are enough to tell (whatever the size of what is there)
        with Catalog(catalog_path, create=False, migrate=False) as catalog:  # an older one is refused as it is
            assets = {a.asset.id for a in list_assets(catalog, AssetFilter(), limit=4).assets}
            runs = itertools.islice(catalog.iter_task_runs(HistoryFilter(), page_size=10), 10)
            flows = {(r.key.flow_namespace, r.key.flow_id) for r in runs}
    except BridgeError:
        raise ExportError(theirs) from None
    if not assets <= {FIRST_MODEL, SECOND_MODEL, REPORT} or not flows <= {(NAMESPACE, FLOW)}:
        raise ExportError(theirs)


def _only_the_demos_events(path: Path) -> None:
    """Refuse to write the demo's events over a file the demo did not write (empty, as a demo
    stopped while exporting leaves it, or its first event made by olbridge: the demo exports the
    whole catalog it is given), rather than replace someone's file."""
    if not path.is_file():  # none, or no file of anyone's (a device: writing to it says what it says)
        return
    try:
        with path.open("rb") as file:
            line = file.readline(1 << 20)
        first = json.loads(line) if line.strip() else None
        ours = first is None or (isinstance(first, dict) and str(first.get("producer", "")).startswith(PROJECT_URL))
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise ExportError(f"{path} is not a file the demo wrote; give --dir a folder of its own")


def example_project() -> Path:
    return Path(str(resources.files("bridge") / "demo" / "dbt_example"))


def run_demo(
    directory: Path,
    *,
    echo: Callable[[str], None],
    out: Callable[[str], None],
    catalog_path: Path | str | None = None,
) -> dict[str, object]:
    """Run the demo into a fresh catalog in ``directory``, or, with ``catalog_path``, into that
    catalog as it is (recording the demo again there changes nothing)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot make the demo folder {directory}: {exc.strerror or exc}") from None
    events_path = directory / "events.ndjson"
    _only_the_demos_events(events_path)
    if catalog_path is None:
        catalog_path = directory / "olbridge.db"
        _only_the_demos(catalog_path)
        for stale in (catalog_path, directory / "olbridge.db-wal", directory / "olbridge.db-shm"):
            stale.unlink(missing_ok=True)
    with Catalog(catalog_path) as catalog:
        summary = ingest_dbt(catalog, example_project(), namespace=NAMESPACE, flow_id=FLOW)
        echo(f"1. dbt: recorded {len(summary.results)} task runs from the bundled project's artifacts")

        flow_runs = list(catalog.iter_task_runs(HistoryFilter(namespace=NAMESPACE, flow=FLOW)))
        if any(r.key.task_run_id == REPORT_TASK_RUN for r in flow_runs):
            echo("2. python task export_report: already recorded in this catalog")
        else:
            _record_report_task(catalog, max(r.ended_at or r.started_at for r in flow_runs))
            echo("2. python task export_report: reads dbt.main.my_second_dbt_model, writes reports.second_model_report")

        converter = Converter(Resolver.load())
        count = invalid = 0
        sink = NdjsonSink.to_file(events_path)
        try:
            for line in iter_lines(catalog, converter):
                sink.emit(line)
                count += 1
                invalid += bool(validate_event(json.loads(line)))
            sink.finish()
        finally:
            sink.close()
        echo(f"3. exported {count} OpenLineage events to {events_path}")
        echo(f"4. validated them (OpenLineage 2-0-2, Marquez's contract): {count - invalid} valid, {invalid} invalid")
        graph = catalog.lineage(FIRST_MODEL, direction="downstream", depth=5)
        out(f"Lineage from {FIRST_MODEL}:")
        out(graph_text(graph))
        out(f"Events: {events_path} ({count} events, {invalid} invalid)")
        out(f"Catalog: {catalog.path}")
        if invalid:
            raise SystemExit(1)
        return {"events": count, "invalid": invalid, "catalog": catalog.path, "output": str(events_path)}


def _record_report_task(catalog: Catalog, dbt_finished: datetime) -> None:
    """The downstream Python task: reads the second model a minute after dbt ends, writes the report."""
    ticks = iter([dbt_finished + timedelta(minutes=1), dbt_finished + timedelta(minutes=1, seconds=20)])
    with task_run(
        catalog,
        "company.data",
        "dbt_build_with_lineage",
        "export_report",
        execution_id="demo-execution-1",
        task_run_id=REPORT_TASK_RUN,
        clock=lambda: next(ticks),
    ) as run:
        run.reads(SECOND_MODEL)
        run.writes(
            REPORT,
            type="io.kestra.plugin.ee.assets.File",
            namespace="company.data",
            metadata={"path": "second_model_report.csv", "owner": "analytics-team"},
            statistics={"row_count": 2},
            columns=["id", "label"],
            column_lineage={
                "fields": {
                    "id": [{"id": SECOND_MODEL, "column": "id", "transformation": "IDENTITY"}],
                    "label": [{"id": SECOND_MODEL, "column": "label", "transformation": "IDENTITY"}],
                }
            },
        )
