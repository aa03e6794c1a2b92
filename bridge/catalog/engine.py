"""The contract between the catalog and a storage engine, and the one connection the catalog
holds through it.

The catalog runs on SQLite (:mod:`bridge.catalog.sqlite`, a file; the embedded default) or on
PostgreSQL (:mod:`bridge.catalog.postgres`, a ``postgresql://`` URL; for several processes and
hosts). Both have the same schema (:mod:`bridge.catalog.schema`, one version number) and run the
same statements (:mod:`bridge.catalog.sql`), written once in SQLite's dialect with ``?``
placeholders; an engine whose dialect differs translates them (placeholders, the few functions
and clauses that differ) once each, on its own cursors. The statements run on the drivers' own
DB-API cursors: no layer between (docs/benchmarks.md, "Engine overhead").

An :class:`Engine` says how to reach a catalog and what its errors mean; a :class:`Database` is
one connection through it, with write transactions that an engine with concurrent writers runs
again when they lose a race (a serialization failure, a deadlock, a row another process inserted
first), a bounded number of times.
"""

from __future__ import annotations

import abc
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar
from urllib.parse import unquote

import attrs

from bridge.errors import BadValueError, BridgeError, Busy, CatalogError

T = TypeVar("T")

URL_SCHEMES = ("postgresql://", "postgres://")
_ANY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a scheme: a URL, never a file name
WRITE_ATTEMPTS = 12  # a write transaction that keeps losing races is given up after this many tries
# where the server keeps plans for a connection's statements (Engine.keeps_plans), the connection
# is opened again 1, 3, 7, ... s after it opened, then every REPLAN_MOST s: plans made while the
# tables were nearly empty (a scan of all the table, or of all an index, where a few index probes
# are right) would be kept as the tables grow, until the next ANALYZE
REPLAN_FIRST, REPLAN_MOST = 1.0, 300.0


class Cursor(Protocol):
    """A DB-API cursor, as both drivers give it (sqlite3's, psycopg's)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, statement: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, statement: str, params: Any, /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """A DB-API connection in autocommit mode: transactions are begun and ended by statements."""

    def execute(self, statement: str, params: Sequence[Any] = ..., /) -> Any: ...

    def cursor(self) -> Any: ...

    def close(self) -> None: ...


class Conflict(Exception):
    """A write transaction found that another process changed what it read (an event it was
    taking, a run it was creating): run it again. Raised by the catalog's own checks; an engine's
    serialization failures and deadlocks mean the same (:meth:`Engine.conflict`)."""


Writes = Sequence[tuple[str, Sequence[Sequence[Any]]]]  # statements, each with its rows


def read_each(cur: Cursor, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
    """The rows of each query, one after another (:meth:`Engine.read_all` for any cursor)."""
    return [cur.execute(query, params).fetchall() for query, params in queries]


def write_each(cur: Cursor, writes: Writes, *, new: Writes = ()) -> None:
    """Each ``executemany`` that has rows, in order, after the writes of ``new`` rows, each
    checked as :func:`write_new` checks it (:meth:`Engine.write_all` for any cursor)."""
    for statement, rows in new:
        if rows:
            write_new(cur, statement, rows)
    for statement, rows in writes:
        if rows:
            cur.executemany(statement, rows)


def write_counted(cur: Cursor, statement: str, rows: Sequence[Sequence[Any]]) -> int:
    """``executemany`` and the count of rows it wrote (:meth:`Engine.write_many` for any cursor)."""
    cur.executemany(statement, rows)
    return int(cur.rowcount)


def write_new(
    cur: Cursor,
    statement: str,
    rows: Sequence[Sequence[Any]],
    *,
    write_many: Callable[[Cursor, str, Sequence[Sequence[Any]]], int] = write_counted,
) -> None:
    """Rows no row of the table holds yet, as far as the caller read, by ``write_many`` (an
    ``INSERT ... ON CONFLICT DO NOTHING``): a :class:`Conflict` when another writer wrote one
    meanwhile (:meth:`Engine.write_new` for any cursor)."""
    if write_many(cur, statement, rows) != len(rows):
        raise Conflict("another process wrote some of these rows meanwhile")


class Maintenance(abc.ABC):
    """The upkeep a long-running writer runs beside its commits, on a connection of its own
    (SQLite: checkpoints of its write-ahead log): :meth:`step` every :attr:`look` seconds from a
    thread of the writer's, :meth:`close` once it stops."""

    look: float  # s between two steps

    @abc.abstractmethod
    def step(self, between_commits: AbstractContextManager[Any]) -> None:
        """One look at what needs doing, and doing it; what must not run beside a commit runs
        inside ``between_commits`` (the writer's turn). Never raises for the storage's errors:
        the next step tries again."""

    @abc.abstractmethod
    def close(self) -> None:
        """The last of the upkeep, and its connection closed."""


@attrs.frozen
class Expiring:
    """What of a table retention deletes: ``condition`` on a row of the table (aliased as
    ``alias``) with its ``params``, and ``dependents``, statements that delete what goes with the
    rows of a dropped partition (named by ``{partition}`` in them: a run's facets); ``fold``, what
    is kept of the rows before they go, given their ``key`` column's values (what health reads of
    a run: :mod:`bridge.catalog.writes_kept`); ``lock``, a statement that a transaction which
    folds runs first (the takeovers' lock: :meth:`Engine.adoption_lock`)."""

    alias: str
    condition: str
    params: tuple[Any, ...]
    dependents: tuple[str, ...] = ()
    key: str = ""
    fold: Callable[[Cursor, list[Any]], None] | None = None
    lock: str | None = None


class Engine(abc.ABC):
    """A storage engine: how to reach a catalog and what differs from one engine to the next."""

    name: ClassVar[str]  # "sqlite" | "postgresql"
    # several processes write at once: writes lock the rows they read, check for races, and are
    # run again when they lose one (SQLite's write lock is the whole database: none of that)
    concurrent_writers: ClassVar[bool]
    # the server keeps plans for a connection's prepared statements (see REPLAN_FIRST)
    keeps_plans: ClassVar[bool] = False
    # how stream workers hold the outbox: one worker at a time, by the single lease; or side by
    # side, each by claims on the rows it sends (bridge.delivery.holds picks the one)
    outbox_hold: ClassVar[Literal["lease", "claims"]]
    # s a receiver's HTTP worker waits, after a group of several small requests, for their
    # clients' next ones, to hand them to the writer as one group (0: it hands them over at once)
    gather: ClassVar[float] = 0.0
    # the column that names a row of a table with no key of its own (column_lineage), for deletes
    # in batches: SQLite's rowid, PostgreSQL's ctid
    row_id: ClassVar[str] = "rowid"

    def adoption_lock(self, *, exclusive: bool) -> str | None:
        """The statement that takes, for the rest of a transaction, the lock by which an own
        write's takeover of a received placeholder (:mod:`bridge.catalog.adopt`, ``exclusive``)
        waits for the receivers' groups in flight, which hold it shared from before they read
        their bindings (so none writes under an id read before the takeover); None where one
        writer at a time holds the whole database (SQLite)."""
        return None

    def reclaim(self, conn: Connection) -> str | None:
        """Give the storage's free space back where the engine can, after deletes; None when done
        or nothing to do, else why not (a note for stderr). PostgreSQL's autovacuum makes the room
        reusable (VACUUM FULL gives it back): nothing here."""
        return None

    def prepare_partitions(self, db: Database, now: float) -> list[str]:
        """Make the partitions that will be needed soon, where the engine partitions a table by time
        (PostgreSQL: received events, a partition a day, :mod:`bridge.catalog.postgres.partitions`);
        the names made. SQLite partitions nothing."""
        return []

    def drop_expired_partitions(self, db: Database, table: str, cutoff: str, going: Expiring) -> int:
        """Drop the partitions of a table partitioned by time (received events, received runs)
        wholly older than ``cutoff`` whose every row goes (``going``: retention's condition, and
        what goes with the rows); the rows they held (0 where the engine partitions nothing)."""
        return 0

    @property
    def in_memory(self) -> bool:
        """A private in-memory catalog (SQLite's ``:memory:``): no other connection can see it."""
        return False

    def missing(self) -> bool:
        """Whether the catalog is known to be absent before any connection (a file not there)."""
        return False

    def removable(self) -> bool:
        """Whether :meth:`remove` can take the catalog away (a file of its own)."""
        return False

    def remove(self) -> None:
        """Take the catalog away (:meth:`removable` catalogs only, under :meth:`take_alone`)."""
        raise NotImplementedError

    def take_alone(self, conn: Connection) -> bool:
        """Lock the catalog for ``conn`` alone, if no other connection has it open (False: one has,
        or a removable catalog's engine cannot tell)."""
        return False

    def release_alone(self, conn: Connection) -> None:
        """Give back what :meth:`take_alone` took, the catalog as it was."""
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the catalog is, as messages show it (a password masked)."""

    @abc.abstractmethod
    def connect(self) -> Connection:
        """A new connection in autocommit mode, taking the shared statements."""

    @abc.abstractmethod
    def unreadable(self) -> str | None:
        """Why the catalog cannot be read right now (None: it can), from a short connection of its
        own that waits for nothing (a receiver's readiness)."""

    @abc.abstractmethod
    def begin(self) -> str:
        """The statement that begins a write transaction."""

    def begin_snapshot(self) -> str:
        """The statement that begins a read transaction on one snapshot of the catalog (SQLite's
        transaction reads one as it is)."""
        return "BEGIN"

    def broken(self, conn: Connection) -> bool:
        """Whether a connection can no longer be used (the server went away): open another."""
        return False

    def in_transaction(self, conn: Connection) -> bool:
        """Whether a transaction is open on the connection, one an error left to roll back (True
        where the engine cannot tell: a ROLLBACK is tried)."""
        return True

    @abc.abstractmethod
    def storage_error(self, exc: BaseException) -> CatalogError | None:
        """The CatalogError an error of the driver's about the catalog's storage stands for (a
        file, a disk, a lock, a server, a password), naming the catalog; None for any other (a
        fault in olbridge, left to surface)."""

    def busy(self, exc: BaseException) -> bool:
        """Whether the error says the catalog cannot take a write right now (retry later)."""
        return isinstance(exc, Busy)

    def conflict(self, exc: BaseException) -> bool:
        """Whether the error says a write transaction lost a race with another: run it again."""
        return isinstance(exc, Conflict)

    def stale(self, exc: BaseException) -> bool:
        """Whether a connection that failed with this error should be given up for a new one (a
        PostgreSQL session opened while its database was read-only stays read-only)."""
        return False

    def lost(self, exc: BaseException) -> bool:
        """Whether this error says the connection was lost, with no answer from the server to what
        was sent last (a COMMIT that failed so may have landed)."""
        return False

    def driver_error(self, exc: BaseException) -> bool:
        """Whether an error that is not about the storage (:meth:`storage_error`) is still the
        database's word on the catalog, shown as it is (SQLite's: a file it cannot read as a
        catalog), rather than a fault in olbridge left to surface."""
        return False

    def reason(self, exc: BaseException) -> str | None:
        """Why the catalog could not take a write, in a few words and none of the driver's (an
        HTTP answer, a line on stderr); None when the engine has no words for it."""
        found = self.storage_error(exc)
        return str(found) if found is not None else None

    @abc.abstractmethod
    def refused(self, exc: BaseException) -> bool:
        """Whether the error says a value or a constraint refused what one input asked (that input
        fails, the others of its group land)."""

    def refusal(self, exc: BaseException) -> str:
        """What a :meth:`refused` error says, in a line: its first (not a server's detail and
        hint, which name its tables' rows)."""
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__

    # --- the schema (bridge.catalog.migrate) ---------------------------------------------------

    upgrades_on_open: ClassVar[bool]  # an older catalog is upgraded when opened (else: `olbridge migrate`)

    @abc.abstractmethod
    def version(self, conn: Connection | Cursor) -> int | None:
        """The catalog's schema version; None for an empty database (no catalog yet). A
        CatalogError when the database holds something else."""

    @abc.abstractmethod
    def tables(self, conn: Connection | Cursor) -> list[str]:
        """The names of the database's tables (of the catalog's schema), in name order."""

    def search_indexed(self, conn: Connection | Cursor) -> bool:
        """Whether the assets' search (``asset_search``) is answered by an index here (see
        :func:`bridge.catalog.schema.search_statements`)."""
        return True

    def read_all(self, cur: Cursor, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """The rows of each of several reads that do not depend on one another, in order: one
        after another here (an engine with a server sends them in one round trip)."""
        return read_each(cur, queries)

    def write_all(self, cur: Cursor, writes: Writes, *, new: Writes = ()) -> None:
        """Several ``executemany`` whose counts of rows nobody reads, in order, after the writes
        of ``new`` rows (each as :meth:`write_new` writes it: a :class:`Conflict` when another
        writer wrote one of them meanwhile, here at once; an engine with a server sends them all
        in one round trip where it can, and finds it once they are all sent)."""
        for statement, rows in new:
            if rows:
                self.write_new(cur, statement, rows)
        write_each(cur, writes)

    def write_many(self, cur: Cursor, statement: str, rows: Sequence[Sequence[Any]]) -> int:
        """``executemany``, and the count of rows it wrote (an engine with a server may send the
        rows in a few statements)."""
        return write_counted(cur, statement, rows)

    def write_new(self, cur: Cursor, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Write rows that the caller found no row of the table holding yet (an ``INSERT ... ON
        CONFLICT DO NOTHING`` of rows whose keys it read in this transaction): a :class:`Conflict`
        when another writer wrote one of them meanwhile. An engine with a server may stream them in
        (PostgreSQL's ``COPY``)."""
        write_new(cur, statement, rows, write_many=self.write_many)

    def reset_keys(self, cur: Cursor) -> None:
        """Set the counter of every key that counts up past its table's highest (after rows were
        written with their keys, by a copy): none to set by default (SQLite counts from the rows)."""
        return None

    def lock_schema(self, cur: Cursor) -> None:
        """In a write transaction: wait for any other process making or upgrading the schema (none
        by default: the transaction holds the whole database)."""
        return None

    def stamp(self, cur: Cursor, version: int) -> None:
        """Beside Alembic's version table, whatever else says the version (SQLite's user_version)."""
        return None

    @abc.abstractmethod
    def sqlalchemy_engine(self) -> Any:
        """A SQLAlchemy engine on this catalog, for Alembic (its own connections, the driver's
        default cursors)."""

    def lock_schema_for_upgrade(self, connection: Any) -> None:
        """On Alembic's connection: hold off other processes upgrading until it closes."""
        return None

    def maintenance(self, conn: Connection, *, wal_limit: int, every: float) -> Maintenance | None:
        """The upkeep a long-running writer whose connection is ``conn`` runs beside its commits,
        set up on ``conn`` (None: the engine needs none, a server keeps its own; a private
        in-memory catalog has none either). ``wal_limit``: the bytes a write-ahead log may grow to
        before it is restarted; ``every``: s between two routine steps."""
        return None

    @abc.abstractmethod
    def durability(self, conn: Connection, level: str) -> None:
        """How sure a commit is once it returns, on this connection: ``full`` (on disk, it survives
        a power loss) or ``normal`` (it survives a crash of olbridge; the engine's own default)."""

    def legacy_version(self, connection: Any) -> int:
        """The version of a catalog from before Alembic (0: none)."""
        return 0


class Database:
    """One connection to a catalog through its engine (opened again when it breaks)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn = engine.connect()
        self._durability: str | None = None  # set again on each new connection
        self._replan_every = REPLAN_FIRST
        self._replan_at = time.monotonic() + self._replan_every
        self._stale = False  # the last transaction failed in a way that wants a new connection
        # (the COMMIT's error, what the work gave) of the last write whose connection was lost as it committed
        self._uncertain: tuple[BaseException, Any] | None = None

    @property
    def conn(self) -> Connection:
        if self._stale or self.engine.broken(self._conn):
            self._reconnect()
        return self._conn

    def _reconnect(self) -> None:
        """A new connection in place of the old one, opened before the old one closes: where the
        server's connections are nearly all taken, this process keeps its slot (a new one that
        cannot be opened leaves the old one in place, and raises)."""
        new = self.engine.connect()
        try:
            if self._durability is not None:
                self.engine.durability(new, self._durability)
        except BaseException:
            new.close()
            raise
        old, self._conn, self._stale = self._conn, new, False
        try:
            old.close()
        except Exception:  # a broken connection may refuse even that
            pass

    def set_durability(self, level: str) -> None:
        """How sure a commit is once it returns, on this connection and the ones after it."""
        self.engine.durability(self.conn, level)
        self._durability = level

    def _replan_if_due(self) -> None:
        """A new connection, with no plans kept, on the schedule of REPLAN_FIRST."""
        if not self.engine.keeps_plans:
            return
        now = time.monotonic()
        if now < self._replan_at:
            return
        try:
            self._reconnect()
        except Exception as exc:
            if not self.engine.busy(exc):
                raise
            # no new connection now (the server's slots all taken, say): the old one goes on
        self._replan_every = min(2 * self._replan_every, REPLAN_MOST)
        self._replan_at = now + self._replan_every

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction on a cursor of the connection: everything in it lands, or nothing."""
        self._replan_if_due()
        with self._within(self.engine.begin()) as cur:
            yield cur

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """One read transaction on a cursor of the connection: the reads in it see the catalog as
        of the first, whatever others write meanwhile (PostgreSQL's REPEATABLE READ; SQLite's
        transaction reads one state of its file)."""
        with self._within(self.engine.begin_snapshot()) as cur:
            yield cur

    @contextmanager
    def _within(self, begin: str) -> Iterator[Any]:
        """A transaction begun by ``begin`` on a cursor of the connection, committed at the end of
        the block, rolled back on an error (a connection an error broke marked for a new one)."""
        cur = self.conn.cursor()
        try:
            cur.execute(begin)
            try:
                yield cur
            except BaseException as exc:
                if self.engine.stale(exc):
                    self._stale = True
                self._roll_back(cur)
                raise
            else:
                try:
                    cur.execute("COMMIT")
                except BaseException as exc:
                    self._stale = self._stale or self.engine.stale(exc)
                    raise
        finally:
            cur.close()

    def _roll_back(self, cur: Cursor) -> None:
        """Roll back the transaction an error ended, where it is still open: SQLite rolls it back
        itself on some errors (a full disk), and a ROLLBACK then fails. A ROLLBACK that fails never
        takes the place of the error being raised; a connection it left in a transaction is given
        up for a new one (never a private in-memory catalog's: a new one would be empty)."""
        if not self.engine.in_transaction(self._conn):
            return
        try:
            cur.execute("ROLLBACK")
        except Exception:
            if not self.engine.in_memory:
                self._stale = True

    def write(self, work: Callable[[Any], T], *, attempts: int = WRITE_ATTEMPTS) -> T:
        """``work(cursor)`` in a write transaction, run again (after a short, growing, random
        wait) while it loses a race with another writer: at most ``attempts`` times, then a
        :class:`Busy`. ``work`` must change nothing outside the transaction. When the connection
        is lost as the transaction commits (whether it landed is not known), what ``work``
        gave is kept for :meth:`uncertain`."""
        self._uncertain = None
        for attempt in range(1, attempts + 1):
            done: list[T] = []
            try:
                with self.transaction() as cur:
                    done.append(work(cur))
                return done[0]
            except Exception as exc:
                if done and self.engine.lost(exc):  # raised by the COMMIT
                    self._uncertain = (exc, done[0])
                if not self.engine.conflict(exc):
                    raise
                if attempt == attempts:
                    raise Busy(
                        f"catalog {self.engine.location}: a write lost {attempts} races with other writers; try again"
                    ) from exc
                time.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.25)))
        raise AssertionError("unreachable")

    def uncertain(self, exc: BaseException) -> Any | None:
        """What the work of the last :meth:`write` gave, where ``exc`` is its COMMIT's failure for
        the loss of the connection (the transaction may have landed); else None."""
        found = self._uncertain
        return found[1] if found is not None and found[0] is exc else None

    def close(self) -> None:
        self._conn.close()


def unavailable_reason(engine: Engine, exc: BaseException) -> str:
    """Why the catalog could not take a write, for a message or an HTTP answer: in the engine's
    words, never the driver's internals."""
    found = engine.reason(exc)
    if found is not None:
        return found
    if isinstance(exc, BridgeError):
        return str(exc)
    return "it cannot take writes now"


_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def masked(target: str | Path) -> str:
    """A catalog target as messages may show it: the password of a URL (``user:password@`` or a
    ``password=`` parameter, of any scheme) replaced by ``***``."""
    text = str(target)
    if not _ANY_URL.match(text):
        return text
    scheme, _, rest = text.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, hosts = authority.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        authority = f"{userinfo}@{hosts}"
    return _PASSWORD_PARAM.sub(r"\1***", f"{scheme}://{authority}{slash}{tail}")


def url_password(target: str | Path) -> str | None:
    """The password written in a catalog URL (``user:password@`` or ``password=``), else None."""
    text = str(target)
    if not is_url(text):
        return None
    authority = text.partition("://")[2].partition("/")[0]
    userinfo = authority.rpartition("@")[0]
    if ":" in userinfo:
        return unquote(userinfo.split(":", 1)[1])
    found = _PASSWORD_PARAM.search(text)
    return unquote(found.group(0).split("=", 1)[1]) if found else None


def is_url(target: str | Path) -> bool:
    """Whether a catalog target is a database URL rather than a file path."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def catalog_target(text: str) -> str | Path:
    """What ``--catalog`` or ``OLBRIDGE_CATALOG`` names: a database URL as it is, else a file path.
    A URL of another scheme (``mysql://``) is a BadValueError, never taken as a file name, and so
    is a URL that is not UTF-8 text (a file's name may be any bytes)."""
    if not text.strip():  # not the current folder
        raise BadValueError("catalog: the name is empty; give a SQLite file or a postgresql:// URL")
    if is_url(text):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # bytes the command line or the environment had that are not UTF-8
            raise BadValueError(f"catalog {masked(text)}: the URL is not UTF-8 text") from None
        return text
    if _ANY_URL.match(text):
        scheme = text.partition("://")[0]
        raise BadValueError(
            f"catalog {masked(text)}: a {scheme}:// URL is no catalog olbridge can open; give a SQLite file "
            "or a postgresql:// URL"
        )
    return Path(text)


__all__ = [
    "Busy",
    "Conflict",
    "Connection",
    "Cursor",
    "Database",
    "Engine",
    "Maintenance",
    "catalog_target",
    "is_url",
    "masked",
    "unavailable_reason",
    "url_password",
]
