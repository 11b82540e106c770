"""Two controller replicas never both lead, even when the leader's Lease traffic is cut
or merely slow (a partition answers late or never): it must stop leading before another
replica may take the Lease over (client-go bounds each renewal by the renew deadline for
this reason). Sampled every few milliseconds over the whole hand-over."""

from __future__ import annotations

import asyncio
import time

from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer
from tests.controller.helpers import cluster_objects, order
from webhook import kinds
from webhook.controller.kubeapi import ApiError, KubeApi
from webhook.controller.leader import LEASE, LeaderElector, LeaseConfig

LEASE_CONFIG = LeaseConfig(name="infergate-controller", namespace="infergate-system",
                           lease_duration=1.0, renew_deadline=0.4, retry_period=0.05)


async def start_cluster(aiohttp_server) -> str:
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app())
    for obj in cluster_objects() + [order()]:
        fake.put(obj, kinds.BY_KEY[(obj["apiVersion"], obj["kind"])].plural)
    return str(server.make_url("")).rstrip("/")


def api(url: str) -> KubeApi:
    configuration = Configuration()
    configuration.host = url
    return KubeApi(ApiClient(configuration), timeout=5)


def partition(elector: LeaderElector, *, delay: float, fail: tuple[str, ...]) -> None:
    """Every Lease call of ``elector`` now takes ``delay`` seconds; those named in ``fail``
    then fail, the others succeed late."""
    for name in ("get", "replace", "create"):
        original = getattr(elector.api, name)

        def slow(kind, *args, _original=original, _fails=name in fail, **kw):
            if kind is LEASE:
                time.sleep(delay)
                if _fails:
                    raise ApiError(0, "dial tcp: i/o timeout")
            return _original(kind, *args, **kw)

        setattr(elector.api, name, slow)


async def overlap_during_handover(url: str, *, delay: float, fail: tuple[str, ...]) -> tuple[float, str]:
    a, b = LeaderElector(api(url), "replica-a", LEASE_CONFIG), LeaderElector(api(url), "replica-b", LEASE_CONFIG)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(a.run(stop))]
    for _ in range(200):
        if a.leading:
            break
        await asyncio.sleep(0.01)
    assert a.leading
    tasks.append(asyncio.create_task(b.run(stop)))
    await asyncio.sleep(0.2)
    assert a.leading and not b.leading
    partition(a, delay=delay, fail=fail)
    both, started = 0.0, time.monotonic()
    while not b.leading or a.leading:
        if a.leading and b.leading:
            both += 0.005
        await asyncio.sleep(0.005)
        assert time.monotonic() - started < 10, "no hand-over"
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return both, f"a stepped down, b leads after {time.monotonic() - started:.2f}s"


async def test_a_leader_cut_off_steps_down_before_the_other_takes_over(aiohttp_server):
    url = await start_cluster(aiohttp_server)
    both, how = await overlap_during_handover(url, delay=0.0, fail=("get", "replace", "create"))
    assert both == 0.0, how


async def test_a_leader_whose_lease_calls_hang_steps_down_in_time(aiohttp_server):
    """Each Lease call answers after 0.6 s (well under the client's 5 s timeout): the read
    succeeds, the write fails; a renewal round takes 1.2 s, longer than the Lease (1 s):
    the leader must not keep leading through it."""
    url = await start_cluster(aiohttp_server)
    both, how = await overlap_during_handover(url, delay=0.6, fail=("replace",))
    assert both == 0.0, f"both replicas led for {both:.2f}s; {how}"
