"""The compose setup (compose/), checked without Docker: its structure, its images, ports,
healthchecks and dependencies, the olbridge image's Dockerfile, and every olbridge command in it
parsed by the real CLI (the init and demo commands also run, with /data moved to a temporary folder)."""

from __future__ import annotations

import re
import shlex
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from bridge.cli import cli
from tests.conftest import ROOT

COMPOSE_DIR = ROOT / "compose"
COMPOSE = yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
OLBRIDGE = sorted(name for name, s in SERVICES.items() if s.get("image") == "olbridge:local")
LONG_RUNNING = sorted(name for name, s in SERVICES.items() if s.get("restart") != "no")
ONE_SHOT = sorted(set(SERVICES) - set(LONG_RUNNING))


def env(service: str) -> dict[str, str]:
    value = SERVICES[service].get("environment") or {}
    assert isinstance(value, dict), f"{service}: environment as a mapping"
    return {str(k): str(v) for k, v in value.items()}


def test_the_services() -> None:
    assert set(SERVICES) == {
        "db",
        "marquez",
        "marquez-web",
        "olbridge-init",
        "olbridge-serve",
        "olbridge-stream",
        "olbridge-demo",
    }
    assert ONE_SHOT == ["olbridge-demo", "olbridge-init"]
    assert SERVICES["olbridge-demo"]["profiles"] == ["demo"]


def test_images_are_pinned() -> None:
    assert SERVICES["marquez"]["image"] == "marquezproject/marquez:0.51.1"
    assert SERVICES["marquez-web"]["image"] == "marquezproject/marquez-web:0.51.1"
    assert re.fullmatch(r"postgres:14\.\d+", SERVICES["db"]["image"]), SERVICES["db"]["image"]
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
    assert published == {"marquez": [5000, 5001], "marquez-web": [3000], "olbridge-serve": [8080]}


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_service_has_a_healthcheck(name: str) -> None:
    check = SERVICES[name]["healthcheck"]
    assert check["test"][0] == "CMD" and len(check["test"]) > 1
    assert {"interval", "timeout", "retries"} <= set(check)


def test_dependencies_wait_for_health() -> None:
    expected = {
        "db": {},
        "marquez": {"db": "service_healthy"},
        "marquez-web": {"marquez": "service_healthy"},
        "olbridge-init": {},
        "olbridge-serve": {"olbridge-init": "service_completed_successfully", "marquez": "service_healthy"},
        "olbridge-stream": {"olbridge-init": "service_completed_successfully", "marquez": "service_healthy"},
        "olbridge-demo": {"olbridge-stream": "service_healthy"},
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


def test_olbridge_services_share_one_catalog_volume() -> None:
    for name in OLBRIDGE:
        assert SERVICES[name]["volumes"] == ["olbridge-data:/data"], name
        assert SERVICES[name]["command"][:3] == ["olbridge", "--catalog", "/data/olbridge.db"], name
    assert "olbridge-data" in COMPOSE["volumes"]


def test_dockerfile_installs_the_package_as_a_non_root_user() -> None:
    lines = []
    for raw in (COMPOSE_DIR / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        if raw.strip() and not raw.lstrip().startswith("#"):
            lines.append(raw.split(None, 1))
    instructions = [(word.upper(), rest.strip()) for word, rest in lines]
    assert instructions[0] == ("FROM", "python:3.11-slim")
    copied = [shlex.split(rest)[:-1] for word, rest in instructions if word == "COPY"]
    sources = {source for group in copied for source in group}
    # what building the wheel needs: the project file, the readme it names, the package, the mappings
    assert sources == {"pyproject.toml", "README.md", "bridge", "mappings"}
    for source in sources:
        assert (ROOT / source).exists(), source
    runs = [rest for word, rest in instructions if word == "RUN"]
    assert any(re.search(r"\bpip install \.(\s|$)", r) for r in runs), runs
    users = [rest for word, rest in instructions if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("VOLUME", '["/data"]') in instructions
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "*.db"} <= set(ignored)


# --- every olbridge command in the compose file, through the real CLI ---------------------------


def olbridge_commands() -> Iterator[tuple[str, list[str]]]:
    for name, service in SERVICES.items():
        command = service.get("command")
        if command and command[0] == "olbridge":
            yield name, command


COMMANDS = dict(olbridge_commands())


def parse(argv: list[str]) -> click.Context:
    """The context the real CLI builds for ``argv`` (options checked and converted), down to the
    command that would run; nothing is invoked."""
    assert argv[0] == "olbridge"
    ctx = cli.make_context("olbridge", argv[1:])
    while isinstance(ctx.command, click.Group):
        remaining = [*getattr(ctx, "_protected_args", []), *ctx.args]  # click 8.2+ keeps them here
        name, command, rest = ctx.command.resolve_command(ctx, remaining)
        assert command is not None and name is not None
        ctx = command.make_context(name, rest, parent=ctx)
    return ctx


def test_the_olbridge_commands() -> None:
    assert sorted(COMMANDS) == ["olbridge-demo", "olbridge-init", "olbridge-serve", "olbridge-stream"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_olbridge_command_parses(name: str) -> None:
    ctx = parse(COMMANDS[name])
    assert ctx.find_root().params["catalog_path"] == Path("/data/olbridge.db")
    params = ctx.params
    if name == "olbridge-serve":
        assert ctx.info_name == "serve"
        assert (params["host"], params["port"]) == ("0.0.0.0", 8080)
    elif name == "olbridge-stream":
        assert ctx.info_name == "stream"
        assert params["url"] is None  # OPENLINEAGE_URL from the service's environment applies
    elif name == "olbridge-demo":
        assert ctx.info_name == "demo"
        assert params == {"directory": Path("/data/demo"), "in_catalog": True}
    else:
        assert ctx.info_name == "init"


def moved(argv: list[str], data: Path) -> list[str]:
    return [arg.replace("/data", str(data)) for arg in argv]


def test_init_then_demo_run_into_the_shared_catalog(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, moved(COMMANDS["olbridge-init"], tmp_path)[1:])
    assert result.exit_code == 0, result.output
    catalog = tmp_path / "olbridge.db"
    for attempt in ("first", "again"):
        result = runner.invoke(cli, moved(COMMANDS["olbridge-demo"], tmp_path)[1:])
        assert result.exit_code == 0, f"{attempt}: {result.output}"
        assert "0 invalid" in result.stdout
    conn = sqlite3.connect(catalog)
    try:
        runs = conn.execute("SELECT task_id, state FROM task_runs ORDER BY task_id").fetchall()
    finally:
        conn.close()
    assert runs == [
        ("export_report", "SUCCESS"),
        ("model.my_first_dbt_model", "SUCCESS"),
        ("model.my_second_dbt_model", "SUCCESS"),
    ]
    assert not (tmp_path / "demo" / "olbridge.db").exists()  # the demo's own catalog is not made


# --- the healthcheck commands that can run here -------------------------------------------------


def healthcheck(service: str) -> list[str]:
    return list(SERVICES[service]["healthcheck"]["test"][1:])


def test_stream_healthcheck_needs_the_catalog(tmp_path: Path) -> None:
    argv = moved(healthcheck("olbridge-stream"), tmp_path)
    argv[0] = sys.executable
    assert subprocess.run(argv, capture_output=True, timeout=60).returncode != 0
    assert CliRunner().invoke(cli, moved(COMMANDS["olbridge-init"], tmp_path)[1:]).exit_code == 0
    assert subprocess.run(argv, capture_output=True, timeout=60).returncode == 0


def test_serve_healthcheck_connects(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        argv = [arg.replace("8080", str(port)) for arg in healthcheck("olbridge-serve")]
        argv[0] = sys.executable
        assert subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    assert subprocess.run(argv, capture_output=True, timeout=60).returncode != 0


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
