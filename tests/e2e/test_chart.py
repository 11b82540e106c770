"""The Helm chart against the real apiserver: every object it renders, for each documented
value set, accepted by a server-side dry-run apply; a real ``helm install`` (the Helm SDK)
and ``helm uninstall`` that leaves no webhook configuration; the run's webhook and
controller run as the chart's ServiceAccounts (tests/e2e/identities.py; each rule of their
roles shown needed in test_rbac.py)."""

from __future__ import annotations

import pytest
from kubernetes import config as kube_config

from . import chart, cluster, identities
from .api import Kube, wait_for

pytestmark = pytest.mark.e2e

VALUE_SETS = chart.documented_value_sets()
INSTALL_RELEASE = "e2e-infergate"
# rendered under a release name of their own: in chart mode the run's release (named
# chart.RELEASE) lives in the same namespace, and a dry-run apply must not merge into it
DRY_RUN_RELEASE = "e2e-dry-run"


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_object_is_accepted_by_a_server_side_dry_run(name, cluster_run):
    kube = cluster_run.kube
    objects = chart.rendered_objects(VALUE_SETS[name], cluster_run.system_namespace, release=DRY_RUN_RELEASE,
                                     crds=True)
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
    """A real install with default values (its Pods run on a cluster with nodes, and stay
    Pending on one without), then a real uninstall: the configurations, which point at the
    release's Service, go with it, and so do the Pods."""
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
            pods = wait_for("the release's Pods created", lambda: kube.list("v1", "Pod", namespace), timeout=90)
            nodes = [n for n in kube.list("v1", "Node") if not (n.get("spec") or {}).get("unschedulable")]
            assert {p["status"].get("phase") for p in pods} <= ({"Pending", "Running"} if nodes else {"Pending"})
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
