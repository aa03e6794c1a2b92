"""A fuzz target for the receiver's parse-and-judge path: whatever bytes a client sends, and
whatever JSON it puts wherever in an event, the answer is one the receiver documents (never a
500), every refusal in the JSON error shape, and a refused event changes nothing.

Briefly in the normal run; longer with ``OLBRIDGE_FUZZ_EXAMPLES``::

    OLBRIDGE_FUZZ_EXAMPLES=20000 .venv/bin/pytest -q tests/test_receiver_fuzz.py
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.mapping import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake, Limits
from tests.group_writer import GroupWriter
from tests.helpers import ol_dataset, ol_run_event
from tests.test_receiver_http import Client

EXAMPLES = int(os.environ.get("OLBRIDGE_FUZZ_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None
)
DOCUMENTED = {200, 201, 400, 403, 413, 415, 503}

# JSON values as a client may write them: any text (lone surrogates too), numbers of any size, NaN
# and the infinities the standard library writes, nesting of any depth
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ud800", "a\udfffb", "\x00", "1234567890123456", "2025-03-01T08:00:00Z"])
)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)
PLACES = [
    "",
    "run",
    "run/runId",
    "run/facets",
    "job",
    "job/namespace",
    "job/name",
    "eventTime",
    "producer",
    "schemaURL",
    "inputs",
    "inputs/0",
    "inputs/0/facets",
    "inputs/0/namespace",
    "outputs/0/facets/schema",
    "outputs/0/facets/columnLineage",
    "outputs/0/facets/symlinks",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReceiverApp]:
    path = str(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    writer = GroupWriter(path, Resolver.load())
    limits = Limits(max_body=256 * 1024, max_decompressed=1024 * 1024, max_batch=20, max_datasets=20)
    yield ReceiverApp(Intake(writer.submit, limits=limits), ready=lambda: None)
    writer.close()


def _event() -> dict[str, Any]:
    return ol_run_event(inputs=[ol_dataset("s3://b", "in")], outputs=[ol_dataset("s3://b", "out")])


def _put(event: dict[str, Any], place: str, value: Any) -> Any:
    if not place:
        return value
    target: Any = event
    *path, last = place.split("/")
    for key in path:
        target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return event


def _check(status: int, answer: Any) -> None:
    assert status in DOCUMENTED, answer
    if status >= 400:
        error = answer["error"]
        assert (error["status"], error["retriable"]) == (status, status == 503)
        assert isinstance(error["message"], str) and error["message"]


@FUZZ
@given(body=st.binary(max_size=2048), batch=st.booleans(), gzipped=st.booleans())
def test_any_bytes_get_a_documented_answer(app: ReceiverApp, body: bytes, batch: bool, gzipped: bool) -> None:
    headers = {"Content-Encoding": "gzip"} if gzipped else {}
    payload = gzip.compress(body) if gzipped and body[:1] != b"\x1f" else body
    status, _, answer = Client(app, token=None).request(
        "POST", "/api/v1/lineage/batch" if batch else "/api/v1/lineage", payload, headers
    )
    _check(status, answer)


@FUZZ
@given(place=st.sampled_from(PLACES), value=VALUES, depth=st.integers(0, 1100), batch=st.booleans())
def test_any_json_anywhere_in_an_event_gets_a_documented_answer(
    app: ReceiverApp, place: str, value: Any, depth: int, batch: bool
) -> None:
    event = _put(copy.deepcopy(_event()), place, value)
    text = json.dumps(event)  # NaN and Infinity as the standard library writes them, surrogates escaped
    if depth:  # and nesting far deeper than the standard library writes
        text = text.replace('"in"', '"in", "deep": ' + "[" * depth + "]" * depth, 1)
    body = f"[{text}, {json.dumps(_event())}]" if batch else text
    status, _, answer = Client(app, token=None).request(
        "POST", "/api/v1/lineage/batch" if batch else "/api/v1/lineage", body.encode()
    )
    _check(status, answer)
    if batch and status == 200:  # the good event beside it is taken (or was, before)
        assert 1 not in [f["index"] for f in answer["failed_events"]]
