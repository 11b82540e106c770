"""Validation actions through real HTTPS: the real loader (``load_admitter``) with a policy
directory, a state directory of Namespaces and ``--policy-actions``; the AdmissionReview
responses carry Warn's warnings and Audit's ``validation_failure`` audit annotation under a
key the apiserver accepts from a webhook (it prefixes it with the webhook's name)."""

from __future__ import annotations

import json

import pytest
import yaml

from webhook.server import load_admitter
from webhook.server.settings import Settings
from webhook.validation.names import qualified_name

from .conftest import MODEL, review, start_server, stop_server
from tests.support.cel import EVALUATOR

POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: min-one}
spec:
  validationActions: [Audit]
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: object.spec.?minReplicas.orValue(0) >= 1
      message: at least one replica
"""
NAMESPACES = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
              for n, labels in (("team-a", {"team": "a"}), ("prod", {"tier": "prod"}), ("lab", {"team": "lab"}))]


def model(namespace: str, replicas: int) -> dict:
    return {**MODEL, "metadata": {"name": "m", "namespace": namespace},
            # as the apiserver sends it: the CRD's defaults applied
            "spec": {**MODEL["spec"], "minReplicas": replicas, "scaleDownDelaySeconds": 30, "targetRequests": 100}}


@pytest.fixture
async def live(tmp_path):
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "min-one.yaml").write_text(POLICY)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "namespaces.yaml").write_text(yaml.safe_dump_all(NAMESPACES))
    settings = Settings(policies_dir=tmp_path / "policies", state_dir=tmp_path / "state",
                        policy_actions=["min-one=Warn@team=a",
                                        '{"min-one": [{"namespaceSelector": {"matchLabels": {"tier": "prod"}},'
                                        ' "actions": ["Deny", "Audit"]}]}'])
    admitter, checks = load_admitter(settings, EVALUATOR)
    assert all(check() is None for check in checks.values())
    running = await start_server(tmp_path, admitter)
    yield running
    await stop_server(running)
    admitter.policies.stop()


async def validate(live, obj: dict) -> dict:
    status, body = await live.post("/validate", review(obj))
    assert status == 200
    return body["response"]


async def test_warn_in_the_namespaces_the_override_selects(live):
    response = await validate(live, model("team-a", 0))
    assert response["allowed"] is True
    assert response["warnings"] == ["Validation failed for AdmissionPolicy 'min-one': at least one replica"]
    assert "auditAnnotations" not in response and "status" not in response


async def test_deny_and_audit_where_the_second_entry_selects(live):
    response = await validate(live, model("prod", 0))
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "at least one replica" in response["status"]["message"]
    (record,) = json.loads(response["auditAnnotations"]["validation_failure"])
    assert record == {"message": "at least one replica", "policy": "min-one", "binding": "override[1]",
                      "expressionIndex": 0, "validationActions": ["Deny", "Audit"]}


async def test_audit_elsewhere_as_the_policy_says(live):
    response = await validate(live, model("lab", 0))
    assert response["allowed"] is True and "warnings" not in response
    assert response["auditAnnotations"] == {"validation_failure": (
        '[{"message":"at least one replica","policy":"min-one","binding":"","expressionIndex":0,'
        '"validationActions":["Audit"]}]')}
    # the apiserver records a webhook's keys as "<webhook name>/<key>", refusing any that is not a
    # qualified name (k8s.io/apiserver admission attributes' checkKeyFormat)
    for key in response["auditAnnotations"]:
        assert "/" not in key and qualified_name(f"validate.infergate.io/{key}") == []


async def test_a_passing_object_has_neither(live):
    response = await validate(live, model("lab", 2))
    assert response["allowed"] is True and "warnings" not in response and "auditAnnotations" not in response


async def test_a_long_failure_under_warn_keeps_what_the_apiserver_keeps(tmp_path):
    """A Warn failure is all its author hears of a denial: clipped at the apiserver's own 256
    characters per warning, where other warnings are clipped at 120."""
    long_policy = POLICY.replace("validationActions: [Audit]", "validationActions: [Warn]").replace(
        "message: at least one replica", "message: " + "a long explanation, " * 8 + "the end")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "min-one.yaml").write_text(long_policy)
    admitter, _ = load_admitter(Settings(policies_dir=tmp_path / "policies"), EVALUATOR)
    running = await start_server(tmp_path, admitter)
    try:
        response = await validate(running, model("team-a", 0))
    finally:
        await stop_server(running)
        admitter.policies.stop()
        admitter.state.stop()
    (warning,) = response["warnings"]
    assert warning == "Validation failed for AdmissionPolicy 'min-one': " + "a long explanation, " * 8 + "the end"
    assert len(warning) > 120
