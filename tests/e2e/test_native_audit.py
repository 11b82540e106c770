"""The audit of the cluster's own ValidatingAdmissionPolicies on a real apiserver
(``infergate controller --audit-native-policies``): a VAP with a ConfigMap param and its binding,
scoped to the run's namespace, created after two Models (one violates it). The controller writes the VAP's results into the
Models' OpenReports Reports (policy: the VAP, rule: ``validations[i]``); a restarted controller's
full scan over converged reports writes nothing, counted by the apiserver itself
(``apiserver_request_total`` of the report resources' write verbs); deleting the VAP removes its
results.

The controller runs with the run's own kubeconfig and writes no status (``--status-writes
...=off``): on a cluster others use, it judges and reports, and changes nothing else.
``INFERGATE_E2E_PREFIX`` prefixes the names it creates (a shared cluster's convention)."""

from __future__ import annotations

import os

import pytest

from webhook import kinds

from . import cluster, processes
from .api import wait_for
from .test_audit import MODEL, REPORT, kubeai_model, openreports_crds, report_of, report_writes, scanned

pytestmark = [pytest.mark.e2e, pytest.mark.before_webhook]

PREFIX = os.environ.get("INFERGATE_E2E_PREFIX", "")
VAP = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
BINDING = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding")


def _policy(name: str, namespace: str) -> tuple[dict, dict]:
    """A VAP (replicas under the param's limit, a team label) and its Deny binding, both
    matching only ``namespace``: the apiserver enforces them, and nowhere else."""
    scope = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    policy = {"apiVersion": VAP[0], "kind": VAP[1], "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                       "matchConstraints": {"namespaceSelector": scope, "resourceRules": [
                           {"apiGroups": ["kubeai.org"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                            "resources": ["models"]}]},
                       "validations": [
                           {"expression": "object.spec.?maxReplicas.orValue(0) <= int(params.data.maxReplicas)",
                            "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'"},
                           {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
                            "message": "a team label is required"}]}}
    binding = {"apiVersion": BINDING[0], "kind": BINDING[1], "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
                        "matchResources": {"namespaceSelector": scope}}}
    return policy, binding


def _native(report: dict | None, policy: str) -> set[tuple[str, str, str]]:
    return {(r.get("rule", ""), r["result"], r.get("message", "")) for r in (report or {}).get("results") or ()
            if r["policy"] == policy}


def test_the_controller_reports_the_clusters_vaps_converges_and_drops_a_deleted_vap(run, request):
    kube = run.kube
    if not kube.serves(*MODEL):  # the run installs the bundled CRDs where the cluster lacks them
        request.getfixturevalue("crds")
    crds = [] if kube.serves(*REPORT) else cluster.apply_crds(kube, openreports_crds(), run.owned)
    try:
        _audit(run, kube)
    finally:
        for name in crds:
            kube.delete(*cluster.CRD, name)
        wait_for("the OpenReports CRDs gone", lambda: all(kube.get(*cluster.CRD, n) is None for n in crds), timeout=60)


def _audit(run, kube) -> None:
    namespace = name = f"{PREFIX}native-audit-{run.run_id}"
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, run.owned)
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits",
                                "namespace": namespace}, "data": {"maxReplicas": "2"}}, run.owned)
    big = kubeai_model(f"{PREFIX}big", namespace, "OLlama")
    big["spec"].update(minReplicas=0, maxReplicas=5)
    small = kubeai_model(f"{PREFIX}small", namespace, "OLlama")
    small["metadata"]["labels"] = {"team": "a"}
    small["spec"].update(minReplicas=0, maxReplicas=1)
    big, small = cluster.create_owned(kube, big, run.owned), cluster.create_owned(kube, small, run.owned)
    policy, binding = _policy(name, namespace)
    cluster.create_owned(kube, policy, run.owned)
    cluster.create_owned(kube, binding, run.owned)
    # (not checked here: the apiserver's own enforcement of a ConfigMap param. Its informer of a
    # built-in param kind stops for good once no binding names that kind, kubernetes#130887, so a
    # long-lived apiserver that ran this test before answers "no params found"; the audit reads
    # the params itself)

    status_off = [f"--status-writes={d.crd_name}=off" for d in kinds.DECLARATIONS if d.status_version]

    def start(process_name: str) -> processes.Process:
        process = processes.start(process_name, ["controller", "--kubeconfig", run.kubeconfig, "--no-leader-elect",
                                                 "--audit-native-policies", "--log-level", "DEBUG", *status_off],
                                  run.log_dir)
        run.processes.append(process)
        return process

    expected_big = {("validations[0]", "fail", "at most 2 replicas"),
                    ("validations[1]", "fail", "a team label is required")}
    process = start("native-audit-controller")
    try:
        report = wait_for("the VAP's results in the big Model's Report",
                          lambda: (lambda r: r if _native(r, name) == expected_big else None)(report_of(run, big)),
                          timeout=60)
        assert report["scope"]["uid"] == big["metadata"]["uid"]
        assert {r["properties"]["validationActions"] for r in report["results"] if r["policy"] == name} == {"Deny"}
        small_report = wait_for("the small Model's Report", lambda: report_of(run, small), timeout=60)
        assert _native(small_report, name) == {("", "pass", "")}
        wait_for("the controller's first scan logged", lambda: scanned(process, 1), timeout=30)
    finally:
        assert process.stop() == 0, process.tail()

    # a second full scan over converged reports writes nothing: a new process, no memory of its writes
    before = report_writes(kube)
    assert before >= 2
    again_process = start("native-audit-controller-again")
    try:
        wait_for("the restarted controller's full scan", lambda: scanned(again_process, 1), timeout=60)
        assert report_writes(kube) == before
        print(f"MEASURED report writes before and after the converged scan: {before:.0f}, {report_writes(kube):.0f}")

        # the VAP deleted: its results go from the reports (its binding alone does nothing)
        kube.delete(*VAP, name).expect_ok()
        wait_for("the deleted VAP's results gone", lambda: not _native(report_of(run, big), name)
                 and not _native(report_of(run, small), name), timeout=60)
        log = again_process.log.read_text(errors="replace")
        assert "Traceback" not in log
    finally:
        assert again_process.stop() == 0, again_process.tail()
