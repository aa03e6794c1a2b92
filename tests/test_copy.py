"""``olbridge catalog copy SRC DST``: a catalog copied between engines, and checked table by table.

A SQLite catalog of many task runs (with column lineage, declared jobs, asset changes, received
events, outbox rows, a position) copied into PostgreSQL and back gives byte-identical exports; a
destination that holds rows is refused and left as it was; the counting keys go on past the
copied ones; a password in a URL is never printed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.catalog import Catalog, writes_kept
from bridge.catalog.copy import copy_catalog, count_rows
from bridge.catalog.health_state import LEASE_KIND
from bridge.catalog.positions import Position
from bridge.catalog.retention import take_lease
from bridge.cli import cli
from bridge.delivery.health_watch import HealthWatch, WatchSettings
from bridge.errors import CatalogError
from bridge.mapping import Resolver
from bridge.receiver.imports import catalog_intake
from tests.conftest import ROOT, at
from tests.helpers import catalog_state, decl, invoke, ol_dataset, ol_run_event, run
from tests.postgres import PostgresServer
from tests.test_faults import fill
from tests.test_scale import overlapping_events

RUNS = 3_000  # the figure for 100,000: python benchmarks/scale.py --copy-runs 100000


def olbridge(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def export(catalog: str | Path, folder: Path, name: str) -> bytes:
    out = folder / f"{name}.ndjson"
    code, _, stderr = invoke(catalog, "export", "--output", str(out))
    assert code == 0, stderr
    return out.read_bytes()


@pytest.fixture
def rich(tmp_path: Path, resolver: Resolver) -> Path:
    """A SQLite catalog with something in nearly every table."""
    db = tmp_path / "source.db"
    with Catalog(db) as catalog:
        fill(catalog, RUNS)
        # a run that failed on an output its task never wrote: its unwritten outputs
        catalog.record_task_run(run("build", outputs=(decl("rebuilt.table", type="Table"),)))
        catalog.record_task_run(run("rebuild", outputs=(decl("rebuilt.table"),), state="FAILED", start=at(5)))
        intake = catalog_intake(catalog, resolver)
        assert all(o.ok for o in intake.take(overlapping_events(30)))
        symlinked = ol_dataset(
            "postgres://warehouse:5432",
            "analytics.public.orders",
            symlinks={"identifiers": [{"namespace": "hive://metastore", "name": "shop.orders", "type": "TABLE"}]},
        )
        assert intake.take([ol_run_event("COMPLETE", outputs=[symlinked])])[0].ok
        catalog.save_position(Position("marquez-import", "http://marquez:5000", {"after": "x"}, "2025-03-01T00:00:00Z"))
        HealthWatch(catalog, WatchSettings()).run_once()  # each asset's health kept
        # a watch live (its lease held an hour): the commands below mark some assets
        assert take_lease(catalog.db, "a watch", time.time(), 3600.0, kind=LEASE_KIND)
    for args in (
        ("demo", "--dir", str(tmp_path / "demo"), "--in-catalog"),  # dbt runs with column lineage
        ("kestra", "declare", str(ROOT / "tests" / "kestra" / "dbt_build_with_lineage.yml")),
        ("assets", "set", "reports.daily", "--type", "File", "--metadata", "owner=analytics"),
        ("assets", "delete", "reports.daily"),
        ("assets", "set", "dbt.main.my_first_dbt_model", "--freshness", "6h", "--freshness-warn", "2h"),
    ):
        code, _, stderr = invoke(db, *args)
        assert code == 0, (args, stderr)
    with Catalog(db) as catalog, catalog.transaction() as cur:  # what retention keeps of runs it deletes
        sources = [row[0] for row in cur.execute("SELECT source FROM external_sources WHERE run_id IS NOT NULL")]
        writes_kept.fold_received(cur, sources)
        writes_kept.fold_own(cur, [row[0] for row in cur.execute("SELECT pk FROM task_runs")])
    with Catalog(db) as catalog:
        empty = [name for name, rows in count_rows(catalog).items() if not rows]
    assert set(empty) <= {"backfill_refused", "delivery_errors", "outbox_delivery", "outbox_lease", "stream_workers"}
    return db


def test_into_postgresql_and_back_gives_identical_exports(rich: Path, postgres_url: str, tmp_path: Path) -> None:
    original = export(rich, tmp_path, "original")
    assert original.count(b"\n") > 2 * RUNS
    code, stdout, stderr = olbridge("catalog", "copy", str(rich), postgres_url, "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    with Catalog(rich) as catalog:
        counts = count_rows(catalog)
    assert report["same"] is True and report["rows"] == sum(counts.values())
    assert {t["table"]: t["rows"] for t in report["tables"]} == counts
    assert all(t["digest"] == t["destinationDigest"] and t["same"] for t in report["tables"])
    assert "copying: " in stderr and "checking: " in stderr  # the progress, on stderr
    back = tmp_path / "back.db"
    code, stdout, stderr = olbridge("catalog", "copy", postgres_url, str(back))
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].split()[:2] == ["table", "rows"] and lines[-1].endswith(": every table the same")
    shown = {line.split()[0]: (int(line.split()[1].replace(",", "")), line.split()[2]) for line in lines[1:-1]}
    assert {name: rows for name, (rows, _) in shown.items()} == counts
    assert {name: digest for name, (_, digest) in shown.items()} == {t["table"]: t["digest"] for t in report["tables"]}
    assert export(postgres_url, tmp_path, "postgresql") == original
    assert export(back, tmp_path, "back") == original
    # the catalogs themselves, table by table, keys included (the copy keeps them), read here and
    # not by the copy tool's own check
    with Catalog(rich) as source, Catalog(postgres_url) as copied, Catalog(back) as copied_back:
        expected = catalog_state(source, keys=True)
        assert set(expected) == set(counts)
        for name, rows in catalog_state(copied, keys=True).items():
            assert rows == expected[name], name
        for name, rows in catalog_state(copied_back, keys=True).items():
            assert rows == expected[name], name


def test_a_destination_that_holds_rows_is_refused_and_left_alone(rich: Path, postgres_url: str) -> None:
    code, _, stderr = invoke(postgres_url, "record", "--namespace", "ops", "--flow-id", "f", "--task-id", "t",
                             "--execution-id", "e1", "--start", "2025-01-01T00:00:00Z")  # fmt: skip
    assert code == 0, stderr
    with Catalog(postgres_url) as catalog:
        before = count_rows(catalog)
    code, stdout, stderr = olbridge("catalog", "copy", str(rich), postgres_url)
    assert code == 1 and stdout == ""
    assert stderr.strip().splitlines()[-1] == (
        f"Error: catalog {postgres_url} is not empty (1 row(s) in executions and 3 other table(s)): copy into a "
        "new catalog (a new file, an empty database or schema)"
    )
    with Catalog(postgres_url) as catalog:
        assert count_rows(catalog) == before
    code, _, stderr = olbridge("catalog", "copy", str(rich), str(rich))
    assert code == 1 and "SRC and DST are the same catalog" in stderr
    code, _, stderr = olbridge("catalog", "copy", str(rich.with_name("missing.db")), postgres_url)
    assert code == 1 and "no catalog at" in stderr


def test_catalogs_that_cannot_be_copied_are_named(rich: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("these are my notes, not a catalog\n" * 100)
    for source, destination, expected in (
        (notes, tmp_path / "a.db", f"{notes}"),  # not a catalog
        (rich, notes, f"{notes}"),
        (rich, tmp_path / "nowhere" / "c.db", f"{tmp_path / 'nowhere' / 'c.db'}"),
    ):
        code, out, err = olbridge("catalog", "copy", str(source), str(destination))
        assert code == 1 and out == "" and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].startswith("Error: ") and expected in err
    assert notes.read_text() == "these are my notes, not a catalog\n" * 100
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "a.db").exists()


def test_rows_the_destination_cannot_take_are_an_error_naming_the_table_and_copy_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    """A value PostgreSQL cannot hold (a NUL character, which a SQLite file keeps) in a page
    streamed in by COPY: an error that names the table, the destination left empty."""
    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 40)
        catalog._conn.execute(
            # 40 rows: a page that goes in by COPY
            "UPDATE executions SET flow_id = 'a' || char(0) || 'b' WHERE rowid = (SELECT max(rowid) FROM executions)"
        )
        catalog._conn.commit()
    code, stdout, stderr = olbridge("catalog", "copy", str(source), postgres_url)
    assert code == 1 and stdout == "" and "Traceback" not in stderr, stderr
    said = stderr.strip().splitlines()[-1]
    assert said.startswith(f"Error: catalog {postgres_url}: table executions: ") and said.endswith("nothing was copied")
    with Catalog(postgres_url) as catalog:
        assert not any(count_rows(catalog).values())


def test_text_the_source_cannot_read_is_an_error_naming_it_and_copies_nothing(tmp_path: Path) -> None:
    """A SQLite file changed by hand can hold TEXT that is not UTF-8, which cannot be read back:
    an error that names the source and the column (not a traceback), the destination left empty."""
    source, destination = tmp_path / "s.db", tmp_path / "d.db"
    with Catalog(source) as catalog:
        fill(catalog, 40)
        catalog._conn.execute(
            "UPDATE executions SET flow_id = CAST(x'61ff62' AS TEXT) WHERE rowid = (SELECT max(rowid) FROM executions)"
        )
        catalog._conn.commit()
    code, stdout, stderr = olbridge("catalog", "copy", str(source), str(destination))
    assert code == 1 and stdout == "" and "Traceback" not in stderr, stderr
    said = stderr.strip().splitlines()[-1]
    assert said.startswith(f"Error: catalog {source}: it holds text that is not UTF-8"), said
    assert "column 'flow_id'" in said and said.endswith(", reading table executions")
    assert not destination.exists()  # the new file it made, empty, is not left behind
    with Catalog(destination) as catalog:  # nor is an empty one it did not make taken away
        pass
    code, _, stderr = olbridge("catalog", "copy", str(source), str(destination))
    assert code == 1 and "it holds text that is not UTF-8" in stderr, stderr
    with Catalog(destination) as catalog:
        assert not any(count_rows(catalog).values())


def test_a_destination_whose_server_goes_away_mid_copy_is_the_catalog_named(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy's connection to the destination ended mid-copy (its server killed, here its
    backend terminated): the error names the destination, not the command's --catalog (its
    default, olbridge.db, which the copy never opened); the destination keeps nothing."""
    import psycopg

    from bridge.catalog import copy

    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 40)
    database = postgres_url.rsplit("/", 1)[1]
    written = copy._write_page
    pages: list[str] = []

    def cut_off(destination: Catalog, cur: Any, table: str, insert: str, page: Any) -> None:
        pages.append(table)
        if len(pages) == 2:  # after the first page: the server ends the copy's connection
            with psycopg.connect(postgres_url, autocommit=True) as other:
                other.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                    "AND pid <> pg_backend_pid()",
                    (database,),
                )
        written(destination, cur, table, insert, page)

    monkeypatch.setattr(copy, "_write_page", cut_off)
    monkeypatch.chdir(tmp_path)  # where the default --catalog, olbridge.db, would be
    code, stdout, stderr = olbridge("catalog", "copy", str(source), postgres_url)
    assert code == 1 and stdout == "" and "Traceback" not in stderr, stderr
    said = stderr.strip().splitlines()[-1]
    assert said.startswith(f"Error: catalog {postgres_url}: "), said
    assert "olbridge.db" not in stderr and len(pages) >= 2
    assert not (tmp_path / "olbridge.db").exists()
    monkeypatch.undo()
    with Catalog(postgres_url) as catalog:
        assert not any(count_rows(catalog).values())


def test_a_key_written_into_the_destination_during_the_copy_is_an_error_naming_the_table(
    tmp_path: Path, postgres_url: str
) -> None:
    """Another process writes a row into the destination while the copy runs, whose key a later
    table's rows hold: an error naming that table (not a lost race to run again), and nothing of
    the copy stays."""
    import psycopg

    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 40)
        row = catalog._conn.execute("SELECT * FROM task_runs ORDER BY pk LIMIT 1").fetchone()
        columns = [c[1] for c in catalog._conn.execute("PRAGMA table_info(task_runs)")]
    written: list[int] = []

    def meanwhile(rows: int) -> None:  # after the first page (assets), before task_runs
        if not written:
            with psycopg.connect(postgres_url, autocommit=True, options="-c lock_timeout=5s") as other:
                other.execute(
                    f"INSERT INTO task_runs ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                    tuple(row),
                )
            written.append(rows)

    with Catalog(source) as src, Catalog(postgres_url) as dst, pytest.raises(CatalogError) as refused:
        copy_catalog(src, dst, progress=meanwhile)
    assert written and str(refused.value).startswith(f"catalog {postgres_url}: table task_runs: ")
    assert "already exists" in str(refused.value) and "race" not in str(refused.value)
    with Catalog(postgres_url) as catalog:
        assert {name: rows for name, rows in count_rows(catalog).items() if rows} == {"task_runs": 1}


def test_keys_go_on_past_the_copied_ones(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 20)
    assert olbridge("catalog", "copy", str(source), postgres_url)[0] == 0
    with Catalog(postgres_url) as catalog:
        catalog.record_task_run(run("after", execution="later"))  # a key of its own, no conflict
        pks = [row[0] for row in catalog._conn.execute("SELECT pk FROM task_runs ORDER BY pk").fetchall()]
        seqs = [row[0] for row in catalog._conn.execute("SELECT seq FROM outbox ORDER BY seq").fetchall()]
    assert pks == list(range(1, 22)) and len(seqs) == len(set(seqs)) and seqs[-1] > 40


def test_a_password_in_a_url_is_never_printed(tmp_path: Path, postgres: PostgresServer) -> None:
    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 3)
    name = postgres.create_database(owner=postgres.password_role)
    url = postgres.url(name, password=True)
    try:
        result = CliRunner().invoke(cli, ["catalog", "copy", str(source), url])
        assert result.exit_code == 0, result.stderr
        said: Any = result.stdout + result.stderr
        assert postgres.password not in said
        assert "Warning: the DST URL holds a password" in result.stderr
        assert f"{postgres.password_role}:***@" in result.stderr
    finally:
        postgres.drop_database(name)


def _meddling(target: str) -> str:
    """A new, empty catalog at ``target`` whose engine alters a row as the copy writes it (a
    trigger on executions): a destination that ends up unlike its source, which the check must
    see, whichever way it reads the two."""
    Catalog(target).close()
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION meddle() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.execution_id = 'e7' THEN NEW.started_at := '1999-01-01T00:00:00Z'; END IF; "
                "RETURN NEW; END $$"
            )
            conn.execute("CREATE TRIGGER meddle BEFORE INSERT ON executions FOR EACH ROW EXECUTE FUNCTION meddle()")
    else:
        with sqlite3.connect(target) as conn:
            conn.execute(
                "CREATE TRIGGER meddle AFTER INSERT ON executions WHEN NEW.execution_id = 'e7' BEGIN "
                "UPDATE executions SET started_at = '1999-01-01T00:00:00Z' WHERE rowid = NEW.rowid; END"
            )
        conn.close()
    return target


@pytest.mark.both_engines
def test_a_destination_unlike_its_source_after_the_copy_is_an_error_naming_the_table(
    tmp_path: Path, catalog_targets: Callable[[], str]
) -> None:
    """A row of the destination altered as it is written (by a trigger there): the check reads
    both sides again and says the copy differs, in that table only: DIFFERS, ``"same": false``,
    an error and exit 1."""
    source = tmp_path / "s.db"
    with Catalog(source) as catalog:
        fill(catalog, 20)
    code, stdout, stderr = olbridge("catalog", "copy", str(source), _meddling(catalog_targets()), "--json")
    assert code == 1, stderr
    report = json.loads(stdout)
    assert report["same"] is False
    differ = [t for t in report["tables"] if not t["same"]]
    assert [t["table"] for t in differ] == ["executions"]
    assert differ[0]["rows"] == differ[0]["destinationRows"] == 20
    assert differ[0]["digest"] != differ[0]["destinationDigest"]
    assert stderr.strip().splitlines()[-1] == f"Error: the copy differs from {source} in executions"
    code, stdout, stderr = olbridge("catalog", "copy", str(source), _meddling(catalog_targets()))
    assert code == 1, stderr
    lines = {line.split()[0]: line for line in stdout.splitlines()[1:-1]}
    assert lines["executions"].split()[3:5] == ["DIFFERS:", "20"]
    assert all(line.endswith("  same") for name, line in lines.items() if name != "executions")
    assert not stdout.splitlines()[-1].endswith("every table the same")
    assert stderr.strip().splitlines()[-1] == f"Error: the copy differs from {source} in executions"
