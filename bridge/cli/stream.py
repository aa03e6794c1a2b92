"""``stream``, ``backfill``, ``outbox`` and ``status``: delivery to an OpenLineage backend."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click
from click.core import ParameterSource

from bridge.catalog import Catalog
from bridge.catalog.engine import masked
from bridge.catalog.outbox import ALERTS_ONLY_TARGET, ALERTS_SOURCE, DeliveryError
from bridge.catalog.query import HistoryFilter
from bridge.cli.context import NAMED, URL, AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import A_YEAR, Delivery, F, count, delivery_options, history_filters, json_flag, seconds
from bridge.cli.output import echo_lines, print_json, print_rows, say, stop_on_signals
from bridge.cli.progress import progress
from bridge.cli.secrets import API_KEY_FILE_HELP, FILE, api_key_secret
from bridge.delivery import health_watch
from bridge.delivery.alerts import AlertSenders
from bridge.delivery.backfill import Backfill
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.heartbeat import LEASE_TTL
from bridge.delivery.holds import outbox_hold
from bridge.delivery.report import FailureReport, describe
from bridge.delivery.senders import TransportSender
from bridge.delivery.worker import StreamStats, StreamWorker
from bridge.errors import ConfigError, ExportError

_STOPPING = "{signal}: stopping after the requests in flight"
ONCE_BUDGET = 60.0  # --give-up-after's default with --once
# backfill's --max-attempts: a job that ends, not a service; with the default backoff it stops
# after about one to three minutes of a backend that answers nothing, resumable from there
BACKFILL_ATTEMPTS = 10


def target_options(fn: F) -> F:
    """``--url``, ``--api-key`` and ``--api-key-file``: the backend ``stream`` and ``backfill``
    deliver to (without ``--url``, the OpenLineage configuration's)."""
    options = [
        click.option(
            "--url",
            type=URL,
            help="The OpenLineage backend (events go to <url>/api/v1/lineage[/batch]); without it, the "
            "OpenLineage client's configuration: openlineage.yml, OPENLINEAGE_CONFIG, OPENLINEAGE_URL, "
            "OPENLINEAGE__TRANSPORT__*.",
        ),
        click.option("--api-key", help="Bearer token for --url [default: env OPENLINEAGE_API_KEY]."),
        click.option("--api-key-file", type=FILE, envvar="OPENLINEAGE_API_KEY_FILE", help=API_KEY_FILE_HELP),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


MAX_ATTEMPTS_HELP = (
    "Attempts per event before giving up on it: stream keeps an event answered 408, 429 or 5xx that often as a "
    "dead letter (one that got no answer stays pending: see --give-up-after); backfill stops with an error "
    "before any undelivered event; 0 retries for as long as it takes."
)


def _rate(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
    """--rate as events a second, checked when the options are read (a dry run too)."""
    if text is None:
        return None
    number = text.strip().removesuffix("/s")
    try:
        value = float(number)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a rate such as 500/s", param_hint="--rate") from None
    # nan passes every comparison (no limit at all), and a rate so small that an event takes
    # more than a year overflows the clock its wait is added to
    if not math.isfinite(value) or value <= 0 or 1 / value > A_YEAR:
        raise click.BadParameter(
            f"the rate must be a finite number above 0 (an event a year at least), not {text!r}", param_hint="--rate"
        )
    return value


def _stream_message(stats: StreamStats, what: str = "event(s)") -> str:
    return (
        f"delivered {stats.delivered} {what} in {stats.rounds} round(s); {stats.retried} retry(ies), "
        f"{stats.dead} dead letter(s)"
    )


@click.command(
    "stream",
    epilog=examples(
        "olbridge stream --url http://localhost:5000   # as a service; SIGTERM or Ctrl-C stop it",
        "olbridge stream --once                        # deliver what can be, then exit (openlineage.yml)",
        "olbridge stream --url http://localhost:5000 --api-key-file key.txt --concurrency 8",
        "olbridge stream --alerts-only                 # [[alerts]] to their webhooks, no backend",
    ),
)
@target_options
@delivery_options(max_attempts=0, max_attempts_help=MAX_ATTEMPTS_HELP)
@click.option("--once", is_flag=True, help="Deliver what can be delivered, then exit (retries included).")
@click.option(
    "--alerts-only",
    is_flag=True,
    help="Deliver the [[alerts]] to their webhooks and nothing else, with no OpenLineage backend (no --url): "
    "the OpenLineage events stay queued for a stream to a backend.",
)
@click.option("--poll", type=seconds(0.01), default=1.0, show_default=True, help="Seconds between looks.")
@click.option(
    "--give-up-after",
    type=seconds(0),
    help="Stop and exit 1 when no event has been delivered for this many seconds while deliveries fail "
    "(a retry due later is not waited for); the events stay pending. 0: never "
    f"[default: {ONCE_BUDGET:g} with --once, else 0].",
)
@json_flag("Print the delivery counts as JSON at the end.")
@pass_app
def stream(
    app: AppContext,
    delivery: Delivery,
    url: str | None,
    api_key: str | None,
    api_key_file: Path | None,
    once: bool,
    alerts_only: bool,
    poll: float,
    give_up_after: float | None,
    as_json: bool,
) -> None:
    """Deliver the catalog's outbox to an OpenLineage backend, as runs happen.

    Every task run start and end, asset update and delete recorded in the catalog (by any
    command, adapter or the Python API) is queued in its outbox in the same transaction, and
    so is every event olbridge serve --forward took, to go out as it came.
    This worker sends them in order per run, retries with backoff, keeps refused events as
    dead letters (olbridge outbox list --dead), says every failure on stderr (at most a line
    every few seconds per kind), and stops cleanly on SIGTERM or Ctrl-C.

    On PostgreSQL, any number of workers share the outbox: each claims the events it sends
    (a run's events still go out in order), and the claims of a worker that died are taken
    over within seconds. On SQLite one worker at a time delivers: a second one waits and takes
    over when the first stops (or within seconds when it was killed); with --once it refuses
    instead, naming the worker that holds the outbox. olbridge status shows the workers and
    their claims.

    With [[alerts]] (or a [health] table) in the config, it also keeps the assets' health (one
    process at a time across serve and stream) and sends each alert to its webhook, with the
    same retries and dead letters; --once judges once, then delivers. With --alerts-only it
    needs no OpenLineage backend: it keeps the health and delivers the alerts alone, and the
    OpenLineage events stay queued in the outbox (olbridge status counts them) for a stream to a
    backend, which may run beside it on PostgreSQL (on SQLite one worker at a time delivers)."""
    if alerts_only:
        _alerts_only_check(app)
    catalog = app.catalog()
    budget = give_up_after if give_up_after is not None else (ONCE_BUDGET if once else 0.0)
    watch = health_watch.settings_of(app.config)
    with stop_on_signals(_STOPPING) as stop:
        dispatcher = None if alerts_only else delivery.dispatcher(url, api_key_secret(api_key, api_key_file), stop=stop)
        if as_json and dispatcher is not None:
            _not_mixed(dispatcher)
        target = ALERTS_ONLY_TARGET if dispatcher is None else dispatcher.sender.target
        alerts = AlertSenders(app.config.alerts, timeout=delivery.timeout or 5.0)  # --timeout, per request
        watching = ""
        if watch is not None:
            watching = f"; health watch, {len(watch.alerts)} alert(s)" + (" (one pass)" if once else "")
        what = "the alerts" if dispatcher is None else "the outbox"
        say(f"streaming {what} of {app.catalog_name} to {target}{watching}")
        watcher = None
        if watch is not None and once:  # judge once (unless another process watches), then deliver
            health_watch.HealthWatch(catalog, watch, say=say).run_once()
        elif watch is not None:
            watcher = health_watch.start_thread(app.catalog_path, watch, stop, say)
        worker = StreamWorker(
            catalog,
            app.converter(),
            dispatcher,
            policy=delivery.policy(),
            stop=stop,
            poll=poll,
            report=FailureReport(target, say),
            give_up_after=budget,
            lease=outbox_hold(catalog, target),
            notify=say,
            alerts=alerts,
        )
        try:
            stats = worker.run(once=once)
        finally:
            stop.set()  # the health watch too (the worker stops on its own with --once)
            if watcher is not None:
                watcher.join(timeout=30)
            if dispatcher is not None:
                dispatcher.close()
            alerts.close()
    if as_json:
        print_json(stats.as_json())
    say(_stream_message(stats, "alert(s)" if alerts_only else "event(s)"))
    if not alerts_only:  # (an alert never waits behind a dead one)
        _say_held(catalog)
    gave_up = worker.gave_up
    if gave_up is not None:
        last = f"; last failure: {describe(gave_up.last)}" if gave_up.last else ""
        later = "" if gave_up.next_retry is None else ", and the next retry was due after that"
        where, back = (
            ("alerts to their webhooks", "the webhook") if gave_up.last_was_alert else (f"to {target}", "the backend")
        )
        outbox = catalog.outbox
        counted = _counted(catalog, outbox.alerts_pending if alerts_only else lambda: outbox.status().pending)
        kind = "alert" if alerts_only else "event"
        left = f"the {kind}s not delivered" if counted is None else f"{counted} {kind}(s)"
        again = "olbridge stream --alerts-only" if alerts_only else "olbridge stream"
        raise ExportError(
            f"gave up on delivering {where}: nothing delivered for "
            f"{gave_up.seconds:.1f}s while deliveries failed (--give-up-after {budget:g}{later}){last}; "
            f"{left} stay pending: run {again} again when {back} is back"
        )
    if once and stats.dead:
        raise ExportError(
            f"{stats.dead} {'alert(s)' if alerts_only else 'event(s)'} became dead letters (refused by {target}, "
            "out of --max-attempts, or, an alert, its [[alerts]] table no longer in the config); "
            "see olbridge outbox list --dead, and olbridge outbox retry once the cause is fixed"
        )


def _say_held(catalog: Catalog) -> None:
    """Say how many events wait behind a dead letter of their key: no stream sends them until it
    is retried or dropped."""
    held = _counted(catalog, catalog.outbox.held)
    if held:
        say(
            f"note: {held} event(s) wait behind a dead letter of their run (or asset, or job), until it is "
            "retried or dropped: see olbridge outbox list --dead"
        )


def _counted(catalog: Catalog, count: Callable[[], int]) -> int | None:
    """A count of the outbox as the command ends; None, and said, where the catalog is away then
    (stopped during an outage: that is no error of the stream's)."""
    try:
        return count()
    except Exception as exc:
        if not catalog.unavailable(exc):
            raise
        say(f"note: not counted what stays in the outbox: {catalog.unavailable_reason(exc)}")
        return None


def _alerts_only_check(app: AppContext) -> None:
    """--alerts-only sends nothing to a backend (said of the options given on the command line;
    an OPENLINEAGE_API_KEY_FILE in the environment is no error), and needs alerts to send."""
    ctx = click.get_current_context()
    given = [  # (--timeout, --max-attempts and the backoff are the webhooks' too)
        f"--{name.replace('_', '-')}"
        for name in ("url", "api_key", "api_key_file", "concurrency", "batch_size", "no_batch")
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(f"--alerts-only sends nothing to an OpenLineage backend: leave out {', '.join(given)}")
    if not app.config.alerts:
        source = app.config.source
        read = f"in {source}" if source is not None else "(no config file was read: --config or olbridge.toml)"
        raise ConfigError(f"--alerts-only: no [[alerts]] tables {read}, so there is nothing to deliver")


@click.command(
    "backfill",
    epilog=examples(
        "olbridge backfill --url http://localhost:5000 --since 2025-01-01 --namespace company.data",
        "olbridge backfill --dry-run --json                                # count and validate, send nothing",
        "olbridge backfill --url http://localhost:5000 --rate 500/s --no-resume",
        "olbridge backfill --url http://localhost:5000 --retry-refused     # the refused events again",
    ),
)
@target_options
@delivery_options(max_attempts=BACKFILL_ATTEMPTS, max_attempts_help=MAX_ATTEMPTS_HELP)
@history_filters
@click.option(
    "--asset",
    type=NAMED,
    help="Only the task runs that read or wrote this asset id (or were to write it and did not: failed or skipped), "
    "and its changes.",
)
@click.option("--dry-run", is_flag=True, help="Count and validate the events; send nothing.")
@click.option("--rate", callback=_rate, help="At most this many events a second, e.g. 500/s.")
@click.option("--checkpoint", type=NAMED, help="Name of the checkpoint to resume from and keep [default: the target].")
@click.option("--no-resume", is_flag=True, help="Start from the beginning (the checkpoint starts over).")
@click.option(
    "--retry-refused",
    is_flag=True,
    help="First send again the events the backend refused in earlier runs of this checkpoint (olbridge "
    "status counts them); those it takes are forgotten.",
)
@json_flag("Print the summary as JSON.")
@pass_app
def backfill(
    app: AppContext,
    delivery: Delivery,
    url: str | None,
    api_key: str | None,
    api_key_file: Path | None,
    filters: HistoryFilter,
    asset: str | None,
    dry_run: bool,
    rate: float | None,
    checkpoint: str | None,
    no_resume: bool,
    retry_refused: bool,
    as_json: bool,
) -> None:
    """Replay the catalog's history to an OpenLineage backend: task runs by start time (each
    run's START, then its end) with the asset changes in between, resuming where an
    interrupted backfill stopped.

    The checkpoint moves only past events the backend took (2xx) or refused for good (4xx,
    Marquez's 500 with "code":400). Refused events are kept with the checkpoint and sent
    again by --retry-refused; the exit status is then 1. Connection errors, timeouts, 408,
    429 and 5xx are retried; when --max-attempts runs out the backfill stops with an error,
    its checkpoint before the first event not delivered."""
    if retry_refused and no_resume:
        raise click.UsageError("--retry-refused resends a checkpoint's refused events; --no-resume starts it over")
    filters = attrs.evolve(filters, asset=asset)
    catalog = app.catalog()
    total = catalog.count_history(filters)
    with stop_on_signals(_STOPPING) as stop:
        dispatcher = (
            None if dry_run else delivery.dispatcher(url, api_key_secret(api_key, api_key_file), rate=rate, stop=stop)
        )
        # a dry run reads the checkpoint the same backfill would resume from (and keeps none): the
        # one named, or the --url's; without either (a backend of the OpenLineage configuration,
        # not set up for a dry run), it checks everything
        if as_json and dispatcher is not None:
            _not_mixed(dispatcher)
        target = dispatcher.sender.target if dispatcher is not None else (masked(url) if url else url)
        name = checkpoint or _checkpoint_of(catalog, url, target)
        job = Backfill(
            catalog,
            app.converter(),
            dispatcher,
            filters=filters,
            checkpoint=name,
            resume=not no_resume,
            retry_refused=retry_refused,
            policy=delivery.policy(),
            stop=stop,
            report=FailureReport(dispatcher.sender.target, say) if dispatcher is not None else None,
            say=say,
        )
        saved = job.start_position()
        shown = "dry run" if dry_run else f"to {masked(name or '')}"
        with progress(f"backfill {shown}", total, "events", already=saved.events if saved else 0) as backfilling:
            job.progress = backfilling.advance
            try:
                summary = job.run()
            finally:
                if job.report is not None:
                    job.report.flush()
                if dispatcher is not None:
                    dispatcher.close()
    if as_json:
        print_json(summary.as_json())
    verb = "checked" if dry_run else "delivered"
    extra = (
        f", {summary.invalid} invalid"
        if dry_run
        else f", {summary.refused} refused, {summary.undelivered} undelivered"
        + (f" ({summary.resent} refused before and delivered now)" if summary.resent else "")
    )
    state = "" if summary.complete or summary.error else " (stopped; run it again to resume)"
    say(
        f"backfill {verb} {summary.events} event(s) of {summary.runs} task run(s), {summary.changes} "
        f"asset change(s) and {summary.jobs} declared job(s) in {summary.seconds:.1f}s{extra}{state}"
    )
    for problem in summary.problems if not as_json else []:
        said = problem.get("detail") or "; ".join(problem.get("problems", []))
        say(f"  {problem['event']}: {problem.get('status') or ''} {said}")
    if summary.running and not dry_run:
        say(
            f"note: {summary.running} task run(s) were still running: their START went, and the checkpoint passed "
            "them; a later backfill of it will not send their ends (olbridge stream does, or --no-resume)"
        )
    if summary.error is not None:
        raise ExportError(summary.error)
    if not summary.complete:  # stopped by a signal: not done, whatever it sent (or checked)
        again = "run it again" if dry_run else f"run it again to resume (checkpoint {masked(name or '')!r})"
        raise ExportError(f"the backfill was stopped before its end; {again}")
    if summary.refused:
        say(
            f"the refused events are kept with checkpoint {masked(name or '')!r} (olbridge status counts them); fix "
            "the cause, then send them again with olbridge backfill --retry-refused (same --url and --checkpoint)"
        )
    if summary.refused or summary.invalid:
        raise SystemExit(1)


@click.group("outbox")
def outbox() -> None:
    """The events queued for olbridge stream: list, retry and drop them."""


@outbox.command("list")
@click.option("--dead", is_flag=True, help="Only the dead letters (events the backend refused).")
@click.option("--limit", type=count(1), default=100, show_default=True, help="At most this many.")
@json_flag("Print JSON.")
@pass_app
def outbox_list(app: AppContext, dead: bool, limit: int, as_json: bool) -> None:
    """The outbox's rows in queue order: id, kind, the record it refers to (an alert's run key,
    alert:<name>:<asset id>), state, attempts, and for dead letters the backend's status and
    answer."""
    items = app.catalog().outbox.items(dead=dead, limit=limit)
    if as_json:
        print_json([item.as_json() for item in items])
        return
    rows = (
        (
            item.seq,
            item.kind,
            item.shown_ref,
            item.state,
            item.attempts,
            item.queued,
            " ".join(
                part for part in (f"HTTP {item.last_status}" if item.last_status else "", item.last_error or "") if part
            )[:170],
        )
        for item in items
    )
    print_rows(("id", "kind", "ref", "state", "attempts", "queued", "lastError"), rows)
    state = app.catalog().outbox.status()
    total = state.dead if dead else state.pending + state.dead
    more = f" of {total} (the first {limit}: --limit to see more)" if total > len(items) else ""
    say(f"{len(items)} row(s){more}")


@outbox.command("retry")
@click.argument("ids", nargs=-1, type=count(0))
@click.option("--all", "every", is_flag=True, help="Every dead letter.")
@pass_app
def outbox_retry(app: AppContext, ids: tuple[int, ...], every: bool) -> None:
    """Queue dead letters again (by id, or --all); olbridge stream sends them next. An id that
    is not a dead letter is an error, and nothing is queued."""
    if bool(ids) == every:
        raise click.UsageError("give dead-letter ids or --all (not both)")
    count = app.catalog().outbox.retry(None if every else list(ids))
    say(f"queued {count} dead letter(s) again")


@outbox.command("drop")
@click.argument("ids", nargs=-1, type=count(0), required=True)
@pass_app
def outbox_drop(app: AppContext, ids: tuple[int, ...]) -> None:
    """Remove rows from the outbox for good (their events are not sent). Dropping a run's
    refused START lets its end go. An id not in the outbox, or a row a stream worker holds (its
    event may be on its way; PostgreSQL), is an error naming it, and nothing is dropped."""
    count = app.catalog().outbox.drop(list(ids), must_exist=True)
    say(f"dropped {count} row(s)")


@click.command("status")
@json_flag("Print JSON.")
@pass_app
def status(app: AppContext, as_json: bool) -> None:
    """The outbox (depth, oldest pending event, dead letters, last success), the last
    delivery error and when, the stream workers, and each backfill's checkpoint with the
    events its backend refused."""
    catalog = app.catalog()
    state = catalog.outbox.status()
    errors = catalog.outbox.errors()
    workers = catalog.workers.list()
    now = time.time()
    backfills = _backfills(catalog, {e.source: e for e in errors})
    if as_json:
        print_json(
            {
                **state.as_json(),
                "lastError": errors[0].as_json() if errors else None,
                "workers": [w.as_json(now) for w in workers],
                "backfills": backfills,
            }
        )
        return
    lines: list[str] = []
    lines.append(f"pending: {state.pending}")
    lines.append(f"oldest pending: {state.oldest_pending or '-'}")
    lines.append(f"dead letters: {state.dead}")
    lines.append(f"held behind a dead letter: {state.held}")
    lines.append(f"delivered: {state.delivered}")
    lines.append(f"last success: {state.last_success or '-'}")
    lines.append(f"last error: {_error_line(errors[0])}" if errors else "last error: -")
    shared = catalog.engine.outbox_hold == "claims"
    for w in workers:
        if shared:
            role = f"holding {w.claims} event(s)"
        else:
            role = f"delivering since {w.lease_since}" if w.lease_since else "waiting for the outbox"
        beat = max(now - w.heartbeat_at, 0.0)
        # past its hold's time without a beat: gone, or stalled (the next worker to start or look
        # takes what it held over)
        lapsed = f" (its hold lapsed after {LEASE_TTL:g}s: gone or stalled)" if beat > LEASE_TTL else ""
        lines.append(
            f"worker: pid {w.pid} on {w.host} to {w.target}, {role}, started {w.started_at}, "
            f"heartbeat {beat:.1f}s ago{lapsed}"
        )
    for b in backfills:
        up_to = b["position"][0] if b["position"] and b["position"][0] else "-"
        refused = f", {b['refused']} refused (send again: --retry-refused)" if b["refused"] else ""
        lines.append(
            f"backfill {masked(b['checkpoint'])}: up to {up_to}, {b['runs']} task run(s), {b['events']} event(s) "
            f"delivered{refused}, updated {b['updatedAt']}"
        )
    echo_lines(lines)


def _error_line(e: DeliveryError) -> str:
    """The last delivery failure as ``status`` says it: when, whose (the stream's to its backend,
    an alert's to its webhook, a backfill's), its class and the answer."""
    answer = " ".join(e.detail.split())[:200]
    status_text = f" HTTP {e.status}" if e.status is not None else ""
    kind, _, name = e.source.partition(":")
    if e.source == ALERTS_SOURCE:
        by = f"alert {e.target} to its webhook"
    else:
        by = f"{kind} to {e.target}" + (f" (checkpoint {masked(name)})" if name and name != e.target else "")
    return f"{e.at} {by}: {e.failure}{status_text} {answer}".rstrip()


def _backfills(catalog: Catalog, errors: dict[str, DeliveryError]) -> list[dict[str, Any]]:
    """Each backfill checkpoint as ``status`` shows it."""
    refused = catalog.backfills.count_refused()
    out = []
    for checkpoint in catalog.backfills.checkpoints():
        error = errors.get(f"backfill:{checkpoint.name}")
        out.append(
            {
                "checkpoint": checkpoint.name,
                "position": list(checkpoint.position) if checkpoint.position is not None else None,
                "runs": checkpoint.runs,
                "events": checkpoint.events,
                "refused": refused.get(checkpoint.name, 0),
                "updatedAt": checkpoint.updated_at,
                "lastError": error.as_json() if error is not None else None,
            }
        )
    return out


def _checkpoint_of(catalog: Catalog, url: str | None, target: str | None) -> str | None:
    """The checkpoint a backfill keeps by default: named by its target, the URL with its password
    masked (no password kept in the catalog, nor shown); one kept before under the URL as given
    (with its password) goes on under that name."""
    before = url and target != url and catalog.backfills.checkpoint(target or "") is None
    return url if before and catalog.backfills.checkpoint(url or "") is not None else target


def _not_mixed(dispatcher: Dispatcher) -> None:
    """A usage error where the events go to stdout (the console transport), where --json's
    summary would go too: one stream a reader could not split."""
    if isinstance(dispatcher.sender, TransportSender) and dispatcher.sender.prints:
        raise click.UsageError(
            "--json prints its summary on stdout, where the console transport prints the events: give one or the other"
        )
