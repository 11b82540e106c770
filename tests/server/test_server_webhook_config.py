"""The webhook configurations: built from the shipped CRDs, valid against the API's models."""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.models import V1MutatingWebhookConfiguration, V1ValidatingWebhookConfiguration

from webhook import certs
from webhook.webhook_config import MAX_TIMEOUT_SECONDS, build_webhook_configurations, served_kinds
from webhook.cel import Evaluator


def roundtrip(obj, model):
    """Through the client's generated model and back to the wire format: a misspelt or
    misplaced field is lost on the way."""
    return ApiClient().sanitize_for_serialization(model.from_dict(obj))


def test_served_kinds_are_the_bundled_kinds_current_and_earlier():
    versions: dict[tuple[str, str], tuple[str, ...]] = {}
    for kind in served_kinds():  # the newest version of a kind first
        versions[(kind.group, kind.plural)] = versions.get((kind.group, kind.plural), ()) + (kind.version,)
    served = {(group, plural, vs) for (group, plural), vs in versions.items()}
    assert served == {
        ("ai.deckhouse.io", "inferenceserviceclasses", ("v1alpha1",)),
        ("ai.deckhouse.io", "inferenceservices", ("v1alpha1",)),
        ("gateway.networking.k8s.io", "httproutes", ("v1", "v1beta1")),
        ("inference.networking.k8s.io", "inferencepools", ("v1",)),
        ("inference.networking.x-k8s.io", "inferencemodels", ("v1alpha2", "v1alpha1")),
        ("inference.networking.x-k8s.io", "inferencepools", ("v1alpha2", "v1alpha1")),
        ("inference.networking.x-k8s.io", "inferencepoolimports", ("v1alpha1",)),
        ("inference.networking.x-k8s.io", "inferenceobjectives", ("v1alpha2",)),
        ("inference.networking.x-k8s.io", "inferencemodelrewrites", ("v1alpha2",)),
        ("llm-d.ai", "inferenceobjectives", ("v1alpha2",)),
        ("llm-d.ai", "inferencemodelrewrites", ("v1alpha2",)),
        ("kubeai.org", "models", ("v1",)),
    }


def test_service_configurations_cover_every_kind_and_exclude_system_namespaces():
    ca = certs.plan(None, now=certs.utcnow(), sans=("localhost",), policy=certs.RotationPolicy()).bundle.ca_pem()
    mutating, validating = build_webhook_configurations(service="infergate/infergate-webhook", ca_bundle=ca)
    assert roundtrip(mutating, V1MutatingWebhookConfiguration) == mutating
    assert roundtrip(validating, V1ValidatingWebhookConfiguration) == validating

    for obj, path in ((mutating, "/mutate"), (validating, "/validate")):
        (hook,) = obj["webhooks"]
        assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] <= MAX_TIMEOUT_SECONDS and hook["failurePolicy"] == "Fail"
        assert hook["clientConfig"]["service"] == {"namespace": "infergate", "name": "infergate-webhook", "path": path, "port": 443}
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["infergate", "kube-system"]}
        ]
        covered = {(g, r) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
        assert covered == {(k.group, k.plural) for k in served_kinds()}
        assert all(set(rule["operations"]) == {"CREATE", "UPDATE"} for rule in hook["rules"])
        assert not any("/" in r for rule in hook["rules"] for r in rule["resources"])  # never /status
        assert [c["name"] for c in hook["matchConditions"]] == ["not-being-deleted", "inference-routes-only"]


def test_url_configuration_and_bad_arguments():
    mutating, _ = build_webhook_configurations(url="https://webhook.example:8443/", failure_policy="Ignore")
    (hook,) = mutating["webhooks"]
    assert hook["clientConfig"] == {"url": "https://webhook.example:8443/mutate"}
    assert hook["failurePolicy"] == "Ignore"
    with pytest.raises(ValueError, match="https only"):
        build_webhook_configurations(url="http://webhook.example")
    with pytest.raises(ValueError, match="timeoutSeconds"):
        build_webhook_configurations(url="https://x", timeout_seconds=10)
    with pytest.raises(ValueError, match="exactly one"):
        build_webhook_configurations()


def test_webhook_config_command_prints_both_objects_with_the_ca(tmp_path):
    certs.DirectoryStore(tmp_path).save(
        certs.plan(None, now=certs.utcnow(), sans=("localhost",), policy=certs.RotationPolicy()).bundle
    )
    out = subprocess.run(
        [sys.executable, "-m", "webhook", "webhook-config", "--service", "ai/infergate", "--ca-file", str(tmp_path / "ca.crt")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    assert docs == list(build_webhook_configurations(service="ai/infergate", ca_bundle=(tmp_path / "ca.crt").read_bytes()))

    missing = subprocess.run([sys.executable, "-m", "webhook", "webhook-config", "--url", "https://x",
                              "--ca-file", str(tmp_path / "nope.crt")], capture_output=True, text=True)
    assert missing.returncode == 2 and "infergate: error: webhook-config: cannot read CA bundle" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize("engine", ["cel-expr", "cel-python"])
def test_only_routes_to_an_inference_pool_reach_the_webhook(engine):
    """The matchCondition, evaluated as the apiserver would: a route with a backendRef to an
    InferencePool and every inference kind are sent; other routes never are."""

    (hook,) = build_webhook_configurations(url="https://127.0.0.1:8443")[1]["webhooks"]
    (condition,) = [c for c in hook["matchConditions"] if c["name"] == "inference-routes-only"]
    program = Evaluator(engine).engine.compile(condition["expression"], ["request", "object"])

    def sent(group: str, obj: dict) -> bool:
        return program.evaluate({"request": {"resource": {"group": group}, "operation": "CREATE"}, "object": obj}) is True

    def route(*refs: dict) -> dict:
        return {"kind": "HTTPRoute", "spec": {"rules": [{"matches": []}, {"backendRefs": list(refs)}]}}

    pool = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama"}
    assert sent("gateway.networking.k8s.io", route({"name": "web", "port": 80}, pool))
    assert not sent("gateway.networking.k8s.io", route({"name": "web", "port": 80}))
    assert not sent("gateway.networking.k8s.io", {"kind": "HTTPRoute", "spec": {}})
    assert not sent("gateway.networking.k8s.io", {"kind": "HTTPRoute"})
    assert sent("kubeai.org", {"kind": "Model", "spec": {"url": "hf://x"}})
    assert sent("inference.networking.k8s.io", {"kind": "InferencePool", "spec": {}})
