"""PostgreSQL's one-statement writes and lookups (bridge.catalog.postgres.bulk, .lookups):
each leaves the tables exactly as ``executemany`` of the shared statement does, and finds the
rows the shared lookup finds; the receiver's merge of a run's rows within a group ends as the
one-by-one upserts would."""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import psycopg
import pytest
import sqlalchemy as sa

from bridge.catalog import Catalog, schema, sql, sql_received
from bridge.catalog.engine import Conflict
from bridge.catalog.external_rows import merged_source, metadata_text, read_metadata
from bridge.catalog.postgres import COPY_FROM, SharedCursor, translate
from bridge.catalog.postgres.bulk import BULK_FROM, bulk_form, bulk_statements, copy_form
from bridge.catalog.rows import dumps
from tests.postgres import PostgresServer

# every statement the receiver's writer sends in bulk, the table it writes and that table's key
WRITES = {
    "INSERT_RECEIVED": ("received_events", "event_time, digest"),
    "INSERT_BINDING": ("external_datasets", "ol_namespace, ol_name"),
    "UPDATE_BINDING": ("external_datasets", "ol_namespace, ol_name"),
    "UPSERT_PLACEHOLDER": ("assets", "id"),
    "UPSERT_SOURCE": ("external_sources", "source"),
    "CLAIM_SOURCE": ("external_sources", "source"),
    "UPSERT_FACET": ("external_facets", "owner, facet_key"),
    "PUT_FACET": ("external_facets", "owner, facet_key"),
    "UPSERT_IDENTIFIER": ("external_identifiers", "namespace, name, asset_id"),
    "INSERT_EXTERNAL_USAGE": ("external_usages", "job_namespace, job_name, direction, asset_id"),
    "INSERT_EXTERNAL_EDGE": ("external_lineage", "upstream_id, downstream_id, job_namespace, job_name"),
    "INSERT_COLUMN_EDGE": ("column_lineage", "downstream_id, downstream_column, upstream_id, upstream_column"),
}
# the values the tables' checks allow
CHOICES = {
    "received_events": {"kind": ["RunEvent", "DatasetEvent", "JobEvent"]},
    "external_usages": {"direction": ["input", "output"]},
    "assets": {"origin": ["external", "declared", "auto"]},
}


@pytest.fixture
def two_catalogs(postgres: PostgresServer, catalog_template: str) -> Iterator[tuple[Catalog, Catalog]]:
    names = [postgres.create_database(template=catalog_template) for _ in range(2)]
    catalogs = [Catalog(postgres.url(name)) for name in names]
    try:
        yield catalogs[0], catalogs[1]
    finally:
        for catalog, name in zip(catalogs, names, strict=True):
            catalog.close()
            postgres.drop_database(name)


def statement_of(name: str) -> str:
    """A shared statement by its name, in the module of its tables."""
    return str(getattr(sql_received, name, None) or getattr(sql, name))


def test_every_bulk_write_of_the_receiver_has_its_one_statement_form() -> None:
    for name in WRITES:
        assert bulk_form(translate(statement_of(name))) is not None, name
    # a statement that reads while it writes goes row by row
    assert bulk_form(translate(sql_received.QUEUE_FORWARD)) is None
    assert (
        bulk_statements(translate(sql_received.INSERT_EXTERNAL_USAGE), [("a", "b", "input", "c")] * (BULK_FROM - 1))
        is None
    )


def _value(kind: str, rng: random.Random, pool: int) -> Any:
    if kind == "key":
        return f"k{rng.randrange(pool)}"
    if "." in kind:
        table, column = kind.split(".")
        return rng.choice(CHOICES[table][column])
    if kind == "int":
        return rng.randrange(3)
    if kind == "time":
        return f"2026-01-0{rng.randrange(1, 9)}T00:00:00.000000Z"
    text = rng.choice(["a", "b", "ü 'quoted' \"text\" \\ %s ?", '{"json": [1, 2]}'])
    return None if kind == "null" and rng.random() < 0.3 else text


def _columns(name: str) -> tuple[str, list[str]]:
    statement = statement_of(name)
    if name == "UPDATE_BINDING":
        return "external_datasets", [
            *("first_seen", "last_seen", "seen_rank", "facets_rank", "facets_digest"),
            *("all_facets_rank", "all_facets_digest", "ol_namespace", "ol_name"),
        ]
    head = statement.split("VALUES")[0]
    table = head.split("INTO")[1].split()[0]
    return table, [column.strip() for column in head.split("(", 1)[1].rsplit(")", 1)[0].split(",")]


def _rows(name: str, rng: random.Random, count: int, turn: int, *, new: bool = False) -> list[tuple[Any, ...]]:
    """Rows of a statement's parameters, each column's values as its table allows (NULL where it
    may be): keys from a small pool, so that rows repeat keys within one call (``new``: each row
    its own key, none of an earlier turn's); texts with quotes, backslashes, placeholders and
    non-ASCII."""
    table, columns = _columns(name)
    keys = {key.strip() for key in WRITES[name][1].split(",")}
    kinds = []
    for column in columns:
        found = schema.metadata.tables[table].c[column]
        if column in CHOICES.get(table, {}):
            kinds.append(f"{table}.{column}")
        elif column in keys:
            kinds.append("key")
        elif isinstance(found.type, sa.Integer):
            kinds.append("int")
        elif column.endswith(("_at", "_seen")):
            kinds.append("time")
        else:
            kinds.append("null" if found.nullable else "text")
    pool = 6 if len(keys) == 1 else 3  # so that keys repeat
    rows = [tuple(_value(kind, rng, pool) for kind in kinds) for _ in range(count)]
    if name == "INSERT_COLUMN_EDGE":  # the receiver's: a source, no task run
        rows = [(*row[:5], None, f"run:{row[6]}") for row in rows]
    if new or ("ON CONFLICT" not in statement_of(name) and name != "UPDATE_BINDING"):  # a plain insert: new keys
        rows = [
            tuple(
                f"t{turn}-{n}" if column in keys or column == "asset_id" else value
                for column, value in zip(columns, row, strict=True)
            )
            for n, row in enumerate(rows)
        ]
    return rows


def _table(catalog: Catalog, table: str) -> list[tuple[Any, ...]]:
    conn: Any = catalog._conn  # the raw rows
    columns = [
        c
        for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND column_name <> 'pk' "
            "ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    ]
    return sorted(conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall(), key=repr)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_bulk_write_leaves_the_table_as_executemany_does(name: str, two_catalogs: tuple[Catalog, Catalog]) -> None:
    rng = random.Random(name)
    by_rows, in_bulk = two_catalogs
    table = WRITES[name][0]
    statement = statement_of(name)
    for turn in range(4):  # on an empty table, then over what the earlier turns wrote
        rows = _rows(name, rng, 40, turn)
        if name == "UPDATE_BINDING":  # the rows it updates
            seed = sorted({(row[7], row[8]) for row in rows})
            for catalog in two_catalogs:
                catalog._conn.cursor().executemany(
                    sql_received.INSERT_BINDING + " ON CONFLICT DO NOTHING",
                    [(ns, n, f"a-{ns}-{n}", "t0", "t0", "", None, None, None, None) for ns, n in seed],
                )
        expected = by_rows._conn.cursor()
        expected.executemany(statement, rows)
        bulk = bulk_statements(translate(statement), rows)
        assert bulk is not None
        if "DO UPDATE" in statement or name == "UPDATE_BINDING":
            assert len(bulk) > 1, "the rows repeat keys: more than one round"
        written = in_bulk.engine.write_many(in_bulk._conn.cursor(), statement, rows)
        assert _table(in_bulk, table) == _table(by_rows, table), f"turn {turn}"
        assert written == expected.rowcount, f"turn {turn}: the rows written"
    assert _table(in_bulk, table), "rows were written"


def test_inserts_of_new_rows_have_a_copy_form_and_others_none() -> None:
    assert copy_form(translate(sql_received.INSERT_RECEIVED)) == (
        "COPY received_events (digest, kind, event_type, event_time, source, producer, warnings, body, token) "
        "FROM STDIN"
    )
    assert copy_form(translate(sql_received.CLAIM_SOURCE)) is not None
    assert copy_form(translate(sql_received.UPSERT_SOURCE)) is None  # DO UPDATE: it merges into a row
    assert copy_form(translate(sql_received.QUEUE_FORWARD)) is None  # it reads as it writes
    assert copy_form(translate(sql_received.UPDATE_BINDING)) is None


@pytest.mark.parametrize("count", [BULK_FROM, COPY_FROM])  # as an INSERT; streamed in (COPY)
@pytest.mark.parametrize("name", ["INSERT_RECEIVED", "CLAIM_SOURCE"])
def test_new_rows_land_as_executemany_leaves_them_and_one_written_meanwhile_is_a_conflict(
    name: str, count: int, two_catalogs: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver's writer writes the events and the runs it found new with write_new: the
    table ends as ``executemany`` leaves it; where another writer wrote one of the rows after the
    group read them, the transaction fails with a Conflict (run again, it finds the row) and
    writes none of them."""
    rng = random.Random(name)
    by_rows, fresh = two_catalogs
    table, statement = WRITES[name][0], statement_of(name)
    rows = _rows(name, rng, count, 0, new=True)
    by_rows._conn.cursor().executemany(statement, rows)
    copies: list[int] = []
    streamed = SharedCursor.copy_rows
    monkeypatch.setattr(
        SharedCursor, "copy_rows", lambda cur, copy, rows: (copies.append(len(rows)), streamed(cur, copy, rows))
    )
    fresh.db.write(lambda cur: fresh.engine.write_new(cur, statement, rows))
    assert copies == ([count] if count >= COPY_FROM else []), "streamed in from COPY_FROM rows, an INSERT below"
    assert _table(fresh, table) == _table(by_rows, table)
    before = _table(fresh, table)
    more = _rows(name, rng, count, 1, new=True)
    other: Any = fresh.engine.connect()  # another writer, first (autocommit)
    try:
        other.cursor().executemany(statement, more[-1:])
    finally:
        other.close()
    with pytest.raises(Conflict), fresh.db.transaction() as cur:
        fresh.engine.write_new(cur, statement, more)
    assert len(_table(fresh, table)) == len(before) + 1, "none of the rows written but the other writer's"


@pytest.mark.parametrize("count", [1, BULK_FROM, COPY_FROM])  # executemany; one INSERT; streamed in (COPY)
def test_new_rows_go_with_the_group_s_other_writes_and_a_short_count_is_a_conflict(
    count: int, two_catalogs: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver's writer hands its new runs and events to write_all with its other writes:
    below COPY_FROM rows they go in the same round trip as the others (no write_new of their
    own), their counts checked once it is synced; a run or an event another writer wrote meanwhile
    is a Conflict, and none of the group's writes stay, the others' included. From COPY_FROM, each
    is streamed in first in its own turn."""
    rng = random.Random(count)
    by_rows, fresh = two_catalogs
    claims, events, facets = (
        _rows(name, rng, count, 0, new=True) for name in ("CLAIM_SOURCE", "INSERT_RECEIVED", "UPSERT_FACET")
    )
    for statement, rows in (
        (sql_received.CLAIM_SOURCE, claims),
        (sql_received.INSERT_RECEIVED, events),
        (sql_received.UPSERT_FACET, facets),
    ):
        by_rows._conn.cursor().executemany(statement, rows)
    alone: list[int] = []
    write_new = type(fresh.engine).write_new
    monkeypatch.setattr(
        type(fresh.engine),
        "write_new",
        lambda engine, cur, st, rows: (alone.append(len(rows)), write_new(engine, cur, st, rows)),
    )
    new = [(sql_received.CLAIM_SOURCE, claims), (sql_received.INSERT_RECEIVED, events)]
    fresh.db.write(lambda cur: fresh.engine.write_all(cur, [(sql_received.UPSERT_FACET, facets)], new=new))
    assert alone == ([count, count] if count >= COPY_FROM else []), "in the others' round trip below COPY_FROM"
    tables = ("external_sources", "received_events", "external_facets")
    assert [_table(fresh, t) for t in tables] == [_table(by_rows, t) for t in tables]
    for late in range(2):  # another writer wrote a run, or an event, after the group read them
        before = [_table(fresh, t) for t in tables]
        claims, events, facets = (
            _rows(name, rng, count, 1 + late, new=True) for name in ("CLAIM_SOURCE", "INSERT_RECEIVED", "UPSERT_FACET")
        )
        other: Any = fresh.engine.connect()  # autocommit
        try:
            other.cursor().executemany(
                *((sql_received.CLAIM_SOURCE, claims[:1]) if late == 0 else (sql_received.INSERT_RECEIVED, events[-1:]))
            )
        finally:
            other.close()
        new = [(sql_received.CLAIM_SOURCE, claims), (sql_received.INSERT_RECEIVED, events)]
        with pytest.raises(Conflict), fresh.db.transaction() as cur:
            fresh.engine.write_all(cur, [(sql_received.UPSERT_FACET, facets)], new=new)
        after = [_table(fresh, t) for t in tables]
        assert [len(rows) for rows in after] == [
            len(before[0]) + (late == 0),
            len(before[1]) + (late == 1),
            len(before[2]),
        ]


def test_an_update_in_bulk_gives_the_planner_its_count_of_rows() -> None:
    """The rows an UPDATE joins to its table come with their count as a LIMIT (the planner's
    estimate of a function's rows is 100 whatever it returns: a few rows were joined by a hash of
    the whole table); an INSERT reads no table to join and has none."""
    rows = [("t1", "t2", f"r{at}", None, None, None, None, "ns", f"n{at % 2}") for at in range(5)]  # two keys
    bulk = bulk_statements(translate(sql_received.UPDATE_BINDING), rows)
    assert bulk is not None and len(bulk) == 3  # three rounds: the keys repeat
    for text, (objects, count) in bulk:
        assert "LIMIT %s) AS x" in text
        assert count == len(orjson.loads(objects))
    assert [count for _, (_, count) in bulk] == [2, 2, 1]
    inserted = bulk_statements(
        translate(sql_received.INSERT_EXTERNAL_USAGE), [("a", "b", "input", f"c{at}") for at in range(3)]
    )
    assert inserted is not None and [len(params) for _, params in inserted] == [1]


def test_values_json_cannot_carry_go_row_by_row() -> None:
    form = bulk_form(translate(sql_received.INSERT_EXTERNAL_USAGE))
    assert form is not None
    assert form.statements([("a", "b", "input", b"bytes")] * 3) is None
    assert form.statements([("a", "b", "input", 2**70)] * 3) is None
    assert form.statements([("a", "b", "input", 1.5)] * 3) is None  # a float for a text column
    assert form.statements([("a", "b", "input", True)] * 3) is None
    assert form.statements([("a", "b", "input", None)] * 3) is not None
    # an UPDATE setting a column it also matches on changes what later rows match: row by row
    assert bulk_form("UPDATE assets SET id = %s WHERE id = %s") is None


def _upsert_one_by_one(rows: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE external_sources (source TEXT, job_namespace, job_name, run_id, parent_run_id, "
        "state, state_rank, started_at, ended_at, first_seen, last_seen, producer, inputs, outputs, job_rank, "
        "jobs, warnings, run_day TEXT, PRIMARY KEY (source, run_day))"
    )
    for row in rows:
        conn.execute(sql_received.UPSERT_SOURCE, (*row, "[]", "[]", "r", None, "[]", ""))
    found = conn.execute("SELECT * FROM external_sources").fetchone()
    return tuple(found[:12])


def test_a_placeholder_s_metadata_is_read_and_written_as_the_standard_library_does() -> None:
    """The writer on PostgreSQL reads and writes a placeholder's metadata with orjson where it is
    a map of strings: the same values, and the same text to the byte, as the standard library
    (which the rest of the catalog, and the rows it compares with, use); anything else falls back."""
    pool = ["a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "😀", "\ud800"]
    chosen = random.Random(12)
    maps: list[dict[str, Any]] = [
        {
            "".join(chosen.choices(pool, k=chosen.randint(0, 4))): "".join(
                chosen.choices(pool, k=chosen.randint(0, 12))
            )
            for _ in range(chosen.randint(0, 6))
        }
        for _ in range(400)
    ]
    maps += [
        {},
        {"olName": "t", "size": 2**70},  # an integer past 64 bits: orjson would read a float
        {"olName": "t", "ratio": 0.1, "big": 1e16},  # floats, which orjson writes otherwise
        {"olName": "t", "nested": {"b": [1, None, True]}, "flag": False},
    ]
    for metadata in maps:
        text = dumps(metadata)
        assert metadata_text(metadata) == text, metadata
        read = read_metadata(text)
        assert read == metadata and {k: type(v) for k, v in read.items()} == {k: type(v) for k, v in metadata.items()}


def test_a_runs_rows_merged_in_the_group_end_as_the_upserts_one_by_one() -> None:
    rng = random.Random(7)
    times = [f"2026-01-01T00:0{n}:00.000000Z" for n in range(6)]
    for _ in range(300):
        rows = []
        for _ in range(rng.randrange(1, 6)):
            state = rng.choice(["START", "RUNNING", "COMPLETE", "FAIL", None])
            moment = rng.choice(times)
            rows.append(
                (
                    "run-1",
                    "ns",
                    "job",
                    "run-1",
                    rng.choice([None, None, "parent-a", "parent-b"]),
                    state,
                    f"{rng.randrange(3)}|{moment}|{rng.randrange(3)}",
                    moment if state == "START" else None,
                    moment if state in ("COMPLETE", "FAIL") else None,
                    moment,
                    moment,
                    rng.choice(["p1", "p2", None]),
                )
            )
        merged = list(itertools.accumulate(rows, merged_source))[-1]
        assert _upsert_one_by_one([merged]) == _upsert_one_by_one(rows), rows


def test_long_lookups_find_what_the_shared_statements_find(postgres: PostgresServer, catalog_template: str) -> None:
    name = postgres.create_database(template=catalog_template)
    try:
        with psycopg.connect(postgres.url(name), autocommit=True) as plain:
            plain.execute(
                "INSERT INTO external_sources (source, job_namespace, job_name, state_rank, first_seen, last_seen, "
                "producer, inputs, outputs, warnings, run_day) "
                "SELECT 's' || n, 'ns', 'j', '', 't', 't', 'p', '[]', '[]', '[]', '' FROM generate_series(1, 300) AS n"
            )
            plain.execute(
                "INSERT INTO received_events (digest, kind, event_type, event_time, producer, warnings, body) "
                "SELECT 'd' || n, 'RunEvent', 'START', 't' || (n % 7), 'p', '[]', '{}' "
                "FROM generate_series(1, 300) AS n"
            )
        with Catalog(postgres.url(name)) as catalog:
            cur = catalog._conn.cursor()
            wanted = [f"s{n}" for n in range(0, 400, 3)] + ["it's", "%s", "?"]
            by_day = [part for source in wanted for part in (source, "")]
            found = {row[0] for row in cur.execute(sql_received.sources_of(len(wanted)), by_day)}
            assert found == {s for s in wanted if s[1:].isdigit() and 1 <= int(s[1:]) <= 300}
            pairs = [(f"t{n % 7}", f"d{n}") for n in range(0, 400, 2)] + [("t1", "d2")]
            params = [part for pair in pairs for part in pair]
            digests = {row[0] for row in cur.execute(sql_received.received_digests(len(pairs)), params)}
            assert digests == {f"d{n}" for n in range(2, 301, 2)}
            # an edge's whole key, four columns: each found by it, not every edge of its upstream
            stored = [(f"u{n % 3}", f"d{n}", "ns", f"j{n % 5}") for n in range(200)]
            cur.executemany(
                "INSERT INTO external_lineage (upstream_id, downstream_id, job_namespace, job_name) "
                "VALUES (?, ?, ?, ?)",
                stored,
            )
            asked = [edge for edge in stored[::3]] + [
                ("u0", "d0", "ns", "j9"),
                ("u1", "d0", "ns", "j0"),
                ("it's", "%s", "?", ""),
            ]
            for width in (4, 64, len(asked)):  # an OR of point lookups, and its one-lookup form
                edges = asked[:width]
                found_edges = {
                    tuple(row) for row in cur.execute(sql_received.edges_of(len(edges)), [p for e in edges for p in e])
                }
                assert found_edges == {edge for edge in edges if edge in stored}
            # a job usage's whole key, four columns, likewise: not every usage of its job
            usages = [("ns", f"j{n % 5}", ("input", "output")[n % 2], f"a{n}") for n in range(200)]
            cur.executemany(
                "INSERT INTO external_usages (job_namespace, job_name, direction, asset_id) VALUES (?, ?, ?, ?)", usages
            )
            asked_usages = [
                *usages[::3],
                ("ns", "j0", "output", "a0"),
                ("ns", "j9", "input", "a0"),
                ("it's", "%s", "?", ""),
            ]
            for width in (4, 64, len(asked_usages)):
                some = asked_usages[:width]
                params = [p for u in some for p in u]
                found_usages = {tuple(row) for row in cur.execute(sql_received.usages_of(len(some)), params)}
                assert found_usages == {u for u in some if u in usages}
    finally:
        postgres.drop_database(name)


def test_a_group_s_checks_by_whole_key_probe_the_key_whatever_the_table_s_size(
    postgres: PostgresServer, catalog_template: str
) -> None:
    """The receiver's check of which of a group's usages and edges are stored is one probe of the
    key a tuple (a nested loop), never a read of the whole table: as an ``IN`` of the tuples, the
    planner hashed the whole table while it was small and its statistics young, a cost a group
    that grew with the table. Nor, a probe, a read of every row that shares a part of the key (the
    edges between two datasets, through an index of their ends alone, before migration 0026)."""
    from bridge.catalog.postgres.lookups import pairs_form, probes_form

    name = postgres.create_database(template=catalog_template)
    try:
        with psycopg.connect(postgres.url(name), autocommit=True) as conn:
            conn.execute(
                "INSERT INTO external_usages (job_namespace, job_name, direction, asset_id) "
                "SELECT 'ns', 'j' || (n % 300), 'output', 't' || (n % 20) FROM generate_series(1, 6000) AS n "
                "ON CONFLICT DO NOTHING"
            )
            conn.execute(
                "INSERT INTO external_lineage (upstream_id, downstream_id, job_namespace, job_name) "
                "SELECT 't' || (n % 20), 't' || ((n + 1) % 20), 'ns', 'j' || (n % 300) "
                "FROM generate_series(1, 6000) AS n "
                "ON CONFLICT DO NOTHING"
            )
            conn.execute("ANALYZE external_usages, external_lineage")  # statistics of a table in use
            for statement, table in (
                (sql_received.usages_of, "external_usages"),
                (sql_received.edges_of, "external_lineage"),
            ):
                rows = conn.execute(f"SELECT * FROM {table} LIMIT 256").fetchall()
                param = orjson.dumps([list(row) for row in rows]).decode()
                text = translate(statement(256))
                probes, joined = probes_form(text), pairs_form(text)
                assert probes is not None and joined is not None
                plans = [
                    "\n".join(r[0] for r in conn.execute(f"EXPLAIN {form}", (param,))) for form in (probes, joined)
                ]
                assert f"Seq Scan on {table}" not in plans[0] and "Nested Loop" in plans[0], plans[0]
                assert f"Seq Scan on {table}" in plans[1], plans[1]  # what the IN form did
                assert {tuple(r) for r in conn.execute(probes, (param,))} == {tuple(r) for r in rows}
                # each probe one look through an index that holds the whole key: through one that
                # holds a part, every job's row between two datasets is read and thrown away
                ran = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {probes}", (param,)))
                assert "Rows Removed by Filter" not in ran and "Filter:" not in ran, ran
    finally:
        postgres.drop_database(name)


def test_only_a_plain_read_of_a_partitioned_tables_key_goes_by_day() -> None:
    """The lookups by day (a probe of the key a tuple) stand for the receiver's reads of a
    partitioned table's unique key, locked in ascending order or not; a read that is not one (its
    rows distinct across tuples, locked in another order, or not of the whole key) keeps its own
    form."""
    from bridge.catalog.postgres.lookups import by_day_form

    for statement in (
        sql_received.received_digests(4),
        sql_received.sources_of(4),
        sql_received.locked_sources_of(4),
    ):
        found = by_day_form(translate(statement))
        assert found is not None and "LATERAL" in found[0] and "{days}" in found[0], statement
    locked = by_day_form(translate(sql_received.locked_sources_of(4)))
    assert locked is not None and locked[0].endswith("FOR UPDATE) AS k ORDER BY k.source")
    for text in (
        "SELECT DISTINCT digest FROM received_events WHERE (event_time = %s AND digest = %s)",
        "SELECT source FROM external_sources WHERE (source = %s AND run_day = %s) ORDER BY source DESC FOR UPDATE",
        "SELECT digest FROM received_events WHERE (digest = %s AND kind = %s)",
        "SELECT source FROM external_sources WHERE (source = %s AND run_day = %s) AND state = %s",
        translate(sql_received.bindings_of(4)),
    ):
        assert by_day_form(text) is None, text
