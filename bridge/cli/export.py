"""``export`` and ``validate``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from bridge.catalog.query import HistoryFilter
from bridge.cli.context import URL, AppContext, given_path, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import Delivery, count, delivery_options, history_filters, json_flag
from bridge.cli.output import print_json, safe, say, stop_on_signals
from bridge.cli.progress import progress
from bridge.cli.secrets import API_KEY_FILE_HELP, FILE, api_key_secret
from bridge.delivery.history import iter_lines
from bridge.delivery.report import FailureReport
from bridge.delivery.sinks import BackendSink, NdjsonSink, Sink
from bridge.errors import ExportError, InputFileError
from bridge.file_stream import stream_json_items

_STOPPING = "{signal}: stopping the export"
EXPORT_MAX_ATTEMPTS = 8  # with the default backoff, half a minute to a minute of retries


@click.command(
    "export",
    epilog=examples(
        "olbridge export --output events.ndjson --since 2025-01-01 --namespace company.data",
        "olbridge export                                 # NDJSON on stdout",
        "olbridge export --url http://localhost:5000     # to a backend, batched and retried",
    ),
)
@click.option(
    "--output",
    "output",
    # a path as given, its name any bytes (a folder, an unwritable file: said when it is written)
    type=given_path(readable=False, allow_dash=True),
    default=None,
    help="Write NDJSON to this file ('-' for stdout, the default without --url).",
)
@click.option(
    "--url",
    type=URL,
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
    filters: HistoryFilter,
) -> None:
    """Export the catalog's history as OpenLineage events, in time order: NDJSON to stdout or a
    file, or delivered to a backend with --url.

    With --url the events go out in rounds (a run's START before its end), batched, side by side
    and retried with backoff; failures are said on stderr as they happen. An event the backend
    refuses for good, or one still undelivered after --max-attempts, stops the export with an
    error (olbridge backfill keeps a checkpoint and goes on past refused events instead).

    --output FILE is replaced only once the export is whole: an export that fails, or is stopped
    by SIGTERM or Ctrl-C (exit status 1), leaves it as it was. A device, a FIFO or /dev/stdout is
    written as it goes; a file that cannot be replaced (mounted on its own, in a folder that takes
    no new file, another user's, with other hard links) is written in place, with a warning."""
    if output and url:
        raise click.UsageError("use --output or --url, not both")
    # an API key set in the environment is anyone's (every client reads it): one given here is
    # meant for a backend, which only --url names
    context = click.get_current_context()
    keys = {k for k in ("api_key", "api_key_file") if context.get_parameter_source(k) is ParameterSource.COMMANDLINE}
    if not url and (delivery.given or keys):
        names = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(delivery.given | keys))
        raise click.UsageError(f"{names}: only with --url")
    catalog = app.catalog()  # opened (or refused) before the output file is made
    path = None if output is None or output == "-" else Path(output)
    if path is not None and not path.parent.is_dir():
        raise click.BadParameter(f"folder {path.parent} does not exist", param_hint="--output")
    with stop_on_signals(_STOPPING) as stop:
        sink: Sink
        if url:
            dispatcher = delivery.dispatcher(url, api_key_secret(api_key, api_key_file), stop=stop)
            report = FailureReport(dispatcher.sender.target, say)
            sink = BackendSink(dispatcher, policy=delivery.policy(), report=report, sleep=stop.wait, stop=stop)
        elif path is None:
            sink = NdjsonSink(sys.stdout, name="stdout")
        else:
            # written beside, put in its place once whole (or in place, and said so)
            sink = NdjsonSink.to_file(path, note=lambda line: say(f"warning: {safe(line)}"))
        try:
            total = catalog.count_history(filters)
            with progress("exporting", total, "events") as exporting:
                for event in exporting.each(iter_lines(catalog, app.converter(), filters)):
                    if stop.is_set():
                        break
                    sink.emit(event)
            stopped = stop.is_set()
            if not stopped:
                sink.finish()
                # a stop in the last rounds of --url's, which left events undelivered (a file is whole)
                stopped = isinstance(sink, BackendSink) and sink.left > 0
        finally:
            sink.close()
    if stopped:
        raise ExportError(f"the export was stopped before its end; {_stopped(sink, url, path)}")
    say(f"exported {sink.count} event(s) to {url or output or 'stdout'}")


def _stopped(sink: Sink, url: str | None, path: Path | None) -> str:
    """What a stopped export left: the events delivered, the file as it was, what stdout holds."""
    if url:
        return (
            f"{sink.count} event(s) delivered; an export sends every event again, olbridge backfill resumes where "
            "it stopped"
        )
    if path is not None:
        return f"{path} was left as it was"
    return f"stdout holds its first {sink.count} event(s), not all"


PROBLEMS_LISTED = 50  # validate's default --max-problems
PROGRESS_FROM = 64 << 20  # bytes: files this large show progress in a log too, not only on a terminal


@click.command(
    "validate",
    epilog=examples(
        "olbridge validate events.ndjson              # the spec and Marquez's contract; exit 0 only when all valid",
        "olbridge validate --no-marquez events.json   # the OpenLineage spec only",
        "olbridge validate --receiver events.ndjson   # what serve would refuse, or take with warnings",
    ),
)
@click.argument("files", nargs=-1, required=True, type=given_path(dir_okay=False, path_type=Path))
@click.option("--no-marquez", is_flag=True, help="Check the OpenLineage spec only, not Marquez's contract.")
@click.option(
    "--receiver",
    is_flag=True,
    help="Report what `olbridge serve` would do with each event (refuse, or take with warnings) "
    "instead; exits 1 only when it would refuse one.",
)
@click.option(
    "--max-problems",
    type=count(0),
    default=PROBLEMS_LISTED,
    show_default=True,
    help="List the problems of at most this many events (0: all); the others are counted.",
)
@json_flag("Print the result as JSON.")
def validate(files: tuple[Path, ...], no_marquez: bool, receiver: bool, max_problems: int, as_json: bool) -> None:
    """Check OpenLineage events (NDJSON, JSON arrays or single events) against the OpenLineage
    2-0-2 rules and Marquez's contract. Exits 0 only when every event is valid.

    The files are read as a stream, in memory that does not grow with their size; progress
    goes to stderr (a bar on a terminal; in a log, a line every few seconds for large files).
    The problems of the first --max-problems bad events are listed, the rest counted.

    This is a spec checker, stricter than the receiver, which takes an event with a spec
    problem Marquez would take and keeps a warning beside it: --receiver shows that verdict."""
    if receiver and no_marquez:
        raise click.UsageError("--receiver judges by Marquez's contract: leave out --no-marquez")
    from bridge.openlineage.validate import validate_event  # here: export starts without the spec's rules

    listing = _Listing(max_problems or None, as_json)
    counts = (
        {"events": 0, "taken": 0, "warned": 0, "refused": 0} if receiver else {"events": 0, "valid": 0, "invalid": 0}
    )
    for where, event in _events(files):
        counts["events"] += 1
        if receiver:
            verdict, problems = _verdict(event)
            counts[verdict] += 1
            listing.add(where, problems, verdict)
        else:
            problems = (
                [event.message]
                if isinstance(event, InputFileError)
                else [str(p) for p in validate_event(event, marquez=not no_marquez)]
            )
            counts["invalid" if problems else "valid"] += 1
            listing.add(where, problems)
    if as_json:
        print_json({**counts, "problems": listing.report, "eventsNotListed": listing.unlisted})
    listing.say_unlisted()
    if receiver:
        say(
            f"{counts['events']} event(s): {counts['taken']} taken, {counts['warned']} taken with warnings, "
            f"{counts['refused']} refused"
        )
        failed = counts["refused"] > 0
    else:
        say(f"{counts['events']} event(s), {counts['valid']} valid, {counts['invalid']} invalid")
        failed = counts["invalid"] > 0
    if counts["events"] == 0:  # exit 1: nothing was checked, and the reason is said
        raise InputFileError("it holds no event to check", ", ".join(str(f) for f in files))
    if failed:
        raise SystemExit(1)


def _verdict(event: Any) -> tuple[str, list[str]]:
    """What ``olbridge serve`` would do with an event: refused, warned (taken with warnings) or taken."""
    from bridge.receiver.policy import judge

    if isinstance(event, InputFileError):
        return "refused", [event.message]
    judged = judge(event)
    if judged.refusals:
        return "refused", [str(p) for p in judged.refusals]
    return ("warned" if judged.warnings else "taken"), [str(p) for p in judged.warnings]


def _events(files: tuple[Path, ...]) -> Iterator[tuple[str, Any]]:
    """Every event of the files, read as a stream, with the bytes read shown as progress on a
    terminal (and in a log, for files of PROGRESS_FROM bytes or more)."""
    sizes = [path.stat().st_size if path.is_file() else 0 for path in files]
    if not (sys.stderr.isatty() or sum(sizes) >= PROGRESS_FROM):
        for path in files:
            yield from stream_json_items(path)
        return
    with progress("validating", sum(sizes), "bytes") as reading:
        for path in files:
            yield from stream_json_items(path, read=reading.advance)


class _Listing:
    """The problems validate lists: those of the first ``limit`` bad events (None: all), each a
    line on stdout (or kept for the JSON), and a count of the bad events past them."""

    def __init__(self, limit: int | None, as_json: bool) -> None:
        self.limit = limit
        self.as_json = as_json
        self.report: list[dict[str, Any]] = []
        self.listed = 0
        self.unlisted = 0

    def add(self, where: str, problems: list[str], verdict: str | None = None) -> None:
        if not problems:
            return
        if self.limit is not None and self.listed >= self.limit:
            self.unlisted += 1
            return
        self.listed += 1
        if self.as_json:
            self.report.append({"where": where, **({"verdict": verdict} if verdict else {}), "problems": problems})
            return
        said = "" if verdict is None else ("refused: " if verdict == "refused" else "warning: ")
        for problem in problems:
            click.echo(safe(f"{where}: {said}{problem}"))

    def say_unlisted(self) -> None:
        if self.unlisted:
            say(f"... and {self.unlisted:,} more event(s) with problems, not listed (--max-problems 0 lists all)")
