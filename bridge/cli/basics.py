"""``init``, ``record`` and ``demo``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from bridge.cli.context import NAMED, AppContext, given_path, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import STATE_HELP, StateParam
from bridge.cli.output import print_json, record_summary, run_name, run_warnings, say, say_warnings
from bridge.cli.progress import progress
from bridge.errors import InputFileError, RunEndedError, ValidationError, ValidationProblems
from bridge.files import loads, open_text
from bridge.model import TaskRun
from bridge.task_run_json import parse_task_run, read_task_run_lines


@click.command("init")
@pass_app
def init(app: AppContext) -> None:
    """Create the catalog (or bring an existing one to the current schema).

    A SQLite file, or a PostgreSQL database (--catalog postgresql://...): an empty database, or
    an empty schema of one (?schema=NAME, made when missing)."""
    catalog = app.catalog(create=True, migrate=True)
    print_json({"catalog": catalog.path, "schemaVersion": catalog.schema_version, "assets": catalog.count_assets()})


@click.command("migrate")
@pass_app
def migrate(app: AppContext) -> None:
    """Bring an existing catalog to the current schema.

    Each migration runs in a transaction of its own; a catalog at the current version is left as
    it is. A PostgreSQL catalog is upgraded only by this command (and init): run it once, before
    the new olbridge's receivers and workers start. A SQLite catalog is upgraded in place when any
    command opens it."""
    catalog = app.catalog(migrate=True)
    print_json(
        {"catalog": catalog.path, "schemaVersion": catalog.schema_version, "upgradedFrom": catalog.upgraded_from}
    )


@click.command(
    "record",
    epilog=examples(
        "olbridge record --namespace ops --flow-id backup --task-id snap --execution-id e9 \\",
        "    --start 2025-01-01T00:00:00Z --end 2025-01-01T00:05:00Z --input vm-web-01 \\",
        '    --output \'{"id": "snapshot.vm-web-01.e9", "type": "company.infra.Snapshot"}\'',
        "olbridge record --file runs.jsonl   # one Kestra AssetLineage-shaped task run a line",
    ),
)
@click.option(
    "--file",
    "file",
    type=given_path(dir_okay=False, allow_dash=True),  # opened by the file reader, which says a missing one
    help="JSON lines, one task run a line ('-' for stdin).",
)
@click.option("--namespace", type=NAMED, help="The flow's namespace.")
@click.option("--flow-id", type=NAMED, help="The flow id.")
@click.option("--task-id", type=NAMED, help="The task id.")
@click.option("--execution-id", type=NAMED, help="The execution id.")
@click.option("--task-run-id", type=NAMED, help="The task run id (default: the execution id and task id).")
@click.option(
    "--state", type=StateParam(run_state=False), default="SUCCESS", show_default=True, help=f"The state ({STATE_HELP})."
)
@click.option("--start", "start", help="Start time, ISO 8601 with offset.")
@click.option("--end", "end", type=NAMED, help="End time (default: the start time for an ended run).")
@click.option("--input", "inputs", multiple=True, help="An input: an asset id, or a JSON object {id, type, ...}.")
@click.option("--output", "outputs", multiple=True, help="An output: an asset id, or a JSON object {id, type, ...}.")
@click.option(
    "--failure-behavior",
    default="WARN",
    show_default=True,
    help="WARN, FAIL or IGNORE when an output cannot be written.",
)
@pass_app
def record(app: AppContext, /, file: str | None, **flags: Any) -> None:
    """Record task runs with their inputs and outputs.

    One from flags (for shell tasks), or many from --file: JSON lines with the field names of
    Kestra's AssetLineage (namespace, flowId, taskId, executionId, taskRunId, state, startDate,
    all required; endDate, inputs, outputs). A file is checked whole first: one bad line and nothing is
    recorded, and each bad line is reported with every problem it has. Progress (count, rate,
    time left) goes to stderr; each warning names its run and line.
    """
    if file is not None:
        ctx = click.get_current_context()
        given = [k for k in flags if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(
                f"--file cannot be combined with {', '.join('--' + k.replace('_', '-') for k in given)}"
            )
        source = "<stdin>" if file == "-" else file
        # stdin as click opens it (left open: it is not this command's), a file by the one file reader
        lines = click.open_file("-", encoding="utf-8") if file == "-" else open_text(file)
        with progress("reading task runs", _line_count(file), "lines") as reading:
            try:
                checked = read_task_run_lines(reading.each(lines), source)
            except UnicodeDecodeError:
                raise InputFileError("not UTF-8 text", source, rule="file.text") from None
            finally:
                if file != "-":
                    lines.close()
        runs = list(checked.runs)
        names = [f"{source}:{line}: {run_name(run.key)}" for line, run in zip(checked.lines, runs, strict=True)]
        catalog = app.catalog(create=True)
        try:
            with progress("recording task runs", len(runs), "task runs") as recording:
                results = catalog.record_task_runs(recording.each(runs))
        except RunEndedError as exc:
            line = checked.lines[exc.index] if exc.index is not None else None
            where = f"{source}:{line}" if line is not None else source
            raise RunEndedError(
                f"{where}: {exc}; nothing was recorded (a file is recorded whole or not at all)", exc.key
            ) from None
    else:
        run = _run_from_flags(flags)
        say("recording 1 task run")
        results, names = app.catalog(create=True).record_task_runs([run]), [run_name(run.key)]
    summary = record_summary(results, names)
    say_warnings(run_warnings(results, names))
    print_json(summary)


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=given_path(file_okay=False, path_type=Path),
    default=Path("olbridge-demo"),
    show_default=True,
    help="Folder for the demo's catalog and events.",
)
@click.option(
    "--in-catalog",
    is_flag=True,
    help="Record into the catalog of the global --catalog, kept as it is (e.g. the one `olbridge stream` "
    "drains), instead of a fresh catalog in --dir.",
)
@pass_app
def demo(app: AppContext, directory: Path, in_catalog: bool) -> None:
    """Run the demo: ingest a bundled dbt project, record a downstream task, export, validate
    and show the lineage from the first model to the report."""
    from bridge.demo import run_demo

    run_demo(directory, echo=say, out=click.echo, catalog_path=app.catalog_path if in_catalog else None)


def _line_count(name: str) -> int | None:
    """The lines of the file ``--file`` names, for the progress bar; None for stdin or a pipe."""
    if name == "-" or not os.path.isfile(name):
        return None
    try:
        with open(name, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return None


def _asset_flag(text: str, where: str) -> object:
    """An asset ``--input`` or ``--output`` gives: its id, or a JSON object read by the rules of
    every JSON olbridge reads (no NaN, no lone surrogates, integers of at most 1,000 digits)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            return loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"not a valid JSON object: {exc.msg} (column {exc.colno})", rule="json", where=where
            ) from None
    return {"id": text}


def _run_from_flags(flags: dict[str, Any]) -> TaskRun:
    missing = [
        f"--{k.replace('_', '-')}"
        for k in ("namespace", "flow_id", "task_id", "execution_id", "start")
        if not flags.get(k)
    ]
    if missing:
        raise click.UsageError(f"recording one task run needs {', '.join(missing)} (or use --file)")
    record = {
        "namespace": flags["namespace"],
        "flowId": flags["flow_id"],
        "taskId": flags["task_id"],
        "executionId": flags["execution_id"],
        "taskRunId": flags.get("task_run_id") or f"{flags['execution_id']}.{flags['task_id']}",
        "state": flags["state"],
        "startDate": flags["start"],
        "failureBehavior": flags["failure_behavior"],
        "inputs": [_asset_flag(str(t), f"--input[{i}]") for i, t in enumerate(flags["inputs"])],
        "outputs": [_asset_flag(str(t), f"--output[{i}]") for i, t in enumerate(flags["outputs"])],
    }
    if flags.get("end"):
        record["endDate"] = flags["end"]  # without it, an ended run ends at its start (parse_task_run)
    try:
        return parse_task_run(record)
    except ValidationProblems as exc:  # each problem named by the flag given, not the record's field
        raise ValidationProblems([_as_flag(p) for p in exc.problems]) from None
    except ValidationError as exc:
        raise _as_flag(exc) from None


# the record's fields a flag fills
_FLAG_OF = {
    "namespace": "--namespace",
    "flowId": "--flow-id",
    "taskId": "--task-id",
    "executionId": "--execution-id",
    "taskRunId": "--task-run-id",
    "state": "--state",
    "startDate": "--start",
    "endDate": "--end",
    "failureBehavior": "--failure-behavior",
    "inputs": "--input",  # the run's inputs or outputs as a whole (outputs of a run not ended)
    "outputs": "--output",
}


def _as_flag(error: ValidationError) -> ValidationError:
    """A problem of the record made from the flags, where it names a field, named by its flag
    (``inputs[0].id``: ``--input[0].id``)."""
    field, dot, rest = error.where.partition(".")
    name, bracket, index = field.partition("[")
    flag = {"inputs": "--input", "outputs": "--output"}.get(name) if bracket else _FLAG_OF.get(field)
    if flag is None:
        return error
    return ValidationError(error.message, rule=error.rule, value=error.value, where=flag + bracket + index + dot + rest)
