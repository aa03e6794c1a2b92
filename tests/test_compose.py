"""The compose setup (compose/), checked without Docker: its structure, its images, ports,
healthchecks, replicas and dependencies, the olbridge image's Dockerfile and entrypoint, the load
balancer's configuration, and what can run here for real: every olbridge command in it parsed by
the real CLI with the service's environment, the database setup script run by psql against a real
PostgreSQL server, the entrypoint's pass file used to log in, and the healthchecks against real
``olbridge serve`` and ``olbridge stream`` processes."""

from __future__ import annotations

import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.config import load_config
from bridge.receiver.intake import Limits
from tests.backend import free_port, wait_for
from tests.conftest import ROOT

COMPOSE_DIR = ROOT / "compose"
COMPOSE = yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
OLBRIDGE = sorted(name for name, s in SERVICES.items() if s.get("image") == "olbridge:local")
LONG_RUNNING = sorted(name for name, s in SERVICES.items() if s.get("restart") != "no")
ONE_SHOT = sorted(set(SERVICES) - set(LONG_RUNNING))
SECRET = "olbridge-db-password"
SECRET_FILE = COMPOSE_DIR / COMPOSE["secrets"][SECRET]["file"]
ENTRYPOINT = COMPOSE_DIR / "olbridge-entrypoint.sh"


def env(service: str) -> dict[str, str]:
    value = SERVICES[service].get("environment") or {}
    assert isinstance(value, dict), f"{service}: environment as a mapping"
    return {str(k): str(v) for k, v in value.items()}


def test_the_services() -> None:
    assert set(SERVICES) == {
        "db",
        "olbridge-db-setup",
        "marquez",
        "marquez-web",
        "olbridge-init",
        "olbridge-serve",
        "olbridge-lb",
        "olbridge-stream",
        "olbridge-ui",
        "olbridge-demo",
    }
    assert ONE_SHOT == ["olbridge-db-setup", "olbridge-demo", "olbridge-init"]
    assert SERVICES["olbridge-demo"]["profiles"] == ["demo"]
    assert OLBRIDGE == ["olbridge-demo", "olbridge-init", "olbridge-serve", "olbridge-stream", "olbridge-ui"]


def test_two_receivers_and_two_workers() -> None:
    replicas = {name: s.get("deploy", {}).get("replicas", 1) for name, s in SERVICES.items()}
    assert {name: n for name, n in replicas.items() if n != 1} == {"olbridge-serve": 2, "olbridge-stream": 2}


def test_images_are_pinned() -> None:
    assert SERVICES["marquez"]["image"] == "marquezproject/marquez:0.51.1"
    assert SERVICES["marquez-web"]["image"] == "marquezproject/marquez-web:0.51.1"
    assert re.fullmatch(r"postgres:14\.\d+", SERVICES["db"]["image"]), SERVICES["db"]["image"]
    # psql of the same release as the server it sets up
    assert SERVICES["olbridge-db-setup"]["image"] == SERVICES["db"]["image"]
    assert re.fullmatch(r"nginx:\d+\.\d+\.\d+-alpine", SERVICES["olbridge-lb"]["image"]), SERVICES["olbridge-lb"]
    for name in OLBRIDGE:
        assert SERVICES[name]["build"] == {"context": "..", "dockerfile": "compose/Dockerfile"}, name


def test_every_port_is_bound_to_loopback() -> None:
    published: dict[str, list[int]] = {}
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert isinstance(port, str), f"{name}: ports as 'host:port:port' strings"
            host, outside, inside = port.split(":")
            assert host == "127.0.0.1", f"{name} publishes {port} beyond loopback"
            assert outside == inside
            published.setdefault(name, []).append(int(inside))
    # the receivers publish nothing (two replicas cannot share a host port): the balancer does
    assert published == {"marquez": [5000, 5001], "marquez-web": [3000], "olbridge-lb": [8080], "olbridge-ui": [8090]}


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_service_has_a_healthcheck(name: str) -> None:
    check = SERVICES[name]["healthcheck"]
    assert check["test"][0] == "CMD" and len(check["test"]) > 1
    assert {"interval", "timeout", "retries"} <= set(check)


def test_dependencies_wait_for_health() -> None:
    expected = {
        "db": {},
        "olbridge-db-setup": {"db": "service_healthy"},
        "marquez": {"db": "service_healthy"},
        "marquez-web": {"marquez": "service_healthy"},
        "olbridge-init": {"olbridge-db-setup": "service_completed_successfully"},
        "olbridge-serve": {"olbridge-init": "service_completed_successfully"},
        "olbridge-lb": {"olbridge-serve": "service_healthy"},
        "olbridge-stream": {"olbridge-init": "service_completed_successfully", "marquez": "service_healthy"},
        "olbridge-demo": {"olbridge-stream": "service_healthy"},
        "olbridge-ui": {"olbridge-init": "service_completed_successfully"},
    }
    found = {
        name: {dep: spec["condition"] for dep, spec in (service.get("depends_on") or {}).items()}
        for name, service in SERVICES.items()
    }
    assert found == expected
    for name, deps in found.items():
        for dep, condition in deps.items():
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{name} waits for {dep}'s health, which it has not"
            else:
                assert dep in ONE_SHOT, f"{name} waits for {dep} to complete, which runs for good"


def test_the_db_healthcheck_asks_over_tcp() -> None:
    # during its first start the postgres image runs a server on the Unix socket only; ready there
    # is not ready for the other services
    check = SERVICES["db"]["healthcheck"]["test"]
    assert check[1] == "pg_isready" and check[check.index("--host") + 1] == "127.0.0.1"


def test_marquez_is_configured_without_search() -> None:
    marquez = env("marquez")
    assert marquez["SEARCH_ENABLED"] == "false"
    assert env("marquez-web")["REACT_APP_ADVANCED_SEARCH"] == "false"
    assert (marquez["MARQUEZ_PORT"], marquez["MARQUEZ_ADMIN_PORT"]) == ("5000", "5001")
    assert env("marquez-web")["MARQUEZ_HOST"] == "marquez"
    assert env("marquez-web")["MARQUEZ_PORT"] == "5000"
    assert marquez["POSTGRES_HOST"] == "db"


def test_marquez_config_is_ours_and_mounted() -> None:
    marquez = env("marquez")
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1)[::-1] for v in SERVICES["marquez"]["volumes"])
    source = mounts[marquez["MARQUEZ_CONFIG"]]
    config_file = (COMPOSE_DIR / source).resolve()
    assert config_file == COMPOSE_DIR / "marquez.yml"
    config = yaml.safe_load(config_file.read_text())

    def substitute(text: str) -> str:  # as Dropwizard does, from the service's environment
        return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: marquez.get(m.group(1), m.group(2)), text)

    assert substitute(config["search"]["enabled"]) == "false"
    assert substitute(str(config["server"]["applicationConnectors"][0]["port"])) == "5000"
    assert substitute(str(config["server"]["adminConnectors"][0]["port"])) == "5001"
    assert config["migrateOnStartup"] is True
    db = env("db")
    assert substitute(config["db"]["url"]) == f"jdbc:postgresql://db:5432/{db['POSTGRES_DB']}"
    assert substitute(config["db"]["user"]) == db["POSTGRES_USER"]
    assert substitute(config["db"]["password"]) == db["POSTGRES_PASSWORD"]


def test_stream_points_at_marquez() -> None:
    assert env("olbridge-stream")["OPENLINEAGE_URL"] == "http://marquez:5000"


# --- the catalog's database and its password ----------------------------------------------------

CATALOG_URL = "postgresql://olbridge@db:5432/olbridge"


def test_olbridge_services_share_one_catalog_database() -> None:
    for name in OLBRIDGE:
        environment = env(name)
        assert environment["OLBRIDGE_CATALOG"] == CATALOG_URL, name
        assert environment["OLBRIDGE_DB_PASSWORD_FILE"] == f"/run/secrets/{SECRET}", name
        assert environment["PGPASSFILE"].startswith("/home/olbridge/"), name
        assert SERVICES[name]["secrets"] == [SECRET], name
        assert "volumes" not in SERVICES[name], f"{name}: the catalog is in PostgreSQL, not on a volume"
    url = urlsplit(CATALOG_URL)
    assert (url.hostname, url.port, url.path) == ("db", 5432, "/olbridge")
    assert url.password is None


def test_no_password_on_a_command_line() -> None:
    secret = SECRET_FILE.read_text().splitlines()[0]
    assert len(secret) >= 8
    text = (COMPOSE_DIR / "docker-compose.yml").read_text()
    assert secret not in text, "olbridge's password is in the compose file"
    for name, service in SERVICES.items():
        argv = [str(a) for a in [*(service.get("command") or []), *service.get("healthcheck", {}).get("test", [])]]
        for arg in argv:
            # no password option, variable or URL with a password (Marquez's password is its user's
            # name, so its value alone says nothing)
            assert not re.search(r"--password|PGPASSWORD|PASSWORD=|://[^/@\s]*:[^/@\s]*@", arg), f"{name}: {arg!r}"
        for key, value in env(name).items():
            if secret in value:
                pytest.fail(f"{name}: olbridge's password in its environment ({key})")
    # only the setup connects with Marquez's (the server's superuser) password, from its environment
    assert env("olbridge-db-setup")["PGPASSWORD"] == env("db")["POSTGRES_PASSWORD"]
    for name in OLBRIDGE:
        assert "PGPASSWORD" not in env(name), name


def test_the_setup_reads_the_password_from_the_secret() -> None:
    setup = SERVICES["olbridge-db-setup"]
    assert setup["secrets"] == [SECRET]
    command = setup["command"]
    assert command[0] == "psql"
    assert f"--set=password_file=/run/secrets/{SECRET}" in command
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1)[::-1] for v in setup["volumes"])
    script = command[[a.split("=")[0] for a in command].index("--file")].split("=", 1)[1]
    assert (COMPOSE_DIR / mounts[script]).resolve() == COMPOSE_DIR / "olbridge-db.sql"


def test_the_secret_stays_out_of_the_image() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "compose/secrets" in ignored


# --- the image ------------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    lines = []
    for raw in (COMPOSE_DIR / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        if raw.strip() and not raw.lstrip().startswith("#"):
            lines.append(raw.split(None, 1))
    return [(word.upper(), rest.strip()) for word, rest in lines]


def test_dockerfile_installs_the_package_as_a_non_root_user() -> None:
    instructions = dockerfile()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    copied = [shlex.split(rest)[:-1] for word, rest in instructions if word == "COPY"]
    sources = {source for group in copied for source in group}
    # what building the wheel needs (the project file, the readme it names, the package, the
    # mappings), and the entrypoint
    assert sources == {"pyproject.toml", "README.md", "bridge", "mappings", "compose/olbridge-entrypoint.sh"}
    for source in sources:
        assert (ROOT / source).exists(), source
    runs = [rest for word, rest in instructions if word == "RUN"]
    # with the PostgreSQL driver
    assert any(re.search(r"\bpip install '\.\[postgres\]'(\s|$)", r) for r in runs), runs
    users = [rest for word, rest in instructions if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("VOLUME", '["/data"]') in instructions
    assert ("ENTRYPOINT", '["olbridge-entrypoint"]') in instructions
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "*.db"} <= set(ignored)


def entrypoint(
    argv: list[str], secret: Path, passfile: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "OLBRIDGE_DB_PASSWORD_FILE": str(secret),
        "PGPASSFILE": str(passfile),
        **(extra or {}),
    }
    return subprocess.run(["sh", str(ENTRYPOINT), *argv], env=environment, capture_output=True, text=True, timeout=120)


def test_the_entrypoint_writes_the_pass_file(tmp_path: Path) -> None:
    assert os.access(ENTRYPOINT, os.X_OK)
    secret = tmp_path / "secret"
    secret.write_text("a:b\\c d\n")
    passfile = tmp_path / "pgpass"
    done = entrypoint(["sh", "-c", 'echo "$0 $1"', "ran", "with args"], secret, passfile)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran with args\n"  # the command, in the entrypoint's place
    assert passfile.read_text() == "*:*:*:*:a\\:b\\\\c d\n"
    assert stat.S_IMODE(passfile.stat().st_mode) == 0o600  # libpq ignores a pass file others can read
    secret.write_text("")
    done = entrypoint(["true"], secret, passfile)
    assert done.returncode == 1 and "is empty" in done.stderr
    done = entrypoint(["true"], tmp_path / "missing", passfile)
    assert done.returncode != 0


# --- the load balancer --------------------------------------------------------------------------


def test_the_balancer_spreads_over_the_receivers() -> None:
    conf = (COMPOSE_DIR / "nginx.conf").read_text()
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1)[::-1] for v in SERVICES["olbridge-lb"]["volumes"])
    assert (COMPOSE_DIR / mounts["/etc/nginx/nginx.conf"]).resolve() == COMPOSE_DIR / "nginx.conf"
    upstream = re.search(r"upstream\s+([\w-]+)\s*\{([^}]*)\}", conf)
    assert upstream is not None
    servers = re.findall(r"^\s*server\s+(\S+)\s+([^;]*);", upstream.group(2), re.MULTILINE)
    serve = parse(COMMANDS["olbridge-serve"], env("olbridge-serve"))
    assert servers and servers[0][0] == f"olbridge-serve:{serve.params['port']}"
    assert "resolve" in servers[0][1].split()  # each replica's address, found again when it changes
    assert re.search(rf"proxy_pass\s+http://{upstream.group(1)};", conf)
    assert re.search(r"^\s*listen\s+8080;", conf, re.MULTILINE)
    size = re.search(r"client_max_body_size\s+(\d+)m;", conf)
    assert size and int(size.group(1)) * 1024 * 1024 > Limits().max_body  # serve answers 413 itself


# --- every olbridge command in the compose file, through the real CLI ---------------------------


def olbridge_commands() -> Iterator[tuple[str, list[str]]]:
    for name, service in SERVICES.items():
        command = service.get("command")
        if command and command[0] == "olbridge":
            yield name, command


COMMANDS = dict(olbridge_commands())


def parse(argv: list[str], environment: dict[str, str]) -> click.Context:
    """The context the real CLI builds for ``argv`` with ``environment`` (options checked and
    converted, variables read), down to the command that would run; nothing is invoked."""
    assert argv[0] == "olbridge"
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        ctx = cli.make_context("olbridge", argv[1:])
        while isinstance(ctx.command, click.Group):
            remaining = [*getattr(ctx, "_protected_args", []), *ctx.args]  # click 8.2+ keeps them here
            name, command, rest = ctx.command.resolve_command(ctx, remaining)
            assert command is not None and name is not None
            ctx = command.make_context(name, rest, parent=ctx)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return ctx


def test_the_olbridge_commands() -> None:
    assert sorted(COMMANDS) == ["olbridge-demo", "olbridge-init", "olbridge-serve", "olbridge-stream", "olbridge-ui"]
    for name, argv in COMMANDS.items():
        assert "--catalog" not in argv, f"{name}: the catalog comes from OLBRIDGE_CATALOG"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_olbridge_command_parses(name: str) -> None:
    ctx = parse(COMMANDS[name], env(name))
    # the catalog: --catalog, else $OLBRIDGE_CATALOG (the service's), read by load_config alone
    given = ctx.find_root().params["catalog_path"]
    assert str(given if given is not None else load_config(None, env(name)).catalog) == CATALOG_URL
    params = ctx.params
    if name == "olbridge-serve":
        assert ctx.info_name == "serve"
        assert (params["host"], params["port"]) == ("0.0.0.0", 8080)
    elif name == "olbridge-stream":
        assert ctx.info_name == "stream"
        assert params["url"] is None  # OPENLINEAGE_URL from the service's environment applies
        assert params["once"] is False
    elif name == "olbridge-ui":
        assert ctx.info_name == "ui"
        assert (params["host"], params["port"], params["tokens_file"]) == ("0.0.0.0", 8090, None)
    elif name == "olbridge-demo":
        assert ctx.info_name == "demo"
        assert params == {"directory": Path("/tmp/olbridge-demo"), "in_catalog": True}
    else:
        assert ctx.info_name == "init"


# --- the healthchecks that can run here -----------------------------------------------------------


def healthcheck(service: str) -> list[str]:
    argv = list(SERVICES[service]["healthcheck"]["test"][1:])
    if argv[0] == "python":
        argv[0] = sys.executable
    return argv


def check(argv: list[str], environment: dict[str, str] | None = None) -> int:
    """A healthcheck's exit status; ``olbridge`` on the PATH is this environment's, as in the image."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        argv, capture_output=True, timeout=60, env={**os.environ, "PATH": path, **(environment or {})}
    ).returncode


def olbridge(*args: str, catalog: str, **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bridge", "--catalog", catalog, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **popen,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def test_serve_healthcheck_asks_readyz(tmp_path: Path) -> None:
    port = free_port()
    argv = [arg.replace("8080", str(port)) for arg in healthcheck("olbridge-serve")]
    assert check(argv) != 0  # nothing listens
    server = olbridge("serve", "--port", str(port), "--workers", "1", catalog=str(tmp_path / "olbridge.db"))
    try:
        assert wait_for(lambda: check(argv) == 0, timeout=60), "serve never became ready"
    finally:
        stop(server)
    assert check(argv) != 0


def test_ui_healthcheck_asks_the_status_page(tmp_path: Path) -> None:
    port = free_port()
    argv = [arg.replace("8090", str(port)) for arg in healthcheck("olbridge-ui")]
    assert check(argv) != 0  # nothing listens
    Catalog(tmp_path / "olbridge.db").close()
    server = olbridge("ui", "--port", str(port), catalog=str(tmp_path / "olbridge.db"))
    try:
        assert wait_for(lambda: check(argv) == 0, timeout=60), "ui never answered"
    finally:
        stop(server)
    assert server.returncode == 0  # SIGTERM stops it cleanly
    assert check(argv) != 0


def test_stream_healthcheck_needs_this_worker_beating(tmp_path: Path) -> None:
    catalog = str(tmp_path / "olbridge.db")
    assert CliRunner().invoke(cli, ["--catalog", catalog, "init"]).exit_code == 0
    argv = healthcheck("olbridge-stream")
    environment = {"OLBRIDGE_CATALOG": catalog}
    assert check(argv, environment) != 0  # no worker
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens: the worker runs, and delivers nothing
    worker = olbridge("stream", "--url", url, "--poll", "0.2", catalog=catalog)
    try:
        assert wait_for(lambda: check(argv, environment) == 0, timeout=60), "the worker never showed"
    finally:
        stop(worker)
    assert check(argv, environment) != 0  # a worker that stopped unregisters


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthcheck" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize("status", [200, 500])
def test_marquez_healthcheck_reads_the_admin_status(status: int) -> None:
    handler = type("Health", (_Health,), {"status": status})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        argv = [arg.replace("5001", str(server.server_port)) for arg in healthcheck("marquez")]
        assert argv[0] == "bash"
        code = subprocess.run(argv, capture_output=True, timeout=60).returncode
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert (code == 0) is (status == 200)


def test_the_readme_names_only_services_that_exist() -> None:
    text = (COMPOSE_DIR / "README.md").read_text()
    named = re.findall(r"docker compose -f compose/docker-compose\.yml (?:run --rm|exec) ([\w-]+)", text)
    assert named and set(named) <= set(SERVICES)
    assert "http://localhost:3000" in text


# --- the catalog's database, set up by the script olbridge-db-setup runs, on a real server ------


@pytest.fixture(scope="module")
def stack_db() -> Iterator[Any]:
    """A PostgreSQL server set up as the stack's: the catalog's role ``olbridge`` logs in over TCP
    with its password (SCRAM), the superuser over the Unix socket. (Here the superuser is the
    ``olbridge`` role itself, the tests' server's; the script makes the role when it is missing.)"""
    from tests.postgres import running

    with running() as server:
        (server.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all olbridge 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\n"
        )
        done = subprocess.run(
            [*psql(server), f"--username={server.user}", "--dbname=postgres", "--command=SELECT pg_reload_conf()"],
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        yield server


def psql(server: Any) -> list[str]:
    binary = server.bindir / "psql"
    return [str(binary if binary.exists() else "psql"), f"--host={server.socket_dir}", f"--port={server.port}"]


def run_setup(server: Any, secret: Path) -> subprocess.CompletedProcess[str]:
    """olbridge-db-setup's command, pointed at the test's server, secret and script."""
    setup = SERVICES["olbridge-db-setup"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1)[::-1] for v in setup["volumes"])
    argv = psql(server)
    for arg in setup["command"][1:]:
        option, _, value = arg.partition("=")
        if option == "--host":
            continue
        if option == "--username":
            value = server.user
        elif option == "--dbname":
            value = "postgres"
        elif option == "--file":
            value = str(COMPOSE_DIR / mounts[value])
        elif value == f"password_file=/run/secrets/{SECRET}":
            value = f"password_file={secret}"
        argv.append(f"{option}={value}" if value else option)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, **env("olbridge-db-setup")}
    )


def who(server: Any, secret: Path, passfile: Path) -> subprocess.CompletedProcess[str]:
    """Through the entrypoint, as an olbridge service: log in with the catalog's URL (the test
    server's address) and the pass file; prints the user and the database."""
    url = CATALOG_URL.replace("@db:5432", f"@127.0.0.1:{server.port}")
    code = (
        "import psycopg, sys; conn = psycopg.connect(sys.argv[1]); "
        "print(*conn.execute('SELECT current_user, current_database()').fetchone())"
    )
    return entrypoint([sys.executable, "-c", code, url], secret, passfile, {"PGCONNECT_TIMEOUT": "10"})


def test_the_setup_makes_the_catalog_database_and_its_login(stack_db: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("it's a:secret\\ \n")
    for attempt in ("first", "again"):  # every start runs it
        done = run_setup(stack_db, secret)
        assert done.returncode == 0, f"{attempt}: {done.stderr}"
        assert "secret" not in done.stdout + done.stderr
    passfile = tmp_path / "pgpass"
    done = who(stack_db, secret, passfile)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["olbridge", "olbridge"]
    # a changed secret applies at the next start; the old password no longer logs in
    old = tmp_path / "old"
    old.write_text(secret.read_text())
    secret.write_text("rotated-password\n")
    assert run_setup(stack_db, secret).returncode == 0
    assert who(stack_db, secret, passfile).returncode == 0
    refused = who(stack_db, old, passfile)
    assert refused.returncode != 0 and "password authentication failed" in refused.stderr


def service_env(service: str, server: Any, secret: Path, passfile: Path) -> dict[str, str]:
    """An olbridge service's environment, pointed at the test's server, secret and pass file."""
    environment = env(service)
    environment["OLBRIDGE_CATALOG"] = CATALOG_URL.replace("@db:5432", f"@127.0.0.1:{server.port}")
    environment["OLBRIDGE_DB_PASSWORD_FILE"] = str(secret)
    environment["PGPASSFILE"] = str(passfile)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return environment


def test_init_demo_and_a_stream_worker_run_on_the_catalog_database(stack_db: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the-stack's password\n")
    assert run_setup(stack_db, secret).returncode == 0
    passfile = tmp_path / "pgpass"

    def run(service: str) -> subprocess.CompletedProcess[str]:
        argv = [a.replace("/tmp/olbridge-demo", str(tmp_path / "demo")) for a in COMMANDS[service]]
        environment = {**os.environ, **service_env(service, stack_db, secret, passfile)}
        return subprocess.run(
            ["sh", str(ENTRYPOINT), *argv], env=environment, capture_output=True, text=True, timeout=300
        )

    done = run("olbridge-init")
    assert done.returncode == 0, done.stderr
    for attempt in ("first", "again"):
        done = run("olbridge-demo")
        assert done.returncode == 0, f"{attempt}: {done.stderr}"
        assert "0 invalid" in done.stdout
    url = service_env("olbridge-init", stack_db, secret, passfile)["OLBRIDGE_CATALOG"]
    with psycopg_connect(url, secret) as conn:
        runs = conn.execute("SELECT task_id, state FROM task_runs ORDER BY task_id").fetchall()
    assert runs == [
        ("export_report", "SUCCESS"),
        ("model.my_first_dbt_model", "SUCCESS"),
        ("model.my_second_dbt_model", "SUCCESS"),
    ]
    # a stream worker as the service runs it (OPENLINEAGE_URL: nobody answers here), and its healthcheck
    environment = {**os.environ, **service_env("olbridge-stream", stack_db, secret, passfile)}
    environment["OPENLINEAGE_URL"] = f"http://127.0.0.1:{free_port()}"
    worker = subprocess.Popen(
        ["sh", str(ENTRYPOINT), *COMMANDS["olbridge-stream"]],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    argv = healthcheck("olbridge-stream")
    try:
        assert wait_for(lambda: check(argv, environment) == 0, timeout=60), "the worker never showed"
    finally:
        stop(worker)
    assert check(argv, environment) != 0


def psycopg_connect(url: str, secret: Path) -> Any:
    import psycopg

    return psycopg.connect(url, password=secret.read_text().strip())
