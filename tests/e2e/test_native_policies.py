"""``policies.native.enabled`` on a real cluster (a native run: ``INFERGATE_E2E_NATIVE_POLICIES=1``;
docs/native-policies.md, "In a cluster"): the controller's generated ValidatingAdmissionPolicies
and MutatingAdmissionPolicies applied, owned by the release's ClusterRole and marked once their
probes passed; the webhook leaving exactly their rules to the apiserver (every exported warning
once, in the apiserver's words); and with the webhook out of the path (chart mode: scaled to 0,
its configurations failing open; local mode: its configurations removed), a write breaking an
exported rule denied by the apiserver itself, and a Model written without a default the
exported mutation sets coming back with it, set by the apiserver's MAP. That uninstalling leaves none behind is checked by the run's last finalizer (conftest:
the garbage collector deletes them with their owner).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from webhook.policy.native_handover import (HANDED_OVER_KINDS, PROBE_NAME, generated, in_cluster, stored_as_generated,
                                            stored_key)

from . import chart, cluster, identities, native, offline, scenarios, selection
from .api import JSON_PATCH, wait_for
from .conftest import webhook_answers

pytestmark = pytest.mark.e2e

EXPORTED_DENIAL = "denied-by-webhook/kubeai-model-ollama-url-with-vllm.yaml"  # kubeai-model-engine validations[0]
EXPORTED_MUTATION = "valid/kubeai-model-ollama.yaml"  # no minReplicas: kubeai-model-defaults mutations[0] sets it


@pytest.fixture
def native_run(cluster_run, native_handover):
    if not selection.native_policies():
        pytest.skip("a native run: INFERGATE_E2E_NATIVE_POLICIES=1 (policies.native.enabled)")
    return cluster_run


def owner_name(run) -> str:
    if run.mode == "chart":
        return next(o["metadata"]["name"] for o in run.release.objects()
                    if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller-native-policies"))
    return identities.native_owner(run.system_namespace)


def test_the_generated_policies_are_applied_owned_and_marked(native_run):
    kube = native_run.kube
    owner = kube.get("rbac.authorization.k8s.io/v1", "ClusterRole", owner_name(native_run))
    assert owner is not None
    stored = native.stored(kube)
    wanted = generated(native.exported())
    for obj in in_cluster(wanted, owner):
        found = stored.get(stored_key(obj))
        assert stored_as_generated(found, obj), stored_key(obj)
        assert found["metadata"]["ownerReferences"] == obj["metadata"]["ownerReferences"], stored_key(obj)
    assert {(k, n) for k, n in stored} == {stored_key(o) for o in wanted} | {
        (kind, PROBE_NAME) for kind in HANDED_OVER_KINDS}
    assert native.marked(kube) == native.expected_marks()
    assert {kind for kind, _ in native.marked(kube)} == {"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"}
    assert native.handed_over(kube) == native.handed_over_everything()


def test_exported_warnings_come_once_in_the_apiservers_words(native_run):
    (obj,) = cluster.load_documents(cluster.MANIFESTS_DIR / native.SWITCH_PROBE)
    obj["metadata"]["name"] = "e2e-native-warned"  # (the manifest's own name is created by other scenarios)
    (expected,) = offline.validate([obj], state=native_run.state_dir)
    reply = native_run.submit(obj, dry_run=True)
    assert reply.ok, reply.body
    assert reply.warnings == expected["warnings"]
    assert reply.warnings and all(w.startswith(f"Validation failed for {native.VAP_PREFIX}") for w in reply.warnings)
    for warning in reply.warnings:  # the webhook does not say it again in its own words
        text = warning.split("': ", 1)[1]
        assert sum(text in w for w in reply.warnings) == 1, reply.warnings


@pytest.fixture
def webhook_out(native_run) -> Iterator:
    """The webhook out of the write path, then back: in chart mode its Deployment scaled to 0
    with its configurations failing open (with ``Fail`` the apiserver would refuse every write
    of these kinds for the mutating webhook it cannot call, before any VAP); in local mode its
    configurations removed."""
    kube = native_run.kube
    saved = [kube.get(c["apiVersion"], c["kind"], c["metadata"]["name"]) for c in native_run.configurations]
    (probe,) = cluster.load_documents(cluster.MANIFESTS_DIR / scenarios.webhook_probe())
    if native_run.mode == "chart":
        release = native_run.release
        name = release.fullname()
        replicas = next(o["spec"]["replicas"] for o in release.objects() if o["kind"] == "Deployment"
                        and o["metadata"]["name"] == name)
        try:
            for config in saved:
                patch = [{"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": "Ignore"}
                         for i in range(len(config["webhooks"]))]
                kube.patch(config["apiVersion"], config["kind"], config["metadata"]["name"], patch,
                           content_type=JSON_PATCH).expect_ok()
            kube.patch("apps/v1", "Deployment", name, {"spec": {"replicas": 0}}, namespace=release.namespace).expect_ok()
            wait_for("no webhook Pod left", lambda: not chart.pods(kube, release.namespace, release.selector("webhook")),
                     timeout=120, interval=1)
            wait_for("the apiserver admitting what only the webhook denies",
                     lambda: native_run.submit(probe, dry_run=True).ok, timeout=60)
            yield native_run
        finally:
            kube.patch("apps/v1", "Deployment", name, {"spec": {"replicas": replicas}},
                       namespace=release.namespace).expect_ok()
            wait_for("the webhook rolled out", lambda: chart.rolled_out(kube, release.namespace, name),
                     timeout=300, interval=1)
            for config in saved:
                patch = [{"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": hook["failurePolicy"]}
                         for i, hook in enumerate(config["webhooks"])]
                kube.patch(config["apiVersion"], config["kind"], config["metadata"]["name"], patch,
                           content_type=JSON_PATCH).expect_ok()
            wait_for("the webhook answering again", lambda: webhook_answers(native_run), timeout=60)
        return
    try:
        for config in saved:
            kube.delete(config["apiVersion"], config["kind"], config["metadata"]["name"])
        wait_for("the apiserver admitting what only the webhook denies",
                 lambda: native_run.submit(probe, dry_run=True).ok, timeout=30)
        yield native_run
    finally:
        for config in saved:
            cluster.create_owned(kube, config, native_run.owned)
        wait_for("the webhook answering again", lambda: webhook_answers(native_run), timeout=60)


def test_the_apiserver_itself_denies_an_exported_rule_with_the_webhook_out(webhook_out):
    (obj,) = cluster.load_documents(cluster.MANIFESTS_DIR / EXPORTED_DENIAL)
    (expected,) = offline.validate([obj], crd_only=True, state=webhook_out.state_dir)  # the apiserver alone
    assert not expected["allowed"] and native.VAP_PREFIX in expected["status"]["message"]
    reply = webhook_out.submit(obj, dry_run=True)
    assert reply.status == 422, reply.body
    assert f": {native.VAP_PREFIX}infergate-kubeai-model-engine' with binding 'infergate-kubeai-model-engine' " \
           "denied request: " in reply.message
    assert scenarios.WEBHOOK_DENIAL not in reply.message
    assert offline.comparable_denial(reply.body) == offline.comparable_denial(expected["status"])


def test_the_apiserver_itself_mutates_by_an_exported_mutation_with_the_webhook_out(webhook_out):
    (obj,) = cluster.load_documents(cluster.MANIFESTS_DIR / EXPORTED_MUTATION)
    obj["metadata"]["name"] = "e2e-native-mutated"  # a dry run: the manifest's own name is created by other scenarios
    assert "minReplicas" not in obj["spec"]
    (expected,) = offline.validate([obj], crd_only=True, state=webhook_out.state_dir)  # the apiserver alone
    assert expected["allowed"] and expected["object"]["spec"]["minReplicas"] == 0  # by the generated MAP
    reply = webhook_out.submit(obj, dry_run=True)
    assert reply.ok, reply.body
    assert reply.body["spec"]["minReplicas"] == 0, reply.body["spec"]
    assert reply.body["spec"] == expected["object"]["spec"]
