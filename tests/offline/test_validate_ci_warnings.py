"""A new user's repository in CI: a typo'd apiVersion (``kubeai.org/v1beta1``) is a warning in
every CI format, ``--fail-on-warning`` makes warnings fail the run, ``--strict`` says each error in
one short line, JUnit's ``time`` carries the time each document took, and the apiserver's "some
validation rules were not checked" is no SARIF result of its own. Every format is read by a real
parser (``json``, ``xml.etree``, the workflow command grammar)."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from webhook.cli import main

# as a user writes them: one Model with the version of an old blog post, one right, one whose
# engine the CRD's enum does not have (the apiserver's schema error, then its "<nil>" cause)
TYPO = textwrap.dedent("""\
    # copied from an old blog post
    apiVersion: kubeai.org/v1beta1
    kind: Model
    metadata:
      name: qwen-chat
    spec:
      features: [TextGeneration]
      url: hf://Qwen/Qwen2.5-0.5B-Instruct
      engine: VLLM
      resourceProfile: cpu:1
    """)
GOOD = TYPO.replace("kubeai.org/v1beta1", "kubeai.org/v1").replace("qwen-chat", "qwen-good")
BAD_ENGINE = TYPO.replace("kubeai.org/v1beta1", "kubeai.org/v1").replace("engine: VLLM", "engine: vllm") \
    .replace("qwen-chat", "qwen-bad-engine")
NEAR_MISS = "Model/qwen-chat (kubeai.org/v1beta1): no schema for this kind; did you mean kubeai.org/v1?"
WORKFLOW_COMMAND = re.compile(r"^::(?P<command>error|warning|notice)(?: (?P<properties>[^:]*))?::(?P<message>.*)$")


@pytest.fixture
def repository(tmp_path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "chat.yaml").write_text(TYPO)
    (tmp_path / "models" / "good.yaml").write_text(GOOD)
    return tmp_path


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["validate", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _commands(out: str) -> list[dict[str, str]]:
    """The workflow commands of a log, as the runner parses them (properties ``k=v`` by ``,``)."""
    found = []
    for line in out.splitlines():
        match = WORKFLOW_COMMAND.match(line)
        if match is None:
            continue
        properties = dict(p.split("=", 1) for p in (match["properties"] or "").split(",") if p)
        found.append({"command": match["command"], **properties, "message": match["message"]})
    return found


def test_a_typo_in_the_api_version_is_a_github_warning_with_file_and_line(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "github")
    assert code == 0  # a warning: the CRD may be one the repository does not show
    chat = repository / "models" / "chat.yaml"
    warnings = [c for c in _commands(out) if c["command"] == "warning"]
    assert warnings == [{"command": "warning", "file": str(chat), "line": "2", "title": "Model/qwen-chat (near-miss)",
                         "message": NEAR_MISS}]
    assert f"{chat}:2: skipped {NEAR_MISS}" in out.splitlines()


def test_a_typo_in_the_api_version_is_a_sarif_warning(repository, capsys, monkeypatch):
    monkeypatch.chdir(repository)
    code, out, _ = _run(capsys, ".", "-o", "sarif")
    (run,) = json.loads(out)["runs"]
    assert code == 0
    (result,) = run["results"]
    assert (result["ruleId"], result["level"]) == ("near-miss", "warning")
    assert result["message"]["text"] == f"Model/qwen-chat: {NEAR_MISS}"
    assert result["locations"][0]["physicalLocation"] == {"artifactLocation": {"uri": "models/chat.yaml"},
                                                          "region": {"startLine": 2}}
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert rule["id"] == "near-miss" and "near miss" in rule["shortDescription"]["text"]


def test_a_typo_in_the_api_version_is_a_junit_skip_with_the_message(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "junit")
    root = ET.fromstring(out)
    assert code == 0 and root.get("skipped") == "1"
    (case,) = [c for c in root.iter("testcase") if c.get("name") == "Model/qwen-chat"]
    (skipped,) = case.findall("skipped")
    assert skipped.get("message") == NEAR_MISS and skipped.text == NEAR_MISS
    assert case.get("line") == "2"


def test_json_lists_the_near_miss_among_the_warnings(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "json")
    chat = next(r for r in json.loads(out) if r["source"]["file"].endswith("chat.yaml"))
    assert code == 0 and chat["result"] == "skipped" and chat["warnings"] == [NEAR_MISS]


def test_fail_on_warning_makes_any_warning_fail_the_run(repository, capsys):
    for output in ("text", "github", "sarif", "junit", "json"):
        assert _run(capsys, repository, "-o", output, "--fail-on-warning")[0] == 1, output
    # a policy's warning counts too: the removed v1alpha1 InferencePool
    (repository / "models" / "chat.yaml").unlink()
    (repository / "pool.yaml").write_text(textwrap.dedent("""\
        apiVersion: inference.networking.x-k8s.io/v1alpha1
        kind: InferencePool
        metadata: {name: pool}
        spec: {targetPortNumber: 8000, selector: {app: vllm}, extensionRef: {name: epp}}
        """))
    code, out, err = _run(capsys, repository)
    assert code == 0 and "Warning: " in err and "0 invalid" in out
    assert _run(capsys, repository, "--fail-on-warning")[0] == 1
    (repository / "pool.yaml").unlink()
    assert _run(capsys, repository, "--fail-on-warning")[0] == 0  # nothing warns: green
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--fail-on-warning" in help_text and "with --fail-on-warning, also any warning" in help_text


def test_strict_errors_are_one_short_line_each(repository, capsys):
    (repository / "widget.yaml").write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    code, out, err = _run(capsys, repository, "--strict")
    assert code == 2
    chat, widget = repository / "models" / "chat.yaml", repository / "widget.yaml"
    errors = [line for line in err.splitlines() if not line.startswith("note: ")]
    assert errors == [f"infergate: error: {chat}:2: {NEAR_MISS}",
                                f"infergate: error: {widget}:1: Widget/w (example.com/v1): no schema for this kind"]


def test_junit_time_is_the_time_each_document_took(repository, capsys):
    (repository / "models" / "bad.yaml").write_text(BAD_ENGINE)
    code, out, _ = _run(capsys, repository, "-o", "junit", "-j", "1")
    root = ET.fromstring(out)
    assert code == 1
    cases = {c.get("name"): float(c.get("time")) for c in root.iter("testcase")}
    assert set(cases) == {"Model/qwen-chat", "Model/qwen-good", "Model/qwen-bad-engine"}
    assert cases["Model/qwen-good"] > 0 and cases["Model/qwen-bad-engine"] > 0  # judged: schema, CEL, policies
    suites = list(root.iter("testsuite"))
    assert sum(float(s.get("time")) for s in suites) == pytest.approx(float(root.get("time")), abs=0.002)
    for suite in suites:
        times = [float(c.get("time")) for c in suite.iter("testcase")]
        assert float(suite.get("time")) == pytest.approx(sum(times), abs=0.002)


def test_a_schema_failure_the_apiserver_reports_once_is_one_sarif_result(tmp_path, capsys, monkeypatch):
    (tmp_path / "bad.yaml").write_text(BAD_ENGINE)
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "bad.yaml", "-o", "json")
    (answer,) = json.loads(out)
    causes = answer["status"]["details"]["causes"]
    assert code == 1 and [c["field"] for c in causes] == ["spec.engine", "<nil>"]  # as kube-apiserver answers
    assert "some validation rules were not checked" in causes[1]["message"]
    code, out, _ = _run(capsys, "bad.yaml", "-o", "sarif")
    (run,) = json.loads(out)["runs"]
    assert code == 1
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("kube-apiserver/FieldValueNotSupported", "error")]
    assert run["results"][0]["message"]["text"].startswith('Model/qwen-bad-engine: spec.engine: Unsupported value: "vllm"')
