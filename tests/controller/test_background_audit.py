"""The background audit against the Kubernetes API's wire format: a fake API server over real
HTTP, the official client, the shipped policies. Reports written once and never again while
nothing changes; what triggers an audit; which report API; exempt namespaces; the leader alone
writes; the metrics."""

from __future__ import annotations

import copy
import shutil

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from webhook import shipped_data
from webhook.audit import Auditor, build_report
from webhook.controller import report_writes
from webhook.controller.background_audit import AuditSettings, BackgroundAudit
from webhook.controller.kubeapi import KubeApi
from webhook.controller.metrics import ControllerMetrics
from webhook.controller.runner import audited_kinds
from webhook.state.memory import MemoryState
from webhook.policy import PolicyDirectory

from tests.support.apiserver import FakeApiServer
from tests.support.cel import EVALUATOR
from tests.support.paths import REPO

MANIFESTS = REPO / "examples" / "manifests"
REPORT_CRDS = REPO / "chart" / "files" / "crds" / "reports"
MODEL = ("kubeai.org/v1", "models")


def manifest(path: str, **meta) -> dict:
    obj = yaml.safe_load((MANIFESTS / path).read_text())
    obj["metadata"].update(meta)
    return obj


def bad_model(**meta) -> dict:
    """A KubeAI Model the shipped policy kubeai-model-engine fails (an ollama:// URL on vLLM)."""
    return manifest("denied-by-webhook/kubeai-model-ollama-url-with-vllm.yaml", **meta)


def good_model(**meta) -> dict:
    return manifest("valid/kubeai-model-vllm.yaml", **meta)


class Cluster:
    """The fake API server (in a thread of its own), the audit's cluster view mirroring it, and
    a clock the test moves."""

    def __init__(self, fake: FakeApiServer, url: str):
        self.fake, self.url = fake, url
        self.view = MemoryState()
        self.now = 0.0
        fake.on_change = self._mirror
        for resource in (MODEL, ("ai.deckhouse.io/v1alpha1", "inferenceserviceclasses")):
            fake.collection(*resource)

    def _mirror(self, kind_of_event, obj):
        if kind_of_event == "DELETED":
            meta = obj["metadata"]
            self.view.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        else:
            self.view.put(obj)

    def install(self, *files: str) -> None:
        """Report CRDs (file name prefixes in chart/files/crds/reports/): served from now on."""
        for path in sorted(REPORT_CRDS.glob("*.yaml")):
            if path.name.startswith(files):
                self.fake.put(yaml.safe_load(path.read_text()), "customresourcedefinitions")

    def put(self, obj: dict, plural: str = "models") -> dict:
        return self.fake.put(copy.deepcopy(obj), plural)

    def api(self) -> KubeApi:
        configuration = Configuration()
        configuration.host = self.url
        return KubeApi(ApiClient(configuration), timeout=5)

    def audit(self, policies=None, **settings) -> BackgroundAudit:
        settings = {"policy_poll_interval": 0.0, "rediscover_interval": 30.0, **settings}
        return BackgroundAudit(
            self.view, self.api(),
            policies or PolicyDirectory(shipped_data.policies_dir(), EVALUATOR),
            auditor_for=lambda policy_set: Auditor(None, policy_set, self.view).audit,
            build_report=build_report, kinds=audited_kinds(), settings=AuditSettings(**settings),
            metrics=ControllerMetrics(), clock=lambda: self.now, leading=self.leading,
        )

    leader = True

    def leading(self) -> bool:
        return self.leader

    def report_writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path in self.fake.requests
                if method in ("POST", "PUT", "PATCH", "DELETE") and "reports" in path]

    def stored(self, api_version: str, plural: str) -> dict[str, dict]:
        return {o["metadata"]["name"]: o for o in self.fake.all_objects()
                if o["apiVersion"] == api_version and plural == _plural(o)}


def _plural(obj: dict) -> str:
    return {"Report": "reports", "ClusterReport": "clusterreports", "PolicyReport": "policyreports",
            "ClusterPolicyReport": "clusterpolicyreports"}.get(obj["kind"], "")


@pytest.fixture
def cluster():
    fake = FakeApiServer()
    with fake.running() as url:
        yield Cluster(fake, url)


def report_of(cluster: Cluster, obj: dict, plural: str = "reports", api_version: str = "openreports.io/v1alpha1"):
    stored = cluster.fake.get(obj["apiVersion"], "models", obj["metadata"]["name"], obj["metadata"]["namespace"])
    return cluster.fake.get(api_version, plural, f"infergate-{stored['metadata']['uid']}", obj["metadata"]["namespace"])


def results(report: dict) -> set[tuple[str, str]]:
    return {(r["policy"], r["result"]) for r in report["results"]}


def test_one_report_per_object_written_once_and_a_converged_resync_writes_nothing(cluster):
    cluster.install("openreports")
    bad, good = cluster.put(bad_model()), cluster.put(good_model())
    cluster.put(manifest("valid/inferenceserviceclass.yaml"), "inferenceserviceclasses")
    audit = cluster.audit()
    assert audit.step() == 3
    writes = cluster.report_writes()
    assert sorted(method for method, _ in writes) == ["POST", "POST", "POST"]

    report = report_of(cluster, bad)
    assert report["kind"] == "Report" and report["source"] == "infergate"
    assert report["scope"] == {"apiVersion": "kubeai.org/v1", "kind": "Model", "namespace": "sandbox",
                               "name": "gemma-on-vllm", "uid": bad["metadata"]["uid"]}
    assert report["metadata"]["ownerReferences"] == [{"apiVersion": "kubeai.org/v1", "kind": "Model",
                                                      "name": "gemma-on-vllm", "uid": bad["metadata"]["uid"]}]
    assert ("kubeai-model-engine", "fail") in results(report) and report["summary"]["fail"] == 1
    assert report["metadata"]["labels"][report_writes.MANAGED_BY[0]] == "infergate"
    assert report_of(cluster, good)["summary"]["fail"] == 0
    (cluster_report,) = cluster.stored("openreports.io/v1alpha1", "clusterreports").values()
    assert cluster_report["scope"]["kind"] == "InferenceServiceClass" and "namespace" not in cluster_report["metadata"]

    # converged: a full resync and the rounds after it judge every object again and write nothing
    audits = audit.audits
    assert audit.scan() == 3 and audit.step() == 0
    assert audit.audits == audits + 3
    assert cluster.report_writes() == writes


def test_fixing_an_object_clears_its_failure_with_one_write(cluster):
    cluster.install("openreports")
    bad = cluster.put(bad_model())
    audit = cluster.audit()
    audit.step()
    assert report_of(cluster, bad)["summary"]["fail"] == 1
    writes = len(cluster.report_writes())

    fixed = copy.deepcopy(bad)
    fixed["spec"]["engine"] = "OLlama"
    cluster.put(fixed)
    assert audit.step() == 1  # that object, from its watch
    report = report_of(cluster, bad)
    assert report["summary"]["fail"] == 0 and ("kubeai-model-engine", "pass") in results(report)
    assert [m for m, _ in cluster.report_writes()[writes:]] == ["PUT"]
    assert audit.step() == 0 and len(cluster.report_writes()) == writes + 1


def test_a_deleted_object_is_left_to_the_garbage_collector(cluster):
    """The report names its object as owner: the controller deletes nothing itself, and stops
    counting the object's results."""
    cluster.install("openreports")
    bad = cluster.put(bad_model())
    audit = cluster.audit()
    audit.step()
    assert 'infergate_audit_results{policy="kubeai-model-engine",result="fail"} 1.0' in \
        audit.metrics.exposition().decode()
    writes = len(cluster.report_writes())
    cluster.fake.remove(*MODEL, bad["metadata"]["name"], bad["metadata"]["namespace"])
    audit.step()
    assert len(cluster.report_writes()) == writes
    assert 'infergate_audit_results{policy="kubeai-model-engine",result="fail"} 0.0' in \
        audit.metrics.exposition().decode()


def test_a_report_changed_or_deleted_by_someone_else_is_written_back(cluster):
    cluster.install("openreports")
    bad = cluster.put(bad_model())
    audit = cluster.audit()
    audit.step()
    report = report_of(cluster, bad)
    edited = copy.deepcopy(report)
    edited["results"] = []
    cluster.fake.put(edited, "reports")
    audit.step()
    assert report_of(cluster, bad)["results"] == report["results"]
    cluster.fake.remove("openreports.io/v1alpha1", "reports", report["metadata"]["name"], "sandbox")
    audit.step()
    assert report_of(cluster, bad)["results"] == report["results"]


def test_a_policy_change_audits_every_object_again(cluster, tmp_path):
    cluster.install("openreports")
    policies = tmp_path / "policies"
    shutil.copytree(shipped_data.policies_dir(), policies, ignore=shutil.ignore_patterns("tests"))
    bad = cluster.put(bad_model())
    audit = cluster.audit(PolicyDirectory(policies, EVALUATOR))
    audit.step()
    assert ("kubeai-model-engine", "fail") in results(report_of(cluster, bad))

    text = (policies / "kubeai-model.yaml").read_text()
    assert "name: kubeai-model-engine\n" in text
    (policies / "kubeai-model.yaml").write_text(text.replace("name: kubeai-model-engine\n",
                                                            "name: kubeai-model-engine-renamed\n"))
    assert audit.step() == 1  # a full scan: every object (here, one)
    assert {p for p, r in results(report_of(cluster, bad)) if r == "fail"} == {"kubeai-model-engine-renamed"}

    (policies / "kubeai-model.yaml").write_text("apiVersion: [broken\n")  # the last good set stays in force
    assert audit.step() == 0
    assert {p for p, r in results(report_of(cluster, bad)) if r == "fail"} == {"kubeai-model-engine-renamed"}


def test_periodic_scans_every_interval_and_none_with_zero(cluster):
    cluster.install("openreports")
    cluster.put(bad_model())
    audit = cluster.audit(interval=60)
    audit.step()
    assert audit.scans == 1
    cluster.now = 59
    audit.step()
    assert audit.scans == 1
    cluster.now = 61
    writes = len(cluster.report_writes())
    assert audit.step() == 1 and audit.scans == 2
    assert len(cluster.report_writes()) == writes  # converged: nothing to write

    never = cluster.audit(interval=0)
    never.step()
    cluster.now = 10 ** 6
    never.step()
    assert never.scans == 1


def test_policy_reports_where_only_wgpolicyk8s_is_served(cluster):
    cluster.install("wgpolicyk8s")
    bad = cluster.put(bad_model())
    audit = cluster.audit()
    audit.step()
    assert audit.report_api is report_writes.WGPOLICY
    report = report_of(cluster, bad, "policyreports", "wgpolicyk8s.io/v1alpha2")
    assert report["kind"] == "PolicyReport" and ("kubeai-model-engine", "fail") in results(report)
    assert all(path.startswith("/apis/wgpolicyk8s.io/v1alpha2/") for _, path in cluster.report_writes())


def test_without_report_crds_metrics_only_said_once_then_reports_when_the_crd_appears(cluster, caplog):
    cluster.put(bad_model())
    audit = cluster.audit(rediscover_interval=30)
    with caplog.at_level("INFO", logger="infergate.controller.audit"):
        audit.step()
        cluster.now = 31
        audit.step()  # looked again: still nothing, nothing said again
    said = [r.getMessage() for r in caplog.records if "metrics and logs only" in r.getMessage()]
    assert len(said) == 1 and audit.report_api is None
    assert cluster.report_writes() == []
    assert 'infergate_audit_results{policy="kubeai-model-engine",result="fail"} 1.0' in \
        audit.metrics.exposition().decode()

    cluster.install("openreports")
    cluster.now = 45
    audit.step()
    assert audit.report_api is None  # not looked for again before rediscover_interval
    cluster.now = 62
    assert audit.step() == 1 and audit.report_api is report_writes.OPENREPORTS
    assert [m for m, _ in cluster.report_writes()] == ["POST"]


def test_namespaces_the_webhook_skips_are_audited_and_reported_exempt(cluster):
    cluster.install("openreports")
    skipped = cluster.put(bad_model(namespace="kube-system"))
    judged = cluster.put(bad_model(name="other"))
    cluster.audit(exempt_namespaces=frozenset({"kube-system", "infergate-system"})).step()
    exempt = report_of(cluster, skipped)
    assert exempt["metadata"]["labels"]["audit.infergate.io/exempt"] == "true"
    assert ("kubeai-model-engine", "fail") in results(exempt)
    assert all(r["properties"]["exempt"] == "true" for r in exempt["results"])
    assert "audit.infergate.io/exempt" not in report_of(cluster, judged)["metadata"]["labels"]


def test_only_the_leader_audits_and_writes(cluster):
    cluster.install("openreports")
    cluster.put(bad_model())
    cluster.leader = False
    audit = cluster.audit()
    assert audit.step() == 0 and cluster.report_writes() == []
    cluster.leader = True
    assert audit.step() == 1  # becoming the leader: a full scan
    assert [m for m, _ in cluster.report_writes()] == ["POST"]


def test_scan_metrics(cluster):
    cluster.install("openreports")
    cluster.put(bad_model())
    cluster.put(good_model())
    audit = cluster.audit()
    audit.step()
    text = audit.metrics.exposition().decode()
    assert "infergate_audit_objects_scanned 2.0" in text
    assert 'infergate_audit_results{policy="kubeai-model-engine",result="pass"} 1.0' in text
    assert "infergate_audit_scan_duration_seconds_count 1.0" in text
    assert 'infergate_audit_report_writes_total{kind="Report",verb="create"} 2.0' in text
    assert "infergate_audit_last_scan_timestamp_seconds" in text and "infergate_audit_last_scan_timestamp_seconds 0.0" not in text


@pytest.mark.parametrize(("report", "same"), [
    ({}, True),
    ({"results": []}, False),
    ({"metadata": {"labels": {"x": "y"}}}, True),  # another's label: left alone
    ({"metadata": {"labels": {report_writes.MANAGED_BY[0]: "someone"}}}, False),
    ({"metadata": {"ownerReferences": []}}, False),
    ({"extra": 1}, False),  # a field it no longer writes
])
def test_unchanged_compares_what_the_controller_sets(report, same):
    desired = build_report(Auditor(None, PolicyDirectory(shipped_data.policies_dir(), EVALUATOR), MemoryState())
                           .audit({**bad_model(), "metadata": {**bad_model()["metadata"], "uid": "u1"}}))
    stored = copy.deepcopy(desired)
    stored["metadata"]["resourceVersion"] = "7"
    for key, value in report.items():
        if key == "metadata":
            for part, entries in value.items():
                stored["metadata"][part] = {**stored["metadata"].get(part, {}), **entries} \
                    if isinstance(entries, dict) else entries
        else:
            stored[key] = value
    assert report_writes.unchanged(stored, desired) == same
    assert not report_writes.unchanged(None, desired)


def test_the_operators_actions_are_the_audits(cluster):
    """--policy-actions (the chart's policies.actions, as the webhook has them): a policy turned
    to Warn in one namespace reports its failures there as warn, elsewhere as fail."""
    from webhook.policy.actions import parse_overrides

    cluster.install("openreports")
    cluster.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}},
                "namespaces")
    warned, failed = cluster.put(bad_model(namespace="team-a")), cluster.put(bad_model())
    policies = PolicyDirectory(shipped_data.policies_dir(), EVALUATOR,
                               actions=parse_overrides(["kubeai-model-engine=Warn@team=a"]))
    cluster.audit(policies).step()
    assert ("kubeai-model-engine", "warn") in results(report_of(cluster, warned))
    assert ("kubeai-model-engine", "fail") in results(report_of(cluster, failed))
    (result,) = [r for r in report_of(cluster, warned)["results"] if r["policy"] == "kubeai-model-engine"]
    assert result["properties"]["validationActions"] == "Warn"
