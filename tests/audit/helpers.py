"""What the audit tests share: the shipped policies and CRDs as an ``Auditor``, real objects as
a cluster stores them (the upstream KubeAI catalogue, the examples) and policy files written
for one test."""

from __future__ import annotations

import copy
import functools
import hashlib
from pathlib import Path
from typing import Any

import yaml

from webhook.audit import Auditor
from webhook.policy import PolicySet
from webhook.schema import CRDRegistry
from webhook.state import ClusterState
from tests.support.cel import EVALUATOR
from tests.support.paths import MANIFESTS, REPO
from tests.support.policy import example_state, shipped_policies

CATALOGUE = REPO / "tests" / "upstream" / "kubeai-v0.22.1" / "manifests" / "models"


@functools.cache
def current_registry() -> CRDRegistry:
    """The bundled CRDs as shipped (the current KubeAI Model CRD)."""
    return CRDRegistry.shipped(evaluator=EVALUATOR)


def auditor(state: ClusterState | None = None, policies: PolicySet | None = None) -> Auditor:
    return Auditor(current_registry(), policies or shipped_policies(), state or example_state())


def stored(obj: dict[str, Any], namespace: str | None = "team-a") -> dict[str, Any]:
    """``obj`` as the apiserver stores it: namespace, uid (derived from its name, so stable),
    resourceVersion, timestamps, managedFields."""
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    if namespace is not None:
        meta["namespace"] = namespace
    digest = hashlib.sha256(f"{obj['kind']}/{namespace}/{meta['name']}".encode()).hexdigest()
    meta["uid"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    meta.update(resourceVersion="4711", generation=1, creationTimestamp="2026-01-02T03:04:05Z")
    meta["managedFields"] = [{"manager": "kubectl-client-side-apply", "operation": "Update",
                              "apiVersion": obj["apiVersion"], "time": "2026-01-02T03:04:05Z",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    return obj


def catalogue_model(name: str = "bge-embed-text-cpu", namespace: str | None = "team-a") -> dict[str, Any]:
    return stored(yaml.safe_load((CATALOGUE / f"{name}.yaml").read_text()), namespace)


def example(group: str, file: str) -> dict[str, Any]:
    """The one object of ``examples/manifests/<group>/<file>``."""
    return yaml.safe_load((MANIFESTS / group / file).read_text())


def policy_dir(tmp_path: Path, text: str) -> PolicySet:
    directory = tmp_path / "policies"
    directory.mkdir(exist_ok=True)
    (directory / "policy.yaml").write_text(text)
    return PolicySet.load(directory, evaluator=EVALUATOR, builtin=False)
