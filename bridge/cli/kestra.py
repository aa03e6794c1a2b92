"""``kestra import`` and ``kestra declare``."""

from __future__ import annotations

from pathlib import Path

import click

from bridge.adapters.kestra import declare_flows, import_lineage
from bridge.cli.context import AppContext, given_path, pass_app
from bridge.cli.options import json_flag
from bridge.cli.output import print_json, record_summary, run_warnings, safe, say, say_warnings
from bridge.model import utcnow

_FILES = given_path(dir_okay=False, path_type=Path)  # a missing one: the file reader says so, as elsewhere


@click.group()
def kestra() -> None:
    """Kestra: AssetShipper's lineage records, and flows' declared assets."""


@kestra.command("import")
@click.argument("files", nargs=-1, required=True, type=_FILES)
@json_flag("Print the summary as JSON on stdout.")
@pass_app
def kestra_import(app: AppContext, files: tuple[Path, ...], as_json: bool) -> None:
    """Record the AssetLineage records of Kestra's AssetShipper (its file exporter with
    `format: JSON`): JSON lines or a JSON array, one task run a record. Every file is checked
    first: one bad record and nothing is recorded."""
    results = import_lineage(lambda: app.catalog(create=True), list(files))
    summary = record_summary(results)
    say(
        f"kestra: {summary['taskRuns']} task run(s) from {len(files)} file(s): {summary['created']} created, "
        f"{summary['updated']} updated, {summary['unchanged']} unchanged, "
        f"{summary['placeholders']} External placeholder(s)"
    )
    say_warnings(run_warnings(results))
    if as_json:
        print_json(summary)


@kestra.command("declare")
@click.argument("flows", nargs=-1, required=True, type=_FILES)
@json_flag("Print the summary as JSON on stdout.")
@pass_app
def kestra_declare(app: AppContext, flows: tuple[Path, ...], as_json: bool) -> None:
    """Record flows' declared lineage: the `assets` inputs, outputs and enableAuto of every
    task (nested ones included), exported as OpenLineage JobEvents. A flow declared again
    replaces its declaration; declared as it was, it changes nothing. Pebble expressions not
    known before a run are reported, and what depends on them is left out."""
    results = declare_flows(lambda: app.catalog(create=True), list(flows), now=utcnow())
    report = []
    for result in results:
        say(
            f"kestra: flow {result.namespace}.{result.flow_id}: {len(result.pks)} declared job(s); "
            f"{len(result.created)} created, {len(result.updated)} updated, {len(result.unchanged)} unchanged, "
            f"{len(result.removed)} removed"
        )
        for warning in result.warnings:
            say(f"warning: {safe(warning)}")
        report.append(
            {
                "namespace": result.namespace,
                "flowId": result.flow_id,
                "declaredJobs": list(result.pks),
                "created": list(result.created),
                "updated": list(result.updated),
                "unchanged": list(result.unchanged),
                "removed": list(result.removed),
                "warnings": list(result.warnings),
            }
        )
    if as_json:
        print_json({"flows": report})
