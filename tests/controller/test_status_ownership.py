"""Whose status the controller writes, through the fake API server over real HTTP with the
official client: server-side apply under its own field manager on every write, another
writer's conditions kept, KubeAI's Model left to KubeAI unless asked, and an apply of a field
another manager owns never forced."""

from __future__ import annotations

import asyncio
import copy

import aiohttp
import pytest
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer
from tests.support import managed_fields
from webhook import kinds
from webhook.controller.events import EventRecorder
from webhook.controller.kubeapi import KubeApi
from webhook.controller.leader import LeaderElector, LeaseConfig
from webhook.controller.ownership import FIELD_MANAGER, StatusWritesError, status_writes
from webhook.controller.runner import Controller, RunnerConfig
from webhook.state.memory import MemoryState
from tests.support.cel import EVALUATOR
from tests.controller.helpers import settled

FAST = RunnerConfig(workers=2, settle=0.02, base_retry_delay=0.01)
IM, POOL, MODEL = kinds.INFERENCE_MODEL, kinds.INFERENCE_POOL, kinds.KUBEAI_MODEL
NS = "ml-team"


def pod(name, labels):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "server", "image": "vllm", "ports": [{"containerPort": 8000}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


OBJECTS = [
    {"apiVersion": POOL.api_version, "kind": "InferencePool", "metadata": {"name": "pool", "namespace": NS},
     "spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8000}},
    {"apiVersion": IM.api_version, "kind": "InferenceModel", "metadata": {"name": "chat", "namespace": NS},
     "spec": {"modelName": "llama", "poolRef": {"name": "pool"}}},
    {"apiVersion": MODEL.api_version, "kind": "Model", "metadata": {"name": "llama", "namespace": NS},
     "spec": {"features": ["TextGeneration"], "url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM"}},
    pod("vllm-0", {"app": "vllm", "model": "llama"}),
]


class Cluster:
    def __init__(self, fake: FakeApiServer, url: str):
        self.fake, self.url, self.view = fake, url, MemoryState()
        fake.on_change = lambda event, obj: (self.view.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"],
                                                               obj["metadata"].get("namespace"))
                                             if event == "DELETED" else self.view.put(obj))

    def api(self) -> KubeApi:
        return KubeApi(ApiClient(Configuration(host=self.url)), timeout=5)

    def get(self, kind, name):
        return self.fake.get(kind.api_version, kind.plural, name, NS)

    async def write_status(self, kind, name, status, manager, *, apply=False):
        """Another controller's status write, over HTTP as it would send it."""
        obj = self.get(kind, name)
        path = f"{self.url}/apis/{kind.api_version}/namespaces/{NS}/{kind.plural}/{name}/status"
        async with aiohttp.ClientSession() as session:
            if apply:
                body = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name}, "status": status}
                response = await session.patch(path, params={"fieldManager": manager}, json=body,
                                               headers={"Content-Type": "application/apply-patch+yaml"})
            else:
                response = await session.put(path, params={"fieldManager": manager}, json={**obj, "status": status})
            assert response.status == 200, await response.text()


@pytest.fixture
async def cluster(aiohttp_server):
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app())
    cluster = Cluster(fake, str(server.make_url("")).rstrip("/"))
    for obj in OBJECTS:
        fake.put(copy.deepcopy(obj), kinds.BY_KEY[(obj["apiVersion"], obj["kind"])].plural)
    return cluster


async def run(cluster, **kwargs):
    api = cluster.api()
    lease = LeaseConfig(name="infergate-controller", namespace="infergate-system",
                        lease_duration=0.6, renew_deadline=0.4, retry_period=0.05)
    controller = Controller(cluster.view, api, config=FAST, recorder=EventRecorder(api, "test"),
                            elector=LeaderElector(api, "test", lease), **kwargs, evaluator=EVALUATOR)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    for _ in range(200):
        if controller.leading:
            break
        await asyncio.sleep(0.02)
    await settled(controller)
    return controller, stop, task


def conditions(obj):
    return {c["type"]: c["status"] for c in obj["status"]["conditions"]}


def owners(obj):
    """manager -> the status fields it owns, as dotted paths."""
    return {e["manager"]: sorted(".".join(f"[{p[1]}]" if isinstance(p, tuple) else p for p in path)
                                 for path in managed_fields.paths_of(e["fieldsV1"]))
            for e in obj["metadata"]["managedFields"] if e.get("subresource") == "status"}


async def test_every_write_names_the_controllers_field_manager(cluster):
    controller, stop, task = await run(cluster)
    writes = cluster.fake.managers
    assert any(path.endswith("/status") for _, path, _ in writes)
    assert any("/leases" in path for _, path, _ in writes)
    assert {manager for _, _, manager in writes} == {FIELD_MANAGER}  # never OpenAPI-Generator
    assert {method for method, path, _ in writes if path.endswith("/status")} == {"PATCH"}  # server-side apply
    stop.set()
    await task


async def test_another_writers_conditions_survive_and_ours_stay_ours(cluster):
    await cluster.write_status(IM, "chat", {"conditions": [
        {"type": "Ready", "status": "True", "reason": "EndpointsSynced", "message": "by the endpoint picker",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, "epp")
    controller, stop, task = await run(cluster)
    stored = cluster.get(IM, "chat")
    assert conditions(stored) == {"Ready": "True", "Accepted": "True"}
    mine, theirs = owners(stored)[FIELD_MANAGER], owners(stored)["epp"]
    assert mine and all(path.startswith("status.conditions.[Accepted].") for path in mine)
    assert theirs and all(path.startswith("status.conditions.[Ready].") for path in theirs)

    # the other writer changes its condition; then a change makes ours change: both kept
    await cluster.write_status(IM, "chat", {"conditions": [
        *[c for c in stored["status"]["conditions"] if c["type"] == "Accepted"],
        {"type": "Ready", "status": "False", "reason": "NoEndpoints", "message": "pods gone",
         "lastTransitionTime": "2026-01-02T00:00:00Z"}]}, "epp")
    cluster.fake.put(copy.deepcopy({**OBJECTS[1], "metadata": {"name": "chat-older", "namespace": NS,
                                                                "creationTimestamp": "2025-01-01T00:00:00Z"}}),
                     IM.plural)
    await settled(controller)
    stored = cluster.get(IM, "chat")
    assert conditions(stored) == {"Ready": "False", "Accepted": "False"}  # ModelNameInUse: the older one wins
    assert [c["reason"] for c in stored["status"]["conditions"] if c["type"] == "Ready"] == ["NoEndpoints"]
    stop.set()
    await task


async def test_kubeai_model_status_is_left_to_kubeai_by_default(cluster):
    controller, stop, task = await run(cluster)
    assert cluster.get(IM, "chat")["status"]  # the controller runs and writes its own kinds
    assert not [path for path in cluster.fake.writes() if "/models/" in path]
    assert "status" not in cluster.get(MODEL, "llama")
    stop.set()
    await task


async def test_kubeai_model_status_when_asked_for(cluster):
    controller, stop, task = await run(cluster, writes_status=status_writes(["models.kubeai.org=on"]))
    stored = cluster.get(MODEL, "llama")
    assert stored["status"] == {"replicas": {"all": 1, "ready": 1}}
    assert owners(stored) == {FIELD_MANAGER: ["status.replicas.all", "status.replicas.ready"]}
    stop.set()
    await task


async def test_a_field_kubeais_controller_owns_is_never_taken(cluster):
    await cluster.write_status(MODEL, "llama", {"replicas": {"all": 3, "ready": 2}}, "kubeai", apply=True)
    controller, stop, task = await run(cluster, writes_status=status_writes(["models.kubeai.org=on"]))
    stored = cluster.get(MODEL, "llama")
    assert stored["status"] == {"replicas": {"all": 3, "ready": 2}}  # refused, not forced
    assert set(owners(stored)) == {"kubeai"}
    assert controller.queue.failures((MODEL, NS, "llama")) == 0  # left alone, not retried in a loop
    stop.set()
    await task


def test_status_writes_defaults_and_flags():
    assert MODEL not in status_writes() and {IM, POOL, kinds.INFERENCE_SERVICE} <= status_writes()
    assert MODEL in status_writes(["models.kubeai.org=on"])
    assert IM not in status_writes(["inferencemodels.inference.networking.x-k8s.io=off"])
    with pytest.raises(StatusWritesError, match="models.kubeai.org"):
        status_writes(["models=on"])
    with pytest.raises(StatusWritesError):
        status_writes(["models.kubeai.org=yes"])


async def test_its_own_fields_written_by_an_earlier_version_are_taken_back(cluster):
    """An earlier infergate wrote status with PUT under the client's default manager: the apply
    takes the fields that are its own by definition (forced on its own kinds) and nothing else."""
    await cluster.write_status(IM, "chat", {"conditions": [
        {"type": "Accepted", "status": "Unknown", "reason": "Pending", "message": "old",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": "True", "reason": "EndpointsSynced", "message": "by the endpoint picker",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, "OpenAPI-Generator")
    await cluster.write_status(IM, "chat", {"conditions": cluster.get(IM, "chat")["status"]["conditions"] + [
        {"type": "Synced", "status": "True", "reason": "Synced", "message": "by another",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, "epp")
    controller, stop, task = await run(cluster)
    stored = cluster.get(IM, "chat")
    assert conditions(stored) == {"Accepted": "True", "Ready": "True", "Synced": "True"}
    assert all(p.startswith("status.conditions.[Accepted].") for p in owners(stored)[FIELD_MANAGER])
    # what the old write set and the apply did not change stays shared: the entry's key
    assert set(owners(stored)["OpenAPI-Generator"]) - {"status.conditions.[Accepted].type"} == {
        "status.conditions.[Ready].reason", "status.conditions.[Ready].message", "status.conditions.[Ready].status",
        "status.conditions.[Ready].type", "status.conditions.[Ready].lastTransitionTime"}
    assert all(p.startswith("status.conditions.[Synced].") for p in owners(stored)["epp"])
    stop.set()
    await task
