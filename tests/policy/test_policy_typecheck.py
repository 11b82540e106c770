"""Policies are type-checked when they load, as the apiserver checks a ValidatingAdmissionPolicy:
``object``/``oldObject`` typed by the schema of every kind the policy matches, bool where a
bool is needed, string where a string is. A policy that fails is a load error naming its file,
line and the checker's message; kinds with no known schema stay ``dyn``."""

from __future__ import annotations

import textwrap

import pytest

from webhook import shipped_data
from webhook.cli import main
from webhook.policy import PolicyLoadError, PolicySet, load_file
from tests.support.cel import EVALUATOR

HEADER = "apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"


def _policy(tmp_path, spec: str, kinds: str = "[kubeai.org], kinds: [Model]", name: str = "p"):
    text = HEADER + f"metadata:\n  name: {name}\nspec:\n  matchConstraints:\n    resourceRules:\n" \
                    f"    - {{apiGroups: {kinds}}}\n" + textwrap.indent(textwrap.dedent(spec), "  ")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _refusal(path) -> str:
    with pytest.raises(PolicyLoadError) as caught:
        load_file(path, EVALUATOR)
    return str(caught.value)


def test_a_validation_that_is_no_bool_is_refused_with_its_line(tmp_path):
    path = _policy(tmp_path, """\
        validations:
        - expression: object.spec.minReplicas
          message: needs a replica
        """)
    assert _refusal(path) == (f"{path}:10: spec.validations[0].expression: apiVersion=kubeai.org/v1, kind=Model: "
                              "must evaluate to bool, not int")


def test_an_expression_ill_typed_for_the_kinds_schema_is_refused_with_the_checkers_message(tmp_path):
    path = _policy(tmp_path, """\
        variables:
        - name: fine
          expression: object.metadata.?labels['team'].orValue('') != ''
        matchConditions:
        - name: typo
          expression: has(object.spec.minReplica)
        validations:
        - expression: object.spec.minReplicas >= 'one'
        """)
    refusal = _refusal(path)
    assert f"{path}:14: spec.matchConditions[0].expression: apiVersion=kubeai.org/v1, kind=Model: ERROR: " \
           "<input>:1:4: undefined field 'minReplica'" in refusal
    assert f"{path}:16: spec.validations[0].expression: apiVersion=kubeai.org/v1, kind=Model: ERROR: " \
           "<input>:1:25: found no matching overload for '_>=_' applied to '(int, string)'" in refusal
    assert "variables[0]" not in refusal  # ObjectMeta is typed as the apiserver publishes it


def test_a_message_expression_must_be_a_string(tmp_path):
    path = _policy(tmp_path, """\
        validations:
        - expression: "true"
          messageExpression: object.spec.minReplicas
        """)
    assert "spec.validations[0].messageExpression: apiVersion=kubeai.org/v1, kind=Model: must evaluate to string, " \
           "not int" in _refusal(path)


def test_kinds_without_a_known_schema_are_dyn_and_only_the_result_type_is_checked(tmp_path):
    fine = _policy(tmp_path, "validations:\n- expression: object.data.anything == 'x'\n", "[''], kinds: [ConfigMap]")
    assert [p.name for p in load_file(fine, EVALUATOR)] == ["p"]
    wrong = _policy(tmp_path, "warnings:\n- expression: \"'text'\"\n", "['*'], kinds: ['*']", name="q")
    assert "spec.warnings[0].expression: must evaluate to bool, not string" in _refusal(wrong)


def test_the_shipped_and_example_policies_type_check():
    assert PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR).names
    assert load_file(shipped_data.examples_dir().parent / "policies" / "production-min-replicas.yaml", EVALUATOR)


def test_validate_refuses_such_a_policy_at_start_with_exit_2(tmp_path, capsys):
    policies = tmp_path / "policies"
    policies.mkdir()
    path = _policy(policies, "validations:\n- expression: object.spec.minReplicas\n")
    manifest = shipped_data.examples_dir().parent / "manifests" / "valid" / "kubeai-model-vllm.yaml"
    assert main(["validate", str(manifest), "--policies", str(policies)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"infergate: error: --policies: {path}:10: spec.validations[0].expression: ")
    assert "must evaluate to bool, not int" in err


def test_patches_and_lookup_arguments_have_their_types_too(tmp_path):
    path = _policy(tmp_path, """\
        lookups:
        - name: ns
          get: {apiVersion: v1, kind: Namespace, name: object.spec.minReplicas}
        mutations:
        - patchType: JSONPatch
          expression: "{'op': 'add', 'path': '/spec/owner', 'value': 'me'}"
        - patchType: ApplyConfiguration
          expression: "[{'spec': {'owner': 'me'}}]"
        - patchType: ApplyConfiguration
          expression: "has(object.spec.minReplicas) ? {} : {'spec': {'minReplicas': 1}}"
        """)
    refusal = _refusal(path)
    assert "spec.lookups[0].get.name: apiVersion=kubeai.org/v1, kind=Model: must evaluate to string, not int" in refusal
    assert "spec.mutations[0].expression: apiVersion=kubeai.org/v1, kind=Model: must evaluate to a list " \
           "(JSON patch operations), not map(string, string)" in refusal
    assert "spec.mutations[1].expression: apiVersion=kubeai.org/v1, kind=Model: must evaluate to a map " \
           "(a partial object), not list(" in refusal
    assert "mutations[2]" not in refusal
