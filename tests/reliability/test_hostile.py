"""Hostile objects through the real server and the real chain (shipped CRDs, policies,
example state): a 3 MiB object, 10,000-element lists and sets, strings built to make a
backtracking regex engine explode, values nested a thousand levels deep. Each is answered
before the apiserver's deadline with a clear verdict (never the failure mode), and the
message names the problem without echoing the object.

The figures (how long each takes, p99 of small requests meanwhile) come from
``bench/reliability_hostile.py``; here the verdicts and the deadline are asserted.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from webhook import shipped_data
from webhook.admission.review import MAX_MESSAGE_LENGTH, AdmissionRequest
from webhook.schema import CRDRegistry
from webhook.server import load_admitter
from webhook.server.settings import Settings

from .conftest import MiB, ServerThread, review
from tests.support.cel import EVALUATOR

DEADLINE = "5s"  # the chart's timeoutSeconds: the apiserver gives up after it


CHAIN, _ = load_admitter(Settings(), EVALUATOR)


def example(name: str) -> dict:
    """A valid example as the validating webhook gets it: defaulted and mutated (``run``)."""
    obj = yaml.safe_load((Path(shipped_data.example_manifests_dir()) / "valid" / name).read_text())
    outcome = CHAIN.run(AdmissionRequest.model_validate(review(obj)["request"]))
    assert outcome.allowed, outcome.status
    return outcome.object


MODEL = example("kubeai-model-vllm.yaml")
CLASS = example("inferenceserviceclass.yaml")
INFERENCE_MODEL = example("inferencemodel.yaml")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("hostile") / "certs", CHAIN, default_timeout=10.0) as running:
        yield running


def judge(server: ServerThread, obj: dict, *, path: str = "/validate", deep: object = None) -> tuple[dict, float]:
    """The answer to ``obj`` (its ``"@deep"`` string replaced by ``deep``, nested too deep for
    the JSON encoders) and how long it took."""
    body = orjson.dumps(review(obj, uid="hostile"))
    if deep is not None:
        body = body.replace(b'"@deep"', deep)
    client = server.client()
    started = time.perf_counter()
    answer = client.post(f"{path}?timeout={DEADLINE}", body)
    elapsed = time.perf_counter() - started
    client.close()
    assert answer.status == 200, answer.body[:300]
    assert len(answer.body) < 64 * 1024  # whatever came in, the answer names problems, it does not echo
    response = answer.json()["response"]
    assert response["uid"] == "hostile"
    assert "failure" not in response.get("auditAnnotations", {}), response  # judged, not timed out or crashed
    if not response["allowed"]:
        message = response["status"]["message"]
        assert message and len(message) <= MAX_MESSAGE_LENGTH, f"{len(message)} characters: {message[:300]}"
    return response, elapsed


def with_spec(base: dict, **spec) -> dict:
    obj = copy.deepcopy(base)
    obj["spec"].update(spec)
    return obj


def test_valid_examples_are_allowed(server):
    for obj in (MODEL, CLASS, INFERENCE_MODEL):
        assert judge(server, obj)[0]["allowed"], obj["kind"]


@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_three_mib_annotation(server, path):
    obj = copy.deepcopy(MODEL)
    obj["metadata"]["annotations"] = {"hostile": "x" * (3 * MiB - 4096)}
    response, _ = judge(server, obj, path=path)
    if path == "/validate":
        assert not response["allowed"]
        assert "metadata.annotations: Too long" in response["status"]["message"]


@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_three_mib_string_quoted_by_a_policy_message(server, path):
    """The engine policy quotes spec.url in its message: the answer carries the start of it
    and how much was left out, not 3 MiB (twice: message and cause)."""
    obj = with_spec(MODEL, url="ollama://" + "a" * (3 * MiB - 4096), engine="VLLM")
    obj["spec"].pop("cacheProfile")
    response, _ = judge(server, obj, path=path)
    if path == "/validate":
        assert not response["allowed"]
        assert response["status"]["message"].startswith('spec.engine: Unsupported value: "VLLM": url "ollama://aaa')
        assert response["status"]["message"].endswith("more characters)")


def test_a_denial_quoting_a_huge_field_is_logged_clipped(server, caplog):
    """The log line of that denial carries at most 1 KiB of its message, saying how much was
    left out: a hostile object does not flood the logs either."""
    obj = with_spec(MODEL, url="ollama://" + "a" * (3 * MiB - 4096), engine="VLLM")
    obj["spec"].pop("cacheProfile")
    with caplog.at_level(logging.INFO, logger="infergate.server"):
        response, _ = judge(server, obj)
    assert not response["allowed"]
    logged = [r.fields["message"] for r in caplog.records if r.getMessage() == "denied"]
    assert logged and all(len(m) <= 1024 and m.endswith("more characters)") for m in logged), logged


def test_ten_thousand_element_set_with_per_item_regex_rules(server):
    """allowedNamespaces: a set of at most 256, each item checked by a CEL matches() rule."""
    distinct = with_spec(CLASS, admissionPolicy={"allowedNamespaces": [f"ns-{i}" for i in range(10_000)]})
    response, _ = judge(server, distinct)
    assert not response["allowed"] and "Too many: 10000: must have at most 256 items" in response["status"]["message"]
    duplicated = with_spec(CLASS, admissionPolicy={"allowedNamespaces": ["ns"] * 10_000})
    response, _ = judge(server, duplicated)
    assert not response["allowed"] and "Duplicate value" in response["status"]["message"]


def test_ten_thousand_element_unbounded_list(server):
    """spec.args has no maxItems: 10,000 of them are judged like 1."""
    response, _ = judge(server, with_spec(MODEL, args=[f"--flag-{i}=value" for i in range(10_000)]))
    assert response["allowed"]


def test_ten_thousand_targets_each_with_rules(server):
    targets = [{"name": f"adapter-{i}", "weight": 1} for i in range(10_000)]
    response, _ = judge(server, with_spec(INFERENCE_MODEL, targetModels=targets))
    assert not response["allowed"]


def test_small_reviews_are_answered_while_a_hostile_one_is_judged(server):
    """A hostile review (10,000 targets: hundreds of ms of CPU) goes to the worker pool by
    its size, so small reviews keep being answered meanwhile."""
    targets = [{"name": f"adapter-{i}", "weight": 1} for i in range(10_000)]
    small = server.client()
    answered_meanwhile = 0
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hostile = pool.submit(judge, server, with_spec(INFERENCE_MODEL, targetModels=targets))
        while not hostile.done():
            answer = small.post(f"/validate?timeout={DEADLINE}", review(MODEL, uid="small"))
            assert answer.status == 200 and answer.json()["response"]["allowed"], answer.body[:300]
            answered_meanwhile += not hostile.done()
        response, _ = hostile.result()
    small.close()
    assert not response["allowed"]  # judged (Too many), not timed out
    assert answered_meanwhile >= 1, "small reviews waited for the hostile one"


REDOS_INPUTS = {
    "letters-then-bang": "a" * 100_000 + "!",
    "dashes": "a" + "-" * 100_000 + "!",
    "dots-and-labels": "a." * 50_000 + "-",
    "commas": "A" + "a," * 50_000 + ",",
}


@pytest.mark.parametrize("name", list(REDOS_INPUTS))
def test_strings_against_the_shipped_patterns_and_matches_rules(server, name):
    """Every shipped `pattern` and CEL matches() gets a 100,000-character near miss."""
    evil = REDOS_INPUTS[name]
    pool_ref = dict(INFERENCE_MODEL["spec"]["poolRef"], group=evil, kind=evil)
    cases = [
        with_spec(INFERENCE_MODEL, poolRef=pool_ref),
        with_spec(CLASS, admissionPolicy={"allowedNamespaces": [evil]}),
    ]
    for obj in cases:
        response, elapsed = judge(server, obj)
        assert not response["allowed"], obj["kind"]


# A CRD that a backtracking engine could not survive: RE2 (what the apiserver uses) answers
# in linear time. The apiserver accepts such a CRD, so the webhook must too.
CATASTROPHIC_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "traps.hostile.test"},
    "spec": {"group": "hostile.test", "scope": "Namespaced",
             "names": {"plural": "traps", "singular": "trap", "kind": "Trap", "listKind": "TrapList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "byPattern": {"type": "string", "maxLength": 100_000, "pattern": "^(a+)+$"},
                     "byRule": {"type": "string", "maxLength": 100_000,
                                "x-kubernetes-validations": [{"rule": "self.matches('^(a|aa)+$')"}]},
                 }}}}}}]},
}


@pytest.mark.parametrize("length", [30, 100_000])
def test_catastrophic_regexes_run_in_linear_time(length):
    """``(a+)+$`` on ``aaa…ab`` takes a backtracking engine 2^n steps (n=30: minutes)."""
    registry = CRDRegistry([CATASTROPHIC_CRD], evaluator=EVALUATOR)
    evil = "a" * (length - 1) + "b"
    obj = {"apiVersion": "hostile.test/v1", "kind": "Trap", "metadata": {"name": "t", "namespace": "n"},
           "spec": {"byPattern": evil, "byRule": evil}}
    started = time.thread_time()  # CPU time: the regex engine's work, not the neighbours
    outcome = registry.handle("CREATE", obj)
    assert time.thread_time() - started < 2.0
    assert not outcome.allowed
    messages = [str(e) for e in outcome.errors]
    assert any("spec.byPattern" in m and "should match '^(a+)+$'" in m for m in messages), messages
    assert any("spec.byRule" in m for m in messages), messages


def test_thousand_levels_deep_in_a_typed_field(server):
    deep = b'{"a":' * 500 + b'["x"' + b"]" + b"}" * 500
    response, _ = judge(server, with_spec(MODEL, args=["@deep"]), deep=deep)
    assert not response["allowed"]
    assert "spec.args[0]" in response["status"]["message"]
