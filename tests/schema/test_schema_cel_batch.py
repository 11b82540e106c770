"""A schema's CEL rules in one program (``webhook.schema.celbatch``): the same answer as the
per-node walk for every recorded case, every CRD-rule vector (at the root, as a property and
as a list item) and every example manifest, with the batch switched on and off."""

from __future__ import annotations

import copy

import pytest
import yaml

import webhook.schema.celrules as celrules
from webhook import resources
from webhook.cel.ladder import ALL
from webhook.offline.cases import load_suite
from webhook.schema import CRDRegistry
from webhook.schema.celbatch import respell, build_plan
from webhook.schema.structural import ABSENT, compile_schema

from tests.cel.vectors import library_vectors
from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
from tests.support.paths import CASES, MANIFESTS

@pytest.fixture
def fast_paths(monkeypatch):
    """Counts the validations the batch answered (so that the comparisons are not vacuous)."""
    counted = {"batched": 0, "calls": 0}
    original = celrules.CelValidator._batched

    def counting(self, obj, old):
        answer = original(self, obj, old)
        counted["calls"] += 1
        counted["batched"] += answer is not None
        return answer

    monkeypatch.setattr(celrules.CelValidator, "_batched", counting)
    return counted


WALK = ALL.without("object_batch")


def _both_ways(run):
    """``run(routes)`` without the object batch, then with it."""
    return run(WALK), run(ALL)


def test_respelling_replaces_only_the_free_variables():
    names = {"self": "self.spec.x", "oldSelf": "oldSelf.spec.x", "__oldSelfPresent": "(p)"}
    assert respell("self.a == oldSelf.a && 'self' != self.b && __oldSelfPresent", names) == \
        "self.spec.x.a == oldSelf.spec.x.a && 'self' != self.spec.x.b && (p)"
    assert respell("has(self.a) && self.l.all(v, v.startsWith(self.p))", names) == \
        "has(self.spec.x.a) && self.spec.x.l.all(v, v.startsWith(self.spec.x.p))"
    assert respell("self.l.all(self, self > 0)", names) is None  # rebinds self: stays on the walk


def test_shipped_crds_batch_every_rule():
    """A regex on list items included (`self.matches(...)` on each allowed namespace): alone, its
    pattern is matched before the evaluation; in the batch the native program (or the engine's
    own `matches`) does it, with no Python call inside the engine. (infergate's own CRDs and the
    earlier versions: the current upstream ones have rules of nested comprehensions over list
    items, which the batch leaves to the walk.)"""
    registry = CRDRegistry.load([resources.crds_dir(), resources.data_dir("legacy_crds")])
    left: dict[str, list[str]] = {}
    for (_, kind), served in registry._served.items():
        for update in (False, True):
            plan = build_plan(served.schema, update=update)
            if served.cel is None:
                assert plan is None
                continue
            assert plan is not None, kind
            assert plan.program.python_calls == 0, kind
            left.setdefault(kind, [])
            left[kind] += [rule.rule for rules in plan.remaining.values() for rule in rules.rules]
    assert {kind: rules for kind, rules in left.items() if rules} == {}


def test_recorded_cases_answer_the_same_batched(fast_paths):
    suites = [load_suite(CASES / name) for name in OBJECT_SUITES]
    cases = [case for suite in suites for case in suite.cases]
    assert len(cases) >= 339
    registries = {id(suite): {routes: CRDRegistry(suite.registry.crds, routes=routes) for routes in (WALK, ALL)}
                  for suite in suites}
    for case in cases:
        walked, batched = _both_ways(lambda routes: recorded_outcome(registries[id(case.suite)][routes], case.data))
        assert batched == walked, case.name
    # the CEL step runs for most cases; the batch answers every one whose rules all hold
    assert fast_paths["batched"] >= 80, fast_paths


def test_example_manifests_answer_the_same_batched(fast_paths):
    registry = CRDRegistry.shipped()
    registries = {routes: CRDRegistry(registry.crds, routes=routes) for routes in (WALK, ALL)}
    objects, valid = [], 0
    for folder in ("valid", "invalid"):
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            found = [doc for doc in yaml.safe_load_all(path.read_text())
                     if isinstance(doc, dict) and registry.served(doc.get("apiVersion"), doc.get("kind"))]
            objects += found
            valid += len(found) if folder == "valid" else 0
    assert objects
    for obj in objects:
        for data in ({"operation": "CREATE", "object": obj},
                     {"operation": "UPDATE", "object": obj, "old": obj}):
            walked, batched = _both_ways(lambda routes: recorded_outcome(registries[routes], data))
            assert batched == walked, (obj["kind"], obj["metadata"].get("name"), data["operation"])
    # every valid object (with rules), both operations; invalid ones where their broken rule is not a CEL rule
    assert fast_paths["batched"] >= 2 * (valid - 1)  # (one valid kind, InferencePool, has no rules)


def _vectors():
    for library in ("crd_values", "escaping"):
        for vector in library_vectors(library, crd=True):
            if "compile_error_contains" not in vector["expect"]:
                yield vector


def _placements(vector):
    """The vector's schema and values at the root, as property ``v`` and as items of ``l``."""
    node = dict(vector["schema"], **{"x-kubernetes-validations": [{"rule": vector["expression"]}]})
    variables = vector.get("variables") or {}
    value, old = variables.get("self"), variables.get("oldSelf", ABSENT)
    if vector.get("is_resource_root") or node.get("type") == "object":
        yield "root", node, value, old
    yield "property", {"type": "object", "properties": {"v": node}}, {"v": value}, (
        ABSENT if old is ABSENT else {"v": old})
    yield "item", {"type": "object", "properties": {"l": {"type": "array", "items": node}}}, {"l": [value, value]}, (
        ABSENT if old is ABSENT else {"l": [old, old]})


@pytest.mark.parametrize("vector", list(_vectors()), ids=lambda v: v["id"])
def test_rule_vectors_answer_the_same_batched(vector):
    for where, schema, value, old in _placements(vector):
        if not isinstance(value, dict):
            continue
        root = compile_schema(copy.deepcopy(schema))

        def run(routes):
            errors, warnings = celrules.CelValidator(root, routes).validate(copy.deepcopy(value), copy.deepcopy(old))
            return [str(e) for e in errors], warnings

        walked, batched = _both_ways(run)
        assert batched == walked, where


def test_data_contradicting_the_schema_below_a_rule_reading_its_whole_value():
    """A float where an integer is declared passes structural validation (3.0 is an integer to
    kube-openapi) but not Kubernetes' conversion for CEL: the walk reports it, so must the batch,
    even when a rule above reads the whole object (and so selects it unchecked)."""
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self == self"}],
              "properties": {"c": {"type": "object", "properties": {"n": {"type": "integer"}},
                                   "x-kubernetes-validations": [{"rule": "self.n >= 0"}]}}}
    root = compile_schema(schema)

    def run(value, routes):
        errors, warnings = celrules.CelValidator(root, routes).validate(value)
        return [str(e) for e in errors], warnings

    walked, batched = _both_ways(lambda routes: run({"c": {"n": 3.0}}, routes))
    assert batched == walked
    assert walked == (['c: Invalid value: "object": invalid data, expected int, got float64 evaluating rule: '
                       'self.n >= 0'], [])
    assert _both_ways(lambda routes: run({"c": {"n": 3}}, routes)) == (([], []), ([], []))
