"""Operating infergate on a real cluster: two controllers and one leader, certificates
rotated while objects are being created, and a stopped webhook under failurePolicy Fail and
Ignore."""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
import threading
import time

import pytest
import yaml

from webhook import certs

from . import cluster, processes, scenarios, webhooks
from .api import wait_for
from .conftest import lease_holder

pytestmark = pytest.mark.e2e

VALID = "valid/kubeai-model-ollama.yaml"
# the apiserver picks up changed webhook configurations from its informer: a moment, no signal;
# each stage of a rotation lasts this many creates through the webhook
CREATES_PER_STAGE = 3


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def local_only(run) -> None:
    if run.mode != "local":
        pytest.skip("needs infergate serve running here (INFERGATE_E2E_MODE=local)")


def test_two_controllers_one_leader(cluster_run):
    lease = f"infergate-e2e-ha-{cluster_run.run_id}"[:63]
    a, b = (processes.start_controller(name, cluster_run.kubeconfig, cluster_run.log_dir,
                                       lease_namespace=cluster_run.system_namespace, lease_name=lease)
            for name in ("ha-a", "ha-b"))
    try:
        holder = wait_for("one of two controllers holding the Lease",
                          lambda: lease_holder(cluster_run, lease), timeout=60)
        assert holder in ("ha-a", "ha-b")
        time.sleep(6)  # a negative over time: through three renewals the Lease stays with its holder
        assert lease_holder(cluster_run, lease) == holder
        leader, standby = (a, b) if holder == "ha-a" else (b, a)
        assert leader.stop() == 0  # SIGTERM: finishes, releases the Lease
        wait_for("the standby taking the Lease over",
                 lambda: lease_holder(cluster_run, lease) == standby.name, timeout=45)
        assert standby.alive(), standby.tail()
    finally:
        for process in (a, b):
            process.stop()
        cluster_run.kube.delete("coordination.k8s.io/v1", "Lease", lease, cluster_run.system_namespace)


def test_certificate_rotation_while_objects_are_created(cluster_run):
    """Serving certificate renewed, then the CA replaced in three stages (bundle += new CA;
    serve from the new CA; bundle -= old CA) while kubectl creates objects through the
    webhook in a loop: none fails."""
    local_only(cluster_run)
    cert_dir = cluster_run.cert_dir
    failures: list[str] = []
    done = threading.Event()
    sent = 0

    kubectl = shutil.which("kubectl")

    def load():
        """``kubectl create`` of a new object per round (the API itself without kubectl)."""
        nonlocal sent
        while not done.is_set():
            obj = cluster.labelled(scenarios.variant(VALID, f"e2e-rotation-{sent}", lambda o: None), cluster_run.run_id)
            if kubectl:
                result = subprocess.run([kubectl, "--kubeconfig", cluster_run.kubeconfig, "create", "-f", "-",
                                         "-o", "name"], input=yaml.safe_dump(obj), capture_output=True, text=True,
                                        timeout=60)
                if result.returncode:
                    failures.append(result.stderr.strip())
                else:
                    meta = obj["metadata"]
                    cluster_run.owned.created.append((obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"]))
            else:
                reply = cluster_run.submit(obj)
                if not reply.ok:
                    failures.append(f"HTTP {reply.status}: {reply.message}")
            sent += 1

    def through_this_stage() -> None:
        """Creates go through the webhook in this stage of the rotation (the apiserver takes a
        changed webhook configuration from its informer, which gives no signal: a few creates
        are the margin, where a fixed pause was)."""
        begun = sent
        wait_for("creates through this stage of the rotation", lambda: sent >= begun + CREATES_PER_STAGE,
                 timeout=60)

    port = int(cluster_run.webhook_url.rsplit(":", 1)[1])
    writer = threading.Thread(target=load, daemon=True)
    writer.start()
    try:
        old = certs.DirectoryStore(cert_dir).load()
        # 1. a new serving certificate from the same CA (the bundle already trusts it)
        processes.reissue_serving(cert_dir, old.signer, old.ca_key, old.trusted)
        wait_for("the webhook serving the renewed certificate", lambda: processes.serves(port, cert_dir), timeout=30)
        through_this_stage()
        # 2. a new CA: first trusted (bundle = old + new), then serving, then the old one dropped
        ca, ca_key = certs.issue_ca(now=certs.utcnow(), validity=certs.RotationPolicy().ca_validity)
        _set_ca_bundle(cluster_run, old.ca_pem() + _pem(ca))
        through_this_stage()
        processes.reissue_serving(cert_dir, ca, ca_key, (*old.trusted, ca))
        wait_for("the webhook serving a certificate of the new CA", lambda: processes.serves(port, cert_dir),
                 timeout=30)
        through_this_stage()
        _set_ca_bundle(cluster_run, _pem(ca))
        through_this_stage()
    finally:
        done.set()
        writer.join(30)
    assert sent >= 5, f"only {sent} objects were created during the rotation"
    assert failures == [], f"{len(failures)} of {sent} creates failed during the rotation: {failures[:3]}"
    assert cluster_run.webhook_process.alive(), cluster_run.webhook_process.tail()


def test_stopped_webhook_fails_closed_or_open_as_configured(cluster_run, tmp_path):
    """A second webhook registered, then stopped: with failurePolicy Fail writes of the served
    kinds are refused; with Ignore they pass (the run's webhook and the CRD rules still judge)."""
    processes.generate_certs(tmp_path)
    process, port = processes.start_serve("serve-stopped", tmp_path, cluster_run.log_dir, ready="/healthz")
    assert process.stop() == 0
    configurations = webhooks.webhook_configurations(
        f"https://127.0.0.1:{port}", tmp_path / certs.CA_FILE, cluster_run.run_id,
        name=f"infergate-e2e-stopped-{cluster_run.run_id}"[:63], failure_policy="Fail")
    valid = scenarios.variant(VALID, "e2e-failure-policy", lambda o: None)
    (invalid,) = cluster.load_documents(cluster.MANIFESTS_DIR / "invalid" / "kubeai-model-bad-url.yaml")
    try:
        for config in configurations:
            cluster.create_owned(cluster_run.kube, config, cluster_run.owned)
        refused = wait_for("writes refused (failurePolicy Fail)",
                           lambda: (r := cluster_run.submit(valid, dry_run=True)) and not r.ok and r, timeout=30)
        assert "failed calling webhook" in refused.message and "infergate.io" in refused.message, refused.message
        for config in configurations:
            stored = cluster_run.kube.get(config["apiVersion"], config["kind"], config["metadata"]["name"])
            cluster_run.kube.replace(webhooks.with_failure_policy(stored, "Ignore")).expect_ok()
        admitted = wait_for("writes admitted (failurePolicy Ignore)",
                            lambda: cluster_run.submit(valid, dry_run=True).ok, timeout=30)
        assert admitted
        rejected = cluster_run.submit(invalid, dry_run=True)
        assert rejected.status == 422 and "url must start with" in rejected.message, rejected.message
    finally:
        for config in configurations:
            cluster_run.kube.delete(config["apiVersion"], config["kind"], config["metadata"]["name"])


# --- helpers -------------------------------------------------------------------------------


def _set_ca_bundle(run, ca_pem: bytes) -> None:
    for config in run.configurations:
        stored = run.kube.get(config["apiVersion"], config["kind"], config["metadata"]["name"])
        run.kube.replace(webhooks.with_ca_bundle(copy.deepcopy(stored), b64(ca_pem))).expect_ok()


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.mark.decision(scenarios.SERVED, "The chart installs by default only the CRDs infergate owns")
def test_the_releases_default_install_brings_no_third_party_crd(cluster_run):
    """What the chart creates with its default values (what chart mode installed; what `helm
    install` creates besides chart/crds) holds no CRD, and chart/crds holds only infergate's own
    kinds: the upstream CRDs this run judges against came from the run or the cluster, which a
    chart-mode run would have refused to overwrite (the release's objects are created as new)."""
    from . import chart

    rendered = chart.render(cluster_run.system_namespace, "example.org/infergate:e2e")
    assert [o["metadata"]["name"] for o in rendered if o["kind"] == "CustomResourceDefinition"] == []
    own = cluster.load_documents(cluster.REPO / "chart" / "crds")
    assert {crd["spec"]["group"] for crd in own} == {"ai.deckhouse.io"}
    for crd in own:  # and the cluster serves them
        assert cluster_run.kube.get(*cluster.CRD, crd["metadata"]["name"]) is not None
