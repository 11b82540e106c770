"""A policy suite (``infergate test``) whose ``policies:`` are a ValidatingAdmissionPolicy and its
binding: the apiserver's denial, warning and params read from the suite's state."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from webhook.cli import main

POLICIES = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [models]}
  validations:
  - expression: "object.spec.?maxReplicas.orValue(0) <= int(params.data.maxReplicas)"
    messageExpression: "'maxReplicas must be at most ' + params.data.maxReplicas"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: replica-limit, namespace: platform, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-warn}
spec:
  policyName: replica-limit
  validationActions: [Warn]
  paramRef: {name: replica-soft-limit, namespace: platform, parameterNotFoundAction: Allow}
"""

SUITE = """\
apiVersion: policy.infergate.io/v1alpha1
kind: PolicySuite
name: replica-limit
policies: [policies.yaml]
namespace: ml
state:
- {apiVersion: v1, kind: Namespace, metadata: {name: ml}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: replica-limit, namespace: platform}, data: {maxReplicas: "4"}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: replica-soft-limit, namespace: platform}, data: {maxReplicas: "2"}}
cases:
- name: within both limits
  object: &model
    apiVersion: kubeai.org/v1
    kind: Model
    metadata: {name: llama}
    spec: {features: [TextGeneration], url: "hf://org/m", engine: VLLM, minReplicas: 0, maxReplicas: 2}
  expect: {allowed: true, warnings: []}
- name: over the soft limit
  object:
    apiVersion: kubeai.org/v1
    kind: Model
    metadata: {name: llama}
    spec: {features: [TextGeneration], url: "hf://org/m", engine: VLLM, minReplicas: 0, maxReplicas: 3}
  expect:
    allowed: true
    warnings: ["Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-warn': maxReplicas must be at most 2"]
- name: over the hard limit
  object:
    apiVersion: kubeai.org/v1
    kind: Model
    metadata: {name: llama}
    spec: {features: [TextGeneration], url: "hf://org/m", engine: VLLM, minReplicas: 0, maxReplicas: 5}
  expect:
    allowed: false
    code: 403
    reason: Forbidden
    message: "^models.kubeai.org \\"llama\\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request: maxReplicas must be at most 4$"
"""


def test_a_suite_of_native_policies(tmp_path: Path) -> None:
    (tmp_path / "policies.yaml").write_text(POLICIES)
    (tmp_path / "suite.yaml").write_text(SUITE)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["test", str(tmp_path / "suite.yaml"), "-o", "json"])
    report = json.loads(out.getvalue())
    assert code == 0, out.getvalue() + err.getvalue()
    cases = [case for suite in report["suites"] for case in suite["cases"]]
    assert [(c["name"], c["passed"], c["problems"]) for c in cases] == [
        ("within both limits", True, []), ("over the soft limit", True, []), ("over the hard limit", True, [])]
    assert report["passed"] == 3 and report["failed"] == 0
