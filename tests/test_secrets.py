"""Secrets kept off the command line: ``serve --token-file`` / ``OLBRIDGE_TOKEN``, and
``--api-key-file`` / ``OPENLINEAGE_API_KEY`` for export, stream and backfill."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from click.testing import CliRunner

from bridge.cli import cli
from bridge.config import read_secret_file
from bridge.errors import ConfigError
from bridge.receiver.server import ServeOptions
from tests.helpers import serve_process
from tests.test_cli import line
from tests.test_validate import BASE_EVENT

TOKEN = "t0ken-from-a-file"
WARNING = "warning: --token on the command line can be read by every user of this machine (ps)"


def token_file(folder: Path, text: str = f"  {TOKEN}  \n") -> Path:
    path = folder / "token"
    path.write_text(text)
    path.chmod(0o600)  # as a secret is kept: a file others can read is warned of
    return path


# ---------------------------------------------------------------------------------------------
# the file


def test_a_secret_file_holds_one_trimmed_line(tmp_path: Path) -> None:
    assert read_secret_file(token_file(tmp_path), "--token-file") == TOKEN
    assert read_secret_file(token_file(tmp_path, f"\n{TOKEN}\r\n\n"), "--token-file") == TOKEN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("  \n\n", "the file is empty"),
        ("one\ntwo\n", "2 lines; the file holds the secret alone, on one line"),
    ],
    ids=["empty", "blank", "two-lines"],
)
def test_a_bad_secret_file_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = token_file(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as caught:
        read_secret_file(path, "--token-file")
    assert str(caught.value).startswith(f"--token-file {path}: ")
    assert TOKEN not in str(caught.value)


def test_a_missing_or_binary_secret_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it: No such file or directory"):
        read_secret_file(tmp_path / "absent", "--token-file")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_secret_file(binary, "--token-file")


# ---------------------------------------------------------------------------------------------
# serve: which token, from where


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ServeOptions]:
    """The options ``serve`` would start the receiver with (it is not started)."""
    seen: list[ServeOptions] = []
    monkeypatch.setattr("bridge.cli.serve.serve_receiver", lambda path, resolver, options, **kw: seen.append(options))
    return seen


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    environ = {"OLBRIDGE_TOKEN": None, "OLBRIDGE_TOKEN_FILE": None, **(env or {})}
    result = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "c.db"), "serve", *args], env=environ)
    return result.exit_code, result.stderr


def test_the_token_from_a_file(tmp_path: Path, served: list[ServeOptions]) -> None:
    code, err = serve(tmp_path, "--token-file", str(token_file(tmp_path)))
    assert code == 0, err
    assert served[-1].token == TOKEN and "warning" not in err
    code, err = serve(tmp_path, env={"OLBRIDGE_TOKEN_FILE": str(token_file(tmp_path))})
    assert code == 0 and served[-1].token == TOKEN and "warning" not in err


def test_the_token_from_the_environment_without_a_warning(tmp_path: Path, served: list[ServeOptions]) -> None:
    code, err = serve(tmp_path, env={"OLBRIDGE_TOKEN": "from-env"})
    assert code == 0 and served[-1].token == "from-env" and "warning" not in err


def test_the_token_on_the_command_line_still_works_with_a_warning(tmp_path: Path, served: list[ServeOptions]) -> None:
    code, err = serve(tmp_path, "--token", "on-the-line")
    assert code == 0 and served[-1].token == "on-the-line"
    assert WARNING in err and "set OLBRIDGE_TOKEN, or put it in a file for --token-file" in err
    assert "on-the-line" not in err


def test_the_command_line_beats_the_environment(tmp_path: Path, served: list[ServeOptions]) -> None:
    path = str(token_file(tmp_path))
    code, _err = serve(tmp_path, "--token-file", path, env={"OLBRIDGE_TOKEN": "from-env"})
    assert code == 0 and served[-1].token == TOKEN
    code, _err = serve(tmp_path, "--token", "on-the-line", env={"OLBRIDGE_TOKEN_FILE": path})
    assert code == 0 and served[-1].token == "on-the-line"


def test_two_ways_at_once_are_refused(tmp_path: Path, served: list[ServeOptions]) -> None:
    path = str(token_file(tmp_path))
    code, err = serve(tmp_path, "--token", "x", "--token-file", path)
    assert code == 2 and "--token and --token-file are both given on the command line" in err
    code, err = serve(tmp_path, env={"OLBRIDGE_TOKEN": "x", "OLBRIDGE_TOKEN_FILE": path})
    assert code == 2 and "OLBRIDGE_TOKEN and OLBRIDGE_TOKEN_FILE are both given in the environment" in err
    assert served == []


def test_a_bad_token_file_stops_serve_with_an_error(tmp_path: Path, served: list[ServeOptions]) -> None:
    code, err = serve(tmp_path, "--token-file", str(token_file(tmp_path, "")))
    assert code == 1 and err.startswith("Error: --token-file ") and "the file is empty" in err
    assert "Traceback" not in err and served == []


def test_a_real_serve_takes_its_token_from_a_file_and_keeps_it_out_of_ps(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLBRIDGE_TOKEN")}
    options = ("--workers", "1", "--token-file", str(token_file(tmp_path)))
    with serve_process(tmp_path / "c.db", *options, env=env) as served:
        url = served.url
        assert TOKEN not in Path(f"/proc/{served.process.pid}/cmdline").read_bytes().decode()  # what ps shows
        assert requests.post(f"{url}/api/v1/lineage", json=BASE_EVENT, timeout=5).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert requests.post(f"{url}/api/v1/lineage", json=BASE_EVENT, headers=wrong, timeout=5).status_code == 401
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert requests.post(f"{url}/api/v1/lineage", json=BASE_EVENT, headers=right, timeout=5).status_code == 201
    err = served.stderr
    assert served.returncode == 0, err
    assert "bearer token" in err and "warning" not in err and TOKEN not in err


# ---------------------------------------------------------------------------------------------
# the backend's API key: export, stream, backfill


def recorded_catalog(tmp_path: Path) -> Path:
    db, records = tmp_path / "c.db", tmp_path / "runs.jsonl"
    records.write_text(line() + "\n")
    result = CliRunner().invoke(cli, ["--catalog", str(db), "record", "--file", str(records)])
    assert result.exit_code == 0, result.stderr
    return db


@responses.activate
def test_export_reads_the_api_key_from_a_file(tmp_path: Path) -> None:
    db = recorded_catalog(tmp_path)
    key = tmp_path / "key"
    key.write_text("k-from-file\n")
    key.chmod(0o600)
    responses.add(responses.POST, "http://marquez.test:5000/api/v1/lineage", status=201)
    args = ["--catalog", str(db), "export", "--url", "http://marquez.test:5000", "--api-key-file", str(key)]
    result = CliRunner().invoke(cli, args, env={"OPENLINEAGE_API_KEY": None})
    assert result.exit_code == 0, result.stderr
    assert {c.request.headers["Authorization"] for c in responses.calls} == {"Bearer k-from-file"}
    assert "warning" not in result.stderr
    key.chmod(0o644)  # others can read it now: said, and the key still used
    result = CliRunner().invoke(cli, args, env={"OPENLINEAGE_API_KEY": None})
    assert result.exit_code == 0 and f"warning: --api-key-file {key} can be read by other users" in result.stderr
    args = ["--catalog", str(db), "export", "--url", "http://marquez.test:5000", "--api-key", "k"]
    result = CliRunner().invoke(cli, args, env={"OPENLINEAGE_API_KEY": None})
    assert "warning: --api-key on the command line can be read by every user of this machine (ps)" in result.stderr


@pytest.mark.parametrize("command", [["stream", "--once"], ["backfill"]])
def test_stream_and_backfill_read_the_api_key_from_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    db = recorded_catalog(tmp_path)
    key = tmp_path / "key"
    key.write_text("k-from-file\n")
    keys: list[str | None] = []

    def sender_for(url: str | None, *, api_key: str | None = None, **options: Any) -> object:
        keys.append(api_key)
        raise ConfigError("no sending in this test")

    monkeypatch.setattr("bridge.cli.options.sender_for", sender_for)
    args = ["--catalog", str(db), *command, "--url", "http://127.0.0.1:9", "--api-key-file", str(key)]
    result = CliRunner().invoke(cli, args, env={"OPENLINEAGE_API_KEY": None, "OPENLINEAGE_API_KEY_FILE": None})
    assert "Error: no sending in this test" in result.stderr
    assert keys == ["k-from-file"]
    args = ["--catalog", str(db), *command, "--url", "http://127.0.0.1:9", "--api-key-file", str(tmp_path / "none")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and "Error: --api-key-file" in result.stderr and "cannot read it" in result.stderr
    assert json.dumps(keys) == '["k-from-file"]'  # the bad file stopped it before any sender


@pytest.mark.parametrize("given", ["", "sekrit\nx", "two words", "caf\u00e9", "bell\x07"])
def test_a_secret_that_is_no_token_is_refused_and_not_repeated(
    tmp_path: Path, served: list[ServeOptions], given: str
) -> None:
    """An empty ``--token`` would mean no auth at all; a secret with a line break, a space or a
    character outside printable ASCII would go into a header and out in error messages: each is a
    bad value (exit 2) that does not say the secret."""
    code, err = serve(tmp_path, "--token", given)
    assert code == 2 and "--token" in err and not served, err
    assert given == "" or given not in err
    secret_file = tmp_path / "token.txt"
    secret_file.write_text(given or "x y")
    secret_file.chmod(0o600)
    code, err = serve(tmp_path, "--token-file", str(secret_file))
    assert code != 0 and "--token-file" in err and not served, err
