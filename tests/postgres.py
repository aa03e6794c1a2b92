"""A real PostgreSQL server for the tests and the benchmarks, in a temporary directory.

    with PostgresServer.start() as server:
        name = server.create_database()     # a new, empty database, cheap (a copy of a template)
        url = server.url(name)              # postgresql://olbridge@127.0.0.1:PORT/NAME

The server is the system's (Debian's ``postgresql-NN`` package: ``pg_config --bindir`` or
``/usr/lib/postgresql/*/bin``), or else the one the ``pgserver`` package ships (PyPI wheels with
the server's binaries), so that a machine with only Python runs the tests too;
``OLBRIDGE_PG_BINDIR`` names a directory of ``initdb`` and ``postgres`` to use instead.

initdb and postgres refuse to run as root: run as root, the server runs as the system's
``postgres`` user (else ``nobody``), its directory handed to that user. It listens on 127.0.0.1 at
a free port and on a Unix socket in its directory. Every role connects without a password
(``trust``) except :data:`PASSWORD_ROLE`, which needs :attr:`PostgresServer.password`
(SCRAM), for the tests of password handling. Unless ``durable=True`` the server does not sync
(``fsync``, ``synchronous_commit`` and ``full_page_writes`` off): a crash of the machine loses a
test database, which nobody misses.

The server is stopped (fast shutdown, then immediate, then SIGKILL) and its directory removed when
the ``with`` block ends, whatever ended it; should the test process itself die, the kernel sends
the server SIGQUIT (its parent-death signal), so no server outlives the tests that started it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql

from tests.backend import free_port

SUPERUSER = "olbridge"  # initdb's bootstrap superuser: trust, no password
PASSWORD_ROLE = "olbridge_pw"  # LOGIN CREATEDB, password (SCRAM) on every connection
SERVER_USER = ("postgres", "nobody")  # who runs the server when the tests run as root, first found
PIP_PACKAGE = "pgserver"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

# for tests: no sync, no waiting for a sync (a test database is not worth a power loss)
FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the server would not start."""


def _has_server(bindir: Path) -> bool:
    return (bindir / "initdb").is_file() and (bindir / "postgres").is_file()


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", Path(path).parent.name))


def system_bindir() -> Path | None:
    """The system's server binaries: ``pg_config --bindir``, else the newest
    ``/usr/lib/postgresql/*/bin``, else ``initdb`` on the PATH."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            bindir = Path(found.stdout.strip())
            if _has_server(bindir):
                return bindir
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        if _has_server(Path(candidate)):
            return Path(candidate)
    initdb = shutil.which("initdb")
    if initdb and _has_server(Path(initdb).resolve().parent):
        return Path(initdb).resolve().parent
    return None


def pip_bindir() -> Path | None:
    """The binaries of the ``pgserver`` package, where it is installed (found without importing
    it: its import starts nothing, but it needs packages of its own)."""
    import importlib.util

    spec = importlib.util.find_spec(PIP_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        bindir = Path(location) / "pginstall" / "bin"
        if _has_server(bindir):
            return bindir
    return None


def find_bindir() -> Path:
    """Where ``initdb`` and ``postgres`` are: ``$OLBRIDGE_PG_BINDIR``, the system's, the pip package's."""
    given = os.environ.get("OLBRIDGE_PG_BINDIR")
    if given:
        if not _has_server(Path(given)):
            raise PostgresUnavailable(f"OLBRIDGE_PG_BINDIR={given} holds no initdb and postgres")
        return Path(given)
    found = system_bindir() or pip_bindir()
    if found is None:
        raise PostgresUnavailable(
            "no PostgreSQL server here: install the system's (Debian: apt-get install postgresql) "
            f"or the pip package ({PIP_PACKAGE}, in requirements-dev.txt)"
        )
    return found


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for the child, between fork and exec: have the kernel send it SIGQUIT (a
    PostgreSQL server's immediate shutdown) should its parent die. Linux only; bound here, before
    the fork, so that the child only makes one C call."""
    name = ctypes.util.find_library("c")
    if not name or os.uname().sysname != "Linux":
        return None
    prctl = ctypes.CDLL(name, use_errno=True).prctl
    pr_set_pdeathsig, sigquit = 1, int(signal.SIGQUIT)

    def arm() -> None:
        prctl(pr_set_pdeathsig, sigquit, 0, 0, 0)

    return arm


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc): a server's backends and workers."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = Path(stat).read_text()
            # pid (comm) state ppid ...; comm may hold spaces and parentheses
            if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(text.split(" ", 1)[0]))
    return found


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


class PostgresServer:
    """One PostgreSQL server in a temporary directory; :meth:`start` starts one, :meth:`stop` (or
    the end of its ``with`` block) stops it and removes the directory."""

    def __init__(self, bindir: Path, directory: Path, run_as: pwd.struct_passwd | None) -> None:
        self.bindir = bindir
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.socket_dir = directory
        self.run_as = run_as
        self.host = "127.0.0.1"
        self.port = 0
        self.user = SUPERUSER
        self.password_role = PASSWORD_ROLE
        self.password = "pw-" + secrets.token_urlsafe(12)  # pw- : never taken for an option
        self.version = 0  # the server's major version
        self.process: subprocess.Popen[bytes] | None = None
        self.options: dict[str, str] = {}  # the settings it was started with, again on resume
        self.start_seconds = 0.0  # initdb to ready
        self._names = itertools.count(1)

    # --- life cycle ----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        *,
        bindir: Path | None = None,
        durable: bool = False,
        settings: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> PostgresServer:
        """A new server, initialized and ready for connections. ``settings`` are passed to the
        server (``-c name=value``), after the defaults; ``user`` is the system user that runs it
        when the tests run as root (default: the first of :data:`SERVER_USER` that exists)."""
        began = time.perf_counter()
        bindir = bindir or find_bindir()
        run_as = _server_user(user) if os.geteuid() == 0 else None
        directory = Path(tempfile.mkdtemp(prefix="olbridge-pg-"))
        server = cls(bindir, directory, run_as)
        try:
            server._init()
            server.options = {} if durable else dict(FAST)
            server.options.update(settings or {})
            for attempt in range(3):  # a free port can be taken between the look and the bind
                server.port = free_port()
                if server._launch(server.options, last=attempt == 2):
                    break
            server._setup_roles()
        except BaseException:
            server.stop()
            raise
        server.start_seconds = time.perf_counter() - began
        return server

    def _run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(a) for a in args], capture_output=True, text=True, timeout=120, **self._as_server_user()
        )
        if done.returncode != 0:
            raise PostgresUnavailable(f"{Path(str(args[0])).name} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def _as_server_user(self) -> dict[str, Any]:
        """Popen's arguments that run a program as the server's user, with a clean environment
        (no PG* variables of the caller's)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        if self.run_as is None:
            return {"env": env}
        env["HOME"] = str(self.directory)
        return {"env": env, "user": self.run_as.pw_uid, "group": self.run_as.pw_gid, "extra_groups": []}

    def _init(self) -> None:
        if self.run_as is not None:
            os.chown(self.directory, self.run_as.pw_uid, self.run_as.pw_gid)
            self.bindir = self._reachable_bindir()
        found = self._run(self.bindir / "postgres", "--version").stdout
        major = re.search(r"\(PostgreSQL\)\s+(\d+)", found)
        if major is None:
            raise PostgresUnavailable(f"not a PostgreSQL server: {found.strip()}")
        self.version = int(major.group(1))
        self._run(
            self.bindir / "initdb",
            "-D",
            self.data,
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        (self.data / "pg_hba.conf").write_text(
            "# TYPE  DATABASE  USER  ADDRESS  METHOD\n"
            f"local   all  {PASSWORD_ROLE}                scram-sha-256\n"
            f"host    all  {PASSWORD_ROLE}  127.0.0.1/32  scram-sha-256\n"
            "local   all  all                     trust\n"
            "host    all  all           127.0.0.1/32  trust\n"
        )

    def _reachable_bindir(self) -> Path:
        """The binaries, where the server's user can run them: a pip package in a virtual
        environment under a folder only root may enter is copied into the server's directory."""
        with contextlib.suppress(PermissionError):
            probe = subprocess.run(
                [str(self.bindir / "postgres"), "--version"], capture_output=True, timeout=60, **self._as_server_user()
            )
            if probe.returncode == 0:
                return self.bindir
        install = self.directory / "install"
        home = self.bindir.parent  # the installation: bin, lib, share
        package = home.parent  # .../site-packages/pgserver
        shutil.copytree(home, install / package.name / home.name, symlinks=True)
        libs = package.parent / f"{package.name}.libs"  # the wheel's libraries, which the RPATH finds
        if libs.is_dir():
            shutil.copytree(libs, install / libs.name, symlinks=True)
        assert self.run_as is not None
        for path in [install, *install.rglob("*")]:
            os.chown(path, self.run_as.pw_uid, self.run_as.pw_gid, follow_symlinks=False)
        return install / package.name / home.name / "bin"

    def _launch(self, options: Mapping[str, str], *, last: bool) -> bool:
        """Start the server on :attr:`port`; False when the port was taken (try another)."""
        settings = {
            "listen_addresses": self.host,
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "logging_collector": "off",
            "max_parallel_workers_per_gather": "0",
            **options,
        }
        args = [str(self.bindir / "postgres"), "-D", str(self.data)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        logged = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_parent_death_signal(),  # one C call, bound before the fork
                **self._as_server_user(),
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                with open(self.log, "rb") as log:
                    log.seek(logged)
                    said = log.read().decode(errors="replace")
                if "could not bind" in said and not last:
                    return False
                raise PostgresUnavailable(f"the PostgreSQL server exited:\n{said[-3000:]}")
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=5):
                    return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        raise PostgresUnavailable(f"the PostgreSQL server was not ready within {START_TIMEOUT:g} s")

    def _setup_roles(self) -> None:
        with self.connect() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN CREATEDB PASSWORD {}").format(
                    sql.Identifier(PASSWORD_ROLE), sql.Literal(self.password)
                )
            )

    @property
    def pid(self) -> int | None:
        """The server's (postmaster's) process id while it runs."""
        return self.process.pid if self.process is not None else None

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and remove its directory."""
        self.halt()
        shutil.rmtree(self.directory, ignore_errors=True)

    def halt(self, *, crash: bool = False) -> None:
        """Take the server away and keep its data, as a restart or a crash of the database does:
        a fast shutdown (open sessions ended, what was committed written out), or with ``crash``
        an immediate one (every server process gone at once, nothing written out: the next start
        recovers from the WAL). :meth:`resume` starts it again."""
        process, self.process = self.process, None
        if process is None:
            return
        steps = ((signal.SIGINT, STOP_TIMEOUT), (signal.SIGQUIT, 10.0), (signal.SIGKILL, 10.0))
        for sig, wait in steps[1:] if crash else steps:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue

    def resume(self) -> None:
        """Start a halted server again, on its port, with its settings (after a crash it first
        recovers from its WAL)."""
        if self.process is not None:
            raise PostgresUnavailable("the server is running: halt it first")
        deadline = time.monotonic() + START_TIMEOUT
        while not self._launch(self.options, last=time.monotonic() > deadline):
            time.sleep(0.2)  # the port is not free again yet

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- connections and databases -------------------------------------------------------------

    def dsn(self, database: str = "postgres", *, user: str | None = None, password: bool = False) -> str:
        """A libpq keyword string for psycopg.connect, over TCP."""
        parts = {"host": self.host, "port": str(self.port), "dbname": database, "user": user or self.user}
        if password:
            parts["password"] = self.password
        return " ".join(f"{key}='{value}'" for key, value in parts.items())

    def url(
        self, database: str = "postgres", *, user: str | None = None, password: bool = False, socket: bool = False
    ) -> str:
        """A ``postgresql://`` URL of a database: over TCP, or over the Unix socket
        (``socket=True``: ``postgresql://user@/db?host=DIR&port=N``). ``password=True`` puts the
        password role's password in it (``user`` defaults to that role then)."""
        user = user or (PASSWORD_ROLE if password else self.user)
        who = quote(user, safe="") + (":" + quote(self.password, safe="") if password else "")
        if socket:
            return f"postgresql://{who}@/{quote(database, safe='')}?host={quote(str(self.socket_dir))}&port={self.port}"
        return f"postgresql://{who}@{self.host}:{self.port}/{quote(database, safe='')}"

    def connect(self, database: str = "postgres", **kwargs: Any) -> psycopg.Connection[Any]:
        """A superuser connection in autocommit mode (CREATE DATABASE runs outside transactions)."""
        return psycopg.connect(self.dsn(database), autocommit=True, **kwargs)

    def create_database(self, name: str | None = None, *, template: str = "template1", owner: str | None = None) -> str:
        """A new database, a copy of ``template`` (which nobody may be connected to), owned by
        ``owner`` (default: the superuser); returns its name (``t<n>_<random>`` unless given)."""
        name = name or f"t{next(self._names)}_{secrets.token_hex(3)}"
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        if owner:
            statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        if self.version >= 15:  # a small template: copying its files beats writing it to the WAL
            statement += sql.SQL(" STRATEGY FILE_COPY")
        with self.connect() as conn:
            conn.execute(statement)
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending the sessions still connected to it."""
        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def make_template(self, name: str, prepare: Callable[[str], None]) -> str:
        """A database to copy: created, handed to ``prepare`` (its URL; e.g. to migrate it), then
        marked a template that takes no connections, so that copies of it cannot fail on a
        session left open. Returns its name, for ``create_database(template=...)``."""
        self.create_database(name)
        prepare(self.url(name))
        with self.connect() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(sql.Identifier(name))
            )
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        return name

    def databases(self) -> list[str]:
        with self.connect() as conn:
            return [
                row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY 1")
            ]


def _server_user(given: str | None) -> pwd.struct_passwd:
    for name in (given,) if given else SERVER_USER:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable(
        f"running as root and no user {given or ' or '.join(SERVER_USER)} to run the server as (useradd one)"
    )


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[PostgresServer]:
    """``with running() as server:`` a server for the block (see :meth:`PostgresServer.start`)."""
    server = PostgresServer.start(**kwargs)
    try:
        yield server
    finally:
        server.stop()
