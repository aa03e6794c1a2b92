"""``olbridge serve --access-log``: a real ``serve`` process writes one line a request on stderr,
with its status, the events it carried, the time it took and its named token's name (never the
token), as text or as JSON; off unless asked, on the command line or in the config's ``[serve]``."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.helpers import ol_dataset, ol_run_event, serve_process
from tests.test_tokens import ANY, SPARK, TOKENS_FILE


def run_event(n: int, namespace: str) -> dict[str, Any]:
    return ol_run_event(
        run_id=f"0194a1b2-0000-7000-8000-{n:012d}", job=(namespace, "job"), inputs=[ol_dataset("s3://b", f"k{n}")]
    )


def post(url: str, path: str, value: Any, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.post(f"{url}{path}", json=value, headers=headers, timeout=30).status_code


def requests_made(url: str) -> list[int]:
    """A few requests, one of each kind: good, good batch, bad, forbidden, refused token, health,
    a path made to forge a line and drive a terminal, and the metrics (a token's, named)."""
    statuses = [
        post(url, "/api/v1/lineage", run_event(1, "spark-prod"), SPARK.token),
        post(url, "/api/v1/lineage/batch", [run_event(2, "etl"), run_event(3, "airflow")], ANY.token),
        post(url, "/api/v1/lineage", {**run_event(4, "etl"), "eventTime": "yesterday"}, SPARK.token),
        post(url, "/api/v1/lineage", run_event(5, "airflow"), SPARK.token),
        post(url, "/api/v1/lineage", run_event(6, "etl"), "not-a-token"),
        requests.get(f"{url}/healthz", timeout=30).status_code,
        requests.get(f"{url}/x%1b%5b2J%0a2026-01-01T00:00:00.000Z%20GET%20/forged", timeout=30).status_code,
        requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {SPARK.token}"}, timeout=30).status_code,
    ]
    assert statuses == [201, 200, 400, 403, 401, 200, 404, 200]
    return statuses


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OLBRIDGE_")}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    file = tmp_path / "tokens.toml"
    file.write_text(TOKENS_FILE)
    return file


TEXT = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<method>GET|POST) (?P<path>\S+) (?P<status>\d{3}) "
    r"events=(?P<events>\d+) token=(?P<token>\S+) (?P<ms>\d+(\.\d)?)ms$"
)


def test_the_text_access_log_has_a_line_a_request(tmp_path: Path, tokens: Path) -> None:
    with serve_process(tmp_path / "olbridge.db", "--tokens", str(tokens), "--access-log", env=environment()) as served:
        requests_made(served.url)
    assert served.returncode == 0, served.stderr
    lines = [m.groupdict() for line in served.stderr.splitlines() if (m := TEXT.match(line))]
    seen = [(d["method"], d["path"], int(d["status"]), int(d["events"]), d["token"]) for d in lines]
    # the readiness polls of serve_process come first
    assert seen[-8:] == [
        ("POST", "/api/v1/lineage", 201, 1, "spark"),
        ("POST", "/api/v1/lineage/batch", 200, 2, "platform"),
        ("POST", "/api/v1/lineage", 400, 1, "spark"),
        ("POST", "/api/v1/lineage", 403, 1, "spark"),
        ("POST", "/api/v1/lineage", 401, 0, "-"),
        ("GET", "/healthz", 200, 0, "-"),
        # as sent, percent-encoded: the line is one, it forges none and clears no screen
        ("GET", "/x%1B%5B2J%0A2026-01-01T00:00:00.000Z%20GET%20/forged", 404, 0, "-"),
        ("GET", "/metrics", 200, 0, "spark"),
    ]
    assert all(s == ("GET", "/readyz", 200, 0, "-") for s in seen[:-8])
    assert "access log on stderr (text)" in served.stderr
    assert "\x1b" not in served.stderr
    for secret in (SPARK.token, ANY.token, "not-a-token"):
        assert secret not in served.stderr


def test_the_json_access_log_from_the_config(tmp_path: Path, tokens: Path) -> None:
    config = tmp_path / "olbridge.toml"
    config.write_text(f'[serve]\ntokens = "{tokens.name}"\naccess_log = "json"\n')
    env = {**environment(), "OLBRIDGE_CONFIG": str(config)}
    with serve_process(tmp_path / "olbridge.db", env=env) as served:
        began = time.monotonic()
        requests_made(served.url)
        waited = (time.monotonic() - began) * 1000  # ms the client waited for the eight, one after another
    assert served.returncode == 0, served.stderr
    records = [json.loads(line) for line in served.stderr.splitlines() if line.startswith("{")]
    assert all(set(r) == {"time", "method", "path", "status", "events", "token", "durationMs"} for r in records)
    assert all(isinstance(r["durationMs"], float) for r in records)
    # the time each took, within the client's wait for its answer (to the log's rounding, 0.05 ms):
    # a clock's reading, or a duration in microseconds, would not be
    durations = [r["durationMs"] for r in records[-8:]]
    assert min(durations) >= 0 and sum(durations) <= waited + 0.05 * len(durations), (durations, waited)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"]) for r in records)
    seen = [(r["method"], r["path"], r["status"], r["events"], r["token"]) for r in records]
    assert seen[-8:] == [
        ("POST", "/api/v1/lineage", 201, 1, "spark"),
        ("POST", "/api/v1/lineage/batch", 200, 2, "platform"),
        ("POST", "/api/v1/lineage", 400, 1, "spark"),
        ("POST", "/api/v1/lineage", 403, 1, "spark"),
        ("POST", "/api/v1/lineage", 401, 0, None),
        ("GET", "/healthz", 200, 0, None),
        ("GET", "/x%1B%5B2J%0A2026-01-01T00:00:00.000Z%20GET%20/forged", 404, 0, None),  # as sent
        ("GET", "/metrics", 200, 0, "spark"),
    ]
    assert "\x1b" not in served.stderr
    for secret in (SPARK.token, ANY.token, "not-a-token"):
        assert secret not in served.stderr


def test_off_by_default_and_off_wins_over_the_config(tmp_path: Path, tokens: Path) -> None:
    config = tmp_path / "olbridge.toml"
    config.write_text('[serve]\naccess_log = "text"\n')
    for options, env in [
        ((), environment()),
        (("--access-log", "off"), {**environment(), "OLBRIDGE_CONFIG": str(config)}),
    ]:
        with serve_process(tmp_path / "olbridge.db", "--tokens", str(tokens), *options, env=env) as served:
            assert post(served.url, "/api/v1/lineage", run_event(1, "spark-prod"), SPARK.token) == 201
        assert served.returncode == 0, served.stderr
        assert not [line for line in served.stderr.splitlines() if "/api/v1/lineage" in line], served.stderr
        assert "access log" not in served.stderr


def test_a_line_cuts_a_long_path_and_escapes_what_a_terminal_would_run() -> None:
    from datetime import UTC, datetime

    from bridge.receiver.access_log import AccessLog, Seen

    clock = lambda: datetime(2026, 3, 1, 8, 0, 0, 123456, tzinfo=UTC)  # noqa: E731
    seen = Seen(token="spark", events=3)
    text = AccessLog("text", clock=clock)
    assert text.line("POST", "/a b\\c\u2028\U0001f600é", 200, seen, 0.01234) == (
        "2026-03-01T08:00:00.123Z POST /a\\x20b\\\\c\\u2028\U0001f600é 200 events=3 token=spark 12.3ms"
    )
    long = text.line("GET", "/" + "x" * 500, 404, Seen(), 0.0)
    assert f" /{'x' * 199}... 404 events=0 token=- 0.0ms" in long
    record = json.loads(AccessLog("json", clock=clock).line("GET", "/\ud800" + "y" * 300, 404, seen, 0.5))
    assert record == {
        "time": "2026-03-01T08:00:00.123Z",
        "method": "GET",
        "path": "/\\ud800" + "y" * 198,  # no lone surrogate: the JSON is valid UTF-8
        "status": 404,
        "events": 3,
        "token": "spark",
        "durationMs": 500.0,
    }
    with pytest.raises(ValueError, match="'format' must be in"):
        AccessLog("xml")


def raw(url: str, data: bytes) -> int:
    """The status of the answer to ``data`` sent on a connection of its own (0: none)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_requests_the_http_layer_refuses_are_counted_and_logged(tmp_path: Path) -> None:
    """Text that is not HTTP (400), a target past its bytes (414), a head past its bytes (431):
    answered before the receiver's application reads them, they went into neither the metrics'
    counts of requests nor the access log, which promise every request."""
    with serve_process(tmp_path / "olbridge.db", "--access-log", env=environment()) as served:
        statuses = [
            raw(served.url, b"GET /p\x1b[31m HTTP/1.1\r\n\r\n"),
            raw(served.url, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
            raw(served.url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n"),
        ]
        metrics = requests.get(f"{served.url}/metrics", timeout=30).text
    assert statuses == [400, 414, 431]
    counted = {
        (m.group(1), int(m.group(2))): float(m.group(3))
        for m in re.finditer(r'olbridge_receiver_requests_total\{route="([^"]+)",status="(\d+)"\} (\S+)', metrics)
    }
    assert counted.get(("other", 400)) == 1 and counted.get(("other", 414)) == 1
    assert counted.get(("/healthz", 431)) == 1
    lines = [m.groupdict() for line in served.stderr.splitlines() if (m := TEXT.match(line))]
    refused = [(d["method"], d["status"]) for d in lines if d["status"] in ("400", "414", "431")]
    assert refused == [("GET", "400"), ("GET", "414"), ("GET", "431")], served.stderr
    assert "\x1b" not in served.stderr
