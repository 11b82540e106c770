"""What the watch cache watches follows what is loaded, in the smallest form, synced by a stream.

* the watch list is a function of the loaded policies' reads: a policy set without a Pod lookup
  watches no Pod, and a reload that adds one starts its watch before its policies are in force
  (``load_admitter``'s wiring against a fake apiserver over real HTTP);
* a reload's kind that cannot sync (RBAC's 403, as recorded) leaves its lookups unknown, named
  by the ``cluster-lookups`` readiness check, while readiness holds;
* the first sync streams the kind (``sendInitialEvents``, as kube-apiserver v1.36 serves it,
  ``tests/state/data/watchlist``), and falls back to paged lists on a server that refuses it;
* Pods are kept as compact records, read back as the dicts ``trim_pod`` keeps: CEL reads them
  identically.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer, eventually
from tests.support.cel import EVALUATOR
from webhook.policy import PolicySet
from webhook.server import load_admitter
from webhook.server.settings import Settings
from webhook.inputs.watches import webhook_watches
from webhook.state import trim_pod
from webhook.state.base import ObjectStore
from webhook.state.kube import Backoff, KubeState, WatchedKind
from webhook.state.selectors import parse_selector

RECORDED = Path(__file__).parent / "data" / "watchlist"
PODS = WatchedKind("v1", "Pod", "pods")
NAMESPACES = WatchedKind("v1", "Namespace", "namespaces")

POD_LOOKUP = """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: pool-has-pods}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [inference.networking.k8s.io], kinds: [InferencePool]}]
  lookups:
    - name: pods
      list: {apiVersion: v1, kind: Pod, namespace: request.namespace, selector: "object.spec.?selector.orValue(null)"}
  warnings:
    - expression: size(lookups.pods) > 0
      message: no Pod matches
"""
SECRET_LOOKUP = """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: token-exists}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [inference.networking.k8s.io], kinds: [InferencePool]}]
  lookups:
    - name: token
      get: {apiVersion: v1, kind: Secret, name: "'token'", namespace: request.namespace}
  warnings:
    - expression: lookups.token != null
      message: no token
"""
NO_LOOKUP = """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: named}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [inference.networking.k8s.io], kinds: [InferencePool]}]
  validations:
    - expression: object.metadata.name != 'x'
"""


def kinds_of(watches) -> set[tuple[str, str]]:
    return {(w.api_version, w.kind) for w in watches if w.kind != "CustomResourceDefinition"}


def policy_set(tmp_path: Path, *documents: str) -> PolicySet:
    directory = tmp_path / "policies"
    directory.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(documents):
        (directory / f"p{i}.yaml").write_text(text)
    return PolicySet.load(directory, evaluator=EVALUATOR, builtin=False)


# -- the watch list -------------------------------------------------------------------------------

def test_a_policy_set_without_a_pod_lookup_watches_no_pod(tmp_path):
    without = kinds_of(webhook_watches(policy_set(tmp_path / "a", NO_LOOKUP)))
    with_pods = kinds_of(webhook_watches(policy_set(tmp_path / "b", NO_LOOKUP, POD_LOOKUP)))
    assert without == {("v1", "Namespace")}  # the review's namespaceObject: always read
    assert with_pods == {("v1", "Namespace"), ("v1", "Pod")}
    # the CRDs that are the schema are watched whatever the policies read
    crds = [w for w in webhook_watches(policy_set(tmp_path / "c", NO_LOOKUP)) if w.kind == "CustomResourceDefinition"]
    assert crds == [w for w in webhook_watches() if w.kind == "CustomResourceDefinition"] and crds


def test_the_shipped_policies_watch_pods_and_services_but_no_secret():
    from webhook import shipped_data

    shipped = PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)
    watched = kinds_of(webhook_watches(shipped))
    assert {("v1", "Pod"), ("v1", "Service"), ("v1", "Namespace")} <= watched
    assert ("v1", "Secret") not in watched  # no shipped policy looks a Secret up
    assert watched < kinds_of(webhook_watches())  # fewer than every kind a policy may look up


# -- a reload through the server's wiring ------------------------------------------------------------

@pytest.fixture
async def served(aiohttp_server, tmp_path):
    """(fake apiserver, the chain and its readiness checks as ``serve --kube-state`` loads them)."""
    api = FakeApiServer(builtins=True)
    server = await aiohttp_server(api.app())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": str(server.make_url("")).rstrip("/")}}],
        "users": [{"name": "fake", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "named.yaml").write_text(NO_LOOKUP)
    settings = Settings(kube_state=True, kubeconfig=kubeconfig, policies_dir=tmp_path / "policies")
    chain, checks = await asyncio.to_thread(load_admitter, settings, EVALUATOR)
    yield api, chain, checks, tmp_path / "policies"
    chain.policies.stop()
    await asyncio.to_thread(chain.state.stop, 2.0)


async def test_a_reload_that_adds_a_pod_lookup_starts_the_pod_watch_and_one_that_removes_it_stops_it(served):
    api, chain, checks, directory = served
    pods = api.collection("v1", "pods", "Pod")
    api.add(pods, {"metadata": {"name": "m-0", "namespace": "team-a", "labels": {"app": "m"}},
                   "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8000}]}]}})
    assert await chain.state.wait_ready(15)
    assert pods.watch_requests == [] and pods.lists == 0  # nothing reads Pods: not even listed
    assert chain.state.list("v1", "Pod") == []

    (directory / "pods.yaml").write_text(POD_LOOKUP)
    assert await asyncio.to_thread(chain.policies.poll)
    assert "pool-has-pods" in chain.policies.current().names
    await eventually(lambda: [p["metadata"]["name"] for p in chain.state.list("v1", "Pod")] == ["m-0"])
    assert pods.watch_requests[0]["sendInitialEvents"] == "true"
    await eventually(lambda: chain.state.knowledge.holds_whole("", "Pod"))
    assert all(check() is None for check in checks.values())

    (directory / "pods.yaml").unlink()
    assert await asyncio.to_thread(chain.policies.poll)
    await eventually(lambda: not pods.watchers)  # the watch stopped
    assert chain.state.list("v1", "Pod") == []  # and its objects forgotten


async def test_a_reload_whose_lookup_rbac_forbids_leaves_it_unknown_and_readiness_holds(served):
    api, chain, checks, directory = served
    secrets = api.collection("v1", "secrets", "Secret")
    secrets.forbidden = True
    assert await chain.state.wait_ready(15)
    (directory / "secret.yaml").write_text(SECRET_LOOKUP)
    assert await asyncio.to_thread(chain.policies.poll)
    await eventually(lambda: "HTTP 403" in (checks["cluster-lookups"]() or ""))
    assert checks["cluster-lookups"]() == "not synced, lookups unknown: Secret.core (HTTP 403 Forbidden)"
    assert not chain.state.knowledge.holds_whole("", "Secret")
    assert checks["cluster-state"]() is None  # ready: the last good picture keeps serving
    assert "token-exists" in chain.policies.current().names

    secrets.forbidden = False  # RBAC grants it: synced at the next try
    await eventually(lambda: checks["cluster-lookups"]() is None)
    assert chain.state.knowledge.holds_whole("", "Secret")


# -- the streamed first sync ----------------------------------------------------------------------

@pytest.fixture
async def fake(aiohttp_server):
    api = FakeApiServer()
    server = await aiohttp_server(api.app())
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


def recorded_pods() -> list[dict]:
    events = [orjson.loads(line) for line in (RECORDED / "pods-initial-events.jsonl").read_bytes().splitlines()]
    return [e["object"] for e in events if e["type"] == "ADDED"]


async def test_the_first_sync_streams_the_objects_then_watches_on_the_same_stream(fake):
    api, make_state = fake
    pods = api.serve(PODS)
    for pod in recorded_pods():
        api.add(pods, pod)
    state = make_state((PODS,))
    assert await state.wait_ready(15)
    assert (state.streams, state.lists, pods.lists) == (1, 0, 0)
    assert pods.watch_requests[0]["sendInitialEvents"] == "true"
    assert pods.watch_requests[0]["resourceVersionMatch"] == "NotOlderThan"
    assert [p["metadata"]["name"] for p in state.list("v1", "Pod")] == ["p1", "p2"]
    api.add(pods, {"metadata": {"name": "p3", "namespace": "h9-rec", "labels": {"app": "m"}}, "spec": {"containers": []}})
    await eventually(lambda: len(state.list("v1", "Pod")) == 3)
    assert len(pods.watch_requests) == 1  # the stream went on as the watch


async def test_a_server_that_refuses_streams_is_listed_in_pages(fake):
    api, make_state = fake
    api.watch_list = False  # the WatchList feature off: 422
    namespaces = api.serve(NAMESPACES, typed_list=True)
    for name in "abc":
        api.add(namespaces, {"metadata": {"name": name}})
    state = make_state((NAMESPACES,), page_size=2)
    assert await state.wait_ready(15)
    assert (state.streams, state.lists, namespaces.lists) == (0, 1, 2)
    assert [n["metadata"]["name"] for n in state.list("v1", "Namespace")] == ["a", "b", "c"]


# -- the compact Pods ---------------------------------------------------------------------------------

def model_server_pod(i: int, **overrides) -> dict:
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"vllm-{i}", "namespace": "ml", "uid": f"u-{i}", "resourceVersion": str(100 + i),
                     "generation": 1, "creationTimestamp": "2026-11-01T09:00:00Z",
                     "labels": {"app": "vllm", "pod-template-hash": "5d8f"},
                     "annotations": {"a": "b"}, "managedFields": [{"manager": "kubelet"}]},
        "spec": {"containers": [{"name": "vllm", "image": "x", "env": [{"name": "A", "value": "1"}],
                                 "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]}],
                 "initContainers": [{"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 9901}]},
                                    {"name": "setup", "image": "y"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
                   "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]},
    }
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        if value is None:
            pod[section].pop(field, None)
        else:
            pod[section][field] = value
    return pod


PODS_OF_EVERY_SHAPE = [
    model_server_pod(0), model_server_pod(1),  # alike: their parts are shared
    model_server_pod(2, metadata__labels={}), model_server_pod(3, metadata__labels=None),
    model_server_pod(4, metadata__deletionTimestamp="2026-11-02T00:00:00Z"),
    model_server_pod(5, status__conditions=[{"type": "Ready", "status": "False"}], status__phase="Pending"),
    {**model_server_pod(6), "status": {}}, {k: v for k, v in model_server_pod(7).items() if k != "status"},
    *recorded_pods(),
]


def test_the_compact_pods_read_back_as_the_trimmed_dicts():
    store = ObjectStore()
    store.replace("", "Pod", [json.loads(json.dumps(p)) for p in PODS_OF_EVERY_SHAPE])
    trimmed = {(p["metadata"]["namespace"], p["metadata"]["name"]): trim_pod(p) for p in PODS_OF_EVERY_SHAPE}
    assert {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in store.list("", "Pod", None)} == trimmed
    for (namespace, name), pod in trimmed.items():
        assert store.get("", "Pod", name, namespace) == pod
    selected = store.list("", "Pod", "ml", parse_selector("app=vllm"))
    assert [p["metadata"]["name"] for p in selected] == [f"vllm-{i}" for i in (0, 1, 4, 5, 6, 7)]
    store.put(model_server_pod(8))  # a watch event: kept compact the same way
    assert store.get("", "Pod", "vllm-8", "ml") == trim_pod(model_server_pod(8))


def test_cel_reads_the_compact_pods_as_it_reads_the_dicts():
    """The shipped pool policy's reads of its Pods (phase filter, ports of containers and
    sidecars, readiness), evaluated over the store's Pods and over the trimmed dicts."""
    from webhook import shipped_data

    served = [p for p in PODS_OF_EVERY_SHAPE if p.get("status")]  # the apiserver's Pods have a phase
    store = ObjectStore()
    store.replace("", "Pod", [json.loads(json.dumps(p)) for p in served])
    read = store.list("", "Pod", None)
    plain = sorted((trim_pod(p) for p in served),
                   key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
    policy = next(d for d in yaml.safe_load_all((shipped_data.policies_dir() / "inference-pool.yaml").read_text())
                  if d["metadata"]["name"] == "inferencepool-endpoints")
    expressions = [v["expression"] for v in policy["spec"]["variables"] if v["name"] in ("pods", "podPorts")]
    expressions.append("variables.pods.map(p, p.status.?conditions.orValue([]).exists(c, c.type == 'Ready' && "
                       "c.status == 'True'))")
    expressions.append("variables.pods.map(p, p.metadata.?labels.orValue({}))")
    answers = []
    for pods in (read, plain):
        variables: dict = {}
        out = []
        for source in expressions:
            program = EVALUATOR.compile(source, ["lookups", "variables"])
            value = program.evaluate({"lookups": {"pods": pods}, "variables": variables})
            out.append(value)
            if "pods" not in variables:
                variables["pods"] = value
        answers.append(out)
    assert answers[0] == answers[1]
    assert len(answers[0][0]) == len([p for p in plain if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")])
