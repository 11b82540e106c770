"""``infergate audit --kubeconfig K --native-policies``: the live cluster's own
ValidatingAdmissionPolicies, bindings and params read (a fake API server over real HTTP, the
official client) and every served object judged by them beside the AdmissionPolicies, in each
output format; infergate's generated VAPs left out; a rule reading the authorizer named in the
note; nothing written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.controller.test_native_audit import CLUSTER_POLICIES, CUSTOM, DENIED, limits, model
from tests.offline.test_audit_command import KUBECONFIG, run
from tests.support.apiserver import FakeApiServer

VAP_API = "admissionregistration.k8s.io/v1"


@pytest.fixture
def kubeconfig(tmp_path):
    api = FakeApiServer(builtins=True)
    api.serve_resource(VAP_API, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False)
    api.serve_resource(VAP_API, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False)
    for doc in yaml.safe_load_all(CLUSTER_POLICIES):
        api.put(doc, "validatingadmissionpolicies" if doc["kind"] == "ValidatingAdmissionPolicy"
                else "validatingadmissionpolicybindings")
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}, "namespaces")
    api.put(limits(2), "configmaps")
    api.put(model(maxReplicas=3), "models")
    with api.running() as url:
        path = tmp_path / "kubeconfig"
        path.write_text(KUBECONFIG.format(server=url))
        yield path
    assert [p for method, p in api.requests if method != "GET"] == []  # read-only


NATIVE = {("s1-replicas", "validations[0]", "fail", "at most 2 replicas"),
          ("s1-replicas", "validations[1]", "fail", "a team label is required"),
          ("s1-engine", "validations[0]", "warn", "OLlama only"),
          ("s1-url", "validations[0]", "fail", "models come from S3"),
          ("s1-authz", "validations[1]", "fail", "OLlama only (authz)")}


def test_json_holds_a_result_per_failed_validation_of_each_binding(kubeconfig, capsys):
    code, out, err = run(capsys, "--kubeconfig", kubeconfig, "--native-policies", "-o", "json", "--timeout", "30")
    assert code == 1, err  # s1-replicas denies
    found = {(r["policy"], r["rule"], r["result"], r["message"]) for r in json.loads(out)
             if r["policy"].startswith(("s1-", "infergate-"))}
    (broken,) = [f for f in found if f[0] == "s1-broken-fail"]
    assert broken[1:3] == ("validations[0]", "error") and "resulted in error" in broken[3]
    assert found - {broken} == NATIVE  # no s1-broken-ignore (failurePolicy Ignore), no generated VAP
    assert "note: " in err and "authorizer" in err  # the rule left out, named


def test_table_junit_and_openreports(kubeconfig, capsys):
    code, out, _ = run(capsys, "--kubeconfig", kubeconfig, "--native-policies", "--timeout", "30")
    assert code == 1
    rows = {tuple(line.split()[:4]) for line in out.splitlines()[1:-1]}
    assert ("fail", "Model", "ml-team/llama-3-1-8b-instruct-l4", "s1-replicas") in rows
    assert ("audit", "Model", "ml-team/llama-3-1-8b-instruct-l4", "s1-url") in rows  # Audit alone
    assert ("warn", "Model", "ml-team/llama-3-1-8b-instruct-l4", "s1-engine") in rows

    code, out, _ = run(capsys, "--kubeconfig", kubeconfig, "--native-policies", "-o", "junit", "--timeout", "30")
    (case,) = ET.fromstring(out).iter("testcase")
    assert "s1-replicas validations[0]: at most 2 replicas" in case.find("failure").text

    code, out, _ = run(capsys, "--kubeconfig", kubeconfig, "--native-policies", "-o", "openreports",
                       "--timeout", "30")
    (report,) = yaml.safe_load(out)["items"]
    assert {(r["policy"], r.get("rule", ""), r["result"], r.get("message", "")) for r in report["results"]
            if r["policy"].startswith("s1-") and r["policy"] != "s1-broken-fail"} == NATIVE


def test_without_the_flag_the_clusters_vaps_are_not_read(kubeconfig, capsys):
    code, out, err = run(capsys, "--kubeconfig", kubeconfig, "-o", "json", "--timeout", "30")
    assert code == 0, err
    assert not any(r["policy"].startswith("s1-") for r in json.loads(out))


def test_the_flag_needs_a_cluster(tmp_path, capsys):
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(model()))
    code, out, err = run(capsys, tmp_path / "m.yaml", "--native-policies")
    assert (code, out) == (2, "")
    assert err == "infergate: error: audit: --native-policies reads the cluster's own policies: give --kubeconfig\n"


@pytest.mark.parametrize("gadgets_forbidden", [False, True], ids=["readable", "Gadgets forbidden"])
def test_params_of_custom_resources_as_the_apiserver_answered_and_a_forbidden_kind_named(
        tmp_path, capsys, gadgets_forbidden):
    """The recorded Widget/Gadget policies (``tests/policy/native/cases/params-custom.yaml``):
    each Model judged as kube-apiserver v1.36.2 answered its create; with the Gadgets' list
    refused (RBAC), the Gadget's policy judges nothing and the note names it, the rest judged."""
    suite = yaml.safe_load(CUSTOM.read_text())
    api = FakeApiServer(builtins=True)
    api.serve_resource(VAP_API, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False)
    api.serve_resource(VAP_API, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False)
    root = CUSTOM.parents[4]
    for path in suite["crds"]:
        api.put(yaml.safe_load((root / path).read_text()), "customresourcedefinitions")
    for obj in suite["policies"]:
        api.put(obj, "validatingadmissionpolicies" if obj["kind"] == "ValidatingAdmissionPolicy"
                else "validatingadmissionpolicybindings")
    for obj in suite["state"]:
        api.put(obj, {"Namespace": "namespaces", "Widget": "widgets", "Gadget": "gadgets"}[obj["kind"]])
    for case in suite["cases"]:
        api.put(case["object"], "models")
    if gadgets_forbidden:
        api.collection("n6.example.com/v1", "gadgets").forbidden = True
    with api.running() as url:
        path = tmp_path / "kubeconfig"
        path.write_text(KUBECONFIG.format(server=url))
        code, out, err = run(capsys, "--kubeconfig", path, "--native-policies", "-o", "json", "--timeout", "30")
    assert code == 1, err
    found: dict[str, set[tuple[str, str, str]]] = {}
    for r in json.loads(out):
        if r["policy"].startswith("n6-") and r["result"] in ("fail", "error"):
            found.setdefault(r["resource"]["name"], set()).add((r["policy"], r["result"], r["message"]))
    expected = {}
    for case in suite["cases"]:
        if case["expect"]["allowed"]:
            continue
        policy, _, message = DENIED.fullmatch(case["expect"]["status"]["details"]["causes"][0]["message"]).groups()
        if gadgets_forbidden and policy == "n6-gadget-engine":
            continue  # unknown: judged by none of its bindings
        expected[case["object"]["metadata"]["name"]] = (policy, "error" if message.startswith("failed to configure")
                                                        else "fail", message)
    assert set(found) == set(expected)
    for name, result in expected.items():
        assert result in found[name], name
    gadget_note = ("note: not judged, params unknown: ValidatingAdmissionPolicy n6-gadget-engine: its params "
                   "(Gadget.n6.example.com) cannot be read (HTTP 403 Forbidden): its bindings are not judged")
    assert (gadget_note in err.splitlines()) == gadgets_forbidden, err
    assert "left out" not in err
