from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import responses
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.mapping import Resolver
from bridge.openlineage.validate import validate_event
from tests.conftest import at
from tests.helpers import decl, invoke, run
from tests.test_validate import BASE_EVENT

if TYPE_CHECKING:
    from tests.postgres import PostgresServer

pytestmark = pytest.mark.both_engines


def line(**overrides: object) -> str:
    record = {
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
    record.update(overrides)
    return json.dumps(record)


def test_record_file_then_list_show_lineage_export(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    records = tmp_path / "runs.jsonl"
    records.write_text(
        line()
        + "\n"
        + line(
            taskRunId="r2",
            taskId="t2",
            inputs=[{"id": "mart.orders"}],
            outputs=[{"id": "s3://b/report.csv", "type": "File"}],
        )
        + "\n"
    )
    code, out, _ = invoke(db, "record", "--file", str(records))
    assert code == 0
    assert json.loads(out)["created"] == 2
    code, out, _ = invoke(db, "assets", "list", "--json")
    listed = json.loads(out)
    assert [a["id"] for a in listed] == ["mart.orders", "raw.orders", "s3://b/report.csv"]
    assert set(listed[0]) >= {"id", "type", "namespace", "displayName", "description", "metadata", "origin"}
    assert listed[1]["origin"] == "external" and listed[0]["namespace"] is None
    code, out, _ = invoke(db, "assets", "list", "--json", "--where", "env", "EQUAL_TO", "prod")
    assert [a["id"] for a in json.loads(out)] == ["mart.orders"]
    # pages by id: each says where the next starts, none skipped or twice
    code, out, err = invoke(db, "assets", "list", "--json", "--limit", "2")
    assert [a["id"] for a in json.loads(out)] == ["mart.orders", "raw.orders"] and "health" in json.loads(out)[0]
    assert err == "2 asset(s); --after raw.orders shows the next\n"
    code, out, err = invoke(db, "assets", "list", "--limit", "2", "--after", "raw.orders")
    assert out.splitlines()[1].startswith("s3://b/report.csv\t") and len(out.splitlines()) == 2
    assert err == "1 asset(s)\n"
    code, out, err = invoke(db, "assets", "list", "--limit", "0")
    assert code == 2 and "--limit" in err
    code, out, _ = invoke(db, "assets", "show", "s3://b/report.csv")
    assert json.loads(out)["openlineage"] == {"namespace": "s3://b", "name": "report.csv", "rule": "s3"}
    code, out, _ = invoke(db, "lineage", "raw.orders", "--format", "mermaid")
    assert code == 0 and "-->" in out
    code, out, _ = invoke(db, "lineage", "s3://b/report.csv", "--direction", "upstream", "--format", "json")
    assert {e["upstream"] for e in json.loads(out)["edges"]} == {"raw.orders", "mart.orders"}
    events = tmp_path / "events.ndjson"
    code, _, err = invoke(db, "export", "--output", str(events))
    assert code == 0 and "exported 4 event(s)" in err
    assert all(validate_event(json.loads(x)) == [] for x in events.read_text().splitlines())
    code, _, _ = invoke(db, "validate", str(events))
    assert code == 0
    code, out, _ = invoke(db, "export", "--flow", "f", "--since", "2025-01-01")
    assert len(out.splitlines()) == 4


def test_a_bad_line_is_refused_with_its_number_and_nothing_is_recorded(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    records = tmp_path / "runs.jsonl"
    bad_id = line(taskRunId="r2", outputs=[{"id": "bad id!", "type": "Table"}])
    records.write_text("\n".join([line(), bad_id, "{oops", line(taskRunId="r4", state="NOPE")]) + "\n")
    invoke(db, "init")
    code, out, err = invoke(db, "record", "--file", str(records))
    assert code == 1
    assert "Error: 3 bad line(s); nothing was recorded" in err
    assert f"{records}:2: outputs[0].id:" in err
    assert f"{records}:3: not valid JSON" in err
    assert f"{records}:4: state: unknown task state 'NOPE'" in err
    code, out, _ = invoke(db, "assets", "list", "--json")
    assert json.loads(out) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["assets", "set", "bad id", "--type", "Table"], "name-form id"),
        (["assets", "set", "a.b", "--type", "table"], "did you mean 'Table'"),
        (["assets", "set", "a.b", "--type", "Table", "--namespace", "Team"], "namespace matches"),
        (["assets", "set", "a.b", "--type", "Table", "--metadata-json", '{"x": {"y": 1}}'], "metadata is flat"),
        (["assets", "set", "a.b", "--type", "Table", "--metadata", "novalue"], "KEY=VALUE"),
        (["assets", "show", "missing.asset"], "no asset with id"),
        (["assets", "purge"], "at least one filter"),
        (["assets", "list", "--where", "env", "LIKE", "x"], "unknown filter type"),
        (["export", "--since", "yesterday"], "not an ISO 8601 time"),
        (["record", "--namespace", "n"], "needs --flow-id"),
        (["dbt", "import", "--project-dir", "nowhere"], "project folder not found"),
    ],
)
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    tmp_path: Path, args: list[str], message: str, catalog_target: str
) -> None:
    db = catalog_target
    invoke(db, "init")
    code, _, err = invoke(db, *args)
    assert code != 0
    assert "Error: " in err  # usage errors print the usage line first
    assert message in err
    code, out, _ = invoke(db, "assets", "list", "--json")
    assert json.loads(out) == []


def test_set_delete_and_purge(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    code, out, _ = invoke(
        db,
        "assets",
        "set",
        "snapshot.vm.e1",
        "--type",
        "company.infra.Snapshot",
        "--namespace",
        "infra",
        "--metadata",
        "vm=web-01",
        "--description",
        "nightly",
    )
    assert code == 0 and json.loads(out)["metadata"] == {"vm": "web-01"}
    code, out, _ = invoke(db, "assets", "set", "snapshot.vm.e1", "--metadata-json", '{"vm": null, "keep": true}')
    assert json.loads(out)["metadata"] == {"keep": True}
    code, out, _ = invoke(db, "assets", "delete", "snapshot.vm.e1")
    assert json.loads(out)["deleted"] is not None
    code, out, _ = invoke(db, "export")
    assert (
        json.loads(out.splitlines()[-1])["dataset"]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    )
    code, out, _ = invoke(db, "assets", "purge", "--namespace", "infra", "--dry-run")
    assert json.loads(out) == {"wouldPurge": ["snapshot.vm.e1"]}
    code, out, _ = invoke(db, "assets", "purge", "--namespace", "infra", "--with-usages", "--with-lineage")
    assert json.loads(out)["assets"] == 1


def test_record_one_run_from_flags(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    code, out, err = invoke(
        db,
        "record",
        "--namespace",
        "ops",
        "--flow-id",
        "backup",
        "--task-id",
        "snap",
        "--execution-id",
        "e9",
        "--start",
        "2025-01-01T00:00:00Z",
        "--end",
        "2025-01-01T00:05:00Z",
        "--input",
        "vm-web-01",
        "--output",
        '{"id": "snapshot.vm-web-01.e9", "type": "company.infra.Snapshot"}',
    )
    assert code == 0, err
    assert json.loads(out)["placeholders"] == 1


def test_validate_reports_line_numbers(tmp_path: Path) -> None:
    events = tmp_path / "e.ndjson"
    good = BASE_EVENT
    bad = {**good, "eventTime": "2025-01-01"}
    events.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\nnot json\n")
    result = CliRunner().invoke(cli, ["validate", str(events)])
    assert result.exit_code == 1
    assert f"{events}:2: /eventTime: must be an RFC 3339 date-time" in result.stdout
    assert f"{events}:3: not valid JSON" in result.stdout
    assert "3 event(s), 1 valid, 2 invalid" in result.stderr


def test_validate_receiver_shows_what_the_receiver_would_do(tmp_path: Path) -> None:
    events = tmp_path / "e.ndjson"
    naive = {**BASE_EVENT, "eventTime": "2025-01-01T00:00:00"}  # taken with a warning
    bad = {**BASE_EVENT, "eventTime": "2025-01-01"}  # refused
    events.write_text("\n".join(json.dumps(e) for e in (BASE_EVENT, naive, bad)) + "\n")
    result = CliRunner().invoke(cli, ["validate", "--receiver", str(events)])
    assert result.exit_code == 1  # one would be refused
    assert f"{events}:2: warning: /eventTime: must be an RFC 3339 date-time" in result.stdout
    assert f"{events}:3: refused: /eventTime: must be an RFC 3339 date-time" in result.stdout
    assert "3 event(s): 1 taken, 1 taken with warnings, 1 refused" in result.stderr
    events.write_text("\n".join(json.dumps(e) for e in (BASE_EVENT, naive)) + "\n")
    assert CliRunner().invoke(cli, ["validate", "--receiver", str(events)]).exit_code == 0
    assert CliRunner().invoke(cli, ["validate", str(events)]).exit_code == 1  # the spec checker refuses it
    both = CliRunner().invoke(cli, ["validate", "--receiver", "--no-marquez", str(events)])
    assert both.exit_code == 2 and "--receiver judges by Marquez's contract" in both.stderr


@responses.activate
def test_export_to_an_http_endpoint(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    records = tmp_path / "runs.jsonl"
    records.write_text(line() + "\n")
    invoke(db, "record", "--file", str(records))
    responses.add(responses.POST, "http://marquez.test:5000/api/v1/lineage", status=201)
    code, _, err = invoke(db, "export", "--url", "http://marquez.test:5000", "--api-key", "k")
    assert code == 0, err
    assert len(responses.calls) == 2
    assert responses.calls[0].request.headers["Authorization"] == "Bearer k"
    assert json.loads(responses.calls[0].request.body)["eventType"] == "START"
    responses.replace(
        responses.POST, "http://marquez.test:5000/api/v1/lineage", status=422, json={"errors": ["job must not be null"]}
    )
    code, _, err = invoke(db, "export", "--url", "http://marquez.test:5000")
    assert code == 1 and "HTTP 422" in err and "job must not be null" in err


def test_demo(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert "reports.second_model_report" in result.stdout
    assert "0 invalid" in result.stdout
    events = (tmp_path / "demo" / "events.ndjson").read_text().splitlines()
    assert len(events) == 6


def test_the_demo_starts_afresh_only_over_its_own_catalog(tmp_path: Path) -> None:
    """Run again in its folder, the demo starts from a new catalog; given a folder that holds
    someone's catalog (or a folder by its name), it refuses and leaves it as it is."""
    folder = tmp_path / "demo"
    for _ in range(2):
        result = CliRunner().invoke(cli, ["demo", "--dir", str(folder)])
        assert result.exit_code == 0, result.output
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    code, _, err = invoke(theirs / "olbridge.db", "assets", "set", "mine.table", "--type", "Table")
    assert code == 0, err
    result = CliRunner().invoke(cli, ["demo", "--dir", str(theirs)])
    assert result.exit_code == 1 and "is not a catalog the demo made" in result.stderr, result.output
    code, out, err = invoke(theirs / "olbridge.db", "assets", "list", "--json")
    assert code == 0 and [a["id"] for a in json.loads(out)] == ["mine.table"], err
    (tmp_path / "odd" / "olbridge.db").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "odd")])
    assert result.exit_code == 1 and "is not a catalog the demo made" in result.stderr, result.output
    # nor does it write its events over someone's file, and it makes no catalog beside it
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "events.ndjson").write_text('{"eventType": "COMPLETE", "job": {"namespace": "mine"}}\n')
    result = CliRunner().invoke(cli, ["demo", "--dir", str(mine)])
    assert result.exit_code == 1 and "is not a file the demo wrote" in result.stderr, result.output
    assert (mine / "events.ndjson").read_text().startswith('{"eventType": "COMPLETE", "job": {"namespace": "mine"}}')
    assert sorted(p.name for p in mine.iterdir()) == ["events.ndjson"]
    # ... though one it wrote, of a catalog it was given whose first run is another flow's, or one
    # left empty by a demo stopped while exporting, it writes again
    given = tmp_path / "given.db"
    code, _, err = invoke(given, "record", "--namespace", "other", "--flow-id", "f", "--task-id", "t",
                          "--execution-id", "e", "--start", "2000-01-01T00:00:00Z")  # fmt: skip
    assert code == 0, err
    into = ["--catalog", str(given), "demo", "--dir", str(tmp_path / "in"), "--in-catalog"]
    for _ in range(2):
        result = CliRunner().invoke(cli, into)
        assert result.exit_code == 0, result.output
    (folder / "events.ndjson").write_text("")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(folder)])
    assert result.exit_code == 0, result.output


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and "olbridge" in result.stdout


def test_file_and_run_flags_do_not_mix(tmp_path: Path, catalog_target: str) -> None:
    records = tmp_path / "runs.jsonl"
    records.write_text(line() + "\n")
    code, _, err = invoke(catalog_target, "record", "--file", str(records), "--state", "SUCCESS")
    assert code == 2 and "--file cannot be combined with --state" in err


def test_a_role_without_privileges_on_a_catalog_is_told_so_not_that_there_is_none(postgres: PostgresServer) -> None:
    """information_schema shows a role only the tables it has privileges on: to one with none, the
    catalog looked absent ("no catalog at ...; create one with olbridge init")."""
    database = postgres.create_database()
    assert CliRunner().invoke(cli, ["--catalog", postgres.url(database), "init"]).exit_code == 0
    result = CliRunner().invoke(cli, ["--catalog", postgres.url(database, password=True), "status"])
    assert result.exit_code == 1 and "permission denied" in result.stderr, result.output
    assert "no catalog" not in result.stderr and postgres.password not in result.stderr


def test_a_storage_error_after_the_catalog_opened_never_shows_the_urls_password(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong password fails the catalog's opening, which masks it; this is the other way: the
    catalog is open when a driver's error about the storage comes, its message holding the URL (as
    libpq's may), and the command says it with the password masked."""
    import psycopg  # the PostgreSQL tests' own dependency

    url = postgres.url(postgres.create_database(owner=postgres.password_role), password=True)
    assert CliRunner().invoke(cli, ["--catalog", url, "init"]).exit_code == 0

    def lost(*args: object, **kwargs: object) -> None:
        raise psycopg.OperationalError(f"connection to {url} lost: server closed the connection unexpectedly")

    monkeypatch.setattr(Catalog, "list_assets", lost)
    done = CliRunner().invoke(cli, ["--catalog", url, "assets", "list"])
    assert done.exit_code == 1, done.output
    assert postgres.password not in done.output
    assert "Error: catalog postgresql://olbridge_pw:***@" in done.stderr
    assert "(PostgreSQL: connection to postgresql://olbridge_pw:***@" in done.stderr


def _bad_inputs(folder: Path) -> dict[str, list[str]]:
    """Each file-reading import, given an input it refuses (made under ``folder``)."""
    (folder / "empty").mkdir()
    (folder / "lineage.ndjson").write_text('{"not": "a record"}\n', encoding="utf-8")
    (folder / "flow.yml").write_text("id: [unclosed\n", encoding="utf-8")
    (folder / "events.ndjson").write_text('{"eventType": "START"}\n', encoding="utf-8")
    # one task run twice, of two tasks: read well, refused by the write (a task run ended twice in
    # two states is Kestra's restart, taken as its next attempt)
    (folder / "twice.ndjson").write_text(f"{line()}\n{line(taskId='other')}\n", encoding="utf-8")
    nobody = "http://127.0.0.1:9"  # loopback's discard port: nothing listens, refused at once
    return {
        "import": ["import", str(folder / "events.ndjson")],
        "dbt import": ["dbt", "import", "--project-dir", str(folder / "empty")],
        "kestra import": ["kestra", "import", str(folder / "lineage.ndjson")],
        "kestra declare": ["kestra", "declare", str(folder / "flow.yml")],
        "metaflow declare": ["metaflow", "declare", str(folder / "empty"), "--project", "shop", "--branch", "main"],
        "kestra import, refused by the write": ["kestra", "import", str(folder / "twice.ndjson")],
        "prefect import": ["prefect", "import", "--api-url", f"{nobody}/api", "--no-wait"],
        "import --from-marquez": ["import", "--from-marquez", nobody],
    }


@pytest.mark.parametrize(
    "command",
    [
        "dbt import",
        "kestra import",
        "kestra declare",
        "metaflow declare",
        "import",
        "kestra import, refused by the write",
        "prefect import",
        "import --from-marquez",
    ],
)
def test_an_import_refused_for_its_input_makes_no_catalog(tmp_path: Path, command: str) -> None:
    """A refused input changes nothing, not even by leaving a new, empty catalog at the path
    (which would then open as one that holds nothing, not as one missing): the catalog is made
    once the input is read (events: at the first one taken), and one made for an input refused
    after (by the write, or a server that cannot be reached) is taken away again."""
    catalog = tmp_path / "new.db"
    code, _, err = invoke(catalog, *_bad_inputs(tmp_path)[command])
    said = "refused " if command == "import" else "Error: "  # an import of events reports each it refused
    assert code != 0 and said in err, err
    assert not catalog.exists() and list(tmp_path.glob("new.db*")) == []


def test_a_new_catalog_another_process_opened_is_not_discarded(tmp_path: Path) -> None:
    """The catalog a failing command made is taken away only when no other connection has it
    open (a receiver started on the same new path meanwhile keeps it), and what was at the path
    before (an empty file) is never taken: it was not made here."""
    path = tmp_path / "new.db"
    made, other = Catalog(path), Catalog(path)
    try:
        assert made.made and not made.discard() and path.exists()
        assert made._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # left as it was
        other.record_task_run(run("t", outputs=(decl("mart.a", type="Table"),), start=at(0)))
    finally:
        other.close()
    assert not made.discard() and path.exists()  # it holds something now
    made.close()
    alone = Catalog(tmp_path / "alone.db")
    assert alone.discard() and list(tmp_path.glob("alone.db*")) == []
    assert not alone.discard()  # gone: nothing more to do
    (tmp_path / "empty.db").write_bytes(b"")
    there = Catalog(tmp_path / "empty.db")
    assert not there.made and not there.discard() and (tmp_path / "empty.db").exists()
    there.close()


def test_a_refused_input_leaves_a_catalog_that_was_there_as_it_was(tmp_path: Path) -> None:
    """Only a catalog the refused command made is taken away: one made before (by ``init``,
    holding nothing) stays, and so does a new one the command wrote to before it failed."""
    catalog = tmp_path / "kept.db"
    assert invoke(catalog, "init")[0] == 0
    code, _, err = invoke(catalog, *_bad_inputs(tmp_path)["kestra import, refused by the write"])
    assert code == 1 and "is recorded for task 't', not 'other'" in err and catalog.exists()
    assert invoke(catalog, "assets", "list", "--json")[0] == 0
    written = tmp_path / "written.db"  # a first file recorded, the second refused by the write
    (tmp_path / "first.ndjson").write_text(f"{line(taskRunId='r0')}\n", encoding="utf-8")
    code, _, err = invoke(written, "kestra", "import", str(tmp_path / "first.ndjson"))
    assert code == 0 and written.exists()
    code, _, err = invoke(written, "kestra", "import", str(tmp_path / "twice.ndjson"))
    assert code == 1 and written.exists()
    code, out, _ = invoke(written, "runs", "list", "--json")
    assert code == 0 and len(json.loads(out)) == 1, out


@pytest.mark.parametrize(
    ("option", "command"),
    [("--catalog", ["assets", "list"]), ("--config", ["assets", "list"]), ("--catalog", ["demo"])],
    ids=["catalog", "config", "a-near-option"],  # demo has --in-catalog, which click would suggest
)
def test_olbridge_s_own_option_after_a_command_says_where_it_goes(
    tmp_path: Path, option: str, command: list[str]
) -> None:
    result = CliRunner().invoke(cli, [*command, option, str(tmp_path / "x")])
    assert result.exit_code == 2
    said = result.stderr.strip().splitlines()[-1]
    assert said == (
        f"Error: No such option '{option}': {option} is olbridge's own, before the command: "
        f"olbridge {option} ... {' '.join(command)} ..."
    )


def test_json_of_a_path_that_is_no_utf8_is_utf8(tmp_path: Path) -> None:
    """A catalog path whose name is no UTF-8 (``caf\\xe9.db``) was written into the JSON on stdout
    as its raw byte: text no JSON reader takes. It is its escape, as messages show it."""
    import subprocess
    import sys

    folder = os.fsencode(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "--catalog", folder + b"/caf\xe9.db", "init"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.decode("utf-8"))
    assert found["catalog"].endswith("caf\udce9.db")


def test_a_bad_asset_id_given_to_assets_set_is_a_usage_error_named_by_its_argument(tmp_path: Path) -> None:
    """``assets set 'bad id'`` said ``Error: id: ...`` and exited 1, where the same bad value given to
    another command is a usage error (exit status 2) named as given."""
    code, _, err = invoke(tmp_path / "c.db", "assets", "set", "bad id", "--type", "Table")
    said = err.strip().splitlines()[-1]
    assert code == 2 and said.startswith("Error: ASSET_ID: a name-form id has only letters"), err
    assert not (tmp_path / "c.db").exists()


def test_a_bad_record_flag_is_named_as_given(tmp_path: Path) -> None:
    """``record``'s flags fill a task run record; a bad one is named by the flag the user typed
    (``--start``), not by the record's field (``startDate``), each of several at once: a usage
    error (exit status 2), nothing done."""
    flags = ["record", "--namespace", "Bad NS", "--flow-id", "f", "--task-id", "t", "--execution-id", "e"]
    code, _, err = invoke(tmp_path / "c.db", *flags, "--start", "yesterday", "--end", "nope")
    assert code == 2 and "startDate" not in err and "endDate" not in err, err
    said = err.strip().splitlines()[-1]
    assert said.startswith("Error: --namespace: a namespace matches") and "; --start: not an ISO 8601 time" in said
    assert "; --end: not an ISO 8601 time: 'nope'" in said
    assert not (tmp_path / "c.db").exists()
    code, _, err = invoke(tmp_path / "c.db", *flags[:2], "ops", *flags[3:], "--start", "2025-01-01T00:00:00Z",
                          "--input", "", "--output", '{"id": "x", "type": "T"}')  # fmt: skip
    said = err.strip().splitlines()[-1]
    assert code == 2 and not (tmp_path / "c.db").exists()
    assert said.startswith("Error: --input[0].id: ") and "; --output[0].type: unknown asset type 'T'" in said, err
    # a run not ended given an end: it was kept as ended, and a failing asset's last failed run
    # was hidden behind it (health said UNKNOWN, exit 0)
    code, _, err = invoke(tmp_path / "c.db", *flags[:2], "ops", *flags[3:], "--start", "2025-01-01T00:00:00Z",
                          "--end", "2025-01-01T00:05:00Z", "--state", "RUNNING")  # fmt: skip
    said = err.strip().splitlines()[-1]
    assert code == 2 and said == "Error: --end: state RUNNING has not ended, so it takes no end time", err
    assert not (tmp_path / "c.db").exists()
    # outputs of a run not ended: named by the flag too (it was the field, and exit status 1)
    code, _, err = invoke(tmp_path / "c.db", *flags[:2], "ops", *flags[3:], "--start", "2025-01-01T00:00:00Z",
                          "--state", "RUNNING", "--output", '{"id": "z.z", "type": "Table"}')  # fmt: skip
    said = err.strip().splitlines()[-1]
    assert code == 2 and said.startswith("Error: --output: outputs are written when a task run ends"), err
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["assets", "list", "--where", "dbtTestStatus", "EQ", "fail"], "Error: --where dbtTestStatus: unknown filter"),
        (["assets", "list", "--type", "Tabel"], "Error: --type: unknown asset type 'Tabel'"),
        (["assets", "purge", "--type", "Tabel"], "Error: --type: unknown asset type 'Tabel'"),
        (["assets", "set", "reports.daily", "--metadata", "owner"], "Error: --metadata: expected KEY=VALUE"),
        (["assets", "set", "reports.daily", "--metadata-json", "[1]"], "Error: --metadata-json: must be a JSON"),
    ],
)
def test_a_bad_option_value_is_a_usage_error(tmp_path: Path, args: list[str], says: str) -> None:
    """A value an option cannot take is a usage error (exit status 2, as cli.md says), named by the
    option, and changes nothing; not an error of the command's work (1)."""
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    before = db.read_bytes()
    code, out, err = invoke(db, *args)
    assert (code, out) == (2, "") and err.strip().splitlines()[-1].startswith(says), err
    assert db.read_bytes() == before


_RECORD_FLAGS = ("record", "--namespace", "ops", "--flow-id", "f", "--task-id", "t", "--execution-id", "e",
                 "--start", "2025-01-01T00:00:00Z")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--metadata-json", '{"a": "\\ud800"}'], "Error: --metadata-json: not valid JSON: no low surrogate"),
        (["--metadata-json", '{"a": ' + "1" * 5000 + "}"], "not valid JSON: an integer of 5000"),
        (["--metadata-json", '{"a": ' + "1" * 2000 + "}"], "not valid JSON: an integer of 2000"),
        (["--metadata-json", '{"a": NaN}'], "Error: --metadata-json: not valid JSON: "),
        (["--metadata-json", '{"a": [1]}'], "Error: --metadata-json a: metadata is flat"),
        (["--metadata-json", '{"a": "\\u0000"}'], "Error: --metadata-json a: metadata key 'a' holds a NUL"),
        (["--namespace", ""], "Error: --namespace: a namespace matches"),
        (["--display-name", "d" * 1001], "Error: --display-name: has at most 1000 characters"),
    ],
)
def test_assets_set_reads_its_json_by_the_json_rules(tmp_path: Path, args: list[str], says: str) -> None:
    """``--metadata-json`` is read as every JSON olbridge reads is (no lone surrogates, no NaN,
    integers of at most 1,000 digits): a value past them is a usage error named by the option, not
    a traceback, nor stored; so is a value the declaration refuses, named by the option that gave it."""
    db = tmp_path / "c.db"
    assert invoke(db, "assets", "set", "a.b", "--type", "Table")[0] == 0
    before = db.read_bytes()
    code, out, err = invoke(db, "assets", "set", "a.b", "--type", "Table", *args)
    said = err.strip().splitlines()[-1]
    assert (code, out) == (2, "") and said.startswith("Error: --") and says in said, err
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    ("output", "says"),
    [
        ('{"id": "a.d", "type": "Table", "description": "\\ud800"}', "no low surrogate in string"),
        ('{"id": "a.d", "type": "Table", "metadata": {"k": ' + "9" * 5000 + "}}", "an integer of 5000 digits"),
        ('{"id": "a.d", "type": "Table", "metadata": {"k": NaN}}', "not a valid JSON object"),
    ],
)
def test_record_reads_its_json_flags_by_the_json_rules(tmp_path: Path, output: str, says: str) -> None:
    """``record --output '{...}'`` is read by the JSON rules too: a usage error naming the flag."""
    db = tmp_path / "c.db"
    code, out, err = invoke(db, *_RECORD_FLAGS, "--output", output)
    said = err.strip().splitlines()[-1]
    assert (code, out) == (2, "") and said.startswith("Error: --output[0]: ") and says in said, err
    assert not db.exists()


@pytest.mark.parametrize("args", [["list"], ["purge"]])
def test_an_empty_namespace_filter_is_named_by_its_option(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    code, _, err = invoke(db, "assets", *args, "--namespace", "")
    assert code == 2 and err.strip().splitlines()[-1].startswith("Error: --namespace: a namespace matches"), err


def test_a_file_named_like_an_option_is_not_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's problem is named by the file, whose name may begin with "--" (given after "--"):
    not taken for an option's bad value (exit 1, as for any file)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke(tmp_path / "c.db", "import", "--", "--nowhere.jsonl")
    assert code == 1 and "Error: --nowhere.jsonl: file not found" in err, err


def test_assets_show_and_lineage_find_an_own_asset_by_its_openlineage_name(tmp_path: Path) -> None:
    """The name Marquez shows for one of olbridge's own assets (its events') finds it, as its id
    does; a name nothing is known by is an error naming the catalog."""
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    db = tmp_path / "demo" / "olbridge.db"
    with Catalog(db) as catalog:
        asset = catalog.asset("dbt.main.my_first_dbt_model")
    named = Resolver.load().dataset_for(asset.id, asset.type, asset.metadata)
    code, out, err = invoke(db, "assets", "show", f"{named.namespace}/{named.name}")
    assert code == 0 and json.loads(out)["id"] == asset.id, err
    code, out, err = invoke(db, "lineage", f"{named.namespace}/{named.name}", "--format", "json")
    assert code == 0 and json.loads(out)["root"] == asset.id, err
    code, _, err = invoke(db, "assets", "show", f"elsewhere/{named.name}")
    assert code == 1 and err.startswith("Error: no asset with id") and f"(catalog {db})" in err


@pytest.mark.parametrize(
    ("asset_id", "named"),
    [("s3a://lake/raw/orders", "s3://lake/raw/orders"), ("s3://lake/raw/trail/", "s3://lake/raw/trail")],
)
def test_an_own_asset_is_found_by_every_spelling_its_events_name(tmp_path: Path, asset_id: str, named: str) -> None:
    """The rules name ``s3a://`` ids ``s3://`` and drop a trailing slash: the name Marquez shows
    finds the asset all the same; a text too long to be a name finds nothing, at once."""
    db = tmp_path / "c.db"
    assert invoke(db, "assets", "set", asset_id, "--type", "File")[0] == 0
    code, out, err = invoke(db, "assets", "show", named)
    assert code == 0 and json.loads(out)["id"] == asset_id, err
    with Catalog(db) as catalog:
        assert catalog.named_in_openlineage(named, Resolver.load()) == [asset_id]
        assert catalog.named_in_openlineage("a/" * 5000, Resolver.load()) == []


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_command_interrupted_says_so_and_leaves_nothing_half_done(tmp_path: Path, stop: str) -> None:
    """Ctrl-C during a command without a stop of its own (`record`, `validate`, `catalog copy`)
    printed click's bare "Aborted!", and SIGTERM ended it without a word (exit -15): an `Error:`
    line says what happened, exit 1, and nothing is recorded."""
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "c.db"
    Catalog(db).close()
    olbridge = str(Path(sys.executable).parent / "olbridge")
    process = subprocess.Popen(
        [olbridge, "--catalog", str(db), "record", "--file", "-"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write(line() + "\n")
    process.stdin.flush()
    time.sleep(1.5)  # reading: it waits for the rest
    process.send_signal(getattr(signal, stop))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    name = "Ctrl-C" if stop == "SIGINT" else "SIGTERM"
    assert f"Error: interrupted ({name}) before the end" in stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    with Catalog(db) as catalog:
        assert catalog.count_task_runs() == 0
