"""``olbridge dbt import`` as a new user runs it: column lineage from a base install (sqlglot is a
base dependency), what cannot be derived said on stderr, a second import of an invocation with
other content refused with what to do, and ``lineage --column`` saying what it does not walk."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bridge.demo import example_project
from tests.helpers import invoke
from tests.test_dbt import example_catalog_json

ROOT = Path(__file__).parent.parent


def test_sqlglot_is_a_base_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("sqlglot") for d in project["dependencies"])
    assert not any(d.startswith("sqlglot") for extra in project["optional-dependencies"].values() for d in extra)
    pins = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert any(line.startswith("sqlglot==") for line in pins)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    target = tmp_path / "example"
    shutil.copytree(example_project(), target)
    return target


def imported(db: Path, project: Path, *args: str) -> tuple[dict[str, Any], str]:
    code, out, err = invoke(db, "dbt", "import", "--project-dir", str(project), *args)
    assert code == 0, err
    return json.loads(out), err


def test_the_demo_project_imports_with_column_lineage(tmp_path: Path, example: Path) -> None:
    db = tmp_path / "c.db"
    summary, err = imported(db, example)
    assert summary["columnEdges"] > 0 and summary["columnLineageNotes"] == [] and "warning" not in err
    assert ": 2 task run(s): 2 created, 0 updated, 0 unchanged" in err
    again, err = imported(db, example)  # imported again: recorded before, as the message says
    assert again["taskRuns"] == 2 and ": 2 task run(s): 0 created, 0 updated, 2 unchanged" in err, err
    code, out, err = invoke(db, "lineage", "dbt.main.my_second_dbt_model", "--column", "id", "--direction", "upstream")
    assert code == 0
    assert out.splitlines() == [
        "dbt.main.my_second_dbt_model.id",
        "  <- dbt.main.my_first_dbt_model.id  IDENTITY  via dbt/my_dbt_project.model.my_second_dbt_model",
    ]
    # the model's WHERE id = 1 shapes its whole output: kept, not walked, and said
    assert err == (
        "note: 1 input column(s) shape the whole of dbt.main.my_second_dbt_model (join keys, filters): "
        "not walked column by column here; olbridge export carries them\n"
    )


def test_a_profiles_dir_without_profiles_is_an_error_not_a_look_elsewhere(tmp_path: Path, example: Path) -> None:
    """dbt stops on a --profiles-dir that holds no profiles.yml; the import did not, and took
    whichever profiles.yml it found next (the project's, ~/.dbt's)."""
    code, out, err = invoke(
        tmp_path / "c.db", "dbt", "import", "--project-dir", str(example), "--profiles-dir", str(tmp_path / "nope")
    )
    assert code == 1 and out == "" and f"Error: {tmp_path / 'nope' / 'profiles.yml'}: file not found" in err, err


def test_without_sqlglot_the_import_says_so_on_stderr(
    tmp_path: Path, example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge.adapters.dbt import columns

    monkeypatch.setattr(columns.sql_lineage, "available", lambda: False)
    summary, err = imported(tmp_path / "c.db", example)
    assert summary["columnEdges"] == 0 and summary["taskRuns"] == 2
    assert "warning: column lineage: column lineage needs sqlglot, which is not installed" in err


def test_a_second_import_with_catalog_json_is_refused_with_what_to_do(tmp_path: Path, example: Path) -> None:
    db = tmp_path / "c.db"
    imported(db, example)
    before = invoke(db, "assets", "list", "--json")[1]
    catalog_json = tmp_path / "catalog.json"
    example_catalog_json(catalog_json)
    code, out, err = invoke(db, "dbt", "import", "--project-dir", str(example), "--catalog-json", str(catalog_json))
    assert code == 1 and out == ""
    assert err.startswith("Error: dbt invocation ") and "was imported before, with other content" in err
    assert "Nothing was recorded" in err and "give --catalog-json on the first import" in err
    assert invoke(db, "assets", "list", "--json")[1] == before
    # the same artifacts again: unchanged, no error
    summary, _ = imported(db, example)
    assert summary["unchanged"] == 2


@pytest.mark.dbt
def test_the_tests_dbt_project_gets_column_lineage_from_a_plain_import(
    tmp_path: Path, dbt_ol: tuple[Path, list[dict[str, Any]]]
) -> None:
    project, _events = dbt_ol
    summary, err = imported(tmp_path / "c.db", project, "--profiles-dir", str(project))
    assert summary["catalogJson"] is True and summary["columnEdges"] > 0, err
    assert not any("needs sqlglot" in note for note in summary["columnLineageNotes"])


@pytest.mark.parametrize("name", ["dbt_project.yml", "profiles.yml"])
def test_a_yaml_file_that_is_not_utf8_is_said_so(tmp_path: Path, example: Path, name: str) -> None:
    """A project's or profiles' YAML that is not UTF-8 text: said as every reader says it (it was
    a traceback), nothing recorded."""
    (example / name).write_bytes(b"\xff\xfe name: x\n")
    code, out, err = invoke(
        tmp_path / "c.db", "dbt", "import", "--project-dir", str(example), "--profiles-dir", str(example)
    )
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert f"Error: {example / name}: not UTF-8 text" in err, err
