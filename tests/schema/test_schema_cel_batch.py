"""A schema's CEL rules in one program (``webhook.schema.celbatch``): the same answer as the
per-node walk for every recorded case, every CRD-rule vector (at the root, as a property and
as a list item) and every example manifest, with the batch switched on and off."""

from __future__ import annotations

import copy

import pytest
import yaml

import webhook.schema.celrules as celrules
from webhook.cel.ladder import ALL
from webhook.offline.recorded_suites import load_suite
from webhook.schema import CRDRegistry, bundled
from webhook.schema.celbatch import respell, build_plan
from webhook.schema.structural import ABSENT, compile_schema

from tests.cel.vectors import library_vectors
from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
from tests.support.paths import CASES, MANIFESTS
from tests.support.cel import EVALUATOR
from webhook.cel import Evaluator
from webhook.cel.ladder import DECLINED

@pytest.fixture
def fast_paths(monkeypatch):
    """Counts the validations the batch answered (so that the comparisons are not vacuous)."""
    counted = {"batched": 0, "calls": 0}
    original = celrules.CelValidator.object_batch_route

    def counting(self, *args):
        answer = original(self, *args)
        counted["calls"] += 1
        counted["batched"] += answer is not DECLINED
        return answer

    monkeypatch.setattr(celrules.CelValidator, "object_batch_route", counting)
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


def test_bundled_crds_batch_every_rule():
    """Every bundled CRD, both KubeAI Model CRDs. A regex on list items included
    (`self.matches(...)` on each allowed namespace): alone, its pattern is matched before the
    evaluation; in the batch the native program (or the engine's own `matches`) does it, with no
    Python call inside the engine. Rules whose runtime bound measures their values included too
    (nested comprehensions over list items: KubeAI's unique file paths, GIE's unique port
    numbers, Gateway API's parentRefs; Gateway API's filters counted with `filter`): their
    programs answer on the native route only, so a rule it does not translate stays on the
    walk (Gateway API's timeouts, compared as `duration()`s)."""
    left: dict[str, set[str]] = {}
    native_only: set[tuple[str, str, str]] = set()
    for choice in bundled.KUBEAI_CRDS:
        registry = CRDRegistry.shipped(choice, evaluator=EVALUATOR)
        for api_version, kind in registry.kinds():
            served = registry.served(api_version, kind)
            for update in (False, True):
                plan = build_plan(served.schema, update=update, evaluator=EVALUATOR)
                if served.cel is None:
                    assert plan is None
                    continue
                if plan is None and not update and kind == "GatewayClass":
                    continue  # its one rule is a transition rule (controllerName immutable): none on CREATE
                assert plan is not None, (choice, kind)
                assert plan.program.python_calls == 0, (choice, kind)
                for rules in plan.remaining.values():
                    left.setdefault(kind, set()).update(rule.rule for rule in rules.rules)
                if plan.native_only:
                    native_only.add((choice, kind, api_version))
                    assert plan.program.native is not None
    assert left == {"HTTPRoute": {"!(has(self.request) && has(self.backendRequest) && duration(self.request) != "
                                  "duration('0s') && duration(self.backendRequest) > duration(self.request))"}}
    nested = {("HTTPRoute", "gateway.networking.k8s.io/v1"), ("HTTPRoute", "gateway.networking.k8s.io/v1beta1"),
              ("InferencePool", "inference.networking.k8s.io/v1"),
              # the schema-only Gateway API kinds: listeners' and rules' nested comprehensions
              ("Gateway", "gateway.networking.k8s.io/v1"), ("Gateway", "gateway.networking.k8s.io/v1beta1"),
              ("GRPCRoute", "gateway.networking.k8s.io/v1")}
    assert native_only == {(choice, *kind) for choice in bundled.KUBEAI_CRDS for kind in nested} | {
        ("v0.23", "Model", "kubeai.org/v1")}
    # without the native route, the plan of the other rules: they stay on the walk
    served = CRDRegistry.shipped("v0.23", evaluator=EVALUATOR).served("kubeai.org/v1", "Model")
    plan = build_plan(served.schema, update=False, evaluator=EVALUATOR.without("native"))
    assert not plan.native_only
    assert [rule.rule for rules in plan.remaining.values() for rule in rules.rules] == [
        "!has(self.files) || self.files.size() <= 1 || !self.files.exists(f, self.files.filter(other, "
        "other.path == f.path).size() > 1)"]


# and the suites whose CRDs hold rules of nested comprehensions (batched on the native route)
NESTED_LOOP_SUITES = ("kubeai-model-v0.23.yaml", "gie-inferencepool-v1.yaml")


def test_recorded_cases_answer_the_same_batched(fast_paths):
    suites = [load_suite(CASES / name, EVALUATOR) for name in OBJECT_SUITES + NESTED_LOOP_SUITES]
    cases = [case for suite in suites for case in suite.cases]
    assert len(cases) >= 339
    registries = {id(suite): {routes: CRDRegistry(suite.registry.crds, evaluator=EVALUATOR.with_routes(routes)) for routes in (WALK, ALL)}
                  for suite in suites}
    for case in cases:
        walked, batched = _both_ways(lambda routes: recorded_outcome(registries[id(case.suite)][routes], case.data))
        assert batched == walked, case.name
    # the CEL step runs for most cases; the batch answers every one whose rules all hold
    assert fast_paths["batched"] >= 80, fast_paths


def test_example_manifests_answer_the_same_batched(fast_paths):
    registry = CRDRegistry.shipped(evaluator=EVALUATOR)
    registries = {routes: CRDRegistry(registry.crds, evaluator=EVALUATOR.with_routes(routes)) for routes in (WALK, ALL)}
    objects, valid = [], 0  # the valid ones first
    for folder in ("valid", "invalid"):
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            found = [doc for doc in yaml.safe_load_all(path.read_text())
                     if isinstance(doc, dict) and registry.served(doc.get("apiVersion"), doc.get("kind"))]
            objects += found
            valid += len(found) if folder == "valid" else 0
    assert objects
    answered = 0
    for i, obj in enumerate(objects):
        for data in ({"operation": "CREATE", "object": obj},
                     {"operation": "UPDATE", "object": obj, "old": obj}):
            before = fast_paths["batched"]
            walked, batched = _both_ways(lambda routes: recorded_outcome(registries[routes], data))
            where = (obj["kind"], obj["metadata"].get("name"), data["operation"])
            assert batched == walked, where
            # the batch answers every valid object whose kind has rules, both operations
            if i < valid and registry.served(obj["apiVersion"], obj["kind"]).cel is not None:
                assert fast_paths["batched"] == before + 1, where
                answered += 1
    assert answered >= 20


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
            errors, warnings = celrules.CelValidator(root, EVALUATOR.with_routes(routes)).validate(copy.deepcopy(value), copy.deepcopy(old))
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
        errors, warnings = celrules.CelValidator(root, EVALUATOR.with_routes(routes)).validate(value)
        return [str(e) for e in errors], warnings

    walked, batched = _both_ways(lambda routes: run({"c": {"n": 3.0}}, routes))
    assert batched == walked
    assert walked == (['c: Invalid value: "object": invalid data, expected int, got float64 evaluating rule: '
                       'self.n >= 0'], [])
    assert _both_ways(lambda routes: run({"c": {"n": 3}}, routes)) == (([], []), ([], []))


# Rules whose runtime bound measures their values (nested loops, lists built in a loop), batched
# on the native route only: true, false, a runtime error and past the per-call limits, each
# replayed with every route, without the batch, without the native route (the batch then holds
# the other rules), and with neither.
ROUTE_SETS = {"all": ALL, "walk": WALK, "no native": ALL.without("native"),
              "walk, no native": WALK.without("native")}
UNIQUE_PATHS = "spec: Invalid value: All file paths must be unique."


def _model(files, **spec):
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "default"},
            "spec": {"features": ["TextGeneration"], "url": "hf://org/model", "engine": "VLLM",
                     "resourceProfile": "nvidia-gpu-l4:1", "files": files, **spec}}


def _answers(registries, operation, obj, old, fast_paths):
    """{routes: outcome}, and the route sets whose batch answered."""
    outcomes, answered = {}, set()
    for label, registry in registries.items():
        before = fast_paths["batched"]
        outcomes[label] = recorded_outcome(registry, {"operation": operation, "object": obj, "old": old})
        if fast_paths["batched"] > before:
            answered.add(label)
    assert all(outcome == outcomes["walk"] for outcome in outcomes.values()), (obj, old)
    return outcomes["walk"], answered


ALL_BATCHED, OTHERS_BATCHED, NONE_BATCHED = {"all", "no native"}, {"no native"}, set()


@pytest.mark.parametrize("operation, files, old_files, errors, warnings, answered", [
    ("CREATE", [f"/f{i}" for i in range(10)], None, [], [], ALL_BATCHED),
    ("CREATE", ["/a"], None, [], [], ALL_BATCHED),
    ("CREATE", ["/a", "/b", "/a"], None, [UNIQUE_PATHS], [], OTHERS_BATCHED),
    ("CREATE", ["/a", "/b", "/a", "c"], None, [
        "spec.files[3].path: Invalid value: \"c\": Path must be an absolute path, starting with /, and must not "
        "contain a ':' character.", UNIQUE_PATHS], [], NONE_BATCHED),
    ("CREATE", [f"/f{i}" for i in range(11)], None, ["spec.files: Too many: 11: must have at most 10 items",
                                                    "<nil>: Invalid value: null: some validation rules were not "
                                                    "checked because the object was invalid; correct the existing "
                                                    "errors to complete validation"], [], NONE_BATCHED),
    ("UPDATE", ["/a", "/b", "/a"], ["/a", "/b", "/a"], [], [UNIQUE_PATHS], OTHERS_BATCHED),  # spec unchanged: ratcheted
    ("UPDATE", ["/a", "/b", "/a"], ["/a", "/b"], [UNIQUE_PATHS], [], OTHERS_BATCHED),
    ("UPDATE", ["/a", "/b"], ["/a", "/a"], [], [], ALL_BATCHED),
])
def test_kubeai_unique_file_paths_batched_only_when_true(operation, files, old_files, errors, warnings, answered,
                                                         fast_paths):
    shipped = CRDRegistry.shipped("v0.23", evaluator=EVALUATOR)
    registries = {label: CRDRegistry(shipped.crds, evaluator=EVALUATOR.with_routes(routes)) for label, routes in ROUTE_SETS.items()}
    obj = _model([{"path": path, "content": "x"} for path in files], minReplicas=1)
    old = None if old_files is None else _model([{"path": path, "content": "x"} for path in old_files], minReplicas=1)
    outcome, batched = _answers(registries, operation, obj, old, fast_paths)
    assert (sorted(outcome["errors"]), outcome["warnings"]) == (sorted(errors), warnings)
    assert batched == answered


@pytest.mark.parametrize("rule, values", [
    # true; false; a missing field (no such key) on some items
    ("self.l.all(x, self.l.exists_one(y, x.n == y.n))", ([{"n": 1}, {"n": 2}], [{"n": 1}, {"n": 1}],
                                                        [{"n": 1}, {"s": "a"}])),
    # a list built in a loop, then counted (``filter``)
    ("self.l.filter(x, x.n > 0).size() <= 2", ([{"n": 1}, {"n": -1}, {"n": 2}], [{"n": 1}] * 3,
                                              [{"n": 1}, {"s": "a"}])),
    # a division by zero in one pair only
    ("self.l.all(x, self.l.all(y, x.n / y.n >= 0))", ([{"n": 1}, {"n": 2}], [{"n": 1}, {"n": -2}],
                                                     [{"n": 1}, {"n": 0}])),
    # three nested loops: false, and over 60 items past the per-call limit by cel-go's count (over 30, past
    # cel-cpp's 10,000 iterations and the native count, cel-go's count is 329,583: within it, see runtime-cost.yaml)
    ("self.l.all(x, self.l.all(y, self.l.all(z, x.n + y.n + z.n >= 0)))", ([{"n": 1}] * 3, [{"n": -5}] * 3,
                                                                          [{"n": 1}] * 60)),
])
def test_nested_loop_rules_defer_unless_true(rule, values, fast_paths):
    """The batch answers the true value alone; the false one and the error or cost overrun are
    the walk's, with every route as without the batch (the other rule, batched without the
    native route, holds each time; the batch answers it too, but for the overrun)."""
    from tests.schema.helpers import crd, thing

    items = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    spec = {"type": "object", "properties": {"l": {"type": "array", "items": items}, "tag": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.tag != ''"}, {"rule": rule}]}
    registries = {label: CRDRegistry([crd(spec)], evaluator=EVALUATOR.with_routes(routes)) for label, routes in ROUTE_SETS.items()}
    (valid, valid_batched), *failing = [_answers(registries, "CREATE", thing({"l": value, "tag": "t"}), None,
                                                 fast_paths) for value in values]
    assert valid["allowed"] and valid_batched == ALL_BATCHED
    for outcome, batched in failing:
        assert not outcome["allowed"] and outcome["errors"], outcome
        # past the per-call limit the batch's own charge is too: then it answers for no rule
        overrun = any("call cost exceeds limit" in error for error in outcome["errors"])
        assert batched == (NONE_BATCHED if overrun else OTHERS_BATCHED)
