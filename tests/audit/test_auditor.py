"""The auditor judges objects at rest: the same verdicts as admission on a CREATE, per policy
and per rule, transitions not applied, the CRD's schema without ratcheting."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from webhook.admission.chain import offline_request
from webhook.audit import AUDITOR, CRD_SCHEMA, Auditor, AuditResult
from webhook.schema.registry import MARKER
from webhook.state import FileState
from tests.audit.helpers import CATALOGUE, auditor, catalogue_model, current_registry, example, policy_dir, stored
from tests.support.paths import MANIFESTS
from tests.support.policy import chain

EXAMPLES = sorted(MANIFESTS.glob("*/*.yaml"))
_NAMED = re.compile(r"\((?:policy|policies) ([^()]*)\)$")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_example_is_denied_by_the_audit_exactly_when_admission_denies_its_creation(path):
    shipped = chain()
    audit = Auditor.of_chain(shipped)
    obj = yaml.safe_load(path.read_text())
    answer = shipped.run(offline_request(obj, namespace=obj["metadata"].get("namespace")))
    judged = audit.audit(obj)
    assert judged.verdict.denied == (not answer.allowed)
    failing = {r.policy for r in judged.results if r.result == "fail"}
    if answer.denied_by == "apiserver":
        assert CRD_SCHEMA in failing
    elif answer.denied_by == "webhook":
        named = _NAMED.search(answer.status["message"]).group(1).split(", ")
        assert set(named) <= failing
        # each failing rule's message is the one admission wrote
        messages = {r.message for r in judged.results if r.result == "fail" and r.policy in named}
        assert all(m in answer.status["message"] for m in messages)
    if path.parent.name == "warned-by-webhook":  # admitted with a policy's warning: the audit warns too
        assert not judged.verdict.denied and judged.verdict.warned
        assert {r.message for r in judged.results if r.result == "warn"} <= set(answer.warnings)
    else:
        assert path.parent.name == "valid" or judged.verdict.denied


def test_every_policy_that_applies_to_a_catalogue_model_passes_once():
    judged = auditor(FileState(objects=[])).audit(catalogue_model("bge-embed-text-cpu"))
    assert [(r.policy, r.result) for r in judged.results] == [
        (CRD_SCHEMA, "pass"), ("kubeai-model-engine", "pass"), ("kubeai-model-engine-matrix", "pass"),
        ("kubeai-model-system-config", "pass")]
    # the policies that apply are those whose rules match a Model and that validate
    # (kubeai-model-defaults only mutates; kubeai-model-files' matchCondition needs spec.files)
    assert judged.resource.kind == "Model" and judged.resource.namespace == "team-a"
    assert judged.resource.uid and judged.resource.name == "bge-embed-text-cpu"


def test_each_failing_validation_is_one_fail_naming_its_rule_and_warnings_are_warn():
    model = catalogue_model("faster-whisper-medium-en-cpu")
    model["spec"].update(engine="VLLM", url="ollama://qwen2:0.5b", owner="someone")
    judged = auditor(FileState(objects=[])).audit(model)
    engine = [(r.rule, r.result) for r in judged.results if r.policy == "kubeai-model-engine"]
    # ollama:// with VLLM (validations[0]), owner (warnings[0]), SpeechToText with VLLM (warnings[1])
    assert engine == [("validations[0]", "fail"), ("warnings[0]", "warn"), ("warnings[1]", "warn")]
    warned = next(r for r in judged.results if r.rule == "warnings[0]")
    assert warned.actions == frozenset({"Warn"}) and "spec.owner is deprecated" in warned.message
    assert judged.verdict.denied and judged.verdict.warned
    # admission says the same things
    answer = chain(FileState(objects=[])).run(offline_request(model, namespace="team-a"))
    assert not answer.allowed
    for result in judged.results:
        if result.policy == "kubeai-model-engine" and result.result == "fail":
            assert result.message in answer.status["message"]


def test_a_transition_rule_cannot_fail_an_object_at_rest():
    """inferenceservice-immutable matches UPDATE only and compares with oldObject (as does the
    CRD's transition rule): an existing order is never judged by them, while the same object as
    an UPDATE changing the class is denied by both."""
    order = stored(example("valid", "inferenceservice-catalog.yaml"), namespace=None)
    judged = auditor().audit(order)
    assert "inferenceservice-immutable" not in {r.policy for r in judged.results}
    assert not judged.verdict.denied
    moved = copy.deepcopy(order)
    moved["spec"]["inferenceServiceClassName"] = "another-class"
    update = offline_request(moved, order, namespace=order["metadata"]["namespace"])
    assert "immutable" in chain().run(update).status["message"]  # the CRD's transition rule says it first
    assert "inferenceservice-immutable" in chain(schema=False).run(update).status["message"]


def test_a_policy_reading_the_request_sees_a_create_by_the_auditor(tmp_path):
    policies = policy_dir(tmp_path, """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: request-seen}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: "request.operation == 'CREATE' && oldObject == null && request.namespace == 'team-a'"
    - expression: "request.userInfo.username == 'nobody'"
      messageExpression: "'seen as ' + request.userInfo.username"
""")
    judged = auditor(FileState(objects=[]), policies).audit(catalogue_model())
    assert [(r.rule, r.result, r.message) for r in judged.results if r.policy == "request-seen"] == [
        ("validations[1]", "fail", f"seen as {AUDITOR}")]


def test_the_crd_schema_is_judged_as_a_create_which_ratcheting_would_hide():
    """An object stored before its CRD tightened: an UPDATE that changes nothing is allowed
    (ratcheting), the audit reports the field under crd-schema."""
    model = catalogue_model("bge-embed-text-cpu")
    model["spec"]["engine"] = "TGI"  # not in the engine enum
    model["spec"]["minReplicas"] = -1  # below the minimum
    registry = current_registry()
    assert registry.handle("UPDATE", model, model).allowed
    judged = auditor(FileState(objects=[])).audit(model)
    schema = [(r.rule, r.result) for r in judged.results if r.policy == CRD_SCHEMA]
    assert ("spec.engine", "fail") in schema and ("spec.minReplicas", "fail") in schema
    errors = {str(e) for e in registry.handle("CREATE", model).errors if e != MARKER}
    assert {r.message for r in judged.results if r.policy == CRD_SCHEMA} == errors
    assert judged.verdict.denied


def test_status_and_server_fields_of_a_stored_object_are_not_failures():
    model = catalogue_model()
    model["status"] = {"replicas": {"all": 2, "ready": 1}, "cache": {"loaded": True}}
    judged = auditor(FileState(objects=[])).audit(model)
    assert {r.result for r in judged.results} == {"pass"}


def test_an_expression_that_cannot_be_evaluated_is_an_error_result(tmp_path):
    policies = policy_dir(tmp_path, """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: url-as-number}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: "int(object.spec.url) > 0"
---
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: url-as-number-ignored}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: "int(object.spec.url) > 0"
""")
    judged = auditor(FileState(objects=[]), policies).audit(catalogue_model())
    errors = {r.policy: r for r in judged.results if r.result == "error"}
    assert set(errors) == {"url-as-number", "url-as-number-ignored"}
    assert all(r.rule == "validations[0]" and "resulted in error" in r.message for r in errors.values())
    # admission denies on the fail-closed policy's error, and so does the audit's verdict
    assert errors["url-as-number"].fail_closed and errors["url-as-number"].denies
    assert not errors["url-as-number-ignored"].fail_closed and not errors["url-as-number-ignored"].denies
    assert judged.verdict.denied and judged.verdict.error
    answer = chain(FileState(objects=[]), policies).run(offline_request(catalogue_model(), namespace="team-a"))
    assert not answer.allowed and "url-as-number)" in answer.status["message"]


def test_a_builtin_policy_names_its_rule():
    order = stored(example("denied-by-webhook", "inferenceservice-parameter-count-exceeded.yaml"), None)
    judged = auditor().audit(order)
    assert [(r.policy, r.rule, r.result) for r in judged.results if r.result == "fail"] == [
        ("inferenceservice-max-parameter-count", "catalog", "fail")]


def test_an_audit_is_deterministic_and_sorted_failures_first():
    model = catalogue_model()
    model["spec"].update(url="ollama://x", owner="x")
    first = auditor().audit(model)
    again = auditor().audit(copy.deepcopy(model))
    assert first == again
    ranks = [("fail", "error", "warn", "pass").index(r.result) for r in first.results]
    assert ranks == sorted(ranks)


def test_what_is_not_an_object_is_refused():
    with pytest.raises(ValueError, match="no apiVersion and kind"):
        auditor().audit({"metadata": {"name": "x"}})


def test_a_kind_no_crd_serves_is_judged_by_the_policies_alone(tmp_path):
    policies = policy_dir(tmp_path, """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: configmap-label}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], kinds: [ConfigMap]}]
  validations:
    - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
      message: a ConfigMap needs a team label
""")
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}, "data": {}}
    judged = auditor(FileState(objects=[]), policies).audit(config)
    assert [(r.policy, r.rule, r.result, r.message) for r in judged.results] == [
        ("configmap-label", "validations[0]", "fail", "a ConfigMap needs a team label")]


def test_the_audited_kinds_are_the_served_kinds_a_policy_may_apply_to():
    kinds = {(api, kind) for api, kind, _, _ in auditor().audited_kinds()}
    assert ("kubeai.org/v1", "Model") in kinds and ("ai.deckhouse.io/v1alpha1", "InferenceService") in kinds
    plurals = {kind: (plural, namespaced) for _, kind, plural, namespaced in auditor().audited_kinds()}
    assert plurals["Model"] == ("models", True) and plurals["InferenceServiceClass"][1] is False


def test_results_of_an_audit_compare_by_value():
    assert AuditResult("p", "validations[0]", "fail") == AuditResult("p", "validations[0]", "fail", "",
                                                                     frozenset({"Deny"}))
    assert AuditResult("p", "", "fail", actions=frozenset({"Audit"})).audited
    assert not AuditResult("p", "", "fail", actions=frozenset({"Deny", "Audit"})).audited


ACTIONS_POLICY = """
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: engine-named}
spec:
  validationActions: ACTIONS
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: "object.spec.engine == 'VLLM'"
      fieldPath: spec.engine
      message: only VLLM here
"""


@pytest.mark.parametrize("actions, result, denied, warned, audited", [
    ("[Deny]", "fail", True, False, False),
    ("[Warn]", "warn", False, True, False),
    ("[Audit]", "fail", False, False, True),
    ("[Warn, Audit]", "warn", False, True, True),
    ("[Deny, Audit]", "fail", True, False, False),
])
def test_a_failure_is_reported_under_the_policys_validation_actions(tmp_path, actions, result, denied, warned,
                                                                     audited):
    policies = policy_dir(tmp_path, ACTIONS_POLICY.replace("ACTIONS", actions))
    judged = auditor(FileState(objects=[]), policies).audit(catalogue_model("bge-embed-text-cpu"))  # Infinity
    [found] = [r for r in judged.results if r.policy == "engine-named"]
    assert (found.rule, found.result, found.message) == ("validations[0]", result, "spec.engine: only VLLM here")
    assert found.actions == frozenset(actions.strip("[]").split(", "))
    verdict = judged.verdict
    assert (verdict.denied, verdict.warned, verdict.audited) == (denied, warned, audited)


def test_an_operators_override_for_a_namespace_decides_the_actions(tmp_path):
    from webhook.policy import PolicySet
    from webhook.policy.actions import parse_overrides
    from tests.support.cel import EVALUATOR

    directory = tmp_path / "p"
    directory.mkdir()
    (directory / "p.yaml").write_text(ACTIONS_POLICY.replace("ACTIONS", "[Deny]"))
    policies = PolicySet.load(directory, evaluator=EVALUATOR, builtin=False,
                              actions=parse_overrides(["engine-named=Warn@stage=trial"]))
    namespaces = [{"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "team-a", "labels": {"stage": "trial"}}},
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}]
    audit = auditor(FileState(objects=namespaces), policies)
    trial = audit.audit(catalogue_model(namespace="team-a"))
    enforced = audit.audit(catalogue_model(namespace="team-b"))
    assert [(r.result, r.actions) for r in trial.results if r.policy == "engine-named"] == [
        ("warn", frozenset({"Warn"}))]
    assert [(r.result, r.actions) for r in enforced.results if r.policy == "engine-named"] == [
        ("fail", frozenset({"Deny"}))]
