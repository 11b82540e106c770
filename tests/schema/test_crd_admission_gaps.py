"""CRD admission for CRDs read from clusters (arbitrary ones): each expectation is written from
Kubernetes' own code, named beside it (apiextensions-apiserver's validation.go, structural
schema validation, structural defaulting; cel-go for CEL's regexp errors)."""

from __future__ import annotations

import copy

import pytest

from webhook.schema import CRDRegistry
from webhook.schema.crd_admission import check_crd
from tests.support.cel import EVALUATOR

ROOT = "spec.validation.openAPIV3Schema.properties[spec]"


def crd(spec_schema: dict, *, versions: int = 1, **version_fields) -> dict:
    version = {"served": True, "storage": True,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}, **version_fields}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io"},
            "spec": {"group": "example.io", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{**copy.deepcopy(version), "name": f"v{i + 1}", "storage": i == 0}
                                  for i in range(versions)]}}


def errors_of(definition: dict) -> list[str]:
    errors, _ = check_crd(definition, EVALUATOR)
    return errors


# validateMapListKeysMapSet: field.Forbidden(...Key(k).Child("nullable"), "this property is in
# x-kubernetes-list-map-keys, so it cannot be nullable"); items: "cannot be nullable when
# x-kubernetes-list-type is " + listType
def test_a_nullable_list_map_key_is_refused():
    keyed = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
             "items": {"type": "object", "required": ["name"],
                       "properties": {"name": {"type": "string", "nullable": True}}}}
    assert errors_of(crd({"type": "object", "properties": {"l": keyed}})) == [
        f"{ROOT}.properties[l].items.properties[name].nullable: Forbidden: this property is in "
        "x-kubernetes-list-map-keys, so it cannot be nullable"]


def test_nullable_items_of_a_set_are_refused():
    listed = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "nullable": True}}
    assert errors_of(crd({"type": "object", "properties": {"l": listed}})) == [
        f"{ROOT}.properties[l].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set"]


# structural defaulting's validate: a default that passes the schema is validated by the CEL
# validator at pth.Child("default"), with the default as self and oldSelf, then (ratcheting) as a
# create; the CEL error for a scalar shows its value, as for objects
def test_a_default_that_breaks_its_own_rule_is_refused():
    number = {"type": "integer", "default": 5, "x-kubernetes-validations": [{"rule": "self < 3", "message": "small"}]}
    assert errors_of(crd({"type": "object", "properties": {"n": number}})) == [
        f"{ROOT}.properties[n].default: Invalid value: 5: small"]


def test_an_object_default_is_checked_by_the_rules_below_it():
    spec = {"type": "object", "default": {"n": 5},
            "properties": {"n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 3"}]}}}
    assert errors_of(crd(spec)) == [f"{ROOT}.default.n: Invalid value: 5: failed rule: self < 3"]


def test_a_default_is_also_checked_as_a_create_for_optional_old_self_rules():
    rule = {"rule": "oldSelf.hasValue()", "optionalOldSelf": True, "message": "set on create"}
    field = {"type": "string", "default": "a", "x-kubernetes-validations": [rule]}
    assert errors_of(crd({"type": "object", "properties": {"m": field}})) == [
        f'{ROOT}.properties[m].default: Invalid value: "a": set on create']
    good = {"type": "string", "default": "a", "x-kubernetes-validations": [{"rule": "self == 'a'"}]}
    assert errors_of(crd({"type": "object", "properties": {"m": good}})) == []


# validation.go: `} else if schema.XValidations[i].OptionalOldSelf != nil {` ... field.Invalid(
# ...Child("optionalOldSelf"), *OptionalOldSelf, "may not be set if oldSelf is not used in rule")
@pytest.mark.parametrize("value", [True, False])
def test_optional_old_self_set_without_old_self_is_refused(value):
    spec = {"type": "object", "x-kubernetes-validations": [{"rule": "true", "optionalOldSelf": value}]}
    assert errors_of(crd(spec)) == [
        f"{ROOT}.x-kubernetes-validations[0].optionalOldSelf: Invalid value: {str(value).lower()}: "
        "may not be set if oldSelf is not used in rule"]


# structural validateNestedValueValidation, as ValidateStructural runs it for CRDs
# (AllowNestedXValidations: false): field.Forbidden(...Child("x-kubernetes-validations"),
# "must be empty to be structural"); anyOf/oneOf/not never allow them
@pytest.mark.parametrize("junctor", ["allOf", "anyOf", "oneOf"])
def test_rules_inside_a_value_validation_are_refused(junctor):
    spec = {"type": "object", "properties": {"s": {"type": "string"}},
            junctor: [{"x-kubernetes-validations": [{"rule": "true"}]}]}
    assert errors_of(crd(spec)) == [
        f"{ROOT}.{junctor}[0].x-kubernetes-validations: Forbidden: must be empty to be structural"]


def test_a_nested_value_validation_under_allof_is_checked_too():
    spec = {"type": "object", "properties": {"s": {"type": "string"}},
            "allOf": [{"anyOf": [{"x-kubernetes-list-type": "set", "additionalProperties": {}}]}]}
    assert sorted(errors_of(crd(spec))) == sorted([
        f"{ROOT}.allOf[0].anyOf[0].additionalProperties: Forbidden: must be undefined to be structural",
        f"{ROOT}.allOf[0].anyOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural"])


# ValidateCustomResourceDefinitionSubresources: `!strings.HasPrefix(SpecReplicasPath, ".spec.")`
# -> field.Invalid(fldPath.Child("scale.specReplicasPath"), path, "should be a json path under
# .spec"); identical per-version subresources are the internal spec.subresources
def test_a_scale_subresource_outside_spec_and_status_is_refused():
    scale = {"scale": {"specReplicasPath": ".replicas", "statusReplicasPath": ".spec.ready",
                       "labelSelectorPath": ".selector"}}
    assert errors_of(crd({"type": "object"}, subresources=scale)) == [
        'spec.subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path under .spec',
        'spec.subresources.scale.statusReplicasPath: Invalid value: ".spec.ready": should be a json path under .status',
        'spec.subresources.scale.labelSelectorPath: Invalid value: ".selector": should be a json path under either '
        '.spec or .status']


def test_scale_paths_are_required_and_simple_json_paths():
    scale = {"scale": {"specReplicasPath": "spec.replicas"}}
    assert errors_of(crd({"type": "object"}, subresources=scale)) == [
        'spec.subresources.scale.specReplicasPath: Invalid value: "spec.replicas": must be a simple json path '
        'starting with .',
        "spec.subresources.scale.statusReplicasPath: Required value"]


def test_per_version_subresources_are_reported_per_version():
    definition = crd({"type": "object"}, versions=2)
    definition["spec"]["versions"][0]["subresources"] = {"scale": {"specReplicasPath": ".spec.replicas",
                                                                   "statusReplicasPath": ".status.replicas"}}
    definition["spec"]["versions"][1]["subresources"] = {"scale": {"specReplicasPath": ".status.replicas",
                                                                   "statusReplicasPath": ".status.replicas"}}
    assert errors_of(definition) == ['spec.versions[1].subresources.scale.specReplicasPath: Invalid value: '
                                     '".status.replicas": should be a json path under .spec']
    good = crd({"type": "object"}, subresources={"scale": {"specReplicasPath": ".spec.replicas",
                                                             "statusReplicasPath": ".status.replicas"}})
    assert errors_of(good) == []


# cel-go's String.Match: `matched, err := regexp.MatchString(...); if err != nil { return &Err{err} }`:
# Go's regexp error text ("error parsing regexp: " + code + ": `" + expr + "`"), then the
# apiserver's "<error> evaluating rule: <rule>"
@pytest.mark.parametrize(("pattern", "go_error"), [
    ("(", "error parsing regexp: missing closing ): `(`"),
    ("a)", "error parsing regexp: unexpected ): `a)`"),
    ("[", "error parsing regexp: missing closing ]: `[`"),
    ("a{2,1}", "error parsing regexp: invalid repeat count: `{2,1}`"),
    ("*", "error parsing regexp: missing argument to repetition operator: `*`"),
])
def test_a_pattern_that_does_not_compile_is_gos_regexp_error(pattern, go_error):
    spec = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 8},
                                             "p": {"type": "string", "maxLength": 8}},
            "x-kubernetes-validations": [{"rule": "self.s.matches(self.p)"}]}
    registry = CRDRegistry([crd(spec)], evaluator=EVALUATOR)
    outcome = registry.handle("CREATE", {"apiVersion": "example.io/v1", "kind": "Widget",
                                         "metadata": {"name": "w", "namespace": "default"},
                                         "spec": {"s": "x", "p": pattern}})
    assert [str(e) for e in outcome.errors] == [
        f'spec: Invalid value: "object": {go_error} evaluating rule: self.s.matches(self.p)']


def test_crd_files_may_be_kubectl_list_dumps(tmp_path):
    """`kubectl get crd -o yaml` writes a List; the API's own list omits each item's kind."""
    import yaml

    one, two = crd({"type": "object"}), crd({"type": "object"})
    two["metadata"]["name"] = "gadgets.example.io"
    two["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"}
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [one, two]}))
    api_list = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                "items": [{k: v for k, v in one.items() if k not in ("apiVersion", "kind")}]}
    (tmp_path / "api.json").write_text(yaml.safe_dump(api_list))
    assert CRDRegistry.load([tmp_path / "dump.yaml"], check=True, evaluator=EVALUATOR).kinds() == [
        ("example.io/v1", "Gadget"), ("example.io/v1", "Widget")]
    assert CRDRegistry.load([tmp_path / "api.json"], check=True, evaluator=EVALUATOR).kinds() == [("example.io/v1", "Widget")]


# kube-openapi's SchemaValidator.numberValidator: "We only pass the format to the validator if it
# is valid for the resolved type and the type is unambiguous (exactly one type specified)" — an
# int-or-string's type is integer,string, so a float gets the type error alone
def test_an_int_or_string_given_a_float_gets_one_error():
    spec = {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True}}}
    registry = CRDRegistry([crd(spec)], evaluator=EVALUATOR)

    def errors(value):
        return [str(e) for e in registry.handle("CREATE", {
            "apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"port": value}}).errors]

    assert errors(1.5) == ['spec.port: Invalid value: "number": spec.port in body must be of type integer,string: '
                           '"number"']
    assert errors(8080) == errors("http") == errors(2.0) == []
