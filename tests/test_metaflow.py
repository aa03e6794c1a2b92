"""The Metaflow helper: asset definitions, branch namespaces, the step recorder, promote, and real
local Metaflow flows (the ``metaflow`` package, local metadata and datastore)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.adapters.metaflow import steps as helper
from bridge.adapters.metaflow.assets import (
    define_all,
    find_definition,
    load_definitions,
    make_scope,
    parse_definition,
    promote,
    resolve_branch,
)
from bridge.adapters.metaflow.steps import StepContext, StepRecorder, context_from
from bridge.catalog import Catalog, RunUsage
from bridge.cli import cli
from bridge.delivery.history import iter_events
from bridge.errors import BridgeError, ConfigError, NotFoundError, ValidationError
from bridge.model import AssetDeclaration, TaskState
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from tests.conftest import at
from tests.helpers import snapshot

ORDERS_CONFIG = """\
name = "Orders"
id = "orders"
description = "Orders of the day"
[properties]
owner = "analytics"
source = "erp"
"""
MODEL_CONFIG = """\
name = "Orders model"
id = "orders_model"
description = "Mean order amount"
"""

FLOW = """\
import os

from metaflow import FlowSpec, step

from bridge.adapters.metaflow import get_data, register_data, register_model


class OrdersFlow(FlowSpec):
    @step
    def start(self):
        self.orders = [3, 5, 7]
        register_data("orders", "orders", annotations={"rows": len(self.orders)}, tags={"env": "test"})
        self.next(self.train)

    @step
    def train(self):
        orders = get_data("orders")
        self.mean = sum(orders) / len(orders)
        register_model("orders_model", "mean", annotations={"mean": self.mean})
        if os.environ.get("FAIL_TRAIN"):
            raise RuntimeError("training diverged")
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    OrdersFlow()
"""

ORDERS = "metaflow://ordersflow/user.alice/data/orders"
MODEL = "metaflow://ordersflow/user.alice/models/orders_model"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# asset_config.toml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "A"\nid = "a"\nowner = "x"\n', "unknown key(s) owner"),
        ('id = "a"\n', "missing required key(s) name"),
        ('name = "A"\n', "missing required key(s) id"),
        ('name = 3\nid = "a"\n', "'name' must be a non-empty string"),
        ('name = "A"\nid = "a/b"\n', "'id' 'a/b' must be letters"),
        ('name = "A"\nid = "a"\ndescription = ["x"]\n', "'description' must be a non-empty string"),
        ('name = "A"\nid = "a"\nproperties = "x"\n', "[properties] must be a table"),
        ('name = "A"\nid = "a"\n[properties]\nlabels = {env = "prod"}\n', "metadata is flat"),
        ('name = "A"\nid = "a"\n[properties]\ntags = "x"\n', "property key(s) tags are reserved"),
        ('name = "A"\nid = "a"\n[properties]\n"annotation.rows" = 1\n', "are reserved"),
        ('name = "A"\nid = \n', "not valid TOML"),
    ],
)
def test_a_bad_asset_config_is_refused_naming_the_file(text: str, message: str) -> None:
    source = Path("data/a/asset_config.toml")
    with pytest.raises(ConfigError) as caught:
        parse_definition(text, source, "data")
    assert str(caught.value).startswith(f"{source}: ")
    assert message in str(caught.value)


def test_a_definition_keeps_name_id_description_and_properties(tmp_path: Path) -> None:
    write(tmp_path / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    definition = find_definition("orders", "data", tmp_path)
    assert (definition.name, definition.id, definition.description) == ("Orders", "orders", "Orders of the day")
    assert definition.properties == {"owner": "analytics", "source": "erp"}


def test_definitions_are_searched_from_the_flow_folder_up_to_the_project_root(tmp_path: Path) -> None:
    write(tmp_path / "obproject.toml", "")
    write(tmp_path / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    flows = tmp_path / "flows" / "etl"
    flows.mkdir(parents=True)
    assert find_definition("orders", "data", flows).source == tmp_path / "data" / "orders" / "asset_config.toml"
    with pytest.raises(ConfigError, match="no models/ folder"):
        find_definition("orders_model", "model", flows)
    with pytest.raises(ConfigError, match=r"no data asset 'nope' is defined in .*data \(defined: orders\)"):
        find_definition("nope", "data", flows)
    elsewhere = tmp_path / "shared-assets"
    write(elsewhere / "models" / "m" / "asset_config.toml", MODEL_CONFIG)
    assert find_definition("orders_model", "model", flows, root=elsewhere).name == "Orders model"


def test_an_id_defined_twice_is_refused_naming_both_files(tmp_path: Path) -> None:
    write(tmp_path / "data" / "a" / "asset_config.toml", ORDERS_CONFIG)
    write(tmp_path / "data" / "b" / "asset_config.toml", ORDERS_CONFIG)
    with pytest.raises(
        ConfigError, match=r"data/b/asset_config.toml: asset id 'orders' is already defined in .*data/a"
    ):
        load_definitions(tmp_path, "data")


# ---------------------------------------------------------------------------------------------
# branches


def test_branch_namespaces() -> None:
    assert resolve_branch(explicit=None, project_branch=None, username="Alice") == "user.alice"
    assert resolve_branch(explicit=None, project_branch="test.feature_x", username="alice") == "test.feature_x"
    assert resolve_branch(explicit="feature/New-Thing", project_branch="user.alice", username="alice") == (
        "feature/New-Thing"
    )
    with pytest.raises(ValidationError, match="cannot tell the branch"):
        resolve_branch(explicit=None, project_branch=None, username=None)
    scope = make_scope("Fraud.Detection", "feature/New-Thing")
    assert (scope.project, scope.branch, scope.namespace) == (
        "fraud-detection",
        "feature-new-thing",
        ("fraud-detection.feature-new-thing"),
    )
    assert scope.catalog_id("model", "churn") == "metaflow://fraud-detection/feature-new-thing/models/churn"
    assert make_scope("shop", "user.alice").namespace == "shop.user.alice"
    with pytest.raises(ValidationError, match="branch '///' has nothing usable"):
        make_scope("shop", "///")
    with pytest.raises(ValidationError, match="at most 150"):
        make_scope("shop", "b" * 150)


def fake_current(**fields: Any) -> SimpleNamespace:
    values: dict[str, Any] = {
        "is_running_flow": True,
        "flow_name": "OrdersFlow",
        "run_id": "17",
        "step_name": "train",
        "task_id": "4",
        "retry_count": 0,
        "username": "alice",
        "project_name": None,
        "branch_name": None,
    }
    values.update(fields)
    current = SimpleNamespace(**values)
    current.get = lambda key, default=None: getattr(current, key, default)
    return current


def test_the_context_comes_from_metaflow_current_and_the_environment() -> None:
    local = context_from(fake_current(), {})
    assert (local.scope.namespace, local.pathspec) == ("ordersflow.user.alice", "OrdersFlow/17/train/4")
    assert (local.key.flow_id, local.key.task_id, local.key.execution_id, local.key.task_run_id) == (
        "OrdersFlow",
        "train",
        "17",
        "OrdersFlow/17/train/4",
    )
    assert context_from(fake_current(retry_count=2), {}).key.task_run_id == "OrdersFlow/17/train/4:attempt-2"
    project = context_from(fake_current(project_name="shop", branch_name="prod"), {})
    assert project.scope.namespace == "shop.prod"
    deployed = context_from(fake_current(project_name="shop", branch_name="prod"), {"OLBRIDGE_METAFLOW_BRANCH": "main"})
    assert deployed.scope.namespace == "shop.main"
    with pytest.raises(BridgeError, match="inside a running Metaflow step"):
        context_from(fake_current(is_running_flow=False), {})


# ---------------------------------------------------------------------------------------------
# the step recorder, without Metaflow running


def ticking() -> Callable[[], datetime]:
    ticks = iter(at(m) for m in range(100))
    return lambda: next(ticks)


def context(tmp_path: Path, step: str = "train", task: str = "4", run: str = "17") -> StepContext:
    return StepContext("OrdersFlow", run, step, task, 0, make_scope("ordersflow", "user.alice"), tmp_path)


def recorder(tmp_path: Path, state: TaskState = TaskState.SUCCESS, **kwargs: Any) -> StepRecorder:
    return StepRecorder(
        context(tmp_path, **kwargs), tmp_path / "catalog.db", clock=ticking(), outcome=lambda _: (state, None)
    )


@pytest.fixture
def definitions(tmp_path: Path) -> dict[str, Any]:
    orders = parse_definition(ORDERS_CONFIG, Path("data/orders/asset_config.toml"), "data")
    model = parse_definition(MODEL_CONFIG, Path("models/orders_model/asset_config.toml"), "model")
    return {"orders": orders, "model": model}


def test_one_task_run_per_task_reads_at_once_and_writes_at_the_end(tmp_path: Path, definitions: Any) -> None:
    step = recorder(tmp_path)
    step.read(definitions["orders"])
    step.write(definitions["model"], "mean", {"mean": 5.0}, ["candidate"])
    with Catalog(tmp_path / "catalog.db") as catalog:
        started = list(catalog.iter_task_runs())
        assert [(r.state, [u.asset_id for u in r.inputs], r.outputs) for r in started] == [
            (TaskState.RUNNING, [ORDERS], ())
        ]
        assert catalog.asset(MODEL).metadata.get("metaflow.instance.pathspec") is None  # defined, no instance yet
    assert step.end() is TaskState.SUCCESS
    with Catalog(tmp_path / "catalog.db") as catalog:
        (stored,) = catalog.iter_task_runs()
        assert stored.key.task_run_id == "OrdersFlow/17/train/4"
        assert (stored.state, [u.asset_id for u in stored.outputs]) == (TaskState.SUCCESS, [MODEL])
        model = catalog.asset(MODEL)
        assert (model.type, model.namespace, model.display_name) == ("Model", "ordersflow.user.alice", "Orders model")
        assert model.metadata["annotation.mean"] == 5.0
        assert model.metadata["tags"] == "candidate"
        assert model.metadata["metaflow.instance.pathspec"] == "OrdersFlow/17/train/4"
        assert [(e.upstream, e.downstream) for e in catalog.lineage(ORDERS, direction="downstream").edges] == [
            (ORDERS, MODEL)
        ]
    assert step.end() is TaskState.SUCCESS  # ends once
    with pytest.raises(BridgeError, match="already ended"):
        step.read(definitions["model"])
    assert list(step.inputs) == [ORDERS]  # a refused call changes nothing


def test_a_read_the_catalog_refuses_changes_nothing(tmp_path: Path, definitions: Any) -> None:
    with Catalog(tmp_path / "catalog.db") as catalog:  # the model's id is already a dataset's
        catalog.set_asset(AssetDeclaration.create(MODEL, type="Dataset"), now=at(90))
    step = recorder(tmp_path)
    with pytest.raises(ValidationError, match="changing its type"):
        step.read(definitions["model"])
    assert (step.inputs, step.started_at) == ({}, None)
    with Catalog(tmp_path / "catalog.db") as catalog:
        assert list(catalog.iter_task_runs()) == []
    step.read(definitions["orders"])
    with pytest.raises(ValidationError, match="changing its type"):
        step.read(definitions["model"])
    assert list(step.inputs) == [ORDERS]
    assert step.end() is TaskState.SUCCESS
    with Catalog(tmp_path / "catalog.db") as catalog:
        (stored,) = catalog.iter_task_runs()
        assert [u.asset_id for u in stored.inputs] == [ORDERS]
        assert catalog.asset(MODEL).type == "Dataset"


def test_a_failed_task_writes_no_instance(tmp_path: Path, definitions: Any) -> None:
    first = recorder(tmp_path, task="4")
    first.write(definitions["model"], "mean", {"mean": 5.0}, None)
    first.end()
    failed = recorder(tmp_path, TaskState.FAILED, task="9", run="18")
    failed.write(definitions["model"], "mean", {"mean": 99.0}, None)
    assert failed.end() is TaskState.FAILED
    with Catalog(tmp_path / "catalog.db") as catalog:
        runs = {r.key.execution_id: r for r in catalog.iter_task_runs()}
        assert (runs["18"].state, runs["18"].outputs) == (TaskState.FAILED, ())
        model = catalog.asset(MODEL)
        assert (model.metadata["annotation.mean"], model.metadata["metaflow.instance.runId"]) == (5.0, "17")


def test_a_new_instance_replaces_the_last_ones_annotations_and_tags(tmp_path: Path, definitions: Any) -> None:
    first = recorder(tmp_path, task="1", run="1")
    first.write(definitions["orders"], "orders", {"rows": 3, "late": True}, {"env": "test"})
    first.end()
    second = recorder(tmp_path, task="2", run="2")
    second.write(definitions["orders"], "orders", {"rows": 4}, None)
    second.end()
    with Catalog(tmp_path / "catalog.db") as catalog:
        metadata = catalog.asset(ORDERS).metadata
    assert metadata["annotation.rows"] == 4
    assert "annotation.late" not in metadata and "tags" not in metadata
    assert (metadata["owner"], metadata["metaflow.instance.runId"]) == ("analytics", "2")  # properties stay


def test_a_property_taken_out_of_the_file_leaves_the_catalog(tmp_path: Path, definitions: Any) -> None:
    recorder(tmp_path, task="1").read(definitions["orders"])
    smaller = parse_definition(ORDERS_CONFIG.replace('source = "erp"\n', ""), Path("data/orders/x.toml"), "data")
    recorder(tmp_path, task="2").read(smaller)
    with Catalog(tmp_path / "catalog.db") as catalog:
        metadata = catalog.asset(ORDERS).metadata
        assert (metadata["owner"], metadata["metaflow.properties"]) == ("analytics", "owner")
        assert "source" not in metadata
        assert [c.asset.metadata.get("source") for c in catalog.iter_changes()] == ["erp", None]  # DatasetEvents


def test_a_property_key_with_a_comma_is_refused() -> None:
    # metaflow.properties lists the keys comma-separated: such a key, once set, could never leave
    with pytest.raises(ConfigError, match=r"property key\(s\) 'a,b' hold a comma"):
        parse_definition(ORDERS_CONFIG + '"a,b" = "x"\n', Path("data/orders/x.toml"), "data")


def test_declare_sets_every_definition_or_none(tmp_path: Path) -> None:
    write(tmp_path / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    write(tmp_path / "models" / "orders_model" / "asset_config.toml", MODEL_CONFIG)
    db = str(tmp_path / "catalog.db")
    result = CliRunner().invoke(
        cli, ["--catalog", db, "metaflow", "declare", str(tmp_path), "--project", "shop", "--branch", "main"]
    )
    assert result.exit_code == 0, result.stderr
    assert [a["id"] for a in json.loads(result.stdout)] == [
        "metaflow://shop/main/data/orders",
        "metaflow://shop/main/models/orders_model",
    ]
    write(tmp_path / "models" / "broken" / "asset_config.toml", 'name = "Broken"\n')
    with Catalog(db) as catalog:
        before = snapshot(catalog)
        with pytest.raises(ConfigError, match=r"models/broken/asset_config.toml: missing required key\(s\) id"):
            define_all(catalog, tmp_path, make_scope("shop", "feature"), now=at(5))
        assert snapshot(catalog) == before
    with Catalog(":memory:") as empty, pytest.raises(ConfigError, match="no asset definitions"):
        define_all(empty, tmp_path / "nowhere", make_scope("shop", "main"), now=at(5))


def test_bad_annotations_or_tags_are_refused_and_nothing_is_recorded(tmp_path: Path, definitions: Any) -> None:
    recorder(tmp_path, task="1").write(definitions["orders"], "orders", {"rows": 3}, None)
    with Catalog(tmp_path / "catalog.db") as catalog:
        before = snapshot(catalog)
    step = recorder(tmp_path, task="2")
    with pytest.raises(ValidationError, match="metadata is flat"):
        step.write(definitions["orders"], "orders", {"stats": {"rows": 3}}, None)
    with pytest.raises(ValidationError, match="a tag is a non-empty string"):
        step.write(definitions["orders"], "orders", None, ["a,b"])
    with pytest.raises(ValidationError, match="not a string"):
        step.write(definitions["orders"], "orders", None, "env:test")
    with Catalog(tmp_path / "catalog.db") as catalog:
        assert snapshot(catalog) == before


def test_a_bad_config_in_a_step_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, definitions: Any
) -> None:
    write(tmp_path / "data" / "orders" / "asset_config.toml", "colour = 'red'\n" + ORDERS_CONFIG)
    recorder(tmp_path, task="1").read(definitions["orders"])
    with Catalog(tmp_path / "catalog.db") as catalog:
        before = snapshot(catalog)
    monkeypatch.setattr(helper, "_context", lambda: context(tmp_path, task="2"))
    monkeypatch.setattr(helper, "_active", None)
    monkeypatch.setenv("OLBRIDGE_CATALOG", str(tmp_path / "catalog.db"))
    with pytest.raises(ConfigError, match=r"data/orders/asset_config.toml: unknown key\(s\) colour"):
        helper.register_data("orders", "orders")
    with pytest.raises(ValidationError, match="artifact is the name of a step artifact"):
        helper.register_data("orders", "self.orders")
    assert helper._active is None
    with Catalog(tmp_path / "catalog.db") as catalog:
        assert snapshot(catalog) == before


def test_a_refused_first_call_in_a_step_leaves_nothing_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    monkeypatch.setattr(helper, "_context", lambda: context(tmp_path))
    monkeypatch.setattr(helper, "_active", None)
    monkeypatch.setenv("OLBRIDGE_CATALOG", str(tmp_path / "catalog.db"))
    with pytest.raises(ValidationError, match="not a string"):
        helper.register_data("orders", "orders", tags="a:b")
    helper._end_active()  # what the exit hook does
    assert helper._active is None
    assert not (tmp_path / "catalog.db").exists()


def test_a_step_can_read_another_branchs_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, definitions: Any
) -> None:
    write(tmp_path / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    main = StepContext("OrdersFlow", "5", "start", "1", 0, make_scope("ordersflow", "main"), tmp_path)
    producer = StepRecorder(main, tmp_path / "catalog.db", clock=ticking(), outcome=lambda _: (TaskState.SUCCESS, None))
    producer.write(definitions["orders"], "orders", {"rows": 3}, None)
    producer.end()
    monkeypatch.setattr(helper, "_context", lambda: context(tmp_path))
    monkeypatch.setattr(helper, "_active", None)
    monkeypatch.setenv("OLBRIDGE_CATALOG", str(tmp_path / "catalog.db"))
    loaded: list[tuple[str, str]] = []
    monkeypatch.setattr(helper, "load_artifact", lambda pathspec, artifact: loaded.append((pathspec, artifact)) or [1])
    with pytest.raises(NotFoundError, match=r"data asset 'orders' has no instance on branch user\.alice"):
        helper.get_data("orders")
    assert helper.get_data("orders", branch="main") == [1]
    assert loaded == [("OrdersFlow/5/start/1", "orders")]
    reference = helper.consume_data_asset("orders", branch="main")
    assert (reference.catalog_id, reference.annotations) == ("metaflow://ordersflow/main/data/orders", {"rows": 3})
    active = helper._active
    assert active is not None
    active.outcome = lambda _: (TaskState.SUCCESS, None)
    helper._end_active()
    with Catalog(tmp_path / "catalog.db") as catalog:
        reader = [r for r in catalog.iter_task_runs() if r.key.flow_namespace == "ordersflow.user.alice"]
        assert [(r.state, [u.asset_id for u in r.inputs]) for r in reader] == [
            (TaskState.SUCCESS, ["metaflow://ordersflow/main/data/orders"])
        ]
        assert catalog.get_asset(ORDERS) is None  # the developer's branch gets no copy of main's asset


# ---------------------------------------------------------------------------------------------
# promote


def test_promote_copies_the_latest_instance_to_another_branch(tmp_path: Path, definitions: Any) -> None:
    step = recorder(tmp_path)
    step.write(definitions["orders"], "orders", {"rows": 3}, {"env": "test"})
    step.end()
    with Catalog(tmp_path / "catalog.db") as catalog:
        catalog.set_asset(  # main had an older instance, with an annotation the new one does not
            AssetDeclaration.create(  # have, and a property its definition no longer has
                "metaflow://ordersflow/main/data/orders",
                type="Dataset",
                namespace="ordersflow.main",
                metadata={
                    "annotation.stale": 1,
                    "metaflow.instance.runId": "1",
                    "retired": "yes",
                    "metaflow.properties": "owner,retired",
                },
            ),
            now=at(50),
        )
        changes = len(list(catalog.iter_changes()))
        promoted = promote(catalog, "orders", "user.alice", "main", project="ordersflow", now=at(60))
        assert promoted.id == "metaflow://ordersflow/main/data/orders"
        assert promoted.namespace == "ordersflow.main"
        assert promoted.metadata["metaflow.instance.pathspec"] == "OrdersFlow/17/train/4"
        assert promoted.metadata["metaflow.instance.promotedFrom"] == "user.alice"
        assert promoted.metadata["metaflow.branch"] == "main"
        assert (promoted.metadata["annotation.rows"], promoted.metadata["tags"]) == (3, "env:test")
        assert "annotation.stale" not in promoted.metadata
        assert "retired" not in promoted.metadata and promoted.metadata["metaflow.properties"] == "owner,source"
        assert len(list(catalog.iter_changes())) == changes + 1  # a DatasetEvent
        before = snapshot(catalog)
        with pytest.raises(NotFoundError, match=r"no data asset 'nope' on branch user\.alice"):
            promote(catalog, "nope", "user.alice", "main", project="ordersflow", now=at(61))
        with pytest.raises(NotFoundError, match="no model asset 'orders'"):
            promote(catalog, "orders", "user.alice", "main", project="ordersflow", kind="model", now=at(61))
        with pytest.raises(ValidationError, match="same branch"):
            promote(catalog, "orders", "user.alice", "User.Alice", project="ordersflow", now=at(61))
        assert snapshot(catalog) == before


# ---------------------------------------------------------------------------------------------
# real Metaflow flows


@pytest.fixture
def project(tmp_path: Path) -> Path:
    pytest.importorskip("metaflow")
    root = tmp_path / "project"
    write(root / "data" / "orders" / "asset_config.toml", ORDERS_CONFIG)
    write(root / "models" / "orders_model" / "asset_config.toml", MODEL_CONFIG)
    write(root / "flow.py", textwrap.dedent(FLOW))
    return root


def run_flow(root: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METAFLOW_", "OLBRIDGE_"))}
    env.update(
        {
            "METAFLOW_HOME": str(root / "metaflow-home"),
            "METAFLOW_DEFAULT_METADATA": "local",
            "METAFLOW_DEFAULT_DATASTORE": "local",
            "USER": "alice",
            "USERNAME": "alice",
            "OLBRIDGE_CATALOG": str(root / "olbridge.db"),
            **extra,
        }
    )
    return subprocess.run(
        [sys.executable, "flow.py", "--no-pylint", "run"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def flow_catalog(project: Path) -> Iterator[Catalog]:
    done = run_flow(project)
    assert done.returncode == 0, done.stdout + done.stderr
    with Catalog(project / "olbridge.db") as catalog:
        yield catalog


@pytest.mark.metaflow
def test_a_real_flow_records_its_steps_assets_and_lineage(
    flow_catalog: Catalog, converter: Converter, official: Callable[[Any], list[str]]
) -> None:
    catalog = flow_catalog
    runs = {r.key.task_id: r for r in catalog.iter_task_runs()}
    assert set(runs) == {"start", "train"}  # `end` uses no asset
    (run_id,) = {r.key.execution_id for r in runs.values()}
    for step, stored in runs.items():
        assert stored.state is TaskState.SUCCESS
        assert (stored.key.flow_namespace, stored.key.flow_id) == ("ordersflow.user.alice", "OrdersFlow")
        assert stored.key.task_run_id.startswith(f"OrdersFlow/{run_id}/{step}/")
    assert ([u.asset_id for u in runs["start"].outputs], runs["start"].inputs) == ([ORDERS], ())
    assert [u.asset_id for u in runs["train"].inputs] == [ORDERS]
    assert [u.asset_id for u in runs["train"].outputs] == [MODEL]

    orders = catalog.asset(ORDERS)
    assert (orders.type, orders.namespace, orders.display_name, orders.description) == (
        "Dataset",
        "ordersflow.user.alice",
        "Orders",
        "Orders of the day",
    )
    assert orders.metadata["owner"] == "analytics" and orders.metadata["annotation.rows"] == 3
    assert orders.metadata["tags"] == "env:test"
    assert orders.metadata["metaflow.instance.pathspec"] == runs["start"].key.task_run_id
    model = catalog.asset(MODEL)
    assert model.metadata["annotation.mean"] == 5.0  # get_data gave train the artifact [3, 5, 7]

    # the lineage between the steps: start wrote orders, train read it and wrote the model
    usages = [(u.direction, u.task_id) for u in catalog.usages_of(ORDERS) if isinstance(u, RunUsage)]
    assert sorted(usages) == [("input", "train"), ("output", "start")]
    edges = catalog.lineage(ORDERS, direction="downstream").edges
    assert [(e.upstream, e.downstream, e.tasks) for e in edges] == [
        (ORDERS, MODEL, ("ordersflow.user.alice/OrdersFlow.train",))
    ]

    events = list(iter_events(catalog, converter))
    for event in events:
        assert official(event) == [], event
        assert validate_event(event) == []
    run_events = [e for e in events if "run" in e]
    assert [(e["job"]["name"], e["eventType"]) for e in run_events] == [
        ("OrdersFlow.start", "START"),
        ("OrdersFlow.start", "COMPLETE"),
        ("OrdersFlow.train", "START"),
        ("OrdersFlow.train", "COMPLETE"),
    ]
    written = [d["name"] for d in run_events[1]["outputs"]]
    read = [d["name"] for d in run_events[3]["inputs"]]
    assert written == read == ["user.alice/data/orders"]
    assert {e["dataset"]["name"] for e in events if "dataset" in e} == {
        "user.alice/data/orders",
        "user.alice/models/orders_model",
    }


@pytest.mark.metaflow
def test_a_failing_step_ends_failed_and_keeps_the_last_instance(flow_catalog: Catalog, project: Path) -> None:
    first = flow_catalog.asset(MODEL).metadata["metaflow.instance.runId"]
    failed = run_flow(project, FAIL_TRAIN="1")
    assert failed.returncode != 0 and "training diverged" in failed.stdout + failed.stderr
    with Catalog(project / "olbridge.db") as catalog:
        train = [r for r in catalog.iter_task_runs() if r.key.task_id == "train"]
        assert [(r.state, len(r.outputs)) for r in train] == [(TaskState.SUCCESS, 1), (TaskState.FAILED, 0)]
        assert train[1].error == "the Metaflow task failed"
        assert [u.asset_id for u in train[1].inputs] == [ORDERS]  # what it read is kept
        assert catalog.asset(MODEL).metadata["metaflow.instance.runId"] == first


@pytest.mark.parametrize("command", [["metaflow"], ["metaflow", "declare"], ["metaflow", "promote"]])
def test_the_metaflow_commands_have_help(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.stdout


def test_olbridge_metaflow_promote(tmp_path: Path, definitions: Any) -> None:
    step = recorder(tmp_path)
    step.write(definitions["orders"], "orders", {"rows": 3}, None)
    step.end()
    db = str(tmp_path / "catalog.db")
    args = ["--catalog", db, "metaflow", "promote", "orders", "--project", "OrdersFlow", "--from", "user.alice"]
    result = CliRunner().invoke(cli, [*args, "--to", "feature/Faster"])
    assert result.exit_code == 0, result.stderr
    promoted = json.loads(result.stdout)
    assert (promoted["id"], promoted["metadata"]["annotation.rows"]) == (
        "metaflow://ordersflow/feature-faster/data/orders",
        3,
    )
    assert "promoted data asset 'orders' from user.alice to feature/Faster" in result.stderr
    with Catalog(db) as catalog:
        before = snapshot(catalog)
    refused = CliRunner().invoke(cli, [*args, "--to", "main", "--kind", "model"])
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: no model asset 'orders' on branch user.alice")
    with Catalog(db) as catalog:
        assert snapshot(catalog) == before
