from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from bridge.errors import ValidationError
from bridge.model import (
    FailureBehavior,
    IdForm,
    TaskState,
    check_metadata,
    check_namespace,
    format_time,
    id_form,
    merge_metadata,
    normalize_type,
    parse_time,
    slugify,
)
from bridge.model.pickling import pickles_as_tuple


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("analytics.marts.fct_orders", IdForm.NAME),
        ("snapshot.vm-web-prod-01.exec:42", IdForm.NAME),
        ("9lives", IdForm.NAME),
        ("s3://bucket/data/2025-12-12/part-0.parquet", IdForm.URI),
        ("prefect://my-asset", IdForm.URI),
    ],
)
def test_valid_ids(value: str, form: IdForm) -> None:
    assert id_form(value) is form


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "id.required"),
        ("_starts_with_underscore", "id.name.characters"),
        ("has space", "id.name.characters"),
        ("a/b", "id.name.characters"),
        ("x" * 151, "id.name.length"),
        ("s3://bucket/key with space", "id.uri.characters"),
        ("s3://bucket/key?version=2", "id.uri.characters"),
        ("s3://bucket/100%", "id.uri.characters"),
        ("s3://" + "k" * 508, "id.uri.length"),
        ("s3://", "id.uri.empty"),
    ],
)
def test_invalid_ids_name_the_rule(value: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        id_form(value)
    assert info.value.rule == rule
    assert info.value.value == value


@pytest.mark.parametrize(
    "value",
    [
        "postgres://alice:s3cret@db:5432/shop.public.orders",
        "s3://AKIA:secretkey@bucket/raw/o.csv",
        "https://user:pw@ex.com:8443/api",
        "kafka://u:@broker:9092/t",
    ],
)
def test_an_id_that_holds_a_password_is_refused_without_saying_it(value: str) -> None:
    """Every event of the asset would carry it (its namespace, its symlinks, olbridge's facet):
    refused, and neither the message nor the error's value repeats it."""
    with pytest.raises(ValidationError) as info:
        id_form(value)
    assert info.value.rule == "id.uri.password" and info.value.value is None
    secret = value.split("@")[0].split(":")[-1]
    assert "password" in str(info.value) and (not secret or secret not in str(info.value))
    assert id_form(value.replace(value.split("//")[1].split("@")[0] + "@", "")) is IdForm.URI
    assert id_form("kafka://etl@broker:9092/t") is IdForm.URI  # a user alone holds no secret


def test_kestra_type_aliases_and_custom_types() -> None:
    assert normalize_type("io.kestra.plugin.ee.assets.Table") == "Table"
    assert normalize_type("io.kestra.core.models.assets.External") == "External"
    assert normalize_type("company.infra.Snapshot") == "company.infra.Snapshot"
    with pytest.raises(ValidationError, match="did you mean 'Table'") as info:
        normalize_type("table")
    assert info.value.rule == "type.case"
    with pytest.raises(ValidationError) as info:
        normalize_type("Bogus Type!")
    assert info.value.rule == "type.unknown"


def test_namespaces() -> None:
    assert check_namespace(None) is None
    assert check_namespace("company.data-eng_1") == "company.data-eng_1"
    for bad, rule in (
        ("Company", "namespace.characters"),
        (".x", "namespace.characters"),
        ("a" * 151, "namespace.length"),
    ):
        with pytest.raises(ValidationError) as info:
            check_namespace(bad)
        assert info.value.rule == rule


def test_metadata_is_flat_and_null_removes() -> None:
    with pytest.raises(ValidationError, match="flat") as info:
        check_metadata({"labels": {"environment": "prod"}})
    assert info.value.rule == "metadata.nested"
    with pytest.raises(ValidationError) as info:
        check_metadata({"tags": ["a"]})
    assert info.value.rule == "metadata.nested"
    with pytest.raises(ValidationError):
        check_metadata({"x": None})
    update = check_metadata({"owner": None, "env": "prod"}, allow_null=True)
    assert merge_metadata({"owner": "a", "keep": 1}, update) == {"env": "prod", "keep": 1}


def test_slugify() -> None:
    assert slugify("Sales Report (EU) 2025") == "sales-report-eu-2025"
    assert id_form(slugify("Ünïcode / paths")) is IdForm.NAME
    with pytest.raises(ValidationError):
        slugify("!!!")


def test_states_and_failure_behaviour() -> None:
    assert TaskState.parse("success").run_event_type == "COMPLETE"
    assert TaskState.FAILED.run_event_type == "FAIL"
    assert TaskState.KILLED.run_event_type == "ABORT"
    assert not TaskState.RUNNING.is_terminal
    assert FailureBehavior.WARN.apply(TaskState.SUCCESS) is TaskState.WARNING
    assert FailureBehavior.FAIL.apply(TaskState.SUCCESS) is TaskState.FAILED
    assert FailureBehavior.IGNORE.apply(TaskState.SUCCESS) is TaskState.SUCCESS
    assert FailureBehavior.WARN.apply(TaskState.FAILED) is TaskState.FAILED


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2025, 1, 31, 12, 0, tzinfo=UTC), "2025-01-31T12:00:00.000000Z"),
        (datetime(2025, 1, 31, 12, 0, 0, 123, tzinfo=UTC), "2025-01-31T12:00:00.000123Z"),
        (datetime(2025, 1, 31, 14, 30, tzinfo=timezone(timedelta(hours=2, minutes=30))), "2025-01-31T12:00:00.000000Z"),
        (datetime(2025, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=3))), "2024-12-31T22:00:00.000000Z"),
        (
            datetime(2025, 6, 1, 12, 0, tzinfo=timezone(timedelta(0), "Z")),
            "2025-06-01T12:00:00.000000Z",
        ),  # not UTC itself
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000000Z"),
        (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_the_one_text_form_of_a_time(moment: datetime, text: str) -> None:
    assert format_time(moment) == text
    assert parse_time(text, "t") == moment


@pickles_as_tuple
@attrs.frozen
class _One:
    only: str


@pickles_as_tuple
@attrs.frozen
class _Many:
    a: int
    b: str | None
    c: tuple[int, ...]
    d: _One
    e: float = 0.5


def test_a_record_pickles_as_the_tuple_of_its_fields_and_back_whole() -> None:
    for record in (_One("x"), _Many(1, None, (2, 3), _One("y")), _Many(0, "", (), _One(""), 1e300)):
        again = pickle.loads(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
        assert again == record and type(again) is type(record)
        assert again.__getstate__() == attrs.astuple(record, recurse=False)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            again.a = 2  # type: ignore[misc]  # still frozen once unpickled
    many = _Many(1, "b", (), _One("z"))
    shared = pickle.loads(pickle.dumps([many, many]))
    assert shared == [many, many] and shared[0] is shared[1]  # one record shared stays one
    assert type(many).__setstate__.__module__ == __name__
    for state in ((1, "b", ()), (1, "b", (), _One("z"), 0.5, "more")):  # a state of another shape: refused
        blank = object.__new__(_Many)
        with pytest.raises(ValueError):
            blank.__setstate__(state)


@pytest.mark.parametrize("state", ["SUCCESS", "WARNING", "FAILED", "KILLED", "CANCELLED", "RETRIED"])
def test_a_token_reads_no_job_of_another_namespace_in_any_last_run_s_reason(state: str) -> None:
    """Whatever the last run's state, its reason names the job only to one who sees its namespace:
    a killed, cancelled or retried run's job of another namespace was shown as it was."""
    from bridge.model.health import ANOTHER_NAMESPACE, FAILED_RUN, Facts, evaluate, masked

    now = datetime(2025, 3, 1, 9, tzinfo=UTC)
    label = "secret.ns/flow.task at 2025-03-01T08:00:00.000000Z"
    (reason,) = evaluate(Facts("mart.a", last_run=(state, label)), None, now).reasons
    assert reason.endswith(FAILED_RUN.get(state, "succeeded")) and "secret.ns" in reason
    hidden = masked(reason, lambda namespace: namespace == "team-a")
    assert "secret.ns" not in hidden and ANOTHER_NAMESPACE in hidden, hidden
    assert masked(reason, lambda namespace: namespace == "secret.ns") == reason


# runIds and what java.util.UUID.fromString (JDK 17, the Java Marquez runs on) reads each as, read
# by it ("-": it throws, and Marquez derives a UUID from the text instead)
JAVA_UUIDS = [
    ("f33551b1-9845-46de-a878-e416e092c9e", "f33551b1-9845-46de-a878-0e416e092c9e"),
    ("f33551b1-9845-46de-a878-+e416e092c9e", "f33551b1-9845-46de-a878-0e416e092c9e"),
    ("1-2-3-4-5", "00000001-0002-0003-0004-000000000005"),
    ("F33551B1-9845-46DE-A878-0E416E092C9E", "f33551b1-9845-46de-a878-0e416e092c9e"),
    ("+-1-1-1-1", "-"),
    ("1-2-3-4-", "-"),
    ("ffffffffffffffff1-1-1-1-1", "-"),
    ("\uff11-\uff12-\uff13-\uff14-\uff15", "00000001-0002-0003-0004-000000000005"),
    ("\uff21-b-c-d-e", "0000000a-000b-000c-000d-00000000000e"),
    ("123456789-1-1-1-1", "23456789-0001-0001-0001-000000000001"),
    ("7fffffffffffffff-ffff1-1-1-1", "ffffffff-fff1-0001-0001-000000000001"),
    ("8000000000000000-1-1-1-1", "-"),
    ("g-1-1-1-1", "-"),
    ("{f33551b1-9845-46de-a878-0e416e092c9e}", "-"),
    ("f33551b19845-46de-a878-0e416e092c9e", "-"),
    ("\u0663-1-1-1-1", "00000003-0001-0001-0001-000000000001"),
    ("1-1-1-1-1-1", "-"),
    (" 1-1-1-1-1", "-"),
    ("0f33551b1-9845-46de-a878-0e416e092c9", "f33551b1-9845-46de-a878-00e416e092c9"),
    ("\uff41-\uff46-\uff26-\uff21-\uff47", "-"),
    ("\U0001d7d9-1-1-1-1", "-"),
]


@pytest.mark.parametrize(("text", "read"), JAVA_UUIDS)
def test_a_run_id_is_read_as_javas_uuid_parser_reads_it(text: str, read: str) -> None:
    """Marquez reads a runId with ``UUID.fromString``, which takes more than the canonical form:
    the run it reads a spelling as is named (``marquez_source``), so that a token cannot reach
    another namespace's run by a spelling the receiver keeps apart; the key stays the text (a
    run received so before keeps it)."""
    from bridge.model.received import java_uuid, marquez_source, run_source

    assert (java_uuid(text) or "-") == read
    canonical = read != "-" and text.lower() != read
    assert marquez_source(text) == (f"run:{read}" if canonical else None)
    assert run_source(text) == f"run:{read if read != '-' and not canonical else text}"
