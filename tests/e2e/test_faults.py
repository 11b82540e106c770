"""Faults on a real cluster, nothing lost: the apiserver restarted under the running webhook
and controller, a watch answered 410 Gone, the leading controller killed.

Restarting the apiserver needs a command only the cluster's operator knows (a bare apiserver:
restart its process; kind or k3d: usually not possible from a test), given as
``INFERGATE_E2E_RESTART_APISERVER``; without it that one scenario is skipped, with the reason.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest
from kubernetes import config as kube_config

from tests.support.cel import EVALUATOR
from webhook import certs, shipped_data
from webhook.inputs.watches import read_lookups
from webhook.policy import PolicySet
from webhook.state.kube import KubeState

from . import offline, processes, scenarios
from .api import wait_for
from .conftest import lease_holder

pytestmark = pytest.mark.e2e

RESTART_HOOK = "INFERGATE_E2E_RESTART_APISERVER"
POOL, INFERENCE_MODEL = "valid/inferencepool.yaml", "valid/inferencemodel.yaml"


def pool(name: str) -> dict:
    return scenarios.variant(POOL, name, lambda o: o["spec"].update(selector={"app": name}))


def model_on(pool_name: str) -> dict:
    def change(obj):
        obj["spec"]["poolRef"]["name"] = pool_name
        obj["spec"]["modelName"] = f"{pool_name}-model"
    return scenarios.variant(INFERENCE_MODEL, f"{pool_name}-model", change)


def webhook_sees_pool(run, pool_name: str) -> bool:
    """The webhook warns about an InferenceModel whose pool it cannot find in its cache."""
    reply = run.submit(model_on(pool_name), dry_run=True)
    return reply.ok and not any(pool_name in warning for warning in reply.warnings)


def settled_like_offline(run, obj: dict, timeout: float = 90) -> dict:
    """``obj`` once the controller wrote the status ``infergate reconcile`` computes for it."""
    def probe():
        stored = run.get(obj)
        if not stored or not stored.get("status"):
            return None
        (expected,) = offline.reconcile([stored], state=run.state_dir)
        same = offline.comparable_status(stored["status"]) == offline.comparable_status(expected.get("status"))
        return stored if same else None
    return wait_for(f"the controller's status of {obj['kind']} {obj['metadata']['name']}", probe, timeout=timeout)


class ReadyzLog:
    """/readyz of the run's webhook polled in the background: (status, body) answers."""

    def __init__(self, run):
        self.url = f"{run.webhook_url}/readyz"
        self.ca = run.cert_dir / certs.CA_FILE
        self.answers: list[tuple[int, str]] = []
        self.unanswered = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._done.is_set():
            try:
                self.answers.append(processes.get(self.url, self.ca, timeout=2))
            except OSError:
                self.unanswered += 1
            self._done.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(10)


def test_apiserver_restart_under_the_webhook_and_controller(cluster_run):
    command = os.environ.get(RESTART_HOOK)
    if not command:
        pytest.skip(f"{RESTART_HOOK} not set: give the command that restarts this cluster's apiserver "
                    "(see docs/e2e.md)")
    if cluster_run.mode != "local":
        pytest.skip("needs infergate serve running here (INFERGATE_E2E_MODE=local)")
    before = cluster_run.submit(pool("e2e-before-restart")).expect_ok()  # its status is written as the apiserver goes
    with ReadyzLog(cluster_run) as readyz:
        restarted = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300)
        assert restarted.returncode == 0, restarted.stderr
        wait_for("the apiserver serving again", lambda: cluster_run.kube.request("GET", "/readyz").ok, timeout=120)
        # watches came back: an object created after the restart reaches the webhook's cache
        after = cluster_run.submit(pool("e2e-after-restart")).expect_ok()
        wait_for("the webhook's cache to see a pool created after the restart",
                 lambda: webhook_sees_pool(cluster_run, "e2e-after-restart"), timeout=90)
        wait_for("every watch answered again", lambda: readyz.answers and "degraded" not in readyz.answers[-1][1],
                 timeout=30)
    # /readyz answered and passed all along (a restart must not take the webhook out of its
    # Service), and said so while its watches were cut off
    assert readyz.unanswered == 0
    failed = [body for status, body in readyz.answers if status != 200]
    assert not failed, failed[:3]
    assert any("[+]cluster-watch ok (degraded: watch interrupted" in body for _, body in readyz.answers)
    # no status write lost: both pools carry what the controller computes for them
    for obj in (before, after):
        settled_like_offline(cluster_run, obj)
    assert cluster_run.webhook_process.alive(), cluster_run.webhook_process.tail()
    assert all(p.alive() for p in cluster_run.processes if p.name == "controller")


def test_watch_answered_410_gone_relists(cluster_run):
    """The webhook's watch cache (the code ``serve --kube-state`` runs) against the real
    apiserver, its first watch sent from a resourceVersion long compacted away: the apiserver
    answers 410 Gone, the cache relists, and sees what changed meanwhile."""
    expired: set[str] = set()

    class FromAnOldResourceVersion(KubeState):
        def watch(self, kind, resource_version, *rest):
            if str(kind) not in expired:  # once per kind: a version older than the apiserver keeps
                expired.add(str(kind))
                resource_version = "1"
            return super().watch(kind, resource_version, *rest)

    client = kube_config.new_client_from_config(config_file=cluster_run.identities.get("webhook")
                                                or cluster_run.kubeconfig)
    # paged lists, then a watch from their version: a streamed first sync (sendInitialEvents)
    # watches on to its stream's end before any watch from a version is sent
    # what the webhook watches with the shipped policies: its RBAC grants exactly that
    shipped = PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)
    cache = FromAnOldResourceVersion(client, read_lookups(shipped), stream=False)
    cache.start()
    try:
        wait_for("the cache listed every kind", lambda: cache.ready, timeout=60)
        wait_for("a relist after 410 Gone", lambda: cache.relists_on_gone >= 1, timeout=60)
        created = cluster_run.submit(pool("e2e-after-gone")).expect_ok()
        wait_for("the relisted cache following the watch", lambda: cache.get(
            created["apiVersion"], "InferencePool", "e2e-after-gone", created["metadata"]["namespace"]), timeout=30)
        assert cache.interrupted is None
    finally:
        cache.stop()


def test_killed_leader_is_replaced_within_the_lease_duration(cluster_run):
    """SIGKILL, not SIGTERM: the Lease is not released, the standby must wait it out."""
    lease = f"infergate-e2e-kill-{cluster_run.run_id}"[:63]
    a, b = (processes.start_controller(name, cluster_run.kubeconfig, cluster_run.log_dir,
                                       lease_namespace=cluster_run.system_namespace, lease_name=lease)
            for name in ("kill-a", "kill-b"))
    try:
        holder = wait_for("one of two controllers holding the Lease", lambda: lease_holder(cluster_run, lease),
                          timeout=60)
        duration = cluster_run.kube.get("coordination.k8s.io/v1", "Lease", lease,
                                        cluster_run.system_namespace)["spec"]["leaseDurationSeconds"]
        leader, standby = (a, b) if holder == a.name else (b, a)
        leader.popen.kill()
        killed = time.monotonic()
        wait_for("the standby taking the Lease over", lambda: lease_holder(cluster_run, lease) == standby.name,
                 timeout=duration * 3, interval=0.2)
        took = time.monotonic() - killed
        # as client-go's leader election: the standby counts the duration from when it saw the
        # last renewal (it looks every retry period, 2 s: up to one late), and takes over at its
        # next look after that (one more)
        retry_period = 2
        assert took <= duration + 2 * retry_period + 1, f"took {took:.1f}s for a {duration}s Lease"
        assert standby.alive(), standby.tail()
    finally:
        for process in (a, b):
            process.stop()
        cluster_run.kube.delete("coordination.k8s.io/v1", "Lease", lease, cluster_run.system_namespace)
