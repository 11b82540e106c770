"""The background audit on a real apiserver (with kube-controller-manager: its garbage collector
removes a report with its object). No webhook is registered: violating objects are stored as
a cluster that predates a policy holds them. ``infergate controller`` with its defaults, under
the chart's controller identity, then writes one OpenReports Report per object within a minute;
fixing an object clears its failure; deleting it removes its report; and a restarted
controller's full resync over converged reports writes nothing, counted by the apiserver
itself (``apiserver_request_total`` of the report resources' write verbs)."""

from __future__ import annotations

import copy
import re
import time

import pytest
import yaml

from . import cluster, processes
from .api import wait_for
from .conftest import controller_lease

# before the run's webhook (it would refuse the violating objects) and controller (its
# audit would write reports too, and its writes be counted with this one's)
pytestmark = [pytest.mark.e2e, pytest.mark.before_webhook]

REPORT = ("openreports.io/v1alpha1", "Report")
MODEL = ("kubeai.org/v1", "Model")
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
ENGINE_POLICY = "kubeai-model-engine"


def openreports_crds() -> list[dict]:
    return [yaml.safe_load(path.read_text())
            for path in sorted((cluster.REPO / "chart" / "files" / "crds" / "reports").glob("openreports.io_*.yaml"))]


def kubeai_model(name: str, namespace: str, engine: str) -> dict:
    """A KubeAI Model with an ollama:// URL: the shipped policy kubeai-model-engine fails it
    unless its engine is OLlama."""
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name, "namespace": namespace},
            "spec": {"features": ["TextGeneration"], "url": "ollama://gemma2:2b", "engine": engine,
                     "resourceProfile": "cpu:1"}}


def report_writes(kube) -> float:
    """Writes of OpenReports reports the apiserver has served since it started (all clients)."""
    total = 0.0
    for line in kube.text("/metrics").splitlines():
        if line.startswith("apiserver_request_total{") and 'group="openreports.io"' in line:
            verb = re.search(r'verb="([A-Z]+)"', line)
            if verb and verb.group(1) in WRITE_VERBS and re.search(r'resource="(cluster)?reports"', line):
                total += float(line.rsplit(" ", 1)[1])
    return total


def report_of(run, obj: dict) -> dict | None:
    return run.kube.get(*REPORT, f"infergate-{obj['metadata']['uid']}", obj["metadata"]["namespace"])


def _failed(report: dict | None) -> set[str]:
    return {r["policy"] for r in (report or {}).get("results") or () if r["result"] == "fail"}


def scanned(process: processes.Process, scans: int) -> bool:
    return process.log.read_text(errors="replace").count("objects audited") >= scans


def test_the_controller_reports_existing_objects_clears_fixed_ones_and_converges(run, state, chart_identities):
    kube = run.kube
    assert kube.get("coordination.k8s.io/v1", "Lease", controller_lease(), run.system_namespace) is None, \
        "another infergate controller of this run is leading: the audit's writes would not be this one's alone"
    crds = cluster.apply_crds(kube, openreports_crds(), run.owned)
    try:
        _audit(run, kube)
    finally:  # the rest of the run as it would be without them: no report API served
        for name in crds:
            kube.delete(*cluster.CRD, name)
        wait_for("the OpenReports CRDs gone", lambda: all(kube.get(*cluster.CRD, n) is None for n in crds), timeout=60)


def _audit(run, kube) -> None:
    namespace = f"audit-{run.run_id}"
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, run.owned)
    bad = cluster.create_owned(kube, kubeai_model("gemma-on-vllm", namespace, "VLLM"), run.owned)
    doomed = cluster.create_owned(kube, kubeai_model("gemma-to-delete", namespace, "VLLM"), run.owned)
    good = cluster.create_owned(kube, kubeai_model("gemma-on-ollama", namespace, "OLlama"), run.owned)

    def start(name: str) -> processes.Process:
        process = processes.start_controller(name, run.identities.get("controller", run.kubeconfig), run.log_dir,
                                             lease_namespace=run.system_namespace, lease_name=controller_lease())
        run.processes.append(process)
        return process

    process = start("audit-controller")  # the defaults: the shipped policies, audit on
    try:
        # the Reports appear within a minute, the violating objects' with the failure
        for obj, failed in ((bad, {ENGINE_POLICY}), (doomed, {ENGINE_POLICY}), (good, set())):
            report = wait_for(f"the Report of {obj['metadata']['name']}", lambda o=obj: report_of(run, o), timeout=60)
            assert _failed(report) == failed, report
            assert report["source"] == "infergate" and report["scope"]["uid"] == obj["metadata"]["uid"]
            assert report["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]

        # fixing an object clears its failure (its watch: no wait for the next scan)
        fixed = copy.deepcopy(kube.get(*MODEL, bad["metadata"]["name"], namespace))
        fixed["spec"]["engine"] = "OLlama"
        kube.replace(fixed).expect_ok()
        report = wait_for("the fixed Model's failure cleared",
                          lambda: (lambda r: r if r and not _failed(r) else None)(report_of(run, bad)), timeout=60)
        assert (ENGINE_POLICY, "pass") in {(r["policy"], r["result"]) for r in report["results"]}

        # deleting an object removes its report: the garbage collector, through the ownerReference.
        # Its graph learns of a new kind (the OpenReports CRDs, just installed) at its next
        # discovery resync (30 s), and one stalls while kinds of CRDs deleted a moment ago (an
        # earlier run's) still fail to list: minutes, on a cluster whose CRDs come and go
        deleted_at = time.monotonic()
        kube.delete(*MODEL, doomed["metadata"]["name"], namespace).expect_ok()
        wait_for("the deleted Model's Report garbage-collected", lambda: report_of(run, doomed) is None, timeout=240)
        print(f"MEASURED the Report garbage-collected {time.monotonic() - deleted_at:.0f} s after its Model")
        wait_for("the controller's first scan logged", lambda: scanned(process, 1), timeout=30)
    finally:
        assert process.stop() == 0, process.tail()

    # a second resync over converged reports writes nothing: a new process (no memory of its
    # writes) audits every object at start and compares with what is stored
    before = report_writes(kube)
    assert before >= 4  # the three creates and the fix, at least, were counted
    again = start("audit-controller-again")
    try:
        wait_for("the restarted controller's full scan", lambda: scanned(again, 1), timeout=60)
        assert report_writes(kube) == before
        assert "Traceback" not in again.log.read_text(errors="replace")
    finally:
        assert again.stop() == 0, again.tail()
        kube.delete("coordination.k8s.io/v1", "Lease", controller_lease(), run.system_namespace)
