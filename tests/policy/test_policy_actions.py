"""``spec.validationActions`` (ValidatingAdmissionPolicy's): a non-empty subset of Deny, Warn,
Audit, default [Deny]; Deny with Warn and duplicates are refused in VAP's words, naming the
file and line; the compiled policy exposes the set as ``validation_actions``."""

import json

import jsonschema
import pytest

from tests.policy.test_policy_format import MODEL_RULES, policy, write
from tests.support.cel import EVALUATOR
from webhook import shipped_data
from webhook.policy import PolicyLoadError, PolicySet, load_file
from webhook.policy.model import json_schema

VALIDATION = """\
validations:
  - expression: object.spec.?minReplicas.orValue(0) >= 1
    message: at least one replica
"""


def load_one(tmp_path, body):
    (compiled,) = load_file(write(tmp_path / "p.yaml", policy("p", body)), EVALUATOR)
    return compiled


def test_default_is_deny(tmp_path):
    assert load_one(tmp_path, MODEL_RULES + VALIDATION).validation_actions == frozenset({"Deny"})


@pytest.mark.parametrize("actions", [["Deny"], ["Warn"], ["Audit"], ["Deny", "Audit"], ["Warn", "Audit"],
                                     ["Audit", "Warn"]])
def test_allowed_sets(tmp_path, actions):
    compiled = load_one(tmp_path, f"validationActions: {json.dumps(actions)}\n" + MODEL_RULES + VALIDATION)
    assert compiled.validation_actions == frozenset(actions)
    assert isinstance(compiled.validation_actions, frozenset)


BOTH = ('Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation '
        "failure information in the API response and headers serves no purpose)")


@pytest.mark.parametrize("actions, expected", [
    ("[Deny, Warn]", f":6: spec.validationActions: {BOTH}"),
    ("[Warn, Warn]", ':6: spec.validationActions: Duplicate value: "Warn"'),
    ("[]", ":6: spec.validationActions: Required value: at least one validation action is required"),
    ("[Deny, Dryrun]", ":6: spec.validationActions[1]: Input should be 'Deny', 'Warn' or 'Audit'"),
    ("\n    - Deny\n    - Warn", f":6: spec.validationActions: {BOTH}"),
    ("\n    - Audit\n    - deny", ":8: spec.validationActions[1]: Input should be 'Deny', 'Warn' or 'Audit'"),
])
def test_invalid_sets_name_file_and_line(tmp_path, actions, expected):
    file = write(tmp_path / "p.yaml", policy("bad", f"validationActions: {actions}\n" + MODEL_RULES + VALIDATION))
    with pytest.raises(PolicyLoadError) as info:
        load_file(file, EVALUATOR)
    assert info.value.problems == [f"{file}{expected}"]


def test_the_json_schema_refuses_what_the_loader_refuses():
    schema = json_schema()
    base = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["kubeai.org"], "kinds": ["Model"]}]}}}
    validator = jsonschema.Draft202012Validator(schema)
    for actions, ok in [(["Warn", "Audit"], True), (["Deny"], True), (["Deny", "Warn"], False),
                        (["Audit", "Audit"], False), ([], False), (["deny"], False)]:
        doc = {**base, "spec": {**base["spec"], "validationActions": actions}}
        assert validator.is_valid(doc) is ok, actions


def test_shipped_and_builtin_policies_deny_by_default():
    for p in PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR).policies:
        assert p.validation_actions == frozenset({"Deny"}), p.name
