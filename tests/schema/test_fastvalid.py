"""The generated "surely valid" predicate (``webhook.schema.fastvalid``) against the walk.

Whenever the predicate says a value passes, the walk (``SchemaValidator.walk``, kube-openapi's
semantics) must report nothing; it may say False whenever it likes. Checked on every recorded
case's object, every example manifest, generated edits of them, and generated schemas with
generated values; and it must answer True for the valid objects (else it saves nothing).
"""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.offline.recorded_suites import load_suite
from webhook.schema import CRDRegistry
from webhook.schema.openapi import SchemaValidator
from webhook.schema.structural import ABSENT, compile_schema

from tests.schema.helpers import json_paths
from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
from tests.support.paths import CASES, MANIFESTS
from tests.support.cel import EVALUATOR

REGISTRY = CRDRegistry.shipped(evaluator=EVALUATOR)


def _walk(validator: SchemaValidator, value, old=ABSENT):
    return validator.walk(value, old)


def _agree(validator: SchemaValidator, value) -> bool:
    """The predicate's answer, after checking that a True is the walk's "no errors"."""
    passes = validator.passes(value)
    if passes:
        assert _walk(validator, value) == [], value
    return passes


def _examples() -> list[dict]:
    objects = []
    for folder in ("valid", "invalid"):
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            objects += [(folder, d) for d in yaml.safe_load_all(path.read_text())
                        if isinstance(d, dict) and REGISTRY.served(d.get("apiVersion"), d.get("kind"))]
    return objects


def _validator(obj: dict) -> SchemaValidator:
    return REGISTRY.served(obj.get("apiVersion"), obj.get("kind")).validator


def test_every_shipped_schema_has_a_predicate():
    for served in (REGISTRY.served(*kind) for kind in REGISTRY.kinds()):
        assert served.validator.passes is not None


def test_valid_example_manifests_pass_without_the_walk():
    for folder, obj in _examples():
        prepared, _ = REGISTRY.prepare("CREATE", copy.deepcopy(obj), namespace=obj["metadata"].get("namespace"))
        passes = _agree(_validator(obj), prepared)
        if folder == "valid":
            assert passes, obj["metadata"]["name"]


def test_recorded_cases(monkeypatch):
    """Every value the walk is asked about while the recorded cases run (on their suites' CRDs)."""
    seen: list[tuple[SchemaValidator, object, object]] = []
    original = SchemaValidator.validate

    def recording(self, value, old=ABSENT):
        seen.append((self, copy.deepcopy(value), copy.deepcopy(old) if old is not ABSENT else ABSENT))
        return original(self, value, old)

    monkeypatch.setattr(SchemaValidator, "validate", recording)
    for suite in (load_suite(CASES / name, EVALUATOR) for name in OBJECT_SUITES):
        for case in suite.cases:
            recorded_outcome(case.suite.registry, case.data)
    answered = 0
    for validator, value, old in seen:
        if validator.passes(value):
            answered += 1
            assert _walk(validator, value, old) == [] == _walk(validator, value), value
    assert answered >= 200, (answered, len(seen))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)


_VALID = [obj for folder, obj in _examples() if folder == "valid"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_edits_of_valid_objects(data):
    obj = copy.deepcopy(data.draw(st.sampled_from(_VALID)))
    prepared, _ = REGISTRY.prepare("CREATE", obj, namespace=obj["metadata"].get("namespace"))
    path = data.draw(st.sampled_from([p for p in json_paths(prepared) if p]))
    target = prepared
    for step in path[:-1]:
        target = target[step]
    if data.draw(st.booleans()) and isinstance(target, dict):
        target.pop(path[-1])
    else:
        target[path[-1]] = data.draw(_json)
    _agree(_validator(obj), prepared)


_leaf_schema = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["string", "integer", "number", "boolean"]),
    "format": st.sampled_from(["int32", "int64", "float", "double", "date-time", "byte", "uuid", "hostname"]),
    "nullable": st.booleans(),
    "enum": st.lists(st.one_of(st.text(max_size=2), st.integers(-3, 3), st.floats(-3, 3, width=32), st.none()),
                     max_size=3),
    "minimum": st.one_of(st.integers(-5, 5), st.floats(-5, 5, width=32)),
    "maximum": st.one_of(st.integers(-5, 5), st.floats(-5, 5, width=32)),
    "exclusiveMinimum": st.booleans(),
    "exclusiveMaximum": st.booleans(),
    "multipleOf": st.sampled_from([2, 0.5]),
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 3),
    "pattern": st.sampled_from(["^a", "b$", "[0-9]", "("]),
    "x-kubernetes-int-or-string": st.booleans(),
})


def _schemas(children):
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("array"), "items": children},
                              optional={"minItems": st.integers(0, 2), "maxItems": st.integers(0, 2),
                                        "uniqueItems": st.booleans(), "nullable": st.booleans()}),
        st.fixed_dictionaries({"type": st.just("object"),
                               "properties": st.dictionaries(st.sampled_from("abc"), children, max_size=3)},
                              optional={"required": st.lists(st.sampled_from("abcd"), max_size=2),
                                        "additionalProperties": st.one_of(st.booleans(), children),
                                        "minProperties": st.integers(0, 2), "maxProperties": st.integers(0, 2),
                                        "nullable": st.booleans(),
                                        "anyOf": st.lists(children, min_size=1, max_size=2)}),
    )


_schema = st.recursive(_leaf_schema, _schemas, max_leaves=5)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-6, 6) | st.sampled_from([2**31, -(2**31) - 1, 2**63 - 1])
    | st.floats(-6, 6, width=32) | st.sampled_from([0.5, 1.0, 3.4e38, 1e39])
    | st.sampled_from(["", "a", "ab", "b", "1", "abc", "2024-01-01T00:00:00Z", "not-a-date", "aGk="]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
    max_leaves=6,
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schema, value=_values)
def test_generated_schemas_and_values(schema, value):
    _agree(SchemaValidator(compile_schema(schema)), value)


@pytest.mark.parametrize(("schema", "value", "expected"), [
    ({"type": "string", "maxLength": 2}, "ab", True),
    ({"type": "string", "maxLength": 2}, "abc", False),
    ({"type": "string", "pattern": "^[a-z]+$"}, "abc", True),
    ({"type": "string", "pattern": "^[a-z]+$"}, "ab1", False),
    ({"type": "string", "enum": ["a", "b"]}, "b", True),
    ({"type": "string", "enum": ["a", "b"]}, "c", False),
    ({"type": "integer", "minimum": 1, "maximum": 3}, 3, True),
    ({"type": "integer", "minimum": 1, "maximum": 3, "exclusiveMaximum": True}, 3, False),
    ({"type": "integer", "format": "int32"}, 2**31, False),
    ({"type": "number"}, 1, True),                            # an integer is a number
    ({"type": "integer"}, 1.0, False),                        # kube-openapi's rule: the walk decides
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}, {"a": "x"}, True),
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}, {}, False),
    ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, {"b": 1}, False),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, {"x": 1}, True),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 1}, ["a", "b"], False),
    ({"type": "string", "nullable": True}, None, True),
    ({"type": "string"}, None, False),
    ({"anyOf": [{"type": "string"}]}, "a", False),           # combinators: always the walk
    ({"type": "array", "uniqueItems": True, "items": {}}, [1], False),
])
def test_keywords(schema, value, expected):
    validator = SchemaValidator(compile_schema(schema))
    assert validator.passes(value) is expected
    if expected:
        assert _walk(validator, value) == []
