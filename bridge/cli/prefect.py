"""``prefect import``."""

from __future__ import annotations

import base64
import contextlib
import json
from time import sleep
from typing import Any

import click

from bridge.adapters.prefect import (
    DEFAULT_NAMESPACE,
    DEFAULT_SETTLE,
    MAX_WAIT,
    PrefectClient,
    PrefectImportSummary,
    Unsettled,
    follow,
    import_events,
    import_once,
)
from bridge.cli.context import NAMED, URL, AppContext, pass_app
from bridge.cli.options import count, json_flag, moment, seconds
from bridge.cli.output import print_json, safe, say, stop_on_signals
from bridge.cli.progress import Progress, progress
from bridge.cli.secrets import printable
from bridge.errors import SourceError
from bridge.model import check_namespace, utcnow


class _Pages:
    """Progress through the server's pages on stderr, shown once a page says how many events
    there are (a poll that finds nothing new says nothing); a context manager."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._shown: Progress | None = None

    def __enter__(self) -> _Pages:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    def __call__(self, count: int, total: int | None) -> None:
        if self._shown is None:
            if not total:
                return
            self._shown = self._stack.enter_context(progress("reading Prefect events", total, "events"))
        self._shown.advance(count)


def _say_summary(summary: PrefectImportSummary, settle: float) -> None:
    data = summary.to_json()
    line = (
        f"{data['read']} event(s) read, {data['taskRuns']} task run(s): {data['created']} created, "
        f"{data['unchanged']} unchanged, {data['failed']} failed"
    )
    extras = [
        f"{count} {label}"
        for count, label in (
            (len(summary.pending), "with references only (not recorded)"),
            (len(summary.late), "already recorded (late events not applied)"),
            (len(summary.refused), "malformed (skipped)"),
        )
        if count
    ]
    if summary.left:
        extras.append(f"{summary.left} younger than --settle ({settle:g} s) left for the next import")
    say(line + ("; " + ", ".join(extras) if extras else ""))
    for warning in data["warnings"]:
        say(f"warning: {safe(warning)}")
    for where, reason in summary.refused:
        say(safe(f"skipped: {where}: {reason}"))


def _authorization(api_key: str | None, auth_string: str | None) -> str | None:
    """The Authorization header the server asks for: Prefect Cloud's bearer API key, or a
    self-hosted server's basic ``user:password`` (as Prefect's own client sends them)."""
    if api_key is not None and auth_string is not None:
        raise click.UsageError("--api-key (Prefect Cloud) and --auth-string (a self-hosted server) do not go together")
    if api_key is not None:
        return "Bearer " + printable(api_key, "--api-key")
    if auth_string is not None:
        return "Basic " + base64.b64encode(printable(auth_string, "--auth-string").encode()).decode()
    return None


@click.group()
def prefect() -> None:
    """Prefect 3: record the asset events of a Prefect server's task runs."""


@prefect.command("import")
@click.option(
    "--api-url",
    type=URL,
    envvar="PREFECT_API_URL",
    required=True,
    help="The Prefect API, such as http://127.0.0.1:4200/api [env PREFECT_API_URL].",
)
@click.option(
    "--api-key",
    type=NAMED,
    envvar="PREFECT_API_KEY",
    show_envvar=False,
    help="A Prefect Cloud API key, sent as a bearer token [env PREFECT_API_KEY].",
)
@click.option(
    "--auth-string",
    type=NAMED,
    envvar="PREFECT_API_AUTH_STRING",
    show_envvar=False,
    help="A self-hosted server's 'user:password' (its server.api.auth_string), sent as basic "
    "authentication [env PREFECT_API_AUTH_STRING].",
)
@click.option("--since", help="Read from this time (ISO 8601) instead of where the last import stopped.")
@click.option(
    "--namespace",
    default=DEFAULT_NAMESPACE,
    show_default=True,
    help="The flow namespace the task runs are recorded under (the job namespace in OpenLineage).",
)
@click.option(
    "--settle",
    type=seconds(0),
    default=DEFAULT_SETTLE,
    show_default=True,
    help="Leave events younger than this many seconds for the next import (an import without --follow "
    f"first waits for them when this is {MAX_WAIT:g} s or less).",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Without --follow: do not wait for events younger than --settle; leave them for the next import.",
)
@click.option(
    "--follow",
    "follow_",
    is_flag=True,
    help="Keep reading new events until Ctrl-C or SIGTERM (a server that cannot be read is tried again).",
)
@click.option(
    "--interval",
    type=seconds(0.1, 3600),
    default=5.0,
    show_default=True,
    help="Seconds between polls with --follow.",
)
@click.option("--max-polls", type=count(1), help="Stop --follow after this many polls.")
@click.option(
    "--timeout",
    type=seconds(0.1),
    default=10.0,
    show_default=True,
    help="Seconds a request to the server may take, its whole answer read.",
)
@click.option(
    "--skip-malformed", is_flag=True, help="Record the good task runs and report the malformed events, skipped."
)
@json_flag("Print the summary as JSON on stdout.")
@pass_app
def prefect_import(
    app: AppContext,
    api_url: str,
    api_key: str | None,
    auth_string: str | None,
    since: str | None,
    namespace: str,
    settle: float,
    no_wait: bool,
    follow_: bool,
    interval: float,
    max_polls: int | None,
    timeout: float,
    skip_malformed: bool,
    as_json: bool,
) -> None:
    """Read the prefect.asset.* events of a Prefect server and record one task run per Prefect
    task run: materialized assets as outputs, referenced ones as inputs. Each import starts
    where the last one stopped. Events younger than --settle are left for the next import, so
    that a task run's events are read together; without --follow the import first waits for
    them (and says so) unless --no-wait is given or --settle is over 60 s, and its summary says
    how many it left."""
    if no_wait and follow_:
        raise click.UsageError("--no-wait is for an import without --follow (which reads them at its next poll)")
    check_namespace(namespace, "--namespace")
    start = moment(since, "--since")
    client = PrefectClient(api_url, timeout=timeout, authorization=_authorization(api_key, auth_string))
    catalog, resolver = app.catalog(create=True), app.resolver()

    done = {"polls": 0, "task_runs": 0}  # the polls that read the server, the task runs they recorded

    def poll() -> PrefectImportSummary:
        with _Pages() as pages:
            return import_events(
                catalog,
                client,
                resolver,
                namespace=namespace,
                since=start if not done["polls"] else None,
                settle=settle,
                skip_malformed=skip_malformed,
                on_page=pages,
            )

    if not follow_:

        def waiting(young: Unsettled, seconds: float) -> None:
            say(
                f"waiting {seconds:.1f} s: {young.count} asset event(s) are younger than --settle ({settle:g} s), "
                "and a task run's events are read together (--no-wait leaves them for the next import)"
            )

        with _Pages() as pages:
            summary = import_once(
                catalog,
                client,
                resolver,
                namespace=namespace,
                since=start,
                settle=settle,
                skip_malformed=skip_malformed,
                wait=not no_wait,
                clock=utcnow,
                sleep=sleep,
                on_wait=waiting,
                on_page=pages,
            )
        _say_summary(summary, settle)
        if as_json:
            print_json(summary.to_json())
        return

    failed: list[SourceError] = []  # the last poll's error, while the polls fail

    def on_poll(summary: PrefectImportSummary) -> None:
        failed.clear()
        done["polls"] += 1
        done["task_runs"] += len(summary.results)
        _say_summary(summary, settle)
        if as_json:  # one JSON line a poll, as it happens
            click.echo(json.dumps(summary.to_json(), ensure_ascii=False))

    def on_error(error: SourceError) -> None:
        failed[:] = [error]
        say(f"warning: {error} (trying again in {interval:g} s)")

    say(f"following {client.api_url} every {interval:g} s (Ctrl-C to stop)")
    with stop_on_signals("stopping after this poll ({signal})") as stop:
        follow(poll, interval=interval, stop=stop, max_polls=max_polls, on_poll=on_poll, on_error=on_error)
    say(f"stopped after {done['polls']} poll(s), {done['task_runs']} task run(s) recorded")
    if failed:  # stopped on a poll that failed (every one, maybe): not a success
        raise SourceError(f"the last poll failed: {failed[0]}")
