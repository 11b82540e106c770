"""A policy's expressions run as one CEL program (``webhook.policy.batch``): the rewriting,
and the same answers as the expression-by-expression path for every shipped suite case."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from webhook.cel import get_engine
from webhook.offline.policy_suites import build_request, load_policy_suite
from webhook.offline.suite_format import PolicySuite
from webhook.policy import CEL_VARIABLES, PolicySet
from webhook.state import FileState
from webhook.policy.batch import batch_source, bind_variables

from tests.support.policy import chain, request
from tests.support.paths import POLICY_SUITES

SUITES = sorted(POLICY_SUITES.glob("*.yaml"))


def test_variables_become_bound_names_outside_string_literals():
    source = "variables.a + 'variables.a' + \"variables.b\" + r'variables.a\\' + variables.b"
    assert bind_variables(source, ["a", "b"]) == \
        "__var_a + 'variables.a' + \"variables.b\" + r'variables.a\\' + __var_b"
    assert bind_variables("object.variables.a == variables.a", ["a"]) == "object.variables.a == __var_a"
    assert bind_variables("has(variables.facts.format)", ["facts"]) == "has(__var_facts.format)"


@pytest.mark.parametrize("source", ["variables.?a.orValue(1)", "variables['a']", "variables.c", "size(variables)"])
def test_other_reads_of_variables_are_not_batched(source):
    assert bind_variables(source, ["a"]) is None


def test_a_variable_reads_only_earlier_ones():
    assert batch_source([], [("a", "variables.b"), ("b", "1")], ["true"]) is None


def test_given_variables_are_read_from_the_activation_in_definition_order():
    source = batch_source([], [("a", "lookups.x"), ("b", "variables.a + 1")], ["variables.b == 2"], given=("a",))
    assert "variables.a + 1" in source and "__var_b" in source and "__var_a" not in source
    program = get_engine().compile(source, CEL_VARIABLES)
    assert program.evaluate({"variables": {"a": 1}}) == [True]
    # read before it is defined, or by a matchCondition (evaluated before any variable): not batched
    assert batch_source([], [("b", "variables.a"), ("a", "lookups.x")], ["true"], given=("a",)) is None
    assert batch_source(["variables.a == 1"], [("a", "lookups.x")], ["true"], given=("a",)) is None


def test_batch_evaluates_conditions_then_variables_then_rules():
    source = batch_source(["object.kind == 'X'"], [("a", "object.n + 1"), ("b", "variables.a * 2")],
                          ["variables.b == 6", "{'n': variables.a}", "[variables.b]"])
    program = get_engine().compile(source, CEL_VARIABLES)
    assert program.evaluate({"object": {"kind": "X", "n": 2}}) == [True, {"n": 3}, [6]]
    assert program.evaluate({"object": {"kind": "Y", "n": 2}}) == []


def _answer(outcome) -> dict:
    fields = dataclasses.asdict(outcome)
    fields.pop("traces")
    return fields


@pytest.mark.parametrize("suite_file", SUITES, ids=lambda p: p.stem)
def test_batched_answers_equal_expression_by_expression(suite_file):
    """``explain`` takes the per-expression path (it records every expression); without it,
    the batches. Every case of the shipped suites (denials, warnings, mutations, errors)."""
    data = yaml.safe_load(suite_file.read_text())
    model = PolicySuite.model_validate(data)
    suite = load_policy_suite(suite_file, data)
    assert model.cases
    for case in model.cases:
        req = build_request(suite.registry, model, case)
        fast = suite.chain.run(req, explain=False)
        assert _answer(fast) == _answer(suite.chain.run(req, explain=True)), case.name
        assert _answer(fast) == _answer(suite.chain.run(req, explain=False)), case.name  # batches cached


def test_a_failing_batch_falls_back_to_the_exact_error():
    """An expression that errors at runtime fails the whole batch; the policy's answer is the
    per-expression one, naming the failing expression."""
    obj = {"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceService",
           "metadata": {"name": "x", "namespace": "ml-team"},
           "spec": {"inferenceServiceClassName": "a30-shared", "model": {"src": "ai-models"}}}
    c = chain(schema=False)
    fast = c.admit(request(obj, namespace="ml-team"), mutating=False)
    slow = c.admit(request(obj, namespace="ml-team"), mutating=False, explain=True)
    assert (fast.allowed, fast.status, fast.warnings) == (slow.allowed, slow.status, slow.warnings)
    assert any("inferenceservice-catalog" in text for text in [str(fast.status)] + fast.warnings)


STATE_POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: engines}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  lookups:
    - name: configs
      list: {apiVersion: v1, kind: ConfigMap, namespace: "'platform'"}
    - name: own
      get: {apiVersion: v1, kind: ConfigMap, name: "object.metadata.name", namespace: "'platform'"}
  variables:
    - name: engines
      expression: "lookups.configs.map(c, c.data.engine)"
    - name: engine
      expression: "object.spec.engine"
  validations:
    - expression: "variables.engine in variables.engines"
      messageExpression: "'engine ' + variables.engine + ' is not one of ' + variables.engines.join(', ')"
    - expression: "lookups.own == null || lookups.own.data.engine == variables.engine"
      message: own config differs
"""


def _config(name: str, engine: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "platform"},
            "data": {"engine": engine}}


def _model(engine: str) -> dict:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "team"},
            "spec": {"engine": engine}}


def test_variables_of_cluster_state_are_computed_once_per_state(tmp_path):
    """A variable that reads only lookups with constant arguments is the same for every
    request until the state changes: computed once, and again after a change."""
    (tmp_path / "p.yaml").write_text(STATE_POLICY)
    policies = PolicySet.load(tmp_path, builtin=False)
    (policy,) = policies.policies
    assert policy._state_variables == ("engines",)
    state = FileState(None, objects=[_config("vllm", "VLLM")])
    c = chain(state, policies, schema=False)

    def answer(engine: str, explain: bool = False):
        result = c.admit(request(_model(engine), namespace="team"), mutating=False, explain=explain)
        return result.allowed, result.status and result.status["message"]

    assert answer("VLLM") == (True, None)
    computed = policy._state_values
    assert answer("VLLM") == (True, None) and policy._state_values is computed  # not computed again
    assert answer("OLlama") == answer("OLlama", explain=True)
    assert "engine OLlama is not one of VLLM" in answer("OLlama")[1]
    state._store.put(_config("ollama", "OLlama"))  # the state changes: a new stored object
    assert answer("OLlama") == (True, None)
    assert policy._state_values is not computed
    state._store.put(_config("m", "VLLM"))  # the request's own lookup is read per request
    assert answer("OLlama") == answer("OLlama", explain=True) == (False, "own config differs")
