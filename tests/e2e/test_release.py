"""The chart running as Pods on a real node (``INFERGATE_E2E_MODE=chart``): installed by Helm
with its defaults, the webhook reached by the apiserver through its Service; a ``helm upgrade``,
a deleted webhook Pod and an apiserver restart under a loop of writes, none of which may fail
but while the apiserver itself is away; the webhook Ready and judging again within a bound
after an apiserver restart, with and without the CRDs it serves; two controllers and the
leader's Pod killed; two webhook replicas starting together on one CA.

The numbers each scenario measures are printed (``pytest -rP`` shows them) and documented in
docs/install.md, with the bounds asserted here.
"""

from __future__ import annotations

import base64
import re
import shutil
import socket
import ssl
import subprocess
import time

import pytest
from cryptography import x509

from tests.support.paths import KUBEAI_V0_12_CRD
from webhook.inputs.watches import webhook_crd_names

from . import chart, cluster, scenarios, selection
from .api import wait_for
from .conftest import controller_lease, lease_holder
from .restarts import restart_apiserver, restart_command
from .test_admission import kubectl_prints
from .test_faults import pool, settled_like_offline
from .writeloop import WriteLoop

pytestmark = pytest.mark.e2e

VALID = "valid/kubeai-model-ollama.yaml"
DENIED = scenarios.webhook_probe()
# what the bare release's webhook denies: that release has no controller, so no rule is handed to
# the apiserver even in a native run, and the ConfigMap a native run's probe reads is not there
BARE_DENIED = "denied-by-webhook/kubeai-model-ollama-url-with-vllm.yaml"
# The webhook is Ready and judging again this soon after the apiserver is back (docs/install.md).
READY_AFTER_RESTART_S = 30
# A killed leader's standby holds the Lease and has written status within this (docs/install.md):
# the Lease's 15 s duration, two 2 s retry periods, and a reconcile.
FAILOVER_S = 25


def chart_only(run) -> None:
    if run.mode != "chart":
        pytest.skip("the chart's own Pods on a node (INFERGATE_E2E_MODE=chart)")


def measured(what: str, value) -> None:
    """One measurement, printed for the run's report (pytest -rP)."""
    print(f"MEASURED {what}: {value}")


def _example(relative: str, run_id: str, name: str | None = None) -> dict:
    (obj,) = cluster.load_documents(cluster.MANIFESTS_DIR / relative)
    if name:
        obj["metadata"]["name"] = name
    return cluster.labelled(obj, run_id)


def write_loop(run) -> WriteLoop:
    """The loop of a valid KubeAI Model (admitted) and one the webhook denies, as kubectl
    prints the webhook's denial through the API right now."""
    valid, invalid = _example(VALID, run.run_id, "e2e-loop-valid"), _example(DENIED, run.run_id, "e2e-loop-denied")
    assert run.kube.create(valid, dry_run=True).ok
    denial = run.kube.create(invalid, dry_run=True)
    assert not denial.ok and scenarios.WEBHOOK_DENIAL in denial.message, denial.body
    return WriteLoop(run.kubeconfig, valid, invalid, kubectl_prints(denial.body))


def webhook_pods(run, release: chart.Release | None = None) -> list[dict]:
    release = release or run.release
    return chart.pods(run.kube, release.namespace, release.selector("webhook"))


def all_pods_gone_but(run, names: set[str], release: chart.Release | None = None) -> bool:
    """Only the webhook Pods ``names`` left, each Ready (a replaced one gone from the API)."""
    found = webhook_pods(run, release)
    return {p["metadata"]["name"] for p in found} == names and all(chart.ready(p) for p in found)


def new_webhook_pods_ready(run, old: set[str], count: int) -> set[str] | None:
    """The names of ``count`` Ready webhook Pods none of which is in ``old``, once no other is left."""
    found = webhook_pods(run)
    names = {p["metadata"]["name"] for p in found}
    if len(found) == count and not names & old and all(chart.ready(p) for p in found):
        return names
    return None


# --- installed with defaults -----------------------------------------------------------------


def test_the_default_install_runs_and_the_webhook_judges_through_its_service(cluster_run):
    chart_only(cluster_run)
    release, kube = cluster_run.release, cluster_run.kube
    pods = webhook_pods(cluster_run)
    assert len(pods) == 2 and all(chart.ready(p) for p in pods)
    assert [s["restartCount"] for p in pods for s in p["status"]["containerStatuses"]] == [0, 0]
    controllers = chart.pods(kube, release.namespace, release.selector("controller"))
    assert len(controllers) == 1 and chart.ready(controllers[0])
    slices = kube.list("discovery.k8s.io/v1", "EndpointSlice", release.namespace,
                       label_selector=f"kubernetes.io/service-name={release.fullname()}")
    ready = {address for s in slices for e in s.get("endpoints") or () if (e.get("conditions") or {}).get("ready")
             for address in e["addresses"]}
    assert ready == {p["status"]["podIP"] for p in pods}
    # the apiserver calls the Service: a denial in the webhook's words, and an admission
    denied = cluster_run.kube.create(_example(DENIED, cluster_run.run_id, "e2e-install-denied"), dry_run=True)
    assert denied.status == 422 and 'admission webhook "validate.infergate.io" denied the request' in denied.message
    assert cluster_run.kube.create(_example(VALID, cluster_run.run_id, "e2e-install-valid"), dry_run=True).ok
    # each Pod serves as a group of webhook.processes: /readyz (through the apiserver's Pod proxy)
    # answers for the whole group, one line per sibling process
    for pod in pods:
        readyz = kube.text(f"/api/v1/namespaces/{release.namespace}/pods/https:{pod['metadata']['name']}:"
                           f"{chart.default_values()['webhook']['port']}/proxy/readyz")
        siblings = re.findall(r"^\[\+\]process-\d+ ok$", readyz, re.M)
        assert len(siblings) == chart.SESSION_PROCESSES - 1 and readyz.endswith("readyz check passed\n"), readyz


# --- no failed write: rollout, a deleted Pod, an apiserver restart ---------------------------


def test_a_helm_upgrade_rolls_the_webhook_without_a_failed_write(cluster_run):
    chart_only(cluster_run)
    old = {p["metadata"]["name"] for p in webhook_pods(cluster_run)}
    with write_loop(cluster_run) as loop:
        loop.wait_for_answers(4)
        start, began = loop.mark(), time.monotonic()
        # a changed value of the Pod template: every webhook Pod is replaced
        cluster_run.release.upgrade({"webhook": {"podAnnotations": {"e2e.infergate.io/rollout": cluster_run.run_id}}})
        new = wait_for("the webhook Pods replaced, the old ones gone",
                       lambda: new_webhook_pods_ready(cluster_run, old, 2), timeout=300, interval=0.5)
        took = time.monotonic() - began
        loop.wait_for_answers(6)  # and the new Pods answer for a while
        tally = loop.since(start)
    measured("helm upgrade rollout", f"{took:.1f}s; {tally.summary()}")
    assert len(new) == 2
    assert tally.errors == [], tally.summary()
    assert tally.admitted_and_denied() >= (3, 3)


def test_a_deleted_webhook_pod_costs_no_write_and_the_disruption_budget_holds(cluster_run):
    chart_only(cluster_run)
    kube, namespace = cluster_run.kube, cluster_run.release.namespace
    first, second = sorted(p["metadata"]["name"] for p in webhook_pods(cluster_run))
    wait_for("the disruption budget counting both Pods healthy", lambda: _budget_allows_one(cluster_run), timeout=60)
    with write_loop(cluster_run) as loop:
        loop.wait_for_answers(4)
        start, began = loop.mark(), time.monotonic()
        assert _evict(kube, namespace, first).ok  # two Ready of minAvailable 1: allowed
        # the budget now allows no other disruption until the replacement is Ready
        refused = _evict(kube, namespace, second)
        assert refused.status == 429, refused.body
        wait_for("the evicted Pod replaced and gone",
                 lambda: (len(webhook_pods(cluster_run)) == 2 and first not in {p["metadata"]["name"] for p in
                                                                                 webhook_pods(cluster_run)}
                          and all(chart.ready(p) for p in webhook_pods(cluster_run))), timeout=120, interval=0.5)
        took = time.monotonic() - began
        loop.wait_for_answers(6)
        tally = loop.since(start)
    measured("webhook Pod evicted", f"replaced in {took:.1f}s; {tally.summary()}")
    assert tally.errors == [], tally.summary()
    assert tally.admitted_and_denied() >= (3, 3)


MAP_SCHEMA_NOT_LOADED = ("not found. There can be a delay between when CustomResourceDefinitions are created and "
                         "when they are available.")


def _budget_allows_one(run) -> bool:
    budget = run.kube.get("policy/v1", "PodDisruptionBudget", run.release.fullname(), run.release.namespace) or {}
    status = budget.get("status") or {}
    return status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 1


def _evict(kube, namespace: str, name: str):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    return kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)


def test_an_apiserver_restart_costs_writes_only_while_it_is_down(cluster_run):
    """With the served CRDs installed (the run's): the webhook stays Ready and judges
    again within READY_AFTER_RESTART_S of the apiserver's return; the controller writes the
    status of an object created afterwards."""
    chart_only(cluster_run)
    command = restart_command()
    with write_loop(cluster_run) as loop:
        loop.wait_for_answers(4)
        start = loop.mark()
        loop.apiserver_down.append((time.monotonic(), float("inf")))  # until we know when it is back
        restart = restart_apiserver(cluster_run.kube, command)
        loop.apiserver_down[-1] = (restart.began, restart.back)
        judged = wait_for("the webhook judging again", lambda: _judged_since(loop, restart.back),
                          timeout=READY_AFTER_RESTART_S * 2, interval=0.2)
        pods_ready = wait_for("the webhook Pods Ready", lambda: _all_ready_at(cluster_run),
                              timeout=READY_AFTER_RESTART_S * 2, interval=0.2)
        loop.wait_for_answers(6)
        # with the generated MAPs bound to Models (a native run), the apiserver refuses their
        # writes until its MAP plugin has loaded the CRD's schema again, whatever the policy's
        # failurePolicy (mutating/dispatcher.go): its own 503, docs/native-policies.md
        tally = loop.since(start, apiserver_refusals=(MAP_SCHEMA_NOT_LOADED,) if selection.native_policies() else ())
    after = cluster_run.submit(pool("e2e-after-chart-restart")).expect_ok()
    settled_like_offline(cluster_run, after)
    ready_after = max(judged, pods_ready) - restart.back
    measured("apiserver restart (served CRDs installed)",
             f"down {restart.downtime:.1f}s; webhook Ready and judging {ready_after:.1f}s after /readyz ok; "
             f"{tally.summary()}")
    assert ready_after <= READY_AFTER_RESTART_S
    assert tally.errors == [], tally.summary()
    assert all(s["restartCount"] == 0 for p in webhook_pods(cluster_run) for s in p["status"]["containerStatuses"])


def _judged_since(loop: WriteLoop, moment: float) -> float | None:
    """When the first denial in the webhook's words came back after ``moment``."""
    return next((a.at for a in list(loop.answers) if a.at > moment and not a.valid and a.error is None), None)


def _all_ready_at(run) -> float | None:
    pods = webhook_pods(run)
    return time.monotonic() if len(pods) == 2 and all(chart.ready(p) for p in pods) else None


@pytest.mark.before_crds
def test_without_the_served_crds_the_webhook_is_ready_and_judging_after_an_apiserver_restart(run):
    """Before the run installs any CRD: a release whose third-party kinds (KubeAI, the
    Inference Extension, llm-d, Gateway API) are not served; only infergate's own CRDs, which
    ``helm install`` brings, are. After an apiserver restart its webhook is Ready and judging
    within READY_AFTER_RESTART_S; then the KubeAI CRD appears and its kind is judged."""
    chart_only(run)
    command = restart_command()
    kube, run_id = run.kube, run.run_id
    served = sorted(webhook_crd_names())
    present = [name for name in served if kube.get(*cluster.CRD, name) is not None]
    assert not present, f"the cluster already serves {present}: this scenario needs a cluster without them"
    namespace = f"infergate-e2e-bare-{run_id}"[:63]
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, run.owned)
    release = chart.session_release(run, "e2e-bare", namespace)
    release.values = chart.merged(release.values, {"controller": {"enabled": False}})
    kubeai = cluster.load_documents(KUBEAI_V0_12_CRD)
    # an InferenceService in a namespace the webhook judges: no class is the default, so the
    # webhook denies it (it looks the classes up in its cache: an answer of a synced webhook)
    (order,) = cluster.load_documents(cluster.MANIFESTS_DIR / "valid" / "inferenceservice-default-class.yaml")
    order = cluster.labelled({**order, "metadata": {**order["metadata"], "namespace": "default"}}, run_id)
    try:
        chart.install(kube, release)
        assert sorted(n for n in served if kube.get(*cluster.CRD, n)) == sorted(
            o["metadata"]["name"] for o in cluster.load_documents(cluster.REPO / "chart" / "crds"))
        assert _denied_for_lack_of_a_default_class(kube, order)
        restart = restart_apiserver(kube, command)
        judged = wait_for("the webhook judging an InferenceService again",
                          lambda: _denied_for_lack_of_a_default_class(kube, order) and time.monotonic(),
                          timeout=READY_AFTER_RESTART_S * 2, interval=0.2)
        ready = wait_for("the webhook Pods Ready", lambda: _all_ready_at_release(run, release),
                         timeout=READY_AFTER_RESTART_S * 2, interval=0.2)
        ready_after = max(judged, ready) - restart.back
        # a served CRD appears: its kind is judged (the webhook's watch of it starts)
        appeared = time.monotonic()
        cluster.apply_crds(kube, kubeai, run.owned)
        denied = _example(BARE_DENIED, run_id)
        denied["metadata"]["namespace"] = "default"
        wait_for("a KubeAI Model denied by the webhook",
                 lambda: scenarios.WEBHOOK_DENIAL in kube.create(denied, dry_run=True).message,
                 timeout=READY_AFTER_RESTART_S * 2, interval=0.2)
        judged_new_kind = time.monotonic() - appeared
        measured("apiserver restart (no third-party CRD served)",
                 f"down {restart.downtime:.1f}s; webhook Ready and judging {ready_after:.1f}s after /readyz ok; "
                 f"KubeAI's Model judged {judged_new_kind:.1f}s after its CRD was created")
        assert ready_after <= READY_AFTER_RESTART_S
        assert judged_new_kind <= READY_AFTER_RESTART_S
        assert all(s["restartCount"] == 0 for p in webhook_pods(run, release) for s in p["status"]["containerStatuses"])
    finally:
        release.uninstall()
        # the run creates these CRDs as its own: none may stay behind
        for name in served:
            kube.delete(*cluster.CRD, name)
        wait_for("the CRDs of this scenario gone", lambda: not [n for n in served if kube.get(*cluster.CRD, n)],
                 timeout=120)
        kube.delete("v1", "Namespace", namespace)


def _denied_for_lack_of_a_default_class(kube, order: dict) -> bool:
    reply = kube.create(order, dry_run=True)
    return scenarios.WEBHOOK_DENIAL in reply.message and "is-default-class" in reply.message


def _all_ready_at_release(run, release: chart.Release) -> float | None:
    pods = webhook_pods(run, release)
    return time.monotonic() if len(pods) == 2 and all(chart.ready(p) for p in pods) else None


# --- the controller: two replicas, one leader ---------------------------------------------------


def test_the_standby_controller_takes_over_from_a_killed_leader_and_writes_status(cluster_run):
    chart_only(cluster_run)
    release, kube = cluster_run.release, cluster_run.kube
    release.upgrade({"controller": {"replicas": 2}})
    name = f"{release.fullname()}-controller"
    wait_for("two controllers", lambda: chart.rolled_out(kube, release.namespace, name), timeout=180, interval=0.5)
    pods = {p["metadata"]["name"] for p in chart.pods(kube, release.namespace, release.selector("controller"))}
    leader = wait_for("a controller holding the Lease",
                      lambda: (h := lease_holder(cluster_run, controller_lease())) in pods and h, timeout=60)
    killed = time.monotonic()
    # killed: deleted at once, no grace period (the kubelet stops the container right away)
    kube.request("DELETE", f"/api/v1/namespaces/{release.namespace}/pods/{leader}",
                 {"gracePeriodSeconds": 0, "propagationPolicy": "Background"}).expect_ok()
    successor = wait_for("another controller holding the Lease",
                         lambda: (h := lease_holder(cluster_run, controller_lease())) not in (None, "", leader) and h,
                         timeout=FAILOVER_S * 2, interval=0.2)
    took_lease = time.monotonic() - killed
    created = cluster_run.submit(pool("e2e-after-failover")).expect_ok()
    settled_like_offline(cluster_run, created, timeout=FAILOVER_S * 2)
    wrote = time.monotonic() - killed
    standing = {p["metadata"]["name"] for p in chart.pods(kube, release.namespace, release.selector("controller"))}
    measured("controller failover", f"Lease taken over {took_lease:.1f}s after the leader's Pod was killed, "
                                    f"status of a new object written {wrote:.1f}s after; successor "
                                    f"{'the standby' if successor in pods else 'the replacement Pod'}")
    assert successor in standing
    assert wrote <= FAILOVER_S


# --- certificates: two replicas starting together ----------------------------------------------


def test_two_webhook_replicas_starting_together_serve_one_ca(run, state):
    """A fresh release (``certificates.mode: self-managed``: the Secret mode): both replicas start
    at once and race to create the certificate Secret and to inject the CA. One CA wins: the
    Secret holds one CA, each Pod serves a certificate of it, both configurations carry it as
    their caBundle, and neither Pod restarted (a lost race used to end one's start)."""
    chart_only(run)
    kube = run.kube
    namespace = f"infergate-e2e-ca-{run.run_id}"[:63]
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, run.owned)
    release = chart.session_release(run, "e2e-ca", namespace)
    release.values = chart.merged(release.values, {"controller": {"enabled": False}})
    try:
        configurations = chart.install(kube, release)
        secret = kube.get("v1", "Secret", f"{release.fullname()}-tls", namespace)
        ca_pem = base64.b64decode(secret["data"]["ca.crt"])
        assert len(x509.load_pem_x509_certificates(ca_pem)) == 1
        (bundle,) = chart.ca_bundles(kube, configurations)
        assert base64.b64decode(bundle) == ca_pem
        pods = webhook_pods(run, release)
        assert len(pods) == 2
        for pod in pods:
            assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["metadata"]["name"]
            served = _served_certificate(run.kubeconfig, namespace, pod["metadata"]["name"])
            _verify_issued_by(served, ca_pem)
    finally:
        release.uninstall()
        kube.delete("v1", "Namespace", namespace)


def _served_certificate(kubeconfig: str, namespace: str, pod: str, port: int = 8443) -> x509.Certificate:
    """The certificate the Pod presents on ``port``, through ``kubectl port-forward`` (any
    cluster: the kubelet forwards; no route to Pod IPs needed)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise RuntimeError("reading a Pod's certificate needs kubectl on PATH")
    forward = subprocess.Popen([kubectl, "--kubeconfig", kubeconfig, "-n", namespace, "port-forward", f"pod/{pod}",
                                f":{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:NNNNN -> 8443"
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"kubectl port-forward said {line!r} {forward.stderr.read() if forward.poll() else ''}"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # read it; verified below
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=10) as sock, \
                context.wrap_socket(sock) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
    finally:
        forward.terminate()
        forward.wait(10)


def _verify_issued_by(cert: x509.Certificate, ca_pem: bytes) -> None:
    (ca,) = x509.load_pem_x509_certificates(ca_pem)
    cert.verify_directly_issued_by(ca)  # raises when another CA signed it
