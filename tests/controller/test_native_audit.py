"""The background audit of the cluster's own ValidatingAdmissionPolicies (``--audit-native-policies``)
against the Kubernetes API's wire format: a fake API server over real HTTP, the official client,
the shipped policies beside the cluster's VAPs. Each binding's result goes into the object's one
report (policy = the VAP, rule = ``validations[i]``): Deny -> fail, Warn -> warn, Audit -> fail
under Audit; an evaluation error under failurePolicy Fail -> error, under Ignore -> nothing;
infergate's own generated VAPs left out; a rule reading the authorizer left out (unknown). A
converged resync writes nothing; a VAP, binding or param change re-audits; a result goes with its
binding and its VAP."""

from __future__ import annotations

import asyncio
import copy
import re
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from webhook import shipped_data
from webhook.audit import Auditor, build_report
from webhook.controller.background_audit import AuditSettings, BackgroundAudit
from webhook.controller.metrics import ControllerMetrics
from webhook.controller.runner import audited_kinds, controller_watches
from webhook.inputs.watches import native_policy_watches
from webhook.policy import PolicyDirectory
from webhook.policy.native.cluster import ClusterNativePolicies
from webhook.state.kube import Backoff, KubeState

from tests.controller.test_background_audit import Cluster, good_model, report_of
from tests.support.apiserver import FakeApiServer
from tests.support.cel import EVALUATOR

VAPS = ("admissionregistration.k8s.io/v1", "validatingadmissionpolicies")
BINDINGS = ("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings")
CONFIG_MAPS = ("v1", "configmaps")
NAMESPACES = ("v1", "namespaces")

CLUSTER_POLICIES = """\
# replicas under a per-namespace limit (a ConfigMap param), denied
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-replicas}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [models]}
  validations:
  - expression: "object.spec.?maxReplicas.orValue(0) <= int(params.data.maxReplicas)"
    messageExpression: "'at most ' + params.data.maxReplicas + ' replicas'"
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: a team label is required
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-replicas}
spec:
  policyName: s1-replicas
  validationActions: [Deny]
  paramRef: {name: s1-limits, parameterNotFoundAction: Deny}
---
# warned only
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-engine}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: ["*"], resources: [models]}
  validations:
  - expression: "object.spec.engine == 'OLlama'"
    message: OLlama only
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-engine-warn}
spec: {policyName: s1-engine, validationActions: [Warn]}
---
# recorded only
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-url}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: [CREATE], resources: [models]}
  validations:
  - expression: "object.spec.url.startsWith('s3://')"
    message: models come from S3
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-url-audit}
spec: {policyName: s1-url, validationActions: [Audit]}
---
# an evaluation error: failurePolicy Fail gives an error result, Ignore nothing
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-broken-fail}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: [CREATE], resources: [models]}
  validations:
  - expression: "int(object.spec.url) > 0"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-broken-fail}
spec: {policyName: s1-broken-fail, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-broken-ignore}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: [CREATE], resources: [models]}
  validations:
  - expression: "int(object.spec.url) > 0"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-broken-ignore}
spec: {policyName: s1-broken-ignore, validationActions: [Deny]}
---
# the authorizer has no answer offline: the rule is left out, the rest judged
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: s1-authz}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: [CREATE], resources: [models]}
  validations:
  - expression: "authorizer.group('').resource('secrets').check('list').allowed()"
  - expression: "object.spec.engine == 'OLlama'"
    message: OLlama only (authz)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: s1-authz}
spec: {policyName: s1-authz, validationActions: [Deny]}
---
# generated by infergate from an AdmissionPolicy: audited as that policy already, left out here
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: infergate-kubeai-model-engine
  labels: {app.kubernetes.io/managed-by: infergate}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], apiVersions: ["*"], operations: [CREATE], resources: [models]}
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: infergate-kubeai-model-engine
  labels: {app.kubernetes.io/managed-by: infergate}
spec: {policyName: infergate-kubeai-model-engine, validationActions: [Deny]}
"""


def limits(max_replicas: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s1-limits", "namespace": "ml-team"},
            "data": {"maxReplicas": str(max_replicas)}}


class NativeCluster(Cluster):
    """The fake API server also serving VAPs, bindings, ConfigMaps and Namespaces."""

    def __init__(self, fake: FakeApiServer, url: str):
        super().__init__(fake, url)
        for resource in (VAPS, BINDINGS, CONFIG_MAPS, NAMESPACES):
            fake.collection(*resource)
        self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}, "namespaces")
        for doc in yaml.safe_load_all(CLUSTER_POLICIES):
            self.put(doc, VAPS[1] if doc["kind"] == "ValidatingAdmissionPolicy" else BINDINGS[1])

    def native_audit(self, view=None) -> tuple[BackgroundAudit, ClusterNativePolicies]:
        """The background audit with the cluster's VAPs beside the shipped policies, reading
        ``view`` (the cluster's own by default); every round looks at the policies."""
        view = view if view is not None else self.view
        native = ClusterNativePolicies(PolicyDirectory(shipped_data.policies_dir(), EVALUATOR), view, EVALUATOR)
        audit = BackgroundAudit(
            view, self.api(), native,
            auditor_for=lambda policy_set: Auditor(None, policy_set, view).audit,
            build_report=build_report, kinds=audited_kinds(),
            settings=AuditSettings(policy_poll_interval=0.0, rediscover_interval=30.0, sync_wait=30.0),
            metrics=ControllerMetrics(), clock=lambda: self.now, leading=lambda: True,
        )
        return audit, native


@pytest.fixture
def cluster():
    fake = FakeApiServer()
    with fake.running() as url:
        yield NativeCluster(fake, url)


@pytest.fixture
def bad(cluster) -> dict:
    """The scene every case starts from: reports served, the limit ConfigMap at 2 replicas, and a
    Model that breaks most of the cluster's VAPs (3 replicas, no team label, vLLM, hf://)."""
    cluster.install("openreports")
    cluster.put(limits(2), "configmaps")
    return cluster.put(model(maxReplicas=3))


def native_results(report: dict) -> set[tuple[str, str, str, str]]:
    return {(r["policy"], r.get("rule", ""), r["result"], r.get("message", "")) for r in report["results"]
            if r["policy"].startswith(("s1-", "infergate-"))}


def model(**changes) -> dict:
    obj = good_model()
    obj["metadata"].pop("labels", None)
    obj["spec"].update(changes)
    return obj


def test_the_clusters_vaps_write_into_the_same_reports_and_a_converged_resync_writes_nothing(cluster, bad):
    audit, native = cluster.native_audit()
    assert audit.step() == 1
    assert native.param_kinds == {("v1", "ConfigMap")}
    assert [p.name for p in native.current().native.policies] == [
        "s1-authz", "s1-broken-fail", "s1-broken-ignore", "s1-engine", "s1-replicas", "s1-url"]
    assert native.read.generated == ("ValidatingAdmissionPolicy infergate-kubeai-model-engine",
                                     "ValidatingAdmissionPolicyBinding infergate-kubeai-model-engine")
    report = report_of(cluster, bad)
    assert native_results(report) == {
        ("s1-replicas", "validations[0]", "fail", "at most 2 replicas"),
        ("s1-replicas", "validations[1]", "fail", "a team label is required"),
        ("s1-engine", "validations[0]", "warn", "OLlama only"),
        ("s1-url", "validations[0]", "fail", "models come from S3"),
        ("s1-broken-fail", "validations[0]", "error", _error_message(report, "s1-broken-fail")),
        ("s1-authz", "validations[1]", "fail", "OLlama only (authz)"),
    }
    by_policy = {r["policy"]: r for r in report["results"]}
    assert by_policy["s1-url"]["properties"]["validationActions"] == "Audit"
    assert by_policy["s1-engine"]["properties"]["validationActions"] == "Warn"
    assert "s1-broken-ignore" not in by_policy  # failurePolicy Ignore: the apiserver says nothing
    # the shipped AdmissionPolicies' results stay in the same report
    assert ("kubeai-model-engine", "pass") in {(r["policy"], r["result"]) for r in report["results"]}

    # converged: a full resync and the rounds after it write nothing
    writes = cluster.report_writes()
    assert audit.scan() == 1 and audit.step() == 0
    assert cluster.report_writes() == writes


def _error_message(report: dict, policy: str) -> str:
    (found,) = [r for r in report["results"] if r["policy"] == policy]
    assert "resulted in error" in found["message"], found
    return found["message"]


def test_a_binding_vap_or_param_change_re_audits_and_a_result_goes_with_its_binding_and_vap(cluster, bad):
    audit, _ = cluster.native_audit()
    audit.step()
    assert ("s1-replicas", "validations[0]", "fail", "at most 2 replicas") in native_results(report_of(cluster, bad))
    writes = len(cluster.report_writes())

    # the param raised: re-audited without an object change, one write
    cluster.put(limits(5), "configmaps")
    assert audit.step() == 1
    found = native_results(report_of(cluster, bad))
    assert not any(p == "s1-replicas" and rule == "validations[0]" for p, rule, _, _ in found)
    assert len(cluster.report_writes()) == writes + 1

    # the binding deleted: its results go
    cluster.fake.remove(*BINDINGS, "s1-engine-warn")
    assert audit.step() == 1
    assert not any(p == "s1-engine" for p, *_ in native_results(report_of(cluster, bad)))

    # a binding's actions changed: the same failure under Deny is a fail
    binding = copy.deepcopy(cluster.fake.get(*BINDINGS, "s1-url-audit"))
    binding["spec"]["validationActions"] = ["Deny"]
    cluster.put(binding, BINDINGS[1])
    assert audit.step() == 1
    (url,) = [r for r in report_of(cluster, bad)["results"] if r["policy"] == "s1-url"]
    assert (url["result"], url["properties"]["validationActions"]) == ("fail", "Deny")

    # the VAP deleted: its results go, its binding alone does nothing
    cluster.fake.remove(*VAPS, "s1-replicas")
    assert audit.step() == 1
    assert not any(p == "s1-replicas" for p, *_ in native_results(report_of(cluster, bad)))
    writes = len(cluster.report_writes())
    assert audit.scan() == 1 and len(cluster.report_writes()) == writes  # converged again


def test_a_vap_that_does_not_compile_is_left_out_and_the_others_judged(cluster, bad, caplog):
    cluster.put({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                 "metadata": {"name": "s1-unknown-function"},
                 "spec": {"matchConstraints": {"resourceRules": [
                     {"apiGroups": ["kubeai.org"], "apiVersions": ["*"], "operations": ["*"],
                      "resources": ["models"]}]},
                     "validations": [{"expression": "object.spec.noSuchFunction()"}]}}, VAPS[1])
    audit, native = cluster.native_audit()
    audit.step()
    (problem,) = native.read.problems
    assert problem.startswith("ValidatingAdmissionPolicy s1-unknown-function: spec.validations[0].expression")
    assert "left out of the audit: ValidatingAdmissionPolicy s1-unknown-function" in caplog.text
    assert ("s1-replicas", "validations[0]", "fail", "at most 2 replicas") in native_results(report_of(cluster, bad))


def test_the_watch_list_holds_the_vaps_bindings_and_every_object_of_a_param_kind():
    plain = controller_watches((), True)
    with_native = controller_watches((), True, native_params=frozenset({("v1", "ConfigMap")}))
    assert not any(w.kind.startswith("ValidatingAdmissionPolicy") for w in plain)
    (config_map,) = [w for w in plain if w.kind == "ConfigMap"]
    assert config_map.field_selector == "metadata.name=kubeai-config"  # the lookup alone
    kinds = {w.kind: w for w in with_native}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= set(kinds)
    assert kinds["ConfigMap"].field_selector is None  # a paramRef may name any ConfigMap
    assert [w.plural for w in native_policy_watches()] == ["validatingadmissionpolicies",
                                                           "validatingadmissionpolicybindings"]


class SyncingView:
    """A cluster view that says, as a watch cache does, which kinds it added since its first
    sync and has not synced yet (``pending``)."""

    def __init__(self, view):
        self.view, self.pending = view, None

    def __getattr__(self, name):
        return getattr(self.view, name)


def test_a_round_waits_for_kinds_being_synced_then_scans_and_gives_up_waiting_after_sync_wait(cluster, bad):
    """Params being synced would be unknown: a report written then would lack the VAP's results
    and be written again once they sync. The audit waits instead (``sync_wait``), then scans."""
    view = SyncingView(cluster.view)
    audit, _ = cluster.native_audit(view)
    view.pending = "not synced, lookups unknown: ConfigMap.core (not synced yet)"
    assert audit.step() == 0 and cluster.report_writes() == []
    cluster.now = 10
    assert audit.step() == 0 and cluster.report_writes() == []
    view.pending = None  # synced: the scan put off runs now, once
    assert audit.step() == 1
    assert ("s1-replicas", "validations[0]", "fail", "at most 2 replicas") in native_results(report_of(cluster, bad))
    assert [m for m, _ in cluster.report_writes()] == ["POST"]

    # a kind that never syncs (RBAC forbids it): judged without it after sync_wait
    view.pending = "not synced, lookups unknown: Secret.core (403 Forbidden)"
    cluster.put(model(maxReplicas=1))
    assert audit.step() == 0
    cluster.now = 41
    assert audit.step() == 1


# -- params of a custom resource, over the controller's own watch cache ----------------------------
# The policies, params and Models of a recording (``tests/policy/native/cases/params-custom.yaml``:
# what kube-apiserver v1.36.2 answered to each Model's create with these VAPs in force); here
# the Models are stored, the controller's watch cache (``KubeState``) follows the API over HTTP,
# the param kinds are found through its discovery, and each Model's report must say what the
# apiserver said.
CUSTOM = Path(__file__).parents[1] / "policy" / "native" / "cases" / "params-custom.yaml"
DENIED = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: (.*)", re.S)


def _served_crds(fake: FakeApiServer, suite: dict) -> None:
    root = Path(__file__).parents[2]
    for path in suite["crds"]:
        fake.put(yaml.safe_load((root / path).read_text()), "customresourcedefinitions")


class Watched:
    """The controller's pieces as ``infergate controller --audit-native-policies`` wires them:
    a watch cache of the API, the cluster's VAPs found in it, their params' kinds discovered and
    watched, the background audit over it."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        api = cluster.api()
        configuration = Configuration()
        configuration.host = cluster.url
        self.native: ClusterNativePolicies | None = None
        directory = PolicyDirectory(shipped_data.policies_dir(), EVALUATOR)
        self.state = KubeState(ApiClient(configuration), self.watch_list(), backoff=Backoff(0.05, 0.2))
        self.native = ClusterNativePolicies(directory, self.state, EVALUATOR, discover=api.served_kind,
                                            clock=lambda: cluster.now)
        self.native.on_params.append(lambda _params: self.state.set_kinds(self.watch_list()))
        self.audit = BackgroundAudit(
            self.state, api, self.native,
            auditor_for=lambda policy_set: Auditor(None, policy_set, self.state).audit,
            build_report=build_report, kinds=audited_kinds(),
            settings=AuditSettings(policy_poll_interval=0.0, rediscover_interval=30.0, sync_wait=5.0),
            metrics=ControllerMetrics(), clock=lambda: cluster.now, leading=lambda: True)

    def watch_list(self):
        native = self.native
        return controller_watches((), True, None, native.param_kinds if native else frozenset(),
                                  native.read.discovered if native else None)

    def step_until(self, done, what: str, deadline_s: float = 20.0) -> None:
        """Audit rounds until ``done()`` (the watch cache syncs in its threads), with a deadline."""
        deadline = time.monotonic() + deadline_s
        while True:
            self.audit.step()
            if done():
                return
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            time.sleep(0.05)  # a poll's interval, bounded by the deadline above


def _with_policies(fake, url: str, suite: dict) -> Cluster:
    """The fake apiserver serving VAPs, their bindings, OpenReports and the suite's CRDs, with
    the suite's policies stored."""
    cluster = Cluster(fake, url)
    for resource in (VAPS, BINDINGS):
        fake.serve_resource(*resource, "ValidatingAdmissionPolicy" if resource is VAPS
                            else "ValidatingAdmissionPolicyBinding", False)
    cluster.install("openreports")
    _served_crds(fake, suite)
    for obj in suite["policies"]:
        cluster.put(obj, VAPS[1] if obj["kind"] == "ValidatingAdmissionPolicy" else BINDINGS[1])
    return cluster


@pytest.fixture
def custom_cluster():
    suite = yaml.safe_load(CUSTOM.read_text())
    fake = FakeApiServer(builtins=True)
    with fake.running() as url:
        cluster = _with_policies(fake, url, suite)
        for obj in suite["state"]:
            cluster.put(obj, {"Namespace": "namespaces", "Widget": "widgets", "Gadget": "gadgets"}[obj["kind"]])
        watched = Watched(cluster)
        watched.state.start()
        try:
            yield suite, cluster, watched
        finally:
            watched.state.stop()


def _custom_results(report: dict | None) -> set[tuple[str, str, str]]:
    return {(r["policy"], r["result"], r.get("message", "")) for r in (report or {}).get("results", ())
            if r["policy"].startswith("n6-")}


def test_vaps_whose_params_are_custom_resources_are_audited_as_the_apiserver_answered(custom_cluster):
    suite, cluster, watched = custom_cluster
    models = [cluster.put(case["object"]) for case in suite["cases"]]
    assert asyncio.run(watched.state.wait_ready(15))
    watched.step_until(lambda: all(report_of(cluster, m) is not None for m in models)
                       and watched.state.pending is None, "every Model's report")
    watched.step_until(lambda: watched.audit.step() == 0, "a converged round")

    assert watched.native.read.unsupported == ()
    assert {k: (v.plural, v.namespaced) for k, v in watched.native.read.discovered.items()} == {
        ("n6.example.com/v1", "Gadget"): ("gadgets", False), ("n6.example.com/v1", "Widget"): ("widgets", True)}
    for case, model in zip(suite["cases"], models):
        found = _custom_results(report_of(cluster, model))
        failed = {(p, result, message) for p, result, message in found if result in ("fail", "error")}
        if case["expect"]["allowed"]:
            assert not failed, case["name"]
            continue
        policy, _binding, message = DENIED.fullmatch(case["expect"]["status"]["details"]["causes"][0]["message"]
                                                     ).groups()
        # the apiserver's first denial; a configuration error ("no params found") is an error result
        result = "error" if message.startswith("failed to configure") else "fail"
        assert (policy, result, message) in failed, (case["name"], found)
        assert {p for p, *_ in failed} == {policy}, case["name"]

    writes = cluster.report_writes()
    assert watched.audit.scan() == len(models) and cluster.report_writes() == writes  # converged

    # a Widget edited: the Models it limits are audited again
    limit = copy.deepcopy(cluster.fake.get("n6.example.com/v1", "widgets", "n6-limit", "n6-custom-by-name"))
    limit["spec"]["maxReplicas"] = 3
    cluster.put(limit, "widgets")
    over = models[[c["name"] for c in suite["cases"]].index("by name, over the limit")]
    watched.step_until(lambda: not any(r == "fail" for _, r, _ in _custom_results(report_of(cluster, over))),
                       "the raised limit's re-audit")


def test_a_param_kind_rbac_forbids_leaves_exactly_its_vaps_unknown_and_named(custom_cluster, caplog):
    suite, cluster, watched = custom_cluster
    cluster.fake.collection("n6.example.com/v1", "gadgets").forbidden = True
    models = {case["name"]: cluster.put(case["object"]) for case in suite["cases"]}
    assert asyncio.run(watched.state.wait_ready(15))
    # the Gadgets never sync: the audit waits sync_wait (5 s on the test's clock), then judges
    # without them
    watched.step_until(lambda: "403" in (watched.state.pending or ""), "the Gadgets' 403")
    assert watched.audit.step() == 0
    cluster.now = 6.0
    watched.step_until(lambda: all(report_of(cluster, m) is not None for m in models.values()), "every report")

    (unknown,) = watched.native.unknown
    assert unknown == ("ValidatingAdmissionPolicy n6-gadget-engine: its params (Gadget.n6.example.com) "
                       "cannot be read (HTTP 403 Forbidden): its bindings are not judged")
    assert "not judged, params unknown: ValidatingAdmissionPolicy n6-gadget-engine" in caplog.text
    # the Gadget's VAP judged nothing (its failing and its not-found cases alike)...
    for name in ("cluster-scoped param by name, fails", "cluster-scoped param not found under Deny"):
        assert not any(p == "n6-gadget-engine" for p, *_ in _custom_results(report_of(cluster, models[name]))), name
    # ...the Widget's VAP is judged as the apiserver answered
    assert ("n6-widget-limit", "fail", "n6-limit allows 2 replicas") in _custom_results(
        report_of(cluster, models["by name, over the limit"]))


def test_a_param_kind_not_served_gets_the_apiservers_error_until_its_crd_is_installed():
    """The Gadget CRD absent: discovery serves no Gadget, and the apiserver's answer to the
    Gadget's VAP is its configuration error (recorded in ``cases/edges.yaml``), an error result
    under failurePolicy Fail. The CRD installed later is found at the next look (every
    ``rediscover_interval``), the Gadgets watched, and the Models judged as recorded."""
    suite = yaml.safe_load(CUSTOM.read_text())
    gadget_crd = [p for p in suite["crds"] if "gadgets" in p]
    suite["crds"] = [p for p in suite["crds"] if p not in gadget_crd]
    gadgets = [o for o in suite["state"] if o["kind"] == "Gadget"]
    suite["state"] = [o for o in suite["state"] if o["kind"] != "Gadget"]
    fake = FakeApiServer(builtins=True)
    with fake.running() as url:
        cluster = _with_policies(fake, url, suite)
        for obj in suite["state"]:
            cluster.put(obj, {"Namespace": "namespaces", "Widget": "widgets"}[obj["kind"]])
        cases = {case["name"]: case for case in suite["cases"]}
        fails = cluster.put(cases["cluster-scoped param by name, fails"]["object"])
        watched = Watched(cluster)
        watched.state.start()
        try:
            assert asyncio.run(watched.state.wait_ready(15))
            not_found = ("n6-gadget-engine", "error", "failed to configure policy: failed to find resource "
                         "referenced by paramKind: 'n6.example.com/v1, Kind=Gadget'")
            watched.step_until(lambda: not_found in _custom_results(report_of(cluster, fails)),
                               "the apiserver's error for a param kind not served")
            assert watched.native.read.undiscovered == {("n6.example.com/v1", "Gadget")}

            _served_crds(fake, {"crds": gadget_crd})
            for obj in gadgets:
                cluster.put(obj, "gadgets")
            cluster.now = 29.0  # not looked up again yet
            watched.audit.step()
            assert not_found in _custom_results(report_of(cluster, fails))
            cluster.now = 31.0
            expected = ("n6-gadget-engine", "fail", "engine VLLM only (n6-engine)")
            watched.step_until(lambda: _custom_results(report_of(cluster, fails)) == {expected},
                               "the Gadget's verdict once its CRD is served")
            assert watched.native.read.undiscovered == frozenset()
        finally:
            watched.state.stop()
