"""What the cluster view keeps of today's inference kinds: Pods trimmed to what is read (both
backends), an older served version of a group watched when the newer one is not, and policy
lookups that list Pods by an object's own label selector."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes.client import ApiClient, Configuration

from tests.fake_apiserver import FakeApiServer, eventually
from webhook.state import FileState, trim_pod
from webhook.state.kube import WEBHOOK_KINDS, Backoff, KubeState, WatchedKind


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
    watched = {(k.api_version, k.kind) for k in WEBHOOK_KINDS}
    assert watched >= {
        ("v1", "Pod"), ("v1", "Service"), ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("inference.networking.k8s.io/v1", "InferencePool"), ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"), ("llm-d.ai/v1alpha2", "InferenceObjective"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"), ("llm-d.ai/v1alpha2", "InferenceModelRewrite"),
    }


@pytest.fixture
async def cluster(aiohttp_server):
    api = FakeApiServer()
    server = await aiohttp_server(api.app)
    client = ApiClient(Configuration(host=str(server.make_url("")).rstrip("/")))
    states = []

    def make_state(kinds, **kw):
        state = KubeState(client, kinds, backoff=Backoff(0.01, 0.05), **kw)
        states.append(state)
        state.start()
        return state

    yield api, make_state
    for state in states:
        await asyncio.to_thread(state.stop, 2.0)
    client.close()


async def test_the_watch_cache_trims_pods_on_list_and_on_watch(cluster):
    api, make_state = cluster
    pods = api.serve(WatchedKind("v1", "Pod", "pods"), typed_list=True)
    api.add(pods, pod("a", {"app": "x"}))
    state = make_state((WatchedKind("v1", "Pod", "pods"),))
    assert await state.wait_ready(15)
    listed = state.get("v1", "Pod", "a", "ml-team")
    listed["metadata"].pop("resourceVersion")  # the fake apiserver's own
    assert listed == {**KEPT, "metadata": {k: v for k, v in KEPT["metadata"].items() if k != "resourceVersion"}}
    await eventually(lambda: pods.watchers)
    api.add(pods, pod("b", {"app": "x"}, ports=(8080,)))
    await eventually(lambda: state.get("v1", "Pod", "b", "ml-team") is not None)
    kept = state.get("v1", "Pod", "b", "ml-team")
    assert "env" not in kept["spec"]["containers"][0] and "podIP" not in kept["status"]
    assert kept["spec"]["containers"][0]["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


async def test_an_older_served_version_is_watched_when_the_newer_is_not(cluster):
    """A cluster on a GIE release before v0.3 serves the legacy InferencePool only as v1alpha1."""
    api, make_state = cluster
    legacy = api.serve(WatchedKind("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "inferencepools"))
    api.add(legacy, {"metadata": {"name": "pool", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    (watched,) = [k for k in WEBHOOK_KINDS if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    found = state.get("inference.networking.x-k8s.io/v1alpha2", "InferencePool", "pool", "ml-team")
    assert found is not None and found["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
    await eventually(lambda: legacy.watchers)
    api.add(legacy, {"metadata": {"name": "pool-2", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    await eventually(lambda: state.get("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "pool-2", "ml-team"))


async def test_a_kind_served_in_no_version_is_empty_and_ready(cluster):
    api, make_state = cluster
    (watched,) = [k for k in WEBHOOK_KINDS if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    assert state.list(watched.api_version, "InferencePool") == []


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
    from tests.policy_support import request
    from webhook.policy import PolicyInput, PolicySet
    from webhook.admission.chain import request_view

    (tmp_path / "policy.yaml").write_text(SELECTOR_POLICY)
    (policy,) = PolicySet.load(tmp_path, builtin=False).policies
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
        PolicySet.load(tmp_path, builtin=False)


async def test_a_group_upgraded_in_place_moves_to_the_newer_version(cluster):
    """The cluster's CRD drops v1alpha1 for v1alpha2 while watched: the cache follows the newer
    version without a restart."""
    api, make_state = cluster
    old_kind = WatchedKind("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "inferencepools")
    legacy = api.serve(old_kind)
    api.add(legacy, {"metadata": {"name": "pool", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    (watched,) = [k for k in WEBHOOK_KINDS if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    await eventually(lambda: legacy.watchers)
    current = api.serve(watched)
    api.add(current, {"metadata": {"name": "pool-v2", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    del api.resources[old_kind.path]
    api.end_streams(legacy)

    def moved():
        found = state.list(watched.api_version, "InferencePool")
        return [(o["apiVersion"], o["metadata"]["name"]) for o in found] == [(watched.api_version, "pool-v2")]

    await eventually(moved)
