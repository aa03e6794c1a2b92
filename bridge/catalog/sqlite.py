"""The SQLite engine: a catalog in one file (or ``:memory:``), the embedded default.

One writer at a time: a write transaction begins with ``BEGIN IMMEDIATE``, which takes the whole
database's write lock (waiting up to the driver's timeout for another process to let it go), so
a write never loses a race and is never run again. WAL journal, so readers do not wait for the
writer; foreign keys on. The shared statements are SQLite's own dialect: no translation.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from bridge.catalog.engine import Busy, Connection, Cursor, Engine, Maintenance
from bridge.errors import CatalogError

# auto_vacuum takes effect in a new file (before its first table) or at a VACUUM: a new catalog's
# free pages, left by retention's deletes, can be given back (bridge/catalog/retention.py). Set
# only on an empty file: on one that holds pages it waits for the write lock, so that every
# connection, the readers' too, failed while another process wrote for long (a large record)
NEW_FILE_PRAGMA = "PRAGMA auto_vacuum = INCREMENTAL"
PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
)
# read once on connecting: a file that opens but cannot be read as opened (a WAL index it cannot
# make on a read-only file system) fails here, and is opened read-only instead
_PROBE = "SELECT count(*) FROM sqlite_master"
# how many tables a database has, and how many of the two every catalog has had since its first version
_OURS = (
    "SELECT count(*), count(CASE WHEN name IN ('assets', 'task_runs') THEN 1 END) FROM sqlite_master "
    "WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
)

# SQLite's primary result codes that mean the file, the disk or another process is in the way,
# never a fault in olbridge's SQL: https://www.sqlite.org/rescode.html
_STORAGE_CODES = {
    3: "permission denied",  # SQLITE_PERM
    5: "another process holds it locked; try again",  # SQLITE_BUSY
    6: "it is locked",  # SQLITE_LOCKED
    8: "it cannot be written (read-only file, folder or file system)",  # SQLITE_READONLY
    10: "a disk input/output error",  # SQLITE_IOERR
    11: "the file is damaged",  # SQLITE_CORRUPT
    13: "the disk is full",  # SQLITE_FULL
    14: "the file cannot be opened",  # SQLITE_CANTOPEN
    15: "its lock protocol failed",  # SQLITE_PROTOCOL
    26: "not a catalog: the file is not a SQLite database",  # SQLITE_NOTADB
}
_BUSY_CODES = {5, 6}
# what opening a file read-write fails with where it can only be read
_READ_ONLY_CODES = {3, 8, 14}  # SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN
READ_ONLY_PRAGMAS = ("PRAGMA foreign_keys = ON",)  # no journal mode to set: it cannot be written


def storage_error(exc: BaseException, path: str | Path) -> CatalogError | None:
    """The CatalogError that a SQLite error about the catalog's file, disk or lock, or text in it
    that is not UTF-8, stands for, naming the catalog; None for any other error (a fault in
    olbridge, left to surface)."""
    if undecodable(exc):
        return CatalogError(f"catalog {path}: it holds text that is not UTF-8, changed by hand (SQLite: {exc})")
    if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(("no such table:", "no such column:")):
        what = "table" if str(exc).startswith("no such table:") else "column"
        return CatalogError(f"catalog {path}: it is damaged: a {what} of the catalog is missing (SQLite: {exc})")
    code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.Error) else None
    if code is None or code & 0xFF not in _STORAGE_CODES:
        return None
    return CatalogError(f"catalog {path}: {_STORAGE_CODES[code & 0xFF]} (SQLite: {exc})")


def undecodable(exc: BaseException) -> bool:
    """Whether the error is sqlite3's for a TEXT value that is not UTF-8 (it decodes each as it
    fetches a row): a file written by hand, since olbridge writes text only from str."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("Could not decode to UTF-8")


class SqliteEngine(Engine):
    name: ClassVar[str] = "sqlite"
    concurrent_writers: ClassVar[bool] = False
    outbox_hold: ClassVar[Literal["lease", "claims"]] = "lease"
    upgrades_on_open: ClassVar[bool] = True  # a file of one machine's: brought up to date in place

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise CatalogError(f"cannot open catalog {self.path}: folder {parent} does not exist")
            if Path(self.path).is_dir():  # SQLite says only that it cannot open it
                raise CatalogError(f"cannot open catalog {self.path}: it is a folder, not a catalog's file")

    @property
    def location(self) -> str:
        return self.path

    @property
    def in_memory(self) -> bool:
        return self.path == ":memory:"

    def exists(self) -> bool:
        """Whether the file is there (a catalog or not: opening it tells)."""
        return self.in_memory or Path(self.path).exists()

    def missing(self) -> bool:
        return not self.exists()

    def removable(self) -> bool:
        return not self.in_memory

    def remove(self) -> None:
        """The file, and those of its journal (``-wal``, ``-shm``, ``-journal``)."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(self.path + suffix).unlink(missing_ok=True)

    def take_alone(self, conn: Connection) -> bool:
        """Out of WAL mode (SQLite refuses while another connection has the file open), then an
        exclusive lock (no other connection reads or writes it until released)."""
        try:
            mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
            if str(mode).lower() != "delete":
                return False
            conn.execute("BEGIN EXCLUSIVE")
            # a connection opened between the two set WAL again, under which EXCLUSIVE locks out
            # no reader: inside the transaction the pragma says the file's mode
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "delete":
                return True
            conn.execute("ROLLBACK")
        except sqlite3.OperationalError:  # busy: another connection has it
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        self._back_to_wal(conn)
        return False

    def release_alone(self, conn: Connection) -> None:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        self._back_to_wal(conn)

    @staticmethod
    def _back_to_wal(conn: Connection) -> None:
        """WAL again, as every connection sets it (one that cannot now finds it so when the other
        connection that holds the file opened it)."""
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA journal_mode=WAL")

    def connect(self) -> Connection:
        self._refuse_foreign()
        try:
            return self._connect(self.path, PRAGMAS, new_file=True)
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if self.in_memory or code not in _READ_ONLY_CODES or not Path(self.path).is_file():
                raise
            # a file this process may read and not write (a read-only file system, file or
            # folder): read-only, so the commands that read work and a write says it cannot;
            # immutable (no lock, no WAL index) where even that needs a file it cannot make
            for mode in ("mode=ro", "immutable=1"):
                try:
                    return self._connect(f"{Path(self.path).absolute().as_uri()}?{mode}", READ_ONLY_PRAGMAS)
                except sqlite3.OperationalError:
                    continue
            raise exc from None

    def _refuse_foreign(self) -> None:
        """Another application's database is refused before anything is set on it (WAL, which
        rewrites its header): it holds tables, but not those every catalog has. What cannot be
        read here is left to the connection, which says why."""
        if self.in_memory or not Path(self.path).is_file():
            return
        try:
            uri = f"{Path(self.path).absolute().as_uri()}?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1)) as conn:
                tables, ours = conn.execute(_OURS).fetchone()
        except sqlite3.Error:
            return
        if tables and ours < 2:
            raise CatalogError(f"{self.path} is a SQLite database but not an olbridge catalog")

    @staticmethod
    def _connect(target: str, pragmas: tuple[str, ...], *, new_file: bool = False) -> sqlite3.Connection:
        """A connection with ``pragmas`` set, and with ``new_file`` :data:`NEW_FILE_PRAGMA` first
        where the file is empty."""
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=target.startswith("file:"))
        try:
            if new_file and not conn.execute("PRAGMA page_count").fetchone()[0]:
                conn.execute(NEW_FILE_PRAGMA)
            for pragma in pragmas:
                conn.execute(pragma)
            conn.execute(_PROBE).fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def unreadable(self) -> str | None:
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1)) as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            return f"the catalog cannot be read: {exc}"
        return None

    def begin(self) -> str:
        return "BEGIN IMMEDIATE"  # the write lock, taken now rather than at the first write

    def in_transaction(self, conn: Connection) -> bool:
        # False once SQLite rolled a transaction back itself (a full disk, an I/O error)
        return not isinstance(conn, sqlite3.Connection) or conn.in_transaction

    def storage_error(self, exc: BaseException) -> CatalogError | None:
        return storage_error(exc, self.path)

    def driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def busy(self, exc: BaseException) -> bool:
        if isinstance(exc, Busy):
            return True
        code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.OperationalError) else None
        return code is not None and code & 0xFF in _BUSY_CODES

    def refused(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def version(self, conn: Connection | Cursor) -> int | None:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        # another application's database may number its versions too: a catalog of every version
        # has two tables of its own (and is refused before anything is set on it: connect)
        tables, ours = conn.execute(_OURS).fetchone()
        if found and ours == 2:
            return found
        if found or tables:
            raise CatalogError(f"{self.path} is a SQLite database but not an olbridge catalog")
        return None

    def tables(self, conn: Connection | Cursor) -> list[str]:
        query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"
        return [str(name) for (name,) in conn.execute(query)]

    def stamp(self, cur: Cursor, version: int) -> None:
        cur.execute(f"PRAGMA user_version = {int(version)}")

    def sqlalchemy_engine(self) -> Any:
        import sqlalchemy
        from sqlalchemy.pool import NullPool

        engine = sqlalchemy.create_engine("sqlite://", creator=self._raw_connect, poolclass=NullPool)

        # the driver begins no transaction before DDL: the engine does, so each migration lands
        # whole or not at all (https://docs.sqlalchemy.org/en/20/dialects/sqlite.html, "Serializable
        # isolation / Savepoints / Transactional DDL")
        @sqlalchemy.event.listens_for(engine, "begin")
        def begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    def _raw_connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)

    def reclaim(self, conn: Connection) -> str | None:
        """The file's free pages given back where the catalog allows it (``auto_vacuum`` is
        ``INCREMENTAL``, as new catalogs are made); else a note that they stay, and are reused."""
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        if not free:
            return None
        if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2:
            # run whole: sqlite3's execute steps it once, giving back one page
            cast(sqlite3.Connection, conn).executescript("PRAGMA incremental_vacuum")
            return None
        return (
            f"{free} free pages stay in the catalog's file and are reused by new rows (its auto_vacuum is not "
            "INCREMENTAL: made by an earlier olbridge); at a quiet time, "
            "'PRAGMA auto_vacuum = INCREMENTAL; VACUUM' in sqlite3 shrinks it and has each pass give them back"
        )

    def maintenance(self, conn: Connection, *, wal_limit: int, every: float) -> Maintenance | None:
        if self.in_memory:
            return None
        # checkpoints (WAL pages copied into the database) run beside the commits rather than
        # inside whichever commit crosses the WAL's size
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {int(wal_limit)}")
        return WalCheckpoints(self.path, wal_limit=wal_limit, every=every)

    def durability(self, conn: Connection, level: str) -> None:
        conn.execute(f"PRAGMA synchronous = {'FULL' if level == 'full' else 'NORMAL'}")

    def legacy_version(self, connection: Any) -> int:
        return int(connection.exec_driver_sql("PRAGMA user_version").scalar() or 0)


WAL_LOOK = 0.1  # s between two looks at the WAL's size


class WalCheckpoints(Maintenance):
    """The write-ahead log checkpointed beside a writer's commits, on a connection of its own: a
    PASSIVE checkpoint every ``every`` s, which never waits, and a TRUNCATE one once the WAL has
    grown past ``wal_limit`` bytes (under a sustained load the PASSIVE ones never reach the log's
    end, and it would grow without bound, and stay that size once idle)."""

    def __init__(self, path: str, *, wal_limit: int, every: float) -> None:
        self.look = min(every, WAL_LOOK)
        self._wal = Path(f"{path}-wal")
        self._limit, self._every = wal_limit, every
        # made here, used by the writer's checkpoint thread alone
        self._conn = sqlite3.connect(path, timeout=1, isolation_level=None, check_same_thread=False)
        try:
            self._conn.execute(f"PRAGMA journal_size_limit = {int(wal_limit)}")
        except BaseException:
            self._conn.close()
            raise
        self._last = time.monotonic()

    def step(self, between_commits: AbstractContextManager[Any]) -> None:
        with contextlib.suppress(sqlite3.Error):
            if _size(self._wal) > self._limit:
                # waits (its busy timeout, a second at most) for readers, holding off the next
                # commit meanwhile; still busy, it is tried again at the next look
                with between_commits:  # the writer holds no snapshot then
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                self._last = time.monotonic()
            elif time.monotonic() - self._last >= self._every:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self._last = time.monotonic()

    def close(self) -> None:
        try:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            self._conn.close()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = ["PRAGMAS", "SqliteEngine", "WalCheckpoints", "storage_error"]
