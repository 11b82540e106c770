"""``spec.validationActions`` (ValidatingAdmissionPolicy's): a non-empty subset of Deny, Warn,
Audit, default [Deny]; Deny with Warn and duplicates are refused in VAP's words, naming the
file and line; the compiled policy exposes the set as ``validation_actions``."""

import json
import os

import jsonschema
import pytest

from tests.policy.test_policy_format import MODEL_RULES, kubeai_model, policy, write
from tests.support.cel import EVALUATOR
from tests.support.policy import chain, messages, request
from webhook import shipped_data
from webhook.policy import PolicyDirectory, PolicyLoadError, PolicySet, load_file
from webhook.policy.actions import ActionsError, overrides_from, parse_overrides
from webhook.policy.model import json_schema
from webhook.state import FileState

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


# -- what each action does, through the admission chain ---------------------------------

MIN_ONE = MODEL_RULES + VALIDATION
NAMESPACES = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"tier": "prod"}}},
]


def actions_chain(tmp_path, actions=None, overrides=None, body=MIN_ONE, namespaces=NAMESPACES):
    head = f"validationActions: {json.dumps(actions)}\n" if actions else ""
    write(tmp_path / "p.yaml", policy("min-one", head + body))
    policies = PolicySet.load(tmp_path, evaluator=EVALUATOR, builtin=False,
                              actions=parse_overrides(overrides or []))
    return chain(FileState(objects=list(namespaces)), policies, schema=False)


def admit(ch, namespace="team-a", replicas=0):
    return ch.admit(request(kubeai_model(namespace=namespace, minReplicas=replicas)), mutating=False)


def failures(result):
    return json.loads(result.audit_annotations["validation_failure"])


WARNING = "Validation failed for AdmissionPolicy 'min-one': at least one replica"


def test_deny_denies_as_before(tmp_path):
    result = admit(actions_chain(tmp_path))
    assert result.allowed is False and result.warnings == [] and result.audit_annotations == {}
    assert messages(result) == ["at least one replica"]


def test_warn_admits_with_the_failure_as_a_warning(tmp_path):
    result = admit(actions_chain(tmp_path, ["Warn"]))
    assert result.allowed is True and result.status is None
    assert result.warnings == [WARNING]
    assert result.audit_annotations == {}


def test_audit_admits_without_warning_and_records_the_failure_as_vap_does(tmp_path):
    result = admit(actions_chain(tmp_path, ["Audit"]))
    assert result.allowed is True and result.warnings == []
    assert list(result.audit_annotations) == ["validation_failure"]
    # VAP's ValidationFailureValue, its fields in its order, Go's compact JSON
    assert result.audit_annotations["validation_failure"] == (
        '[{"message":"at least one replica","policy":"min-one","binding":"","expressionIndex":0,'
        '"validationActions":["Audit"]}]')


def test_warn_and_audit_combine(tmp_path):
    result = admit(actions_chain(tmp_path, ["Warn", "Audit"]))
    assert result.allowed is True and result.warnings == [WARNING]
    assert failures(result) == [{"message": "at least one replica", "policy": "min-one", "binding": "",
                                 "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]


def test_deny_and_audit_combine(tmp_path):
    result = admit(actions_chain(tmp_path, ["Deny", "Audit"]))
    assert result.allowed is False and messages(result) == ["at least one replica"] and result.warnings == []
    assert failures(result)[0]["validationActions"] == ["Deny", "Audit"]


def test_passing_objects_are_untouched_by_any_action(tmp_path):
    for actions in (["Warn", "Audit"], ["Deny", "Audit"], ["Audit"]):
        result = admit(actions_chain(tmp_path, actions), replicas=2)
        assert result.allowed is True and result.warnings == [] and result.audit_annotations == {}, actions


def test_each_failed_validation_is_recorded_with_its_expression_index(tmp_path):
    body = MODEL_RULES + """\
validations:
  - expression: "true"
  - expression: object.spec.?minReplicas.orValue(0) >= 1
    message: at least one replica
  - expression: object.spec.?maxReplicas.orValue(9) <= 3
    messageExpression: "'at most 3, not ' + string(object.spec.maxReplicas)"
    fieldPath: spec.maxReplicas
"""
    ch = actions_chain(tmp_path, ["Audit"], body=body)
    result = ch.admit(request(kubeai_model(namespace="team-a", minReplicas=0, maxReplicas=5)), mutating=False)
    assert result.allowed is True
    assert [(f["expressionIndex"], f["message"]) for f in failures(result)] == [
        (1, "at least one replica"), (2, "spec.maxReplicas: at most 3, not 5")]


def test_a_rule_error_under_failure_policy_fail_follows_the_actions(tmp_path):
    body = MODEL_RULES + """\
validations:
  - expression: object.spec.minReplicas / 0 >= 1
"""
    result = admit(actions_chain(tmp_path, ["Warn"], body=body), replicas=1)
    assert result.allowed is True
    (warning,) = result.warnings
    assert warning.startswith("Validation failed for AdmissionPolicy 'min-one': policy min-one: validations[0]: ")
    assert "division by zero" in warning


def test_the_offline_chain_reports_audited_failures(tmp_path):
    outcome = actions_chain(tmp_path, ["Audit"]).run(request(kubeai_model(namespace="team-a", minReplicas=0)))
    assert outcome.allowed is True and outcome.warnings == []
    assert outcome.audit_failures == [{"message": "at least one replica", "policy": "min-one", "binding": "",
                                       "expressionIndex": 0, "validationActions": ["Audit"]}]
    assert json.loads(outcome.audit_annotations["validation_failure"]) == outcome.audit_failures


def test_a_validation_in_the_mutating_webhook_follows_the_actions(tmp_path):
    ch = actions_chain(tmp_path, ["Audit"], body="validationStage: Mutating\n" + MIN_ONE)
    result = ch.admit(request(kubeai_model(namespace="team-a", minReplicas=0)), mutating=True)
    assert result.allowed is True and result.warnings == []
    assert failures(result)[0]["policy"] == "min-one"
    outcome = ch.run(request(kubeai_model(namespace="team-a", minReplicas=0)))
    assert outcome.allowed is True and [f["policy"] for f in outcome.audit_failures] == ["min-one"]


# -- operators' overrides ------------------------------------------------------------------

def test_an_override_by_name_replaces_the_policy_actions(tmp_path):
    ch = actions_chain(tmp_path, overrides=["min-one=Warn"])
    for namespace in ("team-a", "prod", "unknown"):
        result = admit(ch, namespace)
        assert result.allowed is True and result.warnings == [WARNING], namespace


def test_an_override_can_relax_and_tighten(tmp_path):
    assert admit(actions_chain(tmp_path, ["Warn"], overrides=["min-one=Deny"])).allowed is False
    result = admit(actions_chain(tmp_path, overrides=["min-one=Audit"]))
    assert result.allowed is True and failures(result)[0]["binding"] == "override[0]"


def test_an_override_scoped_by_namespace_labels(tmp_path):
    ch = actions_chain(tmp_path, overrides=["min-one=Warn@team"])  # Warn where a team label exists, Deny elsewhere
    assert admit(ch, "team-a").allowed is True
    assert admit(ch, "prod").allowed is False
    assert admit(ch, "unknown").allowed is False  # an unknown namespace: only its name label is known


def test_scoped_entries_apply_in_order_and_the_first_match_wins(tmp_path):
    overrides = ['{"min-one": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "actions": ["Warn"]},'
                 ' {"namespaceSelector": "tier in (prod)", "actions": ["Deny", "Audit"]},'
                 ' {"actions": ["Audit"]}]}']
    ch = actions_chain(tmp_path, ["Deny"], overrides=overrides)
    team = admit(ch, "team-a")
    assert team.allowed is True and team.warnings == [WARNING] and team.audit_annotations == {}
    prod = admit(ch, "prod")
    assert prod.allowed is False and failures(prod)[0]["binding"] == "override[1]"
    other = admit(ch, "elsewhere")
    assert other.allowed is True and other.warnings == [] and failures(other)[0]["binding"] == "override[2]"


def test_an_unknown_namespace_is_selected_by_its_name_label_only(tmp_path):
    ch = actions_chain(tmp_path, overrides=["min-one=Warn@kubernetes.io/metadata.name in (sandbox)"], namespaces=[])
    assert admit(ch, "sandbox").allowed is True
    assert admit(ch, "other").allowed is False


def test_no_scoped_entry_matches_the_policy_actions_apply(tmp_path):
    ch = actions_chain(tmp_path, ["Audit"], overrides=["min-one=Warn@team=b"])
    result = admit(ch, "team-a")
    assert result.allowed is True and result.warnings == [] and failures(result)[0]["binding"] == ""


def test_an_override_naming_no_policy_is_refused(tmp_path):
    write(tmp_path / "p.yaml", policy("min-one", MIN_ONE))
    with pytest.raises(PolicyLoadError) as info:
        PolicySet.load(tmp_path, evaluator=EVALUATOR, builtin=False, actions=parse_overrides(["min-on=Warn"]))
    (problem,) = info.value.problems
    assert problem == f"{tmp_path}: --policy-actions: no policy named 'min-on' (did you mean 'min-one'?)"


@pytest.mark.parametrize("flag, expected", [
    ("p=Deny,Warn", "--policy-actions p=Deny,Warn: actions: " + BOTH),
    ("p=Warn,Warn", '--policy-actions p=Warn,Warn: actions[1]: Duplicate value: "Warn"'),
    ("p=Dryrun", '--policy-actions p=Dryrun: actions[0]: Unsupported value: "Dryrun": supported values: '
                 '"Audit", "Deny", "Warn"'),
    ("p", "--policy-actions 'p': expected NAME=ACTION[,ACTION][@SELECTOR] or a mapping {NAME: [ACTION, ...]}"),
    ("p=Warn@team in a", "--policy-actions p=Warn@team in a: namespaceSelector: expected '(' after 'in' in 'team in a'"),
    ("p=Warn@", "--policy-actions p=Warn@: namespaceSelector: empty selector (leave namespaceSelector out to "
                "select every namespace)"),
    ('{"p": [{"actions": ["Warn"], "namespaceSelector": {"matchLabels": {"team": "a b"}}}]}',
     "--policy-actions: p[0]: namespaceSelector: value 'a b' of 'team': a valid label must be an empty string"),
    ('{"p": [{"actions": ["Warn"], "namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Is"}]}}]}',
     "--policy-actions: p[0]: namespaceSelector: 'Is' is not a valid label selector operator"),
    ('{"p": [{"actions": ["Warn"], "scope": "x"}]}',
     "--policy-actions: p[0]: unknown field 'scope' (expected namespaceSelector, actions)"),
    ('{"p": "Warn"}', "--policy-actions: p: expected a list of actions (Deny, Warn, Audit) or a list of "
                      "{namespaceSelector, actions} entries"),
    ("{p: [Warn", "--policy-actions {p: [Warn: not a JSON or YAML mapping"),
])
def test_bad_overrides_are_one_line_errors(flag, expected):
    with pytest.raises(ActionsError) as info:
        parse_overrides([flag])
    assert str(info.value).startswith(expected) and "\n" not in str(info.value)


def test_overrides_round_trip_through_their_data_form():
    given = parse_overrides(["a=Warn,Audit", "b=Audit@team=x", '{"b": [{"actions": ["Deny"]}]}'])
    assert given.describe() == {"a": [{"actions": ["Warn", "Audit"]}],
                                "b": [{"namespaceSelector": "team=x", "actions": ["Audit"]}, {"actions": ["Deny"]}]}
    assert overrides_from(given.describe(), "again").describe() == given.describe()


def test_a_reload_that_drops_an_overridden_policy_keeps_the_last_good_set(tmp_path):
    file = write(tmp_path / "p.yaml", policy("min-one", MIN_ONE))
    provider = PolicyDirectory(tmp_path, EVALUATOR, builtin=False, actions=parse_overrides(["min-one=Warn"]))
    first = provider.current()
    assert first.actions_for(first.policies[0], None) == (frozenset({"Warn"}), "override[0]")
    write(file, policy("renamed", MIN_ONE))
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later change, whatever the clock
    assert not provider.poll()
    assert provider.current() is first  # the override still names a policy in force
    assert "--policy-actions: no policy named 'min-one'" in provider.error
