"""The command tree as code: every command is a module-level object that can be imported, and the
root group is built from them."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bridge.catalog import HistoryFilter
from bridge.cli import cli
from bridge.cli.assets import assets, assets_adopt, assets_delete, assets_list, assets_purge, assets_set, assets_show
from bridge.cli.basics import demo, init, migrate, record
from bridge.cli.catalog import catalog, catalog_copy
from bridge.cli.context import CONTEXT_SETTINGS, AppContext, pass_app
from bridge.cli.dbt import dbt, dbt_import
from bridge.cli.export import export, validate
from bridge.cli.health import health
from bridge.cli.imports import import_
from bridge.cli.kestra import kestra, kestra_declare, kestra_import
from bridge.cli.lineage import lineage
from bridge.cli.metaflow import metaflow, metaflow_declare, metaflow_promote
from bridge.cli.options import history_filters
from bridge.cli.prefect import prefect, prefect_import
from bridge.cli.retention import retention
from bridge.cli.runs import runs, runs_list, runs_show
from bridge.cli.serve import serve
from bridge.cli.stream import backfill, outbox, outbox_drop, outbox_list, outbox_retry, status, stream
from bridge.cli.ui import ui
from bridge.errors import ValidationError
from tests.test_cli_sweep import TREE, label

# each command as its module holds it, by its path in the tree
MODULE_LEVEL: dict[tuple[str, ...], click.Command] = {
    ("assets",): assets,
    ("assets", "adopt"): assets_adopt,
    ("assets", "delete"): assets_delete,
    ("assets", "list"): assets_list,
    ("assets", "purge"): assets_purge,
    ("assets", "set"): assets_set,
    ("assets", "show"): assets_show,
    ("backfill",): backfill,
    ("catalog",): catalog,
    ("catalog", "copy"): catalog_copy,
    ("dbt",): dbt,
    ("dbt", "import"): dbt_import,
    ("demo",): demo,
    ("export",): export,
    ("health",): health,
    ("import",): import_,
    ("init",): init,
    ("kestra",): kestra,
    ("kestra", "declare"): kestra_declare,
    ("kestra", "import"): kestra_import,
    ("lineage",): lineage,
    ("migrate",): migrate,
    ("metaflow",): metaflow,
    ("metaflow", "declare"): metaflow_declare,
    ("metaflow", "promote"): metaflow_promote,
    ("outbox",): outbox,
    ("outbox", "drop"): outbox_drop,
    ("outbox", "list"): outbox_list,
    ("outbox", "retry"): outbox_retry,
    ("prefect",): prefect,
    ("prefect", "import"): prefect_import,
    ("record",): record,
    ("runs",): runs,
    ("runs", "list"): runs_list,
    ("runs", "show"): runs_show,
    ("retention",): retention,
    ("serve",): serve,
    ("status",): status,
    ("stream",): stream,
    ("ui",): ui,
    ("validate",): validate,
}


def test_every_command_in_the_tree_is_a_module_level_object() -> None:
    assert set(TREE) == set(MODULE_LEVEL)  # a new command is added here, as an object
    for path, command in MODULE_LEVEL.items():
        assert TREE[path] is command, label(path)
        module = importlib.import_module(command.callback.__module__)  # type: ignore[union-attr]
        assert getattr(module, command.callback.__name__) is command, label(path)  # type: ignore[union-attr]


def test_no_group_below_the_root_repeats_its_context_settings() -> None:
    assert cli.context_settings == CONTEXT_SETTINGS
    for path, command in TREE.items():
        assert command.context_settings == {}, label(path)  # the root's are inherited
    for flag in ("-h", "--help"):
        result = CliRunner().invoke(cli, ["kestra", "declare", flag], prog_name="olbridge")
        assert result.exit_code == 0 and result.stdout.startswith("Usage: olbridge kestra declare")


def test_pass_app_hands_the_run_its_context(tmp_path: Path) -> None:
    seen: list[AppContext] = []

    @cli.command("probe-context", hidden=True)
    @pass_app
    def probe(app: AppContext) -> None:
        seen.append(app)

    try:
        result = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "c.db"), "probe-context"])
    finally:
        del cli.commands["probe-context"]
    assert result.exit_code == 0, result.output
    assert [app.catalog_path for app in seen] == [tmp_path / "c.db"]


def test_the_history_filters_are_declared_once() -> None:
    @click.command()
    @history_filters
    def probe(filters: HistoryFilter) -> None:
        """A command that reads history."""

    ours = [(p.name, p.opts, p.help) for p in probe.params]
    assert [
        (p.name, p.opts, p.help) for p in export.params if p.name in {"since", "until", "namespace", "flow"}
    ] == ours
    assert [name for name, _, _ in ours] == ["since", "until", "namespace", "flow"]


def test_the_history_filters_come_to_a_command_as_one_record_the_catalog_reads() -> None:
    seen: list[HistoryFilter] = []

    @click.command()
    @history_filters
    def probe(filters: HistoryFilter) -> None:
        """A command that reads history."""
        seen.append(filters)

    args = ["--since", "2025-03-01", "--until", "2025-03-02T12:00:00+02:00", "--namespace", "shop", "--flow", "f"]
    assert CliRunner().invoke(probe, args).exit_code == 0
    assert CliRunner().invoke(probe, []).exit_code == 0
    assert seen == [
        HistoryFilter(
            since=datetime(2025, 3, 1, tzinfo=UTC),
            until=datetime(2025, 3, 2, 10, tzinfo=UTC),
            namespace="shop",
            flow="f",
        ),
        HistoryFilter(),
    ]
    refused = CliRunner().invoke(probe, ["--namespace", "no spaces"])  # the root group says Error: ...
    assert isinstance(refused.exception, ValidationError) and str(refused.exception).startswith("--namespace: ")
    assert len(seen) == 2


@pytest.mark.parametrize(
    "name",
    ["assets", "basics", "dbt", "export", "imports", "kestra", "lineage", "metaflow", "prefect", "serve", "stream"],
)
def test_a_command_does_not_hide_its_module(name: str) -> None:
    module = importlib.import_module(f"bridge.cli.{name}")
    assert getattr(importlib.import_module("bridge.cli"), name) is module  # what `import bridge.cli.x as m` gets
