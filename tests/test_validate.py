"""olbridge's own validation agrees with the official OpenLineage schemas."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.openlineage.marquez_rules import java_uri, marquez_time
from bridge.openlineage.spec_rules import STANDARD_FACETS
from bridge.openlineage.validate import Problem, check_facet, event_kind, standard_facet, validate_event
from tests.helpers import mutated, ol_dataset, ol_run_event

BASE_EVENT: dict[str, Any] = {
    "eventTime": "2025-01-01T00:00:00Z",
    "eventType": "COMPLETE",
    "producer": "https://example.com/producer",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": "0194a1b2-0000-7000-8000-000000000000"},
    "job": {"namespace": "ns", "name": "job"},
    "inputs": [{"namespace": "s3://bucket", "name": "key"}],
}


def examples(spec_dir: Path) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in sorted((spec_dir / "spec" / "tests").glob("*/*.json")):
        name = path.parent.name
        found.append((name, path.name, json.loads(path.read_text())))
    return found


def test_spec_examples_agree(spec_dir: Path, official: Callable[[Any], list[str]]) -> None:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    docs = [
        json.loads(p.read_text())
        for p in [spec_dir / "spec" / "OpenLineage.json", *(spec_dir / "spec" / "facets").glob("*.json")]
    ]
    registry = Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in docs)
    by_file = {d["$id"].rsplit("/", 1)[1][:-5]: d for d in docs}
    checked = mutated = 0
    for facet_name, file_name, container in examples(spec_dir):
        schema = by_file.get(facet_name)
        if schema is None:
            continue
        validator = Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
        assert list(validator.iter_errors(container)) == [], file_name
        for key, facet in container.items():
            name = standard_facet(facet["_schemaURL"])
            if name is None:  # an old URL, or a $defs entry its schema does not have: checked as a facet only
                assert list(check_facet(facet, "DatasetFacet", f"/{key}")) == [], (file_name, key)
                continue
            base = STANDARD_FACETS[name].base
            assert list(check_facet(facet, base, f"/{key}")) == [], (file_name, key)
            checked += 1
            # drop each required field: both must refuse
            for field, _shape in (*STANDARD_FACETS[name].shape.required, ("_producer", None), ("_schemaURL", None)):
                broken = copy.deepcopy(container)
                broken[key].pop(field, None)
                if broken == container:
                    continue
                by_url = Draft202012Validator({"$ref": facet["_schemaURL"]}, registry=registry)
                theirs = list(by_url.iter_errors(broken[key]))
                ours = list(check_facet(broken[key], base, f"/{key}"))
                if field == "_schemaURL":
                    assert ours, (file_name, field)
                    continue
                assert bool(theirs) == bool(ours), (file_name, field, theirs, ours)
                mutated += 1
    assert checked >= 12  # the examples whose _schemaURL names a current standard facet
    assert mutated >= 10


def test_full_example_event_agrees(spec_dir: Path, official: Callable[[Any], list[str]]) -> None:
    event = json.loads((spec_dir / "spec" / "tests" / "example_full_event.json").read_text())
    assert official(event) == []
    assert [p for p in validate_event(event, marquez=False)] == []


def mutate(path: str, value: Any) -> dict[str, Any]:
    return mutated(BASE_EVENT, path, value)


INVALID = [
    ("eventTime", KeyError),
    ("eventTime", "2025-01-01"),
    ("eventTime", "2025-01-01T00:00:00"),
    ("producer", "not a uri"),
    ("eventType", "DONE"),
    ("run/runId", "1234"),
    ("job/name", KeyError),
    ("job/namespace", 5),
    ("inputs/0/name", KeyError),
    ("inputs", {"not": "a list"}),
    ("run/facets", {"parent": {"run": {"runId": "0194a1b2-0000-7000-8000-000000000000"}}}),
    (
        "run/facets",
        {
            "nominalTime": {
                "_producer": "https://x.example",
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
            }
        },
    ),
]


@pytest.mark.parametrize(("path", "value"), INVALID, ids=[p for p, _ in INVALID])
def test_invalid_events_agree(path: str, value: Any, official: Callable[[Any], list[str]]) -> None:
    event = mutate(path, value)
    assert official(event), "the official schema accepts it"
    assert validate_event(event, marquez=False), "olbridge accepts it"


def test_valid_base_event(official: Callable[[Any], list[str]]) -> None:
    assert official(BASE_EVENT) == []
    assert validate_event(BASE_EVENT) == []


def test_the_kind_comes_from_schema_url_as_marquez_reads_it(official: Callable[[Any], list[str]]) -> None:
    """Without 'run', the official schema reads a RunEvent-URL event as a JobEvent (its oneOf
    ignores schemaURL); olbridge, like Marquez, takes the schemaURL's word and refuses it."""
    event = mutate("run", KeyError)
    assert official(event) == []
    assert "'run' is required" in str(validate_event(event, marquez=False))


def test_marquez_contract() -> None:
    bad_ns = mutate("inputs/0/namespace", "s3://bucket?x=1")
    assert [p.rule for p in validate_event(bad_ns)] == ["marquez"]
    job_type = mutate(
        "job/facets",
        {
            "jobType": {
                "_producer": "https://x.example",
                "_schemaURL": "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                "processingType": "BATCH",
                "integration": "X",
            }
        },
    )
    assert "jobType.jobType" in str(validate_event(job_type))
    nul = mutate("job/name", "a\x00b")
    assert "NUL" in str(validate_event(nul))
    dataset_event = {
        "eventTime": "2025-01-01T00:00:00Z",
        "producer": "https://x.example",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
        "dataset": {"namespace": "ns", "name": "d"},
    }
    assert event_kind(dataset_event) == "DatasetEvent"
    assert any("/DatasetEvent" in p.message for p in validate_event(dataset_event))
    assert validate_event(dataset_event, marquez=False) == []


STANDARD_SCHEMA_URL = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"


def test_a_dataset_seen_before_is_reported_where_it_now_stands() -> None:
    bad = ol_dataset("s3://b", "k", schema={"fields": [{"name": 7}]})  # a field name must be a string
    bad["facets"]["schema"]["_schemaURL"] = STANDARD_SCHEMA_URL

    def spec(event: dict[str, Any]) -> list[Problem]:
        return [p for p in validate_event(event) if p.rule == "spec"]

    first = spec(ol_run_event(inputs=[bad]))
    second = spec(ol_run_event(inputs=[ol_dataset("s3://b", "other"), copy.deepcopy(bad)]))
    third = spec(ol_run_event(outputs=[copy.deepcopy(bad)]))
    assert [p.pointer for p in first] == ["/inputs/0/facets/schema/fields/0/name"]
    assert [p.pointer for p in second] == ["/inputs/1/facets/schema/fields/0/name"]
    assert [p.pointer for p in third] == ["/outputs/0/facets/schema/fields/0/name"]
    assert first[0].message == second[0].message == third[0].message


URIS = [
    ("https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet", True),
    ("file", True),  # a relative reference: java.net.URI parses it
    ("bigquery", True),
    ("", True),
    ("s3://bucket/données", True),  # other (non-ASCII) characters are legal, as in Java
    ("urn:uuid:0194a1b2-0000-7000-8000-000000000001", True),
    ("schema facet 1-2-0", False),  # a space
    ("https://x.example/{id}", False),
    ("https://x.example/a%2", False),  # a bad escape
    ("https://x.example/a#b#c", False),  # a second '#'
    ("1http://x.example", False),  # a scheme starts with a letter
    (":x", False),
    ("http:", False),  # a scheme with nothing after it
]


@pytest.mark.parametrize(("value", "parses"), URIS, ids=[u or "empty" for u, _ in URIS])
def test_java_uri_parses_what_marquez_reads(value: str, parses: bool) -> None:
    assert java_uri(value) is parses


TIMES = [
    ("2025-03-01T08:00:00Z", True),
    ("2025-03-01T08:00:00", True),  # no offset: the server's zone
    ("2025-03-01T08:00", True),  # seconds are optional
    ("2025-03-01T08:00:00.123456789+05:30", True),
    ("2025-03-01T08:00:00+0100", True),  # the offset is read leniently
    ("2025-03-01T08:00:00-01", True),
    ("2025-03-01t08:00:00z", True),  # case-insensitive
    ("2025-03-01", False),
    ("2025-03-01 08:00:00Z", False),
    ("2025-13-01T08:00:00Z", False),
    ("2025-03-01T08:00:00.1234567890Z", False),  # nanoseconds at most
    ("yesterday", False),
    ("2025-03-01T08:00:00+18:00", True),  # Java's ZoneOffset: 18 hours either way at most
    ("2025-03-01T08:00:00-18:00", True),
    ("2025-03-01T08:00:00+18:30", False),  # Python's reads to 23:59: taken, then refused by Marquez
    ("2025-03-01T08:00:00-19:00", False),
    ("2025-03-01T08:00:00+23:59", False),
]


@pytest.mark.parametrize(("value", "reads"), TIMES, ids=[t for t, _ in TIMES])
def test_marquez_time_reads_what_marquez_reads(value: str, reads: bool) -> None:
    assert marquez_time(value) is reads


UUIDS = [
    ("0194a1b2-0000-7000-8000-000000000001", True),
    ("0194A1B2-ABCD-7000-8000-00000000000F", True),
    ("0194a1b2000070008000000000000001", False),  # no hyphens
    ("{0194a1b2-0000-7000-8000-000000000001}", False),
    ("urn:uuid:0194a1b2-0000-7000-8000-000000000001", False),
    ("+194a1b2-0000-7000-8000-000000000001", False),  # a sign, which int() takes
    (" 194a1b2-0000-7000-8000-000000000001", False),  # a space, which int() takes
    ("0_94a1b2-0000-7000-8000-000000000001", False),  # an underscore, which int() takes
    ("0194a1b2-0000-7000-8000-00000000000g", False),
    ("0194a1b2-0000-7000-8000-000000000001\n", False),
    ("0194a1b2-0000-7000-8000-٠00000000001", False),  # a digit past ASCII
]


@pytest.mark.parametrize(("value", "valid"), UUIDS, ids=[repr(v) for v, _ in UUIDS])
def test_a_run_id_is_a_uuid_in_the_text_form_of_rfc_4122(value: str, valid: bool) -> None:
    event = copy.deepcopy(BASE_EVENT)
    event["run"]["runId"] = value
    problems = validate_event(event, marquez=False)
    assert (problems == []) is valid, problems
    if not valid:
        assert problems == [Problem("/run/runId", f"must be a UUID, not {value!r}")]
