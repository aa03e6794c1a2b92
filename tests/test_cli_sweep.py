"""Sweeps over the whole command tree, walked from the click group (a command added later is
swept too, and must say how it is run here): every command has ``--help``; operational failures
(a missing catalog, one that is not a catalog or cannot be written, a port in use, a host that
does not resolve, a URL nobody answers) are ``Error: ...`` with a non-zero exit and no
traceback; and every key of every JSON output is camelCase."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
import responses
from click.testing import CliRunner, Result

from bridge.catalog import Catalog
from bridge.catalog.postgres.engine import storage_error as postgres_storage_error
from bridge.cli import cli
from bridge.cli.context import operational
from bridge.demo import example_project
from tests.backend import Backend, free_port
from tests.helpers import decl, run

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")
KESTRA = Path(__file__).parent / "kestra"


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from walk(command, (*path, name))


TREE = dict(walk(cli))
LEAVES = sorted(p for p, command in TREE.items() if not isinstance(command, click.Group) and not command.hidden)
GROUPS = sorted(path for path, command in TREE.items() if isinstance(command, click.Group))
# the old names of renamed commands: hidden, they run the command they name (tests/test_cli_commands.py)
ALIASES = sorted(path for path, command in TREE.items() if command.hidden)


def label(path: tuple[str, ...]) -> str:
    return " ".join(path) or "olbridge"


@pytest.mark.parametrize("path", [(), *GROUPS, *LEAVES, *ALIASES], ids=label)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_has_help(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(cli, [*path, flag], prog_name="olbridge")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: olbridge {' '.join(path)}".rstrip())


def test_every_commands_help_whatever_the_config_holds(tmp_path: Path) -> None:
    """A command's help is shown with a config that cannot be read or holds an unknown key (it
    said the config's error instead); the command itself still refuses such a config."""
    broken = tmp_path / "olbridge.toml"
    broken.write_text("bogus = 1\n")
    for config in (broken, tmp_path / "missing.toml"):
        for path in [*GROUPS, *LEAVES]:
            result = CliRunner().invoke(cli, ["--config", str(config), *path, "--help"], prog_name="olbridge")
            assert result.exit_code == 0 and result.stdout.startswith(f"Usage: olbridge {' '.join(path)}"), (
                path,
                result.output,
            )
        result = CliRunner().invoke(cli, ["--config", str(config), "--catalog", str(tmp_path / "c.db"), "init"])
        assert result.exit_code == 1 and result.stderr.startswith("Error: "), result.output


# --- a valid run of every command, against any catalog -------------------------------------

RUN_LINE = {
    "namespace": "company.data",
    "flowId": "f",
    "taskId": "t",
    "executionId": "e1",
    "taskRunId": "r1",
    "state": "SUCCESS",
    "startDate": "2025-01-01T00:00:00Z",
    "endDate": "2025-01-01T00:01:00Z",
    "inputs": [{"id": "raw.orders"}],
    "outputs": [{"id": "mart.orders", "type": "Table", "metadata": {"env": "prod"}}],
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Inputs for the commands that read files, and a URL nobody answers."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(RUN_LINE) + "\n")
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2025-03-01T08:00:00Z",
        "producer": "https://github.com/example/producer/tree/1.0",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "0194a1b2-0000-7000-8000-000000000001"},
        "job": {"namespace": "airflow", "name": "dag.task"},
        "inputs": [{"namespace": "s3://lake", "name": "raw/orders.csv"}],
        "outputs": [],
    }
    events = tmp_path / "events.ndjson"
    events.write_text(json.dumps(event) + "\n")
    metaflow = tmp_path / "metaflow"
    (metaflow / "data" / "orders").mkdir(parents=True)
    (metaflow / "data" / "orders" / "asset_config.toml").write_text('name = "Orders"\nid = "orders"\n')
    return {
        "runs": str(runs),
        "events": str(events),
        "metaflow": str(metaflow),
        "demo": str(tmp_path / "demo"),
        "nobody": f"http://127.0.0.1:{free_port()}",  # nothing listens there: refused at once
        "copyFrom": str(tmp_path / "copy-from.db"),  # made by the test that copies it
        "copyTo": str(tmp_path / "copy-to.db"),
    }


def command_args(path: tuple[str, ...], files: dict[str, str]) -> list[str]:
    """A valid run of the command (what it would do with a good catalog and reachable servers)."""
    return command_table(files)[path]


def command_table(files: dict[str, str]) -> dict[tuple[str, ...], list[str]]:
    """A valid run of each command, by its path (:func:`command_args`)."""
    nobody = files["nobody"]
    return {
        ("assets", "adopt"): ["--dry-run"],
        ("assets", "delete"): ["mart.orders"],
        ("assets", "list"): [],
        ("assets", "purge"): ["--namespace", "company.data"],
        ("assets", "set"): ["x.y", "--type", "Table"],
        ("assets", "show"): ["mart.orders"],
        ("backfill",): ["--url", nobody, "--max-attempts", "2", "--backoff", "0"],
        ("catalog", "copy"): [files["copyFrom"], files["copyTo"]],
        ("dbt", "import"): ["--project-dir", str(example_project())],
        ("demo",): ["--in-catalog", "--dir", files["demo"]],
        ("export",): [],
        ("health",): [],
        ("import",): [files["events"]],
        ("init",): [],
        ("kestra", "declare"): [str(KESTRA / "vm_snapshot.yml")],
        ("kestra", "import"): [files["runs"]],
        ("lineage",): ["mart.orders"],
        ("migrate",): [],
        ("metaflow", "declare"): [files["metaflow"], "--project", "shop", "--branch", "main"],
        ("metaflow", "promote"): ["orders", "--project", "shop", "--from", "user.alice", "--to", "main"],
        ("outbox", "drop"): ["1"],
        ("outbox", "list"): [],
        ("outbox", "retry"): ["--all"],
        ("prefect", "import"): ["--api-url", f"{nobody}/api"],
        ("record",): ["--file", files["runs"]],
        ("retention",): ["--dry-run"],
        ("runs", "list"): [],
        ("runs", "show"): ["0194a1b2-0000-7000-8000-000000000001"],
        ("serve",): ["--port", "0", "--workers", "1"],
        ("status",): [],
        ("stream",): ["--once", "--url", nobody, "--max-attempts", "2", "--backoff", "0", "--give-up-after", "1"],
        ("ui",): ["--port", "0"],
        ("validate",): [files["events"]],
    }


# validate reads event files only; catalog copy names its two catalogs as arguments (its errors
# about them: tests/test_copy.py)
CATALOG_FREE = {("validate",), ("catalog", "copy")}
# the commands that record something: they create a catalog that does not exist (in a folder that does)
CREATES = {
    ("assets", "set"),
    ("dbt", "import"),
    ("demo",),
    ("import",),
    ("init",),
    ("kestra", "declare"),
    ("kestra", "import"),
    ("metaflow", "declare"),
    ("prefect", "import"),
    ("record",),
    ("serve",),
}
SERVE = ("serve",)


def test_every_command_is_swept(files: dict[str, str]) -> None:
    """Every command has its valid run, and every run names a command that is there (a renamed
    command leaves a row that sweeps nothing)."""
    table = command_table(files)
    assert [label(p) for p in LEAVES if p not in table] == [], "commands with no valid run in command_table"
    assert [label(p) for p in table if p not in LEAVES] == [], "runs in command_table of no command"


@pytest.fixture(autouse=True)
def no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` runs in process here: should it get as far as starting its processes, the test
    fails rather than fork pytest."""

    def fork() -> int:
        raise AssertionError("serve started its processes")

    monkeypatch.setattr(os, "fork", fork)


def olbridge(catalog: Path | str, path: tuple[str, ...], args: list[str]) -> tuple[int, str, str]:
    """Run a command in process; it must not raise (an exception is a traceback for a user)."""
    argv = ["--catalog", str(catalog), *path, *args]
    result: Result = CliRunner().invoke(cli, argv)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"olbridge {' '.join(argv)} raised {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_error(outcome: tuple[int, str, str], *expected: str) -> None:
    code, out, err = outcome
    assert code != 0, out + err
    assert "Traceback" not in out + err
    assert err.startswith("Error: ") or "\nError: " in err, err
    for text in expected:
        assert text in err


CATALOG_COMMANDS = [path for path in LEAVES if path not in CATALOG_FREE]


@pytest.mark.parametrize("path", [p for p in CATALOG_COMMANDS if p not in CREATES], ids=label)
def test_a_reader_refuses_a_catalog_that_does_not_exist(
    tmp_path: Path, files: dict[str, str], path: tuple[str, ...]
) -> None:
    missing = tmp_path / "mistyped.db"
    assert_error(olbridge(missing, path, command_args(path, files)), f"no catalog at {missing}", "olbridge init")
    assert not missing.exists()


@pytest.mark.parametrize("path", CATALOG_COMMANDS, ids=label)
def test_a_catalog_in_a_folder_that_does_not_exist(
    tmp_path: Path, files: dict[str, str], path: tuple[str, ...]
) -> None:
    missing = tmp_path / "nowhere" / "c.db"
    assert_error(olbridge(missing, path, command_args(path, files)), str(missing))
    assert not missing.parent.exists()


@pytest.mark.parametrize("path", CATALOG_COMMANDS, ids=label)
def test_a_file_that_is_not_a_catalog(tmp_path: Path, files: dict[str, str], path: tuple[str, ...]) -> None:
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("these are my notes, not a catalog\n" * 100)
    assert_error(olbridge(not_sqlite, path, command_args(path, files)), str(not_sqlite), "not a database")
    assert not_sqlite.read_text() == "these are my notes, not a catalog\n" * 100


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A catalog with a task run that this process can read and not write: mode 0444, or, for
    root (whom modes do not stop), the immutable attribute (skipped where chattr cannot)."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t", outputs=(decl("company.data.out", type="Table"),))])
    if os.geteuid() != 0:
        db.chmod(0o444)
        yield db
        return
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode:
        pytest.skip("root, and no chattr +i here: this process can write any file")
    try:
        yield db
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


# the writers, run so that they do write (and nothing else goes wrong first)
WRITES = [
    ("assets", "set"),
    ("assets", "delete"),
    ("dbt", "import"),
    ("import",),
    ("kestra", "import"),
    ("kestra", "declare"),
    ("metaflow", "declare"),
    ("record",),
    ("serve",),
]


# the commands that read files named as arguments (or by --file): a missing one, named with others
# that are there
FILE_READERS: dict[tuple[str, ...], Callable[[dict[str, str], str], list[str]]] = {
    ("import",): lambda files, gone: [files["events"], gone],
    ("validate",): lambda files, gone: [files["events"], gone],
    ("kestra", "import"): lambda files, gone: [files["runs"], gone],
    ("kestra", "declare"): lambda files, gone: [str(KESTRA / "vm_snapshot.yml"), gone],
    ("record",): lambda files, gone: ["--file", gone],
}


@pytest.mark.parametrize("path", list(FILE_READERS), ids=label)
def test_a_missing_input_file_is_said_alike_by_every_command(
    tmp_path: Path, files: dict[str, str], path: tuple[str, ...]
) -> None:
    """``Error: <file>: file not found`` and exit status 1, whichever command reads it, and nothing
    recorded (not even a new catalog): a command's own reader says it, not click's usage line."""
    catalog, gone = tmp_path / "new.db", str(tmp_path / "gone.ndjson")
    code, out, err = olbridge(catalog, path, FILE_READERS[path](files, gone))
    assert code == 1 and "Usage:" not in err, err
    assert_error((code, out, err), f"{gone}: file not found")
    assert not catalog.exists()


@pytest.mark.parametrize("path", WRITES, ids=label)
def test_a_catalog_that_cannot_be_written(read_only: Path, files: dict[str, str], path: tuple[str, ...]) -> None:
    args = ["company.data.out"] if path == ("assets", "delete") else command_args(path, files)
    assert_error(olbridge(read_only, path, args), str(read_only), "cannot be written")


def on_a_read_only_file_system(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``olbridge ARGV`` with ``folder`` mounted read-only (a bind mount in a mount namespace of
    its own: the process, root or not, can read its files and write none)."""
    script = f'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "{OLBRIDGE}" "$@"'
    command = ["unshare", "-m", "sh", "-c", script, "sh", str(folder), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Path:
    db = tmp_path / "ro" / "c.db"
    db.parent.mkdir()
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t", outputs=(decl("company.data.out", type="Table"),))])
    probe = on_a_read_only_file_system(db.parent, "--version")
    if probe.returncode != 0:
        pytest.skip(f"no read-only mount here (unshare -m, mount): {probe.stderr.strip()[:200]}")
    return db


READS_OF_A_RUN = [["runs", "list"], ["assets", "list"], ["lineage", "company.data.out"], ["status"], ["export"]]


def test_a_catalog_on_a_read_only_file_system_can_be_read(read_only_mount: Path) -> None:
    for argv in READS_OF_A_RUN:
        done = on_a_read_only_file_system(read_only_mount.parent, "--catalog", str(read_only_mount), *argv)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert "company.data" in done.stdout or argv == ["status"], argv
    done = on_a_read_only_file_system(
        read_only_mount.parent, "--catalog", str(read_only_mount), "assets", "set", "x.y", "--type", "Table"
    )
    assert done.returncode == 1 and done.stderr.startswith(f"Error: catalog {read_only_mount}: it cannot be written")
    assert "read-only" in done.stderr


def test_serve_on_a_port_in_use_says_so_from_the_command_itself(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [OLBRIDGE, "--catalog", str(db), "serve", "--port", str(port)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"serve did not stop: {exc.stderr!r}") from None
    assert_error((done.returncode, done.stdout, done.stderr), f"127.0.0.1:{port}: the address is in use")
    assert done.stderr.count("\n") == 1  # one line, from the supervisor, before any process forks
    assert not db.exists()  # no catalog made on the way (a mistyped --catalog left one behind)


def test_serve_on_an_address_it_cannot_have(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert_error(olbridge(db, SERVE, ["--port", str(port)]), f"127.0.0.1:{port}", "in use")
    # a name with characters no host name has does not resolve, and is refused before any DNS query
    assert_error(olbridge(db, SERVE, ["--host", "no such host!", "--port", "0"]), "does not resolve")
    assert_error(olbridge(db, SERVE, ["--host", "192.0.2.1", "--port", "0"]), "not one of this machine's")
    for command in (SERVE, ("ui",)):  # an empty host would be every address, unsaid
        code, _, err = olbridge(db, command, ["--host", "", "--port", "0"])
        assert code == 2 and "'--host': it is empty" in err, err


def test_the_servers_listen_on_an_ipv6_address() -> None:
    from wsgiref.simple_server import make_server

    from bridge.receiver.server import listen_on
    from bridge.web.server import server_class

    with listen_on("::1", 0) as listening:
        assert listening.family == socket.AF_INET6 and listening.getsockname()[0] == "::1"
    with make_server("::1", 0, lambda environ, start: [], server_class=server_class("::1")) as web:
        assert web.socket.family == socket.AF_INET6 and web.server_address[0] == "::1"
    assert server_class("127.0.0.1").address_family == socket.AF_INET


UNREACHABLE = {
    # export --url retries as stream and backfill do (8 attempts by default): two, at once, here
    ("export",): ["--max-attempts", "2", "--backoff", "0", "--url"],
    ("import",): ["--from-marquez"],
    ("prefect", "import"): ["--api-url"],
}


@pytest.fixture
def catalog_with_a_run(tmp_path: Path) -> Path:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t")])
    return db


@pytest.mark.parametrize("path", sorted(UNREACHABLE), ids=label)
def test_a_url_nobody_answers(catalog_with_a_run: Path, files: dict[str, str], path: tuple[str, ...]) -> None:
    url = files["nobody"] + ("/api" if path == ("prefect", "import") else "")
    assert_error(olbridge(catalog_with_a_run, path, [*UNREACHABLE[path], url]), files["nobody"])


@pytest.mark.parametrize("path", [("backfill",), ("stream",)], ids=label)
def test_delivery_to_a_url_nobody_answers(
    catalog_with_a_run: Path, files: dict[str, str], path: tuple[str, ...]
) -> None:
    assert_error(olbridge(catalog_with_a_run, path, command_args(path, files)))


ONE_RUN = [
    "--namespace",
    "n",
    "--flow-id",
    "f",
    "--task-id",
    "t",
    "--execution-id",
    "e",
    "--start",
    "2025-01-01T00:00:00Z",
]
BAD_VALUES = [
    (("export",), ["--since", "garbage"], "--since"),
    (("export",), ["--since", "2025-02-01", "--until", "2025-01-01"], "is not before"),
    (("lineage",), ["x.y", "--as-of", "tomorrow"], "--as-of"),
    (("runs", "list"), ["--own", "--external"], "--own and --external"),
    (("runs", "list"), ["--until", "noon"], "--until"),
    (("backfill",), ["--dry-run", "--since", "2025-02-01", "--until", "2025-02-01"], "is not before"),
    (("import",), ["--from-marquez", "http://127.0.0.1:1", "--since", "garbage"], "--since"),
    (("assets", "purge"), ["--namespace", "company.data", "--end-date", "soon"], "--end-date"),
    (("record",), [*ONE_RUN, "--state", "DONE"], "not a state"),
]


@pytest.mark.parametrize(
    ("path", "args", "said"), BAD_VALUES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else None
)
def test_a_bad_value_is_exit_status_2_and_changes_nothing(
    catalog_with_a_run: Path, path: tuple[str, ...], args: list[str], said: str
) -> None:
    before = catalog_with_a_run.read_bytes()
    code, _, err = olbridge(catalog_with_a_run, path, args)
    assert code == 2 and "Traceback" not in err and said in err, err
    assert catalog_with_a_run.read_bytes() == before


def test_record_takes_a_state_as_runs_list_spells_it(catalog_with_a_run: Path) -> None:
    code, _, err = olbridge(catalog_with_a_run, ("record",), [*ONE_RUN, "--state", "complete"])
    assert code == 0, err
    code, out, _ = olbridge(catalog_with_a_run, ("runs", "list"), ["--json", "--job", "f.t", "--state", "Success"])
    assert [view["taskRun"]["taskState"] for view in json.loads(out)] == ["SUCCESS"]


# --- a catalog URL that cannot be used: bad settings, another scheme, no driver installed ----

BAD_URLS = {
    "unknown parameter": ("postgresql://u@127.0.0.1:1/db?sslmod=require", 'invalid URI query parameter: "sslmod"'),
    "timeout not a number": ("postgresql://u@127.0.0.1:1/db?connect_timeout=abc", "connect_timeout"),
    "bad escape": ("postgresql://u%zz@127.0.0.1:1/db", "percent-encoded"),
    "unclosed bracket": ("postgresql://u@[::1/db", "IPv6"),
    # values libpq refuses before it connects: said as such, not "cannot connect to the server"
    "unknown sslmode": ("postgresql://u@127.0.0.1:1/db?sslmode=bogus", "sslmode='bogus' is none of disable"),
    "port out of range": ("postgresql://u@127.0.0.1:99999/db", "the port '99999' is out of range (1 to 65535)"),
}


@pytest.mark.parametrize("path", CATALOG_COMMANDS, ids=label)
@pytest.mark.parametrize("case", sorted(BAD_URLS))
def test_a_catalog_url_libpq_cannot_read(files: dict[str, str], path: tuple[str, ...], case: str) -> None:
    url, reason = BAD_URLS[case]
    code, out, err = olbridge(url, path, command_args(path, files))
    assert_error((code, out, err), "not a PostgreSQL URL libpq can read", reason)
    assert code == 2  # a bad value


@pytest.mark.parametrize("path", CATALOG_COMMANDS, ids=label)
def test_a_url_of_another_scheme_is_no_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], path: tuple[str, ...]
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)  # were it a file name, mysql:/x@y would be a folder here
    code, out, err = olbridge("mysql://x:secret@y/z", path, command_args(path, files))
    assert_error((code, out, err), "mysql://x:***@y/z", "postgresql:// URL")
    assert code == 2 and "secret" not in err
    assert list(here.iterdir()) == []


def test_catalog_copy_refuses_a_url_of_another_scheme(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["catalog", "copy", "mysql://x@y/z", str(tmp_path / "to.db")])
    assert result.exit_code == 2 and "a mysql:// URL is no catalog" in result.stderr, result.output
    assert not (tmp_path / "to.db").exists()


@pytest.fixture
def no_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg as if not installed: an import of it fails as a missing module's does (a None in
    sys.modules), and the engine that imports it is imported afresh."""
    for name in [n for n in sys.modules if n == "psycopg" or n.startswith("psycopg.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in [n for n in sys.modules if n == "bridge.catalog.postgres" or n.startswith("bridge.catalog.postgres.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.usefixtures("no_psycopg")
@pytest.mark.parametrize("path", CATALOG_COMMANDS, ids=label)
def test_a_postgresql_catalog_without_the_driver(files: dict[str, str], path: tuple[str, ...]) -> None:
    url = "postgresql://u@127.0.0.1:1/db"
    assert_error(olbridge(url, path, command_args(path, files)), "needs the driver psycopg", "pip install")


# psycopg is installed here: a finder first on sys.meta_path refuses it, as a base install would
NO_DRIVER = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "psycopg" or name.startswith("psycopg."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
from bridge.cli import main
sys.argv = ["olbridge", *sys.argv[1:]]
main()
"""


def test_the_command_without_the_driver_names_what_to_install() -> None:
    command = [sys.executable, "-c", NO_DRIVER, "--catalog", "postgresql://u@127.0.0.1:1/db", "status"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("Error: catalog postgresql://u@127.0.0.1:1/db: a PostgreSQL catalog needs")
    assert "pip install -e '.[postgres]'" in done.stderr


# --- JSON keys --------------------------------------------------------------------------------

CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*")
# values under these keys are maps whose keys the user chose, or a producer (OpenLineage facets)
USER_KEYS = {"metadata", "facets"}
# commands whose stdout is not olbridge's JSON: OpenLineage events (the spec's keys), text
NOT_JSON = {("demo",), ("export",), ("outbox", "drop"), ("outbox", "retry"), ("serve",), ("ui",)}


def keys_not_camel(value: Any, where: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not CAMEL.fullmatch(key):
                found.append(f"{where}/{key}")
            if key not in USER_KEYS:
                found += keys_not_camel(item, f"{where}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += keys_not_camel(item, f"{where}/{index}")
    return found


def test_the_key_check_finds_snake_case() -> None:
    assert keys_not_camel({"ok": [{"oldest_pending": 1}], "metadata": {"user_key": 1}, "DryRun": 0}) == [
        "/ok/0/oldest_pending",
        "/DryRun",
    ]


def test_every_json_output_has_camel_case_keys(
    tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge.adapters.metaflow.assets import parse_definition
    from tests.test_metaflow import ORDERS_CONFIG, recorder
    from tests.test_prefect import API, pipeline_events
    from tests.test_prefect import serve as prefect_answers

    db = tmp_path / "catalog.db"
    outputs: dict[tuple[str, ...], list[Any]] = {}

    def json_of(*argv: str) -> None:
        path = next(p for p in sorted(LEAVES, key=len, reverse=True) if tuple(argv[: len(p)]) == p)
        code, out, err = olbridge(db, path, list(argv[len(path) :]))
        assert code == 0, f"{argv}: {err}"
        outputs.setdefault(path, []).extend(json.loads(line) for line in [out] if out.strip())

    # metaflow promote needs an asset that a Metaflow step recorded (project ordersflow, branch
    # user.alice, into tmp_path/catalog.db)
    step = recorder(tmp_path)
    step.write(parse_definition(ORDERS_CONFIG, Path("data/orders/asset_config.toml"), "data"), "o", {"rows": 3}, None)
    step.end()

    json_of("init")
    json_of("migrate")
    json_of("record", "--file", files["runs"])
    json_of("record", "--namespace", "ops", "--flow-id", "b", "--task-id", "s", "--execution-id", "e9",
            "--start", "2025-01-02T00:00:00Z", "--output", "snapshot.vm.e9")  # fmt: skip
    json_of("assets", "set", "reports.daily", "--type", "File", "--metadata", "owner_team=x")
    json_of("assets", "list", "--json")
    json_of("assets", "show", "mart.orders")
    json_of("health", "--json")
    json_of("assets", "delete", "reports.daily")
    json_of("assets", "purge", "--id", "reports.daily", "--dry-run")
    json_of("assets", "purge", "--id", "reports.daily", "--with-usages", "--with-lineage")
    json_of("assets", "adopt", "--dry-run")
    json_of("assets", "adopt")
    json_of("lineage", "mart.orders", "--format", "json")
    json_of("dbt", "import", "--project-dir", str(example_project()))
    json_of("kestra", "import", str(KESTRA / "asset-lineage.ndjson"), "--json")
    json_of("kestra", "declare", str(KESTRA / "vm_snapshot.yml"), "--json")
    json_of("metaflow", "declare", files["metaflow"], "--project", "shop", "--branch", "main")
    json_of("metaflow", "promote", "orders", "--project", "OrdersFlow", "--from", "user.alice", "--to", "main")
    json_of("import", files["events"], "--json")
    json_of("runs", "list", "--json")
    json_of("runs", "show", "0194a1b2-0000-7000-8000-000000000001", "--json")
    json_of("validate", files["events"], "--json")
    with responses.RequestsMock() as rsps:
        prefect_answers(rsps, [pipeline_events()])
        json_of("prefect", "import", "--api-url", API, "--json")
    json_of("outbox", "list", "--json")
    json_of("status", "--json")
    json_of("backfill", "--dry-run", "--json")
    with Backend() as backend:
        json_of("backfill", "--url", backend.url, "--json")
        json_of("stream", "--once", "--url", backend.url, "--json")
    json_of("status", "--json")
    json_of("catalog", "copy", str(db), files["copyTo"], "--json")
    with monkeypatch.context() as env:
        config = tmp_path / "retention.toml"
        config.write_text('[retention]\nreceived_events = "7d"\ndead_letters = "30d"\n')
        env.setenv("OLBRIDGE_CONFIG", str(config))
        json_of("retention", "--dry-run", "--json")
        json_of("retention", "--json")

    assert sorted(outputs) == sorted(set(LEAVES) - NOT_JSON)  # every command that prints JSON, checked
    assert outputs[("assets", "show")][0]["metadata"] == {"env": "prod"}
    assert {k for k in outputs[("status",)][-1]} >= {"oldestPending", "lastSuccess"}
    assert all(output for output in outputs.values())
    assert [(label(path), where) for path, found in outputs.items() for where in keys_not_camel(found)] == []


def test_the_machines_own_errors_speak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file olbridge may not read, a full disk under stdout, a JSON value nested deeper than
    Python reads: each ``Error: ...`` and exit status 1, where no code nearer it said more."""
    events = tmp_path / "events.ndjson"
    events.write_text("{}\n")
    real = Path.is_file

    def refused(self: Path) -> bool:
        if self == events:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    with monkeypatch.context() as patched:
        patched.setattr(Path, "is_file", refused)
        result = CliRunner().invoke(cli, ["validate", str(events)])
    assert result.exit_code == 1 and f"Error: {events}: Permission denied" in result.stderr, result.output
    deep = '{"a":' * 20000 + "1" + "}" * 20000
    db = tmp_path / "c.db"
    result = CliRunner().invoke(cli, ["--catalog", str(db), "assets", "set", "a.b", "--type", "Table"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["--catalog", str(db), "assets", "set", "a.b", "--metadata-json", deep])
    # read by the JSON rules, which say how deep a value may nest: a bad value of the option
    assert result.exit_code == 2 and "Error: --metadata-json: not valid JSON: depth limit" in result.stderr
    assert operational(RecursionError()) == "a JSON value (or another input) is nested too deeply to read"
    with open("/dev/full", "w") as full:
        done = subprocess.run([OLBRIDGE, "--catalog", str(db), "assets", "list"], stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 1 and done.stderr.decode().strip() == "Error: No space left on device", done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("outbox", "list", "--limit", "99999999999999999999999"),
        ("outbox", "retry", "99999999999999999999999"),
        ("outbox", "drop", "99999999999999999999999"),
        ("runs", "list", "--offset", "99999999999999999999999"),
        # (a review) each a traceback: an integer SQLite or PostgreSQL could not hold
        ("assets", "list", "--limit", "99999999999999999999"),
        ("assets", "show", "a.b", "--usages", "99999999999999999999"),
        ("assets", "list", "--limit", "9" * 5000),
    ],
    ids=lambda args: " ".join(a[:30] for a in args),
)
def test_a_count_past_what_a_database_holds_is_a_bad_value(tmp_path: Path, args: tuple[str, ...]) -> None:
    db = tmp_path / "c.db"
    assert CliRunner().invoke(cli, ["--catalog", str(db), "init"]).exit_code == 0
    result = CliRunner().invoke(cli, ["--catalog", str(db), *args])
    assert result.exit_code == 2 and "is more than any count or id" in result.stderr, result.output


def test_a_page_past_the_most_a_database_counts_is_empty_and_a_batch_is_bounded(tmp_path: Path) -> None:
    """(a review) ``runs list --offset`` at the most a count may be, with any --limit, added past
    what a database's integer holds (a traceback); ``--batch-size`` past 100,000 made a window of
    requests past it (a traceback in the outbox's read)."""
    db = tmp_path / "c.db"
    assert CliRunner().invoke(cli, ["--catalog", str(db), "init"]).exit_code == 0
    most = str(2**63 - 1)
    for args in (["--offset", most], ["--offset", "1", "--limit", most]):
        result = CliRunner().invoke(cli, ["--catalog", str(db), "runs", "list", "--json", *args])
        assert (result.exit_code, json.loads(result.stdout)) == (0, []), result.output
    result = CliRunner().invoke(
        cli, ["--catalog", str(db), "stream", "--once", "--url", "http://127.0.0.1:9", "--batch-size", "100001"]
    )
    assert result.exit_code == 2 and "--batch-size" in result.stderr and "1<=x<=100000" in result.stderr, result.stderr


def test_a_catalog_missing_a_table_is_said_damaged(tmp_path: Path) -> None:
    """(a review) a table of the catalog dropped by hand was a traceback (no such table)."""
    db = tmp_path / "c.db"
    assert CliRunner().invoke(cli, ["--catalog", str(db), "assets", "set", "a.b", "--type", "Table"]).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE usages")
    result = CliRunner().invoke(cli, ["--catalog", str(db), "assets", "show", "a.b"])
    assert (result.exit_code, result.stderr.strip()) == (
        1,
        f"Error: catalog {db}: it is damaged: a table of the catalog is missing (SQLite: no such table: usages)",
    ), result.output
    missing = psycopg.errors.UndefinedTable('relation "usages" does not exist\nLINE 1: SELECT ...')
    assert str(postgres_storage_error(missing, "postgresql://h/c")) == (
        'catalog postgresql://h/c: it is damaged: a table of the catalog is missing (PostgreSQL: relation "usages" '
        "does not exist LINE 1: SELECT ...)"
    )


def test_a_count_in_digits_int_does_not_read_is_a_bad_value(tmp_path: Path) -> None:
    """Characters str.isdigit takes and int() does not (a superscript two) were a traceback."""
    db = tmp_path / "c.db"
    assert CliRunner().invoke(cli, ["--catalog", str(db), "init"]).exit_code == 0
    for args in (("outbox", "list", "--limit", "\u00b2"), ("outbox", "retry", "\u2460")):
        result = CliRunner().invoke(cli, ["--catalog", str(db), *args])
        assert result.exit_code == 2 and "is not a valid integer" in result.stderr, result.output


# every option of the tree that takes a number with a fraction (seconds, all of them)
FLOAT_OPTIONS = sorted(
    (path, param.opts[0])
    for path in LEAVES
    for param in TREE[path].params
    if isinstance(param, click.Option) and isinstance(param.type, click.types.FloatParamType)
)


def test_the_float_options_are_found() -> None:
    assert (("stream",), "--timeout") in FLOAT_OPTIONS and (("serve",), "--read-timeout") in FLOAT_OPTIONS


@pytest.mark.parametrize(("path", "option"), FLOAT_OPTIONS, ids=lambda v: label(v) if isinstance(v, tuple) else v)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308"])
def test_a_float_option_takes_finite_seconds_only(
    tmp_path: Path, files: dict[str, str], path: tuple[str, ...], option: str, value: str
) -> None:
    """``nan`` passed every range (a stream whose retries were due at NaN, a server that refused
    every request), ``inf`` and ``1e308`` overflowed the clocks they were added to (tracebacks):
    each is a usage error, before anything runs, saying why (past a year, ``1e308`` and ``inf``
    were "not in the range x>=0", the range's words leaving out its top)."""
    code, out, err = olbridge(tmp_path / "c.db", path, [*command_table(files)[path], option, value])
    assert code == 2, (out, err)
    assert f"Invalid value for '{option}'" in err and "Traceback" not in err
    assert "is not a number of seconds (finite, up to 31,536,000: a year)" in err, err
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize(
    ("args", "closed", "said"),
    [
        (["assets", "list"], ">&-", "Error: stdout is closed"),  # the data was lost, exit 0
        (["export"], ">&-", "Error: cannot write stdout: stdout is closed"),  # a traceback
        (["record", "--file", "-"], "<&-", "Error: stdin is closed"),  # a traceback
    ],
)
def test_a_closed_standard_stream_is_said(tmp_path: Path, args: list[str], closed: str, said: str) -> None:
    """A process started with stdout or stdin closed: what a command writes or reads there is an
    ``Error:``, not data silently lost or a traceback."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_run(run("t", outputs=(decl("a.b", type="Table"),)))
    command = " ".join([OLBRIDGE, "--catalog", str(db), *args])
    done = subprocess.run(["sh", "-c", f"exec {command} {closed}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.both_engines
def test_with_stderr_closed_the_commands_work_and_their_errors_never_reach_stdout(
    catalog_path: str, tmp_path: Path
) -> None:
    """A process started with stderr closed (``2>&-``): its messages go nowhere, but the command
    does its work and its exit status says how it went. ``export`` failed with exit status 1 and
    wrote nothing (its progress asked a missing stderr whether it was a terminal), and an error
    was written to stdout, among the data."""
    with Catalog(catalog_path) as catalog:
        catalog.record_task_run(run("t", outputs=(decl("a.b", type="Table"),)))

    def closed(catalog: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = " ".join(shlex.quote(word) for word in [OLBRIDGE, "--catalog", catalog, *args])
        return subprocess.run(["sh", "-c", f"exec {command} 2>&-"], capture_output=True, text=True, timeout=60)

    exported = closed(catalog_path, "export")
    assert exported.returncode == 0
    assert exported.stdout == CliRunner().invoke(cli, ["--catalog", catalog_path, "export"]).stdout
    assert len(exported.stdout.splitlines()) == 2  # the run's START and COMPLETE
    flags = ["--namespace", "ops", "--flow-id", "b", "--task-id", "s", "--execution-id", "e9"]
    times = ["--start", "2025-01-02T00:00:00Z", "--end", "2025-01-02T00:01:00Z"]
    recorded = closed(catalog_path, "record", *flags, *times, "--output", '{"id": "c.d", "type": "Table"}')
    assert recorded.returncode == 0 and json.loads(recorded.stdout)["created"] == 1
    listed = closed(catalog_path, "assets", "list", "--json")
    assert listed.returncode == 0 and sorted(a["id"] for a in json.loads(listed.stdout)) == ["a.b", "c.d"]
    missing = closed(str(tmp_path / "none.db"), "assets", "list")
    assert (missing.returncode, missing.stdout) == (1, "")
    refused = closed(catalog_path, "assets", "show", "no.such.asset")
    assert (refused.returncode, refused.stdout) == (1, "")


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_the_roots_own_answers_to_a_full_disk_are_an_error(flag: str) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([OLBRIDGE, flag], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr == "Error: No space left on device\n", done.stderr


def test_an_integer_past_the_digits_python_reads_is_said_with_its_file(tmp_path: Path) -> None:
    """(a review) an integer of more than 4,300 digits in a config file, a rule file, a Kestra
    flow, a dbt artifact or a Metaflow asset's config was a traceback (Python's conversion limit):
    each an error naming the file. A config file's before anything runs."""
    big = "9" * 5000
    (tmp_path / "big.toml").write_text(f"x = {big}\n")
    (tmp_path / "m.toml").write_text(f"n = {big}\n")
    (tmp_path / "rules.toml").write_text(f'mappings = ["{tmp_path / "m.toml"}"]\n')
    (tmp_path / "flow.yml").write_text(f"id: f\nnamespace: a.b\nn: {big}\ntasks: []\n")
    (tmp_path / "dbt" / "target").mkdir(parents=True)
    (tmp_path / "dbt" / "target" / "manifest.json").write_text(f'{{"n": {big}}}')
    (tmp_path / "dbt" / "dbt_project.yml").write_text("name: p\n")
    (tmp_path / "mf" / "data" / "x").mkdir(parents=True)
    (tmp_path / "mf" / "data" / "x" / "asset_config.toml").write_text(
        f'name = "x"\nid = "x"\n[properties]\nn = {big}\n'
    )
    db = str(tmp_path / "c.db")
    cases = [
        (["--config", str(tmp_path / "big.toml"), "assets", "list"], tmp_path / "big.toml"),
        (["--config", str(tmp_path / "rules.toml"), "assets", "list"], tmp_path / "m.toml"),
        (["--catalog", db, "kestra", "declare", str(tmp_path / "flow.yml")], tmp_path / "flow.yml"),
        (["--catalog", db, "dbt", "import", "--project-dir", str(tmp_path / "dbt")], "manifest.json"),
        (["--catalog", db, "metaflow", "declare", str(tmp_path / "mf"), "--project", "p", "--branch", "main"], "x"),
    ]
    for args, named in cases:
        result = CliRunner().invoke(cli, args)
        said = result.stderr.strip().splitlines()[-1]
        assert result.exit_code == 1 and "Traceback" not in result.output, (args, result.output)
        assert said.endswith(
            ": cannot be read: an integer of more than 4,300 digits: no value olbridge reads is that long"
        )
        assert str(named) in said, (args, said)


def test_an_artifact_that_is_a_folder_and_an_asset_config_not_text_are_said_plainly(tmp_path: Path) -> None:
    """(a review) dbt's manifest.json as a folder was "file not found (run dbt first ...)";
    Metaflow's asset_config.toml not UTF-8 was Python's own words ('utf-8' codec can't decode
    byte 0xff in position 0): each says what it is, as every reader does."""
    (tmp_path / "dbt" / "target" / "manifest.json").mkdir(parents=True)
    (tmp_path / "dbt" / "dbt_project.yml").write_text("name: p\n")
    (tmp_path / "mf" / "data" / "y").mkdir(parents=True)
    (tmp_path / "mf" / "data" / "y" / "asset_config.toml").write_bytes(b"\xff")
    db = str(tmp_path / "c.db")
    result = CliRunner().invoke(cli, ["--catalog", db, "dbt", "import", "--project-dir", str(tmp_path / "dbt")])
    manifest = tmp_path / "dbt" / "target" / "manifest.json"
    assert (result.exit_code, result.stderr.strip()) == (1, f"Error: {manifest}: a folder, not dbt's artifact (a file)")
    args = ["--catalog", db, "metaflow", "declare", str(tmp_path / "mf"), "--project", "p", "--branch", "main"]
    result = CliRunner().invoke(cli, args)
    config = tmp_path / "mf" / "data" / "y" / "asset_config.toml"
    assert (result.exit_code, result.stderr.strip()) == (1, f"Error: {config}: not UTF-8 text")


@pytest.mark.parametrize(
    ("args", "option", "said"),
    [
        (["export", "--url", "notaurl"], "--url", "'notaurl' is no http:// or https:// address: no scheme"),
        (["stream", "--once", "--url", "ftp://x"], "--url", "its scheme is 'ftp'"),
        (["backfill", "--url", "notaurl"], "--url", "no scheme"),
        (["import", "--from-marquez", "marquez:5000"], "--from-marquez", "is no http:// or https:// address"),
        (["prefect", "import", "--api-url", ""], "--api-url", "it is empty"),
        (["prefect", "import", "--api-url", "http://x:99999/api"], "--api-url", "Port out of range"),
        (["dbt", "import", "--project-dir", ".", "--namespace", "Bad NS"], "--namespace", "a namespace matches"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_bad_url_or_namespace_is_a_usage_error(tmp_path: Path, args: list[str], option: str, said: str) -> None:
    """(a review) each was an error (exit 1) found as the command ran, where docs/cli.md says a
    bad value is a usage error (exit 2), nothing done."""
    result = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "c.db"), *args])
    assert result.exit_code == 2 and option in result.stderr and said in result.stderr, result.stderr
    assert not (tmp_path / "c.db").exists()


def test_a_statement_timeout_is_said_as_one_not_as_a_server_shutting_down() -> None:
    """(a review) a statement cancelled by its statement_timeout was said as "the server is
    shutting down or cannot take connections", where the docs tell to raise the timeout."""
    cancelled = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    assert str(postgres_storage_error(cancelled, "postgresql://h/c")) == (
        "catalog postgresql://h/c: a statement was cancelled, past a statement_timeout (the catalog URL's "
        "statement_timeout=, or one the role or the database sets) or by an operator (PostgreSQL: canceling "
        "statement due to statement timeout)"
    )
    gone = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    assert "the server is shutting down or cannot take connections" in str(postgres_storage_error(gone, "c"))
