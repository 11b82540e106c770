"""The e2e code (tests/e2e) checked without a cluster, so that it cannot rot unnoticed:
selection, the objects it would create, the clean-up sweep, its REST layer, and every
scenario's expectation held against infergate's own offline answers."""

from __future__ import annotations

import base64
import http.server
import inspect
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from e2e import api, chart, cluster, decisions, offline, scenarios, selection, webhooks
from e2e import test_admission, test_controller, test_operations, test_rbac, test_release
from webhook import certs
from webhook import kinds
from webhook.schema.crd_admission import check_crd
from tests.support.paths import REPO
from tests.support.cel import EVALUATOR

E2E_MODULES = (test_admission, test_controller, test_operations, test_rbac, test_release)
KUBERNETES_VERSION = "1.32.0"


# --- selection -------------------------------------------------------------------------------


def test_e2e_runs_only_when_asked_with_a_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert "INFERGATE_E2E=1" in selection.why_not_selected({})
    assert "INFERGATE_E2E=1" in selection.why_not_selected({"KUBECONFIG": str(kubeconfig)})
    assert "KUBECONFIG not set" in selection.why_not_selected({"INFERGATE_E2E": "1"})
    assert "no file" in selection.why_not_selected({"INFERGATE_E2E": "1", "KUBECONFIG": str(tmp_path / "none")})
    assert selection.why_not_selected({"INFERGATE_E2E": "1", "KUBECONFIG": str(kubeconfig)}) is None
    assert selection.mode({}) == "local" and selection.mode({"INFERGATE_E2E_MODE": "chart"}) == "chart"
    with pytest.raises(ValueError):
        selection.mode({"INFERGATE_E2E_MODE": "kind"})


def test_every_e2e_test_carries_the_marker():
    for module in E2E_MODULES:
        assert module.pytestmark.name == selection.MARKER, module.__name__
        assert [n for n, _ in inspect.getmembers(module, inspect.isfunction) if n.startswith("test_")]


def test_without_a_cluster_pytest_reports_the_e2e_tests_deselected():
    env = {k: v for k, v in os.environ.items() if k not in ("INFERGATE_E2E", "KUBECONFIG")}
    result = subprocess.run([sys.executable, "-m", "pytest", "tests/e2e", "-q", "-p", "no:cacheprovider"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)  # collection only; slow on a loaded machine
    assert result.returncode == 5, result.stdout + result.stderr  # nothing ran: all deselected
    assert " deselected" in result.stdout and "skipped" not in result.stdout
    assert "e2e test(s) deselected: INFERGATE_E2E=1 not set" in result.stdout


# --- what the run would create -------------------------------------------------------------------


def test_webhook_configurations_come_from_infergate_webhook_config(tmp_path):
    ca_file = processes_ca(tmp_path)
    objects = webhooks.webhook_configurations("https://127.0.0.1:8443", ca_file, "r1", name="infergate-e2e-r1")
    assert [o["kind"] for o in objects] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert obj["metadata"]["name"] == "infergate-e2e-r1"
        assert obj["metadata"]["labels"][cluster.RUN_LABEL] == "r1"
        for hook in obj["webhooks"]:
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:8443/")
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca_file.read_bytes()
            assert hook["failurePolicy"] == "Fail"
            ignore = webhooks.with_failure_policy(obj, "Ignore")["webhooks"][0]
            assert ignore["failurePolicy"] == "Ignore" and hook["failurePolicy"] == "Fail"  # a copy
            assert webhooks.with_ca_bundle(obj, "QUJD")["webhooks"][0]["clientConfig"]["caBundle"] == "QUJD"


def processes_ca(tmp_path: Path) -> Path:
    from e2e import processes

    return processes.generate_certs(tmp_path)


def test_the_local_webhook_starts_and_serves_each_rotated_certificate(tmp_path):
    """The e2e machinery for real, minus the apiserver: ``infergate serve`` started as the run
    starts it, then its serving certificate reissued by the same CA and by a new one."""
    from e2e import processes

    cert_dir = tmp_path / "certs"
    processes.generate_certs(cert_dir)
    process, port = processes.start_serve("serve", cert_dir, tmp_path, ready="/healthz")
    try:
        assert processes.serves(port, cert_dir)
        old = certs.DirectoryStore(cert_dir).load()
        processes.reissue_serving(cert_dir, old.signer, old.ca_key, old.trusted)
        api.wait_for("the renewed certificate served", lambda: processes.serves(port, cert_dir), timeout=30)
        ca, ca_key = certs.issue_ca(now=certs.utcnow(), validity=certs.RotationPolicy().ca_validity)
        processes.reissue_serving(cert_dir, ca, ca_key, (*old.trusted, ca))
        api.wait_for("the new CA's certificate served", lambda: processes.serves(port, cert_dir), timeout=30)
        rotated = certs.DirectoryStore(cert_dir).load()
        assert rotated.trusted == (*old.trusted, ca) and rotated.issuer_of_cert == ca
        assert process.alive(), process.tail()
    finally:
        assert process.stop() == 0, process.tail()


def test_objects_are_labelled_for_the_run_without_server_fields():
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s", "labels": {"a": "b"}, "resourceVersion": "7", "uid": "u", "managedFields": []}}
    out = cluster.labelled(obj, "r1")
    assert out["metadata"] == {"name": "s", "labels": {"a": "b", cluster.RUN_LABEL: "r1"}}
    assert obj["metadata"]["labels"] == {"a": "b"}  # the original is left alone


def test_example_state_changes_no_cluster_wide_default():
    docs = cluster.example_state()
    kinds_in_order = [d["kind"] for d in docs]
    assert kinds_in_order.index("InferenceServiceClass") > max(i for i, k in enumerate(kinds_in_order) if k == "Namespace")
    assert not any(d.get("globalDefault") for d in docs if d["kind"] == "PriorityClass")
    assert not any("storageclass.kubernetes.io/is-default-class" in (d["metadata"].get("annotations") or {})
                   for d in docs)
    assert len(docs) == len(cluster.load_documents(cluster.STATE_DIR))


def test_support_crds_are_crds_the_apiserver_accepts():
    for crd in cluster.load_documents(cluster.SUPPORT_CRDS):
        errors, _ = check_crd(crd, EVALUATOR)
        assert errors == [], crd["metadata"]["name"]
    served = {(c["spec"]["group"], c["spec"]["names"]["kind"]) for c in cluster.load_documents(cluster.SUPPORT_CRDS)}
    assert served == {("ai.deckhouse.io", "Model"), ("ai.deckhouse.io", "ClusterModel"), ("cert-manager.io", "ClusterIssuer"),
                      ("cert-manager.io", "Certificate"), ("cert-manager.io", "Issuer"),
                      ("monitoring.coreos.com", "ServiceMonitor"), ("deckhouse.io", "ModuleConfig")}


def test_chart_mode_renders_the_chart_with_the_image_asked():
    objects = chart.render("infergate-e2e-r1", "example.org/infergate:dev")
    images = {c["image"] for o in objects if o["kind"] == "Deployment"
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"example.org/infergate:dev"}
    assert {o["kind"] for o in objects} >= set(chart.WEBHOOK_KINDS)
    with pytest.raises(ValueError):
        chart.values("no-tag")


# --- the clean-up sweep ------------------------------------------------------------------------


class RecordingKube:
    """Answers lists from ``objects`` (by the label selector asked), records deletes."""

    def __init__(self, objects):
        self.objects, self.deleted, self.selectors = list(objects), [], set()

    def list(self, api_version, kind, namespace=None, *, label_selector=None):
        self.selectors.add(label_selector)
        key, _, value = label_selector.partition("=")
        return [o for o in self.objects if (o["apiVersion"], o["kind"]) == (api_version, kind)
                and o["metadata"].get("labels", {}).get(key) == value]

    def delete(self, api_version, kind, name, namespace=None):
        self.deleted.append((kind, name))
        self.objects = [o for o in self.objects if (o["kind"], o["metadata"]["name"]) != (kind, name)]
        return api.Reply(200, {})

    def get(self, api_version, kind, name, namespace=None):
        return None


def _obj(api_version, kind, name, run=None, namespace=None):
    meta = {"name": name, "labels": {cluster.RUN_LABEL: run} if run else {}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_sweep_deletes_exactly_what_the_run_label_selects_webhooks_first_crds_last():
    kube = RecordingKube([
        _obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "models.kubeai.org", "r1"),
        _obj("v1", "Namespace", "ml-team", "r1"),
        _obj("kubeai.org/v1", "Model", "m", "r1", "ml-team"),
        _obj("kubeai.org/v1", "Model", "someone-elses", None, "ml-team"),
        _obj("kubeai.org/v1", "Model", "other-run", "r2", "ml-team"),
        _obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "infergate-e2e-r1", "r1"),
    ])
    assert cluster.sweep(kube, "r1", timeout=1) == []
    assert kube.selectors == {cluster.selector("r1")} == {f"{cluster.RUN_LABEL}=r1"}
    assert kube.deleted == [("ValidatingWebhookConfiguration", "infergate-e2e-r1"), ("Model", "m"),
                            ("Namespace", "ml-team"), ("CustomResourceDefinition", "models.kubeai.org")]


def test_sweep_covers_every_kind_the_run_creates():
    swept = set(cluster.SWEEP_KINDS)
    created = {(d["apiVersion"], d["kind"]) for d in cluster.example_state()}
    created |= {(d["apiVersion"], d["kind"]) for d in [*cluster.bundled_crds(), *cluster.load_documents(cluster.SUPPORT_CRDS)]}
    created |= {(c.obj["apiVersion"], c.obj["kind"]) for c in scenarios.all_cases()}
    created |= {(k.api_version, k.kind) for k in kinds.OWNED} | {cluster.VWC, cluster.MWC, ("v1", "Pod"),
                                                                   ("resource.k8s.io/v1", "ResourceClaim")}
    created |= {(o["apiVersion"], o["kind"]) for o in chart.render("infergate-e2e-r1", "example.org/infergate:dev")}
    assert created - swept == set()


# --- the REST layer ----------------------------------------------------------------------------


class _Apiserver(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.command, self.path, body))
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422, "reason": "Invalid",
                  "message": 'Model.kubeai.org "m" is invalid: spec.url: Invalid value'}
        data = json.dumps(status).encode()
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Warning", '299 - "spec.owner is deprecated, say \\"owner\\""')
        self.send_header("Warning", '299 - "second, with a comma"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_kube_reply_carries_the_status_and_every_warning():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Apiserver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        configuration = Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
        kube = api.Kube(ApiClient(configuration))
        kube.discovered["kubeai.org/v1"] = {"Model": api.Resource("kubeai.org/v1", "Model", "models", True)}
        obj = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ml-team"}}
        reply = kube.create(obj, dry_run=True)
    finally:
        server.shutdown()
    assert (reply.status, reply.ok) == (422, False)
    assert reply.message == 'Model.kubeai.org "m" is invalid: spec.url: Invalid value'
    assert reply.warnings == ['spec.owner is deprecated, say "owner"', "second, with a comma"]
    assert _Apiserver.seen == [("POST", "/apis/kubeai.org/v1/namespaces/ml-team/models?dryRun=All", obj)]


# --- docs/decisions.md, and every scenario's expectation offline -------------------------------------


def referenced_decisions() -> list[tuple[str, str, str]]:
    """(test, section, phrase) for every ``decision`` marker, on tests and on their params."""
    found = []
    for module in E2E_MODULES:
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == decisions.MARKER:
                    found.append((name, *mark.args))
                elif mark.name == "parametrize":
                    for param in mark.args[1]:
                        found += [(name, *m.args) for m in getattr(param, "marks", ()) if m.name == decisions.MARKER]
    return found


def test_every_decision_is_exercised_by_an_e2e_scenario():
    all_rules = decisions.rules(decisions.DECISIONS.read_text())
    assert len(all_rules) > 30
    referenced = referenced_decisions()
    for test, section, phrase in referenced:
        assert len(decisions.matching(all_rules, section, phrase)) == 1, (test, section, phrase)
    covered = {rule for _, section, phrase in referenced for rule in decisions.matching(all_rules, section, phrase)}
    assert [str(r) for r in all_rules if r not in covered] == []


@pytest.fixture(scope="module")
def offline_answers():
    cases = scenarios.all_cases()
    return cases, offline.validate([c.obj for c in cases])


def test_every_admission_scenario_holds_offline(offline_answers):
    """What each scenario expects of the cluster, infergate's own emulation answers too."""
    for case, answer in zip(*offline_answers):
        message = (answer.get("status") or {}).get("message", "")
        test_admission.check_expectation(case, answer["allowed"], message, answer["warnings"],
                                         answer["object"] if answer["allowed"] else None)


def test_crd_scenarios_are_denied_by_the_crds_alone_offline():
    cases = scenarios.crd_only_cases()
    for case, answer in zip(cases, offline.validate([c.obj for c in cases], crd_only=True)):
        assert not answer["allowed"], case.id
        for phrase in case.message:
            assert phrase in answer["status"]["message"], case.id


def test_immutable_changes_are_the_only_denial_offline(offline_answers):
    cases, answers = offline_answers
    admitted = next(a["object"] for c, a in zip(cases, answers) if c.id == "valid/inferenceservice-huggingface.yaml")
    stored, changed = [], []
    for which in scenarios.IMMUTABLE_CHANGES:  # one stored copy per change, named apart: one offline call
        copy = json.loads(json.dumps(admitted))
        copy["metadata"].update(name=f"e2e-{which.lower().replace('.', '-')}", uid="u", resourceVersion="1",
                                generation=1, creationTimestamp="2026-01-01T00:00:00Z")
        stored.append(copy)
        changed.append(scenarios.immutable_change(copy, which))
    for (which, (path, _)), answer in zip(scenarios.IMMUTABLE_CHANGES.items(), offline.validate(changed, old=stored)):
        assert [c["field"] for c in answer["status"]["details"]["causes"]] == [path], which


def test_kubectl_expectation_follows_its_error_printing():
    invalid = {"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
               "message": 'Model.kubeai.org "m" is invalid: spec.url: Invalid value: "x": bad',
               "details": {"kind": "Model", "name": "m", "causes": [
                   {"field": "spec.url", "message": 'Invalid value: "x": bad', "reason": "FieldValueInvalid"}]}}
    assert test_admission.kubectl_prints(invalid) == ['The Model "m" is invalid', 'spec.url: Invalid value: "x": bad']
    refused = {"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500,
               "message": 'Internal error occurred: failed calling webhook "validate.infergate.io": connection refused'}
    assert test_admission.kubectl_prints(refused) == ["Error from server (InternalError)", refused["message"]]


def test_controller_expectations_hold_offline(offline_answers):
    cases, answers = offline_answers
    admitted = {c.id: a["object"] for c, a in zip(cases, answers) if a["allowed"]}
    statuses = {(s["kind"], s["metadata"].get("namespace"), s["metadata"]["name"]): s["status"]
                for s in offline.reconcile(list(admitted.values()))}

    def status_of(case_id):
        meta = admitted[case_id]["metadata"]
        return statuses[(admitted[case_id]["kind"], meta.get("namespace"), meta["name"])]

    test_controller.check_placements(status_of)
    in_use = status_of("inferencemodel-model-name-in-use-warns")
    assert [(c["status"], c["reason"]) for c in in_use["conditions"] if c["type"] == "Accepted"] == [
        ("False", "ModelNameInUse")]


def test_stuck_namespaces_are_finalized_only_without_a_namespace_controller():
    class Namespaces:
        def __init__(self):
            self.puts = []

        def get(self, api_version, kind, name, namespace=None):
            conditions = [{"type": "NamespaceContentRemaining", "status": "False"}] if name == "worked-on" else []
            return {"metadata": {"name": name}, "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Terminating", "conditions": conditions}}

        def request(self, method, path, body=None, **_):
            self.puts.append((method, path, body["spec"]["finalizers"]))

    kube = Namespaces()
    cluster.finish_namespaces(kube, ["orphan", "worked-on"], wait=0)
    assert kube.puts == [("PUT", "/api/v1/namespaces/orphan/finalize", [])]


def test_set_up_and_sweep_leave_the_cluster_as_they_found_it():
    """The set-up's real requests (CRDs and their Established wait, the example state with the
    catalog's status, ServiceAccounts) and the sweep, against the fake apiserver."""
    from tests.support.apiserver import FakeApiServer

    before = [_obj("v1", "Namespace", "kube-system"), _obj("v1", "Namespace", "default"),
              _obj("v1", "Secret", "someone-elses", None, "default")]
    server = FakeApiServer(before, builtins=True)
    with server.running() as url:
        kube = api.Kube(ApiClient(Configuration(host=url)))
        found = server.all_objects()
        names = cluster.cluster_wide_names(kube)
        assert names == {"Namespace/kube-system", "Namespace/default"}  # the kinds it lacks skipped
        owned = cluster.Owned("r1")
        crds = cluster.bundled_crds() + cluster.support_crds(kube)
        support = cluster.load_documents(cluster.SUPPORT_CRDS)
        assert crds[len(crds) - len(support):] == support  # the cluster served none of them
        assert cluster.apply_crds(kube, crds, owned) == [c["metadata"]["name"] for c in crds]
        for obj in cluster.example_state():
            stored = cluster.create_owned(kube, obj, owned)
            assert stored.get("status") == obj.get("status") or not obj.get("status")
        assert owned.borrowed_namespaces == {"kube-system"}
        cluster.ensure_service_account(kube, "ml-team", owned)
        labelled = [o for o in server.all_objects() if o["metadata"].get("labels", {}).get(cluster.RUN_LABEL) == "r1"]
        assert len(labelled) == len(crds) + len(cluster.example_state()) - 1 + 1  # kube-system borrowed; + the SA
        catalog = kube.get("ai.deckhouse.io/v1alpha1", "ClusterModel", "qwen3-8b")
        assert catalog["status"]["resolved"]  # the facts the planner reads
        with pytest.raises(cluster.ClusterNotScratch, match="left over from e2e run r1"):
            cluster.create_owned(kube, cluster.example_state()[-1], cluster.Owned("r2"))
        assert cluster.sweep(kube, "r1", timeout=5) == []
        assert server.all_objects() == found
        assert cluster.changed_since(names, cluster.cluster_wide_names(kube)) == []
        # what the run label cannot find still fails the run: an unlabelled leftover, a loss
        kube.create(_obj("rbac.authorization.k8s.io/v1", "ClusterRole", "made-by-someone-on-the-way")).expect_ok()
        kube.delete("v1", "Namespace", "default").expect_ok()
        assert cluster.changed_since(names, cluster.cluster_wide_names(kube)) == [
            "left behind: ClusterRole/made-by-someone-on-the-way", "gone, though the run found it: Namespace/default"]


# --- a native run (INFERGATE_E2E_NATIVE_POLICIES=1) ----------------------------------------------


def test_a_native_run_installs_and_expects_the_switched_cluster(monkeypatch):
    """With policies.native.enabled the run's release and the local identities carry the
    native RBAC and values; the offline answers are the switched cluster's: an exported rule
    denied by its VAP (also with the webhook out of the path), exported warnings once in the
    apiserver's words, an exported mutation applied by its MAP with the webhook out of the path,
    and the webhook-only probe still the webhook's."""
    from e2e import identities, native

    monkeypatch.setenv("INFERGATE_E2E_NATIVE_POLICIES", "1")
    assert selection.native_policies()
    assert chart.release_values("example.org/infergate:dev", "r1", True)["policies"] == selection.NATIVE_VALUES["policies"]
    owner = identities.native_owner("infergate-e2e-r1")
    assert any(o["kind"] == "ClusterRole" and o["metadata"]["name"] == owner
               for o in identities.chart_rbac("infergate-e2e-r1", True))
    assert not any(o["metadata"]["name"] == owner for o in identities.chart_rbac("infergate-e2e-r1"))

    def answer(relative, **kwargs):
        (obj,) = cluster.load_documents(cluster.MANIFESTS_DIR / relative)
        return offline.validate([obj], **kwargs)[0]

    from e2e.test_native_policies import EXPORTED_DENIAL, EXPORTED_MUTATION

    for kwargs in ({}, {"crd_only": True}):
        denied = answer(EXPORTED_DENIAL, **kwargs)
        assert not denied["allowed"] and native.VAP_PREFIX + "infergate-kubeai-model-engine'" in denied["status"]["message"]
    warned = answer(native.SWITCH_PROBE)
    assert warned["allowed"] and len(warned["warnings"]) == 1
    assert warned["warnings"][0].startswith(f"Validation failed for {native.VAP_PREFIX}infergate-kubeai-model-engine-warn'")
    probe = answer(scenarios.webhook_probe())
    assert scenarios.WEBHOOK_DENIAL in probe["status"]["message"]
    assert answer(scenarios.webhook_probe(), crd_only=True)["allowed"]
    for kwargs in ({}, {"crd_only": True}):  # the webhook's mutation or the apiserver's MAP: the same default
        assert answer(EXPORTED_MUTATION, **kwargs)["object"]["spec"]["minReplicas"] == 0
    monkeypatch.delenv("INFERGATE_E2E_NATIVE_POLICIES")  # not native: the webhook's, and the CRDs admit it
    assert scenarios.WEBHOOK_DENIAL in answer(EXPORTED_DENIAL)["status"]["message"]
    assert answer(EXPORTED_DENIAL, crd_only=True)["allowed"]
    assert answer(EXPORTED_MUTATION)["object"]["spec"]["minReplicas"] == 0
    assert "minReplicas" not in answer(EXPORTED_MUTATION, crd_only=True)["object"]["spec"]  # no webhook: no default
