"""The Kubernetes mutation library (typed ``Object{}`` construction, ``JSONPatch{}``,
``jsonpatch.escapeKey``): parsed and checked as cel-go does, evaluated by both engines to the
same values, read back with the apiserver's run-time checks (``webhook.cel.mutation``)."""

from __future__ import annotations

import pytest

from webhook.cel import CelError, Evaluator
from webhook.cel.common.types import DYN
from webhook.cel.mutation import (APPLY_RESULT, JSON_PATCH_RESULT, MutationError, check_mutation, json_patches,
                                  object_value, runtime_source)
from webhook.cel.syntax.ast import CreateStruct
from webhook.cel.syntax.parser import parse

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
ENGINES = ("cel-expr", "cel-python")
OBJECT = {"metadata": {"name": "g", "labels": {"app": "g"}}, "spec": {"replicas": 1, "ports": [{"name": "a"}]}}


def _run(engine: str, source: str):
    program = Evaluator(engine).compile(runtime_source(source), VARIABLES)
    return program.evaluate({"object": OBJECT, "oldObject": None, "request": {}, "params": None,
                             "namespaceObject": None, "variables": {}})


def test_construction_parses_as_cel_go_create_message() -> None:
    expr = parse('Object{spec: Object.spec{replicas: 3}}')
    assert isinstance(expr, CreateStruct) and expr.name == "Object"
    [(field, inner)] = expr.fields
    assert field == "spec" and isinstance(inner, CreateStruct) and inner.name == "Object.spec"


def test_checker_types_the_results_and_refuses_what_cel_go_refuses() -> None:
    types = {name: DYN for name in VARIABLES}
    assert check_mutation('Object{spec: Object.spec{replicas: 3}}', types).result_type == APPLY_RESULT
    assert check_mutation('[JSONPatch{op: "add", path: "/a", value: 1}]', types).result_type == JSON_PATCH_RESULT
    assert [m for _, m in check_mutation('JSONPatch{op: 1, other: "x"}', types).errors] == [
        "expected type of field 'op' is 'string' but provided type is 'int'",
        "expected type of field 'other' is '' but provided type is 'string'"]
    assert [m for _, m in check_mutation('Thing{a: 1}', types).errors] == [
        "undeclared reference to 'Thing' (in container '')"]
    # outside a mutation's environment no type can be constructed
    from webhook.cel.checker.checker import check
    assert [m for _, m in check(parse('Object{}'), types, {}).errors] == [
        "undeclared reference to 'Object' (in container '')"]


@pytest.mark.parametrize("engine", ENGINES)
def test_apply_configuration_value(engine: str) -> None:
    value = _run(engine, 'Object{spec: Object.spec{replicas: object.spec.replicas + 1, '
                         'ports: [Object.spec.ports{name: "b"}], extra: {"k": "v"}}}')
    assert object_value(value) == {"spec": {"replicas": 2, "ports": [{"name": "b"}], "extra": {"k": "v"}}}


@pytest.mark.parametrize("engine", ENGINES)
def test_type_names_must_spell_the_field_path(engine: str) -> None:
    with pytest.raises(MutationError) as caught:
        object_value(_run(engine, 'Object{spec: Object.specs{replicas: 1}}'))
    assert str(caught.value) == ('type mismatch: unexpected type name "Object.specs", expected "Object.spec", which '
                                 'matches field name path from root Object type')


@pytest.mark.parametrize("engine", ENGINES)
def test_json_patch_values_and_escape_key(engine: str) -> None:
    value = _run(engine, '[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("a.io/b~c"), '
                         'value: "x"}, JSONPatch{op: "move", from: "/spec/replicas", path: "/spec/count"}, '
                         'JSONPatch{op: "remove", path: "/spec/ports/0"}]')
    assert json_patches(value) == [
        {"op": "add", "path": "/metadata/labels/a.io~1b~0c", "value": "x"},
        {"op": "move", "path": "/spec/count", "from": "/spec/replicas"},
        {"op": "remove", "path": "/spec/ports/0"}]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_inside_a_construction_is_the_result(engine: str) -> None:
    with pytest.raises(CelError, match="no such key: nothere"):
        _run(engine, '[JSONPatch{op: "replace", path: "/spec/replicas", value: object.spec.nothere}]')


def test_a_json_patch_expression_must_give_a_list() -> None:
    with pytest.raises(MutationError, match="should evaluate to array"):
        json_patches({"op": "add"})
