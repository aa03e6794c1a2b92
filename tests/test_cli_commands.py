"""The command tree as code: every command is a module-level object that can be imported, the
root group is built from them, and a renamed command's old name still works (hidden, with a
deprecation warning on stderr)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bridge.cli import cli
from bridge.cli.assets import assets, assets_delete, assets_list, assets_purge, assets_set, assets_show
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
from bridge.cli.options import DeprecatedAlias, history_filters
from bridge.cli.prefect import prefect, prefect_import
from bridge.cli.runs import runs, runs_list, runs_show
from bridge.cli.serve import serve
from bridge.cli.stream import backfill, outbox, outbox_drop, outbox_list, outbox_retry, status, stream
from bridge.demo import example_project
from tests.test_cli_sweep import TREE, label

# each command as its module holds it, by its path in the tree
MODULE_LEVEL: dict[tuple[str, ...], click.Command] = {
    ("assets",): assets,
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
    ("serve",): serve,
    ("status",): status,
    ("stream",): stream,
    ("validate",): validate,
}
ALIASES = {("dbt", "ingest"): ("dbt", "import"), ("metaflow", "define"): ("metaflow", "declare")}


def test_every_command_in_the_tree_is_a_module_level_object() -> None:
    commands = {path for path in TREE if path not in ALIASES}
    assert commands == set(MODULE_LEVEL)  # a new command is added here, as an object
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
    def probe(since: str | None, until: str | None, namespace: str | None, flow: str | None) -> None:
        """A command that reads history."""

    ours = [(p.name, p.opts, p.help) for p in probe.params]
    assert [
        (p.name, p.opts, p.help) for p in export.params if p.name in {"since", "until", "namespace", "flow"}
    ] == ours
    assert [name for name, _, _ in ours] == ["since", "until", "namespace", "flow"]


@pytest.mark.parametrize(("old", "new"), sorted(ALIASES.items()), ids=lambda p: " ".join(p))
def test_an_old_name_is_hidden_and_runs_the_new_command(old: tuple[str, ...], new: tuple[str, ...]) -> None:
    alias, command = TREE[old], TREE[new]
    assert isinstance(alias, DeprecatedAlias) and alias.hidden and alias.target is command
    assert alias.callback is command.callback and alias.params == command.params
    group_help = CliRunner().invoke(cli, [old[0], "--help"], prog_name="olbridge").stdout
    assert f"  {new[1]} " in group_help and f"  {old[1]} " not in group_help
    help_text = CliRunner().invoke(cli, [*old, "--help"], prog_name="olbridge").stdout
    assert f"Deprecated: the old name of '{new[1]}'." in help_text


def test_dbt_ingest_still_imports_and_says_it_is_deprecated(tmp_path: Path) -> None:
    runs = {}
    for name in ("import", "ingest"):
        db = tmp_path / f"{name}.db"
        args = ["--catalog", str(db), "dbt", name, "--project-dir", str(example_project())]
        result = CliRunner().invoke(cli, args, prog_name="olbridge")
        assert result.exit_code == 0, result.output
        runs[name] = (json.loads(result.stdout), result.stderr)
    (new_out, new_err), (old_out, old_err) = runs["import"], runs["ingest"]
    assert old_out == new_out and new_out["taskRuns"]
    assert "deprecated" not in new_err
    assert old_err.splitlines()[0] == "warning: 'olbridge dbt ingest' is deprecated; use 'olbridge dbt import'"
    assert old_err.splitlines()[1:] == new_err.splitlines()


def test_metaflow_define_still_declares_and_says_it_is_deprecated(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    (folder / "data" / "orders").mkdir(parents=True)
    (folder / "data" / "orders" / "asset_config.toml").write_text('name = "Orders"\nid = "orders"\n')
    outputs = {}
    for name in ("declare", "define"):
        args = ["--catalog", str(tmp_path / f"{name}.db"), "metaflow", name, str(folder)]
        result = CliRunner().invoke(cli, [*args, "--project", "shop", "--branch", "main"], prog_name="olbridge")
        assert result.exit_code == 0, result.output
        declared = [{k: v for k, v in a.items() if k not in {"created", "updated"}} for a in json.loads(result.stdout)]
        outputs[name] = (declared, result.stderr)
    assert outputs["define"][0] == outputs["declare"][0]
    assert [a["id"] for a in outputs["declare"][0]] == ["metaflow://shop/main/data/orders"]
    assert outputs["define"][1] == (
        "warning: 'olbridge metaflow define' is deprecated; use 'olbridge metaflow declare'\n" + outputs["declare"][1]
    )


@pytest.mark.parametrize(
    "name",
    ["assets", "basics", "dbt", "export", "imports", "kestra", "lineage", "metaflow", "prefect", "serve", "stream"],
)
def test_a_command_does_not_hide_its_module(name: str) -> None:
    module = importlib.import_module(f"bridge.cli.{name}")
    assert getattr(importlib.import_module("bridge.cli"), name) is module  # what `import bridge.cli.x as m` gets
