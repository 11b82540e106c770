"""Where x-kubernetes-validations run, what old value they see, and how results are reported."""

from __future__ import annotations

from tests.schema.helpers import create, errors, registry, thing
from tests.support.cel import EVALUATOR

MARKER = ("<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
          "correct the existing errors to complete validation")


def _spec_rules():
    from tests.schema.helpers import crd
    from webhook.schema import CRDRegistry

    spec = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "!has(self.a) || self.a != 7", "message": "a must not be 7", "fieldPath": ".a"},
            {"rule": "!has(self.a) || self.a != 8", "message": "a is forbidden as 8", "reason": "FieldValueForbidden"},
        ],
        "properties": {
            "a": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0", "message": "a >= 0"}]},
            "name": {"type": "string", "maxLength": 8,
                     "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                      "items": {"type": "object", "required": ["k"],
                                "properties": {"k": {"type": "string", "maxLength": 4}, "v": {"type": "integer"}},
                                "x-kubernetes-validations": [{"rule": "!has(oldSelf.v) || self.v >= oldSelf.v",
                                                              "message": "v may not decrease"}]}},
            "labels": {"type": "object", "additionalProperties": {
                "type": "string", "maxLength": 8,
                "x-kubernetes-validations": [{"rule": "self != ''", "message": "empty"}]}},
            "mode": {"type": "string", "enum": ["x", "y"]},
        },
    }
    return CRDRegistry([crd(spec)], evaluator=EVALUATOR)


def test_node_rules_run_in_order_before_children_with_field_path_and_reason():
    reg = _spec_rules()
    assert errors(create(reg, {"a": 7})) == ["spec.a: Invalid value: a must not be 7"]
    assert errors(create(reg, {"a": 8})) == ["spec: Forbidden: a is forbidden as 8"]
    assert errors(create(reg, {"a": -1, "labels": {"z": "", "b": ""}})) == [
        "spec.a: Invalid value: -1: a >= 0",
        'spec.labels[b]: Invalid value: "": empty',
        'spec.labels[z]: Invalid value: "": empty',
    ]


def test_transition_rules_run_only_with_an_old_value():
    reg = _spec_rules()
    assert create(reg, {"name": "n1"}).allowed
    old = thing({"name": "n1", "items": [{"k": "a", "v": 5}, {"k": "b", "v": 1}]})
    out = reg.handle("UPDATE", thing({"name": "n2", "items": [{"k": "b", "v": 0}, {"k": "a", "v": 6},
                                                                {"k": "c", "v": 0}]}), old)
    assert errors(out) == [
        "spec.items[0]: Invalid value: v may not decrease",
        'spec.name: Invalid value: "n2": name is immutable',
    ]
    # removing the field: no old/new pair, no transition rule
    assert reg.handle("UPDATE", thing({}), old).allowed


def test_failing_rule_on_an_unchanged_value_is_a_warning():
    reg = _spec_rules()
    old = thing({"a": -1})
    out = reg.handle("UPDATE", thing({"a": -1, "name": "x"}), thing({"a": -1, "name": "x"}))
    assert out.allowed and out.warnings == ["spec.a: Invalid value: -1: a >= 0"]
    changed = reg.handle("UPDATE", thing({"a": -2}), old)
    assert errors(changed) == ["spec.a: Invalid value: -2: a >= 0"]


def test_blocking_schema_errors_replace_rules_with_the_marker():
    reg = _spec_rules()
    assert errors(create(reg, {"a": -1, "mode": "z"})) == [
        'spec.mode: Unsupported value: "z": supported values: "x", "y"', MARKER]
    # a pattern-like (non-blocking) error lets the rules run
    assert errors(create(reg, {"a": -1, "items": [{"k": "a"}, {"k": "a"}]})) == [
        'spec.items[1]: Duplicate value: {"k":"a"}', "spec.a: Invalid value: -1: a >= 0"]


def test_one_registry_answers_concurrent_writes_independently():
    from concurrent.futures import ThreadPoolExecutor

    reg = _spec_rules()
    specs = [{"a": i % 9 - 2, "labels": {"k": "" if i % 3 else "v"}} for i in range(60)]
    expected = [errors(create(reg, spec)) for spec in specs]
    with ThreadPoolExecutor(8) as pool:
        actual = list(pool.map(lambda spec: errors(create(reg, spec)), specs))
    assert actual == expected
