"""Validation actions offline: ``infergate test`` suites assert the action taken (``expect.actions``)
and may set operators' overrides (``actions:``, the chart's shape); ``infergate validate`` reports
a Warn failure as a warning and an Audit failure as an audit line, exit 0, and takes
``--policy-actions`` as ``serve`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: min-one}
spec:
  validationActions: [Warn, Audit]
  matchConstraints:
    resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
  validations:
    - expression: object.spec.?minReplicas.orValue(0) >= 1
      message: at least one replica
"""
WARNING = "Validation failed for AdmissionPolicy 'min-one': at least one replica"


def model(namespace: str, replicas: int = 0) -> dict:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": namespace},
            "spec": {"features": ["TextGeneration"], "url": "hf://a/b", "engine": "VLLM",
                     "resourceProfile": "cpu:1", "minReplicas": replicas}}


def record(binding: str, actions: list[str]) -> str:
    return json.dumps([{"message": "at least one replica", "policy": "min-one", "binding": binding,
                        "expressionIndex": 0, "validationActions": actions}], separators=(",", ":"))


def suite(tmp_path: Path, cases: list[dict], **extra) -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "min-one.yaml").write_text(POLICY)
    body = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "PolicySuite", "name": "actions",
            "policies": ["policies"],
            "state": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"tier": "prod"}}},
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}}],
            **extra, "cases": cases}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


OVERRIDES = {"min-one": [{"namespaceSelector": {"matchLabels": {"tier": "prod"}}, "actions": ["Deny", "Audit"]}]}
CASES = [
    {"name": "warned-and-audited", "object": model("lab"),
     "expect": {"allowed": True, "warnings": [WARNING], "actions": {"min-one": ["Audit", "Warn"]},
                "auditAnnotations": {"validation_failure": record("", ["Warn", "Audit"])}}},
    {"name": "denied-in-prod", "object": model("prod"),
     "expect": {"allowed": False, "errors": ["at least one replica"], "actions": {"min-one": ["Deny", "Audit"]},
                "auditAnnotations": {"validation_failure": record("override[0]", ["Deny", "Audit"])}}},
    {"name": "passes", "object": model("lab", 1), "expect": {"allowed": True, "warnings": [], "actions": {}}},
]


def test_a_suite_asserts_the_actions_taken_under_overrides(tmp_path, capsys):
    code, out, err = run(capsys, "test", str(suite(tmp_path, CASES, actions=OVERRIDES)))
    assert code == 0, out + err
    assert "3 passed" in out


def test_the_json_report_gives_the_actions_taken(tmp_path, capsys):
    code, out, _ = run(capsys, "test", str(suite(tmp_path, CASES, actions=OVERRIDES)), "-o", "json")
    assert code == 0
    answers = {c["name"]: c["answer"] for c in json.loads(out)["suites"][0]["cases"]}
    assert answers["warned-and-audited"]["actions"] == {"min-one": ["Warn", "Audit"]}
    assert answers["denied-in-prod"]["actions"] == {"min-one": ["Deny", "Audit"]}
    assert answers["passes"]["actions"] == {}


def test_a_wrong_action_expectation_fails_the_case(tmp_path, capsys):
    wrong = [{**CASES[0], "expect": {"actions": {"min-one": ["Deny"]}}}]
    code, out, _ = run(capsys, "test", str(suite(tmp_path, wrong)))
    assert code == 1
    assert "actions: expected {'min-one': ['Deny']}, got {'min-one': ['Warn', 'Audit']}" in out


def test_update_records_actions_other_than_deny(tmp_path, capsys):
    path = suite(tmp_path, [{"name": "c", "object": model("lab")}])
    assert run(capsys, "test", str(path), "--update")[0] == 0
    (case,) = yaml.safe_load(path.read_text())["cases"]
    assert case["expect"]["actions"] == {"min-one": ["Warn", "Audit"]}
    assert case["expect"]["warnings"] == [WARNING]


@pytest.mark.parametrize("actions, problem", [
    ({"min-on": ["Warn"]}, "actions: no policy named 'min-on' (did you mean 'min-one'?)"),
    ({"min-one": ["Deny", "Warn"]}, 'actions: min-one: actions: Invalid value: ["Deny","Warn"]: must not contain'),
])
def test_bad_suite_overrides_are_named_with_their_line(tmp_path, capsys, actions, problem):
    path = suite(tmp_path, CASES[:1], actions=actions)
    code, out, err = run(capsys, "test", str(path))
    assert code == 2
    assert f"{path}:" in err and problem in err


# -- infergate validate -----------------------------------------------------------------------

def manifests(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "min-one.yaml").write_text(POLICY)
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "ns.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"tier": "prod"}}}))
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(model("lab")) + "---\n" + yaml.safe_dump(model("prod")))
    return path


def test_validate_warns_and_audits_and_exits_0(tmp_path, capsys):
    path = manifests(tmp_path)
    code, out, err = run(capsys, "validate", str(path), "--policies", str(tmp_path / "policies"),
                         "--state", str(tmp_path / "state"))
    assert code == 0, out + err
    assert out.splitlines()[-1] == "2 valid, 0 invalid, 0 skipped, 0 errors, in 1 file"
    assert f"Warning: {path}:1: {WARNING}" in err.splitlines()
    assert f"Audit: {path}:1: policy min-one validations[0] (Warn, Audit): at least one replica" in err.splitlines()


def test_validate_takes_policy_actions_scoped_by_the_states_namespaces(tmp_path, capsys):
    path = manifests(tmp_path)
    code, out, err = run(capsys, "validate", str(path), "--policies", str(tmp_path / "policies"),
                         "--state", str(tmp_path / "state"), "--policy-actions", "min-one=Deny@tier=prod",
                         "--policy-actions", "min-one=Audit", "-o", "json")  # the first entry that selects wins
    assert code == 1, err
    lab, prod = json.loads(out)
    assert lab["allowed"] is True and lab["warnings"] == []
    assert lab["audit"] == [{"message": "at least one replica", "policy": "min-one", "binding": "override[1]",
                             "expressionIndex": 0, "validationActions": ["Audit"]}]
    assert prod["allowed"] is False and "audit" not in prod


def test_validate_refuses_bad_policy_actions_in_one_line(tmp_path, capsys):
    path = manifests(tmp_path)
    code, out, err = run(capsys, "validate", str(path), "--policies", str(tmp_path / "policies"),
                         "--policy-actions", "min-on=Warn")
    assert code == 2 and out == ""
    assert err.splitlines() == ["infergate: error: --policy-actions: no policy named 'min-on' (did you mean 'min-one'?)"]
