"""A policy's expressions run as one CEL program (``webhook.policy.batch``): the rewriting,
and the same answers as the expression-by-expression path for every shipped suite case."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from webhook.offline.policy_suites import build_request, load_policy_suite
from webhook.offline.policy_suite_format import PolicySuite
from webhook.policy import CEL_VARIABLES, PolicySet
from webhook.state.memory import MemoryState
from webhook.state import FileState
from webhook.cel.engine.cel_expr import CelExprProgram
from webhook.policy.batch import batch_source, bind_variables, request_fields_read

from tests.support.policy import chain, request
from tests.support.paths import POLICY_SUITES
from tests.support.cel import EVALUATOR

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
    program = EVALUATOR.engine.compile(source, CEL_VARIABLES)
    assert program.evaluate({"variables": {"a": 1}}) == [True]
    # read before it is defined, or by a matchCondition (evaluated before any variable): not batched
    assert batch_source([], [("b", "variables.a"), ("a", "lookups.x")], ["true"], given=("a",)) is None
    assert batch_source(["variables.a == 1"], [("a", "lookups.x")], ["true"], given=("a",)) is None


def test_batch_evaluates_conditions_then_variables_then_rules():
    source = batch_source(["object.kind == 'X'"], [("a", "object.n + 1"), ("b", "variables.a * 2")],
                          ["variables.b == 6", "{'n': variables.a}", "[variables.b]"])
    program = EVALUATOR.engine.compile(source, CEL_VARIABLES)
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
    suite = load_policy_suite(suite_file, data, EVALUATOR)
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
    policies = PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR)
    (policy,) = policies.policies
    assert policy.batches.state_variables == ("engines",)
    state = MemoryState([_config("vllm", "VLLM")])  # a cluster view the test changes
    c = chain(state, policies, schema=False)

    def answer(engine: str, explain: bool = False):
        result = c.admit(request(_model(engine), namespace="team"), mutating=False, explain=explain)
        return result.allowed, result.status and result.status["message"]

    assert answer("VLLM") == (True, None)
    computed = policy.batches.state_values
    assert answer("VLLM") == (True, None) and policy.batches.state_values is computed  # not computed again
    assert answer("OLlama") == answer("OLlama", explain=True)
    assert "engine OLlama is not one of VLLM" in answer("OLlama")[1]
    state.put(_config("ollama", "OLlama"))  # the state changes: a new stored object
    assert answer("OLlama") == (True, None)
    assert policy.batches.state_values is not computed
    state.put(_config("m", "VLLM"))  # the request's own lookup is read per request
    assert answer("OLlama") == answer("OLlama", explain=True) == (False, "own config differs (policy engines)")


JUDGED_POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: judged}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  variables:
    - name: engine
      expression: "object.spec.engine"
  validations:
    - expression: "variables.engine != 'A'"
      messageExpression: "'engine ' + variables.engine + ' is retired'"
      fieldPath: spec.engine
      reason: Forbidden
    - expression: "variables.engine != 'B'"
      message: engine B is not allowed
    - expression: "variables.engine != 'C'"
      messageExpression: "'  '"
      message: blank messages fall back
    - expression: "variables.engine != 'D'"
    - expression: "variables.engine != 'E'"
      messageExpression: "'E: ' + object.spec.url"
      message: a failing messageExpression falls back
    - expression: "true"
      messageExpression: "'never ' + object.spec.url"
  warnings:
    - expression: "variables.engine != 'W'"
      messageExpression: "'engine ' + variables.engine + ' is deprecated: ' + object.spec.engine.replace('W', 'V')"
  auditAnnotations:
    - key: engine
      valueExpression: "'engine=' + variables.engine"
"""


@pytest.mark.parametrize("engine, per_expression", [
    ("A", False), ("B", False), ("C", False), ("D", False), ("W", False), ("OK", False),
    ("E", True),  # the failing messageExpression fails the batch: the per-expression path falls back
])
def test_failed_rules_are_judged_by_the_batch_with_their_messages(tmp_path, monkeypatch, engine, per_expression):
    """A rule that is not true does not cost the per-expression path: the batch gives each
    failed rule's messageExpression value, and the answer is that path's, word for word."""
    (tmp_path / "p.yaml").write_text(JUDGED_POLICY)
    policies = PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR)
    (policy,) = policies.policies
    c = chain(FileState(None, objects=[]), policies, schema=False)
    one_by_one = []
    original = policy.exact.validate
    monkeypatch.setattr(policy.exact, "validate", lambda *args: one_by_one.append(args) or original(*args))

    def answer(explain: bool):
        result = c.admit(request(_model(engine), namespace="team"), mutating=False, explain=explain)
        return result.allowed, result.status, result.warnings, result.audit_annotations

    fast = answer(explain=False)
    assert bool(one_by_one) is per_expression
    assert fast == answer(explain=True)
    allowed, status, warnings, audit = fast
    assert audit == {"judged.engine": f"engine={engine}"}
    expected = {
        "A": "spec.engine: engine A is retired", "B": "engine B is not allowed", "C": "blank messages fall back",
        "D": "failed expression: variables.engine != 'D'", "E": "a failing messageExpression falls back",
    }
    if engine in expected:
        assert not allowed and expected[engine] in status["message"]
    else:
        assert allowed and status is None
    assert warnings == (["engine W is deprecated: V"] if engine == "W" else [])


@pytest.mark.parametrize("source, fields", [
    ("request.kind.version in ['v1alpha1'] ? [request.kind.kind] : []", {"kind"}),
    ("request.userInfo.username == 'x' && request.?dryRun.orValue(false)", {"userInfo", "dryRun"}),
    ("request['kind'].version == 'v1'", None),          # not a field selection
    ("request.kind.kind == object.kind", None),         # reads the object too
    ("size(variables.names) > 0 && request.name == ''", None),  # a variable given from outside
    ("'request' + request.name", None),                 # the literal counts: never less than the reads
    ("[request].map(r, r.uid)", None),
])
def test_the_request_fields_a_batch_reads(source, fields):
    assert request_fields_read(source) == (frozenset(fields) if fields is not None else None)


REQUEST_ONLY_POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: by-version}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  variables:
    - name: version
      expression: "request.kind.version"
  validations:
    - expression: "request.userInfo.username != 'mallory'"
      messageExpression: "request.userInfo.username + ' may not write models'"
  warnings:
    - expression: "variables.version != 'v1beta1'"
      messageExpression: "'Model ' + variables.version + ' is deprecated'"
"""


def test_a_batch_reading_only_request_fields_is_answered_once_per_their_values(tmp_path, monkeypatch):
    """The batch's answer is a function of the request fields it reads: kept per their
    values, it is evaluated again only for values not seen, and the answers stay those of
    the expressions one by one."""
    (tmp_path / "p.yaml").write_text(REQUEST_ONLY_POLICY)
    policies = PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR)
    c = chain(FileState(None, objects=[]), policies, schema=False)
    evaluated = []
    original = CelExprProgram.evaluate
    monkeypatch.setattr(CelExprProgram, "evaluate",
                        lambda self, *args, **kw: evaluated.append(self.expression) or original(self, *args, **kw))

    def answer(version: str, user: str, *, explain: bool = False):
        obj = _model("vllm") | {"apiVersion": f"kubeai.org/{version}"}
        result = c.admit(request(obj, namespace="team", username=user), mutating=False, explain=explain)
        return result.allowed, result.status and result.status["message"], result.warnings

    assert answer("v1", "alice") == (True, None, [])
    assert len(evaluated) == 1
    assert answer("v1", "alice") == (True, None, []) and len(evaluated) == 1  # kept
    deprecated = answer("v1beta1", "alice")
    assert deprecated == (True, None, ["Model v1beta1 is deprecated"]) and len(evaluated) == 2
    refused = answer("v1", "mallory")
    assert refused[0] is False and "mallory may not write models" in refused[1] and len(evaluated) == 3
    assert answer("v1beta1", "alice") == deprecated and answer("v1", "mallory") == refused and len(evaluated) == 3
    for version, user in [("v1", "alice"), ("v1beta1", "alice"), ("v1", "mallory")]:
        assert answer(version, user) == answer(version, user, explain=True)
