"""The health watch: keeps each asset's health as writes and time change it, and queues the
alerts its changes make (:mod:`bridge.catalog.health_state` does each pass).

``olbridge serve`` (in a process of its own) and ``olbridge stream`` (in a thread) run one when
the config has ``[[alerts]]`` or a ``[health]`` table; of all the processes on a catalog, one at a
time watches: the holder of the ``health`` lease (a row of ``positions``, as retention's, renewed
at every step; a holder that stops renewing it, killed say, is taken over after :data:`LEASE_TTL`
seconds). Every ``poll`` seconds the holder judges the assets writes marked since and those whose
health changes with time alone by then (their freshness: each kept judgement says when, found
through an index); every ``every`` seconds, all of them (what neither foresaw). Each pass writes
as the lease's holder only (the lease is checked in every write transaction), so two processes never
record the same change, and never queue its alerts twice.

Writers mark only while the lease is held (they read it at most every
:data:`~bridge.catalog.health_state.SEEN_FOR` seconds): a watch that takes the lease (or takes it
back after it lapsed) judges every asset at once, and again
:data:`~bridge.catalog.health_state.TAKEOVER_PASS_AFTER` seconds later, by when every writer has
seen it live and marks what it writes (what one wrote before, unmarked, that second pass judges).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from bridge.catalog import Catalog
from bridge.catalog.engine import Cursor
from bridge.catalog.health_state import (
    BATCH,
    LEASE_KIND,
    TAKEOVER_PASS_AFTER,
    PassResult,
    counts,
    forget_passed,
    judge,
    keep_passed,
)
from bridge.catalog.retention import holder_id, release_lease, renew_lease, take_lease
from bridge.config import Config
from bridge.delivery.helpers import Helper, StopLine
from bridge.model import format_time
from bridge.model.alerts import AlertRule
from bridge.model.health import Selector

LEASE_TTL = 30.0  # seconds: a holder that did not renew the lease for this long may be taken over
PUBLISH_EVERY = 15.0  # seconds between two readings of the counts by health for publish (and after a change)
Publish = Callable[[dict[str, int]], object]  # hears the counts of assets by kept health


@attrs.frozen
class WatchSettings:
    """What the watch judges by: the ``[[freshness]]`` selectors, the ``[[alerts]]``, and the
    ``[health]`` table's ``every``, ``poll`` and ``web_url``."""

    selectors: tuple[Selector, ...] = ()
    alerts: tuple[AlertRule, ...] = ()
    every: float = 3600.0
    poll: float = 2.0
    web_url: str | None = None


class HealthWatch:
    """The watch over one catalog; :meth:`step` is one look (the tests drive it with their clock)."""

    def __init__(
        self,
        catalog: Catalog,
        settings: WatchSettings,
        *,
        holder: str | None = None,
        clock: Callable[[], float] = time.time,
        stop: threading.Event | None = None,
        say: Callable[[str], object] = lambda text: None,
        ttl: float = LEASE_TTL,
        batch: int = BATCH,
        publish: Publish | None = None,
        catch_up: float = TAKEOVER_PASS_AFTER,
    ) -> None:
        self.publish = publish
        self._published: float | None = None
        self.catalog = catalog
        self.settings = settings
        self.holder = holder or holder_id()
        self.clock = clock
        self.stop = stop or threading.Event()
        self.say = say
        self.ttl = ttl
        self.batch = batch
        self.catch_up = catch_up
        self.holding = False
        self._last_every: float | None = None  # when every asset was last judged (this holder)
        self._renewed: float | None = None  # when this holder last took or renewed the lease
        self._catch_up_at: float | None = None  # when every asset is to be judged again, the lease taken
        self._pass_seconds = 0.0  # how long the last pass over every asset took
        self._lapsed = False  # the lease's end passed during a pass (writers may have stopped marking)

    def lease_ttl(self) -> float:
        """How long the lease is taken for: ``ttl``, or three times the last pass over every asset
        when that is longer (a pass renews it at each of its writes, and a pass over every asset
        every third of ``ttl`` while it judges: :class:`_PassKeeper`)."""
        return max(self.ttl, 3 * self._pass_seconds)

    def _fence(self, cur: Cursor) -> bool:
        """Each write of a pass: still the holder (the lease renewed), else write nothing."""
        now = self.clock()
        state = renew_lease(cur, self.holder, now, self.lease_ttl(), kind=LEASE_KIND)
        if state == "lapsed":  # writers may have marked nothing: no pass before counts
            self._lapsed = True
            forget_passed(cur)
        if state is not None:
            self._renewed = now
        return state is not None

    def step(self) -> PassResult | None:
        """Take (or renew) the lease, then one pass: every asset when ``every`` seconds have gone
        by since this holder last judged them all, at once when it has just taken the lease (or
        renewed it after it lapsed: writers stopped marking meanwhile) and again ``catch_up``
        seconds later; else the marked ones and those due. None when another process holds the
        lease."""
        db = self.catalog.db
        now = self.clock()
        if not take_lease(db, self.holder, now, self.lease_ttl(), kind=LEASE_KIND):
            if self.holding:
                self.say("health watch: another process took it over")
            self.holding, self._last_every, self._renewed = False, None, None
            return None
        if not self.holding or self._renewed is None or now - self._renewed >= self.lease_ttl():  # taken
            self._last_every, self._catch_up_at = None, now + self.catch_up
            self.catalog.db.write(forget_passed)  # until this holder's own pass over every asset
        self.holding, self._renewed = True, now
        due = self._catch_up_at is not None and now >= self._catch_up_at
        every = self._last_every is None or now - self._last_every >= self.settings.every or due
        # a pass over every asset reads for long before its first write renews the lease (half a
        # minute at a million assets): renewed meanwhile, or another watch takes it over mid-pass,
        # and then this one takes it back from that one's pass, and no pass ever ends
        keeper = _PassKeeper(self) if every and not self.catalog.in_memory else None
        try:
            result = judge(
                db,
                self.settings.selectors,
                self.settings.alerts,
                datetime.fromtimestamp(now, UTC),
                every=every,
                fence=self._fence,
                web_url=self.settings.web_url,
                batch=self.batch,
            )
        finally:
            if keeper is not None:
                keeper.stop()
        if every and not result.lost:
            self._last_every, self._pass_seconds = now, self.clock() - now
            if due:
                self._catch_up_at = None
            if not self._lapsed:  # a pass the lease lapsed during does not count
                self._passed(now)
        if self._lapsed:  # writers that read the lease lapsed marked nothing: every asset again, soon
            self._lapsed, self._catch_up_at = False, self.clock() + self.catch_up
        if result.alerts:
            self.say(f"health watch: {result.changed} change(s), {result.alerts} alert(s) queued")
        return result

    def _passed(self, began: float) -> None:
        """After a pass over every asset that ``began`` then: said so, as this holder (what it
        keeps is then read as current: :mod:`bridge.catalog.health_kept`)."""
        holder, moment = self.holder, format_time(datetime.fromtimestamp(began, UTC))

        def work(cur: Cursor) -> None:
            if self._fence(cur):
                keep_passed(cur, holder, moment)

        self.catalog.db.write(work)

    def _publish(self, result: PassResult | None) -> None:
        """Give ``publish`` the counts by health, every :data:`PUBLISH_EVERY` seconds and after a
        pass that changed any asset's health (whoever holds the lease: every ``serve`` answers
        ``/metrics``; a kept health rewritten for its due time alone changes no count)."""
        now = self.clock()
        due = self._published is None or now - self._published >= PUBLISH_EVERY
        if self.publish is not None and (due or (result is not None and result.moved)):
            self.publish(counts(self.catalog.db.conn))
            self._published = now

    def run_once(self) -> PassResult | None:
        """One pass over every asset (None: another process holds the lease), the lease given back."""
        self._last_every = None
        try:
            return self.step()
        finally:
            release_lease(self.catalog.db, self.holder, kind=LEASE_KIND)

    def run(self) -> None:
        """Look every ``poll`` seconds until stopped (at once again while marks remain); a look
        the catalog cannot take now is tried at the next; the lease is given back at the end."""
        try:
            while not self.stop.is_set():
                more = False
                try:
                    result = self.step()
                    # a full batch read: more may be waiting, unless every mark it read was kept
                    # for a later look (assets dated a little ahead: a batch of them waits the poll)
                    more = result is not None and (
                        (result.marks >= self.batch and result.ahead < result.marks) or result.due >= self.batch
                    )
                    self._publish(result)
                except Exception as exc:
                    if not self.catalog.unavailable(exc):
                        self.say(f"Warning: health watch: {exc}")
                if not more:
                    self.stop.wait(self.settings.poll)
        finally:
            try:
                release_lease(self.catalog.db, self.holder, kind=LEASE_KIND)
            except Exception as exc:  # the catalog went away: the lease expires by itself
                self.say(f"Warning: health watch: could not give its lease back: {exc}")


class _PassKeeper:
    """Renews a watch's lease every third of its ``ttl`` while a pass judges, on a connection of
    its own, in a thread (the pass's reads are one long call); it stops once the lease is lost
    (the pass's fenced writes then write nothing) or the catalog is away (the lease then runs
    out as it would)."""

    def __init__(self, watch: HealthWatch) -> None:
        self.watch = watch
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="olbridge-health-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        own: Catalog | None = None
        try:
            while not self._done.wait(self.watch.ttl / 3):
                own = own or self.watch.catalog.reopen()
                if not own.db.write(self.watch._fence):
                    return
        except Exception:  # the catalog away: the pass finds it so too
            return
        finally:
            if own is not None:
                own.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def start_thread(
    catalog_path: str | Path, settings: WatchSettings, stop: threading.Event, say: Callable[[str], object]
) -> threading.Thread:
    """Run a watch in a thread of this process, on a connection of its own (``stream``)."""

    def run() -> None:
        _watch(catalog_path, settings, stop, say)

    thread = threading.Thread(target=run, name="olbridge-health-watch", daemon=True)
    thread.start()
    return thread


def start_process(
    catalog_path: str | Path, settings: WatchSettings, say: Callable[[str], None], publish: Publish | None = None
) -> Helper:
    """Run a watch in a process of its own (``serve``, whose receiver forks), started again should
    it die (:class:`~bridge.delivery.helpers.Helper`: a spawned process, not a forked one)."""
    return Helper("health watch", _process, (catalog_path, settings, publish), say)


def _process(
    catalog_path: str | Path, settings: WatchSettings, publish: Publish | None, reader: Any, parent: int
) -> None:
    # Ctrl-C, or a SIGTERM to the group, reaches it too: the receiver stops it (as retention's)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    line = StopLine(reader)
    done = threading.Event()

    def orphaned() -> None:  # told to stop, or the receiver gone without telling: stop too
        while not done.is_set():
            if line.wait(1.0) or os.getppid() != parent:
                done.set()

    threading.Thread(target=orphaned, daemon=True).start()
    _watch(catalog_path, settings, done, _stderr, publish)


def _watch(
    catalog_path: str | Path,
    settings: WatchSettings,
    stop: threading.Event,
    say: Callable[[str], object],
    publish: Publish | None = None,
) -> None:
    """Open the catalog and watch it until ``stop``; a catalog that cannot be opened now (its
    server restarting as the watch starts) is tried again every ``poll``, said once (the watch
    died with a traceback, and was not started again while its process ran)."""
    away = False
    while not stop.is_set():
        try:
            catalog = Catalog(catalog_path, create=False)
        except Exception as exc:
            if not away:
                say(f"Warning: health watch: {exc}; trying again every {settings.poll:g}s")
                away = True
            stop.wait(settings.poll)
            continue
        if away:
            say("health watch: the catalog is back")
        try:
            HealthWatch(catalog, settings, stop=stop, say=say, publish=publish).run()
        finally:
            catalog.close()
        return


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def settings_of(config: Config) -> WatchSettings | None:
    """The watch's settings from the config (None: it has neither ``[[alerts]]`` nor ``[health]``)."""
    health = config.health
    if not health.watch:
        return None
    return WatchSettings(config.freshness, config.alerts, health.every, health.poll, health.web_url)


__all__ = ["LEASE_KIND", "HealthWatch", "WatchSettings", "settings_of", "start_process", "start_thread"]
