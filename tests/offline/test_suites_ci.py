"""``infergate test`` in CI: every failing case names its file and line, in text, JUnit, GitHub
workflow commands and SARIF; a case that expects nothing is an error; ``--min-coverage`` is the
gate (``--coverage`` alone only informs)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [kubeai.org], kinds: [Model]}
  validations:
  - expression: object.spec.?maxReplicas.orValue(1) <= 3
    message: at most 3 replicas
  - expression: "!has(object.spec.owner)"
    message: no owner
"""

MODEL = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m"},
         "spec": {"features": ["TextGeneration"], "url": "hf://a/b", "engine": "VLLM", "minReplicas": 0}}


def _suite(tmp_path: Path, cases: list[dict]) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    suite = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "PolicySuite", "name": "replicas",
             "policies": ["policy.yaml"], "cases": cases}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def _case_line(path: Path, name: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line == f"- name: {name}")


PASSES = {"name": "passes", "object": {**MODEL, "spec": {**MODEL["spec"], "maxReplicas": 2}},
          "expect": {"allowed": True}}
FAILS = {"name": "fails", "object": {**MODEL, "spec": {**MODEL["spec"], "maxReplicas": 5}},
         "expect": {"allowed": True}}


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["test", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_failing_case_names_its_file_and_line_in_every_format(tmp_path, capsys):
    suite = _suite(tmp_path, [PASSES, FAILS])
    line = _case_line(suite, "fails")
    code, out, _ = _run(capsys, suite)
    assert code == 1 and f"FAIL {suite}:{line}: fails\n    verdict: expected allowed, got denied" in out

    code, out, _ = _run(capsys, suite, "-o", "github")
    (annotation,) = [text for text in out.splitlines() if text.startswith("::")]
    assert code == 1 and annotation.startswith(f"::error file={suite},line={line},title=fails::verdict: expected allowed")

    code, out, err = _run(capsys, suite, "-o", "junit")
    root = ET.fromstring(out)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert code == 1 and (root.get("tests"), root.get("failures")) == ("2", "1")
    assert cases["fails"].get("line") == str(line) and cases["fails"].get("file") == str(suite)
    assert cases["fails"].find("failure") is not None and cases["passes"].find("failure") is None
    assert err.strip().splitlines()[-1] == "1 passed, 1 failed"

    code, out, _ = _run(capsys, suite, "-o", "sarif")
    (result,) = json.loads(out)["runs"][0]["results"]
    assert result["ruleId"] == "case-failed"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": line}


def test_a_case_without_expect_is_an_error_unless_recorded(tmp_path, capsys):
    suite = _suite(tmp_path, [PASSES, {"name": "checks-nothing", "object": MODEL}])
    code, out, _ = _run(capsys, suite)
    assert code == 2
    assert f"ERROR {suite}:{_case_line(suite, 'checks-nothing')}: checks-nothing\n    no expect: " in out
    assert out.strip().splitlines()[-1] == "1 passed, 0 failed, 1 error"
    assert _run(capsys, suite, "--update")[0] == 0  # records the answer
    assert _run(capsys, suite)[0] == 0


def test_min_coverage_is_the_gate_and_coverage_alone_informs(tmp_path, capsys):
    suite = _suite(tmp_path, [PASSES, {**FAILS, "expect": {"allowed": False}}])  # "no owner" is never hit
    code, out, _ = _run(capsys, suite, "--coverage")
    assert code == 0 and "rule coverage: 1/2 rules hit (50%)" in out
    code, out, _ = _run(capsys, suite, "--min-coverage", "60")
    assert code == 1 and "rule coverage 50.0% is below --min-coverage 60%" in out
    code, out, _ = _run(capsys, suite, "--min-coverage", "50%")
    assert code == 0 and "rule coverage 50.0% is at least --min-coverage 50%" in out
    with pytest.raises(SystemExit) as usage:
        main(["test", str(suite), "--min-coverage", "150"])
    assert usage.value.code == 2
    assert "infergate: error: argument --min-coverage: a percentage is between 0 and 100" in capsys.readouterr().err
