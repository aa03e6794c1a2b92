"""The official schemas' fixture: without the schemas a local run skips the tests that need them,
and a run that requires them (``$OLBRIDGE_REQUIRE_SPEC``, or CI: ``.ci/run`` sets ``CI=true``) fails
them, so that such a run never passes without having checked events against the spec. A facet
naming an official schema the folder lacks is an error, not a facet left unchecked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.conftest import SPEC_DIR as SPEC

TEST = "tests/test_validate.py::test_valid_base_event"


def run_without_spec(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("OLBRIDGE_REQUIRE_SPEC", "CI", "OLBRIDGE_NO_SKIP")}
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


def test_in_ci_without_the_schemas_the_tests_fail(tmp_path: Path) -> None:
    done = run_without_spec(tmp_path, CI="true")
    assert done.returncode == 1 and "1 error" in done.stdout and "this run requires them" in done.stdout


def test_a_facet_whose_official_schema_is_missing_is_an_error(official: Callable[[Any], list[str]]) -> None:
    """A facet naming an official schema that is not in the folder (a version the folder does not
    hold, say) is never left unchecked; one naming a custom schema is checked by the core schema."""
    from tests.helpers import ol_run_event

    event = ol_run_event("START")
    assert official(event) == []
    url = "https://openlineage.io/spec/facets/9-9-9/NoSuchRunFacet.json#/$defs/NoSuchRunFacet"
    event["run"]["facets"] = {"nosuch": {"_producer": "https://example.com/p", "_schemaURL": url}}
    assert official(event) == [f"run.facets.nosuch: no schema {url} in {SPEC / 'spec'}"]
    event["run"]["facets"] = {
        "acme": {"_producer": "https://example.com/p", "_schemaURL": "https://acme.example/f.json"}
    }
    assert official(event) == []
