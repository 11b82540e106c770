"""Handing rules over to the apiserver (``webhook.policy.native_handover``,
``webhook.policy.handed_over``), against what a real kube-apiserver v1.36 stored and answered
(``data/native-handover/recorded.json``, ``scripts/record_native_handover.py``;
``data/native-handover/mutation-probe.json``, ``scripts/record_native_mutation_probe.py``): the
controller's objects as the apiserver stores them (its defaults added) are recognised as the
webhook's own; the probe's denial is recognised by its words and the mutation probe by the object
the dry run returned; the webhook leaves exactly the marked rules to the apiserver, so a write gets
each denial and warning once and the mutation from the apiserver's MAP, and evaluates them again
when a mark is stale, missing, or its policy or binding is changed or gone."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import pytest

from webhook.admission.chain import AdmissionChain
from webhook.admission.review import AdmissionRequest
from webhook.cel import Evaluator
from webhook.inputs.policies import PolicySource, load_policy_directory
from webhook.policy.handed_over import HandedOverPolicies
from webhook.policy.native_export import export, kind_resources
from webhook.policy.native_handover import (ENFORCED_ANNOTATION, content_hash, enforced_rules, generated,
                                            in_cluster, marks, probe_denied, probe_mutated, probe_mutation_objects,
                                            probe_mutation_request, probe_objects, stored_as_generated,
                                            stored_key, without_rules)
from webhook.schema.bundled import known_kinds
from webhook.schema.registry import CRDRegistry
from webhook.state import FileState

DATA = Path(__file__).parent / "data" / "native-handover"
EVALUATOR = Evaluator()
RESOURCES = kind_resources(known_kinds())


@cache
def recorded() -> dict:
    return json.loads((DATA / "recorded.json").read_text())


def stored() -> dict:
    return {stored_key(o): copy.deepcopy(o) for o in recorded()["stored"]}


def directory():
    return load_policy_directory(PolicySource(DATA / "policies"), EVALUATOR)


def exported():
    policies = directory().current()
    return export([p.definition for p in policies.policies if getattr(p, "definition", None)], RESOURCES)


def test_the_recording_is_of_the_current_generator():
    result = exported()
    assert recorded()["token"] == content_hash(generated(result))
    # 6 objects; the VAP probe's 2, the 2 VAP marks; the MAP probe's 2, the MAP's mark
    assert recorded()["writes"] == {"first round": 13, "second round": 0}
    for key, mark in marks(result).items():
        assert stored()[key]["metadata"]["annotations"][ENFORCED_ANNOTATION] == mark


ALL = frozenset({"validations[0]", "warnings[0]", "mutations[0]"})


def test_stored_objects_marked_as_generated_hand_their_rules_over():
    assert enforced_rules(exported(), stored()) == {"s2-native-demo": ALL}


@pytest.mark.parametrize("kind", ["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"])
@pytest.mark.parametrize("change", ["no mark", "stale mark", "policy edited", "binding edited", "binding gone",
                                    "policy gone"])
def test_anything_but_the_generated_marked_objects_hands_nothing_over(kind, change):
    objects = stored()
    policy = objects[(kind, "infergate-s2-native-demo")]
    binding = (f"{kind}Binding", "infergate-s2-native-demo")
    if change == "no mark":
        del policy["metadata"]["annotations"][ENFORCED_ANNOTATION]
    elif change == "stale mark":
        policy["metadata"]["annotations"][ENFORCED_ANNOTATION] = "0123456789abcdef"
    elif change == "policy edited" and kind == "ValidatingAdmissionPolicy":
        policy["spec"]["validations"][0]["expression"] = "true"
    elif change == "policy edited":
        policy["spec"]["mutations"][0]["jsonPatch"]["expression"] = "[]"
    elif change == "binding edited" and kind == "ValidatingAdmissionPolicy":
        objects[binding]["spec"]["validationActions"] = ["Warn"]
    elif change == "binding edited":
        objects[binding]["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"a": "b"}}}
    elif change == "binding gone":
        del objects[binding]
    else:
        del objects[(kind, "infergate-s2-native-demo")]
    # the other objects are untouched: their rules alone are handed over
    lost = "validations[0]" if kind == "ValidatingAdmissionPolicy" else "mutations[0]"
    assert enforced_rules(exported(), objects) == {"s2-native-demo": ALL - {lost}}


def test_the_probe_denial_is_recognised_by_the_apiservers_words():
    answer = recorded()["probe"]
    assert answer["code"] == 422 and answer["body"]["reason"] == "Invalid"
    assert probe_denied(answer["body"]["message"], recorded()["token"])
    assert not probe_denied(answer["body"]["message"], "0123456789abcdef")
    assert not probe_denied(recorded()["denied"]["body"]["message"], recorded()["token"])
    # the probe selects nothing but the token's ConfigMaps
    vap, binding = probe_objects(recorded()["token"])
    selector = {"matchLabels": {"infergate.io/probe": recorded()["token"]}}
    assert vap["spec"]["matchConstraints"]["objectSelector"] == selector
    assert binding["spec"]["matchResources"]["objectSelector"] == selector


def test_in_cluster_objects_carry_the_owner_and_only_policies_the_mark():
    owner = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "infergate-controller-native-policies", "uid": "u-1"}}
    objects = in_cluster(generated(exported()), owner, "m")
    assert objects and all(o["metadata"]["ownerReferences"] == [{**{k: owner[k] for k in ("apiVersion", "kind")},
                                                                  "name": owner["metadata"]["name"], "uid": "u-1"}]
                           for o in objects)
    assert {o["kind"] for o in objects if ENFORCED_ANNOTATION in o["metadata"].get("annotations", {})} \
        == {"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"}


def request(labels: dict) -> AdmissionRequest:
    obj = {"apiVersion": "kubeai.org/v1", "kind": "Model",
           "metadata": {"name": "s2-demo", "namespace": "s2-native", "labels": {"s2-native": "true", **labels}},
           "spec": {"features": ["TextGeneration"], "url": "hf://org/model", "engine": "VLLM",
                    "resourceProfile": "cpu:1", "targetRequests": 100, "scaleDownDelaySeconds": 30}}
    return AdmissionRequest.model_validate({
        "uid": "1", "kind": {"group": "kubeai.org", "version": "v1", "kind": "Model"},
        "resource": {"group": "kubeai.org", "version": "v1", "resource": "models"},
        "namespace": "s2-native", "name": "s2-demo", "operation": "CREATE", "object": obj,
        "userInfo": {"username": "u"}})


def handed_over(objects: dict) -> tuple[HandedOverPolicies, AdmissionChain]:
    policies = HandedOverPolicies(directory(), lambda: objects, EVALUATOR, RESOURCES)
    policies.refresh()
    return policies, AdmissionChain(CRDRegistry.shipped(evaluator=EVALUATOR), policies, FileState(objects=[]))


def test_the_webhook_leaves_marked_rules_to_the_apiserver_no_double_denial_or_warning():
    # what the apiserver answered with the generated objects in force (and no webhook)
    denied, warned = recorded()["denied"], recorded()["warned"]
    assert denied["code"] == 422 and denied["body"]["message"].endswith(
        "denied request: s2: the label s2-bad is refused")
    assert len(warned["warnings"]) == 1 and warned["warnings"][0].endswith(": s2: the label s2-odd is odd\"")

    _, chain = handed_over({})  # nothing in the cluster: the webhook evaluates every rule
    result = chain.admit(request({"s2-bad": "x", "s2-odd": "y"}), mutating=False)
    assert not result.allowed and "s2: the label s2-bad is refused" in result.status["message"]
    assert any("s2: the label s2-odd is odd" in w for w in result.warnings)

    policies, chain = handed_over(stored())  # as recorded: both VAPs and the MAP marked
    assert policies.handed_over == {"s2-native-demo": ALL}
    result = chain.admit(request({"s2-bad": "x", "s2-odd": "y"}), mutating=False)
    assert result.allowed and not result.warnings  # the apiserver's denial and warning, each once


def test_a_mark_going_brings_the_rules_back_at_the_next_refresh():
    objects = stored()
    policies, chain = handed_over(objects)
    assert chain.admit(request({"s2-bad": "x"}), mutating=False).allowed
    del objects[("ValidatingAdmissionPolicy", "infergate-s2-native-demo")]["metadata"]["annotations"][ENFORCED_ANNOTATION]
    assert policies.refresh()
    assert not chain.admit(request({"s2-bad": "x"}), mutating=False).allowed


def test_a_reload_brings_every_rule_back_until_the_next_refresh(tmp_path):
    import shutil

    shutil.copytree(DATA / "policies", tmp_path / "policies")
    base = load_policy_directory(PolicySource(tmp_path / "policies"), EVALUATOR)
    objects = stored()
    policies = HandedOverPolicies(base, lambda: objects, EVALUATOR, RESOURCES)
    policies.refresh()
    assert policies.current() is not base.current()
    file = tmp_path / "policies" / "demo.yaml"
    file.write_text(file.read_text() + "\n")  # same policies, a new set
    import os

    os.utime(file, ns=(1, 1))
    assert base.poll()
    assert policies.current() is base.current()  # every rule, until the refresh has looked
    policies.refresh()
    assert policies.current() is not base.current()


def test_without_rules_keeps_every_rules_place():
    policy = directory().current().policies[0].definition
    reduced = without_rules(policy, frozenset({"warnings[0]"}))
    assert reduced.spec.warnings[0].expression == "true"
    assert reduced.spec.validations == policy.spec.validations
    assert len(reduced.spec.warnings) == len(policy.spec.warnings)


def test_serve_native_policies_without_the_cluster_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    from tests.support.paths import REPO

    done = subprocess.run([sys.executable, "-m", "webhook", "serve", "--port", "0", "--native-policies"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("infergate: error: serve: --native-policies needs --kube-state "
                                   "(the marks are read from the cluster)")


def test_a_vap_no_longer_generated_is_unmarked_first_then_deleted():
    """As recorded: the policies lost their warning; the controller's next round unmarked the
    ``-warn`` VAP and deleted its binding (2 writes), the round after its grace deleted the VAP
    (1 write). A webhook still on the old policies evaluates the warning again from the first of
    those rounds on, before the apiserver stops warning; one on the new ones never had it."""
    later, pruned = recorded()["later"], recorded()["pruned"]
    assert (later["writes"], pruned["writes"]) == (4, 2)  # (the MAP too: it lost its mutation)
    unmarked = {stored_key(o): o for o in later["stored"]}
    warn = unmarked[("ValidatingAdmissionPolicy", "infergate-s2-native-demo-warn")]
    assert ENFORCED_ANNOTATION not in (warn["metadata"].get("annotations") or {})
    assert ("ValidatingAdmissionPolicyBinding", "infergate-s2-native-demo-warn") not in unmarked
    assert ("ValidatingAdmissionPolicy", "infergate-s2-native-demo-warn") not in \
        {stored_key(o) for o in pruned["stored"]}
    old = exported()
    new_policies = load_policy_directory(PolicySource(DATA / "policies-later"), EVALUATOR).current()
    new = export([p.definition for p in new_policies.policies if getattr(p, "definition", None)], RESOURCES)
    for stored_now in (unmarked, {stored_key(o): o for o in pruned["stored"]}):
        assert enforced_rules(old, stored_now) == {"s2-native-demo": frozenset({"validations[0]"})}
        assert enforced_rules(new, stored_now) == {"s2-native-demo": frozenset({"validations[0]"})}


# -- the apiserver's defaults: nothing else passes as generated ----------------------------------


def test_the_recorded_objects_are_the_generated_ones_with_the_apiservers_defaults_alone():
    wanted = generated(exported()) + probe_objects(recorded()["token"]) + probe_mutation_objects(recorded()["token"])
    objects = stored()
    assert {stored_key(o) for o in wanted} == set(objects)
    for obj in wanted:
        assert stored_as_generated(objects[stored_key(obj)], obj), stored_key(obj)


@pytest.mark.parametrize("key, edit", [
    (("MutatingAdmissionPolicyBinding", "infergate-s2-native-demo"),
     lambda spec: spec.update(matchResources={"namespaceSelector": {"matchLabels": {"team": "a"}}})),
    (("ValidatingAdmissionPolicyBinding", "infergate-s2-native-demo"),
     lambda spec: spec.update(matchResources={"objectSelector": {"matchLabels": {"team": "a"}}})),
    (("MutatingAdmissionPolicy", "infergate-s2-native-demo"),
     lambda spec: spec.update(matchConditions=[{"name": "never", "expression": "false"}])),
    (("ValidatingAdmissionPolicy", "infergate-s2-native-demo"),
     lambda spec: spec["matchConstraints"].update(matchPolicy="Exact")),
    (("MutatingAdmissionPolicy", "infergate-s2-native-demo"),
     lambda spec: spec.update(failurePolicy="Ignore")),
])
def test_a_field_added_to_a_stored_object_is_not_the_generated_one(key, edit):
    """A binding narrowed by someone (or a policy given a match condition) no longer enforces
    where the webhook would: its rules come back to the webhook."""
    objects = stored()
    edit(objects[key]["spec"])
    wanted = {stored_key(o): o for o in generated(exported())}[key]
    assert not stored_as_generated(objects[key], wanted)
    lost = "mutations[0]" if key[0].startswith("Mutating") else "validations[0]"
    assert lost not in enforced_rules(exported(), objects)["s2-native-demo"]


# -- the mutation probe, as recorded ----------------------------------------------------------------


@cache
def mutation_probe() -> dict:
    return json.loads((DATA / "mutation-probe.json").read_text())


def test_the_mutation_probe_is_recognised_by_the_object_the_dry_run_returned():
    trials = mutation_probe()["trials"]
    assert len(trials) == 3
    for trial in trials:
        token, answers = trial["token"], trial["answers"]
        # the first dry run right after the MAP's write came back as sent: the probe is needed
        assert not answers[0]["mutated"] and trial["first_unmutated"] is not None
        assert not probe_mutated(trial["first_unmutated"], token)
        # then the apiserver returned the object as its MAP left it, well within the probe's 30 s
        assert answers[-1]["mutated"] and answers[-1]["after_seconds"] < 30
        assert probe_mutated(trial["mutated"], token)
        assert not probe_mutated(trial["mutated"], "0123456789abcdef")
        request = probe_mutation_request(token, "default")
        assert trial["mutated"]["metadata"]["labels"] == request["metadata"]["labels"]
        assert trial["mutated"]["metadata"]["generateName"] == request["metadata"]["generateName"]


def test_the_mutation_probe_objects_are_what_the_apiserver_stored():
    last = mutation_probe()["trials"][-1]["token"]
    objects = {stored_key(o): o for o in mutation_probe()["stored"]}
    for obj in probe_mutation_objects(last):
        assert stored_as_generated(objects[stored_key(obj)], obj), stored_key(obj)
    # the probe VAP's and the probe MAP's ConfigMaps differ: each probe selects its own request only
    assert probe_mutation_request(last, "x")["metadata"]["labels"].keys().isdisjoint(
        probe_objects(last)[0]["spec"]["matchConstraints"]["objectSelector"]["matchLabels"].keys())


# -- the webhook leaves the marked mutation to the apiserver ---------------------------------------


def test_the_webhook_leaves_a_marked_mutation_to_the_apiserver_and_its_mutation_is_idempotent():
    # what the apiserver returned with the generated MAP in force (and no webhook): mutated
    applied = recorded()["warned"]["body"]
    assert applied["spec"]["minReplicas"] == 1

    def without_min_replicas() -> AdmissionRequest:
        req = request({})
        assert "minReplicas" not in req.object["spec"]
        return req

    def with_min_replicas_of(obj: dict) -> AdmissionRequest:
        req = request({})
        req.object["spec"]["minReplicas"] = obj["spec"]["minReplicas"]
        return req

    _, chain = handed_over({})  # nothing in the cluster: the webhook mutates
    patch = chain.admit(without_min_replicas(), mutating=True).patch
    assert {"op": "add", "path": "/spec/minReplicas", "value": 1} in patch
    # the webhook after the apiserver's MAP (the overlap of both): nothing more to do
    assert chain.admit(with_min_replicas_of(applied), mutating=True).patch == []

    policies, chain = handed_over(stored())  # as recorded: the MAP marked
    assert "mutations[0]" in policies.handed_over["s2-native-demo"]
    assert not any(op.get("path") == "/spec/minReplicas" for op in chain.admit(without_min_replicas(), mutating=True).patch)


def test_without_rules_keeps_every_mutations_place():
    policy = directory().current().policies[0].definition
    reduced = without_rules(policy, frozenset({"mutations[0]"}))
    assert [(m.patchType, m.expression) for m in reduced.spec.mutations] == [("JSONPatch", "[]")]
    assert reduced.spec.validations == policy.spec.validations and reduced.spec.warnings == policy.spec.warnings


def test_the_shipped_exported_mutations_are_idempotent_defaults():
    """The overlap of the apiserver's MAP and the webhook's mutation (before the mark, and while a
    mark is going) mutates twice: safe, because each exported shipped mutation, run on what it
    produced, patches nothing more (a default set only where the field is absent). Checked on
    every example manifest of the kinds the generated MAPs match."""
    import yaml

    from tests.support.paths import REPO
    from tests.support.policy import chain as shipped_chain, patched, request as review, shipped_policies

    result = export([p.definition for p in shipped_policies().policies if getattr(p, "definition", None)], RESOURCES)
    assert result.mutating_rules, "the shipped policies export no mutation"
    kinds_mutated = {(rule["apiGroups"][0], rule["resources"][0])
                     for o in result.objects if o["kind"] == "MutatingAdmissionPolicy"
                     for rule in o["spec"]["matchConstraints"]["resourceRules"]}
    tried = mutated = 0
    for path in sorted((REPO / "examples" / "manifests").rglob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            group = obj["apiVersion"].rpartition("/")[0]
            if not any(g == group and r == obj["kind"].lower() + "s" for g, r in kinds_mutated):
                continue
            first = shipped_chain().admit(review(obj), mutating=True)
            if not first.allowed:
                continue
            once = patched(obj, first.patch)
            again = shipped_chain().admit(review(once), mutating=True)
            assert again.patch == [], (path.name, again.patch)
            tried, mutated = tried + 1, mutated + bool(first.patch)
    assert tried >= 5 and mutated >= 3, (tried, mutated)
