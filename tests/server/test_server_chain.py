"""The contract end to end: a real HTTPS client, the real admission chain (shipped CRDs,
policies and example state) and the example manifests with their stated outcomes."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import jsonpatch
import orjson
import pytest
import yaml

from webhook import shipped_data
from webhook.schema import CRDRegistry

from .conftest import review
from tests.support.cel import EVALUATOR

MANIFESTS = shipped_data.example_manifests_dir()
REGISTRY = CRDRegistry.shipped(evaluator=EVALUATOR)


def manifests(kind: str) -> list[Path]:
    return sorted((MANIFESTS / kind).glob("*.yaml"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def as_sent(obj: dict, operation: str = "CREATE", old: dict | None = None) -> dict:
    """The object as the apiserver hands it to webhooks: decoded, pruned and defaulted."""
    prepared, _ = REGISTRY.prepare(operation, obj, old, None, namespace=obj["metadata"].get("namespace"))
    return prepared


async def admit_like_the_apiserver(live, obj: dict, **kw) -> tuple[dict, dict | None]:
    """/mutate, the patch applied and defaults again, then /validate: (last response, object)."""
    _, body = await live.post("/mutate", review(as_sent(obj), **kw))
    resp = body["response"]
    if not resp["allowed"]:
        return resp, None
    mutated = as_sent(patched(as_sent(obj), resp))
    _, body = await live.post("/validate", review(mutated, **kw))
    return body["response"], mutated


def denial_note(path: Path) -> str:
    """``# denied: <what>`` on the first line of a denied example."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# denied: "), path
    return first.removeprefix("# denied: ").strip()


def patched(obj: dict, response: dict) -> dict:
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(response["patch"])))


@pytest.mark.parametrize("path", manifests("valid"), ids=lambda p: p.stem)
async def test_valid_examples_are_admitted_and_their_defaults_apply(live, path):
    obj = as_sent(load(path))
    status, body = await live.post("/mutate", review(obj, uid=f"m-{path.stem}"))
    resp = body["response"]
    assert status == 200 and resp["uid"] == f"m-{path.stem}" and resp["allowed"], resp
    assert all(len(w) <= 120 for w in resp.get("warnings", []))
    mutated = as_sent(patched(obj, resp))  # the apiserver defaults again after mutation
    status, body = await live.post("/validate", review(mutated, uid=f"v-{path.stem}"))
    assert body["response"]["uid"] == f"v-{path.stem}" and body["response"]["allowed"], body["response"]
    assert "patch" not in body["response"]
    # mutating twice changes nothing more (reinvocation is safe)
    _, again = await live.post("/mutate", review(mutated))
    assert "patch" not in again["response"] or patched(mutated, again["response"]) == mutated


async def test_webhook_defaults_from_the_examples(live):
    expectations = {
        "inferenceservice-catalog.yaml": (("spec", "launchStrategy"), "Latency"),
        "inferenceservice-default-class.yaml": (("spec", "inferenceServiceClassName"), "general"),
        "inferenceservice-huggingface.yaml": (("spec", "model", "authSecretRef", "key"), "token"),
    }
    for name, (where, value) in expectations.items():
        obj = as_sent(load(MANIFESTS / "valid" / name))
        _, body = await live.post("/mutate", review(obj))
        node = patched(obj, body["response"])
        for key in where:
            node = node[key]
        assert node == value, name


@pytest.mark.parametrize("path", manifests("denied-by-webhook"), ids=lambda p: p.stem)
async def test_webhook_denials_carry_a_status_naming_the_problem(live, path):
    resp, _ = await admit_like_the_apiserver(live, load(path), uid="d")
    assert resp["uid"] == "d" and resp["allowed"] is False, resp
    assert 400 <= resp["status"]["code"] < 500 and resp["status"]["reason"]
    assert denial_note(path).lower() in resp["status"]["message"].lower()
    assert all(c["message"] for c in resp["status"]["details"]["causes"])


@pytest.mark.parametrize("path", manifests("warned-by-webhook"), ids=lambda p: p.stem)
async def test_webhook_warnings_admit_the_object_and_name_the_problem(live, path):
    """The examples whose rule only warns (docs/denial-rule.md): admitted, with the warning of
    their first line (``# warns: ...``), within the apiserver's recommended length."""
    said = path.read_text().splitlines()[0].removeprefix("# warns:").strip()
    resp, _ = await admit_like_the_apiserver(live, load(path), uid="w")
    assert resp["uid"] == "w" and resp["allowed"] is True, resp
    assert any(said in w for w in resp.get("warnings", [])), resp
    assert all(len(w) <= 120 for w in resp["warnings"])


async def test_schema_errors_come_in_the_apiservers_format(live):
    """An object the apiserver itself would refuse (enum), sent straight to /validate."""
    obj = load(MANIFESTS / "invalid" / "inferencemodel-criticality-default.yaml")
    _, body = await live.post("/validate", review(obj))
    status = body["response"]["status"]
    assert body["response"]["allowed"] is False and status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith(f'InferenceModel.inference.networking.x-k8s.io "{obj["metadata"]["name"]}" is invalid: ')
    assert 'spec.criticality: Unsupported value: "Default"' in status["message"]
    assert {"reason": "FieldValueNotSupported", "field": "spec.criticality"}.items() <= status["details"]["causes"][0].items()


async def test_v1beta1_review_answered_in_v1beta1(live):
    obj = as_sent(load(MANIFESTS / "valid" / "inferenceservice-catalog.yaml"))
    _, body = await live.post("/mutate", review(obj, api_version="admission.k8s.io/v1beta1", uid="b1"))
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["uid"] == "b1"
    assert body["response"]["allowed"] and body["response"]["patchType"] == "JSONPatch"


async def test_dry_run_gets_the_same_answer(live):
    obj = as_sent(load(MANIFESTS / "denied-by-webhook" / "kubeai-model-ollama-url-with-vllm.yaml"))
    _, wet = await live.post("/validate", review(obj, uid="x"))
    _, dry = await live.post("/validate", review(obj, uid="x", dry_run=True))
    assert dry == wet and wet["response"]["allowed"] is False


async def test_status_writes_are_not_judged_by_spec_rules(live):
    """A controller updating /status of an object whose spec breaks a policy (created
    before the policy tightened) is not blocked."""
    bad = as_sent(load(MANIFESTS / "denied-by-webhook" / "kubeai-model-ollama-url-with-vllm.yaml"))
    with_status = copy.deepcopy(bad)
    with_status["status"] = {"replicas": {"all": 1, "ready": 1}}
    _, body = await live.post("/validate", review(with_status, old=bad, operation="UPDATE", subresource="status"))
    assert body["response"]["allowed"], body["response"]
    _, body = await live.post("/validate", review(with_status, old=bad, operation="UPDATE"))
    assert body["response"]["allowed"] is False


async def test_delete_and_connect_are_answered(live):
    obj = as_sent(load(MANIFESTS / "valid" / "kubeai-model-vllm.yaml"))
    _, body = await live.post("/validate", review(None, old=obj, operation="DELETE", uid="del"))
    assert body["response"]["uid"] == "del" and body["response"]["allowed"]
    _, body = await live.post("/mutate", review(None, old=obj, operation="DELETE", uid="del2"))
    assert body["response"]["allowed"] and "patch" not in body["response"]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("path", ["/validate", "/mutate"])
async def test_a_write_without_its_object_is_one_clear_400(live, operation, path):
    """The apiserver always sends the object written on CREATE and UPDATE: a review without it
    comes from another client, and gets a 400 saying so, not the policies' errors on a null."""
    obj = as_sent(load(MANIFESTS / "valid" / "kubeai-model-vllm.yaml"))
    sent = review(obj, operation=operation, old=obj if operation == "UPDATE" else None)
    sent["request"]["object"] = None
    status, body = await live.post(path, sent)
    assert status == 400, body
    assert body["kind"] == "Status" and body["code"] == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (f"invalid AdmissionReview: a {operation} request has no request.object "
                               "(the apiserver always sends the object written)")
    del sent["request"]["object"]  # absent, not null: the same answer
    status, again = await live.post(path, sent)
    assert status == 400 and again["message"] == body["message"]


async def test_connect_with_its_options_or_nothing_is_answered(live):
    options = {"kind": "PodExecOptions", "apiVersion": "v1", "command": ["sh"], "stdin": True}
    for obj in (options, None):
        sent = review(options, operation="CONNECT", gvr=("", "v1", "pods"), kind="Pod", uid="con")
        sent["request"]["object"] = obj
        for path in ("/validate", "/mutate"):
            status, body = await live.post(path, sent)
            assert status == 200 and body["response"]["uid"] == "con" and body["response"]["allowed"], body


async def test_an_unserved_kind_is_allowed_untouched(live):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
                  "data": {"a": "b"}}
    for path in ("/validate", "/mutate"):
        status, body = await live.post(path, review(config_map, uid="cm"))
        assert status == 200 and body["response"]["uid"] == "cm" and body["response"]["allowed"]
        assert "patch" not in body["response"]
