"""The Helm chart against the real apiserver: every object it renders, for each documented
value set, accepted by a server-side dry-run apply; a real ``helm install`` (the Helm SDK)
and ``helm uninstall`` that leaves no webhook configuration; and its RBAC, which the session's
webhook and controller already run under (tests/e2e/identities.py), shown to need each rule."""

from __future__ import annotations

import pytest
from kubernetes import config as kube_config

from webhook import certs

from . import chart, cluster, identities, processes
from .api import Kube, wait_for

pytestmark = pytest.mark.e2e

VALUE_SETS = chart.documented_value_sets()
INSTALL_RELEASE = "e2e-infergate"


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_object_is_accepted_by_a_server_side_dry_run(name, cluster_run):
    kube = cluster_run.kube
    objects = chart.rendered_objects(VALUE_SETS[name], cluster_run.system_namespace, crds=True)
    # a Pod is admitted only with its ServiceAccount in place (Helm creates the `helm test`
    # hook's first): the release's ServiceAccounts are created for real, and removed after
    made = []
    for account in (o for o in objects if o["kind"] == "ServiceAccount"):
        meta = account["metadata"]
        if kube.get("v1", "ServiceAccount", meta["name"], meta["namespace"]) is None:
            made.append(cluster.create_owned(kube, account, cluster_run.owned))
    refused = []
    try:
        for obj in objects:
            reply = kube.apply(obj, dry_run=True)
            if not reply.ok:
                refused.append(f"{obj['kind']} {obj['metadata']['name']}: HTTP {reply.status} {reply.message}")
    finally:
        for account in made:
            kube.delete("v1", "ServiceAccount", account["metadata"]["name"], account["metadata"]["namespace"])
    assert len(objects) > 10
    assert refused == []


def test_helm_install_then_uninstall_leaves_no_webhook_configuration(cluster_run):
    """A real install with default values (Pods stay Pending on a cluster without nodes), then
    a real uninstall: the configurations, which point at the release's Service, go with it."""
    import helm_python as helm

    kube, run_id = cluster_run.kube, cluster_run.run_id
    namespace = f"infergate-e2e-chart-{run_id}"[:63]
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                         cluster_run.owned)
    values = {"commonLabels": {cluster.RUN_LABEL: run_id}}  # the sweep finds whatever stays
    with helm.Config(kubeconfig_path=cluster_run.kubeconfig, namespace=namespace) as config, \
            helm.Chart.load(chart.CHART) as loaded:
        try:
            config.install(loaded, INSTALL_RELEASE, values, namespace=namespace, timeout=120)
            expected = chart.rendered_objects(values, namespace, release=INSTALL_RELEASE, hooks=False)
            for obj in expected:
                meta = obj["metadata"]
                assert kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")), (
                    f"{obj['kind']} {meta['name']} not installed")
            configurations = [o for o in expected if o["kind"] in chart.WEBHOOK_KINDS]
            assert len(configurations) == 2
            pods = wait_for("the release's Pods created (Pending: no nodes)",
                            lambda: kube.list("v1", "Pod", namespace), timeout=90)
            assert {p["status"].get("phase") for p in pods} == {"Pending"}
        finally:
            config.uninstall(INSTALL_RELEASE, ignore_not_found=True, timeout=120)
    for kind in chart.WEBHOOK_KINDS:
        left = [c["metadata"]["name"] for c in kube.list("admissionregistration.k8s.io/v1", kind)
                if c["metadata"]["name"].startswith(INSTALL_RELEASE)]
        assert left == [], f"{kind} left after uninstall: {left}"
    wait_for("the release's Pods gone", lambda: not kube.list("v1", "Pod", namespace), timeout=90)


def test_the_session_runs_as_the_charts_service_accounts(cluster_run):
    """The webhook and controller every scenario talks to hold the chart's tokens, not the admin's."""
    if cluster_run.mode != "local":
        pytest.skip("the chart's own Pods run with its ServiceAccounts (INFERGATE_E2E_MODE=chart)")
    accounts = identities.names(cluster_run.system_namespace)
    for component, kubeconfig in cluster_run.identities.items():
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        as_component = Kube(kube_config.new_client_from_config(config_file=kubeconfig))
        user = as_component.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        assert user.expect_ok()["status"]["userInfo"]["username"] == (
            f"system:serviceaccount:{cluster_run.system_namespace}:{accounts[component]}")


WEBHOOK_READ_RULES = [(i, identities.rule_label(rule))
                      for i, rule in enumerate(identities.cluster_role("", "webhook")["rules"])
                      if "watch" in rule["verbs"] and rule["apiGroups"] != ["admissionregistration.k8s.io"]]


@pytest.mark.parametrize("dropped", [i for i, _ in WEBHOOK_READ_RULES], ids=[label for _, label in WEBHOOK_READ_RULES])
def test_the_webhook_is_not_ready_without_any_one_of_its_read_rules(dropped, cluster_run, tmp_path):
    """Least privilege: ``serve --kube-state`` under the chart's webhook ClusterRole less one
    read rule never becomes ready (/readyz 503; its watch of that kind is refused)."""
    if cluster_run.mode != "local":
        pytest.skip("needs infergate serve running here (INFERGATE_E2E_MODE=local)")
    name = f"infergate-e2e-lacking-{cluster_run.run_id}"[:63]
    kubeconfig = identities.without_rule(cluster_run.kube, cluster_run.owned, cluster_run.system_namespace,
                                         "webhook", dropped, cluster_run.kubeconfig, tmp_path, name)
    certs_dir = tmp_path / "certs"
    processes.generate_certs(certs_dir)
    process, port = processes.start_serve(f"serve-lacking-{dropped}", certs_dir, cluster_run.log_dir,
                                          extra=["--kube-state", "--kubeconfig", kubeconfig], ready="/healthz")
    try:
        wait_for("the refused watch logged", lambda: "HTTP 403" in process.log.read_text(errors="replace"),
                 timeout=60)
        status, body = processes.get(f"https://127.0.0.1:{port}/readyz", certs_dir / certs.CA_FILE)
        assert status == 503, body
    finally:
        process.stop()
        identities.remove(cluster_run.kube, cluster_run.system_namespace, name)
