"""KubeState against the Kubernetes API's wire format.

A small aiohttp server speaks what kube-apiserver speaks to an informer: paged list
JSON (typed lists omit each item's kind), chunked ``?watch=true`` streams of
ADDED/MODIFIED/DELETED/BOOKMARK events, ``ERROR`` events carrying a 410 ``Status``,
and plain HTTP errors. The client is a real ``kubernetes.client.ApiClient``.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer, eventually
from webhook.inputs.watches import lookup_watches
from webhook.state.kube import Backoff, KubeState, WatchedKind

NAMESPACES = WatchedKind("v1", "Namespace", "namespaces")
SECRETS = WatchedKind("v1", "Secret", "secrets")
CLASSES = WatchedKind("ai.deckhouse.io/v1alpha1", "InferenceServiceClass", "inferenceserviceclasses")
MISSING = WatchedKind("ai.deckhouse.io/v1alpha1", "ClusterModel", "clustermodels")



@pytest.fixture
async def cluster(aiohttp_server):
    api = FakeApiServer()
    server = await aiohttp_server(api.app())
    config = Configuration(host=str(server.make_url("")).rstrip("/"))
    client = ApiClient(config)
    states = []

    def make_state(kinds, backoff=Backoff(0.01, 0.05), stream=False, **kw):
        # paged lists unless a test asks for the streamed first sync (tests/state/test_state_watch_list.py)
        state = KubeState(client, kinds, backoff=backoff, stream=stream, **kw)
        states.append(state)
        state.start()
        return state

    yield api, make_state
    for state in states:
        await asyncio.to_thread(state.stop, 2.0)
    client.close()


def names(state, kind):
    return [o["metadata"]["name"] for o in state.list(kind.api_version, kind.kind)]


async def test_paged_list_then_watch_events(cluster):
    api, make_state = cluster
    ns = api.serve(NAMESPACES, typed_list=True)
    for name in ("a", "b", "c"):
        api.add(ns, {"metadata": {"name": name, "labels": {"team": name}}})
    state = make_state((NAMESPACES,), page_size=2)
    assert await state.wait_ready(15)
    assert names(state, NAMESPACES) == ["a", "b", "c"]
    assert state.get("v1", "Namespace", "a")["kind"] == "Namespace"  # filled in for typed lists
    assert ns.lists == 2  # two pages
    await eventually(lambda: ns.watchers)
    assert ns.watch_requests[0]["allowWatchBookmarks"] == "true"
    assert ns.watch_requests[0]["resourceVersion"] == str(api.resource_version)

    api.add(ns, {"metadata": {"name": "d"}})
    api.modify(ns, {"metadata": {"name": "a", "labels": {"team": "x"}}})
    api.delete(ns, {"metadata": {"name": "b"}})
    await eventually(lambda: names(state, NAMESPACES) == ["a", "c", "d"])
    assert state.list("v1", "Namespace", label_selector="team=x")[0]["metadata"]["name"] == "a"


async def test_bookmark_moves_the_resume_point(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    state = make_state((CLASSES,))
    assert await state.wait_ready(15)
    await eventually(lambda: classes.watchers)
    api.bookmark(classes)
    bookmark_rv = str(api.resource_version)
    await asyncio.sleep(0.1)
    api.end_streams(classes)  # the server's timeoutSeconds elapsed
    await eventually(lambda: len(classes.watch_requests) == 2)
    assert classes.watch_requests[1]["resourceVersion"] == bookmark_rv
    assert classes.lists == 1  # resumed, not relisted


async def test_410_error_event_relists(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    api.add(classes, {"metadata": {"name": "old"}, "spec": {"v": 1}})
    state = make_state((CLASSES,))
    assert await state.wait_ready(15)
    await eventually(lambda: classes.watchers)
    api.compact(classes, silently_change={"apiVersion": CLASSES.api_version, "kind": CLASSES.kind,
                                          "metadata": {"name": "old"}, "spec": {"v": 2}})
    await eventually(lambda: state.get(CLASSES.api_version, CLASSES.kind, "old")["spec"] == {"v": 2})
    assert classes.lists == 2 and state.relists_on_gone == 1


async def test_http_410_and_500_on_watch(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    classes.fail_next_watch = 410
    state = make_state((CLASSES,))
    assert await state.wait_ready(15)
    await eventually(lambda: classes.lists == 2)  # 410 on the watch request: relist
    await eventually(lambda: classes.watchers)
    classes.fail_next_watch = 500
    api.end_streams(classes)
    await eventually(lambda: len(classes.watch_requests) >= 4)  # the 500 is retried after backoff
    api.add(classes, {"metadata": {"name": "late"}})
    await eventually(lambda: names(state, CLASSES) == ["late"])
    assert classes.lists == 2


async def test_kind_not_served_is_empty_and_ready(cluster):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    state = make_state((NAMESPACES, MISSING))
    assert await state.wait_ready(15)
    assert state.list(MISSING.api_version, MISSING.kind) == []


async def test_not_ready_until_every_kind_listed(cluster):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    classes = api.serve(CLASSES)
    classes.fail_next_watch = None
    # make the class list fail until we say so
    original = api.list
    blocked = {"on": True}

    def list_or_fail(request, res):
        if res is classes and blocked["on"]:
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        return original(request, res)

    api.list = list_or_fail
    state = make_state((NAMESPACES, CLASSES))
    assert not await state.wait_ready(0.3)
    assert not state.ready
    blocked["on"] = False
    assert await state.wait_ready(15)


async def test_secrets_are_cached_without_data(cluster):
    """Watched in full (the controller needs key names: AuthSecretKeyMissing), values dropped."""
    api, make_state = cluster
    secrets = api.serve(SECRETS, typed_list=True)
    api.add(secrets, {"metadata": {"name": "hf", "namespace": "team-a"}, "type": "Opaque",
                      "data": {"token": "c2VjcmV0"}})
    state = make_state((SECRETS,))
    assert await state.wait_ready(15)
    await eventually(lambda: secrets.watchers)
    api.modify(secrets, {"metadata": {"name": "hf", "namespace": "team-a"}, "data": {"token": "bmV3", "x": "eQ=="}})
    await eventually(lambda: state.get("v1", "Secret", "hf", "team-a").get("dataKeys") == ["token", "x"])
    assert "data" not in state.get("v1", "Secret", "hf", "team-a")


async def test_the_webhook_watches_secrets_as_metadata_only(cluster):
    """No Secret value crosses the wire: list and watch ask for PartialObjectMetadata."""
    api, make_state = cluster
    (webhook_secrets,) = [k for k in lookup_watches() if k.kind == "Secret"]
    assert webhook_secrets.metadata_only
    secrets = api.serve(webhook_secrets, typed_list=True)
    api.add(secrets, {"metadata": {"name": "hf", "namespace": "team-a", "labels": {"app": "x"}}, "type": "Opaque",
                      "data": {"token": "c2VjcmV0LW9uZQ=="}, "stringData": {"plain": "secret-two"}})
    api.add(secrets, {"metadata": {"name": "gone", "namespace": "team-a"}, "data": {"k": "c2VjcmV0LXRocmVl"}})
    state = make_state((webhook_secrets,), page_size=1)
    assert await state.wait_ready(15)
    await eventually(lambda: secrets.watchers)
    api.modify(secrets, {"metadata": {"name": "hf", "namespace": "team-a", "labels": {"app": "y"}},
                         "data": {"token": "c2VjcmV0LWZvdXI="}})
    api.add(secrets, {"metadata": {"name": "new", "namespace": "team-b"}, "data": {"k": "c2VjcmV0LWZpdmU="}})
    api.delete(secrets, {"metadata": {"name": "gone", "namespace": "team-a"}})
    await eventually(lambda: [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in state.list("v1", "Secret")]
                     == [("team-a", "hf"), ("team-b", "new")])
    hf = state.get("v1", "Secret", "hf", "team-a")
    assert hf["apiVersion"] == "v1" and hf["kind"] == "Secret" and hf["metadata"]["labels"] == {"app": "y"}
    assert not {"data", "stringData", "dataKeys", "type"} & hf.keys()
    assert set(secrets.views) == {("list", "metadata"), ("watch", "metadata")}
    assert secrets.lists == 2  # page_size 1: two pages, each a PartialObjectMetadataList
    wire = bytes(secrets.sent)
    assert b"PartialObjectMetadata" in wire and b'"hf"' in wire
    for value in (b"c2VjcmV0", b"secret-"):  # base64 of "secret", and the plain stringData
        assert value not in wire


async def test_reads_of_unwatched_kinds_are_reported_once(cluster, caplog):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    state = make_state((NAMESPACES,))
    assert await state.wait_ready(15)
    with caplog.at_level("WARNING", logger="webhook.state.kube"):
        assert state.list("apps/v1", "Deployment") == []
        assert state.get("apps/v1", "Deployment", "x", "y") is None
        assert state.list("v1", "Namespace") == []
    assert [r.getMessage() for r in caplog.records] == [
        "cluster state: apps/v1/Deployment is not watched, so reads of it find nothing; add it to the watched kinds"]


async def test_a_failing_watch_is_reported_until_answered_again(cluster):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    classes = api.serve(CLASSES)
    state = make_state((NAMESPACES, CLASSES))
    assert await state.wait_ready(15)
    await eventually(lambda: classes.watchers)
    assert state.interrupted is None
    original = api.watch
    blocked = {"on": True}

    async def watch_or_fail(request, res):
        if res is classes and blocked["on"]:
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        return await original(request, res)

    api.watch = watch_or_fail
    api.end_streams(classes)
    await eventually(lambda: (state.interrupted or "").startswith(f"watch interrupted, reconnecting: {CLASSES} ("))
    assert state.ready  # still serving the last picture
    assert state.disconnected_seconds() >= 0 and state.unserved == ()
    blocked["on"] = False
    await eventually(lambda: state.interrupted is None)
    assert state.disconnected_seconds() == 0


CRDS_BY_NAME = WatchedKind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions",
                           field_selector="metadata.name=clustermodels.ai.deckhouse.io")


async def test_a_kind_not_served_is_not_interrupted_and_starts_when_its_crd_appears(cluster):
    """A 404 is an answer: the kind is empty, synced and not interrupted. When its CRD is
    created, the watched CRD's change wakes the kind's thread at once (not the slow look
    every ``Backoff.unserved`` seconds, here ten minutes); when the CRD goes, it is empty again."""
    api, make_state = cluster
    crds = api.serve(CRDS_BY_NAME)
    state = make_state((CRDS_BY_NAME, MISSING), backoff=Backoff(0.01, 0.05, unserved=600.0))
    assert await state.wait_ready(15)
    assert state.unserved == (str(MISSING),) and state.interrupted is None
    await eventually(lambda: crds.watchers)
    # the CRD is installed: the kind is served from now on, and the CRD's watch event says so
    models = api.serve(MISSING)
    api.add(models, {"metadata": {"name": "llama"}, "spec": {}})
    api.add(crds, {"metadata": {"name": "clustermodels.ai.deckhouse.io"}, "spec": {"group": "ai.deckhouse.io"}})
    await eventually(lambda: names(state, MISSING) == ["llama"], timeout=5)
    assert state.unserved == ()
    await eventually(lambda: models.watchers)
    # the CRD is deleted: the apiserver ends the kind's watches, and its lists answer 404
    del api.resources[(MISSING.api_version, MISSING.plural)]
    del api.served[MISSING.api_version][MISSING.plural]
    api.end_streams(models)
    await eventually(lambda: names(state, MISSING) == [] and state.unserved == (str(MISSING),), timeout=5)
    assert state.interrupted is None


# -- today's inference kinds: Pods trimmed as they arrive, a group's older served version --------------

def _pod(name, port):
    return {"metadata": {"name": name, "namespace": "ml-team", "labels": {"app": "x"},
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {"containers": [{"name": "vllm", "image": "vllm", "env": [{"name": "HF_TOKEN", "value": "t"}],
                                     "ports": [{"containerPort": port}]}], "volumes": [{"name": "v"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]}}


async def test_the_watch_cache_trims_pods_on_list_and_on_watch(cluster):
    """Listed page by page and watched, a Pod keeps its labels, ports, phase and readiness only
    (``webhook.state.base.trim_pod``)."""
    api, make_state = cluster
    pods = api.serve(WatchedKind("v1", "Pod", "pods"), typed_list=True)
    api.add(pods, _pod("a", 8000))
    state = make_state((WatchedKind("v1", "Pod", "pods"),))
    assert await state.wait_ready(15)
    await eventually(lambda: pods.watchers)
    api.add(pods, _pod("b", 8080))
    await eventually(lambda: state.get("v1", "Pod", "b", "ml-team") is not None)
    for name, port in (("a", 8000), ("b", 8080)):
        kept = state.get("v1", "Pod", name, "ml-team")
        assert kept["spec"] == {"containers": [{"name": "vllm", "ports": [{"containerPort": port}]}]}
        assert kept["status"] == {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        assert kept["metadata"]["labels"] == {"app": "x"} and "managedFields" not in kept["metadata"]


async def test_an_older_served_version_is_watched_when_the_newer_is_not(cluster):
    """A cluster on a GIE release before v0.3 serves the legacy InferencePool only as v1alpha1."""
    api, make_state = cluster
    legacy = api.serve(WatchedKind("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "inferencepools"))
    api.add(legacy, {"metadata": {"name": "pool", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    (watched,) = [k for k in lookup_watches() if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    found = state.get("inference.networking.x-k8s.io/v1alpha2", "InferencePool", "pool", "ml-team")
    assert found is not None and found["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
    await eventually(lambda: legacy.watchers)
    api.add(legacy, {"metadata": {"name": "pool-2", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    await eventually(lambda: state.get("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "pool-2", "ml-team"))


async def test_inference_models_of_a_cluster_serving_only_v1alpha2_are_watched(cluster):
    """GIE v0.2 to v0.5.1 serve InferenceModel as v1alpha2 only; before v0.2, as v1alpha1."""
    api, make_state = cluster
    served = api.serve(WatchedKind("inference.networking.x-k8s.io/v1alpha2", "InferenceModel", "inferencemodels"))
    api.add(served, {"metadata": {"name": "chat", "namespace": "ml-team"},
                     "spec": {"modelName": "llama", "poolRef": {"name": "pool"}}})
    (watched,) = [k for k in lookup_watches() if k.kind == "InferenceModel"]
    assert watched.api_versions == ("inference.networking.x-k8s.io/v1alpha2", "inference.networking.x-k8s.io/v1alpha1")
    state = make_state((watched,))
    assert await state.wait_ready(15)
    found = state.get("inference.networking.x-k8s.io/v1alpha1", "InferenceModel", "chat", "ml-team")
    assert found is not None and found["spec"]["modelName"] == "llama"


async def test_a_kind_served_in_no_version_is_empty_and_ready(cluster):
    api, make_state = cluster
    (watched,) = [k for k in lookup_watches() if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    assert state.list(watched.api_version, "InferencePool") == []


async def test_a_group_upgraded_in_place_moves_to_the_newer_version(cluster):
    """The cluster's CRD drops v1alpha1 for v1alpha2 while watched: the cache follows the newer
    version without a restart."""
    api, make_state = cluster
    old_kind = WatchedKind("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "inferencepools")
    legacy = api.serve(old_kind)
    api.add(legacy, {"metadata": {"name": "pool", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    (watched,) = [k for k in lookup_watches() if k.kind == "InferencePool" and k.api_version.startswith("inference.networking.x")]
    state = make_state((watched,))
    assert await state.wait_ready(15)
    await eventually(lambda: legacy.watchers)
    current = api.serve(watched)
    api.add(current, {"metadata": {"name": "pool-v2", "namespace": "ml-team"}, "spec": {"targetPortNumber": 8000}})
    del api.resources[(old_kind.api_version, old_kind.plural)]  # v1alpha1 no longer served
    del api.served[old_kind.api_version][old_kind.plural]
    api.end_streams(legacy)

    def moved():
        found = state.list(watched.api_version, "InferencePool")
        return [(o["apiVersion"], o["metadata"]["name"]) for o in found] == [(watched.api_version, "pool-v2")]

    await eventually(moved)
async def test_watches_of_one_kind_by_name_keep_each_others_objects(cluster):
    """Two watches of CRDs, each by a metadata.name field selector: one's list replaces only its
    own name's object (the webhook watches each served kind's CRD this way)."""
    api, make_state = cluster
    crd_kind = WatchedKind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions")
    crds = api.serve(crd_kind)
    for name in ("a.example.io", "b.example.io", "c.example.io"):
        api.add(crds, {"metadata": {"name": name}})
    by_name = tuple(WatchedKind(crd_kind.api_version, crd_kind.kind, crd_kind.plural,
                                field_selector=f"metadata.name={name}") for name in ("a.example.io", "b.example.io"))
    state = make_state(by_name)
    assert await state.wait_ready(15)
    assert names(state, crd_kind) == ["a.example.io", "b.example.io"]  # c is nobody's
    api.modify(crds, {"metadata": {"name": "b.example.io", "labels": {"changed": "yes"}}})
    api.delete(crds, {"metadata": {"name": "a.example.io"}})
    await eventually(lambda: names(state, crd_kind) == ["b.example.io"])
    assert state.get(crd_kind.api_version, crd_kind.kind, "b.example.io")["metadata"]["labels"] == {"changed": "yes"}
