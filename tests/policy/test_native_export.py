"""``infergate native-policies``: the shipped AdmissionPolicies as ValidatingAdmissionPolicies,
MutatingAdmissionPolicies and their bindings (#36 item 2), read back from the command's
output: the objects, their names and labels, every rule either exported or named on stderr with
its reason, the JSON List form, and operators' action overrides as bindings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cel import Evaluator
from webhook.policy import load_directory
from webhook.policy.actions import parse_overrides
from webhook.policy.scope import PolicyInput
from webhook.shipped_data import policies_dir
from webhook.state import FileState
from webhook.state.selectors import from_label_selector

API = "admissionregistration.k8s.io/v1"
KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
         "MutatingAdmissionPolicyBinding"}
KEPT = re.compile(r"^(?P<policy>[a-z0-9.-]+): (?P<rule>\*|[a-zA-Z]+\[\d+\]): stays with the webhook: (?P<reason>.+)$")


def native_policies(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "native-policies", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def shipped() -> subprocess.CompletedProcess:
    return native_policies()


def objects_of(out: subprocess.CompletedProcess) -> list[dict]:
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc is not None]


def kept_of(out: subprocess.CompletedProcess) -> dict[tuple[str, str], str]:
    kept = {}
    for line in out.stderr.splitlines():
        m = KEPT.match(line)
        assert m, f"not a kept-rule line: {line!r}"
        key = (m["policy"], m["rule"])
        assert key not in kept, f"{key} named twice"
        kept[key] = m["reason"]
    return kept


def by_name(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def shipped_policies():
    return {p.name: p.definition for p in load_directory(policies_dir(), Evaluator())}


def test_every_object_is_named_labelled_and_bound(shipped):
    objects = objects_of(shipped)
    assert objects
    for o in objects:
        assert o["apiVersion"] == API and o["kind"] in KINDS
        assert o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "infergate"}
        assert o["metadata"]["name"].startswith("infergate-")
    names = set(shipped_policies())
    for kind, binding_kind in (("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"),
                               ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")):
        policies, bindings = by_name(objects, kind), by_name(objects, binding_kind)
        assert set(policies) == {b["spec"]["policyName"] for b in bindings.values()}
        assert set(policies) == set(bindings)  # one binding each, of the policy's name
        for name in policies:
            base = name.removeprefix("infergate-")
            assert base in names or (base.endswith("-warn") and base.removesuffix("-warn") in names)
    for name, binding in by_name(objects, "ValidatingAdmissionPolicyBinding").items():
        if name.endswith("-warn"):
            assert binding["spec"]["validationActions"] == ["Warn"]


def test_every_rule_is_exported_or_kept_with_a_reason(shipped):
    """Each rule of each shipped policy is in exactly one place: in a generated object (its
    expression and message as written) or on stderr, once, with why."""
    objects, kept = objects_of(shipped), kept_of(shipped)
    vaps, maps = by_name(objects, "ValidatingAdmissionPolicy"), by_name(objects, "MutatingAdmissionPolicy")
    for name, policy in shipped_policies().items():
        spec = policy.spec
        deny = vaps.get(f"infergate-{name}", {}).get("spec", {})
        warn = vaps.get(f"infergate-{name}-warn", {}).get("spec", {})
        mutate = maps.get(f"infergate-{name}", {}).get("spec", {})
        for section, rules, exported in (("validations", spec.validations, deny.get("validations", [])),
                                         ("warnings", spec.warnings, warn.get("validations", []))):
            for i, rule in enumerate(rules):
                written = [v for v in exported if v["expression"] == rule.expression]
                if (name, f"{section}[{i}]") in kept:
                    assert not written, f"{name} {section}[{i}] both exported and kept"
                    continue
                assert len(written) == 1, f"{name} {section}[{i}] neither exported nor kept"
                v = written[0]
                assert v.get("message") == rule.message and v.get("messageExpression") == rule.messageExpression
                assert "fieldPath" not in v  # not in a VAP's Validation: the apiserver refuses it
                if section == "validations":
                    assert v.get("reason", "Invalid") == rule.reason
        for i, _ in enumerate(spec.mutations):
            if (name, f"mutations[{i}]") not in kept:
                assert mutate.get("mutations"), f"{name} mutations[{i}] neither exported nor kept"
        for exported in (deny, warn, mutate):
            if not exported:
                continue
            assert exported["failurePolicy"] == spec.failurePolicy
            assert [c["expression"] for c in exported.get("matchConditions", [])] == \
                [c.expression for c in spec.matchConditions]
            own = {v.name: v.expression for v in spec.variables}
            for v in exported.get("variables", []):
                assert own[v["name"]] == v["expression"]
    # every kept rule names a policy and rule that exist, with a reason
    shipped_names = shipped_policies()
    for (policy, rule), reason in kept.items():
        if rule == "*":
            assert policy == "inferenceservice-max-parameter-count" and "Python" in reason
            continue
        section, index = rule[:-1].split("[")
        assert int(index) < len(getattr(shipped_names[policy].spec, section))


def test_the_reasons_rules_stay(shipped):
    kept = kept_of(shipped)
    assert kept[("inferenceservice-class", "validations[2]")] == (
        "reads lookups.cls (cluster state); reason ClaimDeviceMissing: a VAP gives only Forbidden, Invalid, "
        "RequestEntityTooLarge")
    assert "reads lookups.classes (cluster state)" == kept[("inferenceservice-defaults", "mutations[0]")]
    assert "(dataKey)" in kept[("kubeai-model-system-config", "validations[0]")]  # through variables.resourceProfiles
    assert kept[("kubeai-model-files", "validations[0]")] == (
        "validationStage Mutating: judged before the schema, where a VAP runs after it")
    # a list literal of an int and lists: infergate's check allows it, the apiserver's would warn
    assert kept[("inferencemodelrewrite-weights", "warnings[0]")] == (
        "variables.mixed does not type-check as the apiserver checks a VAP: refused: 3:45: expected type 'dyn' "
        "but found 'list(dyn)'")
    # the rule of the same policy that reads no params is exported
    assert ("kubeai-model-system-config", "warnings[0]") not in kept
    assert ("kubeai-model-engine", "validations[0]") not in kept
    assert ("inferenceservice-class", "validations[3]") not in kept  # reads only the object and request


def test_match_constraints_name_the_crds_resources(shipped):
    vaps = by_name(objects_of(shipped), "ValidatingAdmissionPolicy")
    assert vaps["infergate-kubeai-model-engine"]["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["kubeai.org"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
         "resources": ["models"], "scope": "*"}]
    rules = vaps["infergate-removed-api-versions-warn"]["spec"]["matchConstraints"]["resourceRules"]
    assert sorted((r["apiGroups"][0], r["resources"][0]) for r in rules) == [
        ("inference.networking.x-k8s.io", "inferencemodels"), ("inference.networking.x-k8s.io", "inferencepools")]
    immutable = vaps["infergate-inferenceservice-immutable"]["spec"]["matchConstraints"]["resourceRules"]
    assert immutable[0]["operations"] == ["UPDATE"]


def test_mutations_are_typed_as_map_has_them(shipped):
    maps = by_name(objects_of(shipped), "MutatingAdmissionPolicy")
    patch = maps["infergate-kubeai-model-defaults"]["spec"]["mutations"]
    assert patch == [{"patchType": "JSONPatch", "jsonPatch": {"expression": (
        "has(object.spec) && !has(object.spec.minReplicas)\n"
        "  ? [JSONPatch{op: 'add', path: '/spec/minReplicas', value: dyn(0)}]\n  : []")}}]
    applied = [m["applyConfiguration"]["expression"] for m in maps["infergate-inferenceservice-defaults"]["spec"]["mutations"]]
    assert applied[0] == "has(object.spec.launchStrategy) ? Object{} : Object{spec: Object.spec{launchStrategy: 'Latency'}}"
    assert "Object.spec.model.authSecretRef{key: 'token'}" in applied[1]
    assert maps["infergate-kubeai-model-defaults"]["spec"]["reinvocationPolicy"] == "IfNeeded"


def test_json_is_a_list_of_the_same_objects(shipped):
    out = native_policies("-o", "json")
    assert out.returncode == 0
    listed = json.loads(out.stdout)
    assert listed["apiVersion"] == "v1" and listed["kind"] == "List"
    assert listed["items"] == objects_of(shipped)
    assert out.stderr == shipped.stderr


def test_an_override_for_every_namespace_is_the_bindings_actions():
    out = native_policies("--policy-actions", "kubeai-model-engine=Warn,Audit")
    bindings = by_name(objects_of(out), "ValidatingAdmissionPolicyBinding")
    assert bindings["infergate-kubeai-model-engine"]["spec"]["validationActions"] == ["Warn", "Audit"]
    assert bindings["infergate-kubeai-model-engine-warn"]["spec"]["validationActions"] == ["Warn"]  # warnings stay warnings
    assert bindings["infergate-kubeai-model-engine-matrix"]["spec"]["validationActions"] == ["Deny"]


@pytest.mark.parametrize("given", [
    ["kubeai-model-engine=Warn@team=research"],
    ["kubeai-model-engine=Warn@team in (research,lab),tier!=prod", "kubeai-model-engine=Audit@env=ci"],
    ['{"kubeai-model-engine": [{"namespaceSelector": "team=research", "actions": ["Warn", "Audit"]},'
     ' {"actions": ["Deny", "Audit"]}]}'],
])
def test_namespace_scoped_overrides_become_one_binding_per_region(given):
    """For any namespace, exactly one binding selects it, with the actions the webhook would
    choose there (``ActionOverrides.resolve``)."""
    args = [a for value in given for a in ("--policy-actions", value)]
    out = native_policies(*args)
    assert out.returncode == 0, out.stderr
    bindings = [b for b in by_name(objects_of(out), "ValidatingAdmissionPolicyBinding").values()
                if b["spec"]["policyName"] == "infergate-kubeai-model-engine"]
    assert len(bindings) >= 2
    overrides = parse_overrides(given)
    policy = next(p for p in load_directory(policies_dir(), Evaluator()) if p.name == "kubeai-model-engine")
    for labels in ({}, {"team": "research"}, {"team": "lab"}, {"team": "lab", "tier": "prod"},
                   {"env": "ci"}, {"team": "research", "env": "ci"}, {"tier": "prod", "env": "ci"}):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": labels}}
        request = {"kind": {"group": "kubeai.org", "version": "v1", "kind": "Model"}, "namespace": "ns",
                   "operation": "CREATE"}
        inp = PolicyInput(request, {"kind": "Model"}, None, namespace, FileState(objects=[namespace]))
        expected, _ = overrides.resolve(policy, inp)
        selecting = [b for b in bindings if from_label_selector(
            b["spec"].get("matchResources", {}).get("namespaceSelector", {})).matches(
                {"kubernetes.io/metadata.name": "ns", **labels})]
        assert len(selecting) == 1, (labels, [b["metadata"]["name"] for b in selecting])
        assert set(selecting[0]["spec"]["validationActions"]) == set(expected), labels


POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: %(name)s}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [%(group)s], kinds: [%(kind)s]}]
%(rest)s
"""


def write_policy(directory: Path, name: str, group: str, kind: str, rest: str) -> None:
    (directory / f"{name}.yaml").write_text(POLICY % {"name": name, "group": group, "kind": kind, "rest": rest})


def test_what_a_binding_cannot_express_stays(tmp_path):
    write_policy(tmp_path, "class-check", "ai.deckhouse.io", "InferenceServiceClass", """\
  validations:
    - expression: "!has(object.spec.exposurePolicy)"
      message: no exposure""")
    write_policy(tmp_path, "list-apply", "kubeai.org", "Model", """\
  mutations:
    - patchType: ApplyConfiguration
      expression: "{'spec': {'features': ['TextGeneration']}}"
    - patchType: JSONPatch
      expression: "object.spec.?files.orValue([]).map(f, {'op': 'remove', 'path': '/spec/files/0'})"
    - patchType: ApplyConfiguration
      expression: "{'spec': {'engine': 'VLLM'}}"
""")
    (tmp_path / "on-delete.yaml").write_text("""\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: on-delete}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model], operations: [DELETE]}]
  mutations:
    - patchType: ApplyConfiguration
      expression: "{'spec': {'engine': 'VLLM'}}"
""")
    write_policy(tmp_path, "atomic-map", "kubeai.org", "Model", """\
  mutations:
    - patchType: ApplyConfiguration
      expression: "{'spec': {'env': {'A': 'b'}}}"
    - patchType: ApplyConfiguration
      expression: "{'spec': {'nowhere': {'a': 'b'}}}"
""")
    write_policy(tmp_path, "gateway-selector", "gateway.networking.k8s.io", "Gateway", """\
  mutations:
    - patchType: ApplyConfiguration
      expression: "{'spec': {'allowedListeners': {'namespaces': {'selector': {'matchLabels': {'a': 'b'}}}}}}"
""")
    out = native_policies("--policies", str(tmp_path), "--policy-actions", "class-check=Warn@team=a")
    kept = kept_of(out)
    assert kept[("gateway-selector", "mutations[0]")].endswith(
        "spec.allowedListeners.namespaces.selector is an atomic map: MAP replaces it whole, infergate merges into it")
    assert kept[("on-delete", "mutations[0]")] == \
        "the policy matches no CREATE or UPDATE, the only operations a MAP mutates"
    assert "cluster-scoped ai.deckhouse.io/InferenceServiceClass" in kept[("class-check", "validations[0]")]
    assert "sets a list (Object.spec.features)" in kept[("list-apply", "mutations[0]")]
    assert "not a list literal" in kept[("list-apply", "mutations[1]")]
    assert ("list-apply", "mutations[2]") not in kept
    assert ("atomic-map", "mutations[0]") not in kept  # env: a map of strings, merged key by key
    assert kept[("atomic-map", "mutations[1]")].endswith("spec.nowhere is in no schema of the kinds matched")
    maps = by_name(objects_of(out), "MutatingAdmissionPolicy")
    assert [m["applyConfiguration"]["expression"] for m in maps["infergate-list-apply"]["spec"]["mutations"]] == \
        ["Object{spec: Object.spec{engine: 'VLLM'}}"]
    assert "infergate-class-check" not in by_name(objects_of(out), "ValidatingAdmissionPolicy")
    # without the namespace-scoped override it is exported
    plain = by_name(objects_of(native_policies("--policies", str(tmp_path))), "ValidatingAdmissionPolicy")
    assert plain["infergate-class-check"]["spec"]["validations"] == [
        {"expression": "!has(object.spec.exposurePolicy)", "message": "no exposure"}]


def test_params_a_binding_can_pass(tmp_path):
    write_policy(tmp_path, "limits", "kubeai.org", "Model", """\
  paramRef: {apiVersion: v1, kind: ConfigMap, name: model-limits, namespace: kubeai}
  variables:
    - name: max
      expression: "params == null ? 10 : int(params.data.?maxReplicas.orValue('10'))"
  validations:
    - expression: object.spec.?maxReplicas.orValue(0) <= variables.max
      messageExpression: "'spec.maxReplicas: at most ' + string(variables.max)"
    - expression: object.spec.?minReplicas.orValue(0) >= 0
      message: minReplicas below 0""")
    write_policy(tmp_path, "anywhere", "kubeai.org", "Model", """\
  paramRef: {apiVersion: v1, kind: ConfigMap, name: model-limits}
  validations:
    - expression: params == null || has(object.spec.url)
      message: url required
    - expression: has(object.spec.engine)
      message: engine required""")
    out = native_policies("--policies", str(tmp_path))
    objects = objects_of(out)
    vap = by_name(objects, "ValidatingAdmissionPolicy")["infergate-limits"]["spec"]
    assert vap["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    binding = by_name(objects, "ValidatingAdmissionPolicyBinding")["infergate-limits"]["spec"]
    assert binding["paramRef"] == {"name": "model-limits", "namespace": "kubeai", "parameterNotFoundAction": "Allow"}
    kept = kept_of(out)
    assert "in any namespace" in kept[("anywhere", "validations[0]")]
    other = by_name(objects, "ValidatingAdmissionPolicy")["infergate-anywhere"]["spec"]
    assert "paramKind" not in other and [v["message"] for v in other["validations"]] == ["engine required"]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "broken.yaml").write_text("apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"
                                          "metadata: {name: x}\nspec: {matchConstraints: {resourceRules: []}}\n")
    out = native_policies("--policies", str(tmp_path))
    assert out.returncode == 2 and "broken.yaml:4" in out.stderr and not out.stdout
    out = native_policies("--policy-actions", "no-such-policy=Warn")
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith("infergate: error: ")
