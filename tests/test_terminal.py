"""Text from the catalog is shown escaped on a terminal: a job or dataset named with ANSI escape
sequences, CR, LF, a tab or a bidi override cannot set the window title, clear the screen, move
the cursor or forge a row or a column, in any text output (one helper, bridge.shown.safe)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.outbox import Dead, DeliveryError
from bridge.cli.output import safe
from tests.helpers import invoke, run

EVIL_JOB = "evil\x1b]0;pwned\x07\x1b[2J\r\nFORGED\tROW\u202eexe.txt\x9b"
ESCAPED_JOB = "evil\\x1b]0;pwned\\x07\\x1b[2J\\r\\nFORGED\\tROW\\u202eexe.txt\\x9b"
RUN_ID = "0194a1b2-0000-7000-8000-000000000001"
EVIL_ANSWER = '{"error":"bad\x1b[2J\rFORGED\u202e"}'
ESCAPED_ANSWER = '{"error":"bad\\x1b[2J\\rFORGED\\u202e"}'


def test_safe_escapes_what_a_terminal_acts_on_and_keeps_the_rest() -> None:
    assert safe(EVIL_JOB) == ESCAPED_JOB
    assert safe("Zürich ☃ 日本 a\\b") == "Zürich ☃ 日本 a\\b"
    assert safe("\x00\x7f\u2028\u2066") == "\\x00\\x7f\\u2028\\u2066"


def imported(tmp_path: Path, job: str, **datasets: Any) -> Path:
    """A catalog that took one external event of ``job``, with these ``inputs`` and ``outputs``."""
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2025-03-01T08:00:00Z",
        "producer": "https://github.com/example/producer/tree/1.0",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_ID},
        "job": {"namespace": "airflow", "name": job},
        **datasets,
    }
    events = tmp_path / "events.ndjson"
    events.write_text(json.dumps(event) + "\n")
    db = tmp_path / "c.db"
    code, _, err = invoke(db, "import", str(events))
    assert code == 0, err
    return db


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    inputs = [{"namespace": "s3://lake", "name": "raw/orders.csv"}]
    return imported(
        tmp_path, EVIL_JOB, inputs=inputs, outputs=[{"namespace": "s3://lake", "name": "out\x1b[31m\nred.csv"}]
    )


@pytest.fixture
def answered(catalog: Path) -> Path:
    """The catalog with a backend's answer kept as it came: a dead letter's, the stream's last error."""
    with Catalog(str(catalog)) as opened:
        opened.record_task_runs([run("a")])
        first = opened.outbox.heads(now=0, limit=10)[0]
        opened.outbox.settle([Dead(first.seq, 1, 422, EVIL_ANSWER)], success_at="t")
        opened.outbox.record_error(
            DeliveryError("stream", "http://127.0.0.1:9/api", "refused", 422, EVIL_ANSWER, "2025-03-01T09:00:00Z")
        )
    return catalog


def shown(db: Path, *args: str) -> str:
    code, out, err = invoke(db, *args)
    assert code == 0, err
    assert "\x1b" not in out + err and "\r" not in out and "\u202e" not in out and "\x9b" not in out
    return out


def test_runs_list_escapes_a_job_name_and_it_forges_no_row(catalog: Path) -> None:
    out = shown(catalog, "runs", "list")
    header, row = out.splitlines()  # one run: one row under the header, no forged one
    assert header.count("\t") == row.count("\t")
    assert f"airflow/{ESCAPED_JOB}" in row.split("\t")


def test_lineage_escapes_names(catalog: Path) -> None:
    out = shown(catalog, "lineage", "s3://lake/raw/orders.csv")
    lines = out.splitlines()
    assert len(lines) == 2 and f"via airflow/{ESCAPED_JOB}" in lines[1]


def test_runs_show_escapes_the_job(catalog: Path) -> None:
    assert f"job:      airflow/{ESCAPED_JOB}\n" in shown(catalog, "runs", "show", RUN_ID)


# (``assets list`` shows ids, types and namespaces, which the catalog validates: none can hold one)
def test_a_backends_answer_is_shown_escaped(answered: Path) -> None:
    assert ESCAPED_ANSWER in shown(answered, "outbox", "list", "--dead")
    # status shows it on one line, a line break as a space
    assert ESCAPED_ANSWER.replace("\\r", " ") in shown(answered, "status")


def test_a_backends_answer_in_a_delivery_failure_line_is_escaped() -> None:
    """The line ``stream`` (and ``backfill``, ``export --url``) says on stderr of a failure holds the
    backend's answer: escaped as everywhere else (a BEL went to the terminal as it came)."""
    from bridge.delivery.report import describe
    from bridge.delivery.senders import Outcome

    said = describe(Outcome(ok=False, status=400, detail="\x1b[31mRED\nFAKE: line\r\x07"))
    assert said == "refused (HTTP 400 \\x1b[31mRED FAKE: line \\x07)"


def test_json_output_escapes_what_json_leaves_and_reads_back_the_same(catalog: Path) -> None:
    """JSON escapes C0 controls itself, not DEL, C1 controls (``\\x9b`` starts a terminal's
    escape sequence) or the marks that reorder text: ``runs show --json`` printed them raw."""
    out = shown(catalog, "runs", "show", RUN_ID, "--json")
    assert "\\u202e" in out and "\\u009b" in out
    assert json.loads(out)["job"]["name"] == EVIL_JOB


def test_health_escapes_what_it_shows(tmp_path: Path) -> None:
    """``olbridge health`` (its own JSON writer, and its lines) showed a check's name as it came."""
    failing = {"assertions": [{"assertion": "evil\x9b[2J\u202eexe", "success": False}]}
    facet = {"_producer": "https://github.com/example/producer/tree/1.0", "_schemaURL": "https://x/y.json", **failing}
    read = {"namespace": "s3://lake", "name": "t", "inputFacets": {"dataQualityAssertions": facet}}
    db = imported(tmp_path, "check", inputs=[read])
    for args in (("health", "--json"), ("health",)):
        code, out, err = invoke(db, *args)
        assert code == 1, err  # the asset is FAIL
        assert "\x9b" not in out and "\u202e" not in out, out
        assert "\\u009b" in out or "\\x9b" in out
    assert "evil\x9b[2J\u202eexe" in json.loads(invoke(db, "health", "--json")[1])[0]["reasons"][0]
