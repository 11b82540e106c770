"""``infergate native-policies`` against a real kube-apiserver v1.36's answers, offline.

``tests/conformance/native-policies/recorded.yaml`` holds what the apiserver answered with only
the generated objects installed (no webhook), for every case of the policy suites and the
example manifests (``scripts/record_native_policies.py``; its ``about`` says when and how). Here,
with those answers as the oracle:

- the generator still writes what was recorded (else the answers say nothing of its output);
- the apiserver type-checked every generated policy without a warning;
- whatever infergate admits offline, the apiserver admitted;
- every denial by a generated policy is one of infergate's denials by the rule exported there,
  with the same message after the apiserver's prefix; every exported rule that denies offline
  was denied by a generated policy; warnings likewise; the object the apiserver admitted is the
  one infergate's mutations give;
- with operators' overrides (``--policy-actions``), each failure is met by the binding of the
  request's namespace region with the actions the webhook chooses there;
- the generated objects themselves as the policies offline (infergate's evaluators of
  Kubernetes' own policies): every object the apiserver admitted is the one the generated
  MutatingAdmissionPolicies give offline, every denial by a generated policy is the same Status.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from webhook.admission.chain import AdmissionChain
from webhook.cel import Evaluator
from webhook.offline.validate import judge_document
from webhook.policy import PolicySet, load_directory
from webhook.policy.actions import parse_overrides
from webhook.policy.native_export import export, kind_resources
from webhook.policy.typecheck import KindSchemas
from webhook.schema.bundled import known_kinds
from webhook.schema.registry import CRDRegistry
from webhook.shipped_data import policies_dir
from webhook.state import PRESENCE, FileState
from webhook.state.selectors import from_label_selector
from tests.support.paths import REPO

RECORDED = REPO / "tests" / "conformance" / "native-policies" / "recorded.yaml"
# the Status' message: '<resource> "<name>" is forbidden: ' and then the VAP's words
DENIED = re.compile(r"^[^ ]+ \"[^\"]*\" is forbidden: ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding "
                    r"'(?P<binding>[^']+)' denied request: (?P<message>.*)$", re.S)
WARNED = re.compile(r"^Validation failed for ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding "
                    r"'(?P<binding>[^']+)': (?P<message>.*)$", re.S)
EVALUATOR = Evaluator()


@cache
def recorded() -> dict:
    return yaml.safe_load(RECORDED.read_text())


@cache
def definitions() -> dict:
    """The shipped AdmissionPolicies by name."""
    return {p.name: p.definition for p in load_directory(policies_dir(), EVALUATOR)}


@cache
def generated() -> list[dict]:
    return export(definitions().values(), kind_resources(known_kinds())).objects


@cache
def chain() -> tuple[CRDRegistry, AdmissionChain]:
    """The cluster's CRDs (those the recording installed), the shipped policies, and a cluster
    view of nothing but the request: lookups and params are unknown, so the rules reading them
    neither deny nor warn (``infergate validate`` without ``--state``)."""
    registry = CRDRegistry.shipped(evaluator=EVALUATOR)
    for crd in recorded()["about"]["crds"]:
        assert crd["file"], f"the cluster's {crd['name']} was none of the bundled files: re-record"
        for doc in yaml.safe_load_all((REPO / crd["file"]).read_text()):
            if doc:
                registry.add_checked(doc, crd["file"], replace=True)
    policies = PolicySet.load(policies_dir(), evaluator=EVALUATOR, schemas=KindSchemas(registry.crds))
    return registry, AdmissionChain(registry, policies, FileState(objects=[], knowledge=PRESENCE))


def cases() -> list[dict]:
    return [c for c in recorded()["cases"] if "skipped" not in c and c["answer"]["code"] != 404]


def vap_validations(name: str) -> list[dict]:
    for o in generated():
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name:
            return o["spec"]["validations"]
    return []


def exported_rule(rule: str) -> tuple[str, dict] | None:
    """``(VAP name, its validation)`` where ``<policy>/<section>[i]`` went, or None (kept)."""
    policy_name, _, where = rule.partition("/")
    section, index = where[:-1].split("[") if where.endswith("]") else (where, "-1")
    policy = definitions().get(policy_name)
    if policy is None or section not in ("validations", "warnings"):
        return None
    source = getattr(policy.spec, section)[int(index)]
    vap = f"infergate-{policy_name}" + ("-warn" if section == "warnings" else "")
    found = [v for v in vap_validations(vap) if v["expression"] == source.expression]
    return (vap, found[0]) if found else None


@cache
def kept() -> tuple:
    return tuple(export(definitions().values(), kind_resources(known_kinds())).kept)


def matching_policies(case: dict) -> set[str]:
    """The shipped policies whose match constraints name the case's kind."""
    group = case["object"]["apiVersion"].rpartition("/")[0]
    return {name for name, policy in definitions().items()
            if any(group in r.apiGroups and case["object"]["kind"] in r.kinds
                   for r in policy.spec.matchConstraints.resourceRules)}


def rule_field(rule: str) -> str | None:
    policy_name, _, where = rule.partition("/")
    policy = definitions()[policy_name]
    return policy.spec.validations[int(where[:-1].split("[")[1])].fieldPath


def offline(case: dict):
    registry, admission = chain()
    return judge_document(registry, case["object"], case.get("old"), namespace=case["namespace"], chain=admission)


def label(case: dict) -> str:
    return f"{case['source']} {case['name']}"


def test_the_recording_is_of_what_the_generator_writes():
    assert generated() == recorded()["generated"], (
        "the generated objects changed since the apiserver's answers were recorded: re-run "
        "scripts/record_native_policies.py against kube-apiserver v1.36")
    assert recorded()["about"]["recorded_from"].startswith("kube-apiserver v1.36.")


def test_the_apiserver_type_checked_every_policy_without_a_warning():
    vaps = {o["metadata"]["name"] for o in generated() if o["kind"] == "ValidatingAdmissionPolicy"}
    assert set(recorded()["typeChecking"]) == vaps
    for name, checking in recorded()["typeChecking"].items():
        assert not (checking or {}).get("expressionWarnings"), (name, checking)


def test_the_rules_kept_for_the_type_check_are_those_the_apiserver_warns_of():
    """Exported without infergate's type check, exactly the VAPs of the rules it keeps for it were
    refused by the apiserver or got expression warnings."""
    policies = list(definitions().values())
    kept = {(k.policy, k.rule) for k in export(policies, kind_resources(known_kinds())).kept}
    kept_anyway = {(k.policy, k.rule) for k in export(policies, kind_resources(known_kinds()), type_check=False).kept}
    predicted = {f"infergate-{policy}" + ("-warn" if rule.startswith("warnings") else "")
                 for policy, rule in kept - kept_anyway}
    assert predicted
    evidence = recorded()["typeCheckingWithoutTheCheck"]
    warned = {name for name, found in evidence.items()
              if "rejected" in found or (found["typeChecking"] or {}).get("expressionWarnings")}
    assert warned == predicted


def test_the_generated_policies_that_denied_are_those_whose_rules_deny_offline():
    """The VAPs that denied some scenario are exactly those whose exported rules deny one offline
    (a VAP whose rules the CRD's own rules answer first, e.g. the immutable fields of an
    InferenceService, denies nothing in either)."""
    recorded_vaps = {m["policy"] for c in cases() if (m := DENIED.match(c["answer"].get("message", "")))}
    offline_vaps = set()
    for case in cases():
        judged = offline(case)
        if not judged.allowed:
            offline_vaps |= {found[0] for rule in judged.rules.values()
                             if "/validations[" in rule and (found := exported_rule(rule)) is not None}
    assert recorded_vaps == offline_vaps
    assert len(recorded_vaps) >= 3


@pytest.mark.parametrize("case", cases(), ids=label)
def test_the_apiserver_answers_as_the_exported_rules(case):
    answer = case["answer"]
    judged = offline(case)
    if judged.allowed and not answer["allowed"]:
        # never by a generated policy; only where a mutation that stays with the webhook changed
        # the object (e.g. the class an UPDATE leaves out, taken from the stored object: without
        # it the CRD's own immutability rule refuses the write)
        assert not DENIED.match(answer.get("message", "")), f"infergate admits offline: {answer['message']}"
        assert judged.patch and any(k.rule.startswith("mutations") and k.policy in matching_policies(case)
                                    for k in kept()), f"infergate admits offline: {answer['message']}"
    by_rule = {text: rule for text, rule in judged.rules.items()}
    exported_denials = {text: found for text, rule in by_rule.items()
                        if "/validations[" in rule and (found := exported_rule(rule)) is not None}
    denial = DENIED.match(answer.get("message", "")) if not answer["allowed"] else None
    if denial is not None:
        # the first failed validation of a generated policy: one of infergate's, the same message
        # the webhook prefixes a denial's message by the rule's fieldPath (a VAP has none)
        fields = {text: rule_field(by_rule[text]) for text in exported_denials}
        matches = [text for text, (vap, _) in exported_denials.items()
                   if vap == denial["policy"] and text in (denial["message"], f"{fields[text]}: {denial['message']}")]
        assert matches, (denial.groupdict(), exported_denials)
        assert denial["binding"] == denial["policy"]
    elif exported_denials and not judged.allowed:
        pytest.fail(f"infergate denies by exported rules {sorted(exported_denials)}, the apiserver answered {answer}")
    if judged.allowed and answer["allowed"]:
        exported_warnings = {f"Validation failed for ValidatingAdmissionPolicy '{found[0]}' with binding "
                             f"'{found[0]}': {text}"
                             for text, rule in by_rule.items() if "/warnings[" in rule
                             and (found := exported_rule(rule)) is not None and text in judged.warnings}
        native = {w for w in answer.get("warnings", []) if WARNED.match(w)}
        assert native == exported_warnings
        got = {k: v for k, v in judged.object.items() if k not in ("metadata", "status")}
        assert got == answer["object"]


# ---------------------------------------------------------------------------------------
# Operators' overrides as bindings: the same Models with the overrides' bindings in force


@cache
def override_chain() -> AdmissionChain:
    """The shipped policies under the recorded overrides, the namespaces' labels in the state."""
    registry, _ = chain()
    recorded_overrides = recorded()["overrides"]
    policies = PolicySet.load(policies_dir(), evaluator=EVALUATOR, schemas=KindSchemas(registry.crds))
    policies = dataclasses.replace(policies, actions=parse_overrides(recorded_overrides["given"]))
    return AdmissionChain(registry, policies, FileState(objects=recorded_overrides["namespaces"], knowledge=PRESENCE))


def override_cases() -> list[dict]:
    return [c for c in recorded()["overrides"]["cases"] if "skipped" not in c]


def test_the_override_bindings_are_what_the_generator_writes():
    overrides = recorded()["overrides"]
    policies = list(definitions().values())
    assert export(policies, kind_resources(known_kinds()), parse_overrides(overrides["given"])).objects == \
        overrides["generated"]
    # every validation of the two policies is exported: each failure the webhook meets with the
    # override's actions is the bindings' to meet
    kept = {k.policy for k in export(policies, kind_resources(known_kinds())).kept if k.rule.startswith("validations")}
    assert not kept & {"kubeai-model-engine", "kubeai-model-engine-matrix"}


def region_binding(policy: str, labels: dict[str, str]) -> str:
    """The one binding of ``policy``'s VAP whose namespace selector selects ``labels``."""
    found = [b["metadata"]["name"] for b in recorded()["overrides"]["generated"]
             if b["kind"] == "ValidatingAdmissionPolicyBinding" and b["spec"]["policyName"] == policy
             and from_label_selector(b["spec"].get("matchResources", {}).get("namespaceSelector", {})).matches(labels)]
    assert len(found) == 1, (policy, labels, found)
    return found[0]


@pytest.mark.parametrize("case", override_cases(), ids=lambda c: f"{c['namespace']} {label(c)}")
def test_the_apiserver_meets_failures_with_the_overrides_actions(case):
    answer = case["answer"]
    registry, _ = chain()
    judged = judge_document(registry, case["object"], case.get("old"), namespace=case["namespace"], chain=override_chain())
    labels = next(n["metadata"]["labels"] for n in recorded()["overrides"]["namespaces"]
                  if n["metadata"]["name"] == case["namespace"])
    if judged.allowed and not answer["allowed"]:
        assert not DENIED.match(answer.get("message", "")), answer["message"]
    denial = DENIED.match(answer.get("message", "")) if not answer["allowed"] else None
    if denial is not None:
        assert denial["binding"] == region_binding(denial["policy"], labels)
        assert not judged.allowed
    if not (judged.allowed and answer["allowed"]):
        return
    # a failure met with Warn: the webhook's warning and the binding's carry the same message
    expected = set()
    for text in judged.warnings:
        met = re.match(r"^Validation failed for AdmissionPolicy '(?P<policy>[^']+)': (?P<message>.*)$", text, re.S)
        if met:
            # the denial's message, prefixed by one of the policy's validations' fieldPath
            policy = definitions()[met["policy"]]
            message = met["message"]
            for field in {v.fieldPath for v in policy.spec.validations if v.fieldPath}:
                message = message.removeprefix(f"{field}: ")
            vap = f"infergate-{met['policy']}"
            expected.add(f"Validation failed for ValidatingAdmissionPolicy '{vap}' with binding "
                         f"'{region_binding(vap, labels)}': {message}")
        elif (rule := judged.rules.get(text)) and (found := exported_rule(rule)) is not None:
            expected.add(f"Validation failed for ValidatingAdmissionPolicy '{found[0]}' with binding '{found[0]}': {text}")
    assert {w for w in answer.get("warnings", []) if WARNED.match(w)} == expected


# ---------------------------------------------------------------------------------------
# The generated objects themselves, run offline by infergate's evaluators of Kubernetes' own
# policies: the MutatingAdmissionPolicies mutate as the apiserver's did, the
# ValidatingAdmissionPolicies deny as its did


def native_chain(tmp: Path) -> AdmissionChain:
    """The generated objects as the policies (no AdmissionPolicy; the Python policy, which is no
    CEL, comes with every policy set), the same CRDs and empty cluster view as ``chain``."""
    registry, _ = chain()
    (tmp / "generated.yaml").write_text(yaml.safe_dump_all(generated(), sort_keys=False))
    policies = PolicySet.load(tmp, evaluator=EVALUATOR, schemas=KindSchemas(registry.crds), native=True)
    return AdmissionChain(registry, policies, FileState(objects=[], knowledge=PRESENCE))


def test_the_generated_objects_run_offline_answer_as_the_apiserver(tmp_path_factory):
    admission = native_chain(tmp_path_factory.mktemp("generated"))
    registry, _ = chain()
    compared = Counter()
    for case in cases():
        answer = case["answer"]
        judged = judge_document(registry, case["object"], case.get("old"), namespace=case["namespace"],
                                chain=admission)
        if answer["allowed"]:
            if not judged.allowed:
                # only the Python policy, which no generated object replaces, denies here
                assert "inferenceservice-max-parameter-count" in str(judged.status), (label(case), judged.status)
                continue
            got = {k: v for k, v in judged.object.items() if k not in ("metadata", "status")}
            assert got == answer["object"], label(case)
            schema_only = judge_document(registry, case["object"], case.get("old"), namespace=case["namespace"],
                                         chain=admission, crd_only=True)
            compared["admitted, mutated by a generated policy"] += schema_only.object != judged.object
            compared["admitted"] += 1
        elif DENIED.match(answer.get("message", "")):
            assert not judged.allowed and judged.status["message"] == answer["message"], (label(case), judged.status)
            compared["denied by a generated policy"] += 1
    # the scenarios exercise both: mutated objects and denials
    assert compared["admitted, mutated by a generated policy"] >= 3, compared
    assert compared["denied by a generated policy"] >= 3, compared
