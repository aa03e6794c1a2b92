from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bridge.adapters.prefect.cursor import PrefectCursor, read_cursor
from bridge.catalog import (
    AssetQuery,
    Catalog,
    ExternalUsage,
    HistoryFilter,
    MetadataFilter,
    Position,
    RecordResult,
    RunUsage,
)
from bridge.catalog import sql as catalog_sql
from bridge.catalog.migrations.legacy import SQLITE_SCRIPTS
from bridge.catalog.positions import Checkpoint
from bridge.errors import CatalogError, NotFoundError, RunEndedError, ValidationError
from bridge.model import Assertion, AssetDeclaration, Origin, TaskState
from tests.conftest import at
from tests.helpers import decl, invoke, run, snapshot

pytestmark = pytest.mark.both_engines


def test_inputs_nobody_produced_become_external_placeholders(catalog: Catalog) -> None:
    result = catalog.record_task_run(run(inputs=(decl("raw.orders"),), outputs=(decl("marts.orders", type="Table"),)))
    assert result.placeholders == ("raw.orders",)
    placeholder = catalog.asset("raw.orders")
    assert (placeholder.type, placeholder.origin) == ("External", Origin.EXTERNAL)
    produced = catalog.asset("marts.orders")
    assert (produced.type, produced.origin, produced.namespace) == ("Table", Origin.DECLARED, None)
    assert produced.updated_at == at(1)


def test_a_placeholder_becomes_the_real_asset_when_a_flow_writes_it(catalog: Catalog) -> None:
    catalog.record_task_run(run("read", inputs=(decl("raw.orders"),)))
    catalog.record_task_run(
        run("load", outputs=(decl("raw.orders", type="Table", metadata={"system": "postgres"}),), start=at(5))
    )
    asset = catalog.asset("raw.orders")
    assert (asset.type, asset.origin, asset.metadata["system"]) == ("Table", Origin.DECLARED, "postgres")


def test_a_run_recorded_after_a_later_write_of_its_output_leaves_the_asset_as_that_left_it(catalog: Catalog) -> None:
    # an older dbt invocation imported after a newer one: its output was written (lineage, usage),
    # but the asset is what the later run made of it, not the older one's tests and time
    later = decl("marts.orders", type="Table", metadata={"dbtTestStatus": "warn"})
    catalog.record_task_run(run("load", execution="new", outputs=(later,), start=at(60)))
    older = decl("marts.orders", type="Table", metadata={"dbtTestStatus": "fail", "stale": "yes"})
    result = catalog.record_task_run(run("load", execution="old", outputs=(older,), start=at(0)))
    assert result.written == ("marts.orders",)
    assert result.warnings == (
        "output 'marts.orders' was written by a later run (at 2025-03-01T09:01:00.000000Z): kept as that left it",
    )
    asset = catalog.asset("marts.orders")
    assert (asset.metadata.get("dbtTestStatus"), asset.metadata.get("stale"), asset.updated_at) == (
        "warn",
        None,
        at(61),
    )
    # in time's order, the later one wins as before
    catalog.record_task_run(run("load", execution="newest", outputs=(older,), start=at(90)))
    assert catalog.asset("marts.orders").metadata["dbtTestStatus"] == "fail"
    # an asset set by hand is no later run: a past run recorded after it writes it, as before
    catalog.set_asset(decl("marts.by_hand", type="Table", metadata={"owner": "ops"}), now=at(500))
    past = decl("marts.by_hand", metadata={"rows": "3"})
    assert catalog.record_task_run(run("hand", execution="past", outputs=(past,), start=at(10))).warnings == ()
    assert catalog.asset("marts.by_hand").metadata == {"owner": "ops", "rows": "3"}


def test_outputs_of_a_failed_run_are_not_written(catalog: Catalog) -> None:
    """A new output the failed run gave the type of is made as its success would have made it (so
    that the run FAILs it), but not written: no usage, no lineage, no checks."""
    made = decl("marts.orders", type="Table", metadata={"owner": "finance"}, assertions=(Assertion("unique", True),))
    failed = run(inputs=(decl("raw.orders"),), outputs=(made, decl("marts.untyped")), state="FAILED")
    result = catalog.record_task_run(failed)
    assert result.state is TaskState.FAILED and result.written == ()
    asset = catalog.asset("marts.orders")
    assert (asset.type, dict(asset.metadata), asset.created_at, asset.assertions) == (
        "Table",
        {"owner": "finance"},
        failed.ended_at,
        (),
    )
    assert catalog.get_asset("marts.untyped") is None  # no type: its success would not have made it either
    assert "not written" in result.warnings[0]
    stored = next(catalog.iter_task_runs())
    assert (stored.outputs, stored.unwritten) == ((), ("marts.orders",))
    assert catalog.usages_of("marts.orders") == []
    assert catalog._conn.execute("SELECT count(*) FROM lineage").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("behavior", "state", "written"),
    [
        ("WARN", TaskState.WARNING, ["good.out"]),
        ("FAIL", TaskState.FAILED, []),
        ("IGNORE", TaskState.SUCCESS, ["good.out"]),
    ],
)
def test_failure_behaviour_when_an_asset_write_fails(
    catalog: Catalog, behavior: str, state: TaskState, written: list[str]
) -> None:
    catalog.set_asset(decl("shared.vm", type="VM"), now=at(0))
    result = catalog.record_task_run(
        run(outputs=(decl("shared.vm", type="Table"), decl("good.out", type="File")), behavior=behavior, start=at(2))
    )
    assert result.state is state
    assert list(result.written) == written
    assert catalog.asset("shared.vm").type == "VM"
    assert any("shared.vm" in w for w in result.warnings)
    # written; or, the run FAILED, made as its success would have made it, and not written
    assert catalog.asset("good.out").type == "File"
    assert [u.direction for u in catalog.usages_of("good.out")] == ["output"] * len(written)


def test_new_output_without_type_is_a_write_failure(catalog: Catalog) -> None:
    result = catalog.record_task_run(run(outputs=(decl("no.type"),)))
    assert result.state is TaskState.WARNING
    assert catalog.get_asset("no.type") is None


def test_outputs_need_an_ended_run(catalog: Catalog) -> None:
    before = snapshot(catalog)
    with pytest.raises(ValidationError, match="written when a task run ends"):
        catalog.record_task_run(run(outputs=(decl("x.y", type="Table"),), state="RUNNING"))
    assert snapshot(catalog) == before


def test_a_refused_batch_changes_nothing(catalog: Catalog) -> None:
    catalog.record_task_run(run("one", outputs=(decl("a.b", type="Table"),)))
    before = snapshot(catalog)
    bad = run("two", start=at(5), end=at(4))
    with pytest.raises(ValidationError, match="end before it starts"):
        catalog.record_task_runs([run("three", outputs=(decl("c.d", type="Table"),)), bad])
    assert snapshot(catalog) == before


def test_a_write_whose_transaction_the_engine_ended_raises_its_own_error(catalog: Catalog) -> None:
    """SQLite rolls a transaction back itself on some errors (a full disk, an I/O error): the
    error raised is the write's, never the ROLLBACK's after it ("no transaction is active"), and
    the next write goes on as usual."""
    catalog.record_task_run(run("one", outputs=(decl("a.b", type="Table"),)))
    before = snapshot(catalog)

    def work(cur: Any) -> None:
        cur.execute("DELETE FROM column_lineage")
        cur.execute("ROLLBACK")  # as the engine does on its own
        raise OSError("the write's own error")

    with pytest.raises(OSError, match=r"^the write's own error$"):
        catalog.db.write(work)
    assert snapshot(catalog) == before
    catalog.record_task_run(run("two", outputs=(decl("c.d", type="Table"),)))
    assert catalog.get_asset("c.d") is not None


def test_recording_twice_is_unchanged_and_a_second_end_is_refused(catalog: Catalog) -> None:
    first = run(outputs=(decl("a.b", type="Table"),))
    assert catalog.record_task_run(first).status == "created"
    assert catalog.record_task_run(first).status == "unchanged"
    with pytest.raises(CatalogError, match="already ended"):
        catalog.record_task_run(run(outputs=(decl("a.b", type="Table"),), state="FAILED"))
    assert catalog.count_task_runs() == 1


def test_recording_twice_says_again_what_the_first_recording_warned_of(catalog: Catalog) -> None:
    """A run whose output was not written (a new asset of no type) was said so when recorded;
    recorded again as it was, it came back "unchanged" with no warning, the output still missing."""
    first = run(outputs=(decl("a.out"),), behavior="WARN")
    warned = catalog.record_task_run(first).warnings
    assert warned and "output 'a.out' is a new asset and has no type" in warned[0]
    again = catalog.record_task_run(first)
    assert again.status == "unchanged" and again.warnings == warned
    assert catalog.get_asset("a.out") is None


def test_a_running_run_ends_later(catalog: Catalog) -> None:
    catalog.record_task_run(run(inputs=(decl("raw.x"),), state="RUNNING"))
    result = catalog.record_task_run(run(inputs=(decl("raw.x"),), outputs=(decl("out.x", type="Table"),)))
    assert result.status == "updated"
    stored = next(catalog.iter_task_runs())
    assert stored.state is TaskState.SUCCESS
    assert [u.asset_id for u in stored.usages] == ["raw.x", "out.x"]


def test_a_running_runs_start_does_not_move(catalog: Catalog) -> None:
    """Its OpenLineage runId is made from its start: a later recording with another start queued
    the end under another runId than the START already queued (or sent), which stayed RUNNING in
    Marquez for ever. It is refused, and changes nothing; the end with the same start is taken."""
    catalog.record_task_run(run(inputs=(decl("raw.x"),), state="RUNNING", start=at(31)))
    before = snapshot(catalog)
    with pytest.raises(RunEndedError, match=r"is recorded as started at .*; a run's start does not move"):
        catalog.record_task_run(run(inputs=(decl("raw.x"),), start=at(31.1), end=at(40)))
    assert snapshot(catalog) == before
    assert catalog.record_task_run(run(inputs=(decl("raw.x"),), start=at(31), end=at(40))).status == "updated"
    (stored,) = catalog.iter_task_runs()
    assert stored.started_at == at(31) and stored.state is TaskState.SUCCESS


def test_queries_by_type_namespace_and_metadata(catalog: Catalog) -> None:
    catalog.set_asset(decl("g.table", type="Table", metadata={"env": "prod", "tier": 1}), now=at(0))
    catalog.set_asset(
        decl("n.table", type="io.kestra.plugin.ee.assets.Table", namespace="team.a", metadata={"env": "dev"}), now=at(0)
    )
    catalog.set_asset(
        decl("n.file", type="File", namespace="team.a", metadata={"env": "prod", "note": "nightly export"}), now=at(0)
    )

    def ids(**kw: object) -> list[str]:
        return [a.id for a in catalog.list_assets(AssetQuery.create(**kw))]  # type: ignore[arg-type]

    assert ids(types=["Table"]) == ["g.table", "n.table"]
    assert ids(namespace="team.a") == ["n.file", "n.table"]  # never the Global one
    assert ids(metadata=[MetadataFilter.create("env", "EQUAL_TO", "prod")]) == ["g.table", "n.file"]
    assert ids(metadata=[MetadataFilter.create("env", "NOT_EQUAL_TO", "prod")]) == ["n.table"]
    assert ids(metadata=[MetadataFilter.create("env", "IS_ONE_OF", "dev,test")]) == ["n.table"]
    assert ids(metadata=[MetadataFilter.create("env", "IS_NOT_ONE_OF", ["dev"])]) == ["g.table", "n.file"]
    assert ids(metadata=[MetadataFilter.create("note", "CONTAINS", "nightly")]) == ["n.file"]
    assert ids(metadata=[MetadataFilter.create("tier", "EQUAL_TO", 1)]) == ["g.table"]
    with pytest.raises(ValidationError, match=r"^metadataQuery: unknown filter type 'LIKE'; one of EQUAL_TO, "):
        MetadataFilter.create("env", "LIKE", "x")


def test_set_merges_metadata_and_null_removes(catalog: Catalog) -> None:
    catalog.set_asset(decl("a.b", type="Table", metadata={"owner": "x", "env": "prod"}, description="d"), now=at(0))
    asset = catalog.set_asset(decl("a.b", metadata={"owner": None, "tier": 2}), now=at(1))
    assert asset.metadata == {"env": "prod", "tier": 2}
    assert asset.description == "d"
    with pytest.raises(ValidationError) as info:
        catalog.set_asset(decl("a.b", type="File"), now=at(2))
    assert info.value.rule == "type.change"
    assert [c.kind for c in catalog.iter_changes()] == ["update", "update"]


def test_lineage_upstream_and_downstream_to_a_depth(catalog: Catalog) -> None:
    catalog.record_task_run(run("t1", inputs=(decl("raw.a"),), outputs=(decl("stg.a", type="Table"),)))
    catalog.record_task_run(run("t2", inputs=(decl("stg.a"),), outputs=(decl("mart.a", type="Table"),), start=at(2)))
    catalog.record_task_run(run("t3", inputs=(decl("mart.a"),), outputs=(decl("report.a", type="File"),), start=at(4)))
    down = catalog.lineage("raw.a", direction="downstream", depth=2)
    assert [(e.upstream, e.downstream, e.depth) for e in down.edges] == [("raw.a", "stg.a", 1), ("stg.a", "mart.a", 2)]
    up = catalog.lineage("report.a", direction="upstream", depth=10)
    assert {e.upstream for e in up.edges} == {"raw.a", "stg.a", "mart.a"}
    assert up.edges[0].tasks == ("company.data/flow.t3",)
    with pytest.raises(NotFoundError, match=r"^no asset with id 'nope\.x'$"):
        catalog.lineage("nope.x")


def test_soft_delete_and_purge(catalog: Catalog) -> None:
    catalog.record_task_run(
        run("t1", inputs=(decl("raw.a"),), outputs=(decl("snapshot.vm.e1", type="company.infra.Snapshot"),))
    )
    catalog.record_task_run(run("t2", inputs=(decl("raw.a"),), outputs=(decl("keep.me", type="Table"),), start=at(3)))
    deleted = catalog.delete_asset("keep.me", now=at(10))
    assert deleted.is_deleted
    assert "keep.me" not in [a.id for a in catalog.list_assets()]
    assert [c.kind for c in catalog.iter_changes()] == ["delete"]
    with pytest.raises(ValidationError, match=r"^purge needs at least one filter \("):
        catalog.purge(AssetQuery())
    result = catalog.purge(AssetQuery.create(types=["company.infra.Snapshot"]), usages=True, lineage=True)
    assert (result.assets, result.usages, result.lineage) == (1, 1, 1)
    assert catalog.get_asset("snapshot.vm.e1") is None
    result = catalog.purge(AssetQuery.create(updated_before=at(11)))
    assert set(result.ids) == {"raw.a", "keep.me"}


def test_schema_is_versioned_and_newer_catalogs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with Catalog(path) as cat:
        assert cat.schema_version == catalog_sql.SCHEMA_VERSION
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {catalog_sql.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(CatalogError, match="newer"):
        Catalog(path)
    with pytest.raises(CatalogError, match="does not exist"):
        Catalog(tmp_path / "missing" / "c.db")
    with pytest.raises(CatalogError, match=f"catalog {tmp_path}: it is a folder, not a catalog's file"):
        Catalog(tmp_path)  # SQLite says only that the file cannot be opened


def test_the_three_kinds_of_position_move_into_one_table(tmp_path: Path) -> None:
    """A catalog of schema version 8 keeps its Marquez import position, its Prefect import state and
    its backfill checkpoint (their own tables then) as positions, read back as they were."""
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for number, (_name, script) in enumerate(SQLITE_SCRIPTS[:8], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.execute("INSERT INTO import_positions VALUES ('marquez:http://m:5000', '2025-03-01T08:03:00Z', 'u1')")
    conn.execute(
        "INSERT INTO prefect_import_state VALUES (?, ?, ?, 7, 'u2')",
        ("http://p/api", "2025-03-01T08:00:00.000000Z", '["a","b"]'),
    )
    conn.execute(
        "INSERT INTO backfill_checkpoints VALUES ('http://b', ?, ?, 3, 6, 'u3', ?)",
        ('{"namespace":"n"}', '["2025-03-01T08:00:00Z",1,4]', '[[["2025-03-01T09:00:00Z",1,9],1]]'),
    )
    conn.close()
    with Catalog(path) as cat:
        assert cat.schema_version == catalog_sql.SCHEMA_VERSION
        assert cat.position("marquez-import", "http://m:5000") == Position(
            "marquez-import", "http://m:5000", {"after": "2025-03-01T08:03:00Z"}, "u1"
        )
        assert read_cursor(cat, "http://p/api") == PrefectCursor(at(0), ("a", "b"), 7)
        assert cat.backfills.checkpoint("http://b") == Checkpoint(
            "http://b",
            {"namespace": "n"},
            ("2025-03-01T08:00:00Z", 1, 4),
            3,
            6,
            "u3",
            ((("2025-03-01T09:00:00Z", 1, 9), 1),),
        )
        tables = {n for (n,) in cat._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"import_positions", "prefect_import_state", "backfill_checkpoints"} & tables == set()


def test_a_position_lands_with_the_runs_it_covers_or_not_at_all(catalog: Catalog) -> None:
    where = Position("prefect-import", "http://p/api", {"lastOccurred": "x"}, "u1")
    ended = run("t", outputs=(decl("a.b", type="Table"),))
    first = catalog.record_each([ended], position=where)
    assert [r.status for r in first if isinstance(r, RecordResult)] == ["created"]
    assert catalog.position("prefect-import", "http://p/api") == where
    # a run that cannot be taken comes back as its error; the others and the position land
    changed = run("t", outputs=(decl("a.b", type="Table", description="other"),))
    later = Position("prefect-import", "http://p/api", {"lastOccurred": "y"}, "u2")
    results = catalog.record_each([changed, run("u")], position=later)
    assert isinstance(results[0], CatalogError) and "already ended" in str(results[0])
    assert isinstance(results[1], RecordResult) and results[1].status == "created"
    assert catalog.position("prefect-import", "http://p/api") == later
    with pytest.raises(ValidationError, match=r"^a position's kind is a non-empty string$"):
        Position("", "x", {})


def test_the_history_readers_take_one_filter_and_agree_with_the_count(catalog: Catalog) -> None:
    catalog.record_task_run(run("load", outputs=(decl("raw.orders", type="Table"),), start=at(1)))
    catalog.record_task_run(run("build", inputs=(decl("raw.orders"),), start=at(5), flow="nightly"))
    catalog.record_task_run(run("other", outputs=(decl("other.t", type="Table"),), start=at(9), namespace="other.team"))
    # a run that failed on raw.orders: its events name it as an output, so an asset's history has it
    catalog.record_task_run(run("reload", outputs=(decl("raw.orders"),), state="FAILED", start=at(12)))
    # one that failed on an asset made after it (new, without a type: not made by the failed run):
    # its events name none, so that asset's history has it not
    catalog.record_task_run(run("early", outputs=(decl("late.t"),), state="FAILED", start=at(14)))
    catalog.record_task_run(run("late", outputs=(decl("late.t", type="Table"),), start=at(16)))
    for filters in (
        HistoryFilter(),
        HistoryFilter(since=at(5)),
        HistoryFilter(until=at(5)),
        HistoryFilter(namespace="company.data"),
        HistoryFilter(flow="nightly"),
        HistoryFilter(asset="raw.orders"),
    ):
        runs = list(catalog.iter_task_runs(filters))
        changes = list(catalog.iter_changes(filters))
        declared = list(catalog.iter_declared_jobs(filters))
        ended = sum(1 for r in runs if r.ended_at is not None)
        assert catalog.count_history(filters) == len(runs) + ended + len(changes) + len(declared), filters
    assert [r.key.task_id for r in catalog.iter_task_runs(HistoryFilter(asset="raw.orders"))] == [
        "load",
        "build",
        "reload",
    ]
    assert [r.key.task_id for r in catalog.iter_task_runs(HistoryFilter(asset="late.t"))] == ["late"]
    assert [r.key.task_id for r in catalog.iter_task_runs(HistoryFilter(since=at(5), flow="nightly"))] == ["build"]
    assert list(catalog.iter_changes(HistoryFilter(flow="nightly"))) == []  # asset changes belong to no flow


def test_usages_come_as_records_whose_json_is_what_assets_show_prints(catalog: Catalog) -> None:
    catalog.record_task_run(run("load", outputs=(decl("raw.orders", type="Table"),), start=at(1)))
    (usage,) = catalog.usages_of("raw.orders")
    assert isinstance(usage, RunUsage) and (usage.direction, usage.task_id) == ("output", "load")
    assert usage.to_json() == {
        "direction": "output",
        "time": usage.time,
        "namespace": "company.data",
        "flowId": "flow",
        "taskId": "load",
        "executionId": "e1",
        "taskRunId": "e1.load",
        "state": "SUCCESS",
    }
    assert ExternalUsage("input", "airflow", "dag.task").to_json() == {
        "direction": "input",
        "external": True,
        "jobNamespace": "airflow",
        "jobName": "dag.task",
    }


def test_an_asset_held_under_an_id_with_a_password_can_be_purged(catalog_target: str) -> None:
    """An id recorded before the rule that refuses a password in one is still one a lookup finds
    (``assets purge --id``, the way to take it out of the events), not refused as a new one is."""
    secret = "postgres://alice:s3cret@db:5432/shop.public.orders"
    with Catalog(catalog_target) as catalog:
        catalog.set_asset(AssetDeclaration(id=secret, type="Table"), now=at(0))  # as recorded before
    code, _out, err = invoke(catalog_target, "assets", "purge", "--id", secret)
    assert code == 0, err
    with Catalog(catalog_target) as catalog:
        assert catalog.list_assets() == []


def test_assets_are_listed_a_page_at_a_time_by_id(catalog: Catalog) -> None:
    """A page of ``limit`` after an id, none skipped or twice; with a metadata filter, ``limit`` of
    those it keeps (read on past the others)."""
    for i in range(7):
        catalog.set_asset(decl(f"t.a{i}", type="Table", metadata={"even": str(i % 2 == 0)}), now=at(i))
    seen: list[str] = []
    after = None
    while True:
        page = catalog.list_assets(AssetQuery.create(after=after, limit=3))
        seen += [a.id for a in page]
        if len(page) < 3:
            break
        after = page[-1].id
    assert seen == [f"t.a{i}" for i in range(7)]
    even = [MetadataFilter.create("even", "EQUAL_TO", "True")]
    assert [a.id for a in catalog.list_assets(AssetQuery.create(metadata=even, limit=2))] == ["t.a0", "t.a2"]
    page = catalog.list_assets(AssetQuery.create(metadata=even, limit=2, after="t.a2"))
    assert [a.id for a in page] == ["t.a4", "t.a6"]
