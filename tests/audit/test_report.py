"""Reports built from an audit: the OpenReports and wgpolicyk8s.io shapes (checked against the
CRDs the apiserver would serve), scope and owner, summary, the size bound, determinism."""

from __future__ import annotations

import copy
import functools
import json

import pytest
import yaml

from webhook.audit import (MAX_MESSAGE, MAX_RESULTS, OPENREPORTS, WGPOLICY, AuditResult, ObjectAudit, ResourceRef,
                           build_report, report_name)
from webhook.schema import CRDRegistry
from webhook.state import FileState
from tests.audit.helpers import auditor, catalogue_model, example, stored
from tests.support.cel import EVALUATOR
from tests.support.paths import MANIFESTS, THIRD_PARTY_CRDS


@functools.cache
def report_crds() -> CRDRegistry:
    return CRDRegistry.load([THIRD_PARTY_CRDS / "reports"], evaluator=EVALUATOR, check=True)


def admitted(report: dict) -> dict:
    """``report`` as the apiserver stores it on a CREATE (its schema and rules hold, nothing pruned)."""
    outcome = report_crds().handle("CREATE", report, namespace=report["metadata"].get("namespace"))
    assert outcome.allowed, outcome.status
    assert not outcome.warnings  # no unknown field
    return outcome.object


def failing_model() -> dict:
    model = catalogue_model("faster-whisper-medium-en-cpu")
    model["spec"].update(engine="VLLM", url="ollama://qwen2:0.5b", owner="someone")
    return model


@pytest.mark.parametrize("api", [OPENREPORTS, WGPOLICY])
def test_a_namespaced_object_gets_a_report_in_its_namespace_owned_by_it(api):
    model = failing_model()
    report = build_report(auditor(FileState(objects=[])).audit(model), api=api)
    stored_report = admitted(report)
    assert report["kind"] == ("Report" if api == OPENREPORTS else "PolicyReport")
    meta = report["metadata"]
    uid = model["metadata"]["uid"]
    assert meta["name"] == f"infergate-{uid}" and meta["namespace"] == "team-a"
    assert meta["ownerReferences"] == [{"apiVersion": "kubeai.org/v1", "kind": "Model",
                                        "name": "faster-whisper-medium-en-cpu", "uid": uid}]
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "infergate"
    assert report["scope"] == {"apiVersion": "kubeai.org/v1", "kind": "Model", "namespace": "team-a",
                               "name": "faster-whisper-medium-en-cpu", "uid": uid}
    results = [(r["policy"], r.get("rule"), r["result"]) for r in report["results"]]
    assert results[:3] == [("kubeai-model-engine", "validations[0]", "fail"),  # ollama:// with VLLM
                           ("kubeai-model-engine", "warnings[0]", "warn"),  # owner
                           ("kubeai-model-engine", "warnings[1]", "warn")]  # SpeechToText with VLLM
    assert all(r["source"] == "infergate" and r["resources"] == [report["scope"]] for r in report["results"])
    assert report["summary"] == {"pass": 3, "fail": 1, "warn": 2, "error": 0, "skip": 0}
    if api == OPENREPORTS:
        assert report["source"] == "infergate"
        assert report["configuration"] == {"limits": {"maxResults": MAX_RESULTS}}
    else:
        assert "source" not in report and "configuration" not in report  # not in wgpolicyk8s.io's schema
    assert stored_report == report


@pytest.mark.parametrize("api, kind", [(OPENREPORTS, "ClusterReport"), (WGPOLICY, "ClusterPolicyReport")])
def test_a_cluster_scoped_object_gets_a_cluster_report(api, kind):
    cls = stored(example("valid", "inferenceserviceclass.yaml"), namespace=None)
    report = build_report(auditor().audit(cls), api=api)
    admitted(report)
    assert report["kind"] == kind and "namespace" not in report["metadata"]
    assert "namespace" not in report["scope"]
    assert report["metadata"]["ownerReferences"][0]["kind"] == "InferenceServiceClass"


def test_the_results_are_capped_and_the_overflow_counted():
    model = failing_model()
    audit = auditor(FileState(objects=[])).audit(model)
    full = build_report(audit)
    capped = build_report(audit, max_results=2)
    admitted(capped)
    assert capped["results"] == full["results"][:2]  # failures kept first
    assert capped["summary"] == full["summary"]  # every result counted
    assert sum(capped["summary"].values()) == len(full["results"]) == 6
    assert capped["metadata"]["annotations"] == {"audit.infergate.io/results-omitted": "4"}
    assert capped["configuration"]["limits"]["maxResults"] == 2
    assert "annotations" not in full["metadata"]


def test_a_long_message_is_cut_to_the_bound():
    ref = ResourceRef("kubeai.org/v1", "Model", "a", "m", "u-1")
    report = build_report(ObjectAudit(ref, (AuditResult("p", "validations[0]", "fail", "x" * 5000),)))
    message = report["results"][0]["message"]
    assert len(message) == MAX_MESSAGE and message.endswith("…")


def test_an_unchanged_object_gives_a_byte_identical_report_and_a_change_a_different_one():
    model = failing_model()
    first = json.dumps(build_report(auditor(FileState(objects=[])).audit(model)))
    again = json.dumps(build_report(auditor(FileState(objects=[])).audit(copy.deepcopy(model))))
    assert first == again
    model["spec"]["url"] = "hf://Systran/faster-whisper-medium.en"
    model["spec"]["engine"] = "FasterWhisper"
    fixed = build_report(auditor(FileState(objects=[])).audit(model))
    assert json.dumps(fixed) != first
    assert fixed["metadata"]["name"] == json.loads(first)["metadata"]["name"]  # the same report, rewritten
    assert fixed["summary"]["fail"] == 0


def test_an_object_without_uid_gets_a_stable_name_and_no_owner():
    model = catalogue_model()
    del model["metadata"]["uid"]
    audit = auditor(FileState(objects=[])).audit(model)
    report = build_report(audit)
    admitted(report)
    assert "ownerReferences" not in report["metadata"] and "uid" not in report["scope"]
    assert report["metadata"]["name"] == report_name(audit.resource) == build_report(audit)["metadata"]["name"]
    other = ResourceRef("kubeai.org/v1", "Model", "team-b", audit.resource.name)
    assert report_name(other) != report["metadata"]["name"]


def test_an_exempt_namespace_is_marked():
    report = build_report(auditor(FileState(objects=[])).audit(failing_model()), exempt=True)
    admitted(report)
    assert report["metadata"]["labels"]["audit.infergate.io/exempt"] == "true"
    assert all(r["properties"]["exempt"] == "true" for r in report["results"])


def test_a_bad_api_or_cap_is_refused():
    audit = ObjectAudit(ResourceRef("v1", "ConfigMap", "a", "c"), ())
    with pytest.raises(ValueError, match="unknown report API"):
        build_report(audit, api="reports.x-k8s.io/v1beta2")
    with pytest.raises(ValueError, match="max_results"):
        build_report(audit, max_results=-1)


ODD_VALUES = (None, True, -1, 2**70, "", "x" * 3000, [], [None], {}, {"": {}})


@pytest.mark.parametrize("path", sorted(MANIFESTS.glob("*/*.yaml")), ids=lambda p: p.name)
def test_any_value_in_any_spec_field_gives_results_and_a_report_the_apiserver_stores(path):
    obj = stored(yaml.safe_load(path.read_text()), namespace=None)
    audit = auditor()
    for key in sorted(obj.get("spec") or {}):
        for value in ODD_VALUES:
            broken = copy.deepcopy(obj)
            broken["spec"][key] = value
            judged = audit.audit(broken)
            assert judged.results and all(r.result in ("pass", "fail", "warn", "error") for r in judged.results)
            admitted(build_report(judged))
