"""``lineage --format mermaid``, parsed by Mermaid 11's own parser.

``tests/mermaid`` holds the parser (the ``mermaid`` npm package, with jsdom for the DOM it
needs) and ``parse.mjs``; ``make test`` installs them (``npm ci --prefix tests/mermaid``). Without
Node or the package these tests fail, saying so: they never skip.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog, ColumnLineageEdge, ColumnLineageGraph, LineageEdge, LineageGraph
from bridge.drawing.asset_graph import MERMAID_MAX_EDGES, MERMAID_MAX_TEXT, graph_mermaid, mermaid_limits
from bridge.drawing.column_graph import column_graph_mermaid
from bridge.drawing.mermaid import node_id
from bridge.mapping import Resolver
from bridge.model import Asset, Origin, Transformation
from bridge.receiver.imports import catalog_intake
from tests.conftest import BIN, ROOT, at
from tests.helpers import decl, ol_dataset, ol_run_event, run

CHECKER = ROOT / "tests" / "mermaid"

Parse = Callable[[list[str]], list[dict[str, Any]]]


@pytest.fixture(scope="session")
def mermaid() -> Iterator[Parse]:
    """Parse diagrams with the real Mermaid parser, in one Node process for the whole session."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("the Mermaid tests need Node (20 or later) on PATH, and `make test` to install tests/mermaid")
    if not (CHECKER / "node_modules" / "mermaid" / "package.json").is_file():
        pytest.fail("the mermaid npm package is not installed: run `make test` or `npm ci --prefix tests/mermaid`")
    with subprocess.Popen(
        [node, str(CHECKER / "parse.mjs")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

        def parse(texts: list[str]) -> list[dict[str, Any]]:
            stdin.write(json.dumps(texts) + "\n")
            stdin.flush()
            ready, _, _ = select.select([stdout], [], [], 120)
            assert ready, "parse.mjs gave no answer in 120 s"
            line = stdout.readline()
            assert line, f"parse.mjs stopped: {stderr.read()}"
            results: list[dict[str, Any]] = json.loads(line)
            assert len(results) == len(texts)
            return results

        try:
            yield parse
        finally:
            stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def asset(asset_id: str, type: str = "Table") -> Asset:
    return Asset(id=asset_id, type=type, namespace=None, origin=Origin.DECLARED, created_at=at(0), updated_at=at(0))


def graph(edges: list[tuple[str, str, tuple[str, ...]]], *, types: dict[str, str] | None = None) -> LineageGraph:
    ids = dict.fromkeys(i for up, down, _ in edges for i in (up, down))
    return LineageGraph(
        root=next(iter(ids)),
        direction="both",
        depth=5,
        edges=tuple(LineageEdge(up, down, 1, tasks) for up, down, tasks in edges),
        assets=tuple(asset(i, (types or {}).get(i, "Table")) for i in ids),
    )


def drawn(result: dict[str, Any]) -> tuple[dict[str, str], dict[tuple[str, str], list[str]]]:
    """What a parsed diagram shows: each node's label by asset id, and each edge's task lines
    by (upstream, downstream) asset id; the node labels are "<asset id>\\n<type>"."""
    assert result["ok"], result.get("error")
    labels = {n["id"]: n["label"] for n in result["nodes"]}
    asset_of = {node: label.split("\n", 1)[0] for node, label in labels.items()}
    nodes = {asset_of[node]: label for node, label in labels.items()}
    assert len(nodes) == len(labels), "two nodes show the same asset id"
    edges: dict[tuple[str, str], list[str]] = {}
    for e in result["edges"]:
        pair = (asset_of[e["start"]], asset_of[e["end"]])
        assert pair not in edges, f"{pair} drawn twice"
        edges[pair] = e["label"].split("\n") if e["label"] else []
    return nodes, edges


def expected(g: LineageGraph) -> tuple[dict[str, str], dict[tuple[str, str], list[str]]]:
    nodes = {a.id: f"{a.id}\n{a.type}" for a in g.assets}
    edges: dict[tuple[str, str], list[str]] = {}
    for e in g.edges:
        tasks = edges.setdefault((e.upstream, e.downstream), [])
        tasks += [t for t in e.tasks if t not in tasks]
    return nodes, edges


ODD = [
    's3://b/a|b"c',
    "s3://b/[x](y){z}",
    "s3://b/<i>#35;&amp;%%{init: {'theme': 'dark'}}%%",
    "s3://b/semi;colon#hash; end",
    "file:///données/日本語/📦.csv",
    "`md`",
    "style:x#34;y",
    "classDef:a #1;b",
    "a<br/>b",
    "end",
    "subgraph",
    "click",
    "o",
    "x",
    "-->",
    "a\tb",
]


def test_every_kind_of_graph_parses_and_shows_what_it_holds(mermaid: Parse) -> None:
    graphs = [
        graph([("raw.orders", "clean.orders", ("spark/orders_etl (external)",))]),
        graph([(a, b, (f'flow.{b}|"t" [x] (y) {{z}} <w> #1; ; é',)) for a, b in itertools.pairwise(ODD)]),
        graph(
            [(a, b, (f"t{i}",)) for i, (a, b) in enumerate(zip(ODD, reversed(ODD), strict=True)) if a != b],
            types={i: f'T<{i}>"#' for i in ODD},
        ),
        graph(
            [("a.b", "a_b", ()), ("a_b", "a-b", ()), ("a-b", "a:b", ()), ("a:b", "a_2e_b", ()), ("a_2e_b", "A.b", ())]
        ),
        graph(
            [
                ("raw.orders", "mart.orders", ("ns/flow.load",)),
                ("raw.orders", "mart.orders", ("ns/flow.load", "ns/other.fix")),
                ("raw.orders", "mart.orders", ("spark/orders_etl (external)",)),
                ("mart.orders", "raw.orders", ("ns/back.fill",)),
            ]
        ),
    ]
    results = mermaid([graph_mermaid(g) for g in graphs])
    for g, result in zip(graphs, results, strict=True):
        assert drawn(result) == expected(g)


def test_the_external_jobs_edge_parses(mermaid: Parse, catalog: Catalog, resolver: Resolver) -> None:
    """The issue's case: an edge through an external job, from the receiver."""
    catalog.record_task_run(
        run("load", inputs=(decl("raw.orders"),), outputs=(decl("s3://raw-bucket/orders/2025", type="File"),))
    )
    catalog_intake(catalog, resolver).take(
        [
            ol_run_event(
                job=("spark", "orders_etl"),
                inputs=[ol_dataset("s3://raw-bucket", "orders/2025")],
                outputs=[ol_dataset("postgres://db:5432", "shop.public.orders")],
            )
        ]
    )
    g = catalog.lineage("s3://raw-bucket/orders/2025")
    assert [e.tasks for e in g.edges] == [("company.data/flow.load",), ("spark/orders_etl (external)",)]
    (result,) = mermaid([graph_mermaid(g)])
    nodes, edges = drawn(result)
    assert (nodes, edges) == expected(g)
    assert edges[("s3://raw-bucket/orders/2025", "shop.public.orders")] == ["spark/orders_etl (external)"]


def test_ids_that_looked_alike_stay_apart(mermaid: Parse) -> None:
    ids = ["a.b", "a_b", "a-b", "a:b", "a/b", "a_2e_b", "a_2e__b", "A.b", "a..b", "ab", "a_b_", "é", "_e9_"]
    assert len({node_id(i) for i in ids}) == len(ids)
    assert [node_id(i) for i in ("a.b", "a_b", "é")] == ["n_a_2e_b", "n_a_5f_b", "n__e9_"]  # no state: always these
    g = graph([(a, b, ()) for a, b in itertools.pairwise(ids)])
    (result,) = mermaid([graph_mermaid(g)])
    assert len(result["nodes"]) == len(ids) and len(result["edges"]) == len(ids) - 1
    assert drawn(result) == expected(g)


def test_every_task_of_an_edge_is_drawn_once(mermaid: Parse, catalog: Catalog, resolver: Resolver) -> None:
    for task, flow in (("load", "flow"), ("fix", "flow"), ("load", "other")):
        catalog.record_task_run(
            run(task, flow=flow, inputs=(decl("raw.orders"),), outputs=(decl("mart.orders", type="Table"),))
        )
    catalog.record_task_run(run("load", execution="e2", inputs=(decl("raw.orders"),), outputs=(decl("mart.orders"),)))
    g = catalog.lineage("raw.orders")
    (result,) = mermaid([graph_mermaid(g)])
    _, edges = drawn(result)
    assert edges == {
        ("raw.orders", "mart.orders"): ["company.data/flow.fix", "company.data/flow.load", "company.data/other.load"]
    }


def test_past_mermaids_edge_limit_the_cli_warns(mermaid: Parse, tmp_path: Path) -> None:
    at_limit = graph([("root", f"out.{i}", ()) for i in range(MERMAID_MAX_EDGES)])
    past = graph([("root", f"out.{i}", ()) for i in range(MERMAID_MAX_EDGES + 1)])
    ok, failed = mermaid([graph_mermaid(at_limit), graph_mermaid(past)])
    assert ok["ok"] and len(ok["edges"]) == MERMAID_MAX_EDGES
    assert not failed["ok"] and "Edge limit exceeded" in failed["error"]
    assert mermaid_limits(graph_mermaid(at_limit)) == []
    assert len(mermaid_limits(graph_mermaid(past))) == 1

    records = tmp_path / "runs.jsonl"
    outputs = [{"id": f"out.{i}", "type": "Table"} for i in range(MERMAID_MAX_EDGES + 1)]
    records.write_text(json.dumps(record(inputs=[{"id": "root"}], outputs=outputs)) + "\n")
    db = tmp_path / "c.db"
    olbridge(db, "record", "--file", str(records))
    done = olbridge(db, "lineage", "root", "--format", "mermaid")
    assert done.stdout.count(" -->") == MERMAID_MAX_EDGES + 1  # the diagram whole, the warning on stderr
    assert f"warning: the diagram has {MERMAID_MAX_EDGES + 1} edges" in done.stderr


def test_a_diagram_longer_than_mermaid_renders_is_reported() -> None:
    wide = graph([("root", f"s3://bucket/{'x' * 400}/{i}", ()) for i in range(120)])
    text = graph_mermaid(wide)
    assert len(text) > MERMAID_MAX_TEXT
    assert [m.split(",")[0] for m in mermaid_limits(text)] == [f"{len(text)} characters"]
    emoji = graph_mermaid(graph([("root", "out", ("📦" * (MERMAID_MAX_TEXT // 2 - 10),))]))  # 2 UTF-16 units each
    assert len(emoji) < MERMAID_MAX_TEXT and len(mermaid_limits(emoji)) == 1


def record(**fields: Any) -> dict[str, Any]:
    return {
        "namespace": "company.data",
        "flowId": "f",
        "taskId": "t",
        "executionId": "e1",
        "taskRunId": "r1",
        "state": "SUCCESS",
        "startDate": "2025-01-01T00:00:00Z",
        "endDate": "2025-01-01T00:01:00Z",
        **fields,
    }


def olbridge(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(BIN / "olbridge"), "--catalog", str(db), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_lineage_command_draws_odd_names_through_an_external_job(mermaid: Parse, tmp_path: Path) -> None:
    """End to end: task ids with every odd character, an external Spark job, the real command."""
    db = tmp_path / "c.db"
    records = tmp_path / "runs.jsonl"
    odd_task = 'load | "x" [y] (z) {w} <v> #1; ; 日本 ✓'
    lines = [
        record(
            taskId=odd_task, inputs=[{"id": "raw.orders"}], outputs=[{"id": "s3://b/[o](r){d}|e\"r's", "type": "File"}]
        ),
        record(
            taskRunId="r2", taskId="fix", inputs=[{"id": "raw.orders"}], outputs=[{"id": "s3://b/[o](r){d}|e\"r's"}]
        ),
        record(
            taskRunId="r3",
            taskId="a-b",
            inputs=[{"id": "a.b"}],
            outputs=[{"id": "a_b", "type": "Table"}, {"id": "a-b", "type": "Table"}],
        ),
    ]
    records.write_text("".join(json.dumps(x) + "\n" for x in lines))
    olbridge(db, "record", "--file", str(records))
    events = tmp_path / "events.ndjson"
    spark = ol_run_event(
        job=("spark", "orders_etl"),
        inputs=[ol_dataset("s3://b", "[o](r){d}|e\"r's")],
        outputs=[ol_dataset("postgres://db:5432", "shop.public.orders")],
    )
    events.write_text(json.dumps(spark) + "\n")
    olbridge(db, "import", str(events))

    down = olbridge(db, "lineage", "raw.orders", "--direction", "downstream", "--format", "mermaid").stdout
    apart = olbridge(db, "lineage", "a.b", "--format", "mermaid").stdout
    first, second = mermaid([down, apart])
    nodes, edges = drawn(first)
    assert nodes == {
        "raw.orders": "raw.orders\nExternal",
        "s3://b/[o](r){d}|e\"r's": "s3://b/[o](r){d}|e\"r's\nFile",
        "shop.public.orders": "shop.public.orders\nExternal",
    }
    assert edges == {
        ("raw.orders", "s3://b/[o](r){d}|e\"r's"): ["company.data/f.fix", f"company.data/f.{odd_task}"],
        ("s3://b/[o](r){d}|e\"r's", "shop.public.orders"): ["spark/orders_etl (external)"],
    }
    nodes, edges = drawn(second)
    assert set(nodes) == {"a.b", "a_b", "a-b"}
    assert edges == {("a.b", "a_b"): ["company.data/f.a-b"], ("a.b", "a-b"): ["company.data/f.a-b"]}


ColumnEdge = tuple[tuple[str, str], tuple[str, str], tuple[Transformation, ...]]


def column_graph(edges: list[ColumnEdge], *, types: dict[str, str] | None = None) -> ColumnLineageGraph:
    ids = dict.fromkeys(i for (up, _), (down, _), _ in edges for i in (up, down))
    return ColumnLineageGraph(
        root=edges[0][0][0],
        column=edges[0][0][1],
        direction="both",
        depth=5,
        edges=tuple(ColumnLineageEdge(u, uc, d, dc, 1, how, ()) for (u, uc), (d, dc), how in edges),
        assets=tuple(asset(i, (types or {}).get(i, "Table")) for i in ids),
    )


def drawn_columns(result: dict[str, Any]) -> tuple[dict[str, list[str]], dict[tuple[tuple[str, str], ...], str]]:
    """What a parsed column diagram shows: each subgraph's title ("<asset id>\\n<type>") with the
    labels of the columns in it, and each edge's label by ((asset, column), (asset, column))."""
    assert result["ok"], result.get("error")
    labels = {n["id"]: n["label"] for n in result["nodes"]}
    shown: dict[str, list[str]] = {}
    column_of: dict[str, tuple[str, str]] = {}
    for sub in result["subgraphs"]:
        assert sub["label"] not in shown, f"{sub['label']!r} drawn twice"
        shown[sub["label"]] = sorted(labels[n] for n in sub["nodes"])
        column_of.update({n: (sub["label"].split("\n", 1)[0], labels[n]) for n in sub["nodes"]})
    assert set(column_of) == set(labels), "a column outside its asset's subgraph"
    edges = {(column_of[e["start"]], column_of[e["end"]]): e["label"] for e in result["edges"]}
    return shown, edges


def test_column_diagrams_parse_and_show_their_columns_and_transformations(mermaid: Parse) -> None:
    identity, filter_, masked = (
        Transformation.of("IDENTITY"),
        Transformation.of("FILTER"),
        Transformation.of("TRANSFORMATION", masking=True),
    )
    odd_columns = ["%%{init: {'theme': 'dark'}}%%", "x<y>", 'a"b', "a|b", "#35;&amp;", "end", "`md`", "日本 ✓"]
    graphs = [
        column_graph([(("raw.orders", "id"), ("mart.orders", "id"), (identity,))]),
        column_graph(
            [
                (("raw.orders", "status"), ("mart.orders", "total"), (filter_,)),
                (("raw.orders", "amount"), ("mart.orders", "total"), (Transformation.of("AGGREGATION"), filter_)),
                (("raw.orders", "email"), ("mart.orders", "hash"), (masked,)),
                (("raw.orders", "id"), ("mart.orders", "id"), ()),
            ]
        ),
        column_graph(
            [((ODD[i], a), (ODD[i + 1], b), (filter_,)) for i, (a, b) in enumerate(itertools.pairwise(odd_columns))],
            types={i: f'T<{i}>"#' for i in ODD},
        ),
    ]
    results = mermaid([column_graph_mermaid(g) for g in graphs])
    shown = [drawn_columns(r) for r in results]

    assert shown[0] == (
        {"raw.orders\nTable": ["id"], "mart.orders\nTable": ["id"]},
        {(("raw.orders", "id"), ("mart.orders", "id")): "IDENTITY"},
    )
    assert shown[1][1] == {
        (("raw.orders", "status"), ("mart.orders", "total")): "FILTER (indirect)",
        (("raw.orders", "amount"), ("mart.orders", "total")): "AGGREGATION, FILTER (indirect)",
        (("raw.orders", "email"), ("mart.orders", "hash")): "TRANSFORMATION masked",
        (("raw.orders", "id"), ("mart.orders", "id")): "",
    }
    columns, edges = shown[2]
    titles = {f'{ODD[i]}\nT<{ODD[i]}>"#' for i in range(len(odd_columns))}
    assert set(columns) == titles
    assert sorted(c for cs in columns.values() for c in cs) == sorted(odd_columns)
    assert edges == {
        ((ODD[i], a), (ODD[i + 1], b)): "FILTER (indirect)" for i, (a, b) in enumerate(itertools.pairwise(odd_columns))
    }
