"""``retention``: delete the history that has outlived the config's ``[retention]`` windows, and
``serve``'s schedule for it (one pass at a time across every process on the catalog)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import click

from bridge.catalog import Catalog
from bridge.catalog import retention as catalog_retention
from bridge.catalog.retention import Windows
from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.output import print_json, print_rows, say
from bridge.config import RetentionConfig
from bridge.errors import ConfigError

LEASE_TTL = 300.0  # seconds a pass holds the lease without renewing it (renewed after every batch)


def windows(settings: RetentionConfig) -> Windows:
    """The catalog's windows of the config's ``[retention]`` (its ``every`` is serve's)."""
    return catalog_retention.windows_of(attrs.asdict(settings))


def run_pass(
    catalog: Catalog, settings: RetentionConfig, now: float, *, pause: float = catalog_retention.PAUSE
) -> tuple[dict[str, int], str | None]:
    """One real pass: the rows deleted of each kind, and a note on the file's free pages (None:
    nothing to say)."""
    deleted = catalog_retention.expire(catalog.db, windows(settings), now, pause=pause)
    return deleted, catalog_retention.reclaim(catalog.db)


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
        counts = catalog_retention.count(catalog.db.conn, windows(settings), now)
    else:
        counts, note = run_pass(catalog, settings, now)
    if as_json:
        print_json({"dryRun": dry_run, "counts": counts})
    else:
        print_rows(("kind", "would go" if dry_run else "deleted"), sorted(counts.items()))
    if note:
        say(f"Note: {note}")


# --- serve's schedule ------------------------------------------------------------------------


def start_schedule(catalog_path: str | Path, settings: RetentionConfig) -> tuple[Any, Any] | None:
    """Start the process that runs retention every ``settings.every`` (None: not set); its process
    and the event that stops it. A spawned process, not a thread, as the receiver forks."""
    if settings.every is None:
        return None
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    process = context.Process(
        target=_schedule, args=(catalog_path, settings, stop, os.getpid()), name="olbridge-retention", daemon=True
    )
    process.start()
    return process, stop


def stop_schedule(started: tuple[Any, Any] | None) -> None:
    if started is None:
        return
    process, stop = started
    stop.set()
    process.join(timeout=10)
    if process.is_alive():  # it takes no SIGTERM (see _schedule)
        process.kill()
        process.join()


def _schedule(catalog_path: str | Path, settings: RetentionConfig, stop: Any, parent: int) -> None:
    """Every ``settings.every`` seconds, a pass, if this process takes the catalog's lease on
    retention (another receiver's pass may be running). Stops when told, or when its parent is gone."""
    # Ctrl-C, or a SIGTERM to the group (systemd's stop, timeout), reaches it too: the receiver
    # stops it by ``stop`` (a process killed while it waits on ``stop`` would leave the receiver
    # waiting for it forever in setting it)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert settings.every is not None
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    while os.getppid() == parent:
        started = time.monotonic()
        try:
            _one_scheduled_pass(catalog_path, settings, holder)
        except Exception as exc:  # the receiver goes on; the next pass tries again
            say(f"Warning: retention: {exc}")
        while time.monotonic() - started < settings.every:
            if stop.wait(timeout=1.0) or os.getppid() != parent:
                return


class LeaseLost(Exception):
    """Another process took the lease on retention while this one's pass was slow: it stops."""


def _one_scheduled_pass(catalog_path: str | Path, settings: RetentionConfig, holder: str) -> None:
    catalog = Catalog(catalog_path, create=False)
    try:
        if not catalog_retention.take_lease(catalog.db, holder, time.time(), LEASE_TTL):
            return  # another process's pass is running
        try:

            def renew() -> None:
                if not catalog_retention.take_lease(catalog.db, holder, time.time(), LEASE_TTL):
                    raise LeaseLost("another process took the lease on retention; this pass stops")

            counts = catalog_retention.expire(catalog.db, windows(settings), time.time(), between=renew)
            catalog_retention.reclaim(catalog.db)
        finally:
            catalog_retention.release_lease(catalog.db, holder)
        gone = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        if gone:
            say(f"retention: deleted {gone}")
    finally:
        catalog.close()
