"""Fuzzing the AdmissionReview decoding through the real HTTPS endpoint.

Whatever arrives (any JSON, any bytes, a review with any field replaced by anything, deep
nesting, huge strings and lists, unicode, numbers beyond int64), the answer is well-formed:
a 200 AdmissionReview answering the request's uid, or a 4xx metav1.Status with a message;
never a 5xx, never a traceback, always before the deadline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import MiB, RecordingAdmitter, ServerThread, assert_well_formed, review
from .strategies import json_values

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MODEL = {
    "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "team-a"},
    "spec": {"features": ["TextGeneration"], "url": "hf://Qwen/Qwen2.5-0.5B", "engine": "VLLM", "resourceProfile": "cpu:1"},
}

def encode(value: Any, *, ascii_only: bool) -> bytes:
    """The stdlib encoder: it writes integers of any size (orjson stops at 64 bits)."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("fuzz") / "certs", RecordingAdmitter(), default_timeout=5.0) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    c = server.client()
    yield c
    c.close()


def send(client, body: bytes, *, uid: str | None = None, path: str = "/validate") -> dict[str, Any]:
    started = time.perf_counter()
    answer = client.post(path, body)
    assert time.perf_counter() - started < 5.0  # the configured deadline
    return assert_well_formed(answer, uid=uid)


@FUZZ
@given(value=json_values, ascii_only=st.booleans())
def test_any_json_document_gets_a_well_formed_answer(client, value, ascii_only):
    send(client, encode(value, ascii_only=ascii_only))


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_get_a_well_formed_answer(client, data):
    send(client, data)


REVIEW_FIELDS = [
    ("apiVersion",), ("kind",), ("request",), ("request", "uid"), ("request", "kind"), ("request", "kind", "kind"),
    ("request", "resource"), ("request", "subResource"), ("request", "operation"), ("request", "name"),
    ("request", "namespace"), ("request", "userInfo"), ("request", "userInfo", "groups"), ("request", "userInfo", "extra"),
    ("request", "object"), ("request", "object", "metadata"), ("request", "object", "spec"), ("request", "oldObject"),
    ("request", "dryRun"), ("request", "options"), ("request", "requestKind"),
]


@FUZZ
@given(
    replacements=st.lists(st.tuples(st.sampled_from(REVIEW_FIELDS), json_values), max_size=4),
    deletions=st.lists(st.sampled_from(REVIEW_FIELDS), max_size=2),
    path=st.sampled_from(["/validate", "/mutate"]),
    api_version=st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]),
)
def test_reviews_with_fields_replaced_or_removed(client, replacements, deletions, path, api_version):
    doc = review(json.loads(json.dumps(MODEL)), api_version=api_version)
    for where, value in replacements:
        put(doc, where, value)
    for where in deletions:
        put(doc, where, DELETE)
    body = send(client, encode(doc, ascii_only=False), path=path)
    if "response" in body:  # answered: the uid was a non-empty string, the rest decoded
        assert body["response"]["uid"] == doc["request"]["uid"]
        assert body["apiVersion"] == doc["apiVersion"]


DELETE = object()


def put(doc: Any, where: tuple[str, ...], value: Any) -> None:
    for key in where[:-1]:
        if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
            return
        doc = doc[key]
    if isinstance(doc, dict):
        if value is DELETE:
            doc.pop(where[-1], None)
        else:
            doc[where[-1]] = value


@FUZZ
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_truncated_reviews(client, cut):
    whole = orjson.dumps(review(MODEL))
    send(client, whole[: cut % len(whole)])


# ---------------------------------------------------------------------------------------
# The extremes, one by one.


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [500, 1000, 1021, 1022, 10_000])
def test_deep_nesting_inside_the_object(client, depth):
    """orjson stops at 1024 levels: deeper documents get a 400 that says so, shallower ones
    are answered (the review itself takes three levels)."""
    obj = json.loads(json.dumps(MODEL))
    obj["spec"]["deep"] = "@"
    text = encode(review(obj, uid="deep"), ascii_only=True)
    text = text.replace(b'"@"', encode(nested(depth), ascii_only=True) if depth < 900 else deep_text(depth))
    body = send(client, text, uid="deep")
    if depth + 4 <= 1024:
        assert body["response"]["allowed"] is True
    else:
        assert body["code"] == 400 and "depth" in body["message"]


def deep_text(depth: int) -> bytes:
    # json.dumps itself recurses; build the text directly
    return b"[" * depth + b'"x"' + b"]" * depth


def test_ten_thousand_levels_as_the_whole_body(client):
    body = send(client, deep_text(10_000))
    assert body["code"] == 400


def test_huge_strings_and_lists_within_the_body_limit(client):
    obj = json.loads(json.dumps(MODEL))
    obj["metadata"]["annotations"] = {"big": "é" * (3 * MiB // 2)}  # 3 MiB of UTF-8
    obj["spec"]["args"] = ["--flag"] * 100_000
    body = send(client, orjson.dumps(review(obj, uid="huge")), uid="huge")
    assert body["response"]["allowed"] is True


def test_numbers_beyond_int64_and_float_edges(client):
    obj = json.loads(json.dumps(MODEL))
    obj["spec"]["numbers"] = [2**63, -(2**63) - 1, 2**64, 10**40, -(10**40), 1.7976931348623157e308, 5e-324, -0.0]
    send(client, encode(review(obj, uid="num"), ascii_only=True), uid="num")
    send(client, b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1e999}}')


def test_unicode_everywhere(client):
    obj = json.loads(json.dumps(MODEL))
    obj["metadata"]["labels"] = {"ключ": "значение", "🤖": "\u0000\u202e\ufeff", "\U0010ffff": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"}
    obj["spec"]["url"] = "hf://\u0301\u200b/" + "漢字" * 1000
    doc = review(obj, uid="ünïcødé-🤖")
    for ascii_only in (True, False):
        send(client, encode(doc, ascii_only=ascii_only), uid="ünïcødé-🤖")
    lone_surrogate = encode(doc, ascii_only=True).replace(b"\\ud83e\\udd16", b"\\ud83e", 1)
    assert send(client, lone_surrogate)["code"] == 400
