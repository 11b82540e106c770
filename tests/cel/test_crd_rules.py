"""Behaviour of ``webhook.cel.crd``: how the apiserver runs a schema node's validation rules."""

from __future__ import annotations

import pytest

from webhook.cel.crd import (
    ABSENT, OUT_OF_BUDGET, CostBudget, CrdRuleError, compile_schema_rules, normalize_field_path,
)
from webhook.schema.crd_admission import cost_error_message
from tests.support.cel import EVALUATOR

SPEC = {
    "type": "object",
    "properties": {
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "url": {"type": "string", "maxLength": 64},
        "foo-bar": {"type": "string", "maxLength": 8},
        "tags": {"type": "array", "maxItems": 4, "x-kubernetes-list-type": "set",
                 "items": {"type": "string", "maxLength": 8}},
        "labels": {"type": "object", "maxProperties": 4, "additionalProperties": {"type": "string", "maxLength": 8}},
        "since": {"type": "string", "format": "date-time"},
    },
}


def rules(*entries: dict, schema: dict | None = None, is_root: bool = False):
    return compile_schema_rules(dict(schema or SPEC, **{"x-kubernetes-validations": list(entries)}),
                                is_root=is_root, path="spec", engine=EVALUATOR.engine)


def failures(node_rules, value, old=ABSENT, budget: CostBudget | None = None):
    return node_rules.evaluate(value, old, budget=budget or CostBudget())


def test_compiled_once_per_schema_node() -> None:
    schema = dict(SPEC, **{"x-kubernetes-validations": [{"rule": "self.minReplicas >= 0"}]})
    assert compile_schema_rules(schema, is_root=False, path="spec", engine=EVALUATOR.engine) is compile_schema_rules(
        schema, is_root=False, path="spec", engine=EVALUATOR.engine)


def test_failed_rule_uses_message_or_the_rule() -> None:
    node = rules({"rule": "self.minReplicas <= self.maxReplicas", "message": " min must not exceed max "},
                 {"rule": "self.maxReplicas < 10"})
    first, second = failures(node, {"minReplicas": 30, "maxReplicas": 20})
    assert (first.index, first.message, first.error) == (0, "min must not exceed max", None)
    assert (second.index, second.message) == (1, "failed rule: self.maxReplicas < 10")


def test_runtime_error_is_worded_as_the_apiserver_does() -> None:
    node = rules({"rule": "self.minReplicas <= self.maxReplicas",
                  "message": "minReplicas should be less than or equal to maxReplicas."})
    [result] = failures(node, {"maxReplicas": 3})
    assert result.message is None
    assert result.error.endswith(" evaluating rule: minReplicas should be less than or equal to maxReplicas.")
    assert "minReplicas" in result.error


@pytest.mark.parametrize("expression, expected", [
    ("'max is ' + string(self.maxReplicas)", "max is 20"),
    ("'  padded  '", "padded"),
    ("''", "failed rule: self.maxReplicas < 10"),                 # empty: as if unset
    ("'two\\nlines'", "failed rule: self.maxReplicas < 10"),      # line break: as if unset
    ("string(self.minReplicas)", "failed rule: self.maxReplicas < 10"),  # runtime error: as if unset
])
def test_message_expression_and_its_fallbacks(expression: str, expected: str) -> None:
    node = rules({"rule": "self.maxReplicas < 10", "messageExpression": expression})
    [result] = failures(node, {"maxReplicas": 20})
    assert result.message == expected


def test_message_expression_falls_back_to_message() -> None:
    node = rules({"rule": "self.maxReplicas < 10", "message": "too many", "messageExpression": "''"})
    assert failures(node, {"maxReplicas": 20})[0].message == "too many"


def test_reason_and_field_path_are_reported() -> None:
    node = rules({"rule": "self.maxReplicas < 10", "reason": "FieldValueForbidden", "fieldPath": ".maxReplicas"},
                 {"rule": "!('x' in self.labels)", "fieldPath": ".labels['x']"})
    first, second = failures(node, {"maxReplicas": 20, "labels": {"x": "1"}})
    assert (first.reason, first.field_path) == ("FieldValueForbidden", "maxReplicas")
    assert (second.reason, second.field_path) == (None, "labels[x]")
    assert normalize_field_path(".labels['a.b']", SPEC) == "labels[a.b]"


def test_transition_rules_need_an_old_value() -> None:
    node = rules({"rule": "self.url == oldSelf.url", "message": "url is immutable"})
    assert node.uses_old_self
    assert failures(node, {"url": "hf://a"}) == []
    assert failures(node, {"url": "hf://a"}, {"url": "hf://a"}) == []
    assert failures(node, {"url": "hf://b"}, {"url": "hf://a"})[0].message == "url is immutable"


def test_optional_old_self_runs_on_create_too() -> None:
    node = rules({"rule": "oldSelf.hasValue() || self.url.startsWith('init-')", "optionalOldSelf": True})
    assert failures(node, {"url": "later"})[0].message.startswith("failed rule:")
    assert failures(node, {"url": "init-x"}) == []
    assert failures(node, {"url": "later"}, {"url": "init-x"}) == []


def test_the_message_of_an_optional_old_self_rule_sees_oldself_as_an_optional() -> None:
    """Kubernetes compiles a rule's messageExpression in the rule's environment."""
    node = rules({"rule": "!oldSelf.hasValue() || self.url == oldSelf.value().url", "optionalOldSelf": True,
                  "messageExpression": "oldSelf.hasValue() ? 'url was ' + oldSelf.value().url : 'new'"})
    assert failures(node, {"url": "b"}, {"url": "a"})[0].message == "url was a"
    with pytest.raises(CrdRuleError) as caught:
        rules({"rule": "oldSelf.hasValue()", "optionalOldSelf": True, "messageExpression": "'was ' + oldSelf.url"})
    assert "messageExpression compilation failed" in caught.value.errors[0]


def test_escaped_property_names() -> None:
    node = rules({"rule": "self.foo__dash__bar == 'fb'"})
    assert failures(node, {"foo-bar": "fb"}) == []
    assert [r.index for r in failures(node, {"foo-bar": "x"})] == [0]


def test_date_time_strings_are_timestamps() -> None:
    node = rules({"rule": "self.since < timestamp('2030-01-01T00:00:00Z')"})
    assert failures(node, {"since": "2020-05-01T10:00:00Z"}) == []
    assert [r.index for r in failures(node, {"since": "2031-05-01T10:00:00+02:00"})] == [0]


def test_set_lists_compare_without_order() -> None:
    node = rules({"rule": "self.tags == oldSelf.tags", "message": "tags are immutable"})
    assert failures(node, {"tags": ["a", "b"]}, {"tags": ["b", "a"]}) == []
    assert failures(node, {"tags": ["a", "c"]}, {"tags": ["b", "a"]})[0].message == "tags are immutable"


def test_uncompilable_rules_are_rejected_with_the_apiserver_wording() -> None:
    with pytest.raises(CrdRuleError) as caught:
        rules({"rule": "self.nope > 1"}, {"rule": "self.minReplicas + 1"})
    first, second = caught.value.errors
    assert first.startswith('spec.x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.nope \\u003e 1",')
    assert first.endswith("compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n | self.nope > 1\n"
                          " | ....^")
    assert second.endswith(": cel expression must evaluate to a bool")


def test_resource_root_exposes_type_and_object_meta() -> None:
    root = {"type": "object", "properties": {"spec": {"type": "object"}}}
    node = rules({"rule": "self.metadata.name.startsWith('a') && self.kind == 'Thing'"}, schema=root, is_root=True)
    assert failures(node, {"kind": "Thing", "metadata": {"name": "abc"}, "spec": {}}) == []
    with pytest.raises(CrdRuleError, match="undefined field 'labels'"):
        rules({"rule": "'a' in self.metadata.labels"}, schema=root, is_root=True)


def test_costs_are_estimated_from_schema_bounds() -> None:
    bounded = rules({"rule": "self.tags.all(t, t.matches('^[a-z]+$'))"})
    unbounded = rules({"rule": "self.all(t, t.matches('^[a-z]+$'))"}, schema={"type": "array", "items": {
        "type": "string"}})
    assert bounded.costs[0].rule < 100
    assert unbounded.costs[0].rule > 1_000_000_000


def test_runtime_budget_is_shared_and_exhaustion_stops_evaluation() -> None:
    node = rules({"rule": "self.maxReplicas < 10"}, {"rule": "self.minReplicas >= 0"})
    budget = CostBudget(limit=3)
    results = failures(node, {"maxReplicas": 1, "minReplicas": 1}, budget=budget)
    assert [r.error for r in results] == [OUT_OF_BUDGET]
    assert budget.exhausted
    assert failures(node, {"maxReplicas": 1, "minReplicas": 1}, budget=budget) == [results[0]]


def test_cost_factor_formatting() -> None:
    assert "factor of 1.000600x" in cost_error_message("estimated rule cost", 10_006_000, 10_000_000)
    assert "factor of 2.3x" in cost_error_message("estimated rule cost", 23_000_000, 10_000_000)
    assert "factor of more than 100x" in cost_error_message("estimated rule cost", 10**10, 10_000_000)


def test_embedded_resources_are_resource_roots() -> None:
    embedded = {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}
    node = rules({"rule": "self.kind == 'ConfigMap' && self.metadata.name.startsWith('cm-')"}, schema=embedded)
    assert failures(node, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-a"}, "data": {}}) == []
    assert len(failures(node, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cm-a"}})) == 1


def test_set_semantics_inside_macros_and_concatenation() -> None:
    node = rules({"rule": "[1].all(x, self.tags == oldSelf.tags) && (self.tags + ['z']).size() == 3"})
    assert failures(node, {"tags": ["a", "b"]}, {"tags": ["b", "a"]}) == []
    assert len(failures(node, {"tags": ["a", "z"]}, {"tags": ["z", "a"]})) == 1   # a set union: size 2


def test_objects_holding_sets_compare_with_set_semantics() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "n": {"type": "integer"}}}}}
    node = rules({"rule": "self.spec == oldSelf.spec", "message": "spec is immutable"}, schema=schema)
    assert failures(node, {"spec": {"tags": ["a", "b"], "n": 1}}, {"spec": {"tags": ["b", "a"], "n": 1}}) == []
    for old in ({"spec": {"tags": ["b", "a"], "n": 2}}, {"spec": {"tags": ["b", "a"]}},
                {"spec": {"tags": ["b", "a"], "n": 1, "extra": True}}):
        assert [r.message for r in failures(node, {"spec": {"tags": ["a", "b"], "n": 1}}, old)] == ["spec is immutable"]
