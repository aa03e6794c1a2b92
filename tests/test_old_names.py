"""Names that came and went before any release are not kept: no code was ever written against
them, so neither the modules' first names nor the commands' and options' old names answer."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

from bridge.cli import cli

NEVER_RELEASED = [
    "bridge.column_lineage",
    "bridge.integrations",
    "bridge.integrations.metaflow",
    "bridge.integrations.metaflow_assets",
    "bridge.records",
    "bridge.recording",
    "bridge.openlineage.files",
]


@pytest.mark.parametrize("name", NEVER_RELEASED)
def test_a_module_name_no_release_had_is_not_kept(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dbt", "ingest"], "No such command 'ingest'"),
        (["metaflow", "define"], "No such command 'define'"),
        (["serve", "--threads", "4"], "No such option '--threads'"),
    ],
    ids=["dbt ingest", "metaflow define", "serve --threads"],
)
def test_a_command_name_no_release_had_is_a_usage_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args, prog_name="olbridge")
    assert result.exit_code == 2 and message in result.stderr
