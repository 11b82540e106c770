"""What the cluster view keeps of today's inference kinds: Pods trimmed to what is read, the
kinds the webhook watches, and policy lookups that list Pods by an object's own label selector.
(The watch cache's side: tests/state/test_state_kube.py.)"""

from __future__ import annotations

import pytest

from webhook.state import FileState, trim_pod
from webhook.inputs.watches import lookup_watches
from tests.support.cel import EVALUATOR


def pod(name, labels, ports=(8000,), phase="Running", **extra):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml-team", "labels": labels, "uid": f"uid-{name}",
                     "resourceVersion": "7", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": {
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": ["--model=/model"] * 50,
                            "env": [{"name": "HF_TOKEN", "value": "secret"}],
                            "ports": [{"name": "http", "containerPort": p, "protocol": "TCP"} for p in ports]}],
            "initContainers": [{"name": "loader", "image": "loader"},
                               {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                                "ports": [{"containerPort": 9901}]}],
            "volumes": [{"name": "model", "emptyDir": {}}],
            **extra,
        },
        "status": {"phase": phase, "podIP": "10.0.0.7",
                   "conditions": [{"type": "PodScheduled", "status": "True"},
                                  {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
                   "containerStatuses": [{"name": "vllm", "ready": True, "image": "vllm/vllm-openai:v0.11.0"}]},
    }


KEPT = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "a", "namespace": "ml-team", "uid": "uid-a", "resourceVersion": "7", "labels": {"app": "x"}},
    "spec": {"containers": [{"name": "vllm", "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]}],
             "initContainers": [{"name": "proxy", "ports": [{"containerPort": 9901}], "restartPolicy": "Always"}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}


def test_a_pod_keeps_labels_ports_phase_and_readiness_only():
    assert trim_pod(pod("a", {"app": "x"})) == KEPT
    assert trim_pod(KEPT) == KEPT  # idempotent: the watch cache trims a page, the store again


def test_file_state_keeps_the_trimmed_pod(tmp_path):
    import yaml

    (tmp_path / "pods.yaml").write_text(yaml.safe_dump(pod("a", {"app": "x"})))
    assert FileState(tmp_path).get("v1", "Pod", "a", "ml-team") == KEPT


def test_the_webhook_watches_what_the_new_policies_read():
    watched = {(k.api_version, k.kind) for k in lookup_watches()}
    assert watched >= {
        ("v1", "Pod"), ("v1", "Service"), ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("inference.networking.k8s.io/v1", "InferencePool"), ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"), ("llm-d.ai/v1alpha2", "InferenceObjective"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"), ("llm-d.ai/v1alpha2", "InferenceModelRewrite"),
    }


# -- lookups by an object's own label selector ----------------------------------------------------
SELECTOR_POLICY = """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: selected-pods}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [inference.networking.k8s.io], kinds: [InferencePool]}]
  lookups:
    - name: pods
      list: {apiVersion: v1, kind: Pod, namespace: request.namespace, selector: object.spec.?selector.orValue(null)}
  warnings:
    - expression: "false"
      messageExpression: "'found: ' + lookups.pods.map(p, p.metadata.name).join(',')"
"""


def selected(tmp_path, selector, *, explain=False):
    from tests.support.policy import request
    from webhook.policy import PolicyInput, PolicySet
    from webhook.admission.chain import request_view

    (tmp_path / "policy.yaml").write_text(SELECTOR_POLICY)
    (policy,) = PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR).policies
    state = FileState(objects=[pod("a", {"app": "x", "tier": "gpu"}), pod("b", {"app": "x"}), pod("c", {"app": "y"}),
                               {**pod("d", {"app": "x"}), "metadata": {"name": "d", "namespace": "other", "labels": {"app": "x"}}}])
    spec = {"targetPorts": [{"number": 8000}]} | ({"selector": selector} if selector is not ... else {})
    obj = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
           "metadata": {"name": "p", "namespace": "ml-team"}, "spec": spec}
    req = request(obj)
    verdict = policy.evaluate(PolicyInput(request_view(req), obj, None, None, state), mutating=False, explain=explain)
    return verdict.warnings or [d.message for d in verdict.denials]


@pytest.mark.parametrize("explain", [False, True], ids=["reader", "cel"])
@pytest.mark.parametrize("selector, found", [
    ({"matchLabels": {"app": "x"}}, "a,b"),
    ({"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, "b"),
    ({}, "a,b,c"),       # an empty selector selects everything (of the namespace)
    (..., ""),           # no selector: nothing
])
def test_a_list_lookup_selects_by_a_label_selector_value(tmp_path, selector, found, explain):
    assert selected(tmp_path, selector, explain=explain) == [f"found: {found}"]


def test_a_selector_that_is_not_one_is_the_policys_error(tmp_path):
    (message,) = selected(tmp_path, {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]})
    assert message == "policy selected-pods: lookups.pods.selector: 'Near' is not a valid label selector operator"


def test_label_selector_and_selector_are_exclusive(tmp_path):
    from webhook.policy import PolicySet

    (tmp_path / "policy.yaml").write_text(SELECTOR_POLICY.replace("selector: object", "labelSelector: \"'a=b'\", selector: object"))
    with pytest.raises(Exception, match="give labelSelector or selector, not both"):
        PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR)
