"""``export`` and ``validate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bridge.cli.context import AppContext, pass_app
from bridge.cli.options import Delivery, delivery_options, history_filters, json_flag, window
from bridge.cli.output import print_json, say
from bridge.cli.progress import progress
from bridge.cli.secrets import API_KEY_FILE_HELP, FILE, api_key_secret
from bridge.delivery.history import ExportFilter, iter_lines
from bridge.delivery.report import FailureReport
from bridge.delivery.sinks import BackendSink, NdjsonSink, Sink
from bridge.errors import InputFileError
from bridge.files import read_json_items
from bridge.model import check_namespace
from bridge.openlineage.validate import validate_event
from bridge.receiver.policy import judge

EXPORT_MAX_ATTEMPTS = 8  # with the default backoff, half a minute to a minute of retries


@click.command("export")
@click.option(
    "--output",
    "output",
    default=None,
    help="Write NDJSON to this file ('-' for stdout, the default without --url).",
)
@click.option(
    "--url",
    help="Deliver the events to this OpenLineage backend instead, batched and retried as by stream and backfill "
    "(POST <url>/api/v1/lineage/batch, or one POST <url>/api/v1/lineage an event where it has no batch "
    "endpoint, as Marquez).",
)
@click.option("--api-key", envvar="OPENLINEAGE_API_KEY", help="Bearer token for --url [env OPENLINEAGE_API_KEY].")
@click.option("--api-key-file", type=FILE, envvar="OPENLINEAGE_API_KEY_FILE", help=API_KEY_FILE_HELP)
@delivery_options(
    max_attempts=EXPORT_MAX_ATTEMPTS,
    max_attempts_help="With --url: attempts per event answered 408, 429 or 5xx (or not at all) before the export "
    "stops with an error; 0 retries for as long as it takes.",
)
@history_filters
@pass_app
def export(
    app: AppContext,
    delivery: Delivery,
    output: str | None,
    url: str | None,
    api_key: str | None,
    api_key_file: Path | None,
    since: str | None,
    until: str | None,
    namespace: str | None,
    flow: str | None,
) -> None:
    """Export the catalog's history as OpenLineage events, in time order: NDJSON to stdout or a
    file, or delivered to a backend with --url.

    With --url the events go out in rounds (a run's START before its end), batched, side by side
    and retried with backoff; failures are said on stderr as they happen. An event the backend
    refuses for good, or one still undelivered after --max-attempts, stops the export with an
    error (olbridge backfill keeps a checkpoint and goes on past refused events instead)."""
    if output and url:
        raise click.UsageError("use --output or --url, not both")
    if not url and delivery.given:
        names = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(delivery.given))
        raise click.UsageError(f"{names}: only with --url")
    start, end = window(since, until)
    filters = ExportFilter(
        since=start,
        until=end,
        namespace=check_namespace(namespace, "--namespace"),
        flow=flow,
    )
    catalog = app.catalog()  # opened (or refused) before the output file is made
    sink: Sink
    if url:
        dispatcher = delivery.dispatcher(url, api_key_secret(api_key, api_key_file))
        report = FailureReport(dispatcher.sender.target, say)
        sink = BackendSink(dispatcher, policy=delivery.policy(), report=report)
    elif output in (None, "-"):
        sink = NdjsonSink(sys.stdout, name="stdout")
    else:
        assert output is not None
        path = Path(output)
        if not path.parent.is_dir():
            raise click.BadParameter(f"folder {path.parent} does not exist", param_hint="--output")
        sink = NdjsonSink.to_file(path)
    try:
        total = catalog.count_history(
            since=filters.since, until=filters.until, namespace=filters.namespace, flow=filters.flow
        )
        with progress("exporting", total, "events") as exporting:
            for event in exporting.each(iter_lines(catalog, app.converter(), filters)):
                sink.emit(event)
        sink.finish()
    finally:
        sink.close()
    say(f"exported {sink.count} event(s) to {url or output or 'stdout'}")


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-marquez", is_flag=True, help="Check the OpenLineage spec only, not Marquez's contract.")
@click.option(
    "--receiver",
    is_flag=True,
    help="Report what `olbridge serve` would do with each event (refuse, or take with warnings) "
    "instead; exits 1 only when it would refuse one.",
)
@json_flag("Print the result as JSON.")
def validate(files: tuple[Path, ...], no_marquez: bool, receiver: bool, as_json: bool) -> None:
    """Check OpenLineage events (NDJSON, JSON arrays or single events) against the OpenLineage
    2-0-2 rules and Marquez's contract. Exits 0 only when every event is valid.

    This is a spec checker, stricter than the receiver, which takes an event with a spec
    problem Marquez would take and keeps a warning beside it: --receiver shows that verdict."""
    if receiver and no_marquez:
        raise click.UsageError("--receiver judges by Marquez's contract: leave out --no-marquez")
    if receiver:
        _judge_files(files, as_json)
        return
    total = bad = 0
    report: list[dict[str, Any]] = []
    for path in files:
        for where, event in read_json_items(path):
            total += 1
            if isinstance(event, InputFileError):
                problems = [event.message]
            else:
                problems = [str(p) for p in validate_event(event, marquez=not no_marquez)]
            if problems:
                bad += 1
                report.append({"where": where, "problems": problems})
                if not as_json:
                    for problem in problems:
                        click.echo(f"{where}: {problem}")
    if as_json:
        print_json({"events": total, "valid": total - bad, "invalid": bad, "problems": report})
    say(f"{total} event(s), {total - bad} valid, {bad} invalid")
    if bad or total == 0:
        raise SystemExit(1)


def _judge_files(files: tuple[Path, ...], as_json: bool) -> None:
    """The receiver's verdict on every event of ``files``, as ``olbridge serve`` gives it."""
    counts = {"events": 0, "taken": 0, "warned": 0, "refused": 0}
    report: list[dict[str, Any]] = []
    for path in files:
        for where, event in read_json_items(path):
            counts["events"] += 1
            if isinstance(event, InputFileError):
                verdict, problems = "refused", [event.message]
            else:
                judged = judge(event)
                if judged.refusals:
                    verdict, problems = "refused", [str(p) for p in judged.refusals]
                else:
                    verdict, problems = ("warned" if judged.warnings else "taken"), [str(p) for p in judged.warnings]
            counts[verdict] += 1
            if problems:
                report.append({"where": where, "verdict": verdict, "problems": problems})
                if not as_json:
                    for problem in problems:
                        click.echo(f"{where}: {'refused' if verdict == 'refused' else 'warning'}: {problem}")
    if as_json:
        print_json({**counts, "problems": report})
    say(
        f"{counts['events']} event(s): {counts['taken']} taken, {counts['warned']} taken with warnings, "
        f"{counts['refused']} refused"
    )
    if counts["refused"] or counts["events"] == 0:
        raise SystemExit(1)
