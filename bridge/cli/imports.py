"""``import``: external OpenLineage events from files or a Marquez instance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
import orjson

from bridge.cli.context import URL, AppContext, given_path, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import json_flag, window
from bridge.cli.output import print_json, safe, say, stop_on_signals
from bridge.cli.progress import progress
from bridge.model import utcnow
from bridge.receiver.imports import EventImportSummary, MarquezEvents, catalog_intake, import_files, import_marquez

_STOPPING = "{signal}: stopping after the events in hand"


def _report(summary: EventImportSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary.to_json())
    for where, why in summary.refused[:50]:
        say(safe(f"refused {where}: {why}"))
    if len(summary.refused) > 50:
        say(f"... and {len(summary.refused) - 50} more refused")
    say(
        f"Imported {summary.read} events: {summary.accepted} accepted ({summary.warned} with warnings), "
        f"{summary.duplicates} duplicates, {len(summary.refused)} refused, {summary.placeholders} new placeholders"
        + (f"; position {summary.position}" if summary.position else "")
    )


def _ndjson_events(paths: Sequence[Path]) -> int | None:
    """The events of files that hold one a line (NDJSON: their non-blank lines); None when one of
    them holds a JSON array or an event over several lines, or cannot be read (import_files says
    what is wrong with it)."""
    count = 0
    try:
        for path in paths:
            if not path.is_file():  # a pipe (/dev/stdin, a FIFO) is read once, by the import
                return None
            with path.open("rb") as handle:
                lines = (line for line in handle if line.strip())
                first = next(lines, None)
                if first is not None and not _one_line_object(first):
                    return None
                count += (first is not None) + sum(1 for _ in lines)
    except OSError:
        return None
    return count


def _one_line_object(line: bytes) -> bool:
    if not line.lstrip().startswith(b"{"):  # an array (maybe the whole file on one line): not parsed here
        return False
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


@click.command(
    "import",
    epilog=examples(
        "olbridge import events.ndjson more.json one.json           # NDJSON, JSON arrays, single events",
        "olbridge import --strict --json events.ndjson              # refuse what the spec refuses; JSON summary",
        "olbridge import --from-marquez http://localhost:5000 --since 2025-03-01",
    ),
)
@click.argument("files", nargs=-1, type=given_path(path_type=Path, dir_okay=False))
@click.option("--from-marquez", "marquez_url", type=URL, metavar="URL", help="Import a Marquez instance's RunEvents.")
@click.option("--since", help="Marquez: start at this time instead of where the last import stopped.")
@click.option("--until", help="Marquez: stop before this time.")
@click.option("--restart", is_flag=True, help="Marquez: ignore where the last import stopped.")
@click.option("--page-size", default=200, show_default=True, type=click.IntRange(1, 10_000), help="Marquez page.")
@click.option("--strict", is_flag=True, help="Refuse everything the OpenLineage spec refuses.")
@json_flag("Print the summary as JSON on stdout.")
@pass_app
def import_(
    app: AppContext,
    files: tuple[Path, ...],
    marquez_url: str | None,
    since: str | None,
    until: str | None,
    restart: bool,
    page_size: int,
    strict: bool,
    as_json: bool,
) -> None:
    """Import external OpenLineage events from FILES (NDJSON, JSON arrays, single events) or
    from a Marquez instance (--from-marquez URL, resumable).

    A bad line or a refused event is reported with where it was and does not stop the rest;
    the exit status is 1 when any was refused (duplicates are not refusals).
    """
    if bool(files) == bool(marquez_url):
        raise click.UsageError("give FILE... or --from-marquez URL (one of them)")
    if files and (since or until or restart):
        raise click.UsageError("--since, --until and --restart are for --from-marquez")
    start, end = window(since, until)
    resolver = app.resolver()
    # from files, the catalog is made at the first event taken (none taken: none made)
    intake = catalog_intake(lambda: app.catalog(create=True), resolver, strict=strict)
    source = MarquezEvents(marquez_url, page_size=page_size) if marquez_url else None
    # the total: the files' events when each holds one a line (NDJSON), else unknown; Marquez's
    # once its first page says how many it holds
    total = _ndjson_events(files) if files else None
    with stop_on_signals(_STOPPING) as stop, progress("importing", total, "events") as importing:
        if source is None:
            summary = import_files(files, intake, progress=importing.advance, stop=stop)
        else:

            def marquez_progress(count: int) -> None:
                if source.total and importing.meter.total is None:
                    importing.expect(source.total)
                importing.advance(count)

            summary = import_marquez(
                source,
                intake,
                intake.catalog,
                since=start,
                until=end,
                resume=not restart,
                now=utcnow,
                progress=marquez_progress,
                stop=stop,
            )
    _report(summary, as_json)
    if summary.stopped:  # what it took is above; run again, what it took is recognised
        again = "run it again to resume" if source else "run it again (the events taken are duplicates then)"
        raise click.ClickException(f"the import was stopped before its end; {again}")
    if summary.refused:
        raise SystemExit(1)
