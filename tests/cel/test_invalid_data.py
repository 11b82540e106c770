"""Rules evaluated directly on data that contradicts its schema fail as Kubernetes' UnstructuredToVal
makes them fail (the apiserver's pipeline rejects such objects before any rule runs)."""

from __future__ import annotations

import pytest

from webhook.cel.crd import CostBudget, compile_schema_rules
from tests.support.cel import EVALUATOR

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "maybe": {"type": "array", "items": {"type": "string", "nullable": True}},
    },
}


def _errors(rule: str, value: object) -> list[str | None]:
    rules = compile_schema_rules(dict(SCHEMA, **{"x-kubernetes-validations": [{"rule": rule}]}), is_root=False, engine=EVALUATOR.engine)
    return [r.error for r in rules.evaluate(value, budget=CostBudget())]


@pytest.mark.parametrize("rule, value, error", [
    ("self.name == 'x'", {"name": 5}, "invalid data, expected string, got int64"),
    ("self.count > 1", {"count": "2"}, "invalid data, expected int, got string"),
    ("self.count > 1", {"count": True}, "invalid data, expected int, got bool"),
    ("self.ratio > 1.0", {"ratio": [1]}, "invalid data, expected float, got []interface {}"),
    ("self.labels.a == 'b'", {"labels": {"a": None}}, "invalid data, got null for schema with nullable=false"),
    ("has(self.name)", [], "invalid data, expected a map for the provided schema with type=object"),
])
def test_a_rule_reading_invalid_data_fails_with_kubernetes_error(rule, value, error):
    assert _errors(rule, value) == [f"{error} evaluating rule: {rule}"]


def test_rules_that_do_not_read_the_invalid_value_run_as_usual():
    assert _errors("self.count > 1", {"count": 2, "name": 5}) == []
    assert _errors("self.ratio == 1.0", {"ratio": 1}) == []  # an integer is a valid number
    assert _errors("size(self.maybe) == 1", {"maybe": [None]}) == []  # nullable items may be null
    assert _errors("!has(self.name)", {"name": None}) == []  # a null property is absent, not invalid
