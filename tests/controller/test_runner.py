"""The runner against the Kubernetes API's wire format: a fake API server over real HTTP and
the official client. Status patch, 409 retry, no write when unchanged, Events, Lease
acquire/renew/lose, two runners with one leader, graceful shutdown."""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime, timezone

import pytest
from kubernetes.client import ApiClient, Configuration

from webhook import kinds
from webhook.controller.events import EventRecorder
from webhook.controller.kubeapi import KubeApi
from webhook.controller.leader import LEASE, LeaderElector, LeaseConfig
from webhook.controller.runner import Controller, RunnerConfig
from webhook.state.memory import MemoryState

from tests.support.apiserver import FakeApiServer
from tests.controller.helpers import cluster_objects, order, settled
from tests.support.cel import EVALUATOR

IS = kinds.INFERENCE_SERVICE
FAST = RunnerConfig(workers=2, settle=0.02, base_retry_delay=0.01)
FAST_LEASE = LeaseConfig(name="infergate-controller", namespace="infergate-system",
                         lease_duration=0.6, renew_deadline=0.4, retry_period=0.05)


def plural_of(obj):
    return kinds.BY_KEY[(obj["apiVersion"], obj["kind"])].plural


class Cluster:
    """The fake API server, a mirror of it as the controller's cluster view, and clients."""

    def __init__(self, fake: FakeApiServer, url: str):
        self.fake, self.url = fake, url
        self.view = MemoryState()
        self.mirroring = True
        fake.on_change = self._mirror

    def _mirror(self, kind_of_event, obj):
        if not self.mirroring or (obj["apiVersion"], obj["kind"]) not in kinds.BY_KEY:
            return
        if kind_of_event == "DELETED":
            meta = obj["metadata"]
            self.view.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        else:
            self.view.put(obj)

    def api(self) -> KubeApi:
        configuration = Configuration()
        configuration.host = self.url
        return KubeApi(ApiClient(configuration), timeout=5)

    def put(self, obj):
        return self.fake.put(copy.deepcopy(obj), plural_of(obj))

    def status(self, name="hf-embedding", namespace="hardfest-demo"):
        return (self.fake.get(IS.api_version, IS.plural, name, namespace) or {}).get("status")


@pytest.fixture
async def cluster(aiohttp_server):
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app())
    cluster = Cluster(fake, str(server.make_url("")).rstrip("/"))
    for obj in cluster_objects():
        cluster.put(obj)
    cluster.put(order())
    return cluster


class Running:
    """A controller running in the background of a test."""

    def __init__(self, controller):
        self.controller, self.stop = controller, asyncio.Event()
        self.task = asyncio.create_task(controller.run(self.stop))

    async def shutdown(self):
        self.stop.set()
        await asyncio.wait_for(self.task, 5)


def controller(cluster, **kwargs):
    api = cluster.api()
    kwargs.setdefault("recorder", EventRecorder(api, "test"))
    return Controller(cluster.view, api, config=FAST, **kwargs, evaluator=EVALUATOR)


def conditions(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


async def test_status_written_through_the_subresource_once(cluster):
    running = Running(controller(cluster))
    await settled(running.controller)
    status = cluster.status()
    assert status["resolved"]["deviceClass"] == "nvidia-a30-mig-2g12-mps"
    assert conditions(status)["Planned"] == ("True", "Planned")
    writes = cluster.fake.writes()
    assert sorted(writes) == [
        "/apis/ai.deckhouse.io/v1alpha1/inferenceserviceclasses/a30-shared/status",
        "/apis/ai.deckhouse.io/v1alpha1/namespaces/hardfest-demo/inferenceservices/hf-embedding/status",
    ]
    stored = cluster.fake.get(IS.api_version, IS.plural, "hf-embedding", "hardfest-demo")
    assert stored["spec"] == order()["spec"] and stored["metadata"]["generation"] == 1  # status only

    # steady state: a full resync reconciles everything again and writes nothing
    reconciles = running.controller.reconciles
    running.controller.enqueue_all()
    await settled(running.controller)
    assert running.controller.reconciles > reconciles
    assert cluster.fake.writes() == writes

    # a workload becomes ready: exactly one more write, the order is Ready
    cluster.put({"apiVersion": "apps/v1", "kind": "StatefulSet",
                 "metadata": {"name": "hf-embedding", "namespace": "hardfest-demo",
                              "labels": {kinds.INFERENCE_SERVICE_LABEL: "hf-embedding"}},
                 "spec": {"replicas": 1}, "status": {"readyReplicas": 1}})
    await settled(running.controller)
    assert len(cluster.fake.writes()) == 3
    assert cluster.status()["phase"] == "Ready"
    await running.shutdown()


async def test_events_for_notable_transitions(cluster):
    running = Running(controller(cluster))
    await settled(running.controller)
    events = [o for (v, p, ns, n), o in cluster.fake.objects.items() if p == "events"]
    by_object = {(e["involvedObject"]["kind"], e["reason"], e["type"]) for e in events}
    # the order's Ready starts Unknown (no workload): one Normal event; Planned=True is no news
    assert ("InferenceService", "WorkloadNotFound", "Normal") in by_object
    assert not any(e["reason"] == "Planned" for e in events)
    cluster.put({**order("hf-embedding-h100"), "status": cluster.status()})
    await settled(running.controller)
    events = [o for (v, p, ns, n), o in cluster.fake.objects.items() if p == "events"]
    warning = [e for e in events if e["reason"] == "ClaimDeviceMissing" and e["message"].startswith("Planned=False")]
    assert len(warning) == 1 and warning[0]["type"] == "Warning"
    assert warning[0]["involvedObject"]["name"] == "hf-embedding"
    assert warning[0]["metadata"]["namespace"] == "hardfest-demo"
    await running.shutdown()


async def test_conflict_rereads_and_retries(cluster):
    running = Running(controller(cluster))
    await settled(running.controller)
    # another client changes the order's labels; the controller's view misses it (stale cache)
    cluster.mirroring = False
    fresh = cluster.fake.get(IS.api_version, IS.plural, "hf-embedding", "hardfest-demo")
    fresh["metadata"]["labels"] = {"team": "search"}
    cluster.put(fresh)
    cluster.mirroring = True
    # then a change that alters the status arrives in the view with the stale object
    stale_view = cluster.view.get(IS.api_version, IS.kind, "hf-embedding", "hardfest-demo")
    cluster.put({"apiVersion": "apps/v1", "kind": "StatefulSet",
                 "metadata": {"name": "w", "namespace": "hardfest-demo",
                              "labels": {kinds.INFERENCE_SERVICE_LABEL: "hf-embedding"}},
                 "status": {"readyReplicas": 1}})
    current = cluster.fake.get(IS.api_version, IS.plural, "hf-embedding", "hardfest-demo")
    assert stale_view["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]
    await settled(running.controller)
    assert running.controller.conflicts == 1
    stored = cluster.fake.get(IS.api_version, IS.plural, "hf-embedding", "hardfest-demo")
    assert stored["status"]["phase"] == "Ready"
    assert stored["metadata"]["labels"] == {"team": "search"}  # the other client's change survived
    await running.shutdown()


async def test_failures_back_off_exponentially_and_recover(cluster):
    api = cluster.api()
    flaky = Controller(cluster.view, api, config=FAST, evaluator=EVALUATOR)
    original, failures = api.apply_status, []

    def failing(kind, obj, status):
        if obj["metadata"]["name"] == "hf-embedding" and len(failures) < 3:
            failures.append(obj["metadata"]["name"])
            raise ConnectionError("apiserver unavailable")
        return original(kind, obj, status)

    api.apply_status = failing
    delays = []
    add_rate_limited = flaky.queue.add_rate_limited
    flaky.queue.add_rate_limited = lambda key: delays.append(add_rate_limited(key)) or delays[-1]
    running = Running(flaky)
    await settled(flaky)
    assert delays == [0.01, 0.02, 0.04]  # base × 2^n for the same key
    assert cluster.status()["phase"] == "Pending"  # written on the fourth try
    assert flaky.queue.failures((IS, "hardfest-demo", "hf-embedding")) == 0  # forgotten after success
    await running.shutdown()


# -- leader election -------------------------------------------------------------------------------

def lease(cluster):
    return cluster.fake.get(LEASE.api_version, LEASE.plural, FAST_LEASE.name, FAST_LEASE.namespace)


async def test_lease_acquire_renew_release(cluster):
    a = LeaderElector(cluster.api(), "replica-a", FAST_LEASE)
    assert await asyncio.to_thread(a.try_acquire_or_renew) is True  # created
    first = lease(cluster)["spec"]
    assert first["holderIdentity"] == "replica-a" and first["leaseTransitions"] == 0
    assert first["leaseDurationSeconds"] == 1
    await asyncio.sleep(0.01)
    assert await asyncio.to_thread(a.try_acquire_or_renew) is True  # renewed
    second = lease(cluster)["spec"]
    assert second["renewTime"] > first["renewTime"] and second["acquireTime"] == first["acquireTime"]

    b = LeaderElector(cluster.api(), "replica-b", FAST_LEASE)
    assert await asyncio.to_thread(b.try_acquire_or_renew) is False  # held by a
    await asyncio.to_thread(a.release)
    assert lease(cluster)["spec"]["holderIdentity"] == ""
    assert await asyncio.to_thread(b.try_acquire_or_renew) is True  # free: taken at once
    assert lease(cluster)["spec"]["holderIdentity"] == "replica-b"
    assert lease(cluster)["spec"]["leaseTransitions"] == 1


async def test_expired_lease_is_taken_over_and_the_old_leader_steps_down(cluster):
    now = [0.0]
    a = LeaderElector(cluster.api(), "replica-a", FAST_LEASE, clock=lambda: now[0])
    b = LeaderElector(cluster.api(), "replica-b", FAST_LEASE, clock=lambda: now[0])
    assert await asyncio.to_thread(a.try_acquire_or_renew)
    assert not await asyncio.to_thread(b.try_acquire_or_renew)
    now[0] += 0.5  # a stopped renewing, but the lease has not expired for b yet
    assert not await asyncio.to_thread(b.try_acquire_or_renew)
    now[0] += 0.6  # b has watched the same record for longer than leaseDurationSeconds
    assert await asyncio.to_thread(b.try_acquire_or_renew)
    assert lease(cluster)["spec"]["holderIdentity"] == "replica-b"
    assert not await asyncio.to_thread(a.try_acquire_or_renew)  # a sees b: lost


async def test_racing_replicas_conflict_and_one_wins(cluster):
    a = LeaderElector(cluster.api(), "replica-a", FAST_LEASE)
    b = LeaderElector(cluster.api(), "replica-b", FAST_LEASE)
    assert await asyncio.to_thread(a.try_acquire_or_renew)
    await asyncio.to_thread(a.release)
    stale = lease(cluster)
    assert await asyncio.to_thread(b.try_acquire_or_renew)
    # a writes over the version it read before b won: 409, a stays a follower
    a.api.get = lambda *args: copy.deepcopy(stale)
    assert await asyncio.to_thread(a.try_acquire_or_renew) is False
    assert lease(cluster)["spec"]["holderIdentity"] == "replica-b"


async def test_two_runners_one_writer_and_failover(cluster):
    replicas = []
    for identity in ("replica-a", "replica-b"):
        api = cluster.api()
        elector = LeaderElector(api, identity, FAST_LEASE)
        replicas.append(Running(Controller(cluster.view, api, config=FAST, elector=elector,
                                           recorder=EventRecorder(api, identity), evaluator=EVALUATOR)))
    for _ in range(100):
        if any(r.controller.leading for r in replicas):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # several renew rounds
    leaders = [r for r in replicas if r.controller.leading]
    assert len(leaders) == 1
    leader, follower = leaders[0], next(r for r in replicas if r is not leaders[0])
    await settled(leader.controller)
    await settled(follower.controller)
    assert leader.controller.api.writes == 2 and follower.controller.api.writes == 0
    assert len(cluster.fake.writes()) == 2
    assert lease(cluster)["spec"]["holderIdentity"] == leader.controller.elector.identity

    # graceful shutdown releases the Lease; the follower takes over and owns the next change
    await leader.shutdown()
    assert lease(cluster)["spec"]["holderIdentity"] in ("", follower.controller.elector.identity)
    for _ in range(100):
        if follower.controller.leading:
            break
        await asyncio.sleep(0.02)
    assert follower.controller.leading
    cluster.put(order("hf-embedding-gguf"))
    await settled(follower.controller)
    assert cluster.status()["phase"] == "Failed"
    assert follower.controller.api.writes == 1 and len(cluster.fake.writes()) == 3
    await follower.shutdown()
    assert lease(cluster)["spec"]["holderIdentity"] == ""


async def test_a_claim_left_unallocated_is_replanned_when_its_timeout_passes(cluster):
    from datetime import timedelta

    from webhook.controller.context import Settings

    widened = order()
    widened["spec"]["resources"]["accelerator"]["deviceClasses"] = ["nvidia-a30-mig-2g12-mps", "nvidia-a30-mig-2g12"]
    cluster.put(widened)
    # the fake server stamps every object created at 2026-01-01T00:00:00Z
    cluster.put({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "hf-embedding-gpu", "namespace": "hardfest-demo",
                              "labels": {kinds.INFERENCE_SERVICE_LABEL: "hf-embedding"}},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "nvidia-a30-mig-2g12-mps"}}]}}})
    now = [datetime(2026, 1, 1, 0, 4, 59, tzinfo=timezone.utc)]  # the claim is 299 s old
    running = Running(controller(cluster, settings=Settings(replan_timeout=timedelta(seconds=300)), clock=lambda: now[0]))
    await settled(running.controller, scheduled=False)
    assert cluster.status()["resolved"]["deviceClass"] == "nvidia-a30-mig-2g12-mps"  # not stuck yet
    assert cluster.status()["resolved"]["replanCount"] == 0
    writes = len(cluster.fake.writes())
    now[0] += timedelta(seconds=2)  # time passes; nothing in the cluster changes
    for _ in range(200):  # only the check the runner scheduled for the claim's timeout can replan
        if cluster.status()["resolved"]["replanCount"]:
            break
        await asyncio.sleep(0.05)
    assert cluster.status()["resolved"] == {
        "deviceClass": "nvidia-a30-mig-2g12", "placementMode": "Partition", "sharingMode": "Dedicated",
        "sharePercent": 100, "acceleratorMemoryGiB": 11, "acceleratorProductName": "a30-pcie",
        "replanCount": 1, "excludedDeviceClasses": ["nvidia-a30-mig-2g12-mps"]}
    assert len(cluster.fake.writes()) == writes + 1
    await running.shutdown()


async def test_only_served_kinds_are_watched(cluster):
    from webhook.controller.runner import served_kinds

    optional = {kinds.CLUSTER_ISSUER, kinds.MODULE_CONFIG, kinds.CATALOG_MODEL, kinds.CATALOG_CLUSTER_MODEL}
    for kind in kinds.WATCHED:
        if kind not in optional:
            cluster.fake.served.setdefault(kind.api_version, {})[kind.plural] = (kind.kind, kind.namespaced)
    cluster.fake.served["v1"]["pods/status"] = ("Pod", True)  # subresources are not kinds
    watched = await asyncio.to_thread(served_kinds, cluster.api())
    assert set(watched) == set(kinds.WATCHED) - optional
