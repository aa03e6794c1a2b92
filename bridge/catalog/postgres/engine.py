"""The PostgreSQL engine: a catalog in a PostgreSQL database, shared by several processes and hosts.

The catalog is named by a ``postgresql://`` URL, handed to libpq as it is, so that every libpq
setting works: the password from ``PGPASSWORD`` or a pass file (``~/.pgpass``, ``PGPASSFILE``),
``sslmode`` and the other parameters, ``options=-csearch_path=...``, a Unix socket
(``postgresql://user@/db?host=/run/postgresql``). One parameter is olbridge's own: ``schema=NAME``
keeps the catalog's tables in that schema (made by ``olbridge init`` when missing). A password
written in the URL works too, but is never shown: messages show :attr:`location`, the URL with
``***`` for it. The driver is psycopg 3 (the ``postgres`` extra: ``pip install -e '.[postgres]'`` from a clone).

Writers run side by side, each transaction at READ COMMITTED: the rows a write reads to write them
are locked as it reads them (the shared statements' ``LOCK`` comment becomes ``FOR UPDATE``); what
cannot be locked because it does not exist yet is checked when written (a unique key, ``ON
CONFLICT``), and a transaction that loses such a race, a serialization failure or a deadlock is run
again (:meth:`Database.write`). The shared statements (SQLite's dialect) are translated once each,
on this engine's cursors: ``?`` becomes ``%s``, and :data:`FRAGMENTS` and :data:`STATEMENTS` say
what PostgreSQL says otherwise.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlencode

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo, timeout_from_conninfo

from bridge.catalog import sql as shared
from bridge.catalog.engine import (
    Busy,
    Conflict,
    Connection,
    Cursor,
    Database,
    Engine,
    Expiring,
    Maintenance,
    Writes,
    masked,
    url_password,
)
from bridge.catalog.postgres import partitions
from bridge.catalog.postgres.cursor import COPY_FROM, SharedCursor, copy_form_of
from bridge.errors import BadValueError, CatalogError

SCHEMA_LOCK = 0x6F6C6272_69646765  # pg_advisory_lock key while a process makes or upgrades the schema
ADOPTION_LOCK = 0x6F6C6272_61646F70  # pg_advisory_xact_lock key of a placeholder's takeover (adopt.py)
# libpq settings a catalog URL gets unless it gives its own. A connection to a server that went
# silent (a host gone, a network that drops packets) fails within about a minute instead of
# waiting for the system's TCP timeouts (hours for an idle one): TCP keepalives after 30 s idle
# (3 probes 10 s apart) find it while a statement waits for its answer, and a write left
# unacknowledged for 60 s ends it. Ignored on a Unix socket.
DEFAULTS = {
    "connect_timeout": "10",
    "application_name": "olbridge",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}

# SQLSTATE classes and codes that say the server, the connection, the password or the privileges
# are in the way, never a fault in olbridge's SQL (https://www.postgresql.org/docs/current/errcodes-appendix.html)
_STORAGE_CLASSES = {
    "08": "the connection failed",
    "28": "the server refused the login",
    "3D": "the database does not exist",
    "53": "the server is out of resources",
    "57": "the server is shutting down or cannot take connections",
    "58": "the server's disk or files failed",
}
_STORAGE_CODES = {
    "42501": "permission denied",
    "25006": "it is read-only (a standby?)",
    "3F000": "the schema does not exist",
    "55P03": "a lock could not be taken in time; try again",
    # a statement cancelled by its statement_timeout (the URL's, the role's or the database's)
    # or by an operator: not the server going away
    "57014": "a statement was cancelled, past a statement_timeout (the catalog URL's statement_timeout=, or one "
    "the role or the database sets) or by an operator",
    # a table or column of the catalog's schema missing: changed by hand (or by another program)
    "42P01": "it is damaged: a table of the catalog is missing",
    "42703": "it is damaged: a column of the catalog is missing",
}
_CONFLICT_CODES = {"40001", "40P01", "23505"}  # serialization failure, deadlock, a key taken meanwhile
# what passes: the connection lost (08), too many connections and the like (53), a shutdown, a
# statement cancelled by a timeout or an operator (57), and these codes: a database that is
# read-only (a standby after a failover), a lock not taken within lock_timeout, a serialization
# failure or a deadlock that a read (outside Database.write's retries) met
_BUSY_CLASSES = {"08", "53", "57"}
_BUSY_CODES = {"25006", "55P03", "40001", "40P01"}
# a connection that answered one of these is given up for a new one: a session opened while the
# database was read-only stays read-only after the database is writable again
_STALE_CODES = {"25006"}

# olbridge's own URL parameters, the waits it bounds on its connections (PostgreSQL's settings of
# the same names), and their defaults: a lock another client holds makes a write fail as busy
# (retried, or answered 503) after lock_timeout rather than wait on, below the receivers' 30 s
# deadline; a statement runs at most statement_timeout. `olbridge migrate` waits for what it needs.
TIMEOUTS = {"lock_timeout": "5s", "statement_timeout": "60s"}
# The server's JIT compiles a statement whose estimated cost passes jit_above_cost (100,000 by
# default), whatever it will really take. The catalog's statements are index lookups and walks whose
# estimates can be far above what they read: the health watch's count of the assets at risk below
# 400 assets (a recursive walk estimated at millions of rows) read 1,600 rows in 14 ms and spent
# 160 ms compiling itself, every call. Off on the connections that read and write the catalog
# (not the migrations' or the readiness probe's); a URL whose ``options`` set ``jit`` keeps its own.
NO_JIT = "-c jit=off"
_SETS_JIT = re.compile(r"(?:^|\s)(?:-c\s*|--)jit\s*=", re.IGNORECASE)  # -c jit=, -cjit=, --jit= (any case)
_DURATION = re.compile(r"(0|[1-9][0-9]*)(ms|s|min|h)?")
_MILLISECONDS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000}
INT_MAX = 2**31 - 1  # the most milliseconds a PostgreSQL timeout setting holds (about 24.8 days)

# libpq's settings of a few words, which it checks (as written: in this case) before it connects:
# a value of none of them was "cannot connect to the server", no connection tried
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "sslcertmode": ("disable", "allow", "require"),
    "sslnegotiation": ("postgres", "direct"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
}
# libpq's whole-number settings (a C int: spaces around it and a sign allowed, as strtol reads one)
_INTEGERS = ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout")
_INTEGER = re.compile(r"\s*[+-]?([0-9]+)\s*")


def _integer(value: str) -> int | None:
    """A libpq whole number's value, None for text it refuses (not one, or past a C int)."""
    found = _INTEGER.fullmatch(value)
    if found is None or len(found[1].lstrip("0")) > 10:
        return None
    number = int(value)
    return number if -(2**31) <= number <= INT_MAX else None


def conninfo_problem(params: dict[str, str]) -> str | None:
    """What libpq would refuse in a connection's parameters (as :func:`conninfo_to_dict` reads
    them from a URL) before it connects, said as what is wrong: a word of none of a setting's
    values, a number that is none, a port out of range, more ports than hosts; None when it
    would refuse none of these."""
    for key, values in _CHOICES.items():
        if key in params and params[key] not in values:
            return f"{key}={params[key]!r} is none of {', '.join(values)}"
    for key in _INTEGERS:
        if key in params and _integer(params[key]) is None:
            return f"{key}={params[key]!r} is not a whole number"
    if params.get("port"):
        ports = params["port"].split(",")
        for port in filter(None, ports):  # (an empty one: the default, 5432)
            number = _integer(port)
            if number is None:
                return f"the port {port!r} is not a whole number"
            if not 1 <= number <= 65535:
                return f"the port {port!r} is out of range (1 to 65535)"
        hosts = len((params.get("host") or params.get("hostaddr") or "").split(","))
        if len(ports) > 1 and len(ports) != hosts:
            return f"{len(ports)} ports for {hosts} host(s): give one port for all, or one for each host"
    return None


def repeated_parameter(url: str) -> str | None:
    """The first parameter a URL's query gives more than once (libpq, as olbridge did, would
    take the last without a word), None when each is given once."""
    seen: set[str] = set()
    for key, _ in parse_qsl(url.partition("?")[2], keep_blank_values=True):
        if key in seen:
            return key
        seen.add(key)
    return None


def split_url(url: str) -> tuple[str, str | None]:
    """The URL for libpq, and the schema its ``schema`` parameter names (taken out: libpq refuses
    parameters it does not know)."""
    base, question, query = url.partition("?")
    if not question:
        return url, None
    pairs = parse_qsl(query, keep_blank_values=True)
    schema = [value for key, value in pairs if key == "schema"]
    if not schema:
        return url, None
    rest = [(key, value) for key, value in pairs if key != "schema"]
    if not schema[-1]:
        raise BadValueError(f"catalog {masked(url)}: the schema parameter is empty")
    return (base + ("?" + urlencode(rest) if rest else "")), schema[-1]


def timeouts(url: str) -> tuple[str, dict[str, str]]:
    """The URL without olbridge's own timeout parameters (:data:`TIMEOUTS`), and the settings they
    give, the defaults for those not given. A value is a PostgreSQL duration: a whole number of
    milliseconds, or followed by ``ms``, ``s``, ``min`` or ``h`` (``0``: no limit), of at most
    :data:`INT_MAX` milliseconds (a BadValueError: no duration, or one too long)."""
    base, question, query = url.partition("?")
    given = parse_qsl(query, keep_blank_values=True) if question else []
    settings = dict(TIMEOUTS)
    for key, value in given:
        if key in TIMEOUTS:
            found = _DURATION.fullmatch(value)
            if found is None:
                raise BadValueError(
                    f"catalog {masked(url)}: {key}={value!r} is not a duration (a whole number and "
                    "ms, s, min or h, say 5s; 0 for no limit)"
                )
            number, unit = found[1], found[2] or "ms"
            if len(number) > 10 or int(number) * _MILLISECONDS[unit] > INT_MAX:
                raise BadValueError(
                    f"catalog {masked(url)}: {key}={value!r} is longer than PostgreSQL takes: at most "
                    f"{INT_MAX}ms (about 24 days; 0 for no limit)"
                )
            settings[key] = value
    rest = [(key, value) for key, value in given if key not in TIMEOUTS]
    return (base + ("?" + urlencode(rest) if rest else "")) if len(rest) != len(given) else url, settings


def storage_error(exc: BaseException, where: str) -> CatalogError | None:
    """The CatalogError that a psycopg error about the server, the connection, the login or the
    privileges stands for, naming the catalog (``where``, its password masked); None for any other."""
    if not isinstance(exc, psycopg.Error):
        return None
    state = exc.sqlstate or ""
    reason = _STORAGE_CODES.get(state) or _STORAGE_CLASSES.get(state[:2])
    if reason is None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not state:
        reason = (
            "cannot connect to the server" if isinstance(exc, psycopg.OperationalError) else "the connection failed"
        )
    if reason is None:
        return None
    return CatalogError(f"catalog {where}: {reason} (PostgreSQL: {_one_line(str(exc))})")


def _one_line(text: str) -> str:
    return " ".join(text.split())


# a relation of the catalog's schema that holds rows or names them (a table, a partitioned one, a
# view, a materialized view, a foreign table), as information_schema.tables lists them
_IN_SCHEMA = (
    "c.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = current_schema()) "
    "AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
)


class PostgresEngine(Engine):
    name: ClassVar[str] = "postgresql"
    concurrent_writers: ClassVar[bool] = True
    outbox_hold: ClassVar[Literal["lease", "claims"]] = "claims"
    row_id: ClassVar[str] = "ctid"
    # the receiver's gathering (Engine.gather), 2 ms: `benchmarks/scale.py --parts receivers`, two
    # rounds each, back to back, before / after: single events 1,546 / 1,421 -> 1,463 / 1,862 a
    # second with one serve process, 1,213 / 1,345 -> 2,169 / 2,323 with two, batches within the
    # noise; on SQLite (which gathers nothing) single events fell from 4,933 / 4,974 to 3,771 /
    # 3,383, batches from 15,744 / 17,327 to 13,483 / 13,229 (docs/benchmarks.md)
    gather: ClassVar[float] = 0.002
    keeps_plans: ClassVar[bool] = True
    # a shared database is upgraded once, on purpose (`olbridge migrate`), not by whichever replica
    # of a rolling upgrade starts first
    upgrades_on_open: ClassVar[bool] = False

    def __init__(self, url: str) -> None:
        self._location = masked(url)
        self._password = url_password(url)
        twice = repeated_parameter(url)
        if twice is not None:
            raise BadValueError(
                f"catalog {self._location}: the parameter {twice!r} is given more than once; give it once"
            )
        url, self.timeouts = timeouts(url)
        self.url, self.schema = split_url(url)
        given = dict(parse_qsl(self.url.partition("?")[2]))
        self._settings = {key: value for key, value in DEFAULTS.items() if key not in given}
        # the timeouts go with the connection's startup (libpq's options: no round trip of their
        # own), after whatever options the URL gives; and JIT off unless those set it (NO_JIT)
        own = given.get("options", "")
        waits = " ".join(f"-c {key}={value}" for key, value in self.timeouts.items())
        self._options = " ".join(part for part in (own, waits, "" if _SETS_JIT.search(own) else NO_JIT) if part)
        self._check_url(url)

    def _check_url(self, url: str) -> None:
        """A BadValueError for a URL libpq cannot read (an unknown parameter, a bad escape, an
        unclosed ``[``), whose ``connect_timeout`` is not a number, or that holds a value libpq
        refuses before it connects (:func:`conninfo_problem`), before any connection."""
        try:
            params = conninfo_to_dict(self.url)
            timeout_from_conninfo(params)
        except psycopg.ProgrammingError as exc:
            reason = self._scrub(_one_line(str(exc)).replace(url, self._location).replace(self.url, self._location))
            raise BadValueError(f"catalog {self._location}: not a PostgreSQL URL libpq can read: {reason}") from None
        problem = conninfo_problem({key: str(value) for key, value in params.items()})
        if problem is not None:
            reason = self._scrub(problem)
            raise BadValueError(f"catalog {self._location}: not a PostgreSQL URL libpq can read: {reason}")

    @property
    def location(self) -> str:
        return self._location

    def _scrub(self, text: str) -> str:
        """A message with the URL's password, should it be in it, masked."""
        return text.replace(self._password, "***") if self._password else text

    def _raw_connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        try:
            settings = {
                **self._settings,
                **{k: str(v) for k, v in kwargs.items() if k in ("connect_timeout", "options")},
            }
            options = {k: v for k, v in kwargs.items() if k not in ("connect_timeout", "options")}
            conn = psycopg.connect(make_conninfo(self.url, **settings), autocommit=True, **options)
        except psycopg.Error as exc:
            if self._password and self._password in str(exc):  # the driver does not say it: to be sure
                raise type(exc)(self._scrub(str(exc))) from None
            raise
        if self.schema is not None:
            conn.execute(f"SET search_path TO {quoted(self.schema)}")
        return conn

    def connect(self) -> Connection:
        conn: Connection = self._raw_connect(cursor_factory=SharedCursor, options=self._options)
        return conn

    def unreadable(self) -> str | None:
        try:
            with self._raw_connect(connect_timeout=2) as conn:
                conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except psycopg.Error as exc:
            return f"the catalog cannot be read: {self._scrub(_one_line(str(exc)))}"
        return None

    def begin(self) -> str:
        return "BEGIN"

    def begin_snapshot(self) -> str:
        return "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def broken(self, conn: Connection) -> bool:
        return isinstance(conn, psycopg.Connection) and (conn.broken or conn.closed)

    def storage_error(self, exc: BaseException) -> CatalogError | None:
        found = storage_error(exc, self._location)
        return CatalogError(self._scrub(str(found))) if found is not None else None

    def busy(self, exc: BaseException) -> bool:
        if isinstance(exc, Busy):
            return True
        if not isinstance(exc, psycopg.Error):
            return False
        state = exc.sqlstate or ""
        if not state:  # the client's own: the connection failed or was lost
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return state[:2] in _BUSY_CLASSES or state in _BUSY_CODES

    def stale(self, exc: BaseException) -> bool:
        if not isinstance(exc, psycopg.Error):
            return False
        # read-only, or the driver's own trouble with the connection's state (a pipeline it
        # cannot end): a new connection, not this one, for the next transaction
        return exc.sqlstate in _STALE_CODES or (not exc.sqlstate and isinstance(exc, psycopg.OperationalError))

    def lost(self, exc: BaseException) -> bool:
        # no answer (the socket closed), a connection exception (08), or the server ending the
        # session as it shut down or crashed (57P01-57P03): what was sent last may have been done
        if not isinstance(exc, psycopg.OperationalError):
            return False
        state = exc.sqlstate or ""
        return not state or state.startswith("08") or state in ("57P01", "57P02", "57P03")

    def reason(self, exc: BaseException) -> str | None:
        if not isinstance(exc, psycopg.Error):
            return None
        state = exc.sqlstate or ""
        if state in ("55P03", "57014"):
            return "a lock or a statement took longer than its limit (lock_timeout, statement_timeout)"
        if state in ("40001", "40P01"):
            return "a transaction lost a race with another"
        found = _STORAGE_CODES.get(state) or _STORAGE_CLASSES.get(state[:2])
        if found is None and not state and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            found = "the connection failed"
        return found

    def conflict(self, exc: BaseException) -> bool:
        return super().conflict(exc) or (isinstance(exc, psycopg.Error) and exc.sqlstate in _CONFLICT_CODES)

    def driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)  # the server's word (a migration's statement refused, say)

    def refused(self, exc: BaseException) -> bool:
        # a constraint, a value PostgreSQL cannot hold, or a key past an index's limit (class 54:
        # a btree entry holds at most about 2,700 bytes): that input cannot be kept, the others can
        if not isinstance(exc, psycopg.Error) or self.conflict(exc):
            return False
        return isinstance(exc, psycopg.IntegrityError | psycopg.DataError) or (exc.sqlstate or "").startswith("54")

    def refusal(self, exc: BaseException) -> str:
        if isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("54"):
            return "a name or value in it is longer than the catalog's indexes keep (about 2,700 bytes an entry)"
        return super().refusal(exc)

    def maintenance(self, conn: Connection, *, wal_limit: int, every: float) -> Maintenance | None:
        # the server keeps its own log; a writer makes the days ahead's partitions now and then
        return partitions.DayPartitions(self)

    def prepare_partitions(self, db: Database, now: float) -> list[str]:
        return partitions.ensure(db, now)

    def drop_expired_partitions(self, db: Database, table: str, cutoff: str, going: Expiring) -> int:
        return partitions.drop_expired(db, cutoff, going, partitions.BY_NAME[table])

    # --- the schema ----------------------------------------------------------------------------

    def version(self, conn: Connection | Cursor) -> int | None:
        # the catalog's tables by pg_class, which every role reads (information_schema shows a role
        # only the tables it has privileges on: to one with none, a catalog looked absent)
        found = conn.execute(
            f"SELECT c.relname FROM pg_class c WHERE {_IN_SCHEMA} AND c.relname IN ('alembic_version', 'assets')"
        ).fetchall()
        names = {name for (name,) in found}
        if "alembic_version" in names:  # a role without privileges on it: permission denied, said as such
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            if row is not None and str(row[0]).isdigit():
                return int(row[0])
        if not names and not conn.execute(f"SELECT count(*) FROM pg_class c WHERE {_IN_SCHEMA}").fetchone()[0]:
            return None
        raise CatalogError(
            f"{self._location} holds tables but not an olbridge catalog; give an empty database "
            "(or another schema: ?schema=NAME)"
        )

    def search_indexed(self, conn: Connection | Cursor) -> bool:
        # pg_trgm's index, made when the extension could be had (migration 0019)
        query = "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'assets_trgm'"
        return conn.execute(query).fetchone() is not None

    def tables(self, conn: Connection | Cursor) -> list[str]:
        query = (
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE' AND table_name NOT IN "  # a partition is its table's
            "(SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            'WHERE c.relnamespace = current_schema()::regnamespace) ORDER BY table_name COLLATE "C"'
        )
        return [str(name) for (name,) in conn.execute(query)]

    def read_all(self, cur: Cursor, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        # one round trip: the reads go out in a pipeline, each on a cursor of its own
        conn: Any = cur.connection  # type: ignore[attr-defined]
        cursors = [conn.cursor() for _ in queries]
        with conn.pipeline():
            for each, (query, params) in zip(cursors, queries, strict=True):
                each.execute(query, params)
        return [each.fetchall() for each in cursors]

    def write_all(self, cur: Cursor, writes: Writes, *, new: Writes = ()) -> None:
        # one round trip, the new rows first and their counts checked once it is synced (a short
        # one is a Conflict: the transaction, these writes with it, runs again); rows that go in
        # by COPY, which has no place in a pipeline, go first each in its own
        conn: Any = cur.connection  # type: ignore[attr-defined]
        assert isinstance(cur, SharedCursor)
        if any(len(rows) >= COPY_FROM and copy_form_of(statement) is not None for statement, rows in new):
            for statement, rows in new:  # each in its turn, in order
                if rows:
                    self.write_new(cur, statement, rows)
            new = ()
        counted: list[tuple[int, list[psycopg.Cursor[Any]]]] = []
        with conn.pipeline():
            for statement, rows in new:
                if rows:
                    counted.append((len(rows), cur.send_many(statement, rows)))
            for statement, rows in writes:
                if rows:
                    self.write_many(cur, statement, rows)
        for expected, cursors in counted:
            if sum(max(each.rowcount, 0) for each in cursors) != expected:
                raise Conflict("another process wrote some of these rows meanwhile")

    def write_many(self, cur: Cursor, statement: str, rows: Sequence[Sequence[Any]]) -> int:
        assert isinstance(cur, SharedCursor)
        return cur.write_many(statement, rows)

    def write_new(self, cur: Cursor, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        copy = copy_form_of(statement)
        if copy is None or len(rows) < COPY_FROM:
            super().write_new(cur, statement, rows)  # an INSERT, its count checked
            return
        assert isinstance(cur, SharedCursor)
        cur.copy_rows(copy, rows)

    def reset_keys(self, cur: Cursor) -> None:
        for table, column in shared.COUNTED_KEYS.items():
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), coalesce(max({column}), 0) + 1, false) "
                f"FROM {table}"
            )

    def adoption_lock(self, *, exclusive: bool) -> str | None:
        return f"SELECT pg_advisory_xact_lock{'' if exclusive else '_shared'}({ADOPTION_LOCK})"

    def lock_schema(self, cur: Cursor) -> None:
        cur.execute(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
        if self.schema is not None:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted(self.schema)}")

    def stamp(self, cur: Cursor, version: int) -> None:
        cur.execute("UPDATE alembic_version SET version_num = ?", (f"{int(version):04d}",))

    def sqlalchemy_engine(self) -> Any:
        import sqlalchemy
        from sqlalchemy.pool import NullPool

        def connect() -> psycopg.Connection[Any]:
            # SQLAlchemy begins and ends the transactions (the catalog's own connections leave
            # that to statements): each migration lands whole or not at all, and one stopped on
            # the way (a statement timeout, a signal) leaves the catalog as the one before left it
            conn = self._raw_connect()
            conn.autocommit = False
            return conn

        return sqlalchemy.create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)

    def lock_schema_for_upgrade(self, connection: Any) -> None:
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({SCHEMA_LOCK})")
        connection.commit()

    # --- the receiver's writers ----------------------------------------------------------------

    def durability(self, conn: Connection, level: str) -> None:
        """``full``: a commit returns once on disk (``synchronous_commit`` on); ``normal``: once in
        the server's memory (a crash of the server can lose the last ones, never corrupt any)."""
        conn.execute(f"SET synchronous_commit TO {'on' if level == 'full' else 'off'}")


class _QuietPipelines(logging.Filter):
    """psycopg logs a warning each time a pipeline on a lost or failed connection cannot be ended;
    the error itself is what olbridge reports (once, as the catalog being unavailable)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_QuietPipelines())


def quoted(identifier: str) -> str:
    """An SQL identifier, quoted (any text: a double quote is doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


__all__ = [
    "TIMEOUTS",
    "PostgresEngine",
    "quoted",
    "split_url",
    "storage_error",
    "timeouts",
]
