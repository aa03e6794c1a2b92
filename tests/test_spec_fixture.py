"""The official schemas' fixture: without the schemas a local run skips the tests that need them,
and a run that requires them (``$OLBRIDGE_REQUIRE_SPEC``, which ``.ci/run`` sets when the schemas are
beside the clone) fails them, so that such a run never passes without having checked events against
the spec."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/test_validate.py::test_valid_base_event"


def run_without_spec(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "OLBRIDGE_REQUIRE_SPEC"}
    environ |= {"OLBRIDGE_SPEC_DIR": str(tmp_path / "no-spec"), **env}
    command = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider", "-rsfE"]
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_without_the_schemas_a_local_run_skips(tmp_path: Path) -> None:
    done = run_without_spec(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "the official OpenLineage schemas are not here" in done.stdout


def test_without_the_schemas_a_run_that_requires_them_fails(tmp_path: Path) -> None:
    done = run_without_spec(tmp_path, OLBRIDGE_REQUIRE_SPEC="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout and "this run requires them" in done.stdout
    assert "skipped" not in done.stdout
