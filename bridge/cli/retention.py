"""``retention``: delete the history that has outlived the config's ``[retention]`` windows, and
``serve``'s schedule for it (one pass at a time across every process on the catalog)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from bridge.catalog import Catalog
from bridge.catalog import retention as catalog_retention
from bridge.catalog.retention import Windows
from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.output import print_json, print_rows, say, stop_on_signals
from bridge.config import RetentionConfig
from bridge.delivery.helpers import Helper, StopLine
from bridge.errors import CatalogError, ConfigError

_STOPPING = "{signal}: stopping after the batch in hand"
LEASE_TTL = 300.0  # seconds a pass holds the lease without renewing it (renewed after every batch)


def windows(settings: RetentionConfig) -> Windows:
    """The catalog's windows of the config's ``[retention]`` (its ``every`` is serve's)."""
    return catalog_retention.windows_of(attrs.asdict(settings))


class LeaseLost(CatalogError):
    """Another process took the lease on retention while this one's pass was slow: it stops."""


def run_pass(
    catalog: Catalog,
    settings: RetentionConfig,
    holder: str,
    now: float | None = None,
    *,
    pause: float = catalog_retention.PAUSE,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[dict[str, int], str | None] | None:
    """One real pass under the catalog's lease on retention, which the command and serve's
    schedule take alike (one pass at a time across every process on the catalog): taken for
    ``holder``, renewed after every batch, given back at the end. The rows deleted of each kind and
    a note on the file's free pages (None: nothing to say); None when another process's pass holds
    the lease (nothing was deleted). Stopped between two batches when ``stop()`` says so
    (:class:`~bridge.catalog.retention.Stopped`, the lease given back)."""
    db = catalog.db
    if not catalog_retention.take_lease(db, holder, time.time(), LEASE_TTL):
        return None

    def renew() -> None:
        if not catalog_retention.take_lease(db, holder, time.time(), LEASE_TTL):
            raise LeaseLost("another process took the lease on retention; this pass stops")

    try:
        at = time.time() if now is None else now
        deleted = catalog_retention.expire(db, windows(settings), at, pause=pause, between=renew, stop=stop)
        return deleted, catalog_retention.reclaim(db)
    finally:
        catalog_retention.release_lease(db, holder)


def prepare_partitions(catalog: Catalog) -> None:
    """Make the partitions of received events the days ahead need (PostgreSQL; nothing on SQLite)."""
    catalog_retention.prepare(catalog.db, time.time())


@click.command(
    "retention",
    epilog=examples(
        "olbridge retention --dry-run --json   # what would go, per kind",
        "olbridge retention                    # delete it, in batches",
    ),
)
@click.option("--dry-run", is_flag=True, help="Count what would go, per kind; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_app
def retention(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Delete the history older than the config's [retention] windows.

    Received events, external runs (never a job's latest), dead letters, delivery errors, column
    edges of runs that are gone, assets' checks (never an asset's latest), and olbridge's own task
    runs and the outbox's events no stream delivered if windows are given for them, in
    batches of 1,000 rows with a short pause between, so receivers are never held for long. On
    PostgreSQL the days of received events past the window are dropped whole (their partitions),
    and the days ahead's partitions made. What current lineage needs (placeholders, bindings,
    datasets' facets, pending outbox rows unless pending_outbox says) stays.

    One pass runs at a time across every process on the catalog (serve's scheduled passes
    too): while another holds the lease on retention, this one deletes nothing and exits 1 naming
    it (a lease whose holder on this host is gone, stopped or killed, is taken over). --dry-run
    deletes nothing and takes no lease. SIGTERM or Ctrl-C stops a pass after the batch in hand:
    it prints what it deleted, gives the lease back and exits 1.
    """
    catalog = app.catalog()
    settings = app.config.retention
    if not settings.configured:
        raise ConfigError('the config has no [retention] windows (received_events = "7d", ...); nothing would go')
    now = time.time()
    note = None
    if catalog_retention.waiting_kept(catalog.db.conn, windows(settings), now):
        say(
            "Note: pending_outbox: a stream to a backend is live (olbridge status), so nothing waiting in the "
            "outbox goes: it delivers it when its backend answers"
        )
    if dry_run:  # the partitions wholly expired hold rows the count meets: the same total
        held = catalog_retention.lease_holder(catalog.db.conn, now)
        if held is not None:
            say(f"Note: a retention pass is running ({held.describe()}): these counts hold what it has yet to delete")
        counts = catalog_retention.count(catalog.db, windows(settings), now)
    else:
        with stop_on_signals(_STOPPING) as stop:
            try:
                done = run_pass(catalog, settings, catalog_retention.holder_id(), now, stop=stop.is_set)
            except catalog_retention.Stopped as stopped:
                _print_counts(stopped.counts, dry_run=False, as_json=as_json)
                raise CatalogError(
                    "the retention pass was stopped before its end; what it deleted is above: run it again for the rest"
                ) from None
        if done is None:
            held = catalog_retention.lease_holder(catalog.db.conn, time.time())
            who = f" ({held.describe()})" if held is not None else ""
            raise CatalogError(
                f"another retention pass is running on this catalog{who}; one runs at a time, so this one "
                "deleted nothing: run it again once that one is done"
            )
        counts, note = done
    _print_counts(counts, dry_run=dry_run, as_json=as_json)
    if note:
        say(f"Note: {note}")


def _print_counts(counts: dict[str, int], *, dry_run: bool, as_json: bool) -> None:
    if as_json:
        print_json({"dryRun": dry_run, "counts": counts})
    else:
        print_rows(("kind", "would go" if dry_run else "deleted"), sorted(counts.items()))


# --- serve's schedule ------------------------------------------------------------------------


def start_schedule(catalog_path: str | Path, settings: RetentionConfig) -> Helper | None:
    """Start the process that runs retention every ``settings.every`` (None: not set), started
    again should it die. A spawned process, not a thread, as the receiver forks."""
    if settings.every is None:
        return None
    return Helper("retention schedule", _schedule, (catalog_path, settings), say)


def _schedule(catalog_path: str | Path, settings: RetentionConfig, reader: Any, parent: int) -> None:
    """Every ``settings.every`` seconds, a pass, if this process takes the catalog's lease on
    retention (another receiver's pass may be running). Stops when told, or when its parent is gone."""
    # Ctrl-C, or a SIGTERM to the group (systemd's stop, timeout), reaches it too: the receiver
    # stops it through its pipe (:class:`~bridge.delivery.helpers.StopLine`)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert settings.every is not None
    stop = StopLine(reader)
    holder = catalog_retention.holder_id()
    said: str | None = None  # the warning of the passes that failed so, said once until one runs
    while os.getppid() == parent and not stop.is_set():  # (a pass longer than `every` waits not)
        started = time.monotonic()
        try:
            _one_scheduled_pass(catalog_path, settings, holder, stop.is_set)
        except Exception as exc:  # the receiver goes on; the next pass tries again
            warning = f"Warning: retention: {exc}"
            if warning != said:
                say(f"{warning} (said once until a pass runs)")
                said = warning
        else:
            if said is not None:
                say("retention: the scheduled passes run again")
                said = None
        while time.monotonic() - started < settings.every:
            if stop.wait(timeout=1.0) or os.getppid() != parent:
                return


def _one_scheduled_pass(
    catalog_path: str | Path, settings: RetentionConfig, holder: str, stop: Callable[[], bool]
) -> None:
    catalog = Catalog(catalog_path, create=False)
    try:
        try:
            done = run_pass(catalog, settings, holder, stop=stop)
        except catalog_retention.Stopped as stopped:  # the receiver stops: the rest in a later pass
            counts, still = stopped.counts, " (stopped before its end)"
        except Exception as exc:
            if catalog.unavailable(exc):  # in olbridge's words, as the writer and workers say it
                raise CatalogError(catalog.unavailable_reason(exc)) from exc
            raise
        else:
            if done is None:
                return  # another process's pass is running
            counts, still = done[0], ""
        gone = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        if gone:
            say(f"retention: deleted {gone}{still}")
    finally:
        catalog.close()
