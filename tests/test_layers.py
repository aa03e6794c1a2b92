"""The layering contract of pyproject.toml ([tool.importlinter]), checked by import-linter's
``lint-imports``: the package keeps it, and each kind of breach is caught (a copy of the package
with one bad import added is refused)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
LAYERS = "Layers: nothing imports upward"
ACYCLIC = "No import cycles: no two modules or packages import each other, directly or not"
PURE = "The bottom layers reach no network, database, server or command line"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the contracts of ``root``/pyproject.toml, on ``root``/bridge."""
    env = {**os.environ, "PYTHONPATH": str(root)}  # this copy of bridge, not the installed one
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", "--no-logo"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def verdicts(output: str) -> dict[str, str]:
    """Each contract's name and KEPT or BROKEN, from lint-imports' report."""
    return {m["name"]: m["verdict"] for m in re.finditer(r"^(?P<name>.+?) (?P<verdict>KEPT|BROKEN)\b", output, re.M)}


def test_the_package_keeps_its_layers_and_has_no_cycles() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdicts(done.stdout) == {LAYERS: "KEPT", ACYCLIC: "KEPT", PURE: "KEPT"}
    assert "Contracts: 3 kept, 0 broken." in done.stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package's Python files and pyproject.toml in a folder of their own, to break."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "bridge",
        tmp_path / "bridge",
        ignore=lambda folder, names: [n for n in names if not (n.endswith(".py") or Path(folder, n).is_dir())],
    )
    return tmp_path


BREACHES = [
    # (module, the import added to it, the contracts it breaks, what the report names)
    # (and through what it imports, a library the bottom layers may not use: click, sqlalchemy)
    ("model/runs.py", "import bridge.cli", {LAYERS, ACYCLIC, PURE}, "bridge.model.runs -> bridge.cli"),
    ("catalog/query.py", "import bridge.delivery.worker", {LAYERS, ACYCLIC}, "bridge.catalog.query -> bridge.delivery"),
    ("catalog/rows.py", "import bridge.adapters.dbt", {LAYERS, ACYCLIC}, "bridge.catalog.rows -> bridge.adapters"),
    (
        "openlineage/convert.py",
        "import bridge.receiver.app",
        {LAYERS, ACYCLIC, PURE},
        "bridge.openlineage.convert -> bridge.receiver",
    ),
    ("mapping/rules.py", "import bridge.catalog", {LAYERS, ACYCLIC, PURE}, "bridge.mapping.rules -> bridge.catalog"),
    # the catalog imports nothing of the receiver (the records of received events are the model's)
    ("catalog/store.py", "import bridge.receiver.events", {LAYERS, ACYCLIC}, "bridge.catalog.store -> bridge.receiver"),
    # siblings of one layer: the front ends do not import each other
    ("delivery/worker.py", "import bridge.receiver.intake", {LAYERS}, "bridge.delivery.worker -> bridge.receiver"),
    # two modules of one package that import each other (store imports sql)
    ("catalog/sql.py", "import bridge.catalog.store", {ACYCLIC}, "No cycles are allowed in bridge.catalog.\n"),
    ("receiver/events.py", "import bridge.receiver.app", {ACYCLIC}, "- .events -> .app (1 import)"),
    # the model's modules are in order: the id rules do not import the task runs built on them
    ("model/ids.py", "import bridge.model.runs", {ACYCLIC}, "No cycles are allowed in bridge.model.\n"),
    # the bottom layers use no network, database, server or command-line library
    ("openlineage/convert.py", "import requests", {PURE}, "bridge.openlineage.convert -> requests"),
    ("model/runs.py", "import sqlite3", {PURE}, "bridge.model.runs -> sqlite3"),
    ("mapping/rules.py", "import sqlalchemy", {PURE}, "bridge.mapping.rules -> sqlalchemy"),
]


@pytest.mark.parametrize(("module", "line", "broken", "named"), BREACHES, ids=[b[0] + ": " + b[1] for b in BREACHES])
def test_a_breach_is_caught(copy: Path, module: str, line: str, broken: set[str], named: str) -> None:
    assert lint_imports(copy).returncode == 0  # the copy keeps the contracts, as the package does
    with (copy / "bridge" / module).open("a", encoding="utf-8") as source:
        source.write(f"\n{line}  # noqa\n")
    done = lint_imports(copy)
    assert done.returncode == 1, done.stdout + done.stderr
    assert {name for name, verdict in verdicts(done.stdout).items() if verdict == "BROKEN"} == broken
    assert named in done.stdout


def test_a_new_module_must_be_placed_in_a_layer(copy: Path) -> None:
    (copy / "bridge" / "helpers.py").write_text('"""A module nobody placed."""\n')
    done = lint_imports(copy)
    assert done.returncode == 1
    assert verdicts(done.stdout)[LAYERS] == "BROKEN"
    assert "bridge.helpers" in done.stdout


def test_an_exemption_left_behind_is_reported(copy: Path) -> None:
    """An exemption (``ignore_imports``) for an import the code no longer makes fails the check, so
    that none outlives its import."""
    pyproject = copy / "pyproject.toml"
    layers_end = '    "canonical | errors | jsonkeys | memo | shown | version",\n]\n'
    text = pyproject.read_text()
    assert text.count(layers_end) == 1
    exempt = 'ignore_imports = ["bridge.catalog.store -> bridge.receiver.events"]\n'  # an import never made
    pyproject.write_text(text.replace(layers_end, layers_end + exempt))
    done = lint_imports(copy)
    assert done.returncode == 1
    assert "No matches for ignored import bridge.catalog.store -> bridge.receiver.events." in done.stdout + done.stderr
