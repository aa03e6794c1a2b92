"""The CLI's rules: exit codes, which commands may create a catalog, removing a metadata key, and
options checked before any work (issue #10, items 4 to 7 and 12; the sweeps over every command
are in test_cli_sweep.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.catalog.engines import storage_error
from bridge.cli import cli
from tests.backend import Backend
from tests.helpers import decl, invoke, run
from tests.test_cli import line
from tests.test_validate import BASE_EVENT

# --- 4: operational errors ------------------------------------------------------------------


def test_export_to_a_path_it_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t")])
    code, _, err = invoke(db, "export", "--output", str(tmp_path))
    assert code == 1 and err.startswith(f"Error: cannot write {tmp_path}: Is a directory")


def test_demo_in_a_folder_it_cannot_make(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = invoke(tmp_path / "c.db", "demo", "--dir", str(a_file / "demo"))
    assert code == 1 and err.startswith(f"Error: cannot make the demo folder {a_file / 'demo'}: Not a directory")


def test_files_that_are_not_text(tmp_path: Path) -> None:
    binary = tmp_path / "blob"
    binary.write_bytes(b"\x00\xd0\xff" * 100)
    code, _, err = invoke(tmp_path / "c.db", "--config", str(binary), "init")
    assert code == 1 and err == f"Error: {binary}: not UTF-8 text\n"
    code, _, err = invoke(tmp_path / "c.db", "record", "--file", str(binary))
    assert code == 1 and f"Error: {binary}: not UTF-8 text" in err


def test_only_sqlite_errors_about_the_file_are_operational(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError) as fault:
        sqlite3.connect(":memory:").execute("SELEC 1")  # a fault in olbridge's SQL would look like this
    assert storage_error(fault.value, "c.db") is None  # it keeps its traceback
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("notes\n" * 100)
    with pytest.raises(sqlite3.DatabaseError) as damaged:
        sqlite3.connect(not_sqlite).execute("PRAGMA user_version")
    error = storage_error(damaged.value, not_sqlite)
    assert error is not None and str(error).startswith(f"catalog {not_sqlite}: not a catalog")


def test_a_catalog_holding_text_that_is_not_utf8_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """olbridge writes text only from str; a file changed by hand can hold TEXT that is not
    UTF-8, which sqlite3 cannot read back: every command that reads it says so, naming the
    catalog and the column."""
    db = tmp_path / "c.db"
    assert invoke(db, "assets", "set", "reports.daily", "--type", "File")[0] == 0
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t", outputs=(decl("reports.daily"),))])
        catalog._conn.execute("UPDATE assets SET display_name = CAST(x'61ff62' AS TEXT)")
        catalog._conn.commit()
    for command in (["assets", "list"], ["export", "--output", str(tmp_path / "out.ndjson")]):
        code, out, err = invoke(db, *command)
        assert code == 1 and out == "" and "Traceback" not in err, err
        said = err.strip().splitlines()[-1]
        assert said.startswith(f"Error: catalog {db}: it holds text that is not UTF-8"), said
        assert "column 'display_name'" in said


# --- 5: import's exit status -----------------------------------------------------------------


def events_file(path: Path, *events: object) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@pytest.mark.parametrize("strict", [[], ["--strict"]], ids=["marquez-rules", "strict"])
def test_import_exits_1_when_any_event_is_refused(tmp_path: Path, strict: list[str]) -> None:
    no_job = {k: v for k, v in BASE_EVENT.items() if k != "job"}
    refused = events_file(tmp_path / "refused.ndjson", no_job, no_job)
    code, _, err = invoke(tmp_path / "c.db", "import", str(refused), *strict)
    assert code == 1 and "2 refused" in err
    mixed = events_file(tmp_path / "mixed.ndjson", BASE_EVENT, no_job)
    code, out, _ = invoke(tmp_path / "c.db", "import", str(mixed), "--json", *strict)
    assert code == 1 and (json.loads(out)["accepted"], json.loads(out)["refused"]) == (1, 1)


def test_import_exits_0_when_every_event_is_taken_or_a_duplicate(tmp_path: Path) -> None:
    good = events_file(tmp_path / "good.ndjson", BASE_EVENT)
    assert invoke(tmp_path / "c.db", "import", str(good))[0] == 0
    code, _, err = invoke(tmp_path / "c.db", "import", str(good))
    assert code == 0 and "1 duplicates, 0 refused" in err


# --- 6: which commands may create a catalog --------------------------------------------------


def test_readers_refuse_a_missing_catalog_and_writers_create_it(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    code, out, err = invoke(db, "assets", "list")
    assert (code, out) == (1, "") and err == f"Error: no catalog at {db}; create one with olbridge init\n"
    assert not db.exists()
    code, _, _ = invoke(db, "assets", "set", "reports.daily", "--type", "File")
    assert code == 0 and db.exists()
    code, out, _ = invoke(db, "assets", "list", "--json")
    assert code == 0 and [a["id"] for a in json.loads(out)] == ["reports.daily"]
    assert invoke(tmp_path / "new.db", "init")[0] == 0 and (tmp_path / "new.db").exists()


def test_an_in_memory_catalog_is_not_a_missing_one(tmp_path: Path) -> None:
    code, out, _ = invoke(Path(":memory:"), "status", "--json")
    assert code == 0 and json.loads(out)["pending"] == 0
    assert not (Path.cwd() / ":memory:").exists()


# --- 7: removing a metadata key ---------------------------------------------------------------


def test_assets_set_removes_a_metadata_key_and_keeps_the_text_null(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code, out, _ = invoke(
        db, "assets", "set", "a.b", "--type", "Table", "--metadata", "owner=me", "--metadata", "env=x"
    )
    assert code == 0 and json.loads(out)["metadata"] == {"owner": "me", "env": "x"}
    code, out, _ = invoke(db, "assets", "set", "a.b", "--unset-metadata", "owner", "--metadata", "note=null")
    assert code == 0 and json.loads(out)["metadata"] == {"env": "x", "note": "null"}
    code, out, _ = invoke(db, "assets", "set", "a.b", "--metadata-json", '{"note": null}', "--unset-metadata", "env")
    assert code == 0 and json.loads(out)["metadata"] == {}
    code, _, err = invoke(db, "assets", "set", "a.b", "--metadata", "k=v", "--unset-metadata", "k")
    assert code == 2 and "'k' is both set and unset" in err
    help_text = CliRunner().invoke(cli, ["assets", "set", "--help"]).stdout
    assert "--unset-metadata KEY" in help_text and "Remove a metadata key" in help_text


# --- 12: small ones -----------------------------------------------------------------------------


def test_outbox_drop_and_retry_of_ids_that_are_not_there(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t")])
        seqs = [item.seq for item in catalog.outbox.items()]
    code, _, err = invoke(db, "outbox", "drop", str(seqs[0]), "99999")
    assert code == 1 and err == "Error: no outbox row with id 99999; nothing was dropped\n"
    code, _, err = invoke(db, "outbox", "retry", str(seqs[0]))  # pending, not a dead letter
    assert code == 1 and err == f"Error: no dead letter with id {seqs[0]}; nothing was queued\n"
    with Catalog(db) as catalog:
        assert [item.seq for item in catalog.outbox.items()] == seqs
    code, _, err = invoke(db, "outbox", "drop", str(seqs[0]))
    assert code == 0 and "dropped 1 row(s)" in err


@pytest.mark.parametrize(
    "command",
    [["export"], ["backfill", "--dry-run"], ["import", "--from-marquez", "http://127.0.0.1:9"]],
    ids=["export", "backfill", "import"],
)
def test_since_must_be_before_until(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "c.db"
    invoke(db, "init")
    code, out, err = invoke(db, *command, "--since", "2025-02-01", "--until", "2025-01-01T00:00:00Z")
    assert code == 2 and out == ""  # a bad value
    assert err == "Error: --since 2025-02-01 is not before --until 2025-01-01T00:00:00Z: the window is empty\n"
    code, _, err = invoke(db, *command, "--since", "2025-01-01", "--until", "2025-01-01")
    assert code == 2 and "the window is empty" in err


def test_the_rate_is_checked_in_a_dry_run_too(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    invoke(db, "init")
    code, _, err = invoke(db, "backfill", "--dry-run", "--rate", "fast")
    assert code == 2 and "'fast' is not a rate such as 500/s" in err
    assert invoke(db, "backfill", "--dry-run", "--rate", "500/s")[0] == 0
    # nan passed (no limit at all), and a rate so small an event took past a year a traceback
    for rate in ("nan/s", "inf", "1e-320", "0"):
        code, _, err = invoke(db, "backfill", "--dry-run", "--rate", rate)
        assert code == 2 and "the rate must be a finite number above 0" in err and "Traceback" not in err, rate


def test_record_file_and_flags_agree_on_a_missing_end(tmp_path: Path) -> None:
    records = tmp_path / "runs.jsonl"
    records.write_text(
        line(endDate=None) + "\n" + line(taskRunId="r2", state="RUNNING", endDate=None, outputs=[]) + "\n"
    )
    from_file, from_flags = tmp_path / "file.db", tmp_path / "flags.db"
    code, _, err = invoke(from_file, "record", "--file", str(records))
    assert code == 0, err
    code, _, err = invoke(
        from_flags, "record", "--namespace", "company.data", "--flow-id", "f", "--task-id", "t",
        "--execution-id", "e1", "--task-run-id", "r1", "--start", "2025-01-01T00:00:00Z",
        "--input", "raw.orders", "--output", '{"id": "mart.orders", "type": "Table", "metadata": {"env": "prod"}}',
    )  # fmt: skip
    assert code == 0, err
    with Catalog(from_file) as file_catalog, Catalog(from_flags) as flags_catalog:
        ended, running = list(file_catalog.iter_task_runs())
        [flagged] = list(flags_catalog.iter_task_runs())
    assert ended.ended_at == ended.started_at == flagged.ended_at
    assert running.ended_at is None


# --- command-line text that is not UTF-8 --------------------------------------------------------


def test_a_lone_surrogate_that_is_no_byte_is_said_as_a_character(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    code, _, err = invoke(db, "assets", "show", "caf\ud800")
    assert code == 2 and err == (
        "Error: ASSET_ID: not UTF-8 text (character 4 is U+D800, a lone surrogate); olbridge reads its arguments "
        "as UTF-8\n"
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["assets", "show", "caf\udce9"], "ASSET_ID"),
        (["assets", "delete", "caf\udce9"], "ASSET_ID"),
        (["assets", "set", "caf\udce9", "--type", "Table"], "ASSET_ID"),
        (["assets", "set", "a.b", "--type", "Table", "--description", "caf\udce9"], "--description"),
        (["lineage", "caf\udce9"], "ASSET_ID"),
        (["runs", "show", "caf\udce9"], "RUN_ID"),
        (["metaflow", "promote", "caf\udce9", "--project", "p", "--from", "a", "--to", "b"], "ASSET_ID"),
        (["export", "--namespace", "caf\udce9"], "--namespace"),
        (["backfill", "--dry-run", "--checkpoint", "caf\udce9"], "--checkpoint"),
        (["record", "--namespace", "o", "--flow-id", "f", "--task-id", "t", "--input", "caf\udce9"], "--input"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value,
)
def test_an_argument_that_is_not_utf8_is_a_bad_value(tmp_path: Path, args: list[str], named: str) -> None:
    """Bytes of the command line that are not UTF-8 come to Python as lone surrogates, which no
    catalog can store nor output carry: a bad value (exit status 2) naming the argument, before
    anything is done, not a traceback."""
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    before = db.read_bytes()
    code, out, err = invoke(db, *args)
    assert (code, out) == (2, ""), err
    assert err == f"Error: {named}: not UTF-8 text (byte 4 is 0xe9); olbridge reads its arguments as UTF-8\n"
    assert db.read_bytes() == before


def test_a_catalog_url_that_is_not_utf8_is_a_bad_value(tmp_path: Path) -> None:
    url = "postgresql://u@127.0.0.1:1/caf\udce9"
    result = CliRunner().invoke(cli, ["--catalog", url, "assets", "list"])
    assert result.exit_code == 2 and "the URL is not UTF-8 text" in result.stderr, result.output
    result = CliRunner().invoke(cli, ["catalog", "copy", str(tmp_path / "a.db"), url])
    assert result.exit_code == 2 and "the URL is not UTF-8 text" in result.stderr, result.output
    result = CliRunner().invoke(cli, ["assets", "list"], env={"OLBRIDGE_CATALOG": url})
    assert result.exit_code == 1 and "$OLBRIDGE_CATALOG: the catalog's URL is not UTF-8" in result.stderr


def test_bytes_that_are_not_utf8_on_a_real_command_line(tmp_path: Path) -> None:
    """As a shell passes them (``$'caf\\xe9'``): refused as text, taken as a file's name."""
    db = tmp_path / "c.db"
    assert invoke(db, "assets", "set", "a.b", "--type", "Table")[0] == 0
    olbridge = [sys.executable, "-m", "bridge", "--catalog", str(db)]
    done = subprocess.run([*olbridge, "assets", "show", b"caf\xe9"], capture_output=True, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, b""), done.stderr
    assert done.stderr == b"Error: ASSET_ID: not UTF-8 text (byte 4 is 0xe9); olbridge reads its arguments as UTF-8\n"
    output = os.fsencode(tmp_path) + b"/caf\xe9.ndjson"
    done = subprocess.run([*olbridge, "export", "--output", output], capture_output=True, cwd=tmp_path)
    assert done.returncode == 0 and os.path.isfile(output), done.stderr
    done = subprocess.run([*olbridge, "validate", output], capture_output=True, cwd=tmp_path)
    assert done.returncode == 0 and b"1 valid, 0 invalid" in done.stderr, done.stderr


# --- an empty value is not "not given" -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["stream", "--once", "--url", ""], "'--url'"),
        (["backfill", "--url", ""], "'--url'"),
        (["backfill", "--dry-run", "--checkpoint", ""], "'--checkpoint'"),
        (["backfill", "--dry-run", "--asset", " "], "'--asset'"),
        (["export", "--url", ""], "'--url'"),
        (["export", "--output", ""], "'--output'"),
        (["export", "--flow", ""], "'--flow'"),
        (["export", "--url", "http://127.0.0.1:1", "--api-key-file", ""], "'--api-key-file'"),
        (["import", "--from-marquez", ""], "'--from-marquez'"),
        (["import", ""], "'[FILES]...'"),
        (["validate", ""], "'FILES...'"),
        (["kestra", "import", ""], "'FILES...'"),
        (["record", "--file", ""], "'--file'"),
        (["record", "--namespace", "o", "--flow-id", "f", "--task-id", "t", "--task-run-id", ""], "'--task-run-id'"),
        (["runs", "list", "--job", ""], "'--job'"),
        (["runs", "list", "--namespace", ""], "'--namespace'"),
        (["lineage", "a.b", "--column", ""], "'--column'"),
        (["metaflow", "promote", "a.b", "--project", "", "--from", "a", "--to", "b"], "'--project'"),
        (["dbt", "import", "--project-dir", ""], "'--project-dir'"),
        (["dbt", "import", "--target", ""], "'--target'"),
        (["demo", "--dir", ""], "'--dir'"),
        (["serve", "--port", "0", "--tokens", ""], "'--tokens'"),
        (["prefect", "import", "--api-url", "http://127.0.0.1:1/api", "--api-key", ""], "'--api-key'"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value,
)
def test_an_empty_url_path_or_name_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], option: str
) -> None:
    """An option that takes a URL, a path or a name, given empty (``--url "$URL"`` with the
    variable unset), is a usage error naming it: not taken as "not given", which delivered to
    the default backend, dumped to stdout, resumed the default checkpoint or read the folder."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    before = db.read_bytes()
    code, out, err = invoke(db, *args)
    assert (code, out) == (2, ""), err
    assert f"Error: Invalid value for {option}: it is empty; give a" in err, err
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]


def test_an_empty_url_does_not_deliver_to_the_default_backend(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t")])
    with Backend() as backend:
        env = {"OPENLINEAGE_URL": backend.url, "OPENLINEAGE_CONFIG": str(tmp_path / "none.yml")}
        result = CliRunner(env=env).invoke(cli, ["--catalog", str(db), "stream", "--once", "--url", ""])
        assert result.exit_code == 2 and "Invalid value for '--url': it is empty" in result.stderr, result.output
        result = CliRunner(env=env).invoke(cli, ["--catalog", str(db), "backfill", "--url", ""])
        assert result.exit_code == 2 and "Invalid value for '--url': it is empty" in result.stderr, result.output
        assert backend.requests == 0
    result = CliRunner().invoke(cli, ["--config", "", "status"])
    assert result.exit_code == 2 and "Invalid value for '--config': it is empty; give a path" in result.stderr


def test_an_empty_health_namespace_is_named_by_its_option(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    code, _, err = invoke(db, "health", "--namespace", "")
    assert code == 2 and err.startswith("Error: --namespace: a namespace matches"), err


def test_assets_purge_of_an_id_that_names_no_asset_is_an_error_as_delete_is(tmp_path: Path) -> None:
    """``assets purge --id nope`` purged nothing and exited 0 where ``assets delete nope`` is an
    error: an --id that names no asset is one too (exit 1, naming it), and nothing is purged,
    not even the ids that name one; a dry run says the same."""
    db = tmp_path / "c.db"
    assert invoke(db, "assets", "set", "a.b", "--type", "Table")[0] == 0
    code, out, err = invoke(db, "assets", "delete", "nope")
    assert (code, out) == (1, "") and "no asset with id 'nope'" in err
    for extra in ([], ["--dry-run"]):
        code, out, err = invoke(db, "assets", "purge", "--id", "nope", *extra)
        assert (code, out) == (1, ""), err
        assert err == f"Error: no asset with id 'nope'; nothing was purged (catalog {db})\n"
    code, out, err = invoke(db, "assets", "purge", "--id", "a.b", "--id", "nope", "--id", "gone.too")
    assert (code, out) == (1, "") and "no asset with ids 'nope', 'gone.too'; nothing was purged" in err
    code, out, _ = invoke(db, "assets", "list", "--json")
    assert [a["id"] for a in json.loads(out)] == ["a.b"]
    code, out, err = invoke(db, "assets", "purge", "--id", "a.b")
    assert code == 0 and json.loads(out)["assets"] == 1, err
    code, out, err = invoke(db, "assets", "purge", "--type", "Table")  # a filter that matches none: no error
    assert code == 0 and json.loads(out)["assets"] == 0, err
