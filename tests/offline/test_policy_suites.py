"""``infergate test`` on policy suites (``kind: PolicySuite``): the shipped suites in
``policies/tests`` and their rule coverage, a user's own suite end to end (every request field,
every kind of expectation), ``--run``, ``-o junit|json``, ``--update`` and the JSON schema."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

from webhook import shipped_data
from webhook.cli import main
from webhook.offline.coverage import policy_rules
from webhook.offline.policy_suite_format import json_schema_text
from webhook.policy import PolicySet
from tests.support.paths import REPO
from tests.support.cel import EVALUATOR

SHIPPED_SUITES = shipped_data.policies_dir() / "tests"


def _suite_files() -> list[Path]:
    return sorted(SHIPPED_SUITES.glob("*.yaml"))


def _case_count() -> int:
    return sum(len(yaml.safe_load(f.read_text())["cases"]) for f in _suite_files())


@pytest.fixture(scope="module")
def shipped_report() -> dict:
    """One run of the shipped suites through the real command line (a child process)."""
    proc = subprocess.run([sys.executable, "-m", "webhook", "test", str(SHIPPED_SUITES), "--coverage", "-o", "json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    report["stderr"] = proc.stderr
    return report


def test_shipped_suites_pass_with_a_summary_line(shipped_report):
    count = _case_count()
    assert count >= 50
    assert shipped_report["passed"] == count and shipped_report["failed"] == 0
    assert shipped_report["stderr"].strip().splitlines()[-1] == f"{count} passed, 0 failed"


def test_every_rule_of_every_shipped_policy_is_hit(shipped_report):
    shipped = PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)  # with the built-in policies
    expected = {(p.name, rule) for p in shipped.policies for rule, _ in policy_rules(p)}
    entries = {(e["policy"], e["rule"]): e for e in shipped_report["coverage"]["entries"]}
    assert expected <= entries.keys()
    assert {(p, r) for (p, r) in expected if r.startswith("validations[")}, "the universe holds validations"
    assert {(p, r) for (p, r) in expected if r.startswith("mutations[")}, "the universe holds mutations"
    never_hit = sorted(k for k in expected if not entries[k]["hit"])
    assert never_hit == []
    # an allowed and a denied case for each validation
    never_passed = sorted(k for k in expected if k[1].startswith("validations[") and not entries[k]["passes"])
    assert never_passed == []


def test_each_mutation_is_asserted_on_the_patched_object():
    mutated = [c for f in _suite_files() for c in yaml.safe_load(f.read_text())["cases"] if "patched" in c["expect"]]
    assert mutated
    for case in mutated:  # what was written plus what the policies added
        assert case["expect"]["allowed"] is True
        assert case["expect"]["patched"]["metadata"]["name"] == case["object"]["metadata"]["name"]


def test_shipped_suites_follow_the_shipped_json_schema():
    schema = json.loads((shipped_data.policies_dir() / "policy-suite.schema.json").read_text())
    for file in _suite_files():
        jsonschema.validate(yaml.safe_load(file.read_text()), schema)


def test_shipped_json_schema_is_current():
    shipped = (shipped_data.policies_dir() / "policy-suite.schema.json").read_text()
    assert shipped == json_schema_text(), (
        "regenerate: python -m webhook.offline.policy_suite_format > policies/policy-suite.schema.json")


def test_suites_beside_policies_are_not_loaded_as_policies():
    names = PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR).names
    assert "inferenceservice-defaults" in names and not [n for n in names if "suite" in n]


# -- a user's own policy and suite ----------------------------------------------------------

TEAM_POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata:
  name: team-models
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [kubeai.org]
      kinds: [Model]
      operations: [CREATE, UPDATE, DELETE]
      subresources: [status]
  lookups:
  - name: quota
    get: {apiVersion: v1, kind: ConfigMap, name: "'model-quota'", namespace: request.namespace}
  mutations:
  - patchType: ApplyConfiguration
    expression: >-
      object == null || has(object.metadata.labels) && 'team' in object.metadata.labels ? {}
        : {'metadata': {'labels': {'team': request.namespace}}}
  validations:
  - expression: "request.operation != 'DELETE' || request.userInfo.groups.exists(g, g == 'admins')"
    reason: Forbidden
    message: only admins delete models
  - expression: "object == null || lookups.quota == null || object.spec.?maxReplicas.orValue(1) <= int(lookups.quota.data.maxReplicas)"
    fieldPath: spec.maxReplicas
    messageExpression: "'Invalid value: ' + string(object.spec.maxReplicas) + ': the team quota is ' + lookups.quota.data.maxReplicas"
  - expression: "request.subResource != 'status' || request.dryRun"
    message: status is written by the controller only (dry runs allowed)
  warnings:
  - expression: "object == null || has(object.spec.resourceProfile)"
    message: no resourceProfile
  auditAnnotations:
  - key: requester
    valueExpression: request.userInfo.username
"""

MODEL = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m"},
         "spec": {"features": ["TextGeneration"], "url": "hf://a/b", "engine": "VLLM", "resourceProfile": "cpu:1",
                  "minReplicas": 0}}


def _model(**spec) -> dict:
    return {**MODEL, "spec": {**MODEL["spec"], **spec}}


def _user_suite(tmp_path: Path, cases: list[dict], comment: str = "# my team's suite\n") -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "team.yaml").write_text(TEAM_POLICY)
    (tmp_path / "cluster").mkdir(exist_ok=True)
    (tmp_path / "cluster" / "quota.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "model-quota", "namespace": "team-a"},
         "data": {"maxReplicas": "3"}}))
    suite = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "PolicySuite", "name": "team",
             "policies": ["policies/team.yaml"],
             "state": ["cluster", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}],
             "namespace": "team-a", "cases": cases}
    path = tmp_path / "suite.yaml"
    path.write_text(comment + yaml.safe_dump(suite, sort_keys=False))
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    # the cases' expected objects are KubeAI v0.12.0 Models, its CRD's defaults applied
    code = main(["test", "--kubeai-crd", "v0.12.0", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


CASES = [
    {"name": "labelled-and-within-quota", "object": _model(maxReplicas=3),
     "userInfo": {"username": "alice", "groups": ["team-a"]},
     "expect": {"allowed": True, "warnings": [], "auditAnnotations": {"team-models.requester": "alice"},
                "patch": [{"op": "add", "path": "/metadata/labels", "value": {"team": "team-a"}}],
                "patched": {**_model(maxReplicas=3, scaleDownDelaySeconds=30, targetRequests=100),
                            "metadata": {"name": "m", "namespace": "team-a", "labels": {"team": "team-a"}}}}},
    {"name": "over-quota", "object": _model(maxReplicas=5),
     "expect": {"allowed": False, "code": 422, "reason": "Invalid",
                "errors": ["spec.maxReplicas: Invalid value: 5: the team quota is 3"],
                "message": r"^admission webhook \"validate.infergate.io\" denied the request: spec\.maxReplicas"}},
    {"name": "no-profile-warns", "object": {**MODEL, "spec": {k: v for k, v in MODEL["spec"].items()
                                                               if k != "resourceProfile"}},
     "expect": {"allowed": True, "warnings": ["no resourceProfile"]}},
    {"name": "delete-by-admin", "operation": "DELETE", "old": _model(),
     "userInfo": {"username": "root", "groups": ["admins"]}, "expect": {"allowed": True}},
    {"name": "delete-by-user", "operation": "DELETE", "old": _model(), "userInfo": {"username": "bob"},
     "expect": {"allowed": False, "reason": "Forbidden", "code": 403, "errorsMatch": ["^only admins"]}},
    {"name": "status-dry-run", "subresource": "status", "dryRun": True, "old": _model(), "object": _model(),
     "expect": {"allowed": True}},
    {"name": "status-write", "subresource": "status", "old": _model(), "object": _model(),
     "expect": {"allowed": False, "errors": ["status is written by the controller only (dry runs allowed)"]}},
    {"name": "other-namespace-has-no-quota", "namespace": "team-b", "object": _model(maxReplicas=50),
     "expect": {"allowed": True}},
]


def test_a_user_suite_exercises_every_request_field_and_expectation(tmp_path, capsys):
    suite = _user_suite(tmp_path, CASES)
    code, out, err = _run(capsys, str(suite), "--coverage")
    assert (code, err) == (0, ""), out
    assert out.strip().splitlines()[-1] == f"{len(CASES)} passed, 0 failed"
    assert "rule coverage: 6/6 rules hit (100%)" in out


def test_failures_are_explained_and_exit_1(tmp_path, capsys):
    wrong = [
        {"name": "wrong-verdict", "object": _model(maxReplicas=5), "expect": {"allowed": True}},
        {"name": "wrong-errors", "object": _model(maxReplicas=5),
         "expect": {"errors": ["spec.maxReplicas: Invalid value: 5: the team quota is 4"]}},
        {"name": "wrong-patched", "object": _model(), "expect": {"patched": _model()}},
        {"name": "wrong-warning", "object": _model(), "expect": {"warnings": ["no resourceProfile"]}},
    ]
    suite = _user_suite(tmp_path, wrong)
    code, out, _ = _run(capsys, str(suite))
    assert code == 1
    line = next(i for i, text in enumerate(suite.read_text().splitlines(), 1) if "wrong-verdict" in text)
    case_start = [i for i, text in enumerate(suite.read_text().splitlines(), 1) if text.startswith("- ")]
    line = max(i for i in case_start if i <= line)  # the case's first line
    assert f"FAIL {suite}:{line}: wrong-verdict\n    verdict: expected allowed, got denied: admission webhook" in out
    assert "errors: missing  spec.maxReplicas: Invalid value: 5: the team quota is 4" in out
    assert "errors: extra    spec.maxReplicas: Invalid value: 5: the team quota is 3" in out
    assert 'patched.metadata.labels: unexpected {"team": "team-a"}' in out
    assert "warnings: missing  no resourceProfile" in out
    assert out.strip().splitlines()[-1] == "0 passed, 4 failed"


def test_run_selects_cases_by_name(tmp_path, capsys):
    suite = _user_suite(tmp_path, CASES)
    code, out, _ = _run(capsys, str(suite), "--run", "^delete-")
    assert code == 0 and out.strip().splitlines()[-1] == "2 passed, 0 failed"
    assert _run(capsys, str(suite), "--run", "team/status")[1].strip().splitlines()[-1] == "2 passed, 0 failed"
    code, _, err = _run(capsys, str(suite), "--run", "nothing-like-this")
    assert code == 2 and "no case matches --run nothing-like-this" in err
    assert _run(capsys, str(suite), "--run", "(")[0] == 2


def test_junit_report(tmp_path, capsys):
    cases = [CASES[0], {"name": "fails", "object": _model(maxReplicas=5), "expect": {"allowed": True}}]
    code, out, err = _run(capsys, str(_user_suite(tmp_path, cases)), "-o", "junit")
    assert code == 1 and err.strip().splitlines()[-1] == "1 passed, 1 failed"
    root = ET.fromstring(out)
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "team"
    by_name = {c.get("name"): c for c in suite.findall("testcase")}
    assert by_name["labelled-and-within-quota"].find("failure") is None
    failure = by_name["fails"].find("failure")
    assert failure.get("message").startswith("verdict: expected allowed, got denied")


def test_junit_reports_a_broken_suite_as_an_error(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("apiVersion: policy.infergate.io/v1alpha1\nkind: PolicySuite\n"
                                       "cases:\n- name: x\n  expect: {allowd: true}\n")
    code, out, err = _run(capsys, str(tmp_path / "bad.yaml"), "-o", "junit")
    assert code == 2  # an input error
    assert f"{tmp_path / 'bad.yaml'}:5: cases[0].expect.allowd: Extra inputs are not permitted" in err
    error = ET.fromstring(out).find("testsuite/testcase/error")
    assert error is not None and "allowd" in error.text


def test_json_report_holds_answers_and_coverage(tmp_path, capsys):
    code, out, _ = _run(capsys, str(_user_suite(tmp_path, CASES[:2])), "-o", "json", "--coverage")
    report = json.loads(out)
    assert code == 0 and (report["passed"], report["failed"]) == (2, 0)
    first, second = report["suites"][0]["cases"]
    assert first["answer"]["object"]["metadata"]["labels"] == {"team": "team-a"}
    assert second["answer"]["status"]["code"] == 422
    hits = {e["rule"]: e["hits"] for e in report["coverage"]["entries"]}
    assert hits == {"mutations[0]": 2, "validations[0]": 0, "validations[1]": 1, "validations[2]": 0,
                    "warnings[0]": 0, "auditAnnotations.requester": 2}


def test_update_records_answers_and_keeps_comments_and_hand_written_checks(tmp_path, capsys):
    cases = [
        {"name": "to-record", "object": _model(maxReplicas=5)},
        {"name": "stale", "object": _model(), "expect": {"allowed": False, "code": 403}},
        {"name": "hand-written", "object": _model(maxReplicas=9), "expect": {"errorsMatch": ["quota is 3$"]}},
    ]
    suite = _user_suite(tmp_path, cases, comment="# my team's suite\n# keep this comment\n")
    code, out, _ = _run(capsys, str(suite), "--update")
    assert code == 0 and "recorded the answers of 2 case(s): to-record, stale" in out
    text = suite.read_text()
    assert text.startswith("# my team's suite\n# keep this comment\n")
    recorded = {c["name"]: c["expect"] for c in yaml.safe_load(text)["cases"]}
    assert recorded["to-record"] == {"allowed": False,
                                     "errors": ["spec.maxReplicas: Invalid value: 5: the team quota is 3"],
                                     "auditAnnotations": {"team-models.requester": "infergate-test"}}
    assert recorded["stale"]["allowed"] is True and "code" not in recorded["stale"]
    assert recorded["stale"]["patched"]["metadata"]["labels"] == {"team": "team-a"}
    assert recorded["hand-written"] == {"errorsMatch": ["quota is 3$"]}
    assert _run(capsys, str(suite))[0] == 0


def test_suite_errors_are_clear(tmp_path, capsys):
    base = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "PolicySuite",
            "cases": [{"name": "a", "object": MODEL}]}
    problems = {
        "policies: [missing.yaml]": "policies: ",
        "state: [nowhere]": "state: ",
        "crds: [nowhere]": "crds: ",
        "cases: [{name: a, object: {apiVersion: v1, kind: Namespace}}, {name: a, object: {apiVersion: v1, kind: Namespace}}]":
            "case names must be unique: a",
        "cases: [{name: a, object: {apiVersion: v1, kind: Namespace}, expect: {message: '('}}]":
            "invalid regular expression",
        "cases: [{name: a}]": "case 'a': object is required",
        "cases: [{name: a, operation: DELETE}]": "case 'a': a DELETE needs old",
        "cases: [{name: a, object: {metadata: {name: x}}}]": "case 'a': object needs apiVersion and kind",
    }
    for i, (override, wanted) in enumerate(problems.items()):
        path = tmp_path / f"s{i}.yaml"
        path.write_text(yaml.safe_dump({**base, **yaml.safe_load(override)}))
        code, _, err = _run(capsys, str(path))
        assert code == 2 and wanted in err and "Traceback" not in err, (override, err)
        assert err.startswith(f"infergate: error: {path}"), err


def test_the_suite_in_the_docs_is_the_example_file_and_passes(capsys):
    page = (REPO / "docs" / "policies.md").read_text()
    section = page[page.index("## Test your policies: policy suites"):]
    shown = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    example = REPO / "examples" / "policies" / "tests" / "production-min-replicas.yaml"
    assert yaml.safe_load(shown) == yaml.safe_load(example.read_text())
    code, out, _ = _run(capsys, str(example.parent), "--coverage")
    assert code == 0 and "rule coverage: 1/1 rules hit (100%)" in out
    assert out.strip().splitlines()[-1] == "3 passed, 0 failed"


def test_crd_only_leaves_the_policies_out(tmp_path, capsys):
    suite = _user_suite(tmp_path, [CASES[1]])  # denied by the team policy, not by the CRD
    code, out, _ = _run(capsys, str(suite), "--crd-only")
    assert code == 1 and "verdict: expected denied, got allowed" in out


FLOW_STYLE_CASE = """\
- name: written-in-flow-style  # passes: --update leaves it as written
  object: {apiVersion: inference.networking.k8s.io/v1, kind: InferencePool, metadata: {name: pool}, spec: {selector: {matchLabels: {app: "vllm"}}, targetPorts: [{number: 8000}], endpointPickerRef: {name: epp, port: {number: 9002}}}}
  expect: {allowed: true, warnings: []}
"""


def test_update_keeps_the_flow_style_of_cases_it_does_not_change(tmp_path, capsys):
    suite = _user_suite(tmp_path, [{"name": "to-record", "object": _model(maxReplicas=5)}])
    text = suite.read_text()
    assert text.endswith("cases:\n- name: to-record\n" + text.split("- name: to-record\n", 1)[1])
    cases_at = text.index("cases:\n") + len("cases:\n")
    suite.write_text(text[:cases_at] + FLOW_STYLE_CASE + text[cases_at:])
    assert _run(capsys, str(suite))[0] == 2  # the case without expect checks nothing until recorded
    code, out, _ = _run(capsys, str(suite), "--update")
    assert code == 0 and "recorded the answers of 1 case(s): to-record" in out
    updated = suite.read_text()
    assert FLOW_STYLE_CASE in updated  # byte for byte: braces, quotes, the comment
    assert yaml.safe_load(updated)["cases"][1]["expect"]["allowed"] is False
    assert _run(capsys, str(suite))[0] == 0
