"""``lineage`` as text: each asset's (and column's) subtree drawn once, a later occurrence marked,
and each edge's tasks cut to the first few; the Mermaid labels cut the same way. The README's
demo output and the golden tree stay as they are shown."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from bridge.catalog import Catalog, ColumnLineageEdge, ColumnLineageGraph, LineageEdge, LineageGraph
from bridge.cli import cli
from bridge.drawing.asset_graph import graph_lines, graph_mermaid, graph_text
from bridge.drawing.column_graph import column_graph_lines
from bridge.model import Asset, Origin
from tests.conftest import at
from tests.helpers import decl, invoke, run

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"


def asset(asset_id: str, type: str = "Table") -> Asset:
    return Asset(id=asset_id, type=type, namespace=None, origin=Origin.DECLARED, created_at=at(0), updated_at=at(0))


def graph(
    root: str, edges: list[tuple[str, str, tuple[str, ...]]], *, direction: str = "downstream", depth: int = 5
) -> LineageGraph:
    ids = dict.fromkeys([root, *(i for up, down, _ in edges for i in (up, down))])
    return LineageGraph(
        root=root,
        direction=direction,
        depth=depth,
        edges=tuple(LineageEdge(up, down, 1, tasks) for up, down, tasks in edges),
        assets=tuple(asset(i) for i in ids),
    )


def lattice(layers: int, width: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """Every asset of a layer linked to every asset of the next: width ** layers paths."""
    return [
        (f"l{n}.a{i}", f"l{n + 1}.a{j}", (f"ns/flow.t{n}{i}{j}",))
        for n in range(layers)
        for i in range(width)
        for j in range(width)
    ]


def test_an_asset_reached_by_many_paths_is_drawn_once_a_line_an_edge() -> None:
    edges = [("root", f"l0.a{i}", ("ns/flow.first",)) for i in range(3)] + lattice(4, 3)
    lines = graph_lines(graph("root", edges))
    assert len(lines) == 1 + len(edges)  # 40 lines, where every path (363) was one
    drawn = [line for line in lines[1:] if not line.endswith("(shown above)")]
    assert len(drawn) == 3 + 3 + 3 + 3 + 9  # each asset's subtree once (l4's assets have none: no mark)
    assert lines[1:4] == [
        "  -> l0.a0 (Table)  via ns/flow.first",
        "    -> l1.a0 (Table)  via ns/flow.t000",
        "      -> l2.a0 (Table)  via ns/flow.t100",
    ]
    assert "    -> l1.a0 (Table)  via ns/flow.t010  (shown above)" in lines
    assert {line.split()[1] for line in lines[1:]} == {down for _, down, _ in edges}  # every asset shown


def test_an_asset_reached_deeper_first_is_drawn_where_it_is_nearest() -> None:
    """Its subtree is drawn where the depth shows most of it; a line met before says below."""
    edges = [("root", "a", ("t.a",)), ("root", "z", ("t.z",)), ("a", "b", ("t.b",)), ("b", "z", ("t.bz",))]
    edges += [("z", "y", ("t.y",)), ("y", "x", ("t.x",))]
    assert graph_lines(graph("root", edges, depth=3)) == [
        "root (Table)",
        "  -> a (Table)  via t.a",
        "    -> b (Table)  via t.b",
        "      -> z (Table)  via t.bz  (shown below)",
        "  -> z (Table)  via t.z",
        "    -> y (Table)  via t.y",
        "      -> x (Table)  via t.x",
    ]


def test_a_cycle_back_to_the_root_says_it_is_shown_above() -> None:
    lines = graph_lines(graph("a", [("a", "b", ()), ("b", "a", ())], direction="both"))
    assert lines == [
        "a (Table)",
        "  <- b (Table)",
        "    <- a (Table)  (shown above)",
        "  -> b (Table)",
        "    -> a (Table)  (shown above)",
    ]


def test_an_edge_names_its_first_three_tasks_and_counts_the_others() -> None:
    tasks = tuple(f"ns/flow.t{i}" for i in range(190))
    lines = graph_lines(graph("raw", [("raw", "mart", tasks), ("mart", "out", tasks[:3])]))
    assert lines[1] == "  -> mart (Table)  via ns/flow.t0, ns/flow.t1, ns/flow.t2 and 187 more"
    assert lines[2] == "    -> out (Table)  via ns/flow.t0, ns/flow.t1, ns/flow.t2"
    diagram = graph_mermaid(graph("raw", [("raw", "mart", tasks)]))
    assert '-->|"ns/flow.t0<br/>ns/flow.t1<br/>ns/flow.t2<br/>and 187 more"|' in diagram


def test_a_column_reached_by_many_paths_is_drawn_once() -> None:
    edges = tuple(
        ColumnLineageEdge(f"l{n}", f"c{i}", f"l{n + 1}", f"c{j}", n + 1, (), (f"ns/flow.t{n}",))
        for n in range(4)
        for i in range(3)
        for j in range(3)
    )
    lines = column_graph_lines(ColumnLineageGraph("l0", "c0", "downstream", 5, edges, ()))
    assert len(lines) == 1 + 3 + 3 * 9  # the root's edges, then each other layer's once
    assert "    -> l2.c0  via ns/flow.t1  (shown above)" in lines


def test_the_demos_lineage_is_drawn_as_the_readme_shows_it(tmp_path: Path) -> None:
    def tree(text: str) -> str:
        return text.split("Lineage from dbt.main.my_first_dbt_model:\n", 1)[1].split("\nEvents:", 1)[0]

    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert tree(result.stdout) == tree((ROOT / "README.md").read_text(encoding="utf-8"))


def test_a_small_graph_is_drawn_as_its_golden_file(golden) -> None:  # type: ignore[no-untyped-def]
    """Both directions, a diamond (its shared asset once, then marked), a cycle, long via lists."""
    many = tuple(f"etl/load.part{i}" for i in range(5))
    edges = [
        ("raw.orders", "stage.orders", ("etl/load.orders",)),
        ("raw.customers", "stage.orders", many),
        ("stage.orders", "mart.daily", ("etl/build.daily",)),
        ("stage.orders", "mart.weekly", ("etl/build.weekly",)),
        ("mart.daily", "report.kpis", ("bi/publish.kpis", "bi/publish.kpis_backfill")),
        ("mart.weekly", "report.kpis", ("bi/publish.kpis",)),
        ("report.kpis", "mart.daily", ("bi/feedback.fix (external)",)),
        ("report.kpis", "export.kpis", ()),
    ]
    golden(GOLDEN / "lineage.txt", graph_text(graph("stage.orders", edges, direction="both")) + "\n")


def test_the_lineage_command_draws_a_lattice_once(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        for n, (up, down, _) in enumerate(lattice(4, 3)):
            for flow in ("a", "b", "c", "d"):
                catalog.record_task_run(
                    run(f"t{n}", flow=flow, inputs=(decl(up, type="Table"),), outputs=(decl(down, type="Table"),))
                )
    code, out, err = invoke(db, "lineage", "l0.a0", "--direction", "downstream")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1 + 3 + 27  # not a line a path (3 + 9 + 27 + 81)
    assert lines[1] == "  -> l1.a0 (Table)  via company.data/a.t0, company.data/b.t0, company.data/c.t0 and 1 more"
    assert sum(line.endswith("(shown above)") for line in lines) == 2 * 3 * 2  # l2's and l3's, reached again
