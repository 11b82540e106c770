"""``infergate audit --policies DIR`` with ValidatingAdmissionPolicies: existing objects judged as
CREATEs, a result per binding that applies (``fail`` under Deny, ``warn`` under Warn alone, ``pass``
when every validation holds); a binding that does not apply says nothing."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from webhook.cli import main

POLICIES = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [models]}
  validations:
  - expression: "object.spec.?maxReplicas.orValue(0) <= 4"
    message: at most 4 replicas
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-prod}
spec:
  policyName: replicas
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-dev}
spec:
  policyName: replicas
  validationActions: [Warn]
  matchResources: {namespaceSelector: {matchLabels: {env: dev}}}
"""

STATE = """\
apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {env: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev, labels: {env: dev}}
---
apiVersion: v1
kind: Namespace
metadata: {name: lab}
"""


def model(name: str, namespace: str, replicas: int) -> str:
    return (f"apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
            f"spec: {{features: [TextGeneration], url: 'hf://org/m', engine: VLLM, minReplicas: 0, "
            f"maxReplicas: {replicas}}}\n")


def test_audit_with_native_policies(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "vap.yaml").write_text(POLICIES)
    (tmp_path / "state.yaml").write_text(STATE)
    (tmp_path / "models.yaml").write_text("---\n".join([model("big", "prod", 9), model("small", "prod", 2),
                                                          model("big", "dev", 9), model("big", "lab", 9)]))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["audit", "--policies", str(tmp_path / "policies"), "--state", str(tmp_path / "state.yaml"),
                     str(tmp_path / "models.yaml"), "-o", "json"])
    assert code == 1, err.getvalue()  # a Deny failure: the apiserver would refuse prod/big
    found = sorted((r["resource"]["namespace"], r["resource"]["name"], r["rule"], r["result"], r["message"])
                   for r in json.loads(out.getvalue()) if r["policy"] == "replicas")
    assert found == [("dev", "big", "validations[0]", "warn", "at most 4 replicas"),
                     ("prod", "big", "validations[0]", "fail", "at most 4 replicas"),
                     ("prod", "small", "", "pass", "")]
