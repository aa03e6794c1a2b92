"""The PostgreSQL server the tests start (tests/postgres.py): it starts, takes connections, gives
each test a database of its own, checks the password role's password, and leaves no process and
no directory behind, however it ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.postgres import (
    PASSWORD_ROLE,
    PostgresServer,
    PostgresUnavailable,
    alive,
    children_of,
    find_bindir,
    pip_bindir,
    running,
)

ROOT = Path(__file__).resolve().parents[1]


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def wait_gone(pids: list[int], seconds: float = 30.0) -> list[int]:
    """The pids still alive after waiting up to ``seconds`` for them to go."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def test_the_session_server_takes_connections(postgres: PostgresServer) -> None:
    assert postgres.version >= 13
    with psycopg.connect(postgres.url()) as conn:
        user, listen = conn.execute("SELECT current_user, current_setting('listen_addresses')").fetchone()  # type: ignore[misc]
    assert (user, listen) == ("olbridge", "127.0.0.1")
    assert postgres.pid is not None and alive(postgres.pid)
    if os.geteuid() == 0:  # initdb and postgres refuse root: the server runs as another user
        assert uid_of(postgres.pid) != 0


def test_over_the_unix_socket(postgres: PostgresServer) -> None:
    url = postgres.url(socket=True)
    assert "@/" in url and str(postgres.socket_dir) in url
    with psycopg.connect(url) as conn:
        # a Unix socket has no server address
        assert conn.execute("SELECT inet_server_addr()").fetchone() == (None,)


def test_each_test_gets_an_empty_database_of_its_own(postgres: PostgresServer, postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1)")
    other = postgres.create_database()
    try:
        with psycopg.connect(postgres.url(other)) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'kept'").fetchone() == (0,)
    finally:
        postgres.drop_database(other)
    assert other not in postgres.databases()


def test_databases_are_copies_of_a_template(postgres: PostgresServer) -> None:
    def prepare(url: str) -> None:
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE schema_version (n int)")
            conn.execute("INSERT INTO schema_version VALUES (7)")

    template = postgres.make_template("fixture_template", prepare)
    copies = [postgres.create_database(template=template) for _ in range(3)]
    try:
        for name in copies:
            with psycopg.connect(postgres.url(name)) as conn:
                assert conn.execute("SELECT n FROM schema_version").fetchone() == (7,)
                conn.execute("UPDATE schema_version SET n = 8")  # a copy's own, not the template's
        with psycopg.connect(postgres.url(copies[0])) as conn:
            assert conn.execute("SELECT n FROM schema_version").fetchone() == (8,)
        with pytest.raises(psycopg.OperationalError):  # the template takes no connections
            psycopg.connect(postgres.url(template))
    finally:
        for name in copies:
            postgres.drop_database(name)


def test_dropping_a_database_ends_its_sessions(postgres: PostgresServer) -> None:
    name = postgres.create_database()
    conn = psycopg.connect(postgres.url(name))
    try:
        postgres.drop_database(name)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    assert name not in postgres.databases()


def test_the_password_role_needs_its_password(postgres: PostgresServer) -> None:
    name = postgres.create_database(owner=PASSWORD_ROLE)
    try:
        with psycopg.connect(postgres.url(name, password=True)) as conn:
            conn.execute("CREATE TABLE mine (n int)")  # it owns the database
            assert conn.execute("SELECT current_user").fetchone() == (PASSWORD_ROLE,)
        with psycopg.connect(postgres.url(name, password=True, socket=True)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (PASSWORD_ROLE,)
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(postgres.url(name, user=PASSWORD_ROLE))  # no password
        wrong = postgres.url(name, password=True).replace(postgres.password, "wrong")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(wrong)
        assert postgres.password not in postgres.url(name)  # only when asked for
    finally:
        postgres.drop_database(name)


def test_a_server_stops_whole_and_leaves_no_directory() -> None:
    with pytest.raises(RuntimeError, match="a test failed"), running() as server:
        pid = server.pid
        assert pid is not None
        processes = [pid, *children_of(pid)]
        assert len(processes) > 2  # the postmaster and its checkpointer, writers, launchers
        directory = server.directory
        with psycopg.connect(server.url()) as conn:
            conn.execute("SELECT 1")
            raise RuntimeError("a test failed")
    assert wait_gone(processes, 0) == []
    assert not directory.exists()


CHILD = """
import sys, time
from tests.postgres import PostgresServer
server = PostgresServer.start()
print(server.pid, server.directory, flush=True)
time.sleep(300)
"""


def test_the_server_dies_with_the_process_that_started_it() -> None:
    """A test run killed outright (SIGKILL: no finalizer runs) takes its server with it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    pid, directory = 0, None
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()  # the server is ready
        assert line, "the child did not start its server"
        pid, directory = int(line[0]), Path(line[1])
        processes = [pid, *children_of(pid)]  # a child may come and go; the server itself must run
        assert alive(pid)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert wait_gone(processes) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def test_the_pip_package_server_for_machines_without_one() -> None:
    """The fallback where the system has no PostgreSQL (pinned in requirements-dev.txt), run the
    way a machine without a ``postgres`` user would run it."""
    bindir = pip_bindir()
    assert bindir is not None, "pgserver is not installed (pip install -r requirements-dev.txt)"
    user = "nobody" if os.geteuid() == 0 else None
    with running(bindir=bindir, user=user) as server:
        with psycopg.connect(server.url(password=True)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (PASSWORD_ROLE,)
        assert server.pid is not None
        if user is not None:
            assert uid_of(server.pid) == int(subprocess.check_output(["id", "-u", user]))


def test_binaries_named_by_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OLBRIDGE_PG_BINDIR", str(tmp_path))
    with pytest.raises(PostgresUnavailable, match="holds no initdb and postgres"):
        find_bindir()
    for name in ("initdb", "postgres"):
        (tmp_path / name).write_text("")
    assert find_bindir() == tmp_path
    monkeypatch.delenv("OLBRIDGE_PG_BINDIR")
    assert (find_bindir() / "postgres").is_file()
